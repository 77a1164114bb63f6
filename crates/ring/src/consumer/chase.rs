//! Lingering: a handler of a multi-producer ring that keeps catching up with
//! its producers lets them get ahead before it reads on, when that is what
//! holds them back.
//!
//! ## Why
//! A consumer right behind its producers reads each slot's cache line while
//! they are still writing the rest of it. Every producer's claim is a locked
//! compare-and-swap, which waits for the producer's earlier stores to land:
//! after the consumer's read, the next store into that line must first take
//! the line back from the consumer's core. Chasing, the consumer costs each
//! published event a cross-core round trip. Measured on 2 vCPUs with three
//! producers publishing single events: about 23 M events/s chasing, 55-65
//! lingering up to 4 µs, and crossbeam-channel 30-60 in the same runs.
//! (A single producer publishes with plain stores, which the store buffer
//! hides, and its consumers poll range ends rather than slots: no linger.)
//!
//! ## When
//! Lingering costs latency (an event waits up to the ring's `linger`), and
//! it only pays when the consumer really slows its producers, which the
//! consumer cannot see directly. So it measures:
//! * It counts events and batches in windows of at least [`MIN_WINDOW`]
//!   (one clock read per [`WINDOW`] batches). A window whose batches
//!   average fewer than [`SHORT_BATCH`] events at more than [`MIN_RATE`]
//!   events/µs says the consumer is right behind busy producers.
//! * After such a window it tries one window of lingering: a consumer that
//!   finds nothing to read polls the stamp of the event [`AHEAD`] events on
//!   (a line no producer writes yet, so polling it disturbs nobody) until
//!   that event is published or `linger` has passed, then reads as usual.
//! * If the producers published at least [`GAIN`] times faster while it
//!   lingered, it keeps lingering, and measures a plain window again every
//!   [`RECHECK`] windows. If not, it stops, and waits twice as many windows
//!   (up to [`MAX_BACKOFF`]) before it tries again.
//!
//! Sparse or moderate streams so keep the latency of a plain wait, except
//! for the rare trial window; producers held back by the consumer's reads
//! get their speed. Lingering only delays a read: what is read, and the
//! memory ordering that makes it visible, are those of
//! [`Shared::available_for`].

use std::time::{Duration, Instant};

use crate::producer::ProducerKind;
use crate::shared::Shared;
use crate::sync::{spin_loop, AtomicU8, Ordering};
use crate::wait::WaitStrategy;

/// Batches between two clock reads.
pub(crate) const WINDOW: u32 = 32;
/// The least a measuring window lasts: long enough to average over the
/// producers' bursts and the scheduler's slices.
pub(crate) const MIN_WINDOW: Duration = Duration::from_micros(100);
/// Windows whose batches average fewer events than this may be chasing.
pub(crate) const SHORT_BATCH: u64 = 32;
/// Events per microsecond below which the producers are not busy enough
/// for lingering to be worth a trial (5 M events/s).
pub(crate) const MIN_RATE: f64 = 5.0;
/// How much faster the producers must publish while the consumer lingers
/// for it to go on lingering. (With 1.25 and backoffs up to 1,024 windows,
/// trials that fell in a bad scheduling phase on 2 vCPUs kept lingering
/// off for long stretches: 3p1c single 35-55 M events/s instead of 55-63.)
pub(crate) const GAIN: f64 = 1.1;
/// Lingering windows between two plain windows that check it still pays.
pub(crate) const RECHECK: u32 = 16;
/// The most windows between two trials that did not pay.
pub(crate) const MAX_BACKOFF: u32 = 16;
/// How far ahead the probe looks (at most half the ring).
pub(crate) const AHEAD: u64 = 1024;
/// Spins between two clock reads while lingering.
const SPINS_PER_CLOCK: u32 = 16;

/// One handler's lingering state.
#[derive(Debug)]
pub(crate) struct Chase {
    /// The most a linger lasts; zero when this consumer never lingers.
    linger: Duration,
    /// How far ahead the probe looks.
    ahead: u64,
    /// Linger in this window.
    on: bool,
    /// When the current window started (None: at the next batch).
    since: Option<Instant>,
    /// Events and batches in the current window.
    events: u64,
    batches: u64,
    /// Events per µs of the last plain window that was chasing.
    plain_rate: f64,
    /// Lingering windows left before the next plain check.
    until_check: u32,
    /// Plain windows left before the next trial, and the current backoff.
    until_trial: u32,
    backoff: u32,
}

impl Chase {
    /// The state of consumer `idx`: it may linger only in a multi-producer
    /// ring, with no dependencies (a dependent waits on another consumer,
    /// not on the producers' lines), a ring of at least 16 slots, a non-zero
    /// `linger`, and not under loom (a time-bounded spin is no model).
    pub(crate) fn new<T, W: WaitStrategy, K: ProducerKind>(
        ring: &Shared<T, W, K>,
        idx: usize,
    ) -> Self {
        let ahead = AHEAD.min(ring.capacity / 2);
        let able = K::MULTI
            && !cfg!(loom)
            && ring.consumers[idx].deps.is_empty()
            && ahead >= 8
            && !ring.linger.is_zero();
        Self::with(if able { ring.linger } else { Duration::ZERO }, ahead)
    }

    /// A consumer that lingers at most `linger` (zero: never), probing
    /// `ahead` events on; not lingering yet.
    fn with(linger: Duration, ahead: u64) -> Self {
        Self {
            linger,
            ahead,
            on: false,
            since: None,
            events: 0,
            batches: 0,
            plain_rate: 0.0,
            until_check: 0,
            until_trial: 0,
            backoff: 1,
        }
    }

    /// Whether the consumer should linger before waiting.
    #[inline]
    pub(crate) fn lingers(&self) -> bool {
        self.on
    }

    /// Spins until event `next + ahead` is published or the linger time has
    /// passed.
    #[cold]
    pub(crate) fn linger<T, W: WaitStrategy, K: ProducerKind>(
        &self,
        ring: &Shared<T, W, K>,
        next: u64,
    ) {
        let probe = next + self.ahead;
        let start = Instant::now();
        let mut spins = 0u32;
        while !ring.published_at(probe) {
            spin_loop();
            spins = spins.wrapping_add(1);
            if spins % SPINS_PER_CLOCK == 0 && start.elapsed() >= self.linger {
                break;
            }
        }
    }

    /// Counts a batch of `len` events; at the end of a window, decides
    /// whether the next one lingers.
    #[inline]
    pub(crate) fn batch(&mut self, len: u64, lingering: &AtomicU8) {
        if self.linger.is_zero() {
            return;
        }
        if self.since.is_none() {
            self.since = Some(Instant::now());
            return;
        }
        self.events += len;
        self.batches += 1;
        if self.batches % u64::from(WINDOW) == 0 {
            self.window_done(lingering);
        }
    }

    #[cold]
    fn window_done(&mut self, lingering: &AtomicU8) {
        let now = Instant::now();
        let elapsed = self.since.map_or(Duration::ZERO, |t| now.duration_since(t));
        if elapsed < MIN_WINDOW {
            return;
        }
        let was = self.on;
        self.judge(self.events, self.batches, elapsed.as_secs_f64() * 1e6);
        if self.on != was {
            // Relaxed: a figure for `Monitor::stats`; it orders nothing.
            lingering.store(u8::from(self.on), Ordering::Relaxed);
        }
        self.since = Some(now);
        self.events = 0;
        self.batches = 0;
    }

    /// Decides whether the next window lingers, from this one's `events`
    /// in `batches` over `micros`.
    fn judge(&mut self, events: u64, batches: u64, micros: f64) {
        let rate = if micros > 0.0 {
            events as f64 / micros
        } else {
            0.0
        };
        let chasing = events < SHORT_BATCH * batches && rate > MIN_RATE;
        if self.on {
            if rate < GAIN * self.plain_rate {
                // It did not pay: back off before the next trial.
                self.on = false;
                self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
                self.until_trial = self.backoff;
            } else if self.until_check == 0 {
                // It pays; measure a plain window again now and then.
                self.on = false;
                self.until_trial = 0;
                self.backoff = 1;
            } else {
                self.until_check -= 1;
            }
        } else if chasing {
            self.plain_rate = rate;
            if self.until_trial == 0 {
                self.on = true;
                self.until_check = RECHECK;
            } else {
                self.until_trial -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn able() -> Chase {
        Chase::with(Duration::from_micros(4), AHEAD)
    }

    /// A window of `rate` events/µs in batches of `batch` over 100 µs.
    fn window(c: &mut Chase, batch: u64, rate: f64) {
        let events = (rate * 100.0) as u64;
        c.judge(events, (events / batch).max(1), 100.0);
    }

    #[test]
    fn dense_short_batches_start_a_trial() {
        let mut c = able();
        window(&mut c, 2, 25.0);
        assert!(c.on, "chasing busy producers: try lingering");
    }

    #[test]
    fn long_batches_or_sparse_events_never_linger() {
        let mut c = able();
        for _ in 0..100 {
            window(&mut c, 64, 25.0); // the consumer lags: it reads whole lines
            window(&mut c, 1, 1.0); // 1 M events/s: nobody is held back
        }
        assert!(!c.on);
    }

    #[test]
    fn a_trial_that_pays_goes_on_and_is_rechecked() {
        let mut c = able();
        window(&mut c, 2, 25.0);
        for _ in 0..RECHECK {
            window(&mut c, 200, 60.0);
            assert!(c.on, "2.4x faster while lingering: keep it");
        }
        window(&mut c, 200, 60.0);
        assert!(!c.on, "every RECHECK windows, one plain window");
        window(&mut c, 2, 25.0);
        assert!(c.on, "still chasing when plain: linger again at once");
    }

    #[test]
    fn a_trial_that_does_not_pay_backs_off_doubling_to_a_bound() {
        let mut c = able();
        let mut gaps = Vec::new();
        window(&mut c, 2, 10.0);
        for _ in 0..8 {
            assert!(c.on);
            window(&mut c, 8, 10.0); // producer-bound: no faster lingering
            assert!(!c.on);
            let mut plain = 0;
            while !c.on {
                window(&mut c, 2, 10.0);
                plain += 1;
            }
            gaps.push(plain - 1);
        }
        assert_eq!(gaps, [2, 4, 8, 16, 16, 16, 16, 16]);
    }
}
