//! How many threads a step in process is worth: one per so much of its
//! evolve calls' time, a larger share while the time comes from a run's
//! first, cold step; never more than the CPUs the process may use.

use std::time::Duration;

/// The least evolve time each thread must get in a step for a step (or
/// [`Auto`](crate::Auto)) to use more than one thread in process. Below it a thread
/// saves less than it costs: its share is forked to a pool thread and
/// joined every step (a wake-up and a cache's worth of misses). On the
/// 2-vCPU VM a second thread already paid with about 70 µs of the Nile
/// filter's calls each (20,000 particles: 1.15-1.25x), and clearly from
/// 40,000 particles (1.4-1.9x); 100 µs leaves a margin for machines where
/// a hand-off costs more. With 500 µs, the bound before, the filter kept
/// one thread up to 100,000 particles and gained nothing from the second
/// CPU (bench/results/pf-threads-run1). A thread that has not started its
/// share when the others finish theirs leaves it to them, so a busy CPU
/// costs a step little.
const MIN_THREAD_SHARE: Duration = Duration::from_micros(100);

/// [`MIN_THREAD_SHARE`] for a step timed only by a run's first step (its
/// probe, or the whole first step): cold timings (the first touch of every
/// buffer, code and caches not yet warm) overstate the calls several
/// times, and the first spread also starts the pool's threads, once per
/// process. With the warm bound there too, the filter's whole command took
/// 6.1 ms instead of 5.4 at 2,000 particles and 15.4 instead of 14.0 at
/// 10,000, where `Auto` chose 2 threads from a first step's 312 µs of
/// calls that the later steps' 70 µs did not bear out
/// (bench/results/pf-threads-run1).
const COLD_THREAD_SHARE: Duration = Duration::from_micros(500);

/// Threads worth using in process for a step whose calls take `calls` in
/// all: one per [`MIN_THREAD_SHARE`], at least 1 and at most `most`.
pub(crate) fn threads_for(calls: Duration, most: usize) -> usize {
    threads_per(calls, MIN_THREAD_SHARE, most)
}

/// As [`threads_for`] for calls timed by a run's first step alone: one
/// per [`COLD_THREAD_SHARE`].
pub(crate) fn threads_for_first(calls: Duration, most: usize) -> usize {
    threads_per(calls, COLD_THREAD_SHARE, most)
}

/// Threads for `calls` with at least `share` each: at least 1, at most
/// `most`.
fn threads_per(calls: Duration, share: Duration, most: usize) -> usize {
    let shares = calls.as_nanos() / share.as_nanos();
    usize::try_from(shares)
        .unwrap_or(usize::MAX)
        .clamp(1, most.max(1))
}

/// The CPUs this process may use (affinity cut to the cgroup quota): more
/// threads than these only queue.
pub(crate) fn usable_threads() -> usize {
    statepipe_sys::cpus::usable_cpus().count.max(1)
}
