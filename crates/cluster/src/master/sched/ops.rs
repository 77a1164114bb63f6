//! The operations other than evolve: setup, reset, fetch, drop.

use super::{Placement, Req, Scheduler, WorkerId};
use crate::error::Error;
use crate::evolve::{root_id, StateId};
use crate::protocol::{self, msg, Kind, MAX_STATE_BYTES};
use crate::snapshot::Snapshot;

impl Scheduler {
    /// Sends the model to every worker.
    pub(crate) fn begin_setup(&mut self, model: &str, params: &[u8]) -> Result<(), Error> {
        self.begin_op()?;
        self.setup_from(0, model, params);
        Ok(())
    }

    /// Adds workers at `addrs` (between operations) and sends them the
    /// model: they hold nothing yet; the next step's rebalance and steals
    /// give them work.
    pub(crate) fn begin_admit(
        &mut self,
        addrs: &[std::net::SocketAddr],
        model: &str,
        params: &[u8],
    ) -> Result<(), Error> {
        self.begin_op()?;
        let first = self.slots.len();
        let now = std::time::Instant::now();
        self.slots
            .extend(addrs.iter().map(|&a| super::Slot::new(a, now)));
        if let Some(t) = &self.tel {
            for (w, &a) in addrs.iter().enumerate() {
                t.joined(first + w, a);
            }
        }
        self.setup_from(first, model, params);
        // The buddy ring changes.
        self.buddy.changed();
        Ok(())
    }

    /// Sends `Setup` to workers `first..`.
    fn setup_from(&mut self, first: WorkerId, model: &str, params: &[u8]) {
        for w in first..self.slots.len() {
            let mut f = Vec::new();
            let st = protocol::begin(&mut f, Kind::Setup);
            msg::put_setup(
                &mut f,
                &msg::Setup {
                    seed: self.seed,
                    model,
                    params,
                    heartbeat_ms: self.cfg.deadlines.heartbeat_ms(),
                },
            );
            protocol::finish(&mut f, st);
            self.send(w, f, Req::Setup);
        }
    }

    /// Drops every state and places `states` (serialised); returns their ids.
    pub(crate) fn begin_reset(&mut self, states: Vec<Vec<u8>>) -> Result<Vec<StateId>, Error> {
        let epoch = self.epoch + 1;
        fits((0u64..).map(|i| root_id(self.seed, epoch, i)).zip(&states))?;
        self.begin_op()?;
        self.transfers.clear();
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
        self.copies.clear();
        self.decide_recovery(&states);
        self.buddy.changed();
        let live = self.usable();
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
                let frames = protocol::state_frames(
                    Kind::Add,
                    (start..end).map(|i| (ids[i], states[i].as_slice())),
                );
                for &id in &ids[start..end] {
                    if self.location.insert(id, w).is_some() {
                        self.collision = Some(id);
                    }
                }
                if self.recovering() {
                    for (&id, s) in ids[start..end].iter().zip(&states[start..end]) {
                        self.copies.insert(id, s.clone());
                    }
                }
                for (f, n) in frames {
                    self.send(w, f, Req::Add(n));
                }
            }
            start = end;
        }
        Ok(ids)
    }

    /// Drops every live state on its worker and forgets it: the first half
    /// of a rollback (`Master::rollback`), whose second is
    /// [`Scheduler::begin_restore`]. Answers still owed from a failed
    /// operation are waited for in this one (a straggler is waited for like
    /// any worker), and what they bring is dropped: a move's states never
    /// land (its answer is discarded), a late evolve's children are
    /// dropped where they were made. So when this operation is quiet, no
    /// worker holds a state or will make one, and the restore that follows
    /// cannot meet a late answer.
    pub(crate) fn begin_clear(&mut self) -> Result<(), Error> {
        self.begin_op()?;
        self.unfence_all();
        for s in &mut self.slots {
            s.pending.clear();
            s.pending_cost = 0.0;
            for r in &mut s.in_flight {
                if let Req::Remove { fenced, .. } = r {
                    *fenced = true;
                }
            }
        }
        for t in self.transfers.values_mut() {
            t.cancelled = true;
        }
        let mut held: Vec<Vec<StateId>> = vec![Vec::new(); self.slots.len()];
        for (&id, &w) in &self.location {
            held[w].push(id);
        }
        self.location.clear();
        for (w, mut ids) in held.into_iter().enumerate() {
            if !ids.is_empty() && self.slots[w].alive {
                ids.sort_unstable();
                self.send_ids(w, Kind::Drop, &ids, Req::Drop);
            }
        }
        self.copies.clear();
        self.inputs.clear();
        self.sent_inputs.clear();
        self.results.clear();
        self.remaining = 0;
        self.buddy.replica_at.clear();
        // Nothing to replicate until the restore places states.
        self.buddy.dirty = false;
        Ok(())
    }

    /// Places `states` under their own ids, as a snapshot of a run at `step`
    /// and `epoch` recorded them (spread over the live workers), and takes
    /// up that run's counters, so its next evolve is the snapshot's next.
    pub(crate) fn begin_restore(
        &mut self,
        step: u64,
        epoch: u64,
        states: Vec<(StateId, Vec<u8>)>,
    ) -> Result<(), Error> {
        fits(states.iter().map(|(id, s)| (*id, s)))?;
        self.begin_op()?;
        self.transfers.clear();
        self.location.clear();
        self.copies.clear();
        let bytes: Vec<&Vec<u8>> = states.iter().map(|s| &s.1).collect();
        self.decide_recovery(&bytes);
        self.buddy.changed();
        self.step = step;
        self.epoch = epoch;
        let live = self.usable();
        let n = states.len();
        let mut start = 0;
        for (k, &w) in live.iter().enumerate() {
            let end = n * (k + 1) / live.len();
            if end > start {
                let frames = protocol::state_frames(
                    Kind::Add,
                    states[start..end].iter().map(|(id, b)| (*id, b.as_slice())),
                );
                for (id, _) in &states[start..end] {
                    if self.location.insert(*id, w).is_some() {
                        self.collision = Some(*id);
                    }
                }
                for (f, n) in frames {
                    self.send(w, f, Req::Add(n));
                }
            }
            start = end;
        }
        if self.recovering() {
            self.copies.extend(states);
        }
        Ok(())
    }

    /// The run's seed and counters and every live state's bytes
    /// (recovery's copies): what `begin_restore` takes up again. `None`
    /// without the master's copies.
    pub(crate) fn snapshot(&self) -> Option<Snapshot> {
        if !self.master_copies() {
            return None;
        }
        Some(self.snapshot_of(self.copies.iter().map(|(id, b)| (*id, b.clone())).collect()))
    }

    /// A snapshot of this run holding `states`.
    pub(crate) fn snapshot_of(&self, mut states: Vec<(StateId, Vec<u8>)>) -> Snapshot {
        states.sort_unstable_by_key(|s| s.0);
        Snapshot {
            seed: self.seed,
            step: self.step,
            epoch: self.epoch,
            states,
        }
    }

    /// The run seed.
    pub(crate) fn seed(&self) -> u64 {
        self.seed
    }

    /// Every live state's id, in order.
    pub(crate) fn live_ids(&self) -> Vec<StateId> {
        let mut ids: Vec<StateId> = self.location.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Decides [`Recovery::Auto`](super::Recovery::Auto) from the states
    /// about to be placed, once.
    fn decide_recovery<B: AsRef<[u8]>>(&mut self, states: &[B]) {
        if self.cfg.recovery != super::Recovery::Auto || states.is_empty() {
            return;
        }
        let mean = states.iter().map(|s| s.as_ref().len()).sum::<usize>() / states.len();
        // On one host the master's copies cross no network: they cost a
        // memory copy, less than a replication round (measured).
        let remote = self.slots.iter().any(|s| !s.addr.ip().is_loopback());
        self.cfg.recovery = if remote && mean >= super::config::AUTO_BUDDY_BYTES {
            super::Recovery::Buddy
        } else {
            super::Recovery::MasterCopy
        };
        tracing::info!(
            mean_state_bytes = mean,
            remote_workers = remote,
            threshold = super::config::AUTO_BUDDY_BYTES,
            "recovery: {:?} (states replicated to {})",
            self.cfg.recovery,
            if self.cfg.recovery == super::Recovery::Buddy {
                "a buddy worker each"
            } else {
                "the master"
            }
        );
    }

    pub(super) fn send_ids(&mut self, w: WorkerId, kind: Kind, ids: &[StateId], req: Req) {
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
    pub(crate) fn begin_fetch(&mut self, ids: &[StateId]) -> Result<(), Error> {
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
    pub(crate) fn begin_drop(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.begin_op()?;
        self.unknown(ids.iter().copied())?;
        for (w, ids) in self.by_worker(ids).into_iter().enumerate() {
            if !ids.is_empty() {
                for id in &ids {
                    self.location.remove(id);
                    self.copies.remove(id);
                }
                self.send_ids(w, Kind::Drop, &ids, Req::Drop);
            }
        }
        Ok(())
    }
}

/// Refuses the first state over [`MAX_STATE_BYTES`]: no frame could carry
/// it (nor, from a worker, its children).
fn fits<'s>(states: impl IntoIterator<Item = (StateId, &'s Vec<u8>)>) -> Result<(), Error> {
    match states.into_iter().find(|(_, s)| s.len() > MAX_STATE_BYTES) {
        Some((id, s)) => Err(Error::StateTooLarge {
            id,
            bytes: s.len(),
            limit: MAX_STATE_BYTES,
        }),
        None => Ok(()),
    }
}
