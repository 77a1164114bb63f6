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
//! Waiter: (0) lock, (1) `sleepers += 1` (SeqCst), (2) `fence(SeqCst)`,
//! (4) re-check the condition, (5) `wait_timeout` (atomically unlocks).
//! Notifier: (a) publish its progress with a Release store, (b) `fence(SeqCst)`
//! ([`Blocking`] only), (c) load `sleepers`, (d) if non-zero: lock, swap it
//! to 0 and, if it was still non-zero, `notify_all`. Resetting the count
//! makes a burst of publishes pay one wake-up, not one each; doing it under
//! the lock means every sleeper it resets is already waiting.
//! With both fences, either (c) sees the waiter or (4) sees the progress, so
//! no wake-up is lost. [`Adaptive`] skips (b) to keep publishing cheap; the
//! rare lost wake-up then costs at most its park timeout (≤ 1 ms), never a
//! hang.

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::{fence, spin_loop, yield_now, AtomicU32, AtomicUsize, Condvar, Mutex, Ordering};

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
            }
            // No `pause`: this strategy is for threads that own a core, where
            // a pause only delays noticing the event by its ~40-140 cycles.
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
        // Registered under the lock, and held until `wait_timeout` releases
        // it: a notifier that resets the count (under the same lock) can only
        // reset sleepers that are already waiting, and so are woken.
        let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SeqCst: step (1) of the sleep protocol in the module docs; pairs
        // with the notifier's load of `count` in `wake` (step c).
        self.count.fetch_add(1, Ordering::SeqCst);
        // SeqCst fence: step (2); pairs with the notifier's fence (step b).
        fence(Ordering::SeqCst);
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
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // AcqRel, under the lock: every sleeper counted here is waiting (it
        // registers and waits under this lock), so `notify_all` reaches it;
        // one registering after the swap is seen by the next notifier.
        if self.count.swap(0, Ordering::AcqRel) != 0 {
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

/// The default: spin, then yield, then sleep with a short, growing timeout;
/// how long it spins adapts to what spinning has been worth.
///
/// The spin budget (in rounds of one `pause`) is shared by the ring's
/// waiters and learned like an adaptive mutex's. It doubles (up to
/// `max_spins`) when a wait ends late in its spin phase, or during the yield
/// phase while yields come straight back (no other thread wanted the core:
/// spinning a little longer was free). It halves (down to `min_spins`) when a
/// yield took long (another thread ran: the core is oversubscribed and
/// spinning steals its time) or when the wait had to sleep. When every
/// thread has a core, waits end while spinning and latency stays at
/// [`BusySpin`]'s; when threads outnumber cores, the waiter hands its core
/// over almost at once. Publishing costs one relaxed load of a
/// read-mostly cache line.
#[derive(Debug)]
pub struct Adaptive {
    min_spins: u32,
    max_spins: u32,
    yields: u32,
    max_park: Duration,
    budget: CachePadded<AtomicU32>,
    sleepers: CachePadded<Sleepers>,
}

impl Adaptive {
    /// Spins between `min_spins` and `max_spins` rounds (learned), yields
    /// `yields` times, then sleeps for at most `max_park` between checks.
    pub fn new(min_spins: u32, max_spins: u32, yields: u32, max_park: Duration) -> Self {
        let max_spins = max_spins.max(min_spins);
        Self {
            min_spins,
            max_spins,
            yields,
            max_park: max_park.max(Duration::from_micros(1)),
            budget: CachePadded::new(AtomicU32::new(min_spins.max(128).min(max_spins))),
            sleepers: CachePadded::default(),
        }
    }

    /// Adjusts the budget after a wait of `spins` that ended at `round`;
    /// `crowded`: a yield handed the core to another thread.
    fn learn(&self, spins: u32, round: u32, crowded: bool) {
        let grow = if round < spins {
            round > spins / 2
        } else {
            round < spins + self.yields && !crowded
        };
        let shrink = !grow && round >= spins;
        let next = if grow {
            spins.saturating_mul(2).max(1).min(self.max_spins)
        } else if shrink {
            (spins / 2).max(self.min_spins)
        } else {
            return;
        };
        if next != spins {
            // Relaxed: a tuning hint; any value in range is correct.
            self.budget.store(next, Ordering::Relaxed);
        }
    }
}

/// A `yield_now` that returns later than this ran another thread.
const CROWDED_YIELD: Duration = Duration::from_micros(20);

impl Default for Adaptive {
    fn default() -> Self {
        Self::new(16, 4096, 32, Duration::from_millis(1))
    }
}

impl WaitStrategy for Adaptive {
    #[inline]
    fn wait_until<F: FnMut() -> bool>(&self, deadline: Option<Instant>, mut ready: F) -> bool {
        if ready() {
            return true;
        }
        // Relaxed: a tuning hint.
        let spins = if cfg!(loom) {
            0
        } else {
            self.budget.load(Ordering::Relaxed)
        };
        let mut round: u32 = 0;
        let mut park = Duration::from_micros(20);
        let mut crowded = false;
        loop {
            if round < spins {
                spin_loop();
            } else if round < spins + self.yields {
                let before = Instant::now();
                if deadline.is_some_and(|d| before >= d) {
                    self.learn(spins, round, crowded);
                    return false;
                }
                yield_now();
                // A yield that kept us off the core this long ran someone
                // else: the core is wanted.
                crowded |= before.elapsed() > CROWDED_YIELD;
            } else {
                let slice = match deadline {
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            self.learn(spins, round, crowded);
                            return false;
                        }
                        (d - now).min(park)
                    }
                    None => park,
                };
                if self.sleepers.sleep(slice, &mut ready) {
                    self.learn(spins, round, crowded);
                    return true;
                }
                park = (park * 2).min(self.max_park);
            }
            round = round.saturating_add(1);
            if ready() {
                self.learn(spins, round, crowded);
                return true;
            }
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
