//! Pinned worker threads.

/// Runs `f(worker)` on `workers` scoped threads, each pinned to a CPU this
/// process may use when there are enough of them, and returns the results
/// in worker order.
pub(crate) fn on_workers<T: Send>(workers: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let workers = workers.max(1);
    let cpus = cpus_for(workers);
    std::thread::scope(|s| {
        let f = &f;
        let cpus = &cpus;
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                s.spawn(move || {
                    pin(cpus.as_deref(), w);
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

/// The CPUs workers are pinned to (worker `w` to `cpus[w % cpus.len()]`),
/// or `None` where they are not: when the process may use fewer CPUs than
/// there are workers. The CPUs are read once, so workers started by a
/// thread pinned for a while (a search's caller, which is worker 0) are
/// spread as widely as the first ones.
pub(crate) fn cpus_for(workers: usize) -> Option<Vec<usize>> {
    static CPUS: std::sync::OnceLock<statepipe_sys::cpus::Cpus> = std::sync::OnceLock::new();
    let cpus = CPUS.get_or_init(statepipe_sys::cpus::usable_cpus);
    (workers <= cpus.count && !cpus.ids.is_empty()).then(|| cpus.ids.clone())
}

/// Pins the calling thread, worker `w`, to its CPU of `cpus` (from
/// [`cpus_for`]); leaves it be where workers are not pinned.
pub(crate) fn pin(cpus: Option<&[usize]>, w: usize) {
    if let Some(cpus) = cpus {
        statepipe_sys::pin::pin_current_thread(cpus[w % cpus.len()]);
    }
}

/// Splits `0..len` into `parts` contiguous ranges of nearly equal size.
pub(crate) fn split(len: usize, parts: usize, part: usize) -> std::ops::Range<usize> {
    let chunk = len.div_ceil(parts.max(1));
    (part * chunk).min(len)..((part + 1) * chunk).min(len)
}
