//! Recovery from replicas held by buddy workers (`Recovery::Buddy`).
//!
//! Rounds: after an operation that changed the states (reset, restore,
//! evolve, admitting workers), [`Scheduler::begin_replicate`] asks every
//! live worker to send a copy of all it holds to each of its buddies, the
//! next `r` live workers in index order (`SchedConfig::replicas`, at most
//! the live workers less two; one `Replicate` per buddy, each answered
//! `Shipped`); each buddy tells the master when the whole replica is there
//! (`Held`). When every
//! `Shipped` and `Held` has come and nobody was lost meanwhile, the master
//! sends `Commit` to all: from then on the replicas of that round are what
//! a loss is recovered from, and the books say where each state's replica
//! is (`replica_at`). A round that a loss interrupts is void; the previous
//! committed round still serves, and a new round starts once the
//! operation's work is whole again.
//!
//! A lost worker `w`, during an operation or its round:
//! - every state the books place on `w` that was there at the last commit
//!   (or came to `w` since by a move or a promotion) is promoted from its
//!   replica on one of its holders still live in the books (`Promote`)
//!   and, if this step evolves it and it has not been evolved, evolved
//!   there: the states to evolve go, most expensive first, each to its
//!   holder where it would start soonest, and a long call that would
//!   still wait there for a long call of the holder's own moves on, once
//!   promoted, to the worker where it starts soonest (the holder keeps a
//!   copy, as any worker giving a state away does), the others
//!   to their first holder; the other holders keep theirs, so a state
//!   promoted onto a worker that is lost in turn (in the same moment, or
//!   later in the round) is promoted again from another;
//! - every parent `w` evolved in this operation is promoted from its
//!   replica the same way and evolved again (its children died with `w`;
//!   being derived from (seed, step, parent) they come back with the same
//!   ids, states and outputs, which replace the ones received);
//! - states placed from the master's bytes in this operation (reset,
//!   restore) are placed again from those bytes.
//!
//! Not recovered (the operation fails with `WorkerLost`): a state none of
//! whose holders is live, which takes the loss of a worker and all its
//! `r` buddies within one round (or of a worker holding promoted states
//! and every remaining holder of theirs). Moves never put a state on a
//! worker holding its replica. A worker that gives states away keeps them
//! as replicas until the next commit (`gave_away`), so a moved state's
//! copies stay its old worker and that worker's buddies (plus its new
//! holder), and a state with no live replica left (its worker and every
//! other holder lost, so promoted from the last one) may move as well:
//! its copies are then its holder and the receiver, and losing both means
//! losing its holder too, with the workers whose loss made it the only
//! copy (see `pinned`). So any `r` losses in a round leave a copy, and so
//! does any set of losses with no `r + 1` side by side (`tests/chaos.rs`
//! loses workers at every delivery of a run).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::{Req, Round, Scheduler, WorkerId};
use crate::evolve::StateId;
use crate::protocol::{self, msg, Kind};

/// Rounds in a row that may fail to reach a buddy before the master stops
/// trying until the next operation.
const MAX_UNREACHED: u32 = 3;

/// What recovering a lost worker takes.
#[derive(Default)]
pub(super) struct Plan {
    /// Replicas to make live, per worker holding them.
    promote: BTreeMap<WorkerId, Vec<StateId>>,
    /// States to place again from the master's bytes.
    readd: Vec<StateId>,
    /// Parents whose evolve on the lost worker runs again.
    redo: Vec<StateId>,
    /// Their children, lost with it.
    orphans: Vec<StateId>,
    /// Long calls to move on from their holder once promoted there (the
    /// state, the holder, the worker where it starts sooner).
    relocate: Vec<(StateId, WorkerId, WorkerId)>,
}

impl Scheduler {
    /// Whether `w` is one of `v`'s buddies, holding replicas of the states
    /// `v` held at the last round (so none of them may move to `w`).
    pub(super) fn keeps_replicas_of(&self, w: WorkerId, v: WorkerId) -> bool {
        self.buddies() && self.buddy.buddy_of.get(&v).is_some_and(|b| b.contains(&w))
    }

    /// `victim` gave `ids` away (a move) and, in buddy mode, keeps them as
    /// replicas until the next commit (the worker's `keep_given`): it is
    /// booked as a holder of theirs, after their buddies. A moved state's
    /// copies are then its new holder, its old worker and its old worker's
    /// buddies, so that losing its new holder and those buddies, none side
    /// by side, still leaves one.
    ///
    /// Only for a move sent after `victim`'s first `Commit` (`sent`): one
    /// sent before reached it before that `Commit`, and it kept nothing.
    pub(super) fn gave_away(
        &mut self,
        victim: WorkerId,
        ids: &[StateId],
        sent: std::time::Instant,
    ) {
        if !self.buddies() || !self.slots[victim].committed_at.is_some_and(|c| c < sent) {
            return;
        }
        for id in ids {
            let hs = self.buddy.replica_at.entry(*id).or_default();
            if !hs.contains(&victim) {
                hs.push(victim);
            }
        }
    }

    /// Whether `id` may not leave `holder`: it has no replica on a live
    /// worker (every holder of its committed replica was lost, or promoted
    /// it, or it was not replicated yet) and `holder` would keep no copy
    /// if it gave it away (it has committed no round, see `gave_away`).
    /// Given away by a holder that keeps a copy, its copies are that
    /// holder and the receiver, one more than where it stays, and the
    /// losses that would take both include the holder: with the losses
    /// that made it the only copy, a worker with all its buddies (`r + 1`
    /// side by side), the same as would take it where it stays. So a
    /// worker left with a lost neighbour's states as their only copies
    /// (the neighbour and the neighbour's other buddies lost) still has
    /// them taken by idle workers, instead of running them all itself.
    pub(super) fn pinned(&self, id: StateId, holder: WorkerId) -> bool {
        self.sole_copy(id) && self.slots[holder].committed_at.is_none()
    }

    /// Whether `id` has no replica on a live worker: it is its own only
    /// copy.
    fn sole_copy(&self, id: StateId) -> bool {
        self.buddies()
            && !self
                .buddy
                .replica_at
                .get(&id)
                .is_some_and(|hs| hs.iter().any(|&h| self.slots[h].alive))
    }

    /// Whether `w` holds a committed replica of `id` (so `id` may not move
    /// to `w`: one loss would take two of its copies).
    pub(super) fn holds_replica(&self, w: WorkerId, id: StateId) -> bool {
        self.buddy
            .replica_at
            .get(&id)
            .is_some_and(|h| h.contains(&w))
    }

    /// Ends the round in flight (committing it if it completed) and, if the
    /// states changed since the last commit, starts a new one. Returns
    /// whether frames went out: the driver runs again, then this is called
    /// again, until it returns `false`.
    pub(crate) fn begin_replicate(&mut self) -> bool {
        if !self.buddies() {
            return false;
        }
        if let Some(r) = self.buddy.round.take() {
            if !r.void && r.waiting == 0 && self.failed_at.is_none() {
                self.commit(r.id);
            } else if r.unreached && !r.lost {
                // A buddy that lives could not be reached: a network
                // matter that retrying may not mend. A buddy that could
                // not be reached because it was lost is no such matter.
                self.buddy.unreached += 1;
            }
        }
        if !self.buddy.dirty || self.failed_at.is_some() {
            return false;
        }
        if self.buddy.unreached >= MAX_UNREACHED {
            tracing::warn!(
                "replication failed {} times in a row (a worker cannot reach its buddy's \
                 peer address); the states of this step have no replica: a loss before the \
                 next committed round fails the run",
                self.buddy.unreached
            );
            self.buddy.unreached = 0;
            self.buddy.dirty = false;
            return false;
        }
        self.buddy.dirty = false;
        // A leaving worker holds no replicas: it goes once it holds nothing.
        let live = self.staying();
        let peers: Option<Vec<String>> = live.iter().map(|&w| self.slots[w].peer.clone()).collect();
        let peers = match peers {
            Some(p) if live.len() >= 2 => p,
            _ => {
                if !self.buddy.warned {
                    self.buddy.warned = true;
                    tracing::warn!(
                        workers = live.len(),
                        "no buddy to replicate to (one worker, or workers without a peer \
                         listener): a lost worker's states cannot be recovered"
                    );
                }
                self.buddy.replica_at.clear();
                self.buddy.buddy_of.clear();
                return false;
            }
        };
        self.buddy.rounds += 1;
        let id = self.buddy.rounds;
        let r = self.replicas_now(live.len());
        self.buddy.buddy_of.clear();
        for (k, &w) in live.iter().enumerate() {
            let mut buddies = Vec::with_capacity(r);
            for j in 1..=r {
                let next = (k + j) % live.len();
                let b = live[next];
                buddies.push(b);
                let mut f = Vec::new();
                let st = protocol::begin(&mut f, Kind::Replicate);
                msg::put_replicate(
                    &mut f,
                    &msg::Replicate {
                        round: id,
                        origin: w as u32,
                        to: &peers[next],
                    },
                );
                protocol::finish(&mut f, st);
                self.send(w, f, Req::Replicate);
                self.expect(
                    b,
                    Req::Hold {
                        round: id,
                        origin: w,
                    },
                );
            }
            self.buddy.buddy_of.insert(w, buddies);
        }
        self.buddy.round = Some(Round {
            id,
            waiting: 2 * r * live.len(),
            void: false,
            unreached: false,
            lost: false,
        });
        true
    }

    /// Replicas per state with `live` workers: as configured, but at
    /// least one and at most `live - 2`, so that every worker has a worker
    /// that holds no replica of its states, to which its states may move
    /// (with three workers and two replicas, nothing could ever be stolen).
    pub(super) fn replicas_now(&self, live: usize) -> usize {
        self.cfg.replicas.min(live.saturating_sub(2)).max(1)
    }

    fn commit(&mut self, round: u64) {
        let now = std::time::Instant::now();
        for w in 0..self.slots.len() {
            if self.slots[w].alive {
                self.slots[w].committed_at.get_or_insert(now);
                let mut f = Vec::new();
                protocol::encode(&mut f, Kind::Commit, &round.to_le_bytes());
                self.slots[w].stats.bytes_out += f.len() as u64;
                self.out.push((w, f));
            }
        }
        let buddy_of = &self.buddy.buddy_of;
        self.buddy.replica_at = self
            .location
            .iter()
            .filter_map(|(id, w)| buddy_of.get(w).map(|b| (*id, b.clone())))
            .collect();
        self.buddy.done.clear();
        self.buddy.unreached = 0;
        self.copies.clear();
        self.sent_inputs.clear();
    }

    pub(super) fn on_shipped(&mut self, w: WorkerId, n: u32, bytes: u64) {
        if n != u32::MAX {
            let st = &mut self.slots[w].stats;
            st.replicas_sent += 1;
            st.replica_bytes += bytes;
        }
        if let Some(r) = self.buddy.round.as_mut() {
            r.waiting = r.waiting.saturating_sub(1);
            if n == u32::MAX {
                r.void = true;
                r.unreached = true;
                self.buddy.dirty = true;
            }
        }
    }

    pub(super) fn on_held(&mut self) {
        if let Some(r) = self.buddy.round.as_mut() {
            r.waiting = r.waiting.saturating_sub(1);
        }
    }

    /// How `w`'s loss would be recovered, if it can be.
    pub(super) fn buddy_plan(&self, w: WorkerId) -> Option<Plan> {
        let mut plan = Plan::default();
        let mut orphans = HashSet::new();
        for (p, (at, kids)) in &self.buddy.done {
            if *at == w {
                plan.redo.push(*p);
                orphans.extend(kids.iter().copied());
            }
        }
        plan.redo.sort_unstable();
        let mut restore: Vec<StateId> = self
            .held_by(w)
            .into_iter()
            .filter(|id| !orphans.contains(id))
            .collect();
        restore.extend(plan.redo.iter().copied());
        // (state, its cost in this operation, its live holders)
        let mut wanted: Vec<(StateId, f64, Vec<WorkerId>)> = Vec::new();
        for id in restore {
            if self.copies.contains_key(&id) {
                plan.readd.push(id);
                continue;
            }
            // Holders still live in the books: if the one chosen is lost
            // too (several losses at once, handled one by one), its own
            // loss promotes the state again from another.
            let holders: Vec<WorkerId> = self
                .buddy
                .replica_at
                .get(&id)
                .map(|hs| {
                    hs.iter()
                        .copied()
                        .filter(|&h| h != w && self.slots[h].alive)
                        .collect()
                })
                .unwrap_or_default();
            if holders.is_empty() {
                return None;
            }
            let cost = if self.evolves_now(&id) {
                self.cost_of(&id)
            } else {
                0.0
            };
            wanted.push((id, cost, holders));
        }
        // The work to run again is dealt over the holders, most expensive
        // first, each state to the holder where it would start soonest:
        // after the evolves in flight there, the pending states at least
        // as expensive (batches go most expensive first) and what this
        // deal gave it before. (A holder's total load matters less: the
        // cheap states a promoted long call pushes back are stolen by
        // whoever runs out of work first, where a long call queued behind
        // another holds up the whole step.) A long call that would still
        // start much later there than on some other worker moves on to it
        // once promoted (`sooner_elsewhere`); the holder keeps a copy, as
        // any worker that gives a state away does (`gave_away`), so this
        // holds for a state promoted from its last replica too (see
        // `pinned`). The rest stay with their first holder.
        wanted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut dealt: HashMap<WorkerId, f64> = HashMap::new();
        for (id, cost, holders) in wanted {
            let mut holder = holders[0];
            if cost > 0.0 {
                let mut soonest = f64::INFINITY;
                for &h in &holders {
                    let at = self.starts_after(h, cost, &dealt);
                    if at < soonest {
                        (soonest, holder) = (at, h);
                    }
                }
                let to = self.sooner_elsewhere(w, id, cost, holder, soonest, &dealt);
                if let Some(t) = to {
                    plan.relocate.push((id, holder, t));
                }
                *dealt.entry(to.unwrap_or(holder)).or_default() += cost;
            }
            plan.promote.entry(holder).or_default().push(id);
        }
        for ids in plan.promote.values_mut() {
            ids.sort_unstable();
        }
        plan.orphans = orphans.into_iter().collect();
        Some(plan)
    }

    /// The cost ahead of a call of `cost` queued on `h` now: the evolves
    /// in flight there, its pending states at least as costly (batches go
    /// most expensive first) and what the deal in progress gave it.
    fn starts_after(&self, h: WorkerId, cost: f64, dealt: &HashMap<WorkerId, f64>) -> f64 {
        let before: f64 = self.slots[h]
            .pending
            .iter()
            .map(|p| self.cost(p))
            .filter(|&c| c >= cost)
            .sum();
        self.cost_ahead(h) + before + dealt.get(&h).copied().unwrap_or(0.0)
    }

    /// Where a long call of the lost `w`, to be promoted on `holder` (where
    /// it would start after `at` units of cost), starts sooner by more than
    /// a move takes: the worker with the least ahead of it among those it
    /// may move to (not a holder of its replica, not one of `holder`'s
    /// buddies). Only for long calls (more than [`HOLD_BEHIND`] × the
    /// step's mean cost), which hold up the step, and once costs and
    /// moves are measured; the short calls a promotion pushes back are
    /// stolen at the end of the step anyway. Promoted, the state still has
    /// a replica on its other holders, if any, and `holder` keeps a copy
    /// of it when it gives it away (`gave_away`), so it may move.
    ///
    /// [`HOLD_BEHIND`]: super::plan::HOLD_BEHIND
    fn sooner_elsewhere(
        &self,
        w: WorkerId,
        id: StateId,
        cost: f64,
        holder: WorkerId,
        at: f64,
        dealt: &HashMap<WorkerId, f64>,
    ) -> Option<WorkerId> {
        let (Some(ns_per_cost), Some(move_ns)) = (self.ns_per_cost, self.move_ns) else {
            return None;
        };
        if !self.evolving
            || ns_per_cost <= 0.0
            || cost <= super::plan::HOLD_BEHIND * self.mean_cost
            || self.dups.contains_key(&id)
        {
            return None;
        }
        let mut best: Option<(f64, WorkerId)> = None;
        for v in 0..self.slots.len() {
            if v == w || v == holder || !self.takes_states(v) || !self.may_receive(v, holder, id) {
                continue;
            }
            let t = self.starts_after(v, cost, dealt);
            if best.map_or(true, |b| t < b.0) {
                best = Some((t, v));
            }
        }
        let (t, v) = best?;
        ((at - t) * ns_per_cost > move_ns).then_some(v)
    }

    /// Why `buddy_plan(w)` found no plan, for the log: how many of the
    /// states `w`'s loss would restore have no holder of a replica still
    /// live, and one of them.
    pub(super) fn why_no_buddy_plan(&self, w: WorkerId) -> String {
        // As `buddy_plan`: children made on `w` this round come back with
        // their parents, evolved again.
        let orphans: HashSet<StateId> = self
            .buddy
            .done
            .values()
            .filter(|(at, _)| *at == w)
            .flat_map(|(_, kids)| kids.iter().copied())
            .collect();
        let bare: Vec<StateId> = self
            .held_by(w)
            .into_iter()
            .filter(|id| !orphans.contains(id))
            .chain(
                self.buddy
                    .done
                    .iter()
                    .filter(|(_, (at, _))| *at == w)
                    .map(|(p, _)| *p),
            )
            .filter(|id| {
                !self.copies.contains_key(id)
                    && !self
                        .buddy
                        .replica_at
                        .get(id)
                        .is_some_and(|hs| hs.iter().any(|&h| h != w && self.slots[h].alive))
            })
            .collect();
        format!(
            "{} of its states have no live replica (e.g. {:?}: its worker and every holder of \
             its replica lost since the last committed round)",
            bare.len(),
            bare.first()
        )
    }

    /// The workers `w`'s loss would promote states on, if it can be
    /// recovered at all (for dropping a straggler: see `straggle.rs`).
    pub(super) fn promote_holders(&self, w: WorkerId) -> Option<Vec<WorkerId>> {
        self.buddy_plan(w).map(|p| p.promote.into_keys().collect())
    }

    /// Recovers from `w`'s loss with `plan` (see the module's comment).
    pub(super) fn recover_from_replicas(&mut self, w: WorkerId, reason: &str, plan: Plan) {
        let (addr, in_flight) = self.retire(w);
        let mut refetch = Vec::new();
        for r in in_flight {
            match r {
                Req::Remove {
                    thief,
                    fenced: false,
                    ..
                } => {
                    let t = &mut self.slots[thief];
                    t.incoming = t.incoming.saturating_sub(1);
                }
                Req::Fetch(ids) => refetch.extend(ids),
                _ => {}
            }
        }
        // Its replicas and its part in the round are gone.
        for s in &mut self.slots {
            s.in_flight
                .retain(|r| !matches!(r, Req::Hold { origin, .. } if *origin == w));
        }
        if let Some(r) = self.buddy.round.as_mut() {
            r.void = true;
            r.lost = true;
        }
        self.buddy.dirty = true;
        self.buddy.replica_at.retain(|_, hs| {
            hs.retain(|h| *h != w);
            !hs.is_empty()
        });
        self.buddy.done.retain(|_, (at, _)| *at != w);
        for id in &plan.orphans {
            self.location.remove(id);
        }
        for p in &plan.redo {
            if self.results.remove(p).is_some() {
                self.remaining += 1;
            }
        }
        let live = self.live();
        if let Some(t) = &self.tel {
            let promoted = plan.promote.values().map(Vec::len).sum::<usize>();
            // (Relocated states are promoted ones, moved on.)
            let placed = promoted + plan.readd.len();
            t.promoted(w, promoted, plan.promote.len());
            t.recovered(w, placed, live.len());
        }
        tracing::warn!(
            worker = w,
            %addr,
            promoted = plan.promote.values().map(Vec::len).sum::<usize>(),
            evolved_again = plan.redo.len(),
            "worker lost ({reason}); promoting the replicas of its states on their buddies"
        );
        for (h, ids) in plan.promote {
            self.send_ids(h, Kind::Promote, &ids, Req::Promote(ids.len() as u32));
            // That replica is live now; the other holders keep theirs.
            for id in &ids {
                if let Some(hs) = self.buddy.replica_at.get_mut(id) {
                    hs.retain(|x| *x != h);
                }
            }
            self.place_again(h, &ids);
        }
        for (id, h, t) in plan.relocate {
            // As a steal would: out of the holder's pending, to `t`; the
            // holder keeps it as a replica until the next commit.
            if self.slots[t].alive && self.take_pending(h, id) {
                self.move_states(h, t, vec![id], false);
            }
        }
        self.add_from_copies(&plan.readd, &live);
        let mut per: BTreeMap<WorkerId, Vec<StateId>> = BTreeMap::new();
        // A fetch of an operation abandoned since (its answers were to come
        // late, and a rollback rebuilt the books) may name states the books
        // no longer place anywhere: nothing waits for those.
        for id in refetch {
            if let Some(&h) = self.location.get(&id) {
                per.entry(h).or_default().push(id);
            }
        }
        for (h, ids) in per {
            self.send_ids(h, Kind::Fetch, &ids.clone(), Req::Fetch(ids));
        }
        self.recovered_at.push(std::time::Instant::now());
        for v in live {
            self.refill(v);
        }
        self.retry_idle();
    }
}
