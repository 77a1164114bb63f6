//! Who evolves what: batches, the start-of-step rebalance, steals.
//!
//! Every state of a step carries an expected cost (the model's hint, or 1).
//! Each worker's `pending` is kept sorted cheapest first and batches are
//! taken from its end, so a worker starts its longest calls first.
//!
//! **Rebalance** (at the start of a step, when every worker is idle and
//! answers a `Remove` at once): with `T` = total cost / live workers, each
//! worker keeps its states, most expensive first, while they fit under `T`
//! (its first one always); the rest go to a pool, which is dealt most
//! expensive first to the least-loaded worker (longest processing time
//! first, with the states' current places as the starting loads). A pool
//! state dealt back to its own worker does not move. The moves are skipped
//! when the largest excess over `T` is worth less than four round trips, or
//! when the dealt placement's longest load is no shorter than the current one.
//!
//! **Pipelining.** A worker is sent up to `SchedConfig::pipeline` batches,
//! so that the next one is there when the last returns; but never behind
//! calls expected to run for more than [`HOLD_BEHIND`] × the step's mean
//! cost per state (a heavy tail's long call): there the batch would be
//! stuck for the whole call, where an idle worker, or one given a lost
//! worker's long call, could have taken it.
//!
//! **Steals** (during a step): a worker with nothing pending, a free
//! pipeline slot and nothing on its way takes from the live worker with
//! the most pending cost its most expensive pending states, up to half
//! that cost (at least one state).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashSet};
use std::time::Instant;

use super::{nanos, Batch, Req, Scheduler, WorkerId};

/// No batch is queued behind calls in flight that are expected to run for
/// more than this many times the step's mean cost per state: it would wait
/// out the whole long call there, where an idle worker could have stolen
/// it. The worker gets it two round trips before the long call is expected
/// to end. Uniform steps never hold.
pub(super) const HOLD_BEHIND: f64 = 4.0;
use crate::evolve::StateId;
use crate::protocol::{self, msg, Kind, STATE_FRAME_BYTES};

/// A load in a dealing heap: ordered by load, then index.
#[derive(PartialEq)]
struct Load(f64, WorkerId);

impl Eq for Load {}

impl PartialOrd for Load {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Load {
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(self.1.cmp(&o.1))
    }
}

impl Scheduler {
    pub(super) fn cost(&self, id: &StateId) -> f64 {
        self.inputs.get(id).map_or(0.0, |x| x.1)
    }

    /// Sorts `w`'s pending states cheapest first (ties by id: deterministic).
    pub(super) fn sort_pending(&mut self, w: WorkerId) {
        let mut p = std::mem::take(&mut self.slots[w].pending);
        p.sort_unstable_by(|a, b| self.cost(a).total_cmp(&self.cost(b)).then(a.cmp(b)));
        self.slots[w].pending = p;
    }

    /// Adds states that arrived at `w` to its pending ones.
    pub(super) fn push_pending(&mut self, w: WorkerId, ids: Vec<StateId>) {
        let c: f64 = ids.iter().map(|id| self.cost(id)).sum();
        let s = &mut self.slots[w];
        s.pending.extend(ids);
        s.pending_cost += c;
        self.sort_pending(w);
    }

    /// Takes the `k` most expensive pending states of `w`.
    fn take_tail(&mut self, w: WorkerId, k: usize) -> Vec<StateId> {
        let at = self.slots[w].pending.len().saturating_sub(k);
        let ids = self.slots[w].pending.split_off(at);
        let c: f64 = ids.iter().map(|id| self.cost(id)).sum();
        self.less_pending_cost(w, c);
        ids
    }

    /// Takes `id` out of `w`'s pending states; whether it was there.
    pub(super) fn take_pending(&mut self, w: WorkerId, id: StateId) -> bool {
        let Some(k) = self.slots[w].pending.iter().position(|p| *p == id) else {
            return false;
        };
        self.slots[w].pending.remove(k);
        let c = self.cost(&id);
        self.less_pending_cost(w, c);
        true
    }

    /// Books `c` less pending cost on `w` (none once nothing is pending).
    fn less_pending_cost(&mut self, w: WorkerId, c: f64) {
        let s = &mut self.slots[w];
        s.pending_cost = if s.pending.is_empty() {
            0.0
        } else {
            (s.pending_cost - c).max(0.0)
        };
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

    /// `b`, or fewer where the master keeps copies of the states and the
    /// last `b` pending on `w` hold more than [`STATE_FRAME_BYTES`] between
    /// them (at least one): their children come back in one `Evolved`
    /// frame, likely as large as the parents, and a batch of large states
    /// would make it larger than a frame may be.
    fn within_frame(&self, w: WorkerId, b: usize) -> usize {
        if !self.master_copies() {
            return b;
        }
        let mut bytes = 0;
        let tail = self.slots[w].pending.iter().rev().take(b);
        let fit = tail
            .take_while(|id| {
                bytes += self.copies.get(id).map_or(0, Vec::len);
                bytes <= STATE_FRAME_BYTES
            })
            .count();
        fit.max(1)
    }

    /// Sends batches to `w` until its pipeline is full, or steals for it.
    pub(super) fn refill(&mut self, w: WorkerId) {
        if !self.evolving
            || self.failed_at.is_some()
            || !self.slots[w].alive
            || self.holding > 0
            || self.slots[w].fenced > 0
        {
            return;
        }
        let pipeline = self.cfg.pipeline.max(1);
        while self.slots[w].evolving < pipeline && !self.slots[w].pending.is_empty() {
            if self.holds_back(w).is_some() {
                // Queued behind a long call, a batch would wait there for
                // all of it; held here, an idle worker can steal it.
                break;
            }
            let b = self.within_frame(w, self.batch_size(w));
            let mut ids = self.take_tail(w, b);
            if !self.hung.is_empty() && ids.len() > 1 {
                // A state that ran past its deadline goes alone, so that a
                // second time names it, and spares the states beside it.
                if let Some(k) = ids.iter().position(|id| self.hung.contains_key(id)) {
                    let one = ids.swap_remove(k);
                    self.push_pending(w, ids);
                    ids = vec![one];
                }
            }
            let s = &mut self.slots[w];
            let solo = s.evolving == 0;
            s.evolving += 1;
            let mut f = Vec::new();
            let st = protocol::begin(&mut f, Kind::Evolve);
            msg::put_evolve_head(&mut f, self.step, self.master_copies(), ids.len());
            let mut cost = 0.0;
            let keep = self.recovering();
            for id in &ids {
                // A state pending on two workers (started again beside a
                // straggler, see `straggle.rs`) may have gone out already.
                let (input, c) = self
                    .inputs
                    .remove(id)
                    .or_else(|| self.sent_inputs.get(id).cloned())
                    .expect("every pending state has an input");
                cost += c;
                msg::put_u64(&mut f, id.0);
                msg::put_bytes(&mut f, &input);
                if keep {
                    self.sent_inputs.insert(*id, (input, c));
                }
            }
            protocol::finish(&mut f, st);
            let req = Req::Evolve {
                ids,
                step: self.step,
                sent: Instant::now(),
                solo,
                cost,
                fenced: false,
            };
            self.send(w, f, req);
        }
        let s = &self.slots[w];
        if s.pending.is_empty()
            && s.evolving < pipeline
            && s.incoming == 0
            && !s.queued_idle
            && !(!s.leaving && self.wants_work(w) && self.steal_for(w))
        {
            self.slots[w].queued_idle = true;
            self.idle.push(w);
        }
    }

    /// Whether `w` should get more work now: it is idle, or what it is
    /// evolving should end before a move could bring it anything. (Stealing
    /// to fill the pipeline of a worker in a long call would queue the
    /// stolen states behind that call; before anything was measured, only
    /// an idle worker steals.)
    fn wants_work(&self, w: WorkerId) -> bool {
        if self.slots[w].evolving == 0 {
            return true;
        }
        let Some(ns_per_cost) = self.ns_per_cost else {
            return false;
        };
        self.cost_ahead(w) * ns_per_cost <= self.move_ns.unwrap_or(1e6)
    }

    /// If `w`'s next batch waits for its calls in flight ([`HOLD_BEHIND`]):
    /// how long, in ns, until they are expected to end within two round
    /// trips, when it goes (`overdue` wakes up for that), unless another
    /// worker will run out of work before (infinite: it waits for the call
    /// to return, or for a thief). Before costs are measured, nothing waits.
    pub(super) fn holds_back(&self, w: WorkerId) -> Option<f64> {
        let s = &self.slots[w];
        if s.evolving == 0 || s.evolving >= self.cfg.pipeline.max(1) || s.pending.is_empty() {
            return None;
        }
        let t = self.ns_per_cost.filter(|t| *t > 0.0)?;
        let ahead = self.cost_ahead(w);
        if ahead <= HOLD_BEHIND * self.mean_cost {
            return None;
        }
        let wait = ahead * t - 2.0 * s.rtt_ns.unwrap_or(1e6);
        if wait > 0.0 {
            return Some(wait);
        }
        // Due, unless another worker runs out of work first: it will steal
        // the batch (a long call started again after a loss ends after
        // everyone else's work).
        let free_first = (0..self.slots.len()).any(|v| {
            let o = &self.slots[v];
            v != w && o.alive && o.fenced == 0 && self.cost_ahead(v) + o.pending_cost < ahead
        });
        free_first.then_some(f64::INFINITY)
    }

    /// Sends the batches held back behind long calls that are now due
    /// (`holds_back`); returns when the next falls due.
    pub(super) fn release_held(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        if !self.evolving || self.failed_at.is_some() {
            return None;
        }
        for w in 0..self.slots.len() {
            let s = &self.slots[w];
            if !s.alive || s.fenced > 0 || s.evolving == 0 || s.pending.is_empty() {
                continue;
            }
            match self.holds_back(w) {
                // Until its long call returns.
                Some(wait) if wait.is_infinite() => {}
                Some(wait) => {
                    let at = now + std::time::Duration::from_nanos(wait.min(1e18) as u64);
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
                None => self.refill(w),
            }
        }
        next
    }

    /// The expected cost of the evolves `w` has been sent and not finished:
    /// their costs, less what the one in progress has run (by the measured
    /// time per unit of cost; before that is measured, none has run).
    pub(super) fn cost_ahead(&self, w: WorkerId) -> f64 {
        let s = &self.slots[w];
        let (mut queued, mut head) = (0.0, None);
        for r in &s.in_flight {
            if let Req::Evolve { cost, sent, .. } = r {
                queued += cost;
                head.get_or_insert(*sent);
            }
        }
        match self.ns_per_cost {
            Some(t) if t > 0.0 => {
                // The batch in progress started when it was sent or when
                // the one before it came back, whichever was later.
                let started = head.map_or(s.last_evolved, |h| h.max(s.last_evolved));
                (queued - nanos(started.elapsed()) / t).max(0.0)
            }
            _ => queued,
        }
    }

    /// Deals `items` (each with its expected cost) over `to`, most
    /// expensive first, each to the worker that would start it soonest:
    /// the least cost ahead of it ([`cost_ahead`](Self::cost_ahead), plus
    /// what this deal gave it), ties to the earlier in `to`. So a lost or
    /// straggling worker's long call starts again behind the shortest
    /// queue, not wherever an even split of ids puts it. Returns each
    /// worker's share, in `to`'s order.
    pub(super) fn deal_soonest<T: Copy>(&self, items: &[(T, f64)], to: &[WorkerId]) -> Vec<Vec<T>> {
        let mut share = vec![Vec::new(); to.len()];
        if to.is_empty() {
            return share;
        }
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| items[b].1.total_cmp(&items[a].1).then(a.cmp(&b)));
        let mut heap: BinaryHeap<Reverse<Load>> = to
            .iter()
            .enumerate()
            .map(|(k, &w)| Reverse(Load(self.cost_ahead(w), k)))
            .collect();
        for i in order {
            let Reverse(Load(ahead, k)) = heap.pop().expect("one entry per worker");
            share[k].push(items[i].0);
            heap.push(Reverse(Load(ahead + items[i].1.max(0.0), k)));
        }
        share
    }

    /// Moves up to half the pending cost of the most loaded worker to `thief`.
    fn steal_for(&mut self, thief: WorkerId) -> bool {
        if !self.cfg.steal || self.remaining == 0 {
            return false;
        }
        let victim = (0..self.slots.len())
            .filter(|&v| {
                v != thief
                    && self.slots[v].alive
                    && !self.slots[v].pending.is_empty()
                    && !self.keeps_replicas_of(thief, v)
            })
            .max_by(|&a, &b| {
                let (sa, sb) = (&self.slots[a], &self.slots[b]);
                sa.pending_cost
                    .total_cmp(&sb.pending_cost)
                    .then(sa.pending.len().cmp(&sb.pending.len()))
                    .then(b.cmp(&a))
            });
        let Some(victim) = victim else {
            return false;
        };
        let s = &self.slots[victim];
        let half = s.pending_cost / 2.0;
        let (mut k, mut taken) = (0, 0.0);
        for id in s.pending.iter().rev() {
            if k > 0 && taken >= half {
                break;
            }
            taken += self.cost(id);
            k += 1;
        }
        let mut ids = self.take_tail(victim, k);
        if !self.dups.is_empty() {
            // A copy started again beside a straggler (`straggle.rs`) stays
            // where `dups` says it is: moved, it would escape the drop when
            // another copy answers first, and its `Removed` would book the
            // parent evolved meanwhile at the thief, whose late evolve
            // consumes it (books naming a state no worker holds).
            let (keep, go): (Vec<StateId>, Vec<StateId>) =
                ids.into_iter().partition(|id| self.dups.contains_key(id));
            if !keep.is_empty() {
                self.push_pending(victim, keep);
            }
            if go.is_empty() {
                return false;
            }
            ids = go;
        }
        if self.buddies() {
            // A state never moves onto a worker holding its replica (a
            // state promoted or moved earlier may have one on `thief`),
            // nor while it is its only copy and `victim` would keep none.
            let (keep, go): (Vec<StateId>, Vec<StateId>) = ids
                .into_iter()
                .partition(|id| self.holds_replica(thief, *id) || self.pinned(*id, victim));
            if !keep.is_empty() {
                self.push_pending(victim, keep);
            }
            if go.is_empty() {
                return false;
            }
            ids = go;
        }
        self.move_states(victim, thief, ids, false);
        true
    }

    pub(super) fn retry_idle(&mut self) {
        // O(workers) check first: without it every event at the end of a
        // step cost O(idle × workers) victim scans.
        if self.idle.is_empty()
            || self.failed_at.is_some()
            || self.slots.iter().all(|s| s.pending.is_empty())
        {
            return;
        }
        for w in std::mem::take(&mut self.idle) {
            self.slots[w].queued_idle = false;
            self.refill(w);
        }
    }

    /// Evens out expected work before the step's first batch (see above);
    /// returns the number of moves (`Remove` or `Give` requests) sent.
    pub(super) fn rebalance(&mut self) -> usize {
        let live = self.usable();
        if live.len() < 2 {
            return 0;
        }
        let total: f64 = live.iter().map(|&w| self.slots[w].pending_cost).sum();
        let mut all: Vec<(f64, StateId, WorkerId)> = Vec::new();
        for &w in &live {
            all.extend(
                self.slots[w]
                    .pending
                    .iter()
                    .map(|&id| (self.cost(&id), id, w)),
            );
        }
        let longest = all.iter().map(|x| x.0).fold(0.0, f64::max);
        // No schedule ends the step before `bound`: the even share, or the
        // longest call.
        let bound = (total / live.len() as f64).max(longest);
        let excess = live
            .iter()
            .map(|&w| self.slots[w].pending_cost - bound)
            .fold(0.0, f64::max);
        if excess <= 0.0 || !self.worth_moving(excess) {
            return 0;
        }
        // Longest first: a state stays on its worker while that keeps the
        // worker within `bound`, else goes to the least-loaded worker it
        // may go to. In buddy mode that is never a worker holding its
        // replica (one loss would take two of its copies), and a state
        // that is its only copy stays where its worker would keep no copy
        // (`pinned`); both are decided here, while
        // dealing, so that a move ruled out leaves no worker holding both
        // a state it was meant to give away and the ones dealt to it in
        // its place (two long calls in a row).
        all.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut load = vec![0.0; self.slots.len()];
        let mut heap: BinaryHeap<Reverse<Load>> =
            live.iter().map(|&w| Reverse(Load(0.0, w))).collect();
        let mut moves: Vec<(WorkerId, WorkerId, StateId)> = Vec::new();
        let mut passed: Vec<Reverse<Load>> = Vec::new();
        let slack = bound * 1e-9;
        for (c, id, owner) in all {
            let to = if load[owner] + c <= bound + slack || self.pinned(id, owner) {
                owner
            } else {
                let to = loop {
                    let Some(Reverse(Load(l, w))) = heap.pop() else {
                        break owner;
                    };
                    // Entries are stale once their worker's load changed.
                    if l != load[w] {
                        continue;
                    }
                    if w == owner || self.may_receive(w, owner, id) {
                        break w;
                    }
                    passed.push(Reverse(Load(l, w)));
                };
                heap.extend(passed.drain(..));
                to
            };
            if to != owner {
                moves.push((owner, to, id));
            }
            load[to] += c;
            heap.push(Reverse(Load(load[to], to)));
        }
        // Dealing can end worse than it began (a pool state tips its new
        // worker over the longest old load): then keep the old placement.
        let before = live
            .iter()
            .map(|&w| self.slots[w].pending_cost)
            .fold(0.0, f64::max);
        let after = load.iter().copied().fold(0.0, f64::max);
        if moves.is_empty() || after >= before - slack {
            return 0;
        }
        moves.sort_unstable();
        let moved: HashSet<StateId> = moves.iter().map(|m| m.2).collect();
        let mut victims: Vec<WorkerId> = moves.iter().map(|m| m.0).collect();
        victims.dedup();
        for v in victims {
            let mut p = std::mem::take(&mut self.slots[v].pending);
            p.retain(|id| !moved.contains(id));
            self.slots[v].pending_cost = p.iter().map(|id| self.cost(id)).sum();
            self.slots[v].pending = p;
        }
        let mut sent = 0;
        for group in moves.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            let ids = group.iter().map(|m| m.2).collect();
            self.move_states(group[0].0, group[0].1, ids, true);
            sent += 1;
        }
        sent
    }

    /// Whether `id` may move from `owner` to `to`: in buddy mode, not onto
    /// a worker holding its replica or one of `owner`'s replicas.
    pub(super) fn may_receive(&self, to: WorkerId, owner: WorkerId, id: StateId) -> bool {
        !self.keeps_replicas_of(to, owner) && !self.holds_replica(to, id)
    }

    /// Whether moving `excess` units of expected cost beats the moves' cost.
    fn worth_moving(&self, excess: f64) -> bool {
        let Some(ns_per_cost) = self.ns_per_cost else {
            return true; // nothing measured yet: assume calls are long
        };
        let rtts: Vec<f64> = self.slots.iter().filter_map(|s| s.rtt_ns).collect();
        if rtts.is_empty() {
            return true;
        }
        let rtt = rtts.iter().sum::<f64>() / rtts.len() as f64;
        excess * ns_per_cost > 4.0 * rtt
    }
}
