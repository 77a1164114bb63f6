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

mod model;

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_bytes::ByteBuf;
use statepipe_cluster::worker::{self, WorkerOptions};
use statepipe_cluster::{
    call_rng, kill_spawned_workers, Auto, AutoConfig, Engine as _, Error, IdMap, Joined, Listener,
    Local, LocalCluster, Master, MasterConfig, Registry, Secret, ShipCost, StateId, Telemetry,
    WorkerCommand,
};
use statepipe_dashboard::{Dashboard, DashboardError, EvolveSource, Options};

use model::{PyModel, PyOut, StateRng};

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

fn to_py(e: Error) -> PyErr {
    match e {
        Error::WorkerFailed(m) => WorkerError::new_err(format!("worker failed: {m}")),
        e @ (Error::WorkerLost(_) | Error::NoWorkers) => WorkerError::new_err(e.to_string()),
        e => StatepipeError::new_err(e.to_string()),
    }
}

/// The registry a Python worker serves.
fn registry() -> Registry {
    Registry::new().with::<PyModel>()
}

/// Starts an `Auto` engine's workers when it moves to them.
type StartFn = Box<dyn FnOnce() -> Result<Vec<Joined>, Error> + Send>;

/// The worker processes an `Auto` engine started, once it moved.
type Spawned = Arc<Mutex<Option<LocalCluster>>>;

enum Inner {
    Local(Local<PyModel>),
    Cluster {
        master: Box<Master<PyModel>>,
        /// The spawned worker processes (None: workers joined a listener).
        cluster: Option<LocalCluster>,
    },
    Auto {
        auto: Box<Auto<PyModel, StartFn>>,
        cluster: Spawned,
    },
}

impl Inner {
    /// Whether the model runs in this process (on the caller's thread).
    fn here(&self) -> bool {
        match self {
            Inner::Local(_) => true,
            Inner::Cluster { .. } => false,
            Inner::Auto { auto, .. } => auto.master().is_none(),
        }
    }

    /// Whether an `Auto` engine decided to move but has no master: its
    /// move failed, and its states with it.
    fn lost_move(&self) -> bool {
        matches!(self, Inner::Auto { auto, .. }
            if auto.master().is_none() && auto.decision().is_some_and(|d| d.on_workers))
    }
}

/// What shipping a Python model's states to workers costs, for `Auto`:
/// the Rust defaults, plus the caller's call to the model's
/// `expected_cost` per state when it has one (made only for workers), and
/// the start of Python workers:
/// each an interpreter importing numpy, cloudpickle and the model (about
/// 0.25 s of CPU on the 2-vCPU development VM), spread over this host's
/// cores, after a fixed 0.1 s to launch and join.
fn python_ship_cost(has_cost: bool) -> ShipCost {
    let rust = ShipCost::default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    ShipCost {
        per_state: rust.per_state + Duration::from_micros(if has_cost { 1 } else { 0 }),
        start: Duration::from_millis(100),
        start_per_worker: Duration::from_millis(250) / cores as u32,
        ..rust
    }
}

/// Set by [`interruptible`] on Ctrl-C, for a wait in `f` that no killed
/// worker ends: a listener waiting for remote workers, and a master's
/// operation on them (every master stops on it, `MasterConfig::stop`).
static INTERRUPTED: std::sync::LazyLock<Arc<std::sync::atomic::AtomicBool>> =
    std::sync::LazyLock::new(|| Arc::new(std::sync::atomic::AtomicBool::new(false)));

/// Runs `f` on another thread with the GIL released, checking for Ctrl-C
/// every 50 ms; on KeyboardInterrupt kills the spawned workers (which ends
/// a wait for them: `LocalCluster::accept` sees them exit), sets
/// [`INTERRUPTED`] (which ends a wait for remote ones) and raises it.
fn interruptible<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
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

/// An engine over a Python model: in this process or over workers.
#[pyclass(module = "statepipe._native")]
struct NativeEngine {
    inner: Mutex<Option<Inner>>,
    step: u64,
    workers: usize,
}

type Evolved = Vec<(u64, Vec<(u64, Py<PyAny>)>)>;

impl NativeEngine {
    /// An engine over a master and, if this engine spawned them, its
    /// worker processes.
    fn on_master(
        master: Master<PyModel>,
        cluster: Option<LocalCluster>,
        workers: usize,
    ) -> Self {
        NativeEngine {
            inner: Mutex::new(Some(Inner::Cluster {
                master: Box::new(master),
                cluster,
            })),
            step: 0,
            workers,
        }
    }

    fn with<T: Send>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut Inner) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = guard
            .as_mut()
            .ok_or_else(|| StatepipeError::new_err("the engine is closed"))?;
        // In this process the model runs on this thread (Ctrl-C reaches it).
        let r = if inner.here() {
            f(inner)
        } else {
            match interruptible(py, || f(inner)) {
                Ok(r) => r,
                Err(e) => {
                    *guard = None;
                    return Err(e);
                }
            }
        };
        if r.is_err() && inner.lost_move() {
            *guard = None;
        }
        r.map_err(to_py)
    }
}

/// The worker command `command` names: its program, then its arguments.
fn worker_command(command: &[String]) -> PyResult<WorkerCommand> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| StatepipeError::new_err("an empty worker command"))?;
    Ok(WorkerCommand::new(program).args(args))
}

fn model_of(py: Python<'_>, model: Py<PyAny>, pickled: &Bound<'_, PyBytes>) -> PyModel {
    PyModel::new(py, model, pickled.as_bytes().to_vec())
}

#[pymethods]
impl NativeEngine {
    /// An engine holding every state in this process.
    #[staticmethod]
    fn local(py: Python<'_>, model: Py<PyAny>, pickled: &Bound<'_, PyBytes>, seed: u64) -> Self {
        NativeEngine {
            inner: Mutex::new(Some(Inner::Local(Local::new(
                model_of(py, model, pickled),
                seed,
            )))),
            step: 0,
            workers: 0,
        }
    }

    /// An engine over `workers` processes started as `python -m
    /// statepipe.worker` (`command`: the program and its arguments); its
    /// master writes into `dashboard`'s telemetry when given.
    #[staticmethod]
    #[pyo3(signature = (model, pickled, seed, workers, command, pins, timeout, dashboard=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature, called by statepipe.Engine
    fn spawn(
        py: Python<'_>,
        model: Py<PyAny>,
        pickled: &Bound<'_, PyBytes>,
        seed: u64,
        workers: usize,
        command: Vec<String>,
        pins: Vec<usize>,
        timeout: f64,
        dashboard: Option<&Bound<'_, NativeDashboard>>,
    ) -> PyResult<Self> {
        let m = model_of(py, model, pickled);
        let cmd = worker_command(&command)?;
        let cfg = MasterConfig {
            seed,
            stop: Some(INTERRUPTED.clone()),
            telemetry: telemetry_of(dashboard),
            ..MasterConfig::default()
        };
        // Started on this thread: a worker dies with the thread that started
        // it (PR_SET_PDEATHSIG), so not on `interruptible`'s.
        let cluster = LocalCluster::spawn(&cmd, workers, &pins).map_err(to_py)?;
        let master = interruptible(py, || -> Result<_, Error> {
            let joined = cluster.accept(Duration::from_secs_f64(timeout))?;
            Master::new(&m, joined, cfg)
        })?
        .map_err(to_py)?;
        Ok(Self::on_master(master, Some(cluster), workers))
    }

    /// An engine that evolves the first step in this process, timing it,
    /// and then stays or moves to `workers` processes started as `command`
    /// (see `statepipe_cluster::Auto`), whichever it predicts is faster
    /// over `steps` steps (None: unknown). A master it moves to writes
    /// into `dashboard`'s telemetry when given.
    #[staticmethod]
    #[pyo3(signature = (model, pickled, seed, workers, command, pins, timeout, steps, dashboard=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature, called by statepipe.Engine
    fn auto(
        py: Python<'_>,
        model: Py<PyAny>,
        pickled: &Bound<'_, PyBytes>,
        seed: u64,
        workers: usize,
        command: Vec<String>,
        pins: Vec<usize>,
        timeout: f64,
        steps: Option<u64>,
        dashboard: Option<&Bound<'_, NativeDashboard>>,
    ) -> PyResult<Self> {
        let m = model_of(py, model, pickled);
        let cmd = worker_command(&command)?;
        let cluster: Spawned = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&cluster);
        // Called by the move, in `with` on the caller's thread (the model
        // ran there), which the workers then die with, as with `spawn`.
        let start: StartFn = Box::new(move || {
            let c = LocalCluster::spawn(&cmd, workers, &pins)?;
            let joined =
                Python::attach(|py| py.detach(|| c.accept(Duration::from_secs_f64(timeout))));
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(c);
            joined
        });
        let cfg = AutoConfig {
            master: MasterConfig {
                seed,
                stop: Some(INTERRUPTED.clone()),
                telemetry: telemetry_of(dashboard),
                ..MasterConfig::default()
            },
            // One thread: in-process evolves hold the GIL.
            threads: 1,
            workers,
            steps,
            ship: python_ship_cost(m.has_cost()),
        };
        Ok(NativeEngine {
            inner: Mutex::new(Some(Inner::Auto {
                auto: Box::new(Auto::new(m, cfg, start)),
                cluster,
            })),
            step: 0,
            workers,
        })
    }

    /// An engine over `workers` workers that join a listener on `addr`
    /// (`statepipe-worker --connect ADDR` on other machines) with `secret`;
    /// the master writes into `dashboard`'s telemetry when given.
    #[staticmethod]
    #[pyo3(signature = (model, pickled, seed, workers, addr, secret, timeout, dashboard=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature, called by statepipe.Engine
    fn listen(
        py: Python<'_>,
        model: Py<PyAny>,
        pickled: &Bound<'_, PyBytes>,
        seed: u64,
        workers: usize,
        addr: String,
        secret: String,
        timeout: f64,
        dashboard: Option<&Bound<'_, NativeDashboard>>,
    ) -> PyResult<Self> {
        let m = model_of(py, model, pickled);
        let cfg = MasterConfig {
            seed,
            stop: Some(INTERRUPTED.clone()),
            telemetry: telemetry_of(dashboard),
            ..MasterConfig::default()
        };
        let master = interruptible(py, || -> Result<_, Error> {
            let l = Listener::bind(&addr, Secret::new(&secret))?;
            let joined = l.accept_until(workers, Duration::from_secs_f64(timeout), &INTERRUPTED)?;
            Master::new(&m, joined, cfg)
        })?
        .map_err(to_py)?;
        Ok(Self::on_master(master, None, workers))
    }

    /// Worker processes (0: in this process).
    #[getter]
    fn workers(&self) -> usize {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(i) if i.here() => 0,
            _ => self.workers,
        }
    }

    /// Where the states are evolved, and for an engine that chooses, why:
    /// one line.
    #[getter]
    fn placement(&self) -> String {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            None => "closed".into(),
            Some(Inner::Local(_)) => "in process".into(),
            Some(Inner::Cluster { .. }) => format!("on {} workers", self.workers),
            Some(Inner::Auto { auto, .. }) => match auto.decision() {
                Some(d) => d.to_string(),
                None => format!(
                    "undecided: the first step runs in process, then the run stays or moves to {} workers",
                    self.workers
                ),
            },
        }
    }

    /// `evolve_many` calls so far.
    #[getter]
    fn step(&self) -> u64 {
        self.step
    }

    /// The workers' process ids (spawned workers only).
    fn pids(&self) -> Vec<u32> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(Inner::Cluster {
                cluster: Some(c), ..
            }) => c.pids(),
            Some(Inner::Auto { cluster, .. }) => cluster
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(LocalCluster::pids)
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Forgets every state and holds `states` (pickled); returns their ids.
    fn reset_states(&mut self, py: Python<'_>, states: Vec<Vec<u8>>) -> PyResult<Vec<u64>> {
        let states: Vec<ByteBuf> = states.into_iter().map(ByteBuf::from).collect();
        let ids = self.with(py, |inner| match inner {
            Inner::Local(l) => l.reset_states(states),
            Inner::Cluster { master, .. } => master.reset_states(states),
            Inner::Auto { auto, .. } => auto.reset_states(states),
        })?;
        Ok(ids.into_iter().map(|i| i.0).collect())
    }

    /// Evolves each state `ids[k]` with the pickled input `inputs[k]`,
    /// whose expected cost is `costs[k]` (the model's `expected_cost`,
    /// computed by the caller; None: all 1); returns, in the order of
    /// `ids`, `(parent, [(child, pickled output)])`. Raises ModelError for
    /// the first state (in `ids` order) whose evolve raised.
    #[pyo3(signature = (ids, inputs, costs=None))]
    fn evolve_many(
        &mut self,
        py: Python<'_>,
        ids: Vec<u64>,
        inputs: Vec<Vec<u8>>,
        costs: Option<Vec<f64>>,
    ) -> PyResult<Evolved> {
        if ids.len() != inputs.len() || costs.as_ref().is_some_and(|c| c.len() != ids.len()) {
            return Err(StatepipeError::new_err(format!(
                "{} ids but {} inputs and {} costs",
                ids.len(),
                inputs.len(),
                costs.as_ref().map_or(ids.len(), Vec::len)
            )));
        }
        let map: IdMap<ByteBuf> = ids
            .iter()
            .zip(inputs)
            .enumerate()
            .map(|(k, (&i, b))| {
                let cost = costs.as_ref().map_or(1.0, |c| c[k]);
                (StateId(i), model::framed_input(cost, &b))
            })
            .collect();
        if map.len() != ids.len() {
            return Err(StatepipeError::new_err("a state id is named twice"));
        }
        self.step += 1;
        let step = self.step;
        model::clear_interrupt();
        let mut out = self.with(py, |inner| match inner {
            Inner::Local(l) => l.evolve_many(map),
            Inner::Cluster { master, .. } => master.evolve_many(map),
            Inner::Auto { auto, .. } => auto.evolve_many(map),
        })?;
        let mut res = Vec::with_capacity(ids.len());
        let mut interrupted = false;
        // The first failing state and its traceback; every failing state
        // with the id it is kept under.
        let mut first_err: Option<(u64, String)> = None;
        let mut kept: Vec<(u64, u64)> = Vec::new();
        for &id in &ids {
            let kids = out.remove(&StateId(id)).unwrap_or_default();
            let mut v = Vec::with_capacity(kids.len());
            for (c, o) in kids {
                match o {
                    PyOut::Ok(b) => v.push((c.0, PyBytes::new(py, &b).into_any().unbind())),
                    PyOut::Err {
                        message,
                        interrupted: i,
                    } => {
                        interrupted |= i;
                        kept.push((id, c.0));
                        if first_err.is_none() {
                            first_err = Some((id, message));
                        }
                    }
                }
            }
            res.push((id, v));
        }
        if interrupted {
            return Err(PyKeyboardInterrupt::new_err(()));
        }
        if let Some((id, tb)) = first_err {
            let msg = format!(
                "the model raised evolving state {} at step {step}:\n{tb}",
                StateId(id)
            );
            // Every other state of the step was evolved and replaced by
            // its children: they go with the error (their ids are known
            // nowhere else), and so does the id each failing state is
            // kept under.
            res.retain(|(p, _)| !kept.iter().any(|(f, _)| f == p));
            return Err(ModelError::new_err((msg, id, step, tb, kept, res)));
        }
        Ok(res)
    }

    /// Copies of the named states (pickled), in order.
    fn fetch_states(&mut self, py: Python<'_>, ids: Vec<u64>) -> PyResult<Vec<Py<PyAny>>> {
        let sids: Vec<StateId> = ids.iter().map(|&i| StateId(i)).collect();
        let q = sids.clone();
        let mut got = self.with(py, move |inner| match inner {
            Inner::Local(l) => l.fetch_states(&q),
            Inner::Cluster { master, .. } => master.fetch_states(&q),
            Inner::Auto { auto, .. } => auto.fetch_states(&q),
        })?;
        Ok(sids
            .iter()
            .map(|i| {
                let b = got.remove(i).unwrap_or_default();
                PyBytes::new(py, &b).into_any().unbind()
            })
            .collect())
    }

    /// Forgets the named states.
    fn drop_states(&mut self, py: Python<'_>, ids: Vec<u64>) -> PyResult<()> {
        let sids: Vec<StateId> = ids.into_iter().map(StateId).collect();
        self.with(py, move |inner| match inner {
            Inner::Local(l) => l.drop_states(&sids),
            Inner::Cluster { master, .. } => master.drop_states(&sids),
            Inner::Auto { auto, .. } => auto.drop_states(&sids),
        })
    }

    /// The master's statistics table (workers only; empty in process).
    fn stats_table(&self) -> String {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(Inner::Cluster { master, .. }) => master.stats().table(),
            Some(Inner::Auto { auto, .. }) => {
                auto.master().map(|m| m.stats().table()).unwrap_or_default()
            }
            _ => String::new(),
        }
    }

    /// Shuts the workers down and forgets every state.
    fn close(&mut self, py: Python<'_>) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        match inner {
            Some(Inner::Cluster {
                master,
                mut cluster,
            }) => py.detach(|| {
                master.shutdown();
                if let Some(c) = cluster.as_mut() {
                    c.kill_all();
                }
            }),
            Some(Inner::Auto { auto, cluster }) => py.detach(|| {
                drop(auto);
                if let Some(c) = cluster.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                    c.kill_all();
                }
            }),
            _ => {}
        }
    }
}

/// The telemetry a master of an engine made with `dashboard` writes into.
fn telemetry_of(dashboard: Option<&Bound<'_, NativeDashboard>>) -> Option<Telemetry> {
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
struct NativeDashboard {
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

/// The generator `statepipe_cluster::call_rng(seed, step, parent)` gives a
/// call, as the `Rng` an evolve receives (for drivers and for `reset`).
#[pyfunction]
fn call_rng_for(seed: u64, step: u64, parent: u64) -> StateRng {
    StateRng::new(&mut call_rng(seed, step, StateId(parent)))
}

/// A uniform draw in [0, 1) from `call_rng(seed, step, parent)`: the
/// resampling draw of the particle filter (the same as the Rust filter's).
#[pyfunction]
fn call_uniform(seed: u64, step: u64, parent: u64) -> f64 {
    use rand::Rng as _;
    call_rng(seed, step, StateId(parent)).random::<f64>()
}

/// Serves a master as a worker until it shuts the worker down or goes
/// away: the master at `connect` with `secret`, or, when `connect` is
/// None, the one named by STATEPIPE_CONNECT and STATEPIPE_SECRET.
#[pyfunction]
#[pyo3(signature = (connect=None, secret=None, pin=None, die_with_parent=false))]
fn serve_worker(
    py: Python<'_>,
    connect: Option<String>,
    secret: Option<String>,
    pin: Option<usize>,
    die_with_parent: bool,
) -> PyResult<()> {
    let r = py.detach(|| match connect {
        None => worker::serve(registry()),
        Some(addr) => {
            let secret = match secret {
                Some(s) => Secret::new(&s),
                None => Secret::from_env()?,
            };
            let opts = WorkerOptions {
                pin,
                die_with_parent,
                ..WorkerOptions::default()
            };
            worker::run(&addr, &secret, registry(), &opts)
        }
    });
    r.map_err(to_py)
}

/// The Rust reference for the per-call overhead benchmark: a model whose
/// states, inputs and outputs are bytes, as a Python model's are, and whose
/// evolve returns its state unchanged with an empty output.
#[derive(serde::Serialize, serde::Deserialize)]
struct NoopBytes;

impl statepipe_cluster::Evolve for NoopBytes {
    const NAME: &'static str = "statepipe-python-noop";
    type State = ByteBuf;
    type Input = ByteBuf;
    type Output = ByteBuf;
    fn evolve(
        &self,
        s: &ByteBuf,
        _: &ByteBuf,
        _: &mut statepipe_cluster::Rng,
    ) -> Vec<(ByteBuf, ByteBuf)> {
        vec![(s.clone(), ByteBuf::new())]
    }
}

/// Seconds `Local` takes for `steps` evolve_many calls over `n` states of
/// the Rust no-op model (states and inputs: the given pickled bytes): the
/// baseline of the Python model's per-call overhead.
#[pyfunction]
fn bench_rust_noop(
    py: Python<'_>,
    n: usize,
    steps: usize,
    state: Vec<u8>,
    input: Vec<u8>,
) -> PyResult<f64> {
    py.detach(|| {
        let mut e = Local::new(NoopBytes, 1);
        let mut ids = e.reset_states(vec![ByteBuf::from(state); n])?;
        let t0 = std::time::Instant::now();
        for _ in 0..steps {
            let inputs = ids
                .iter()
                .map(|&i| (i, ByteBuf::from(input.clone())))
                .collect();
            let out = e.evolve_many(inputs)?;
            ids = ids.iter().map(|p| out[p][0].0).collect();
        }
        Ok(t0.elapsed().as_secs_f64())
    })
    .map_err(to_py)
}

/// A fresh random secret, as text.
#[pyfunction]
fn random_secret() -> String {
    Secret::random().as_text()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<NativeEngine>()?;
    m.add_class::<StateRng>()?;
    m.add_class::<NativeDashboard>()?;
    m.add_function(wrap_pyfunction!(call_rng_for, m)?)?;
    m.add_function(wrap_pyfunction!(call_uniform, m)?)?;
    m.add_function(wrap_pyfunction!(serve_worker, m)?)?;
    m.add_function(wrap_pyfunction!(random_secret, m)?)?;
    m.add_function(wrap_pyfunction!(bench_rust_noop, m)?)?;
    m.add("StatepipeError", py.get_type::<StatepipeError>())?;
    m.add("ModelError", py.get_type::<ModelError>())?;
    m.add("WorkerError", py.get_type::<WorkerError>())?;
    m.add("PICKLE_PROTOCOL", model::PROTOCOL)?;
    Ok(())
}
