//! Recovery from a lost worker (`Recovery::MasterCopy`): its states go to
//! the survivors from the master's copies, and its unfinished evolves run
//! again there. (`Recovery::Buddy` is in `buddy.rs`; the helpers here
//! serve both.)
//!
//! What makes this exact: a child's id and every random number of an
//! evolve derive from (seed, step, parent), never from where it ran, so an
//! evolve run a second time elsewhere makes the same children with the same
//! ids and outputs. The master holds the bytes of every live state (from
//! `reset_states`, then from each `Evolved`, which carries each child's
//! state beside its output), so nothing a lost worker held is missing:
//! - a state not named in this step, or a child it made in this step, is
//!   placed on a survivor (`Add`) and waits there;
//! - a state it was to evolve (pending, or in an evolve request it never
//!   answered) is placed on a survivor and joins its pending states, with
//!   its input: most expensive first, each on the survivor with the least
//!   expected work in flight (`deal_soonest`), so that a long call lost
//!   near the end of a step starts again behind the shortest queue;
//! - a `Fetch` it never answered is answered from the copies.
//!
//! "A survivor" is one that takes states (`takes_states`): not a
//! straggler, and not behind on an evolve another worker finished first,
//! whose late children would have the ids of states placed on it. When no
//! survivor takes states at the moment of the loss (at the end of a step,
//! every one may be a straggler or run a copy of a straggler's work that
//! the straggler answered first), the states wait (`parked`) and the
//! operation waits for them, until a survivor has answered those evolves
//! and takes states (`place_parked`, after every frame), or is lost in turn.
//!
//! A lost worker's connection is closed by the driver first, so none of its
//! later frames is ever read: a partitioned worker that comes back cannot
//! deliver a result twice.

use std::collections::VecDeque;

use super::{Req, Scheduler, WorkerId};
use crate::evolve::StateId;
use crate::protocol::{self, Kind};

impl Scheduler {
    /// The states the books place on `w`, in id order.
    pub(super) fn held_by(&self, w: WorkerId) -> Vec<StateId> {
        let mut ids: Vec<StateId> = self
            .location
            .iter()
            .filter(|e| *e.1 == w)
            .map(|e| *e.0)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Whether `w`'s loss can be recovered from: recovery is on, the loss
    /// is not a failed request, another worker lives, and every state on
    /// `w` has a copy (with `Buddy`: a replica on a live worker, see
    /// `buddy.rs`).
    ///
    /// With the master's copies, the survivor need not take states now: a
    /// worker behind on evolves another worker finished first (a
    /// straggler, or one running a copy started beside a straggler that
    /// answered first) would make children with the ids of the states
    /// placed on it, so the states wait (`parked`) until one of them has
    /// answered those evolves, which the operation waits for (or is lost
    /// in turn). Requiring a worker that takes states at the moment of the
    /// loss failed the run when every survivor was behind at once (at the
    /// end of a step, when the copies of a straggler's work went to every
    /// idle worker and the straggler answered first).
    pub(super) fn can_recover(&self, w: WorkerId) -> bool {
        let other = |v: WorkerId| {
            v != w
                && if self.buddies() {
                    self.takes_states(v)
                } else {
                    self.slots[v].alive
                }
        };
        self.recovering()
            && !self.worker_failed
            && (0..self.slots.len()).any(other)
            && (self.buddies()
                || self
                    .location
                    .iter()
                    .all(|(id, &at)| at != w || self.copies.contains_key(id)))
    }

    /// Why `can_recover(w)` is false, for the log: which condition, so
    /// that a loss given up on in a long run says what it lacked.
    pub(super) fn why_not_recovered(&self, w: WorkerId) -> String {
        let others = (0..self.slots.len())
            .filter(|&v| v != w && self.slots[v].alive)
            .count();
        let takers = (0..self.slots.len())
            .filter(|&v| v != w && self.takes_states(v))
            .count();
        let bare = self
            .location
            .iter()
            .filter(|(id, &at)| at == w && !self.copies.contains_key(id))
            .count();
        format!(
            "recovery {:?}, failed request {}, {others} other live workers of which {takers} \
             take states, {bare} of its states without a master copy",
            self.cfg.recovery, self.worker_failed
        )
    }

    /// Places everything `w` held on the survivors and carries on.
    pub(super) fn recover(&mut self, w: WorkerId, reason: &str) {
        if self.buddies() {
            match self.buddy_plan(w) {
                Some(plan) => self.recover_from_replicas(w, reason, plan),
                None => {
                    tracing::warn!(worker = w, "not recovered: {}", self.why_no_buddy_plan(w));
                    self.give_up(w, reason);
                }
            }
            return;
        }
        let (addr, in_flight) = self.retire(w);
        for r in in_flight {
            match r {
                // A thief waiting for states `w` was to hand over: they
                // come from the copies instead.
                Req::Remove {
                    thief,
                    fenced: false,
                    ..
                } => {
                    let t = &mut self.slots[thief];
                    t.incoming = t.incoming.saturating_sub(1);
                }
                Req::Fetch(ids) => {
                    for id in ids {
                        let b = self.copies.get(&id).cloned().unwrap_or_default();
                        self.fetched.push((id, b));
                    }
                }
                _ => {}
            }
        }
        let mut lost = self.held_by(w);
        if !self.dups.is_empty() {
            self.copies_lost_with(w);
            // A state started again beside `w` (a straggler) lives on
            // where its copy went: that copy is the one now.
            lost.retain(|id| !self.adopt_copy(*id));
        }
        let live = self.takers();
        tracing::warn!(
            worker = w,
            %addr,
            states = lost.len(),
            survivors = live.len(),
            "worker lost ({reason}); placing its states on the survivors"
        );
        self.recovered_at.push(std::time::Instant::now());
        if let Some(t) = &self.tel {
            t.recovered(w, lost.len(), live.len());
        }
        // No survivor takes states now: they wait (see `can_recover`).
        self.parked.extend(lost);
        self.place_parked();
        // Every survivor, placed on or not: planned moves no longer hold
        // the step (`retire`).
        for v in self.live() {
            self.refill(v);
        }
        self.retry_idle();
    }

    /// The live workers that may be sent states (`takes_states`).
    fn takers(&self) -> Vec<WorkerId> {
        (0..self.slots.len())
            .filter(|&v| self.takes_states(v))
            .collect()
    }

    /// Places the states of lost workers that wait for a worker taking
    /// states (`parked`) on those that take them now, from the copies.
    pub(super) fn place_parked(&mut self) {
        if self.parked.is_empty() {
            return;
        }
        let live = self.takers();
        if live.is_empty() {
            return;
        }
        let mut ids = std::mem::take(&mut self.parked);
        // Still lost: a fenced copy of a parent may have answered meanwhile.
        ids.retain(|id| {
            self.copies.contains_key(id)
                && self.location.get(id).is_some_and(|&x| !self.slots[x].alive)
        });
        ids.sort_unstable();
        self.add_from_copies(&ids, &live);
        for v in live {
            self.refill(v);
        }
    }

    /// Marks `w` dead and takes the requests it owed.
    pub(super) fn retire(&mut self, w: WorkerId) -> (std::net::SocketAddr, VecDeque<Req>) {
        let s = &mut self.slots[w];
        s.alive = false;
        s.pending.clear();
        s.pending_cost = 0.0;
        s.evolving = 0;
        s.incoming = 0;
        let owed = std::mem::take(&mut s.in_flight);
        // Planned moves may never land now: nobody waits for them.
        self.holding = 0;
        (s.addr, owed)
    }

    /// Places `ids` on `live` from the master's copies: those the operation
    /// still has to evolve where each starts soonest (`deal_soonest`), the
    /// rest in even chunks.
    pub(super) fn add_from_copies(&mut self, ids: &[StateId], live: &[WorkerId]) {
        if live.is_empty() {
            return;
        }
        let (now, later): (Vec<StateId>, Vec<StateId>) =
            ids.iter().partition(|id| self.evolves_now(id));
        let costed: Vec<(StateId, f64)> = now.iter().map(|id| (*id, self.cost_of(id))).collect();
        let mut share = self.deal_soonest(&costed, live);
        let n = later.len();
        for (k, s) in share.iter_mut().enumerate() {
            s.extend_from_slice(&later[n * k / live.len()..n * (k + 1) / live.len()]);
            s.sort_unstable();
        }
        for (&dest, chunk) in live.iter().zip(&share) {
            if chunk.is_empty() {
                continue;
            }
            let frames = protocol::state_frames(
                Kind::Add,
                chunk.iter().map(|id| (*id, self.copies[id].as_slice())),
            );
            for (f, n) in frames {
                self.send(dest, f, Req::Add(n));
            }
            self.place_again(dest, chunk);
        }
    }

    /// Whether the operation in progress still has to evolve `id` (placed
    /// anywhere, `place_again` queues it with its input).
    pub(super) fn evolves_now(&self, id: &StateId) -> bool {
        self.sent_inputs.contains_key(id) || (self.evolving && self.inputs.contains_key(id))
    }

    /// The expected cost of evolving `id` in this operation (1 if unknown).
    pub(super) fn cost_of(&self, id: &StateId) -> f64 {
        self.inputs
            .get(id)
            .or_else(|| self.sent_inputs.get(id))
            .map_or(1.0, |x| x.1)
    }

    /// Books `ids` as held by `dest`, which has been sent them, and queues
    /// there those this step still has to evolve.
    pub(super) fn place_again(&mut self, dest: WorkerId, ids: &[StateId]) {
        let keep_sent = self.buddies();
        let mut again = Vec::new();
        for &id in ids {
            self.location.insert(id, dest);
            let sent = if keep_sent {
                self.sent_inputs.get(&id).cloned()
            } else {
                self.sent_inputs.remove(&id)
            };
            if let Some(x) = sent {
                self.inputs.insert(id, x);
                again.push(id);
            } else if self.evolving && self.inputs.contains_key(&id) {
                again.push(id);
            }
        }
        self.slots[dest].stats.recovered_states += ids.len() as u64;
        if !again.is_empty() {
            self.push_pending(dest, again);
        }
    }
}
