//! The end of an operation: lost workers, giving up, and the outcome.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::deadline::HUNG_TRIES;
use super::{RawResults, Req, Scheduler, WorkerId};
use crate::error::{Error, WorkerLost};
use crate::evolve::StateId;
use crate::protocol::{self, Kind};

impl Scheduler {
    /// Whether every live worker has answered every request (a straggler,
    /// whose work was started again elsewhere, is not waited for, nor a
    /// move out of it that landed from the copies) and no lost worker's
    /// states wait to be placed (`parked`).
    pub(crate) fn is_quiet(&self) -> bool {
        (self.parked.is_empty() || self.lost.is_some())
            && self.slots.iter().all(|s| {
                !s.alive
                    || s.fenced > 0
                    || s.in_flight
                        .iter()
                        .all(|r| matches!(r, Req::Remove { fenced: true, .. }))
            })
    }

    /// Whether the caller's stop flag (`MasterConfig::stop`) is set: the
    /// drivers then end the operation where it stands.
    pub(crate) fn stopped(&self) -> bool {
        // Relaxed: a flag the drivers poll every `CHECK_EVERY`; nothing
        // else rides on it.
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Gives up on every worker without a word (an operation stopped
    /// where it stood): nothing more is sent, so closing the connections
    /// is all the workers hear (they exit with `Error::Disconnected`).
    pub(crate) fn abort(&mut self) {
        self.out.clear();
        for s in &mut self.slots {
            s.alive = false;
        }
    }

    /// Marks `w` dead: its states are lost; the operation will fail.
    pub(crate) fn on_disconnect(&mut self, w: WorkerId, reason: &str) {
        if !self.slots[w].alive {
            return;
        }
        if let Some(t) = &self.tel {
            t.lost(w, reason);
        }
        if self.note_hung(w) {
            self.give_up(w, reason);
            return;
        }
        if self.can_recover(w) {
            self.recover(w, reason);
            return;
        }
        tracing::warn!(worker = w, "not recovered: {}", self.why_not_recovered(w));
        self.unfence_all();
        self.give_up(w, reason);
    }

    /// Marks `w` dead without recovering: its states are lost, and the
    /// operation will fail with [`Error::WorkerLost`].
    pub(super) fn give_up(&mut self, w: WorkerId, reason: &str) {
        for s in &mut self.slots {
            s.in_flight
                .retain(|r| !matches!(r, Req::Hold { origin, .. } if *origin == w));
        }
        tracing::warn!(worker = w, addr = %self.slots[w].addr, "dropping worker: {reason}");
        let s = &mut self.slots[w];
        s.alive = false;
        s.pending.clear();
        s.pending_cost = 0.0;
        s.in_flight.clear();
        s.evolving = 0;
        s.incoming = 0;
        let addr = s.addr;
        let mut lost = self.held_by(w);
        // States of workers lost before that waited for a place (and were
        // not evolved meanwhile by a copy started beside a straggler).
        for id in std::mem::take(&mut self.parked) {
            if self
                .location
                .get(&id)
                .is_some_and(|&x| !self.slots[x].alive)
            {
                lost.push(id);
            }
        }
        for id in &lost {
            self.location.remove(id);
            self.inputs.remove(id);
        }
        self.failed_at.get_or_insert_with(Instant::now);
        self.holding = 0;
        for s in &mut self.slots {
            s.pending.clear();
            s.pending_cost = 0.0;
        }
        self.transfers_lost_with(w);
        let entry = self.lost.get_or_insert_with(|| WorkerLost {
            worker: w,
            addr,
            reason: reason.to_string(),
            lost: Vec::new(),
            unfinished: Vec::new(),
            completed: HashMap::new(),
            others: Vec::new(),
        });
        if entry.worker != w {
            entry.others.push((w, addr, reason.to_string()));
        }
        entry.lost.extend(lost);
    }

    /// Gives up waiting after a failure: parents still in flight are lost.
    pub(crate) fn abandon(&mut self) {
        let mut unfinished = Vec::new();
        for s in self.slots.iter().filter(|s| s.alive) {
            for r in &s.in_flight {
                if let Req::Evolve { ids, .. } = r {
                    unfinished.extend(ids.iter().copied());
                }
            }
        }
        for id in &unfinished {
            self.location.remove(id);
        }
        if let Some(l) = &mut self.lost {
            l.unfinished = unfinished;
        }
    }

    fn outcome(&mut self) -> Result<(), Error> {
        self.evolving = false;
        self.inputs.clear();
        self.sent_inputs.clear();
        if let Some((state, step, deadline)) = self.hung_fail.take() {
            self.lost = None;
            return Err(Error::EvolveHung {
                state,
                step,
                workers: HUNG_TRIES,
                deadline,
            });
        }
        if let Some(mut l) = self.lost.take() {
            // Lost after the failure, with no place to go.
            for id in std::mem::take(&mut self.parked) {
                if self.location.remove(&id).is_some() {
                    l.lost.push(id);
                }
            }
            l.completed = std::mem::take(&mut self.results)
                .into_iter()
                .map(|(p, c)| (p, c.into_iter().map(|c| c.0).collect()))
                .collect();
            return Err(Error::WorkerLost(Box::new(l)));
        }
        match self.collision {
            Some(id) => Err(Error::IdCollision(id)),
            None => Ok(()),
        }
    }

    /// Ends an operation other than evolve and fetch.
    pub(crate) fn finish(&mut self) -> Result<(), Error> {
        self.outcome()
    }

    /// Ends an evolve: the children and outputs per parent.
    pub(crate) fn finish_evolve(&mut self) -> Result<RawResults, Error> {
        self.outcome()?;
        debug_assert_eq!(self.remaining, 0);
        Ok(std::mem::take(&mut self.results))
    }

    /// Ends a fetch: the serialised states.
    pub(crate) fn finish_fetch(&mut self) -> Result<Vec<(StateId, Vec<u8>)>, Error> {
        self.outcome()?;
        Ok(std::mem::take(&mut self.fetched))
    }

    /// Frames telling every live worker to exit.
    pub(crate) fn shutdown_frames(&mut self) {
        for w in 0..self.slots.len() {
            if self.slots[w].alive {
                let mut f = Vec::new();
                protocol::encode(&mut f, Kind::Shutdown, &[]);
                self.out.push((w, f));
            }
        }
    }
}
