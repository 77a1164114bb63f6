//! Keeping a thread on one CPU, and behind the others on it.

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

/// Pins the calling thread to CPU `cpu` until the returned guard is
/// dropped, which gives the thread back the CPUs it could run on before:
/// for a thread that takes part in pinned work for a while and then goes
/// back to being the program's own (a caller that is also worker 0).
/// `None` where the thread could not be pinned (as for
/// [`pin_current_thread`]) or its mask not be read back.
///
/// ```
/// use statepipe_sys::{cpus::usable_cpus, pin::pin_current_thread_for_now};
///
/// let cpu = usable_cpus().ids[0];
/// if let Some(_pinned) = pin_current_thread_for_now(cpu) {
///     // ... run on `cpu` ...
/// }
/// // ... back on every CPU this thread could run on ...
/// ```
pub fn pin_current_thread_for_now(cpu: usize) -> Option<PinnedForNow> {
    #[cfg(target_os = "linux")]
    {
        use nix::{sched::sched_getaffinity, unistd::Pid};
        let before = sched_getaffinity(Pid::from_raw(0)).ok()?;
        pin_current_thread(cpu).then_some(PinnedForNow {
            before,
            _this_thread: std::marker::PhantomData,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        None
    }
}

/// The calling thread's pin from [`pin_current_thread_for_now`]: dropping
/// it (on the same thread: it is not `Send`) restores the thread's mask.
#[derive(Debug)]
pub struct PinnedForNow {
    #[cfg(target_os = "linux")]
    before: nix::sched::CpuSet,
    _this_thread: std::marker::PhantomData<*const ()>,
}

impl Drop for PinnedForNow {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        {
            // Failing leaves the thread pinned, which costs only speed.
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &self.before);
        }
    }
}

/// Sets the calling thread's nice value (`0` normal, up to `19` the
/// lowest priority); returns whether it took. Raising it needs no
/// privilege. On Linux a nice value belongs to one thread, so a process
/// can run some threads behind others that share their CPU.
///
/// ```
/// let lowered = std::thread::spawn(|| statepipe_sys::pin::set_current_thread_nice(5))
///     .join()
///     .unwrap();
/// # let _ = lowered;
/// ```
pub fn set_current_thread_nice(nice: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        let tid = nix::unistd::gettid().as_raw();
        // SAFETY: setpriority(2) takes three integers and touches no memory
        // of this process; `PRIO_PROCESS` with a thread id names that thread.
        let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = nice;
        false
    }
}

/// Puts the calling thread in the `SCHED_BATCH` policy (its nice value
/// stays); `false` where that is not possible (not Linux). A woken batch
/// thread does not preempt the thread running on its CPU: it waits until
/// that one sleeps or its time slice ends. So threads that share a CPU
/// with a latency-critical one (an event loop) let it finish what it
/// started and then take larger batches, with fewer context switches.
///
/// ```
/// let batch = std::thread::spawn(statepipe_sys::pin::set_current_thread_batch)
///     .join()
///     .unwrap();
/// # let _ = batch;
/// ```
pub fn set_current_thread_batch() -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` for the whole call, and
        // the kernel only reads it; pid 0 names the calling thread.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// Puts the calling thread in the `SCHED_FIFO` real-time policy at
/// `priority` (1 to 99); `false` where that is refused (no root or
/// `CAP_SYS_NICE`, an `RLIMIT_RTPRIO` below `priority`, not Linux). A woken
/// real-time thread preempts every normal thread on its CPU at once, so a
/// thread that sleeps almost always (a sampler of the machine's own
/// delays) wakes on time unless the CPU itself was taken away: by the
/// hypervisor, or by interrupts. A real-time thread that never sleeps
/// starves its CPU's other threads: use this only for threads that do.
///
/// ```
/// let realtime = std::thread::spawn(|| statepipe_sys::pin::set_current_thread_fifo(1))
///     .join()
///     .unwrap();
/// # let _ = realtime;
/// ```
pub fn set_current_thread_fifo(priority: i32) -> bool {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: `param` is a valid `sched_param` for the whole call, and
        // the kernel only reads it; pid 0 names the calling thread.
        let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = priority;
        false
    }
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
    fn lowers_one_thread_only() {
        let (this, other) = std::thread::spawn(|| {
            assert!(set_current_thread_nice(7));
            let tid = nix::unistd::gettid().as_raw() as libc::id_t;
            // SAFETY: getpriority(2) takes integers only.
            let this = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
            let other = std::thread::spawn(|| {
                let tid = nix::unistd::gettid().as_raw() as libc::id_t;
                // SAFETY: as above.
                unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) }
            })
            .join()
            .unwrap();
            (this, other)
        })
        .join()
        .unwrap();
        assert_eq!(this, 7);
        // A thread started by the lowered one inherits its value; the test
        // harness's own threads keep theirs.
        assert_eq!(other, 7);
        let tid = nix::unistd::gettid().as_raw() as libc::id_t;
        // SAFETY: as above.
        let mine = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
        assert_ne!(mine, 7);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn fifo_is_one_threads_policy_where_allowed() {
        let (set, policy) = std::thread::spawn(|| {
            let set = set_current_thread_fifo(1);
            // SAFETY: sched_getscheduler(2) takes an integer only.
            (set, unsafe { libc::sched_getscheduler(0) })
        })
        .join()
        .unwrap();
        // Without the privilege the call is refused and changes nothing.
        assert_eq!(policy == libc::SCHED_FIFO, set);
        // SAFETY: as above.
        assert_ne!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_FIFO);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn batch_is_one_threads_policy_and_keeps_its_nice_value() {
        let (policy, nice) = std::thread::spawn(|| {
            assert!(set_current_thread_nice(3));
            assert!(set_current_thread_batch());
            let tid = nix::unistd::gettid().as_raw() as libc::id_t;
            // SAFETY: sched_getscheduler(2) and getpriority(2) take
            // integers only.
            unsafe {
                (
                    libc::sched_getscheduler(0),
                    libc::getpriority(libc::PRIO_PROCESS, tid),
                )
            }
        })
        .join()
        .unwrap();
        assert_eq!((policy, nice), (libc::SCHED_BATCH, 3));
        // SAFETY: as above.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_pin_for_now_gives_the_mask_back() {
        use nix::{sched::sched_getaffinity, unistd::Pid};
        let cpu = *usable_cpus().ids.last().unwrap();
        std::thread::spawn(move || {
            let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
            {
                let _pinned = pin_current_thread_for_now(cpu).expect("an allowed CPU");
                let now = sched_getaffinity(Pid::from_raw(0)).unwrap();
                assert!(now.is_set(cpu).unwrap());
                let count = (0..nix::sched::CpuSet::count())
                    .filter(|&c| now.is_set(c).unwrap())
                    .count();
                assert_eq!(count, 1);
            }
            assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
        })
        .join()
        .unwrap();
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
