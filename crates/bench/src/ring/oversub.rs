//! More runnable threads than cores: where busy-spinning rings collapse and the
//! adaptive wait strategy has to hold.
//!
//! Two cases, both unpinned so the OS scheduler arbitrates: `oversub/Np1c` with
//! `N = max(3, cpus)` producers and one consumer (3p1c on a 2-CPU host), and
//! `oversub/1p1c+hog`, 1p1c while [`Hogs`] busy-loop on every CPU but the first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};

use core_affinity::CoreId;

use crate::host::pin_current;

/// Producers of the `oversub/Np1c` case on a host with `cpus` CPUs: at least 3, and
/// enough that producers and consumer outnumber the CPUs.
pub fn producers(cpus: usize) -> usize {
    cpus.max(3)
}

/// The CPUs the hogs take: every usable CPU but the first (one unpinned hog when the
/// CPUs are unknown or there is just one).
pub fn hog_cpus(cpus: &[CoreId]) -> Vec<Option<CoreId>> {
    if cpus.len() >= 2 {
        cpus[1..].iter().copied().map(Some).collect()
    } else {
        vec![None]
    }
}

/// Busy-looping threads, running until dropped.
#[derive(Debug)]
pub struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Hogs {
    /// Starts one hog per entry of `cpus` (pinned where given) and returns once all
    /// of them run.
    ///
    /// # Panics
    ///
    /// If a thread cannot be spawned.
    pub fn start(cpus: &[Option<CoreId>]) -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(Barrier::new(cpus.len() + 1));
        let threads = cpus
            .iter()
            .map(|cpu| {
                let (stop, running, cpu) = (Arc::clone(&stop), Arc::clone(&running), *cpu);
                thread::Builder::new()
                    .name("bench-hog".into())
                    .spawn(move || {
                        pin_current(cpu);
                        running.wait();
                        // Relaxed: the flag carries no data, it only ends the loop.
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                    .expect("spawn a hog thread")
            })
            .collect();
        running.wait();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hogs_start_and_stop() {
        let hogs = Hogs::start(&[None]);
        drop(hogs);
    }

    #[test]
    fn oversubscribed_on_any_host() {
        for cpus in 1..64 {
            assert!(producers(cpus) + 1 > cpus);
        }
        let two = [CoreId { id: 0 }, CoreId { id: 1 }];
        assert_eq!(hog_cpus(&two), [Some(CoreId { id: 1 })]);
        assert_eq!(hog_cpus(&[]), [None]);
    }
}
