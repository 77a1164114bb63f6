//! Keeping a thread on one CPU.

/// Pins the calling thread to CPU `cpu`; returns whether it is now pinned.
///
/// On Linux, threads started afterwards by the pinned thread inherit its
/// affinity, so a process that pins its main thread before starting any
/// other keeps them all on `cpu`. Failing is not an error: a CPU outside the
/// process's mask or cgroup, or a platform without affinity, leaves the
/// thread where it was, and the caller decides whether that matters (a
/// benchmark reports it, a worker logs it).
///
/// # Examples
///
/// ```
/// use statepipe_sys::{cpus::usable_cpus, pin::pin_current_thread};
///
/// let cpu = usable_cpus().ids[0];
/// std::thread::spawn(move || {
///     let pinned = pin_current_thread(cpu);
///     // ... run on `cpu` if `pinned` ...
///     # let _ = pinned;
/// })
/// .join()
/// .unwrap();
/// ```
pub fn pin_current_thread(cpu: usize) -> bool {
    // `core_affinity` indexes a fixed-size `cpu_set_t` without a bounds
    // check on Linux and would panic past its end.
    #[cfg(target_os = "linux")]
    if cpu >= nix::sched::CpuSet::count() {
        return false;
    }
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpus::usable_cpus;

    #[test]
    #[cfg(target_os = "linux")]
    fn pins_to_an_allowed_cpu() {
        let cpu = *usable_cpus().ids.last().unwrap();
        // A thread of its own, so the test harness's threads keep their mask.
        let pinned = std::thread::spawn(move || pin_current_thread(cpu))
            .join()
            .unwrap();
        assert!(pinned, "could not pin to CPU {cpu}");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn refuses_a_cpu_that_cannot_exist() {
        let pinned = std::thread::spawn(|| pin_current_thread(usize::MAX))
            .join()
            .unwrap();
        assert!(!pinned);
    }
}
