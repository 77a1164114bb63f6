//! Where a run's steps go: in this process or on workers, chosen from the
//! cost of the first step.
//!
//! A model whose evolve costs nanoseconds loses to its own messaging when
//! its states are shipped to workers: every state costs the master a frame
//! entry, an encode and a decode, and every step a round trip. [`Auto`]
//! evolves the first step in process, on threads, timing the calls and
//! sizing the states; it then predicts a step's time in process and on
//! workers and moves the run to workers only when the saving over the
//! remaining steps pays for starting them. The move goes through a
//! [`Snapshot`], so the run gives the same bits either way.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::engine::{Children, Engine, Inputs, Outputs};
use crate::error::Error;
use crate::evolve::{Evolve, StateId};
use crate::listen::Joined;
use crate::local::Local;
use crate::master::{Master, MasterConfig};
use crate::registry::encode;
use crate::snapshot::Snapshot;
use crate::telemetry::Telemetry;
use crate::threads::threads_for_first;

/// What [`Auto`] assumes about shipping states to workers: the figures a
/// decision is made from besides the measured evolve cost.
///
/// The defaults come from the event-loop master on loopback (the cluster
/// benchmark's per-step overhead on a 2-core machine); raise them for a
/// slow network.
#[derive(Debug, Clone)]
pub struct ShipCost {
    /// The master's work per state per step (frames, encode, decode).
    pub per_state: Duration,
    /// Per byte of state or output carried per step.
    pub per_byte: Duration,
    /// A step's fixed cost on workers (the round trips that start and end it).
    pub per_step: Duration,
    /// Starting the workers and loading the model on them, per worker.
    pub start_per_worker: Duration,
    /// Starting them, independent of their number.
    pub start: Duration,
}

impl Default for ShipCost {
    fn default() -> Self {
        ShipCost {
            per_state: Duration::from_nanos(1_500),
            per_byte: Duration::from_nanos(2),
            per_step: Duration::from_micros(300),
            start_per_worker: Duration::from_millis(5),
            start: Duration::from_millis(60),
        }
    }
}

/// How [`Auto`] runs and decides.
#[derive(Debug, Clone)]
pub struct AutoConfig {
    /// The master's configuration, used if the run moves to workers; its
    /// seed is the run's seed in process too.
    pub master: MasterConfig,
    /// Threads for steps run in process (at least 1): the most; a step
    /// whose calls are too cheap to share gets fewer (see [`Decision::threads`]).
    pub threads: usize,
    /// Workers the run would get.
    pub workers: usize,
    /// Steps the run will take in all, if known: the saving per step is
    /// weighed against the start-up cost over the steps left. Unknown
    /// counts as many (only the per-step comparison decides).
    pub steps: Option<u64>,
    /// The costs of shipping.
    pub ship: ShipCost,
}

/// Where [`Auto`] put the run, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// True if the run moved to workers.
    pub on_workers: bool,
    /// States evolved in the first step.
    pub states: usize,
    /// Mean time of one evolve call in the first step.
    pub per_call: Duration,
    /// Mean serialised size of a child state and its output.
    pub bytes_per_state: usize,
    /// Predicted master's cost of one state on workers, per step.
    pub ship_per_state: Duration,
    /// Predicted time of a step in process.
    pub step_in_process: Duration,
    /// Predicted time of a step on workers.
    pub step_on_workers: Duration,
    /// Predicted cost of starting the workers.
    pub start: Duration,
    /// Threads in process: one per 500 µs of the first step's calls, at
    /// least 1 and at most [`AutoConfig::threads`] (cold, the first step's
    /// calls overstate the later steps' several times; each later step
    /// then uses one per 100 µs of the last step's calls, up to this).
    pub threads: usize,
    /// Workers.
    pub workers: usize,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        if self.on_workers {
            write!(
                f,
                "on {} workers: an evolve call costs {:.1} µs, so a step should take {:.0} µs \
                 there against {:.0} µs on {} threads here",
                self.workers,
                us(self.per_call),
                us(self.step_on_workers),
                us(self.step_in_process),
                self.threads
            )
        } else {
            write!(
                f,
                "in process on {} thread{}: an evolve call costs {:.2} µs and shipping a state \
                 {:.2} µs, so a step should take {:.0} µs here against {:.0} µs on {} workers",
                self.threads,
                if self.threads == 1 { "" } else { "s" },
                us(self.per_call),
                us(self.ship_per_state),
                us(self.step_in_process),
                us(self.step_on_workers),
                self.workers,
            )?;
            // A start cost of a day or more is a run told to stay (it says
            // nothing about starting workers).
            if self.start < Duration::from_secs(86_400) {
                write!(
                    f,
                    " (+{:.0} ms to start them)",
                    self.start.as_secs_f64() * 1e3
                )?;
            }
            Ok(())
        }
    }
}

enum Place<E: Evolve> {
    /// Before the first step, or after it in process.
    Here(Local<E>),
    /// On workers.
    Workers(Box<Master<E>>),
    /// Only while moving.
    Moving,
}

/// An [`Engine`] that evolves the first step in process and then stays
/// there or moves to workers, whichever its [`Decision`] predicts is
/// faster; the results are the same bits either way.
///
/// `start` is called at most once, when the run moves: it starts the
/// workers (for example [`LocalCluster::spawn`] then `accept`) and
/// returns them joined.
///
/// [`LocalCluster::spawn`]: crate::LocalCluster::spawn
pub struct Auto<E: Evolve, S> {
    model: E,
    cfg: AutoConfig,
    place: Place<E>,
    start: Option<S>,
    decision: Option<Decision>,
    /// Steps evolved in this process (the master counts its own).
    here_steps: u64,
}

impl<E, S> Auto<E, S>
where
    E: Evolve + Clone,
    E::State: Clone,
    S: FnOnce() -> Result<Vec<Joined>, Error>,
{
    /// An engine for `model` that has not decided yet.
    pub fn new(model: E, cfg: AutoConfig, start: S) -> Self {
        let local = Local::new(model.clone(), cfg.master.seed).with_threads(cfg.threads);
        Auto {
            model,
            cfg,
            place: Place::Here(local),
            start: Some(start),
            decision: None,
            here_steps: 0,
        }
    }

    /// An engine that goes on from `snapshot` (of a [`Local`], a
    /// [`Master`] or an `Auto`), deciding again on the next step.
    ///
    /// # Errors
    /// [`Error::Config`] if `cfg.master.seed` is not the snapshot's;
    /// [`Error::Codec`] if a state does not deserialise.
    pub fn resume(model: E, cfg: AutoConfig, snapshot: Snapshot, start: S) -> Result<Self, Error> {
        if cfg.master.seed != snapshot.seed {
            return Err(Error::Config(format!(
                "the snapshot was taken with seed {}, the run has seed {}",
                snapshot.seed, cfg.master.seed
            )));
        }
        let local = Local::resume(model.clone(), snapshot)?.with_threads(cfg.threads);
        Ok(Auto {
            model,
            cfg,
            place: Place::Here(local),
            start: Some(start),
            decision: None,
            here_steps: 0,
        })
    }

    /// When a step evolved in this process starts, if telemetry records it
    /// (a master records its own).
    fn here_started(&self) -> Option<Instant> {
        let here = matches!(self.place, Place::Here(_));
        (here && self.cfg.master.telemetry.is_some()).then(Instant::now)
    }

    /// Records a step evolved in this process, started at `t0`.
    fn here_done(&mut self, t0: Option<Instant>) {
        if let (Some(t0), Some(t)) = (t0, &self.cfg.master.telemetry) {
            self.here_steps += 1;
            t.step_done(self.here_steps, t0.elapsed().as_secs_f64());
        }
    }

    /// The run as it stands (see [`Master::snapshot`]).
    ///
    /// # Errors
    /// As [`Local::snapshot`] or [`Master::snapshot`].
    pub fn snapshot(&mut self) -> Result<Snapshot, Error> {
        match &mut self.place {
            Place::Here(l) => l.snapshot(),
            Place::Workers(m) => m.snapshot(),
            Place::Moving => unreachable!("a snapshot during a move"),
        }
    }

    /// Goes back to `to`, a snapshot of this run (see [`Master::rollback`];
    /// in process, the states and counters are replaced).
    ///
    /// # Errors
    /// As [`Master::rollback`]; [`Error::Codec`] if a state does not
    /// deserialise.
    pub fn rollback(&mut self, to: &Snapshot) -> Result<(), Error> {
        match &mut self.place {
            Place::Here(l) => l.restore(to),
            Place::Workers(m) => m.rollback(to),
            Place::Moving => unreachable!("a rollback during a move"),
        }
    }

    /// The decision, once the first step is done.
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref()
    }

    /// The master, if the run is on workers.
    pub fn master(&self) -> Option<&Master<E>> {
        match &self.place {
            Place::Workers(m) => Some(m),
            _ => None,
        }
    }

    /// Decides from the first step, which evolved `states` parents and
    /// gave `outputs` (a sample of them is sized with the children held).
    fn decide<'o>(&self, states: usize, outputs: impl Iterator<Item = &'o E::Output>) -> Decision
    where
        E::Output: 'o,
    {
        let Place::Here(local) = &self.place else {
            unreachable!("decided once, in process")
        };
        let calls = local.last_call_time();
        let per_call = calls / states.max(1) as u32;
        // Size a sample of the children with their outputs.
        let (mut bytes, mut sampled) = (0usize, 0usize);
        for ((_, s), o) in local.iter().zip(outputs).take(64) {
            if let Ok(o) = encode(o) {
                bytes += encode(s).map_or(0, |b| b.len()) + o.len();
                sampled += 1;
            }
        }
        let bytes_per_state = bytes / sampled.max(1);
        let ship = &self.cfg.ship;
        let threads = threads_for_first(calls, self.cfg.threads);
        let workers = self.cfg.workers.max(1);
        let ship_per_state = ship.per_state + ship.per_byte * bytes_per_state as u32;
        let step_in_process = calls / threads as u32;
        let step_on_workers =
            calls / workers as u32 + ship_per_state * states as u32 + ship.per_step;
        let start = ship.start + ship.start_per_worker * workers as u32;
        let saving = step_in_process
            .saturating_sub(step_on_workers)
            .as_secs_f64();
        let on_workers = saving > 0.0
            && match self.cfg.steps {
                // The first step is done.
                Some(n) => saving * n.saturating_sub(1) as f64 > start.as_secs_f64(),
                None => true,
            };
        Decision {
            on_workers,
            states,
            per_call,
            bytes_per_state,
            ship_per_state,
            step_in_process,
            step_on_workers,
            start,
            threads,
            workers,
        }
    }

    fn move_to_workers(&mut self) -> Result<(), Error> {
        let Place::Here(local) = std::mem::replace(&mut self.place, Place::Moving) else {
            unreachable!("moves once, from process")
        };
        let start = self.start.take().expect("moves once");
        let moved = local.snapshot().and_then(|snapshot| {
            let joined = start()?;
            Master::resume(&self.model, joined, self.cfg.master.clone(), snapshot)
        });
        match moved {
            Ok(master) => {
                self.place = Place::Workers(Box::new(master));
                Ok(())
            }
            Err(e) => {
                // The states are still here: a caller that rolls back
                // (`Auto::rollback`) goes on in process.
                self.place = Place::Here(local);
                Err(e)
            }
        }
    }

    /// Takes decision `d`: moves to workers, or sets the threads here.
    fn follow(&mut self, d: Decision) -> Result<(), Error> {
        let (on_workers, threads) = (d.on_workers, d.threads);
        self.decision = Some(d);
        if on_workers {
            self.move_to_workers()?;
        } else if let Place::Here(local) = &mut self.place {
            local.set_threads(threads);
        }
        Ok(())
    }

    fn engine(&mut self) -> &mut dyn Engine<E> {
        match &mut self.place {
            Place::Here(l) => l,
            Place::Workers(m) => m.as_mut(),
            Place::Moving => unreachable!("an engine call during a move"),
        }
    }
}

impl<E, S> Engine<E> for Auto<E, S>
where
    E: Evolve + Clone,
    E::State: Clone,
    S: FnOnce() -> Result<Vec<Joined>, Error>,
{
    fn reset_states(&mut self, states: Vec<E::State>) -> Result<Vec<StateId>, Error> {
        self.engine().reset_states(states)
    }

    fn evolve_many(&mut self, inputs: Inputs<E>) -> Result<Outputs<E>, Error> {
        let t0 = self.here_started();
        let out = self.engine().evolve_many(inputs)?;
        self.here_done(t0);
        if self.decision.is_none() && !out.is_empty() {
            let d = self.decide(out.len(), out.values().flatten().map(|(_, o)| o));
            self.follow(d)?;
        }
        Ok(out)
    }

    fn evolve_batch(
        &mut self,
        parents: &[StateId],
        inputs: &[E::Input],
        out: &mut Children<E>,
    ) -> Result<(), Error>
    where
        E::Input: Clone,
    {
        let t0 = self.here_started();
        self.engine().evolve_batch(parents, inputs, out)?;
        self.here_done(t0);
        if self.decision.is_none() && !parents.is_empty() {
            let d = self.decide(parents.len(), out.iter().map(|(_, o)| o));
            self.follow(d)?;
        }
        Ok(())
    }

    fn threads(&self) -> usize {
        match &self.place {
            Place::Here(l) => l.threads(),
            _ => 1,
        }
    }

    fn telemetry(&self) -> Option<Telemetry> {
        self.cfg.master.telemetry.clone()
    }

    fn fetch_states(&mut self, ids: &[StateId]) -> Result<HashMap<StateId, E::State>, Error> {
        self.engine().fetch_states(ids)
    }

    fn drop_states(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.engine().drop_states(ids)
    }
}
