//! The master's state machine, shared by both masters: responses in,
//! requests out. It does no I/O; a driver feeds it frames with
//! [`Scheduler::on_frame`] and sends what it leaves in [`Scheduler::out`].
//!
//! Invariants:
//! - `location` is the truth of where each live state is; a state in a
//!   `Remove` in flight is still located at its victim until `Removed` comes.
//! - each worker answers requests in order, so `in_flight` is a FIFO matched
//!   against responses; any mismatch is a protocol violation.
//! - during an evolve, a worker's `pending` is non-empty only while its
//!   pipeline is full (`refill` sends otherwise), so stealing only ever
//!   takes states no request names yet.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Instant;

use crate::error::{Error, WorkerLost};
use crate::evolve::{root_id, StateId};
use crate::protocol::{self, msg, Kind};
use crate::stats::WorkerStats;

mod finish;

/// Index of a worker connection.
pub type WorkerId = usize;

/// Evolve batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// Always this many states per request (at least 1).
    Fixed(usize),
    /// `ceil(2 × rtt / per-state evolve time)`, both measured per worker,
    /// within `1..=max`, and at most half the worker's queued states.
    Adaptive { max: usize },
}

/// Where `reset_states` puts states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Contiguous equal chunks, one per worker.
    Spread,
    /// Everything on the first worker (forces steals; for tests).
    First,
}

/// Scheduling knobs.
#[derive(Debug, Clone)]
pub struct SchedConfig {
    pub batch: Batch,
    /// Evolve requests in flight per worker (2 hides one round trip).
    pub pipeline: usize,
    /// Move queued states to idle workers.
    pub steal: bool,
    pub placement: Placement,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            batch: Batch::Adaptive { max: 64 },
            pipeline: 2,
            steal: true,
            placement: Placement::Spread,
        }
    }
}

enum Req {
    Setup,
    Evolve {
        ids: Vec<StateId>,
        step: u64,
        sent: Instant,
        solo: bool,
    },
    Add(u32),
    Remove {
        ids: Vec<StateId>,
        thief: WorkerId,
        step: u64,
    },
    Drop,
    Fetch(Vec<StateId>),
}

struct Slot {
    addr: SocketAddr,
    alive: bool,
    pending: Vec<StateId>,
    in_flight: VecDeque<Req>,
    evolving: usize,
    stealing: bool,
    per_state_ns: Option<f64>,
    rtt_ns: Option<f64>,
    stats: WorkerStats,
}

/// Outcome of an evolve: children and outputs per parent.
pub type RawResults = HashMap<StateId, Vec<(StateId, Vec<u8>)>>;

/// The master's bookkeeping.
pub struct Scheduler {
    slots: Vec<Slot>,
    location: HashMap<StateId, WorkerId>,
    seed: u64,
    step: u64,
    epoch: u64,
    evolving: bool,
    inputs: HashMap<StateId, Vec<u8>>,
    remaining: usize,
    results: RawResults,
    fetched: Vec<(StateId, Vec<u8>)>,
    lost: Option<WorkerLost>,
    failed_at: Option<Instant>,
    collision: Option<StateId>,
    idle: Vec<WorkerId>,
    cfg: SchedConfig,
    /// Frames to send, in order, per destination.
    pub out: Vec<(WorkerId, Vec<u8>)>,
}

impl Scheduler {
    pub fn new(addrs: &[SocketAddr], seed: u64, cfg: SchedConfig) -> Self {
        let slots = addrs
            .iter()
            .map(|&addr| Slot {
                addr,
                alive: true,
                pending: Vec::new(),
                in_flight: VecDeque::new(),
                evolving: 0,
                stealing: false,
                per_state_ns: None,
                rtt_ns: None,
                stats: WorkerStats::default(),
            })
            .collect();
        Scheduler {
            slots,
            location: HashMap::new(),
            seed,
            step: 0,
            epoch: 0,
            evolving: false,
            inputs: HashMap::new(),
            remaining: 0,
            results: HashMap::new(),
            fetched: Vec::new(),
            lost: None,
            failed_at: None,
            collision: None,
            idle: Vec::new(),
            cfg,
            out: Vec::new(),
        }
    }

    /// Number of worker connections, dead ones included.
    pub fn workers(&self) -> usize {
        self.slots.len()
    }

    /// Per-worker counters.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        self.slots.iter().map(|s| s.stats.clone()).collect()
    }

    /// Whether every live worker has answered every request.
    pub fn is_quiet(&self) -> bool {
        self.slots
            .iter()
            .all(|s| !s.alive || s.in_flight.is_empty())
    }

    /// When the current operation failed, if it did.
    pub fn failed_at(&self) -> Option<Instant> {
        self.failed_at
    }

    fn send(&mut self, w: WorkerId, frame: Vec<u8>, req: Req) {
        let s = &mut self.slots[w];
        s.stats.bytes_out += frame.len() as u64;
        s.in_flight.push_back(req);
        self.out.push((w, frame));
    }

    fn begin_op(&mut self) -> Result<(), Error> {
        self.lost = None;
        self.failed_at = None;
        self.collision = None;
        self.evolving = false;
        for s in &mut self.slots {
            s.stealing = false;
        }
        if self.slots.iter().any(|s| s.alive) {
            Ok(())
        } else {
            Err(Error::NoWorkers)
        }
    }

    fn unknown(&self, ids: impl Iterator<Item = StateId>) -> Result<(), Error> {
        let unknown: Vec<StateId> = ids.filter(|id| !self.location.contains_key(id)).collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(Error::UnknownStates(unknown))
        }
    }

    /// Sends the model to every worker.
    pub fn begin_setup(&mut self, model: &str, params: &[u8]) -> Result<(), Error> {
        self.begin_op()?;
        for w in 0..self.slots.len() {
            let mut f = Vec::new();
            let st = protocol::begin(&mut f, Kind::Setup);
            msg::put_setup(
                &mut f,
                &msg::Setup {
                    seed: self.seed,
                    model,
                    params,
                },
            );
            protocol::finish(&mut f, st);
            self.send(w, f, Req::Setup);
        }
        Ok(())
    }

    /// Drops every state and places `states` (serialised); returns their ids.
    pub fn begin_reset(&mut self, states: Vec<Vec<u8>>) -> Result<Vec<StateId>, Error> {
        self.begin_op()?;
        let mut held: Vec<Vec<StateId>> = vec![Vec::new(); self.slots.len()];
        for (&id, &w) in &self.location {
            held[w].push(id);
        }
        self.location.clear();
        for (w, ids) in held.into_iter().enumerate() {
            if !ids.is_empty() && self.slots[w].alive {
                self.send_ids(w, Kind::Drop, &ids, Req::Drop);
            }
        }
        self.epoch += 1;
        let live: Vec<WorkerId> = (0..self.slots.len())
            .filter(|&w| self.slots[w].alive)
            .collect();
        let n = states.len();
        let ids: Vec<StateId> = (0..n as u64)
            .map(|i| root_id(self.seed, self.epoch, i))
            .collect();
        let mut start = 0;
        for (k, &w) in live.iter().enumerate() {
            let end = match self.cfg.placement {
                Placement::Spread => n * (k + 1) / live.len(),
                Placement::First => n,
            };
            if end > start {
                let mut f = Vec::new();
                let st = protocol::begin(&mut f, Kind::Add);
                msg::put_states(&mut f, (start..end).map(|i| (ids[i], states[i].as_slice())));
                protocol::finish(&mut f, st);
                for &id in &ids[start..end] {
                    if self.location.insert(id, w).is_some() {
                        self.collision = Some(id);
                    }
                }
                self.send(w, f, Req::Add((end - start) as u32));
            }
            start = end;
        }
        Ok(ids)
    }

    fn send_ids(&mut self, w: WorkerId, kind: Kind, ids: &[StateId], req: Req) {
        let mut f = Vec::new();
        let st = protocol::begin(&mut f, kind);
        msg::put_ids(&mut f, ids);
        protocol::finish(&mut f, st);
        self.send(w, f, req);
    }

    fn by_worker(&self, ids: &[StateId]) -> Vec<Vec<StateId>> {
        let mut per: Vec<Vec<StateId>> = vec![Vec::new(); self.slots.len()];
        for id in ids {
            per[self.location[id]].push(*id);
        }
        per
    }

    /// Asks for copies of `ids`.
    pub fn begin_fetch(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.begin_op()?;
        self.unknown(ids.iter().copied())?;
        self.fetched.clear();
        for (w, ids) in self.by_worker(ids).into_iter().enumerate() {
            if !ids.is_empty() {
                self.send_ids(w, Kind::Fetch, &ids.clone(), Req::Fetch(ids));
            }
        }
        Ok(())
    }

    /// Forgets `ids` here and on their workers.
    pub fn begin_drop(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.begin_op()?;
        self.unknown(ids.iter().copied())?;
        for (w, ids) in self.by_worker(ids).into_iter().enumerate() {
            if !ids.is_empty() {
                for id in &ids {
                    self.location.remove(id);
                }
                self.send_ids(w, Kind::Drop, &ids, Req::Drop);
            }
        }
        Ok(())
    }

    /// Starts one step: evolve each state with its serialised input.
    pub fn begin_evolve(&mut self, mut inputs: Vec<(StateId, Vec<u8>)>) -> Result<(), Error> {
        self.begin_op()?;
        self.unknown(inputs.iter().map(|p| p.0))?;
        inputs.sort_unstable_by_key(|p| p.0);
        self.step += 1;
        self.evolving = true;
        self.results = HashMap::with_capacity(inputs.len());
        self.remaining = inputs.len();
        for (id, input) in inputs {
            self.slots[self.location[&id]].pending.push(id);
            self.inputs.insert(id, input);
        }
        self.idle.clear();
        for w in 0..self.slots.len() {
            self.refill(w);
        }
        self.retry_idle();
        Ok(())
    }

    fn batch_size(&self, w: WorkerId) -> usize {
        let s = &self.slots[w];
        match self.cfg.batch {
            Batch::Fixed(n) => n.max(1),
            Batch::Adaptive { max } => {
                let want = match (s.per_state_ns, s.rtt_ns) {
                    (Some(t), Some(rtt)) if t > 0.0 => (2.0 * rtt / t).ceil() as usize,
                    _ => 1,
                };
                want.clamp(1, max.max(1))
                    .min(s.pending.len().div_ceil(2).max(1))
            }
        }
    }

    /// Sends batches to `w` until its pipeline is full, or steals for it.
    fn refill(&mut self, w: WorkerId) {
        if !self.evolving || self.failed_at.is_some() || !self.slots[w].alive {
            return;
        }
        while self.slots[w].evolving < self.cfg.pipeline.max(1) && !self.slots[w].pending.is_empty()
        {
            let b = self.batch_size(w);
            let s = &mut self.slots[w];
            let at = s.pending.len().saturating_sub(b);
            let ids = s.pending.split_off(at);
            let solo = s.evolving == 0;
            s.evolving += 1;
            let mut f = Vec::new();
            let st = protocol::begin(&mut f, Kind::Evolve);
            msg::put_u64(&mut f, self.step);
            msg::put_u32(&mut f, ids.len() as u32);
            for id in &ids {
                msg::put_u64(&mut f, id.0);
                msg::put_bytes(
                    &mut f,
                    &self
                        .inputs
                        .remove(id)
                        .expect("every pending state has an input"),
                );
            }
            protocol::finish(&mut f, st);
            let req = Req::Evolve {
                ids,
                step: self.step,
                sent: Instant::now(),
                solo,
            };
            self.send(w, f, req);
        }
        let s = &self.slots[w];
        if s.pending.is_empty()
            && s.evolving < self.cfg.pipeline.max(1)
            && !s.stealing
            && !self.steal_for(w)
        {
            self.idle.push(w);
        }
    }

    /// Moves half the queued states of the worker with most queued to `thief`.
    fn steal_for(&mut self, thief: WorkerId) -> bool {
        if !self.cfg.steal || self.remaining == 0 {
            return false;
        }
        let victim = (0..self.slots.len())
            .filter(|&v| v != thief && self.slots[v].alive)
            .max_by_key(|&v| (self.slots[v].pending.len(), std::cmp::Reverse(v)));
        let Some(victim) = victim.filter(|&v| !self.slots[v].pending.is_empty()) else {
            return false;
        };
        let p = &mut self.slots[victim].pending;
        let take = p.len().div_ceil(2);
        let ids = p.split_off(p.len() - take);
        self.slots[victim].stats.steals_out += 1;
        self.slots[thief].stats.steals_in += 1;
        self.slots[thief].stats.stolen_states += ids.len() as u64;
        self.slots[thief].stealing = true;
        let step = self.step;
        self.send_ids(
            victim,
            Kind::Remove,
            &ids.clone(),
            Req::Remove { ids, thief, step },
        );
        true
    }

    fn retry_idle(&mut self) {
        // O(workers) check first: without it every event at the end of a
        // step cost O(idle × workers) victim scans.
        if self.idle.is_empty()
            || self.failed_at.is_some()
            || self.slots.iter().all(|s| s.pending.is_empty())
        {
            return;
        }
        for w in std::mem::take(&mut self.idle) {
            self.refill(w);
        }
    }

    /// Handles one response frame from `w`.
    ///
    /// # Errors
    /// A reason to drop the connection: a malformed payload, a response
    /// nobody asked for, or a `Failed` frame.
    pub fn on_frame(&mut self, w: WorkerId, kind: Kind, p: &[u8]) -> Result<(), String> {
        self.slots[w].stats.bytes_in += (p.len() + protocol::HEADER_LEN) as u64;
        if kind == Kind::Failed {
            return Err(format!("worker reported: {}", String::from_utf8_lossy(p)));
        }
        let req = self.slots[w]
            .in_flight
            .pop_front()
            .ok_or_else(|| format!("unrequested {kind:?} frame"))?;
        let bad = |e: msg::MsgError| format!("malformed {kind:?}: {e}");
        match (req, kind) {
            (Req::Setup, Kind::SetupOk) | (Req::Drop, Kind::Dropped) => {}
            (Req::Add(n), Kind::Added) => {
                let got = msg::count(p).map_err(bad)?;
                if got != n {
                    return Err(format!("added {got} states of {n}"));
                }
            }
            (Req::Fetch(ids), Kind::Fetched) => {
                let got = msg::states(p).map_err(bad)?;
                if got.len() != ids.len() || got.iter().zip(&ids).any(|(g, i)| g.0 != *i) {
                    return Err("fetched other states than asked".into());
                }
                self.fetched
                    .extend(got.into_iter().map(|(id, b)| (id, b.to_vec())));
            }
            (
                Req::Evolve {
                    ids,
                    step,
                    sent,
                    solo,
                },
                Kind::Evolved,
            ) => {
                let e = msg::evolved(p).map_err(bad)?;
                if e.parents.len() != ids.len()
                    || e.parents.iter().zip(&ids).any(|(g, i)| g.0 != *i)
                {
                    return Err("evolved other states than asked".into());
                }
                self.on_evolved(w, e, step, sent, solo);
            }
            (Req::Remove { ids, thief, step }, Kind::Removed) => {
                let got = msg::states(p).map_err(bad)?;
                if got.len() != ids.len() || got.iter().zip(&ids).any(|(g, i)| g.0 != *i) {
                    return Err("removed other states than asked".into());
                }
                self.on_removed(w, ids, thief, step, p);
            }
            (_, k) => return Err(format!("unexpected {k:?} frame")),
        }
        self.retry_idle();
        Ok(())
    }

    fn on_evolved(
        &mut self,
        w: WorkerId,
        e: msg::Evolved<'_>,
        step: u64,
        sent: Instant,
        solo: bool,
    ) {
        let current = self.evolving && step == self.step;
        let n = e.parents.len();
        let s = &mut self.slots[w];
        s.evolving = s.evolving.saturating_sub(1);
        s.stats.busy_ns += e.busy_ns;
        s.stats.evolved += n as u64;
        s.stats.batches += 1;
        if n > 0 {
            let t = e.busy_ns as f64 / n as f64;
            s.per_state_ns = Some(s.per_state_ns.map_or(t, |o| 0.8 * o + 0.2 * t));
        }
        if solo {
            let rtt = (sent.elapsed().as_nanos() as f64 - e.busy_ns as f64).max(0.0);
            s.rtt_ns = Some(s.rtt_ns.map_or(rtt, |o| 0.8 * o + 0.2 * rtt));
        }
        let mut orphans = Vec::new();
        for (parent, children) in e.parents {
            self.location.remove(&parent);
            for &(c, _) in &children {
                if self.location.insert(c, w).is_some() {
                    self.collision = Some(c);
                }
            }
            if current {
                self.remaining -= 1;
                self.results.insert(
                    parent,
                    children.into_iter().map(|(c, o)| (c, o.to_vec())).collect(),
                );
            } else {
                // A step abandoned after a failure: nobody knows these ids.
                orphans.extend(children.into_iter().map(|c| c.0));
            }
        }
        if !orphans.is_empty() {
            for id in &orphans {
                self.location.remove(id);
            }
            self.send_ids(w, Kind::Drop, &orphans, Req::Drop);
        }
        self.refill(w);
    }

    fn on_removed(
        &mut self,
        victim: WorkerId,
        ids: Vec<StateId>,
        thief: WorkerId,
        step: u64,
        p: &[u8],
    ) {
        let dest = if self.slots[thief].alive {
            thief
        } else {
            victim
        };
        self.slots[thief].stealing = false;
        // Forward without decoding the states: `Removed` has `Add`'s layout.
        let mut f = Vec::with_capacity(protocol::HEADER_LEN + p.len());
        protocol::encode(&mut f, Kind::Add, p);
        for id in &ids {
            self.location.insert(*id, dest);
        }
        self.send(dest, f, Req::Add(ids.len() as u32));
        if self.failed_at.is_none() && self.evolving && step == self.step {
            self.slots[dest].pending.extend(ids);
            self.refill(dest);
        } else {
            for id in ids {
                self.inputs.remove(&id);
            }
        }
        if dest != thief {
            self.refill(thief);
        }
    }
}
