//! Ctrl-C in the caller while the engine waits on another thread.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use statepipe_cluster::kill_spawned_workers;

/// Set by [`interruptible`] on Ctrl-C, for a wait in `f` that no killed
/// worker ends: a listener waiting for remote workers, and a master's
/// operation on them (every master stops on it, `MasterConfig::stop`).
pub(crate) static INTERRUPTED: std::sync::LazyLock<Arc<std::sync::atomic::AtomicBool>> =
    std::sync::LazyLock::new(|| Arc::new(std::sync::atomic::AtomicBool::new(false)));

/// Runs `f` on another thread with the GIL released, checking for Ctrl-C
/// every 50 ms; on KeyboardInterrupt kills the spawned workers (which ends
/// a wait for them: `LocalCluster::accept` sees them exit), sets
/// [`INTERRUPTED`] (which ends a wait for remote ones) and raises it.
pub(crate) fn interruptible<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    INTERRUPTED.store(false, std::sync::atomic::Ordering::Relaxed);
    let done = (Mutex::new(false), Condvar::new());
    let done = &done;
    std::thread::scope(|scope| {
        let handle = scope.spawn(move || {
            let r = f();
            *done.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
            done.1.notify_all();
            r
        });
        loop {
            let finished = py.detach(|| {
                let g = done.0.lock().unwrap_or_else(|p| p.into_inner());
                let (g, _) = done
                    .1
                    .wait_timeout_while(g, Duration::from_millis(50), |d| !*d)
                    .unwrap_or_else(|p| p.into_inner());
                *g
            });
            if finished {
                break;
            }
            if let Err(e) = py.check_signals() {
                // Relaxed: a flag the waits poll; nothing else rides on it.
                INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
                kill_spawned_workers();
                let _ = py.detach(|| handle.join());
                return Err(e);
            }
        }
        py.detach(|| handle.join())
            .map_err(|_| PyRuntimeError::new_err("the engine's thread panicked"))
    })
}
