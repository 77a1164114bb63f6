//! Barriers: markers that travel in band, between two items, through every
//! edge of a deployment, so each unit acts on them (copies its states for a
//! checkpoint, swaps a stage's code for an upgrade) at the same point of
//! the input.
//!
//! A barrier is a message with no item, `last == false` and the top bit of
//! its `seq` set; the rest of `seq` is the barrier's number. Items never
//! have that bit (2^63 inputs), so the hot path's match on `(item, last)`
//! is unchanged and a barrier costs nothing until one is sent.
//!
//! The first station's source ([`Injector`]) puts the barrier in: after
//! exactly `position` inputs for [`Running::checkpoint`] on a deployment
//! fed through [`Input`](crate::Input) (the inputs accepted when it was
//! asked for), after whatever it has read for other sources. Every sink
//! passes it on in order: a router to every copy and to its route log, a
//! fork into its ring, which every branch reads. Where paths meet, the
//! merge (or join) reaches the barrier in its route log (or fork ring)
//! only after every group before it, and then takes the one barrier that
//! waits first on each copy's (branch's) edge, and passes one on:
//! alignment needs no buffering, because merges and joins already read in
//! input order.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crossbeam_channel::Sender;

use super::doorbell::Doorbell;
use crate::checkpoint::writer::Job;
use crate::checkpoint::History;
use crate::state::UpgradeError;
use crate::state::{Copied, Snapshot, StageCell, Visit};
use crate::state::{UpgradeInfo, UPGRADES_KEPT};

/// The name a durable cycle's own state is saved under (its items waiting
/// to go round), beside its stages'.
pub(crate) const CYCLE_STATE: &str = "(cycle)";

/// Old copies of states by stage name, for the next barrier to reuse.
pub(crate) type Spares = Arc<Mutex<HashMap<String, Copied>>>;

/// The bit that marks a barrier's `seq`.
pub(crate) const BARRIER: u64 = 1 << 63;

/// Whether a message's `seq` is a barrier's.
#[inline(always)]
pub(crate) fn is_barrier(seq: u64) -> bool {
    seq & BARRIER != 0
}

/// Aligns a barrier at a merge or join: `waiting` is the barrier found in
/// the route log or fork ring and the next input to take it from. Takes
/// it from each of the `inputs` in turn (`take(k)`: `false` if it has not
/// come yet on input `k`). Returns the barrier once every input gave it
/// (and clears `waiting`), `None` while one has not.
pub(crate) fn align<E>(
    waiting: &mut Option<(u64, usize)>,
    inputs: usize,
    mut take: impl FnMut(usize) -> Result<bool, E>,
) -> Result<Option<u64>, E> {
    let Some((seq, mut k)) = *waiting else {
        return Ok(None);
    };
    while k < inputs {
        if !take(k)? {
            *waiting = Some((seq, k));
            return Ok(None);
        }
        k += 1;
    }
    *waiting = None;
    Ok(Some(seq))
}

/// One stage's upgrade, waiting for its barrier.
pub(crate) struct StageUpgrade {
    pub(crate) stage: String,
    pub(crate) cmd: Option<Box<dyn Any + Send>>,
    pub(crate) done: Sender<Result<(), UpgradeError>>,
}

/// What a barrier asks of the units it reaches.
pub(crate) struct BarrierInfo {
    pub(crate) id: u64,
    /// Copy every stage's state for checkpoint `id`.
    pub(crate) checkpoint: bool,
    /// Swap these stages' code.
    pub(crate) upgrades: Mutex<Vec<StageUpgrade>>,
    /// Stages that have seen it; when all have, it is forgotten.
    seen: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BarrierInfo {
    pub(crate) fn new(id: u64, checkpoint: bool, upgrades: Vec<StageUpgrade>) -> Self {
        BarrierInfo {
            id,
            checkpoint,
            upgrades: Mutex::new(upgrades),
            seen: AtomicUsize::new(0),
        }
    }

    /// Applies the upgrades meant for `cell`, reporting each result (to
    /// its ticket, and to `history`).
    fn upgrade(&self, cell: &mut dyn StageCell, history: &History<UpgradeInfo>) {
        let mut ups = lock(&self.upgrades);
        for u in ups.iter_mut() {
            if u.stage != cell.name() {
                continue;
            }
            if let Some(cmd) = u.cmd.take() {
                let result = cell.upgrade(cmd);
                history.push(UpgradeInfo {
                    stage: u.stage.clone(),
                    completed: Instant::now(),
                    result: result.clone(),
                });
                let _ = u.done.send(result);
            }
        }
    }
}

/// A barrier waiting to be put into the input: its number, and after how
/// many inputs (`None`: after what the source has read so far).
type Queued = (u64, Option<u64>);

/// What the barriers of one deployment share: the requests, the barriers
/// in flight, and the checkpoint writer.
pub(crate) struct Coordinator {
    next_id: AtomicU64,
    in_flight: Mutex<HashMap<u64, Arc<BarrierInfo>>>,
    queue: Mutex<VecDeque<Queued>>,
    /// Whether `queue` may hold something: the injector's one check per poll.
    pub(crate) queued: AtomicBool,
    pub(crate) writer: Mutex<Option<Sender<Job>>>,
    /// Copies the writer has encoded, handed back by stage name to be
    /// cloned into at the next barrier.
    pub(crate) spares: Spares,
    /// Inputs accepted so far, when an [`Input`](crate::Input) feeds the
    /// pipeline.
    pub(crate) accepted: Option<Arc<AtomicU64>>,
    /// The first station's worker, woken when a barrier is queued.
    pub(crate) first: OnceLock<Arc<Doorbell>>,
    /// The stages of the pipeline, in description order.
    pub(crate) stages: Vec<String>,
    /// Whether barriers can be sent at all (not in a cycle).
    pub(crate) supported: bool,
    /// The upgrades applied, for `Running::upgrades` and its observers.
    pub(crate) upgrades: Arc<History<UpgradeInfo>>,
}

impl Coordinator {
    pub(crate) fn new(
        first_id: u64,
        accepted: Option<Arc<AtomicU64>>,
        stages: Vec<String>,
        supported: bool,
    ) -> Self {
        Coordinator {
            next_id: AtomicU64::new(first_id),
            in_flight: Mutex::new(HashMap::new()),
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicBool::new(false),
            writer: Mutex::new(None),
            spares: Arc::default(),
            accepted,
            first: OnceLock::new(),
            stages,
            supported,
            upgrades: Arc::new(History::new(UPGRADES_KEPT)),
        }
    }

    /// A new barrier number.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a barrier into the input, after the inputs accepted so far.
    pub(crate) fn send(&self, info: BarrierInfo) {
        let id = info.id;
        lock(&self.in_flight).insert(id, Arc::new(info));
        // Relaxed: the count only bounds where the barrier goes; the
        // inputs themselves become visible through their ring, and the
        // injector waits for them there.
        let position = self.accepted.as_ref().map(|a| a.load(Ordering::Relaxed));
        lock(&self.queue).push_back((id, position));
        // Relaxed: the flag only says "look at the queue", which is read
        // under its mutex.
        self.queued.store(true, Ordering::Relaxed);
        if let Some(bell) = self.first.get() {
            bell.ring();
        }
    }

    pub(crate) fn front(&self) -> Option<Queued> {
        let q = lock(&self.queue);
        let f = q.front().copied();
        if f.is_none() {
            self.queued.store(false, Ordering::Relaxed);
        }
        f
    }

    pub(crate) fn pop(&self, id: u64, position: u64) {
        lock(&self.queue).pop_front();
        let is_checkpoint = lock(&self.in_flight).get(&id).is_some_and(|b| b.checkpoint);
        if is_checkpoint {
            if let Some(w) = lock(&self.writer).as_ref() {
                let _ = w.send(Job::Position { id, position });
            }
        }
    }

    /// The barrier a message carries, while some stage has yet to see it.
    pub(crate) fn barrier(&self, seq: u64) -> Option<Arc<BarrierInfo>> {
        lock(&self.in_flight).get(&(seq & !BARRIER)).cloned()
    }

    /// What a unit does at a barrier: upgrades, then copies of its
    /// stages' states (after the upgrade, so a checkpoint at the same
    /// barrier saves the new state).
    pub(crate) fn at_barrier(&self, b: &BarrierInfo, visit: &mut dyn FnMut(Visit<'_>)) {
        let start = Instant::now();
        let mut snaps: Vec<Snapshot> = Vec::new();
        let mut seen = 0;
        visit(&mut |cell| {
            seen += 1;
            b.upgrade(cell, &self.upgrades);
            if b.checkpoint {
                let spare = lock(&self.spares).remove(cell.name());
                snaps.extend(cell.snapshot(spare));
            }
        });
        if b.checkpoint {
            let stall = start.elapsed();
            if let Some(w) = lock(&self.writer).as_ref() {
                let _ = w.send(Job::Part {
                    id: b.id,
                    snaps,
                    stall,
                });
            }
        }
        let total = b.seen.fetch_add(seen, Ordering::Relaxed) + seen;
        if total >= self.stages.len() {
            lock(&self.in_flight).remove(&b.id);
        }
    }

    /// Fails every barrier still in flight (the pipeline ended): each
    /// waiting upgrade hears why.
    pub(crate) fn abandon(&self, why: &str) {
        let all: Vec<_> = lock(&self.in_flight).drain().collect();
        for (_, b) in all {
            for u in lock(&b.upgrades).drain(..) {
                if u.cmd.is_some() {
                    let _ = u.done.send(Err(UpgradeError::Stopped(why.to_string())));
                }
            }
        }
        lock(&self.queue).clear();
        *lock(&self.writer) = None;
    }
}
