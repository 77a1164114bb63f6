//! Pinned worker threads and the spin barrier the BFS levels meet at.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f(worker)` on `workers` scoped threads, each pinned to a CPU this
/// process may use when there are enough of them, and returns the results
/// in worker order.
pub(crate) fn on_workers<T: Send>(workers: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let workers = workers.max(1);
    let cpus = statepipe_sys::cpus::usable_cpus();
    let pin = workers <= cpus.count && !cpus.ids.is_empty();
    std::thread::scope(|s| {
        let f = &f;
        let cpus = &cpus;
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                s.spawn(move || {
                    if pin {
                        statepipe_sys::pin::pin_current_thread(cpus.ids[w % cpus.ids.len()]);
                    }
                    f(w)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a graph500 worker panicked"))
            .collect()
    })
}

/// Splits `0..len` into `parts` contiguous ranges of nearly equal size.
pub(crate) fn split(len: usize, parts: usize, part: usize) -> std::ops::Range<usize> {
    let chunk = len.div_ceil(parts.max(1));
    (part * chunk).min(len)..((part + 1) * chunk).min(len)
}

/// A reusable barrier for a fixed number of threads that spins, then yields.
///
/// ## Memory ordering
///
/// Each arrival is an `AcqRel` `fetch_add` on `arrived`; the last arrival
/// resets `arrived` and bumps `generation` with `Release`; the others spin
/// on an `Acquire` load of `generation`. So everything any thread wrote
/// before arriving happens-before everything every thread does after
/// leaving: the BFS relies on this for its frontier arrays, which it
/// otherwise reads and writes with `Relaxed` atomics.
#[derive(Debug)]
pub(crate) struct SpinBarrier {
    threads: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    pub(crate) fn new(threads: usize) -> Self {
        SpinBarrier {
            threads,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
        }
    }

    /// Waits until every thread has arrived; returns true in exactly one of them.
    pub(crate) fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Relaxed);
        // AcqRel: the last arrival acquires every other arrival's writes.
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.threads {
            self.arrived.store(0, Ordering::Relaxed);
            // Release: pairs with the Acquire load below in the waiting threads.
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            return true;
        }
        let mut spins = 0u32;
        // Acquire: pairs with the last arrival's Release store above.
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < 200 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
        false
    }
}
