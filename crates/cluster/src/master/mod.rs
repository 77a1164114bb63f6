//! The master: the [`Engine`] API over workers that hold the states.
//!
//! [`Master`] serialises inputs, runs one operation of the [`Scheduler`]
//! to completion through a [`Driver`] (the event loop, or the threaded
//! baseline), and deserialises outputs. It never deserialises a state
//! except in `fetch_states`, where the caller asks for it.

mod driver;
mod event_loop;
pub(crate) mod sched;

use crate::snapshot::Snapshot;
mod threaded;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::auth::Secret;
use crate::engine::{Engine, Inputs, Outputs};
use crate::error::Error;
use crate::evolve::{Evolve, StateId};
use crate::listen::{Joined, Joiners, Listener};
use crate::protocol::DEFAULT_MAX_FRAME;
use crate::registry::Registry;
use crate::registry::{decode, encode};
use crate::stats::Stats;
use crate::telemetry::Telemetry;
use driver::Driver;
use sched::{SchedConfig, Scheduler};

/// Which master drives the sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterImpl {
    /// One thread, one `mio` event loop (the default).
    EventLoop,
    /// A thread per worker around a shared lock (the baseline).
    Threaded,
}

impl MasterImpl {
    /// The name used in benchmark reports.
    pub fn name(self) -> &'static str {
        match self {
            MasterImpl::EventLoop => "event-loop",
            MasterImpl::Threaded => "threaded",
        }
    }
}

/// Everything a master is built with.
#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// Which master drives the sockets.
    pub imp: MasterImpl,
    /// Batching, placement, stealing and deadlines.
    pub sched: SchedConfig,
    /// The run seed every random number derives from.
    pub seed: u64,
    /// The largest frame accepted from a worker, in bytes.
    pub max_frame: u32,
    /// After a worker is lost, how long to wait for the others' answers
    /// before giving up on them too.
    pub failure_grace: Duration,
    /// A flag that ends the master's operation once set (by a signal
    /// handler or another thread: a caller's Ctrl-C, say). Within the
    /// drivers' check period (100 ms) of the flag the call returns
    /// [`Error::Interrupted`], however long the evolve calls on the
    /// workers would still take, and the master gives up on its workers
    /// where they stand: it sends them nothing more and closes their
    /// connections, which ends each worker in the middle of whatever it
    /// was doing (it exits with [`Error::Disconnected`]). The states go
    /// with them; what survives is the last [`Master::snapshot`] the
    /// caller kept. Every later call returns [`Error::Interrupted`] too.
    /// `None`: nothing stops an operation but its end.
    pub stop: Option<Arc<AtomicBool>>,
    /// Where the master shows the run as it goes (a dashboard reads it
    /// from another thread): steps and their times, each answered batch
    /// and move, the workers' counters, joins, losses, recoveries,
    /// promotions, straggler re-runs, rollbacks and the end. The particle
    /// filter adds its likelihood and effective sample size
    /// ([`Engine::telemetry`]). It costs a short lock per batch, move,
    /// step and event, and one pass over the states' places per
    /// operation; results do not change. `None`: nothing is recorded.
    pub telemetry: Option<Telemetry>,
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            imp: MasterImpl::EventLoop,
            sched: SchedConfig::default(),
            seed: 0,
            max_frame: DEFAULT_MAX_FRAME,
            failure_grace: Duration::from_millis(500),
            stop: None,
            telemetry: None,
        }
    }
}

/// States on workers, evolved by `E`: the [`Engine`] of a cluster.
pub struct Master<E: Evolve> {
    /// The model as workers get it, for workers admitted later.
    params: Vec<u8>,
    /// The workers that joined mid-run, accepted and authenticated in the
    /// background ([`Master::admit_from`]).
    joiners: Option<Joiners>,
    /// A copy of the model (decoded from what the workers got), for its
    /// cost hints.
    model: E,
    sched: Scheduler,
    driver: Box<dyn Driver>,
    stats: Stats,
    closed: bool,
    /// An operation was stopped ([`MasterConfig::stop`]): the workers are
    /// gone, and every call fails.
    interrupted: bool,
}

impl<E: Evolve> Master<E> {
    /// Takes over joined workers and loads `model` on each.
    ///
    /// # Errors
    /// If there are no workers, a socket fails, or a worker cannot build
    /// the model (it then answers `Failed` and the error names it).
    pub fn new(model: &E, workers: Vec<Joined>, cfg: MasterConfig) -> Result<Self, Error> {
        if workers.is_empty() {
            return Err(Error::NoWorkers);
        }
        let addrs: Vec<_> = workers.iter().map(|j| j.addr).collect();
        let streams: Vec<_> = workers.into_iter().map(|j| j.stream).collect();
        let driver: Box<dyn Driver> = match cfg.imp {
            MasterImpl::EventLoop => Box::new(event_loop::EventLoop::new(
                streams,
                cfg.max_frame,
                cfg.failure_grace,
            )?),
            MasterImpl::Threaded => Box::new(threaded::Threaded::new(
                streams,
                cfg.max_frame,
                cfg.failure_grace,
            )?),
        };
        let params = encode(model)?;
        let mut m = Master {
            params: params.clone(),
            joiners: None,
            model: decode(&params)?,
            stats: Stats {
                workers: vec![Default::default(); addrs.len()],
                master_busy: driver.busy().map(|_| Duration::ZERO),
                ..Stats::default()
            },
            sched: Scheduler::new(&addrs, cfg.seed, cfg.sched.clone()),
            driver,
            closed: false,
            interrupted: false,
        };
        m.sched.stop = cfg.stop;
        if let Some(t) = cfg.telemetry {
            m.sched.set_telemetry(t);
        }
        m.sched.begin_setup(E::NAME, &params)?;
        m.driver.run(&mut m.sched);
        m.go_on()?;
        m.sched.finish()?;
        Ok(m)
    }

    /// A master over `n` workers running as threads of this process,
    /// connected over loopback TCP like remote ones (tests, and machines
    /// where one process is all there is).
    ///
    /// # Errors
    /// If binding, joining or setup fails.
    pub fn on_threads(
        model: &E,
        n: usize,
        registry: Registry,
        cfg: MasterConfig,
    ) -> Result<Self, Error> {
        let secret = Secret::random();
        let l = Listener::bind("127.0.0.1:0", secret.clone())?;
        let addr = l.local_addr()?;
        for _ in 0..n {
            // Detached: each thread ends when the master closes its connection.
            let _ = crate::worker::spawn_thread(addr, secret.clone(), registry.clone());
        }
        let joined = l.accept(n, Duration::from_secs(30))?;
        Master::new(model, joined, cfg)
    }

    /// The run as it stands between operations: the seed, the step and
    /// reset counters, and every live state's bytes. [`Master::resume`]
    /// takes it up again, with any number of workers, and the rest of the
    /// run gives the same bits as if it had never stopped. Write it where
    /// it survives the master (the caller's choice of file, atomically).
    ///
    /// With `Recovery::MasterCopy` the bytes are the master's copies; with
    /// `Recovery::Buddy` they are fetched from the workers (every state
    /// crosses the network once).
    ///
    /// # Errors
    /// [`Error::Config`] with `Recovery::Off` (the master keeps no copies,
    /// and a lost worker would make the snapshot incomplete); as a fetch
    /// with `Recovery::Buddy`.
    pub fn snapshot(&mut self) -> Result<Snapshot, Error> {
        self.go_on()?;
        if let Some(s) = self.sched.snapshot() {
            return Ok(s);
        }
        if !self.sched.recovering() {
            return Err(Error::Config(
                "a snapshot needs recovery on (Recovery::MasterCopy or Recovery::Buddy)".into(),
            ));
        }
        let ids = self.sched.live_ids();
        self.sched.begin_fetch(&ids)?;
        self.settle()?;
        let states = self.sched.finish_fetch()?;
        Ok(self.sched.snapshot_of(states))
    }

    /// Runs the operation begun on the scheduler to its end, then (with
    /// `Recovery::Buddy`) the replication rounds that commit its states.
    ///
    /// # Errors
    /// [`Error::Interrupted`] if the stop flag was set meanwhile.
    fn settle(&mut self) -> Result<(), Error> {
        self.driver.run(&mut self.sched);
        self.go_on()?;
        // Workers that asked to leave: their states move to the others
        // first, then the replicas are made without them, then they go.
        while self.sched.begin_evacuate() {
            self.driver.run(&mut self.sched);
            self.go_on()?;
        }
        while self.sched.begin_replicate() {
            self.driver.run(&mut self.sched);
            self.go_on()?;
        }
        if self.sched.release_leavers() > 0 {
            // Sends their `Shutdown`s.
            self.driver.run(&mut self.sched);
            self.go_on()?;
        }
        self.sched.publish_telemetry();
        Ok(())
    }

    /// `Ok` unless an operation was stopped: then the workers are given up
    /// (the first time) and the call fails.
    fn go_on(&mut self) -> Result<(), Error> {
        if !self.interrupted && !self.sched.stopped() {
            return Ok(());
        }
        if !self.interrupted {
            self.interrupted = true;
            self.sched.abort();
            self.close();
            tracing::warn!("stopped by the caller; the workers were let go");
        }
        Err(Error::Interrupted)
    }

    /// Takes over joined workers, loads `model` on each, and places the
    /// states of `snapshot` on them, so that the run goes on where the
    /// snapshot was taken.
    ///
    /// # Errors
    /// As [`Master::new`]; [`Error::Config`] if `cfg.seed` is not the
    /// snapshot's (the rest of the run would not be the same run).
    pub fn resume(
        model: &E,
        workers: Vec<Joined>,
        cfg: MasterConfig,
        snapshot: Snapshot,
    ) -> Result<Self, Error> {
        if cfg.seed != snapshot.seed {
            return Err(Error::Config(format!(
                "the snapshot was taken with seed {}, the master has seed {}",
                snapshot.seed, cfg.seed
            )));
        }
        let mut m = Master::new(model, workers, cfg)?;
        m.sched
            .begin_restore(snapshot.step, snapshot.epoch, snapshot.states)?;
        m.settle()?;
        m.sched.finish()?;
        Ok(m)
    }

    /// Goes back to `to`, a snapshot of this run ([`Master::snapshot`]),
    /// on the workers this master still has: every state it holds now is
    /// dropped, the snapshot's are placed under their ids, and the step and
    /// reset counters are the snapshot's again, so the run goes on from
    /// there with the bits it gave the first time. This is what a driver
    /// does when an operation failed with [`Error::WorkerLost`] (no copy of
    /// some state survived), together with going back to its own state of
    /// that moment (`pf::run_checkpointed` does both). Counted in
    /// [`Stats::rollbacks`].
    ///
    /// Answers still owed from the failed operation are waited for first
    /// (a silent worker is lost after its deadline, as in any operation),
    /// so none can meet the restored states. A worker lost while dropping
    /// is no matter (its states were being dropped); one lost while placing
    /// is recovered like any loss, or fails the rollback.
    ///
    /// # Errors
    /// [`Error::Config`] for a snapshot of another seed;
    /// [`Error::NoWorkers`] when no worker is left; [`Error::WorkerLost`]
    /// when workers are lost while the snapshot's states are placed and
    /// recovery cannot help (rolling back again may).
    pub fn rollback(&mut self, to: &Snapshot) -> Result<(), Error> {
        self.go_on()?;
        if to.seed != self.sched.seed() {
            return Err(Error::Config(format!(
                "the snapshot was taken with seed {}, the master has seed {}",
                to.seed,
                self.sched.seed()
            )));
        }
        // Until an operation dropping everything ends without a loss: a
        // failed one may have stopped waiting for some answers.
        loop {
            self.sched.begin_clear()?;
            self.settle()?;
            match self.sched.finish() {
                Err(Error::WorkerLost(_)) => continue,
                r => r?,
            }
            break;
        }
        self.sched
            .begin_restore(to.step, to.epoch, to.states.clone())?;
        self.settle()?;
        self.sched.finish()?;
        self.stats.rollbacks += 1;
        if let Some(t) = self.sched.telemetry() {
            t.rolled_back(to.step, to.states.len());
        }
        tracing::warn!(
            step = to.step,
            states = to.states.len(),
            "rolled back to the snapshot after step {}",
            to.step
        );
        Ok(())
    }

    /// Admits more workers between operations: they get the model now and
    /// work from the next step on (the rebalance at a step's start and
    /// steals give it to them). Results do not change: they never depend
    /// on where a state is evolved.
    ///
    /// # Errors
    /// If a socket fails, a worker cannot build the model, or the driver
    /// takes no workers mid-run (the threaded master).
    pub fn admit(&mut self, workers: Vec<Joined>) -> Result<(), Error> {
        self.go_on()?;
        if workers.is_empty() {
            return Ok(());
        }
        let addrs: Vec<_> = workers.iter().map(|j| j.addr).collect();
        self.driver
            .add(workers.into_iter().map(|j| j.stream).collect())?;
        self.sched.begin_admit(&addrs, E::NAME, &self.params)?;
        self.settle()?;
        self.sched.finish()?;
        tracing::info!(joined = addrs.len(), "workers admitted");
        Ok(())
    }

    /// Retires workers `ids` (indices into [`Stats::workers`], the order
    /// they joined), between operations: the master's own scale-in. Each
    /// goes the way of a worker that asked to leave (SIGTERM): it is
    /// marked leaving, its states move to the workers that stay as a steal
    /// moves them, a replication round without it commits
    /// (`Recovery::Buddy`), and it is told to shut down: its `serve` returns
    /// `Ok` and its process exits 0. Nothing is lost or recovered, so the
    /// rest of the run gives the bits it would have given without the
    /// retirement. Returns when they are gone ([`WorkerStats::left`]).
    ///
    /// [`WorkerStats::left`]: crate::WorkerStats::left
    ///
    /// # Errors
    /// [`Error::Config`], with nothing retired, when an index names no
    /// worker, one that is lost, gone or leaving, or when no worker would
    /// stay ([`staying_workers`](Self::staying_workers) lists those that
    /// can go); as any operation when a worker is lost meanwhile.
    pub fn retire_workers(&mut self, ids: &[usize]) -> Result<(), Error> {
        self.go_on()?;
        self.sched.begin_retire(ids)?;
        self.settle()?;
        self.sched.finish()?;
        tracing::info!(retired = ids.len(), "workers retired");
        Ok(())
    }

    /// The workers that take states now: connected, neither lost nor
    /// leaving (indices into [`Stats::workers`]).
    pub fn staying_workers(&self) -> Vec<usize> {
        self.sched.staying()
    }

    /// Keeps `listener` and, at the start of every `evolve_many`, admits
    /// the workers that joined it since (elastic workers).
    pub fn admit_from(&mut self, listener: Listener) {
        // Challenged as they come, also during a long step (a worker gives
        // up on a connection nobody challenges).
        self.joiners = Some(listener.in_background());
    }

    /// Admits whoever joined the listener since the last step.
    fn admit_joined(&mut self) -> Result<(), Error> {
        let joined = match &self.joiners {
            Some(j) => j.take(),
            None => return Ok(()),
        };
        let first = self.sched.worker_stats().len();
        match self.admit(joined) {
            // A newcomer that cannot run the model (another build, a host
            // its model's `ready` refuses) or that went away while joining
            // held nothing and owed nothing: the run goes on without it.
            Err(Error::WorkerLost(l))
                if l.worker >= first
                    && l.lost.is_empty()
                    && l.unfinished.is_empty()
                    && l.others.iter().all(|o| o.0 >= first) =>
            {
                tracing::warn!(
                    worker = l.worker,
                    addr = %l.addr,
                    "a worker that joined was not admitted: {}; going on without it",
                    l.reason
                );
                Ok(())
            }
            r => r,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.workers = self.sched.worker_stats();
        s.recovered_at = self.sched.recovered_at().to_vec();
        s
    }

    /// Tells every worker to exit; dropping the master does the same.
    pub fn shutdown(mut self) {
        self.close();
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.driver.close(&mut self.sched);
            if let Some(t) = self.sched.telemetry() {
                t.finish();
            }
        }
    }
}

impl<E: Evolve> Drop for Master<E> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<E: Evolve> Engine<E> for Master<E> {
    fn reset_states(&mut self, states: Vec<E::State>) -> Result<Vec<StateId>, Error> {
        self.go_on()?;
        let bytes = states.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        let ids = self.sched.begin_reset(bytes)?;
        self.settle()?;
        self.sched.finish()?;
        Ok(ids)
    }

    fn evolve_many(&mut self, inputs: Inputs<E>) -> Result<Outputs<E>, Error> {
        self.go_on()?;
        self.admit_joined()?;
        let inputs = inputs
            .into_iter()
            .map(|(id, i)| Ok((id, encode(&i)?, self.model.expected_cost(&i))))
            .collect::<Result<Vec<_>, Error>>()?;
        let t0 = Instant::now();
        let b0 = self.driver.busy();
        self.sched.begin_evolve(inputs)?;
        self.settle()?;
        self.stats.evolve_wall += t0.elapsed();
        self.stats.steps += 1;
        if let (Some(b0), Some(b1), Some(acc)) =
            (b0, self.driver.busy(), self.stats.master_busy.as_mut())
        {
            *acc += b1 - b0;
        }
        let raw = self.sched.finish_evolve()?;
        if let Some(t) = self.sched.telemetry() {
            t.step_done(self.sched.step(), t0.elapsed().as_secs_f64());
        }
        raw.into_iter()
            .map(|(p, kids)| {
                let kids = kids
                    .into_iter()
                    .map(|(c, o)| Ok((c, decode(&o)?)))
                    .collect::<Result<Vec<_>, Error>>()?;
                Ok((p, kids))
            })
            .collect()
    }

    fn fetch_states(&mut self, ids: &[StateId]) -> Result<HashMap<StateId, E::State>, Error> {
        self.go_on()?;
        self.sched.begin_fetch(ids)?;
        self.settle()?;
        self.sched
            .finish_fetch()?
            .into_iter()
            .map(|(id, b)| Ok((id, decode(&b)?)))
            .collect()
    }

    fn drop_states(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.go_on()?;
        self.sched.begin_drop(ids)?;
        self.settle()?;
        self.sched.finish()
    }

    fn telemetry(&self) -> Option<Telemetry> {
        self.sched.telemetry().cloned()
    }
}
