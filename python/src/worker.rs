//! `serve_worker`: this process as a worker (`python -m statepipe.worker`).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use pyo3::prelude::*;
use statepipe_cluster::worker::{self, WorkerOptions};
use statepipe_cluster::Secret;

use crate::{registry, to_py, StatepipeError};

/// Serves a master as a worker until it shuts the worker down or goes
/// away: the master at `connect` with `secret`, or, when `connect` is
/// None, the one named by STATEPIPE_CONNECT and STATEPIPE_SECRET.
///
/// With `leave_on_sigterm` (what `statepipe-worker` passes) SIGTERM, the
/// way Kubernetes and every cluster manager ask a process to go, is a
/// graceful leave: the worker tells its master, its states move to the
/// other workers when the step in progress ends, and this returns when
/// the master lets it go (the process then exits 0). A second SIGTERM
/// exits at once with status 143, as a crash: the master recovers its
/// states as from any lost worker. It replaces the process's SIGTERM
/// handling for good: for a process that is a worker and nothing else.
#[pyfunction]
#[pyo3(signature = (connect=None, secret=None, pin=None, die_with_parent=false, leave_on_sigterm=false))]
pub(crate) fn serve_worker(
    py: Python<'_>,
    connect: Option<String>,
    secret: Option<String>,
    pin: Option<usize>,
    die_with_parent: bool,
    leave_on_sigterm: bool,
) -> PyResult<()> {
    let leave = if leave_on_sigterm {
        Some(leave_on_sigterm_flag()?)
    } else {
        None
    };
    // On this (the main) thread: the parent-death signal a spawned worker
    // asks for watches the thread that set it.
    let r = py.detach(|| match connect {
        None => worker::serve_with_options(
            registry(),
            &WorkerOptions {
                leave,
                ..WorkerOptions::default()
            },
        ),
        Some(addr) => {
            let secret = match secret {
                Some(s) => Secret::new(&s),
                None => Secret::from_env()?,
            };
            let opts = WorkerOptions {
                pin,
                die_with_parent,
                leave,
                ..WorkerOptions::default()
            };
            worker::run(&addr, &secret, registry(), &opts)
        }
    });
    r.map_err(to_py)
}

/// The flag a SIGTERM sets (the worker's leave), a second SIGTERM exiting
/// with status 143.
fn leave_on_sigterm_flag() -> PyResult<Arc<AtomicBool>> {
    use signal_hook::consts::SIGTERM;
    let leave = Arc::new(AtomicBool::new(false));
    let failed = |e: std::io::Error| {
        StatepipeError::new_err(format!("installing the worker's SIGTERM handler: {e}"))
    };
    // Registered first, so that it sees the flag as it was before this
    // signal: only a SIGTERM after one already noted ends the process.
    signal_hook::flag::register_conditional_shutdown(SIGTERM, 143, Arc::clone(&leave))
        .map_err(failed)?;
    signal_hook::flag::register(SIGTERM, Arc::clone(&leave)).map_err(failed)?;
    Ok(leave)
}
