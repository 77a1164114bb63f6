//! Wait strategies: what a consumer does while it waits for events, and what a
//! producer does while it waits for space.
//!
//! A strategy is a type parameter of the ring, so its hot-path hook
//! ([`WaitStrategy::notify`], called after every publish and after every
//! consumed batch) is inlined; for the spinning strategies it compiles to
//! nothing.
//!
//! | strategy | waiting thread | cost to the notifier | use when |
//! |---|---|---|---|
//! | [`BusySpin`] | spins on the cursor | none | every thread has a core of its own |
//! | [`SpinYield`] | spins, then `yield_now` | none | a few more threads than cores |
//! | [`Blocking`] | sleeps on a condvar | a `SeqCst` fence and a load | latency matters less than CPU |
//! | [`Adaptive`] (default) | spins briefly, yields, then sleeps with a short timeout | one relaxed load | you don't know the core count |
//!
//! ## Memory ordering of the sleep protocol ([`Blocking`], [`Adaptive`])
//! Waiter: (1) `sleepers += 1` (SeqCst), (2) `fence(SeqCst)`, (3) lock,
//! (4) re-check the condition, (5) `wait_timeout` (atomically unlocks).
//! Notifier: (a) publish its progress with a Release store, (b) `fence(SeqCst)`
//! ([`Blocking`] only), (c) load `sleepers`, (d) if non-zero: swap it to 0
//! and, if it was still non-zero, lock and `notify_all`. Resetting the count
//! makes a burst of publishes pay one wake-up, not one each.
//! With both fences, either (c) sees the waiter or (4) sees the progress, so
//! no wake-up is lost. [`Adaptive`] skips (b) to keep publishing cheap; the
//! rare lost wake-up then costs at most its park timeout (≤ 1 ms), never a
//! hang.

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::{fence, spin_loop, yield_now, AtomicUsize, Condvar, Mutex, Ordering};

/// How threads wait for progress on the ring.
///
/// Implementations must return from [`wait_until`](Self::wait_until) only when
/// `ready()` returned `true` or the deadline passed, and must call `ready()`
/// again after any sleep: they may never assume progress without checking it.
pub trait WaitStrategy: Send + Sync + 'static {
    /// Waits until `ready()` returns `true` (returns `true`) or `deadline`
    /// passes (returns `false`).
    fn wait_until<F: FnMut() -> bool>(&self, deadline: Option<Instant>, ready: F) -> bool;

    /// Called after every publish and every consumed batch; wakes sleepers.
    fn notify(&self);

    /// How long a consumer waits for an event before its handler's
    /// `on_timeout` runs; `None` waits indefinitely.
    fn consumer_timeout(&self) -> Option<Duration> {
        None
    }

    /// A short name for reports, such as `"adaptive"`.
    fn name(&self) -> &'static str;
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// Spins on the condition; never yields the core.
///
/// The fastest hand-off when every ring thread owns a core, and a collapse
/// when threads outnumber cores: the spinning thread burns the time slice the
/// thread it waits for needs.
#[derive(Debug, Default, Clone, Copy)]
pub struct BusySpin;

impl WaitStrategy for BusySpin {
    #[inline]
    fn wait_until<F: FnMut() -> bool>(&self, deadline: Option<Instant>, mut ready: F) -> bool {
        let mut round: u32 = 0;
        loop {
            if ready() {
                return true;
            }
            round = round.wrapping_add(1);
            if round % 1024 == 0 && past(deadline) {
                return false;
            }
            if cfg!(loom) {
                yield_now();
            } else {
                spin_loop();
            }
        }
    }

    #[inline(always)]
    fn notify(&self) {}

    fn name(&self) -> &'static str {
        "busy-spin"
    }
}

/// Spins `spins` times, then yields the core between checks.
#[derive(Debug, Clone, Copy)]
pub struct SpinYield {
    spins: u32,
}

impl SpinYield {
    /// Spins `spins` times before it starts yielding.
    pub fn new(spins: u32) -> Self {
        Self { spins }
    }
}

impl Default for SpinYield {
    fn default() -> Self {
        Self::new(100)
    }
}

impl WaitStrategy for SpinYield {
    #[inline]
    fn wait_until<F: FnMut() -> bool>(&self, deadline: Option<Instant>, mut ready: F) -> bool {
        let mut round: u32 = 0;
        loop {
            if ready() {
                return true;
            }
            if round < self.spins && !cfg!(loom) {
                spin_loop();
            } else {
                if past(deadline) {
                    return false;
                }
                yield_now();
            }
            round = round.saturating_add(1);
        }
    }

    #[inline(always)]
    fn notify(&self) {}

    fn name(&self) -> &'static str {
        "spin-yield"
    }
}

/// Sleepers registered on a condvar; shared by [`Blocking`] and [`Adaptive`].
/// Kept on cache lines of their own (`CachePadded` where used): parking
/// writes the lock, which must not evict the ring's read-mostly fields.
#[derive(Debug, Default)]
struct Sleepers {
    count: AtomicUsize,
    lock: Mutex<()>,
    cond: Condvar,
}

impl Sleepers {
    /// Sleeps once, for at most `timeout`, unless `ready()` already holds.
    fn sleep<F: FnMut() -> bool>(&self, timeout: Duration, ready: &mut F) -> bool {
        // SeqCst: step (1) of the sleep protocol in the module docs; pairs
        // with the notifier's load of `count` in `wake` (step c).
        self.count.fetch_add(1, Ordering::SeqCst);
        // SeqCst fence: step (2); pairs with the notifier's fence (step b).
        fence(Ordering::SeqCst);
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let ok = ready();
        if !ok {
            if cfg!(loom) {
                drop(guard);
                yield_now();
            } else {
                let _unused = self.cond.wait_timeout(guard, timeout);
            }
        }
        // No decrement: the notifier that wakes us resets the count, so a
        // producer publishing at full speed pays one wake-up per sleep, not
        // one per event until we are scheduled again. A sleeper that timed
        // out leaves the count up: one later notifier pays a spurious wake.
        ok
    }

    #[inline(always)]
    fn wake(&self, with_fence: bool) {
        if with_fence {
            // SeqCst fence: step (b); pairs with the waiter's fence (step 2).
            fence(Ordering::SeqCst);
        }
        if self.count.load(Ordering::Relaxed) != 0 {
            self.wake_slow();
        }
    }

    #[cold]
    fn wake_slow(&self) {
        // AcqRel: only the notifier that takes the count to 0 wakes; a
        // sleeper registering after the swap is seen by the next notifier.
        if self.count.swap(0, Ordering::AcqRel) != 0 {
            let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cond.notify_all();
        }
    }
}

/// Sleeps on a condvar until notified; optionally times out consumers.
///
/// Uses no CPU while it waits. Every publish pays a `SeqCst` fence so that no
/// wake-up is lost (see the module docs).
#[derive(Debug, Default)]
pub struct Blocking {
    sleepers: CachePadded<Sleepers>,
    timeout: Option<Duration>,
}

impl Blocking {
    /// A blocking strategy without a consumer timeout.
    pub fn new() -> Self {
        Self::default()
    }

    /// A blocking strategy whose consumers call their handler's `on_timeout`
    /// after `timeout` without an event.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            sleepers: CachePadded::default(),
            timeout: Some(timeout),
        }
    }
}

/// The longest a [`Blocking`] waiter sleeps between checks of its deadline.
const BLOCKING_SLICE: Duration = Duration::from_millis(100);

impl WaitStrategy for Blocking {
    fn wait_until<F: FnMut() -> bool>(&self, deadline: Option<Instant>, mut ready: F) -> bool {
        loop {
            if ready() {
                return true;
            }
            let slice = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    (d - now).min(BLOCKING_SLICE)
                }
                None => BLOCKING_SLICE,
            };
            if self.sleepers.sleep(slice, &mut ready) {
                return true;
            }
        }
    }

    #[inline(always)]
    fn notify(&self) {
        self.sleepers.wake(true);
    }

    fn consumer_timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn name(&self) -> &'static str {
        "blocking"
    }
}

/// The default: spin briefly, then yield, then sleep with a short, growing
/// timeout.
///
/// Stays close to [`BusySpin`] when every thread has a core, and degrades
/// gracefully when threads outnumber cores (the yield and sleep phases hand
/// the core to the thread being waited for). Publishing costs one relaxed
/// load of a read-mostly cache line.
#[derive(Debug)]
pub struct Adaptive {
    spins: u32,
    yields: u32,
    max_park: Duration,
    sleepers: CachePadded<Sleepers>,
}

impl Adaptive {
    /// Spins `spins` times, yields `yields` times, then sleeps for at most
    /// `max_park` between checks.
    pub fn new(spins: u32, yields: u32, max_park: Duration) -> Self {
        Self {
            spins,
            yields,
            max_park: max_park.max(Duration::from_micros(1)),
            sleepers: CachePadded::default(),
        }
    }
}

/// The longest spin between two checks of an [`Adaptive`] waiter: 2^4
/// pauses, well under a microsecond.
const SPIN_SHIFT: u32 = 4;

impl Default for Adaptive {
    fn default() -> Self {
        Self::new(128, 32, Duration::from_millis(1))
    }
}

impl WaitStrategy for Adaptive {
    #[inline]
    fn wait_until<F: FnMut() -> bool>(&self, deadline: Option<Instant>, mut ready: F) -> bool {
        let mut round: u32 = 0;
        let mut park = Duration::from_micros(20);
        loop {
            if ready() {
                return true;
            }
            if round < self.spins && !cfg!(loom) {
                // Back off exponentially (up to 2^SPIN_SHIFT pauses): a waiter
                // that re-reads the line the producer is writing steals it on
                // every event; spacing the reads lets events accumulate into
                // a batch at a small, bounded cost in latency.
                for _ in 0..1u32 << round.min(SPIN_SHIFT) {
                    spin_loop();
                }
            } else if round < self.spins + self.yields {
                if past(deadline) {
                    return false;
                }
                yield_now();
            } else {
                let slice = match deadline {
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return false;
                        }
                        (d - now).min(park)
                    }
                    None => park,
                };
                if self.sleepers.sleep(slice, &mut ready) {
                    return true;
                }
                park = (park * 2).min(self.max_park);
            }
            round = round.saturating_add(1);
        }
    }

    #[inline(always)]
    fn notify(&self) {
        self.sleepers.wake(false);
    }

    fn name(&self) -> &'static str {
        "adaptive"
    }
}
