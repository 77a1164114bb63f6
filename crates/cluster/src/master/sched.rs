//! The master's state machine, shared by both masters: responses in,
//! requests out. It does no I/O; a driver feeds it frames with
//! [`Scheduler::on_frame`] and sends what it leaves in [`Scheduler::out`].
//!
//! Invariants:
//! - `location` is the truth of where each live state is; a state in a
//!   `Remove` or `Give` in flight stays at its victim until the master
//!   hears it left (`Removed`, `Given`, `Arrived`).
//! - a worker answers in order within each lane: `Evolved` frames match
//!   evolve requests in order, `Arrived` frames match by ticket, every
//!   other answer matches the other requests in order. Any mismatch is a
//!   protocol violation.
//! - during an evolve, a worker's `pending` is non-empty only while its
//!   pipeline is full or its calls in flight are expected to run far
//!   longer than the step's mean (`refill` sends otherwise), so moving
//!   states only ever takes states no request names yet.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, WorkerLost};
use crate::evolve::StateId;
use crate::protocol::{self, msg, Kind};
use crate::stats::WorkerStats;
use crate::telemetry::Telemetry;

mod buddy;
pub(crate) mod config;
mod deadline;
mod evolved;
mod finish;
mod hiccup;
mod leave;
mod ops;
mod plan;
mod recover;
mod silence;
mod slot;
mod straggle;
#[cfg(test)]
mod tests;
mod transfer;

pub(crate) use slot::WorkerId;
use slot::{Req, Slot, Transfer};

pub(crate) use config::{Batch, Placement, Recovery, SchedConfig, StealVia, CHECK_EVERY};

/// The master's books for `Recovery::Buddy`.
#[derive(Default)]
struct Books {
    /// States changed since the last committed round.
    dirty: bool,
    /// Rounds started so far (ids count from 1).
    rounds: u64,
    round: Option<Round>,
    /// Where the committed replicas of each state are (on up to
    /// `SchedConfig::replicas` workers, none of them its own), less those
    /// promoted or lost since.
    replica_at: HashMap<StateId, Vec<WorkerId>>,
    /// Each worker's buddies in the last round started: the next
    /// `replicas` live workers in index order.
    buddy_of: HashMap<WorkerId, Vec<WorkerId>>,
    /// The parents evolved in this operation: where, and their children.
    pub(super) done: HashMap<StateId, (WorkerId, Vec<StateId>)>,
    /// Said once: no round can run (one worker, or no peer listeners).
    warned: bool,
    /// Rounds in a row that failed because a worker could not reach its
    /// buddy (not because of a loss).
    unreached: u32,
}

/// A replication round in flight.
struct Round {
    id: u64,
    /// `Shipped` and `Held` answers still to come.
    waiting: usize,
    /// A loss or a failed shipment: it cannot commit.
    void: bool,
    /// A worker could not reach one of its buddies.
    unreached: bool,
    /// A worker was lost during it.
    lost: bool,
}

impl Books {
    /// The states changed: the next [`Scheduler::begin_replicate`] starts a round.
    pub(super) fn changed(&mut self) {
        self.dirty = true;
    }
}

/// When bytes last moved on a worker's connection, as its driver saw it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Io {
    /// Either way.
    pub any: Option<Instant>,
    /// From the worker.
    pub read: Option<Instant>,
    /// Bytes of a large frame (at least [`BULK`]), either way: a request
    /// on its way to the worker or an answer on its way back, time that
    /// no evolve's deadline counts (`deadline.rs`).
    pub bulk: Option<Instant>,
}

/// A frame at least this long is bulk on the wire (a state, a batch of
/// children), where heartbeats and small requests are not: a driver
/// reports when such bytes last moved ([`Io::bulk`]).
pub(crate) const BULK: usize = 64 << 10;

/// Whether `got` (a `Fetched` or `Removed` frame's states) is the next
/// part of an answer owing `asked`: the first of them, in order, at least
/// one where any are owed.
fn next_part_of(got: &[(StateId, &[u8])], asked: &[StateId]) -> bool {
    (!got.is_empty() || asked.is_empty())
        && got.len() <= asked.len()
        && got.iter().zip(asked).all(|(g, i)| g.0 == *i)
}

/// Outcome of an evolve: children and outputs per parent.
pub(crate) type RawResults = HashMap<StateId, Vec<(StateId, Vec<u8>)>>;

/// The master's bookkeeping.
pub(crate) struct Scheduler {
    slots: Vec<Slot>,
    location: HashMap<StateId, WorkerId>,
    seed: u64,
    step: u64,
    epoch: u64,
    evolving: bool,
    /// Serialised input and expected cost of each state not yet requested.
    inputs: HashMap<StateId, (Vec<u8>, f64)>,
    remaining: usize,
    /// The step's mean expected cost per state (`plan.rs`: no batch is
    /// queued behind calls expected to run far longer).
    mean_cost: f64,
    results: RawResults,
    fetched: Vec<(StateId, Vec<u8>)>,
    lost: Option<WorkerLost>,
    failed_at: Option<Instant>,
    collision: Option<StateId>,
    idle: Vec<WorkerId>,
    transfers: HashMap<u64, Transfer>,
    next_ticket: u64,
    /// Recent per-state evolve times (ns), for deadlines.
    samples: VecDeque<f64>,
    /// Recent batches' evolve time over their expected time by cost (the
    /// EWMA below), for telling stragglers (`straggle.rs`).
    ratios: VecDeque<f64>,
    /// EWMA of evolve time per unit of expected cost.
    ns_per_cost: Option<f64>,
    /// EWMA of the time a move takes (decision to evolvable at the thief).
    move_ns: Option<f64>,
    /// Rebalancing moves of this step still on their way: until they have
    /// landed no evolve request goes out, so that the moves' round trips
    /// run on an otherwise quiet cluster and the moved (long) calls start
    /// first rather than behind everyone's first batch.
    holding: usize,
    cfg: SchedConfig,
    /// With [`Recovery::MasterCopy`]: the bytes of every live state. With
    /// [`Recovery::Buddy`]: the bytes of states placed from here (reset,
    /// restore) until a replication round commits them.
    copies: HashMap<StateId, Vec<u8>>,
    /// With recovery: the inputs of this step's states that went out in an
    /// evolve request and have not come back evolved (with `Buddy`: that
    /// have not been committed), to run again elsewhere if their worker
    /// is lost.
    sent_inputs: HashMap<StateId, (Vec<u8>, f64)>,
    /// With [`Recovery::Buddy`]: replicas, rounds and this operation's work.
    buddy: Books,
    /// A worker reported a failed request: its loss is not recovered from.
    worker_failed: bool,
    /// When each lost worker was recovered from.
    recovered_at: Vec<Instant>,
    /// This step's states whose evolve ran past its deadline, and on how
    /// many workers (see `deadline.rs`); they are evolved alone from then on.
    hung: HashMap<StateId, u32>,
    /// Workers `overdue` found still beating but past an evolve's deadline.
    hung_workers: Vec<WorkerId>,
    /// This step's states started again on another worker while their
    /// first evolve was in flight: where the extra copies went.
    dups: HashMap<StateId, Vec<WorkerId>>,
    /// A lost worker's states waiting for a worker that takes states
    /// (`recover.rs`); the operation waits for them.
    parked: Vec<StateId>,
    /// A state that ran past its deadline on `HUNG_TRIES` workers: the
    /// operation fails naming it.
    hung_fail: Option<(StateId, u64, Duration)>,
    /// The longest recent gap between frames from a heartbeating worker
    /// (`hiccup.rs`): a silence is taken for a stop only well past it.
    hiccups: hiccup::Hiccups,
    /// Frames to send, in order, per destination.
    pub out: Vec<(WorkerId, Vec<u8>)>,
    /// Set by the caller to end the operation (`MasterConfig::stop`).
    pub(crate) stop: Option<Arc<AtomicBool>>,
    /// Where the run shows itself as it goes (`MasterConfig::telemetry`):
    /// written per answered batch, move, loss and step, never per state.
    tel: Option<Telemetry>,
    /// Whether the warning that a leaving worker must stay was given.
    leave_warned: bool,
}

impl Scheduler {
    pub(crate) fn new(addrs: &[SocketAddr], seed: u64, mut cfg: SchedConfig) -> Self {
        if cfg.recovery != Recovery::Off {
            // Only moves through the master keep the recovery books simple.
            cfg.steal_via = StealVia::Master;
        }
        let now = Instant::now();
        let slots = addrs.iter().map(|&addr| Slot::new(addr, now)).collect();
        Scheduler {
            slots,
            location: HashMap::new(),
            seed,
            step: 0,
            epoch: 0,
            evolving: false,
            inputs: HashMap::new(),
            remaining: 0,
            mean_cost: 0.0,
            results: HashMap::new(),
            fetched: Vec::new(),
            lost: None,
            failed_at: None,
            collision: None,
            idle: Vec::new(),
            transfers: HashMap::new(),
            next_ticket: 0,
            samples: VecDeque::new(),
            ratios: VecDeque::new(),
            ns_per_cost: None,
            move_ns: None,
            holding: 0,
            cfg,
            copies: HashMap::new(),
            sent_inputs: HashMap::new(),
            buddy: Books::default(),
            worker_failed: false,
            recovered_at: Vec::new(),
            hung: HashMap::new(),
            hung_workers: Vec::new(),
            stop: None,
            tel: None,
            leave_warned: false,
            hung_fail: None,
            dups: HashMap::new(),
            parked: Vec::new(),
            hiccups: hiccup::Hiccups::default(),
            out: Vec::new(),
        }
    }

    /// Hands the books `t` to write into; the workers so far join it.
    pub(crate) fn set_telemetry(&mut self, t: Telemetry) {
        for (w, s) in self.slots.iter().enumerate() {
            t.joined(w, s.addr);
        }
        self.tel = Some(t);
    }

    /// The telemetry written into, if any.
    pub(crate) fn telemetry(&self) -> Option<&Telemetry> {
        self.tel.as_ref()
    }

    /// At the end of an operation: every worker's counters, and the states
    /// each holds (one pass over the books), to the telemetry.
    pub(crate) fn publish_telemetry(&self) {
        let Some(t) = &self.tel else {
            return;
        };
        let mut held = vec![0u64; self.slots.len()];
        for &w in self.location.values() {
            held[w] += 1;
        }
        t.workers(
            self.slots
                .iter()
                .zip(held)
                .map(|(s, n)| (s.stats.clone(), n)),
        );
    }

    /// Evolve steps done (as a snapshot or rollback set it).
    pub(crate) fn step(&self) -> u64 {
        self.step
    }

    /// Per-worker counters.
    pub(crate) fn worker_stats(&self) -> Vec<WorkerStats> {
        self.slots.iter().map(|s| s.stats.clone()).collect()
    }

    /// Whether the master recovers lost workers (from its copies or from
    /// replicas).
    pub(crate) fn recovering(&self) -> bool {
        self.cfg.recovery != Recovery::Off
    }

    /// Whether workers send each child's bytes with its output, for the
    /// master's copies (`MasterCopy`, and `Auto` until it is decided).
    fn master_copies(&self) -> bool {
        matches!(self.cfg.recovery, Recovery::MasterCopy | Recovery::Auto)
    }

    /// Whether states are replicated to buddies.
    fn buddies(&self) -> bool {
        self.cfg.recovery == Recovery::Buddy
    }

    /// The live workers, in index order.
    fn live(&self) -> Vec<WorkerId> {
        (0..self.slots.len())
            .filter(|&w| self.slots[w].alive)
            .collect()
    }

    /// When each lost worker was recovered from, in order.
    pub(crate) fn recovered_at(&self) -> &[Instant] {
        &self.recovered_at
    }

    /// When the current operation failed, if it did.
    pub(crate) fn failed_at(&self) -> Option<Instant> {
        self.failed_at
    }

    /// Records that `w` owes an answer for `req`.
    fn expect(&mut self, w: WorkerId, req: Req) {
        let s = &mut self.slots[w];
        if s.in_flight.is_empty() {
            s.owing_since = Instant::now();
        }
        s.in_flight.push_back(req);
    }

    fn send(&mut self, w: WorkerId, frame: Vec<u8>, req: Req) {
        self.slots[w].stats.bytes_out += frame.len() as u64;
        self.expect(w, req);
        self.out.push((w, frame));
    }

    fn begin_op(&mut self) -> Result<(), Error> {
        self.buddy.done.clear();
        self.lost = None;
        self.worker_failed = false;
        self.failed_at = None;
        self.collision = None;
        self.evolving = false;
        self.holding = 0;
        self.hung.clear();
        self.hung_workers.clear();
        self.hung_fail = None;
        self.dups.clear();
        let now = Instant::now();
        for s in &mut self.slots {
            s.incoming = 0;
            // The master did not read between operations: silence counts
            // from now.
            if let Some(t) = s.beats_from.as_mut() {
                *t = now;
            }
        }
        if self.slots.iter().any(|s| s.alive) {
            self.evacuate_stragglers();
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

    /// Starts one step: evolve each state with its serialised input and
    /// expected cost (any non-negative scale; only ratios matter).
    pub(crate) fn begin_evolve(
        &mut self,
        mut inputs: Vec<(StateId, Vec<u8>, f64)>,
    ) -> Result<(), Error> {
        self.begin_op()?;
        self.unknown(inputs.iter().map(|p| p.0))?;
        inputs.sort_unstable_by_key(|p| p.0);
        self.step += 1;
        self.evolving = true;
        self.buddy.changed();
        self.results = HashMap::with_capacity(inputs.len());
        self.remaining = inputs.len();
        for (id, input, cost) in inputs {
            let cost = if !self.cfg.cost_hints || !cost.is_finite() || cost < 0.0 {
                1.0
            } else {
                cost
            };
            let w = self.location[&id];
            self.slots[w].pending.push(id);
            self.slots[w].pending_cost += cost;
            self.inputs.insert(id, (input, cost));
        }
        let total: f64 = self.slots.iter().map(|s| s.pending_cost).sum();
        self.mean_cost = total / self.remaining.max(1) as f64;
        for w in 0..self.slots.len() {
            self.sort_pending(w);
        }
        self.holding = if self.cfg.rebalance {
            self.rebalance()
        } else {
            0
        };
        self.idle.clear();
        for w in 0..self.slots.len() {
            self.slots[w].queued_idle = false;
        }
        for w in 0..self.slots.len() {
            self.refill(w);
        }
        self.retry_idle();
        Ok(())
    }

    /// Handles one response frame from `w`.
    ///
    /// # Errors
    /// A reason to drop the connection: a malformed payload, a response
    /// nobody asked for, or a `Failed` frame.
    pub(crate) fn on_frame(&mut self, w: WorkerId, kind: Kind, p: &[u8]) -> Result<(), String> {
        let bad = |e: msg::MsgError| format!("malformed {kind:?}: {e}");
        let copies = self.master_copies();
        if kind == Kind::Failed {
            self.worker_failed = true;
        }
        let s = &mut self.slots[w];
        s.stats.bytes_in += (p.len() + protocol::HEADER_LEN) as u64;
        let now = Instant::now();
        // A heartbeating worker's silence before this frame, within this
        // operation (`beats_from` restarts with each): a pause it showed.
        let gap = s
            .beats_from
            .map(|from| now.saturating_duration_since(s.last_heard.max(from)));
        s.last_heard = now;
        if let Some(gap) = gap {
            self.hiccups.note(gap, now);
        }
        if kind == Kind::Leaving {
            if !p.is_empty() {
                return Err("malformed Leaving: a payload".into());
            }
            self.mark_leaving(w);
            return Ok(());
        }
        let s = &mut self.slots[w];
        if kind == Kind::Heartbeat {
            // Nothing is owed or matched; from now on silence is what
            // makes this worker lost (`deadline.rs`).
            if self.cfg.deadlines.heartbeat.is_some() && s.beats_from.is_none() {
                s.beats_from = Some(Instant::now());
            }
            return Ok(());
        }
        let at = match kind {
            Kind::Failed => return Err(crate::error::reported(p)),
            Kind::Evolved => s
                .in_flight
                .iter()
                .position(|r| matches!(r, Req::Evolve { .. })),
            Kind::Arrived => {
                let (ticket, _) = msg::arrived(p).map_err(bad)?;
                s.in_flight
                    .iter()
                    .position(|r| matches!(r, Req::Arrive { ticket: t, .. } if *t == ticket))
            }
            Kind::Held => {
                let (round, origin, _) = msg::held(p).map_err(bad)?;
                let origin = origin as usize;
                let at = s.in_flight.iter().position(
                    |q| matches!(q, Req::Hold { round: r, origin: o } if *r == round && *o == origin),
                );
                if at.is_none() {
                    // A replica of a round given up (its origin was lost).
                    return Ok(());
                }
                at
            }
            _ => s.in_flight.iter().position(|r| {
                !matches!(
                    r,
                    Req::Evolve { .. } | Req::Arrive { .. } | Req::Hold { .. }
                )
            }),
        };
        let req = at
            .and_then(|i| s.in_flight.remove(i).map(|r| (i, r)))
            .ok_or_else(|| format!("unrequested {kind:?} frame"))?;
        let (at, req) = req;
        match (req, kind) {
            (Req::Drop, Kind::Dropped) => {}
            (Req::Setup, Kind::SetupOk) => {
                self.slots[w].peer = msg::setup_ok(p).map_err(bad)?.map(str::to_string);
            }
            (Req::Add(n), Kind::Added) => {
                let got = msg::count(p).map_err(bad)?;
                if got != n {
                    return Err(format!("added {got} states of {n}"));
                }
            }
            (Req::Fetch(mut ids), Kind::Fetched) => {
                // The states asked for come in order, in as many frames
                // as their size takes: the rest stays owed.
                let got = msg::states(p).map_err(bad)?;
                if !next_part_of(&got, &ids) {
                    return Err("fetched other states than asked".into());
                }
                let rest = ids.split_off(got.len());
                self.fetched
                    .extend(got.into_iter().map(|(id, b)| (id, b.to_vec())));
                if !rest.is_empty() {
                    self.slots[w].in_flight.insert(at, Req::Fetch(rest));
                }
            }
            (
                Req::Evolve {
                    ids,
                    step,
                    sent,
                    solo,
                    cost,
                    fenced,
                },
                Kind::Evolved,
            ) => {
                if fenced {
                    let s = &mut self.slots[w];
                    s.fenced = s.fenced.saturating_sub(1);
                }
                let e = msg::evolved(p, copies).map_err(bad)?;
                if e.parents.len() != ids.len()
                    || e.parents.iter().zip(&ids).any(|(g, i)| g.0 != *i)
                {
                    return Err("evolved other states than asked".into());
                }
                self.on_evolved(w, e, step, sent, solo, cost);
            }
            (
                Req::Remove {
                    mut ids,
                    thief,
                    step,
                    sent,
                    fenced,
                },
                Kind::Removed,
            ) => {
                // The states asked for come in order, in as many frames as
                // their size takes: the rest stays owed, and each part
                // lands on its own.
                let got = msg::states(p).map_err(bad)?;
                if !next_part_of(&got, &ids) {
                    return Err("removed other states than asked".into());
                }
                let rest = ids.split_off(got.len());
                let last = rest.is_empty();
                if !last {
                    let rest = Req::Remove {
                        ids: rest,
                        thief,
                        step,
                        sent,
                        fenced,
                    };
                    self.slots[w].in_flight.insert(at, rest);
                }
                if fenced {
                    return Ok(());
                }
                self.on_removed(w, ids, thief, (step, sent), p, last);
            }
            (Req::Give { ticket }, Kind::Given) => {
                let n = msg::count(p).map_err(bad)?;
                self.on_given(w, ticket, n)?;
            }
            (Req::Arrive { ticket, n }, Kind::Arrived) => {
                let (_, got) = msg::arrived(p).map_err(bad)?;
                if got as usize != n {
                    return Err(format!("{got} states arrived of {n}"));
                }
                self.on_arrived(w, ticket);
            }
            (Req::Replicate, Kind::Shipped) => {
                let (n, bytes) = msg::shipped(p).map_err(bad)?;
                self.on_shipped(w, n, bytes);
            }
            (Req::Hold { .. }, Kind::Held) => self.on_held(),
            (Req::Promote(n), Kind::Promoted) => {
                let got = msg::count(p).map_err(bad)?;
                if got != n {
                    return Err(format!("promoted {got} replicas of {n}"));
                }
            }
            (_, k) => return Err(format!("unexpected {k:?} frame")),
        }
        self.place_parked();
        self.retry_idle();
        Ok(())
    }
}

/// A time as nanoseconds, for estimates kept in floating point.
fn nanos(d: Duration) -> f64 {
    d.as_nanos() as f64
}
