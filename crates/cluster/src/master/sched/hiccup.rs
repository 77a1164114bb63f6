//! The longest pause a live worker has shown lately, so that a loaded
//! host's pause is not taken for a stopped process.
//!
//! A worker owing an answer during an evolve that falls silent for twice
//! `Deadlines::quiet` (150 ms) is dropped as stopped (`straggle.rs`). A
//! worker that runs can pause that long on a loaded host (oversubscribed
//! CPUs, a VM's steal time, a user-space network path): dropping it costs
//! the run a worker for good, though its loss is recovered with the same
//! bits. So the master notes, during each operation, the gap before every
//! frame from a heartbeating worker (since its frame before, or since the
//! operation started) and keeps the longest of the current [`WINDOW`] and
//! the one before it, all workers together. A silence is taken for a stop only
//! once it is also [`HICCUP_FACTOR`] times that gap. On a quiet cluster the
//! gaps are about a heartbeat (25 ms) and the bound stays 150 ms; after a
//! worker paused for 120 ms it is 240 ms for the next 10 to 20 s. The
//! silence deadline (1.5 s) drops any silent worker regardless.
//!
//! This is the idea of "The φ Accrual Failure Detector" (Hayashibara,
//! Défago, Yared, Katayama, 2004,
//! <http://www.jaist.ac.jp/~defago/files/pdf/IS_RR_2004_010.pdf>): a
//! suspicion scaled to the silences the system has shown, reduced here
//! to their maximum, which a single pause moves at once.

use std::time::{Duration, Instant};

/// How long a pause is remembered: one to two of these (fixed windows).
pub(super) const WINDOW: Duration = Duration::from_secs(10);

/// A silence this many times the longest recent pause (and at least the
/// fixed bound) is taken for a stopped process.
pub(super) const HICCUP_FACTOR: u32 = 2;

/// The longest gap between frames from one worker, over the current
/// window and the one before it (windows of [`WINDOW`] from the first gap
/// noted, so what counts is at most two windows old).
#[derive(Debug, Default, Clone)]
pub(super) struct Hiccups {
    /// When the first gap was noted: windows count from here.
    origin: Option<Instant>,
    /// The number of the current window.
    window: u64,
    /// The longest gap noted in the current window.
    cur: Duration,
    /// The longest gap noted in the window before it.
    prev: Duration,
}

impl Hiccups {
    fn index(origin: Instant, now: Instant) -> u64 {
        let n = now.saturating_duration_since(origin).as_nanos() / WINDOW.as_nanos();
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// Notes a gap of `gap` ending at `now`.
    pub(super) fn note(&mut self, gap: Duration, now: Instant) {
        let origin = *self.origin.get_or_insert(now);
        let k = Self::index(origin, now);
        if k > self.window {
            self.prev = if k == self.window + 1 {
                self.cur
            } else {
                Duration::ZERO
            };
            self.cur = Duration::ZERO;
            self.window = k;
        }
        self.cur = self.cur.max(gap);
    }

    /// The longest gap noted in this window and the one before, as of
    /// `now`.
    pub(super) fn longest(&self, now: Instant) -> Duration {
        let Some(origin) = self.origin else {
            return Duration::ZERO;
        };
        match Self::index(origin, now).saturating_sub(self.window) {
            0 => self.cur.max(self.prev),
            1 => self.cur,
            _ => Duration::ZERO,
        }
    }

    /// The silence after which a worker owing an answer is taken for
    /// stopped: `fixed`, or [`HICCUP_FACTOR`] × the longest recent pause
    /// if that is longer.
    pub(super) fn stop_bound(&self, fixed: Duration, now: Instant) -> Duration {
        fixed.max(self.longest(now) * HICCUP_FACTOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_pause_raises_the_bound_for_one_to_two_windows() {
        let t0 = Instant::now();
        let mut h = Hiccups::default();
        assert_eq!(h.stop_bound(150 * MS, t0), 150 * MS);
        h.note(25 * MS, t0);
        assert_eq!(h.stop_bound(150 * MS, t0), 150 * MS, "a heartbeat's gap");
        h.note(120 * MS, t0 + 1000 * MS);
        assert_eq!(h.stop_bound(150 * MS, t0 + 1000 * MS), 240 * MS);
        // The next window still remembers it...
        h.note(25 * MS, t0 + WINDOW + MS);
        assert_eq!(h.longest(t0 + WINDOW + MS), 120 * MS);
        assert_eq!(h.longest(t0 + WINDOW * 2 - MS), 120 * MS);
        // ... the one after that does not.
        assert_eq!(h.longest(t0 + WINDOW * 2 + MS * 2), 25 * MS);
        h.note(30 * MS, t0 + WINDOW * 2 + MS * 2);
        assert_eq!(h.longest(t0 + WINDOW * 2 + MS * 2), 30 * MS);
        assert_eq!(h.stop_bound(150 * MS, t0 + WINDOW * 2 + MS * 2), 150 * MS);
    }

    #[test]
    fn a_long_quiet_forgets_everything() {
        let t0 = Instant::now();
        let mut h = Hiccups::default();
        h.note(400 * MS, t0);
        assert_eq!(h.longest(t0 + WINDOW), 400 * MS);
        assert_eq!(h.longest(t0 + WINDOW * 2), Duration::ZERO);
        h.note(10 * MS, t0 + WINDOW * 3);
        assert_eq!(h.longest(t0 + WINDOW * 3), 10 * MS);
    }

    proptest::proptest! {
        /// Against a model that keeps every gap: `longest` is at least
        /// every gap noted within the last window, and never more than
        /// the longest noted within the last two.
        #[test]
        fn longest_lies_between_the_last_window_and_the_last_two(
            steps in proptest::collection::vec((0u64..6_000, 0u64..500), 1..200),
        ) {
            let t0 = Instant::now();
            let mut h = Hiccups::default();
            let mut all = Vec::new();
            let mut t = t0;
            for (dt, gap) in steps {
                t += Duration::from_millis(dt);
                h.note(Duration::from_millis(gap), t);
                all.push((t, Duration::from_millis(gap)));
                let got = h.longest(t);
                let within = |w: Duration| {
                    all.iter()
                        .filter(|(at, _)| t.saturating_duration_since(*at) < w)
                        .map(|(_, g)| *g)
                        .max()
                        .unwrap_or_default()
                };
                proptest::prop_assert!(got >= within(WINDOW), "{got:?}");
                proptest::prop_assert!(got <= within(WINDOW * 2), "{got:?}");
            }
        }
    }
}
