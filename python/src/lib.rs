//! `statepipe._native`: the statepipe evolve engine for Python models.
//!
//! A Python model is a [`model::PyModel`], an `Evolve` whose states,
//! inputs and outputs are pickled bytes that the master forwards untouched.
//! Workers are Python processes (`python -m statepipe.worker`) that serve
//! with the same registry; an engine runs in this process
//! (`statepipe_cluster::Local`), over workers (`Master`), or starts in
//! process and moves to spawned workers when its first step predicts that
//! pays (`Auto`, the rule `statepipe pf` and the Rust API use).
//!
//! A [`NativeDashboard`] is the live page of a run (`statepipe_dashboard`
//! over a [`Telemetry`]): an engine made with one gives its telemetry to
//! its master, and the Python particle filter adds its likelihood and
//! effective sample size to it step by step.

mod dashboard;
mod elastic;
mod engine;
mod functions;
mod interrupt;
mod model;
mod worker;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use statepipe_cluster::{Error, Registry};

use model::{PyModel, StateRng};

create_exception!(
    _native,
    StatepipeError,
    PyException,
    "An engine operation, a cluster's start or a worker failed."
);
create_exception!(
    _native,
    ModelError,
    StatepipeError,
    "The model raised an exception (args: message, state id, step, traceback)."
);
create_exception!(
    _native,
    WorkerError,
    StatepipeError,
    "A worker failed, could not build the model, or was lost."
);

pub(crate) fn to_py(e: Error) -> PyErr {
    match e {
        Error::WorkerFailed(m) => WorkerError::new_err(format!("worker failed: {m}")),
        e @ (Error::WorkerLost(_) | Error::NoWorkers) => WorkerError::new_err(e.to_string()),
        e => StatepipeError::new_err(e.to_string()),
    }
}

/// The registry a Python worker serves.
pub(crate) fn registry() -> Registry {
    Registry::new().with::<PyModel>()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<engine::NativeEngine>()?;
    m.add_class::<StateRng>()?;
    m.add_class::<dashboard::NativeDashboard>()?;
    m.add_function(wrap_pyfunction!(functions::call_rng_for, m)?)?;
    m.add_function(wrap_pyfunction!(functions::call_uniform, m)?)?;
    m.add_function(wrap_pyfunction!(worker::serve_worker, m)?)?;
    m.add_function(wrap_pyfunction!(functions::random_secret, m)?)?;
    m.add_function(wrap_pyfunction!(functions::bench_rust_noop, m)?)?;
    m.add("StatepipeError", py.get_type::<StatepipeError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("WorkerError", py.get_type::<WorkerError>())?;
    m.add("PICKLE_PROTOCOL", model::PROTOCOL)?;
    Ok(())
}
