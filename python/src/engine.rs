//! `NativeEngine`: an engine over a Python model, in this process, on
//! spawned or remote workers, or choosing (`Auto`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use serde_bytes::ByteBuf;
use statepipe_cluster::{
    Auto, AutoConfig, Engine as _, Error, IdMap, Joined, Listener, Local, LocalCluster, Master,
    MasterConfig, Secret, ShipCost, StateId, WorkerCommand,
};

use crate::dashboard::{telemetry_of, NativeDashboard};
use crate::elastic;
use crate::interrupt::{interruptible, INTERRUPTED};
use crate::model::{self, PyModel, PyOut};
use crate::{to_py, ModelError, StatepipeError};

/// Starts an `Auto` engine's workers when it moves to them.
type StartFn = Box<dyn FnOnce() -> Result<Vec<Joined>, Error> + Send>;

/// The worker processes an `Auto` engine started, once it moved.
type Spawned = Arc<Mutex<Option<LocalCluster>>>;

pub(crate) enum Inner {
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

/// An engine over a Python model: in this process or over workers.
#[pyclass(module = "statepipe._native")]
pub(crate) struct NativeEngine {
    inner: Mutex<Option<Inner>>,
    step: u64,
    workers: usize,
}

type Evolved = Vec<(u64, Vec<(u64, Py<PyAny>)>)>;

impl NativeEngine {
    /// An engine over a master and, if this engine spawned them, its
    /// worker processes.
    fn on_master(master: Master<PyModel>, cluster: Option<LocalCluster>, workers: usize) -> Self {
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
            let mut master = Master::new(&m, joined, cfg)?;
            // Workers that join later are admitted at the next step.
            master.admit_from(l);
            Ok(master)
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
            Some(Inner::Cluster { master, .. }) => master.staying_workers().len(),
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

    /// Starts `n` more worker processes with `command` (pinned to `pins`
    /// in turn, if any) and admits them between steps, waiting `timeout`
    /// seconds at most for them to join: they evolve states from the next
    /// step on.
    fn add_workers(
        &mut self,
        py: Python<'_>,
        n: usize,
        command: Vec<String>,
        pins: Vec<usize>,
        timeout: f64,
    ) -> PyResult<()> {
        let cmd = worker_command(&command)?;
        {
            let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let inner = guard
                .as_mut()
                .ok_or_else(|| StatepipeError::new_err("the engine is closed"))?;
            // Started on this thread, as `spawn`'s.
            elastic::spawn(inner, &cmd, n, &pins).map_err(to_py)?;
        }
        let timeout = Duration::from_secs_f64(timeout);
        self.with(py, |inner| elastic::admit_spawned(inner, n, timeout))?;
        self.workers += n;
        Ok(())
    }

    /// Retires workers `ids` (indices in the order they joined) between
    /// steps: their states move to the others and they exit 0.
    fn retire_workers(&mut self, py: Python<'_>, ids: Vec<usize>) -> PyResult<()> {
        let n = ids.len();
        self.with(py, |inner| elastic::master(inner)?.retire_workers(&ids))?;
        self.workers = self.workers.saturating_sub(n);
        Ok(())
    }

    /// The workers that take states now (indices in join order).
    fn staying_workers(&mut self, py: Python<'_>) -> PyResult<Vec<usize>> {
        self.with(py, |inner| Ok(elastic::master(inner)?.staying_workers()))
    }

    /// Spawned worker processes that exited since the last call: (pid,
    /// exit code, or minus the signal that ended it).
    fn exited(&self) -> Vec<(u32, i32)> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_mut().map(elastic::exited).unwrap_or_default()
    }

    /// Each worker's counters, in join order (empty in process).
    fn worker_stats(&self) -> Vec<BTreeMap<&'static str, u64>> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        guard
            .as_ref()
            .map(elastic::worker_stats)
            .unwrap_or_default()
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
