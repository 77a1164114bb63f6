//! `NativeDashboard`: a run's live page, and the telemetry it gives an
//! engine's master.

use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use statepipe_cluster::Telemetry;
use statepipe_dashboard::{Dashboard, DashboardError, EvolveSource, Options};

use crate::StatepipeError;

/// The telemetry a master of an engine made with `dashboard` writes into.
pub(crate) fn telemetry_of(dashboard: Option<&Bound<'_, NativeDashboard>>) -> Option<Telemetry> {
    dashboard.map(|d| d.get().telemetry.clone())
}

fn dashboard_err(e: DashboardError) -> PyErr {
    // The messages say what to do (another address, port 0).
    match e {
        e @ DashboardError::Address { .. } => PyValueError::new_err(e.to_string()),
        e @ DashboardError::Bind { .. } => PyOSError::new_err(e.to_string()),
        e => StatepipeError::new_err(e.to_string()),
    }
}

/// A run's live page (`statepipe_dashboard`, the evolve page) over a
/// telemetry of its own: serves until closed or dropped. An engine made
/// with it gives the telemetry to its master; the particle filter records
/// its steps in it.
#[pyclass(module = "statepipe._native", frozen)]
pub(crate) struct NativeDashboard {
    telemetry: Telemetry,
    board: Mutex<Option<Dashboard>>,
    url: String,
    banner: String,
}

#[pymethods]
impl NativeDashboard {
    /// Listens at `addr` (`HOST:PORT`, port 0: any free one) and serves
    /// the page titled `title`, with the token of STATEPIPE_DASHBOARD_TOKEN
    /// when it is set. Raises ValueError for an address that does not
    /// parse, OSError for one that cannot be bound.
    #[new]
    fn new(py: Python<'_>, addr: &str, title: String) -> PyResult<Self> {
        let telemetry = Telemetry::new();
        let source = Arc::new(EvolveSource::new(telemetry.clone(), title));
        let board = py
            .detach(|| Dashboard::start(addr, source, Options::from_env()))
            .map_err(dashboard_err)?;
        Ok(NativeDashboard {
            telemetry,
            url: board.url(),
            banner: board.banner(),
            board: Mutex::new(Some(board)),
        })
    }

    /// The page's URL (also after `close`).
    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }

    /// What to print when it starts: the URL, how to pass a token when one
    /// is required, a warning when the address is not loopback (lines).
    #[getter]
    fn banner(&self) -> String {
        self.banner.clone()
    }

    /// Whether it was closed.
    #[getter]
    fn closed(&self) -> bool {
        self.board
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Sets how many steps the run will take.
    fn set_total_steps(&self, n: u64) {
        self.telemetry.set_total_steps(n);
    }

    /// Records the particle filter's step `step` (from 1): the
    /// log-likelihood estimate so far, the effective sample size of the
    /// step's normalised weights (1 / sum w^2), the particles in all.
    fn record_pf_step(&self, step: u64, loglik: f64, ess: f64, particles: usize) {
        self.telemetry.record_pf_step(step, loglik, ess, particles);
    }

    /// Stops serving: the port is closed when it returns. Closing again
    /// does nothing.
    fn close(&self, py: Python<'_>) {
        let board = self.board.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(b) = board {
            // Joins the dashboard's threads, which never need the GIL.
            py.detach(move || drop(b));
        }
    }
}
