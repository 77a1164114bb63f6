//! Stragglers (`Recovery::MasterCopy`): a worker that falls silent while
//! it owes an evolve, or whose batch in progress runs far past its
//! expected time (a stopped, swapping or preempted process), has its work
//! started again elsewhere, from the master's copies, and the first answer
//! wins.
//!
//! Two signals start it ([`speculate`](Scheduler::speculate)):
//! - **silence**: the worker owes an evolve of this step and nothing came
//!   from it for `Deadlines::quiet` (three heartbeats; a running worker
//!   beats from a thread of its own, whatever its calls do): it is taken
//!   for stopped ([`quiet_at`](Scheduler::quiet_at)); silent
//!   [`STOPPED_QUIETS`] times as long (and twice the longest pause any
//!   worker showed lately: `hiccup.rs`), it is dropped as lost
//!   ([`stopped_at`](Scheduler::stopped_at)), and its recovery places its
//!   work where it starts soonest, busy workers included;
//! - **time**: the batch it is evolving (the oldest evolve it owes,
//!   counted from when it was sent or the batch before it came back) has
//!   run for [`STRAGGLE_FACTOR`] (2) × its expected time (its expected
//!   cost × the measured time per unit of cost × the p90 of recent
//!   batches' overrun of their cost; before costs are measured, the p99
//!   per state × its states), at least [`STRAGGLE_FLOOR`]: it still beats,
//!   so it may only be slow.
//!
//! Either way its work goes to idle workers only, when there are any (a
//! copy on a busy worker would delay that worker's own work; a slow
//! worker that still beats may finish first).
//!
//! The work is dealt over them most expensive first (`deal_soonest`):
//! - the straggler's pending states move there from the copies (`Add`
//!   there, `Drop` at the straggler: no request names them);
//! - the states of every evolve of this step it owes are placed there
//!   too, from the copies, and queued with their inputs; those requests
//!   are *fenced*, and the straggler becomes one: it gets no more work,
//!   nothing moves to it, and no operation waits for it;
//! - whichever evolve of a state answers first is booked (children, ids,
//!   outputs, copies); a copy still queued elsewhere is dropped there, and
//!   an answer that comes second has its children dropped where they were
//!   made (`on_evolved`). Both answers are the same bits: an evolve depends
//!   only on (seed, step, parent).
//!
//! A move out of a worker (`Remove`) not answered within [`STRAGGLE_FACTOR`]
//! × a move's measured time, at least [`STRAGGLE_FLOOR`], lands at its
//! thief from the copies instead ([`land_moves_from_copies`]); the
//! victim's late answer is ignored and no operation waits for it. (A
//! start-of-step rebalance holds every evolve until its moves land: a
//! stopped victim would otherwise hold the whole step.)
//!
//! [`land_moves_from_copies`]: Scheduler::land_moves_from_copies
//!
//! A straggler that answers all its fenced evolves is an ordinary worker
//! again (holding only what it held before). One that is still behind
//! when the next operation starts has its states placed on the others
//! from the copies (and dropped on it), so that no step waits for it; if
//! it is stopped, the silence deadline finds it later, holding nothing.
//! A speculative copy that is itself slow is a straggler in its turn.
//! With `Recovery::Buddy` the master has no copies to start the work
//! from, but every state the straggler holds has replicas on its buddies:
//! a worker silent for [`BUDDY_QUIET_FACTOR`] (2) × `Deadlines::quiet`
//! (or twice the longest recent pause, `hiccup.rs`) owing an answer (a
//! batch, a move of the start-of-step rebalance, which holds every batch,
//! its part of a replication round, a fetch, whose states are then
//! fetched from their promoted replicas, or a reset's or restore's
//! placing, placed again from the bytes the master keeps until a round
//! commits them), or whose batch runs
//! [`BUDDY_STRAGGLE_FACTOR`] (3) × its expected time, at least
//! [`BUDDY_STRAGGLE_FLOOR`], is dropped as if lost (see
//! [`buddy_stragglers`](Scheduler::buddy_stragglers)), and its states are
//! promoted on their buddies and evolved there; the worker's connection is
//! closed, so its late answers never count. A stopped worker then costs
//! that bound instead of the silence deadline. It is dropped only when its
//! loss is recoverable with no other straggler's help: every state it
//! holds has a replica on a live worker that neither straggles nor is
//! dropped at the same moment, and at least `replicas + 2` workers
//! remain.

use std::time::{Duration, Instant};

use super::{Req, Scheduler, WorkerId};
use crate::evolve::StateId;
use crate::protocol::{self, Kind};

/// A batch running this many times its expected time is started again
/// (`Recovery::MasterCopy`: the copy runs on an idle worker, so a false
/// alarm costs only idle time).
pub(super) const STRAGGLE_FACTOR: f64 = 2.0;

/// With `Recovery::Buddy`, a batch running this many times its expected
/// time has its worker dropped: a false alarm costs a worker.
pub(super) const BUDDY_STRAGGLE_FACTOR: f64 = 3.0;

/// ... but never before it has run this long.
pub(super) const STRAGGLE_FLOOR: Duration = Duration::from_millis(50);

/// With `Recovery::MasterCopy`, a worker owing an evolve of the step is
/// dropped as stopped after this many times `Deadlines::quiet` of silence
/// (after one, its work already started again on idle workers): its loss
/// places its work where it starts soonest, busy workers included.
pub(super) const STOPPED_QUIETS: u32 = 2;

/// With `Recovery::Buddy`, a worker owing an answer is dropped as stopped
/// after this many times `Deadlines::quiet` of silence, as with
/// `MasterCopy` (buddy mode has no copies to try first).
pub(super) const BUDDY_QUIET_FACTOR: u32 = STOPPED_QUIETS;

/// With `Recovery::Buddy`, a straggler is dropped (not merely doubled), so
/// the bound is longer: a loaded host's scheduling hiccup must not cost a
/// healthy worker.
pub(super) const BUDDY_STRAGGLE_FLOOR: Duration = Duration::from_millis(300);

impl Scheduler {
    /// Whether `w` may be sent states: it lives, does not straggle, and owes
    /// no evolve whose parent another worker finished first (its late
    /// children would have the ids of states placed on it meanwhile).
    pub(super) fn takes_states(&self, w: WorkerId) -> bool {
        let s = &self.slots[w];
        s.alive
            && !s.leaving
            && s.fenced == 0
            && !s.in_flight.iter().any(|r| {
                matches!(r, Req::Evolve { ids, step, .. }
                    if *step != self.step || ids.iter().any(|id| self.results.contains_key(id)))
            })
    }

    /// Live workers that may be sent states (see `takes_states`), or if
    /// none may, every live one.
    pub(super) fn usable(&self) -> Vec<WorkerId> {
        let u: Vec<WorkerId> = (0..self.slots.len())
            .filter(|&w| self.takes_states(w))
            .collect();
        if u.is_empty() {
            self.live()
        } else {
            u
        }
    }

    /// When `w`'s batch in progress becomes a straggler's, if it is of this
    /// step and speculation applies.
    pub(super) fn straggles_at(
        &self,
        w: WorkerId,
        p99: Option<f64>,
        ratio_p90: Option<f64>,
        bulk: Option<Instant>,
    ) -> Option<Instant> {
        if !self.master_copies() || !self.evolving || self.failed_at.is_some() {
            return None;
        }
        let s = &self.slots[w];
        if !s.alive || s.fenced > 0 {
            return None;
        }
        // A move out of it that has not landed takes a round trip (a
        // start-of-step rebalance holds every evolve until its moves land).
        let copies = &self.copies;
        let remove_at = s.in_flight.iter().find_map(|r| match r {
            Req::Remove {
                ids,
                sent,
                fenced: false,
                ..
            } if ids.iter().all(|id| copies.contains_key(id)) => Some(*sent),
            _ => None,
        });
        let rt = STRAGGLE_FACTOR * self.move_ns.unwrap_or(0.0);
        let remove_at =
            remove_at.map(|t| t + STRAGGLE_FLOOR.max(Duration::from_nanos(rt.min(1e18) as u64)));
        let evolve_at =
            self.evolve_straggles_at(w, p99, ratio_p90, bulk, STRAGGLE_FACTOR, STRAGGLE_FLOOR);
        [remove_at, evolve_at].into_iter().flatten().min()
    }

    /// With `Recovery::Buddy`: the workers to drop now as stragglers (their
    /// batch of this step ran past its bound, or they fell silent owing an
    /// answer during an evolve or a fetch; see the module's comment),
    /// with the reason, skipping any in `exclude` (already being dropped);
    /// and when the next bound falls. Bytes read from a worker (`io`: a
    /// large frame on its way, the heartbeats queued behind it) count as
    /// hearing from it.
    pub(super) fn buddy_stragglers(
        &self,
        now: Instant,
        p99: Option<f64>,
        ratio_p90: Option<f64>,
        exclude: &[WorkerId],
        io: &dyn Fn(WorkerId) -> super::Io,
    ) -> (Vec<(WorkerId, String)>, Option<Instant>) {
        let mut drop: Vec<(WorkerId, String)> = Vec::new();
        let mut next = None;
        if !self.buddies() || self.failed_at.is_some() || !self.recovering() {
            return (drop, next);
        }
        let live = (0..self.slots.len())
            .filter(|&w| self.slots[w].alive)
            .count();
        let keep = self.cfg.replicas + 2;
        let quiet = self
            .cfg
            .deadlines
            .quiet()
            .map(|q| self.hiccups.stop_bound(q * BUDDY_QUIET_FACTOR, now));
        let heard = |w: WorkerId| {
            let last = self.slots[w].last_heard;
            io(w).read.map_or(last, |r| r.max(last))
        };
        // When `w` is dropped: its batch ran past its bound, or it fell
        // silent owing an answer (an evolve, or a move at the start of the
        // step, which holds every evolve until it lands): then `true`.
        let when = |w: WorkerId| {
            let s = &self.slots[w];
            if !s.alive || s.fenced > 0 {
                return None;
            }
            let slow = self.evolve_straggles_at(
                w,
                p99,
                ratio_p90,
                io(w).bulk,
                BUDDY_STRAGGLE_FACTOR,
                BUDDY_STRAGGLE_FLOOR,
            );
            let heard = heard(w);
            let silent = quiet
                .zip(s.beats_from)
                .filter(|_| self.owes(w))
                .map(|(q, from)| from.max(heard) + q);
            match (silent, slow) {
                (Some(t), Some(u)) if t < u => Some((t, true)),
                (Some(t), None) => Some((t, true)),
                (_, Some(u)) => Some((u, false)),
                (None, None) => None,
            }
        };
        let at = |w: WorkerId| when(w).map(|x| x.0);
        for w in 0..self.slots.len() {
            if exclude.contains(&w) {
                continue;
            }
            let Some((t, silent)) = when(w) else { continue };
            if now < t {
                next = Some(next.map_or(t, |n: Instant| n.min(t)));
                continue;
            }
            if live.saturating_sub(exclude.len() + drop.len()) < keep + 1 {
                continue;
            }
            let gone = |h: WorkerId| {
                exclude.contains(&h)
                    || drop.iter().any(|d| d.0 == h)
                    || at(h).is_some_and(|t| now >= t)
            };
            let Some(holders) = self.promote_holders(w) else {
                continue;
            };
            if holders.iter().any(|&h| gone(h)) {
                continue;
            }
            let bound = t.saturating_duration_since(
                self.slots[w]
                    .in_flight
                    .iter()
                    .find_map(|r| match r {
                        Req::Evolve { sent, .. } => Some(*sent),
                        _ => None,
                    })
                    .map_or(t, |sent| self.evolve_started(w, sent, io(w).bulk)),
            );
            let why = if silent {
                format!(
                    "silent for {:.3} s owing {} (taken for stopped after {:.3} s); dropped, \
                     its states promoted on their buddies",
                    now.saturating_duration_since(heard(w)).as_secs_f64(),
                    self.owed(w),
                    quiet.unwrap_or_default().as_secs_f64()
                )
            } else {
                format!(
                    "a straggler: its batch of step {} ran past {:.3} s ({BUDDY_STRAGGLE_FACTOR}x its \
                     expected time, at least {:.3} s); dropped, its states promoted on their buddies",
                    self.step,
                    bound.as_secs_f64(),
                    BUDDY_STRAGGLE_FLOOR.as_secs_f64()
                )
            };
            drop.push((w, why));
        }
        (drop, next)
    }

    /// When `w`'s batch in progress becomes a straggler's, if it is of this
    /// step.
    fn evolve_straggles_at(
        &self,
        w: WorkerId,
        p99: Option<f64>,
        ratio_p90: Option<f64>,
        bulk: Option<Instant>,
        factor: f64,
        floor: Duration,
    ) -> Option<Instant> {
        let s = &self.slots[w];
        let (n, step, sent, cost) = s.in_flight.iter().find_map(|r| match r {
            Req::Evolve {
                ids,
                step,
                sent,
                cost,
                ..
            } => Some((ids.len(), *step, *sent, *cost)),
            _ => None,
        })?;
        if step != self.step {
            return None;
        }
        // Its expected time: by its cost, stretched by how far batches
        // overran their cost recently (p90); without cost measurements,
        // the p99 per state.
        let expected = match (self.ns_per_cost, ratio_p90) {
            (Some(t), Some(r)) if cost > 0.0 => t * cost * r.max(1.0),
            _ => p99? * n.max(1) as f64,
        };
        let ns = factor * expected;
        let bound = floor.max(Duration::from_nanos(ns.min(1e18) as u64));
        Some(self.evolve_started(w, sent, bulk) + bound)
    }

    /// Starts `w`'s work of this step again on the idle workers (see the
    /// module's comment). Returns whether it did (no idle worker: not now).
    pub(super) fn speculate(&mut self, w: WorkerId) -> bool {
        let idle = |s: &super::Slot| {
            s.alive && s.fenced == 0 && s.evolving == 0 && s.pending.is_empty() && s.incoming == 0
        };
        let to: Vec<WorkerId> = (0..self.slots.len())
            .filter(|&t| t != w && idle(&self.slots[t]))
            .collect();
        if to.is_empty() {
            return self.land_moves_from_copies(w, None);
        }
        let step = self.step;
        let mut again = Vec::new();
        let mut fenced = 0;
        for r in &mut self.slots[w].in_flight {
            if let Req::Evolve {
                ids,
                step: s,
                fenced: f,
                ..
            } = r
            {
                if *s == step && !*f {
                    *f = true;
                    fenced += 1;
                    again.extend(ids.iter().copied());
                }
            }
        }
        let s = &mut self.slots[w];
        s.fenced += fenced;
        let moved = std::mem::take(&mut s.pending);
        s.pending_cost = 0.0;
        // Copies of other workers' states queued here (started again
        // beside a straggler) are not moved: `w` drops them and, unless
        // another copy runs, they start again like its evolves in flight.
        let loc = &self.location;
        let (own, queued): (Vec<StateId>, Vec<StateId>) =
            moved.iter().partition(|id| loc.get(id) == Some(&w));
        for id in &queued {
            if let Some(at) = self.dups.get_mut(id) {
                at.retain(|&x| x != w);
                if at.is_empty() {
                    self.dups.remove(id);
                }
            }
        }
        again.extend(queued.iter().filter(|id| !self.results.contains_key(id)));
        // Only states the master has the bytes and input of, and none
        // that runs on a worker that answers (its own holder, or a copy
        // started before: a straggler unfenced when the copy it waited for
        // was lost may straggle again): a second copy could land beside
        // the first, on a worker that then evolves the state twice.
        let slots = &self.slots;
        let answers = |x: WorkerId| x != w && slots[x].alive && slots[x].fenced == 0;
        // (Not by `dups` alone: a straggler unfenced when its state's last
        // copy was lost runs its evolve again, and `dups` no longer names it.)
        let running = |id: &StateId| {
            self.location.get(id).is_some_and(|&x| answers(x))
                || (0..slots.len()).any(|x| {
                    answers(x)
                        && (slots[x].pending.contains(id)
                            || slots[x].in_flight.iter().any(|r| {
                                matches!(r, Req::Evolve { ids, fenced: false, .. } if ids.contains(id))
                            }))
                })
        };
        again.retain(|id| {
            self.copies.contains_key(id) && self.sent_inputs.contains_key(id) && !running(id)
        });
        again.sort_unstable();
        again.dedup();
        // Only now do its moves land: landing the step's last planned move
        // releases every worker's first batch (`landed`), and that refill
        // must find `w` fenced and without pending states. Before, it sent
        // `w` batches, and an idle worker stole `w`'s pending states with a
        // `Remove` that nothing waited for once `w` was fenced (`is_quiet`):
        // the step ended with them never evolved.
        // Planned moves out of it that have not landed go to their thieves,
        // or where a state would start soonest.
        let first = self.deal_soonest(&[((), 1.0)], &to);
        let fallback = to
            .iter()
            .zip(&first)
            .find(|x| !x.1.is_empty())
            .map(|x| *x.0);
        let landed = self.land_moves_from_copies(w, fallback);
        if own.is_empty() && again.is_empty() {
            if !moved.is_empty() {
                self.send_ids(w, Kind::Drop, &moved, Req::Drop);
            }
            return fenced > 0 || landed;
        }
        // Most expensive first, over the idle workers as wide as it can.
        let all: Vec<((StateId, bool), f64)> = own
            .iter()
            .map(|id| (*id, true))
            .chain(again.iter().map(|id| (*id, false)))
            .map(|x| (x, self.cost_of(&x.0)))
            .collect();
        let share = self.deal_soonest(&all, &to);
        let mut dealt = Vec::new();
        for (&dest, items) in to.iter().zip(share) {
            if items.is_empty() {
                continue;
            }
            let mut ids = Vec::with_capacity(items.len());
            for (id, is_moved) in items {
                ids.push(id);
                if is_moved {
                    self.location.insert(id, dest);
                } else {
                    let x = self.sent_inputs[&id].clone();
                    self.inputs.insert(id, x);
                    self.dups.entry(id).or_default().push(dest);
                }
            }
            dealt.push((dest, ids));
        }
        if !moved.is_empty() {
            self.send_ids(w, Kind::Drop, &moved, Req::Drop);
        }
        if let Some(t) = &self.tel {
            let detail = format!(
                "{} evolves started again and {} queued states moved, on {} workers",
                again.len(),
                own.len(),
                dealt.len()
            );
            t.straggler_rerun(w, detail);
        }
        tracing::info!(
            straggler = w,
            workers = dealt.len(),
            again = again.len(),
            moved = moved.len(),
            "a worker fell silent or its batch ran far past its expected time; its step's \
             work starts again on idle workers"
        );
        for (dest, ids) in dealt {
            self.add_copies_to(dest, &ids);
            self.slots[dest].stats.recovered_states += ids.len() as u64;
            self.push_pending(dest, ids);
            self.refill(dest);
        }
        true
    }

    /// If `id` (booked on a worker being lost) has a copy started on a
    /// live worker, books it there and says so.
    pub(super) fn adopt_copy(&mut self, id: StateId) -> bool {
        let Some(at) = self.dups.get_mut(&id) else {
            return false;
        };
        at.retain(|&x| self.slots[x].alive);
        let Some(x) = at.pop() else {
            return false;
        };
        if at.is_empty() {
            self.dups.remove(&id);
        }
        self.location.insert(id, x);
        true
    }

    /// The moves out of straggler `w` that have not landed go to their
    /// thieves (or, if a thief cannot take them, to `fallback`) from the
    /// copies; `w`'s answers to them will be ignored, and no operation
    /// waits for them. Returns whether any did.
    fn land_moves_from_copies(&mut self, w: WorkerId, fallback: Option<WorkerId>) -> bool {
        let ok = |v: WorkerId| v != w && self.takes_states(v);
        let mut moves = Vec::new();
        for (k, r) in self.slots[w].in_flight.iter().enumerate() {
            if let Req::Remove {
                ids,
                thief,
                step,
                sent,
                fenced: false,
            } = r
            {
                if !ids.iter().all(|id| self.copies.contains_key(id)) {
                    continue;
                }
                let dest = if ok(*thief) { Some(*thief) } else { fallback };
                if let Some(dest) = dest {
                    moves.push((k, ids.clone(), *thief, dest, *step, *sent));
                }
            }
        }
        let any = !moves.is_empty();
        for (k, ids, thief, dest, step, sent) in moves {
            if let Some(Req::Remove { fenced, .. }) = self.slots[w].in_flight.get_mut(k) {
                *fenced = true;
            }
            let th = &mut self.slots[thief];
            th.incoming = th.incoming.saturating_sub(1);
            self.add_copies_to(dest, &ids);
            for id in &ids {
                self.location.insert(*id, dest);
            }
            self.landed(dest, ids, step, sent);
        }
        any
    }

    /// Sends `ids` to `t` from the copies (`Add`).
    fn add_copies_to(&mut self, t: WorkerId, ids: &[StateId]) {
        let frames = protocol::state_frames(
            Kind::Add,
            ids.iter().map(|id| (*id, self.copies[id].as_slice())),
        );
        for (f, n) in frames {
            self.send(t, f, Req::Add(n));
        }
    }

    /// `parent` was evolved by `winner` (and booked at `was` before): its
    /// copies still queued on other workers are dropped there. (A copy
    /// whose evolve is in flight is dropped when it answers.)
    pub(super) fn drop_other_copies(
        &mut self,
        parent: StateId,
        winner: WorkerId,
        was: Option<WorkerId>,
    ) {
        let mut at = self.dups.remove(&parent).unwrap_or_default();
        at.extend(was);
        for x in at {
            if x == winner || !self.slots[x].alive {
                continue;
            }
            if self.take_pending(x, parent) {
                self.inputs.remove(&parent);
                self.send_ids(x, Kind::Drop, &[parent], Req::Drop);
            }
        }
    }

    /// `w` is lost: a straggler whose fenced work had its only started
    /// copy on `w` is waited for again (and, if it is stopped, found by the
    /// silence deadline and recovered from like any lost worker).
    ///
    /// Only a copy the operation waits for counts: one on a live worker
    /// other than `w` that is not a straggler itself. A worker given a copy
    /// and then found straggling had it fenced with the rest of its work
    /// (`speculate`) and stays in `dups`; counting it would leave a state
    /// whose every evolve is fenced, which no operation waits for (it
    /// would end quiet with the state never evolved). Such copies leave
    /// `dups` here, so that `adopt_copy` never books a state on one; their
    /// answers, should they win, are booked as any (`on_evolved`).
    pub(super) fn copies_lost_with(&mut self, w: WorkerId) {
        let mut bare = std::collections::HashSet::new();
        let slots = &self.slots;
        self.dups.retain(|p, at| {
            at.retain(|&x| x != w && slots[x].alive && slots[x].fenced == 0);
            if at.is_empty() {
                bare.insert(*p);
            }
            !at.is_empty()
        });
        if bare.is_empty() {
            return;
        }
        for x in 0..self.slots.len() {
            let s = &mut self.slots[x];
            if !s.alive || s.fenced == 0 {
                continue;
            }
            let waits = s.in_flight.iter().any(|r| {
                matches!(r, Req::Evolve { ids, fenced: true, .. } if ids.iter().any(|id| bare.contains(id)))
            });
            if waits {
                s.fenced = 0;
                let mut runs = Vec::new();
                for r in &mut s.in_flight {
                    if let Req::Evolve { fenced, ids, .. } = r {
                        *fenced = false;
                        runs.extend(ids.iter().filter(|id| bare.contains(id)).copied());
                    }
                }
                // Its copies run again: booked as such, so that a loss
                // adopts them rather than placing the state beside them.
                for id in runs {
                    if self.location.get(&id) != Some(&x) {
                        self.dups.entry(id).or_default().push(x);
                    }
                }
            }
        }
    }

    /// Turns every straggler back into an ordinary worker, waited for.
    pub(super) fn unfence_all(&mut self) {
        for s in &mut self.slots {
            s.fenced = 0;
            for r in &mut s.in_flight {
                if let Req::Evolve { fenced, .. } = r {
                    *fenced = false;
                }
            }
        }
    }

    /// At the start of an operation: the states of a worker still behind
    /// on fenced evolves go to the others from the copies (and are dropped
    /// on it), so that the operation does not wait for it.
    pub(super) fn evacuate_stragglers(&mut self) {
        if !self.master_copies() {
            return;
        }
        for w in 0..self.slots.len() {
            if !self.slots[w].alive || self.slots[w].fenced == 0 {
                continue;
            }
            let ids: Vec<StateId> = self
                .held_by(w)
                .into_iter()
                .filter(|id| self.copies.contains_key(id))
                .collect();
            if ids.is_empty() {
                continue;
            }
            let dest = self.usable();
            if dest.contains(&w) {
                // Every live worker straggles: wait for them as for any.
                self.unfence_all();
                return;
            }
            tracing::info!(
                straggler = w,
                states = ids.len(),
                "a worker still behind from the last operation: its states go to the others"
            );
            self.add_from_copies(&ids, &dest);
            self.send_ids(w, Kind::Drop, &ids, Req::Drop);
        }
    }
}
