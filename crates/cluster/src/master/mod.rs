//! The master: the [`Engine`] API over workers that hold the states.
//!
//! [`Master`] serialises inputs, runs one operation of the [`Scheduler`]
//! to completion through a [`Driver`] (the event loop, or the threaded
//! baseline), and deserialises outputs. It never deserialises a state
//! except in `fetch_states`, where the caller asks for it.

mod driver;
mod event_loop;
pub(crate) mod sched;
mod threaded;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::auth::Secret;
use crate::engine::{Engine, Outputs};
use crate::error::Error;
use crate::evolve::{Evolve, StateId};
use crate::listen::{Joined, Listener};
use crate::protocol::DEFAULT_MAX_FRAME;
use crate::registry::Registry;
use crate::registry::{decode, encode};
use crate::stats::Stats;
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
}

impl Default for MasterConfig {
    fn default() -> Self {
        MasterConfig {
            imp: MasterImpl::EventLoop,
            sched: SchedConfig::default(),
            seed: 0,
            max_frame: DEFAULT_MAX_FRAME,
            failure_grace: Duration::from_millis(500),
        }
    }
}

/// States on workers, evolved by `E`: the [`Engine`] of a cluster.
pub struct Master<E: Evolve> {
    /// A copy of the model (decoded from what the workers got), for its
    /// cost hints.
    model: E,
    sched: Scheduler,
    driver: Box<dyn Driver>,
    stats: Stats,
    closed: bool,
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
            model: decode(&params)?,
            stats: Stats {
                workers: vec![Default::default(); addrs.len()],
                master_busy: driver.busy().map(|_| Duration::ZERO),
                ..Stats::default()
            },
            sched: Scheduler::new(&addrs, cfg.seed, cfg.sched.clone()),
            driver,
            closed: false,
        };
        m.sched.begin_setup(E::NAME, &params)?;
        m.driver.run(&mut m.sched);
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

    /// Counters so far.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.workers = self.sched.worker_stats();
        s.lost_workers = self.sched.lost_workers();
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
        let bytes = states.iter().map(encode).collect::<Result<Vec<_>, _>>()?;
        let ids = self.sched.begin_reset(bytes)?;
        self.driver.run(&mut self.sched);
        self.sched.finish()?;
        Ok(ids)
    }

    fn evolve_many(&mut self, inputs: HashMap<StateId, E::Input>) -> Result<Outputs<E>, Error> {
        let inputs = inputs
            .into_iter()
            .map(|(id, i)| Ok((id, encode(&i)?, self.model.expected_cost(&i))))
            .collect::<Result<Vec<_>, Error>>()?;
        let t0 = Instant::now();
        let b0 = self.driver.busy();
        self.sched.begin_evolve(inputs)?;
        self.driver.run(&mut self.sched);
        self.stats.evolve_wall += t0.elapsed();
        self.stats.steps += 1;
        if let (Some(b0), Some(b1), Some(acc)) =
            (b0, self.driver.busy(), self.stats.master_busy.as_mut())
        {
            *acc += b1 - b0;
        }
        let raw = self.sched.finish_evolve()?;
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
        self.sched.begin_fetch(ids)?;
        self.driver.run(&mut self.sched);
        self.sched
            .finish_fetch()?
            .into_iter()
            .map(|(id, b)| Ok((id, decode(&b)?)))
            .collect()
    }

    fn drop_states(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.sched.begin_drop(ids)?;
        self.driver.run(&mut self.sched);
        self.sched.finish()
    }
}
