//! Workers that leave: a worker asked to go (SIGTERM: a scale-in, a node
//! drain, a spot reclaim) says `Leaving` and goes on serving. From then on
//! it takes no states: no steals, no rebalance, no recovered states
//! (`takes_states`). It finishes the batches it holds, and the others may
//! steal what it has not started, as from any worker. When the operation
//! ends (`Master::settle`), its states move to the other workers as a
//! steal moves them (`Remove`, then `Add`), a replication round without it
//! commits (buddy mode), and it is told `Shutdown`: it exits 0, and nothing
//! was lost or recovered, so the bits are those of a run without it.
//!
//! If it dies before that (a second SIGTERM, or SIGKILL when the grace
//! period runs out), it is lost as any worker is, and recovered from.
//! The last worker that takes states cannot leave: it is kept, with a
//! warning, until another joins or the run ends.
//!
//! The caller may retire workers itself (`Master::retire_workers`, a
//! scale-in decided by the program): they are marked leaving as if they
//! had said `Leaving`, and go the same way.

use super::{Scheduler, WorkerId};
use crate::error::Error;
use crate::evolve::StateId;
use crate::protocol::{self, Kind};

impl Scheduler {
    /// `w` said `Leaving`.
    pub(super) fn mark_leaving(&mut self, w: WorkerId) {
        let s = &mut self.slots[w];
        if !s.alive || s.leaving {
            return;
        }
        s.leaving = true;
        tracing::info!(worker = w, addr = %s.addr, "worker asked to leave; its states move to the others");
        if let Some(t) = &self.tel {
            t.leaving(w);
        }
    }

    /// Between operations: the caller retires workers `ws` (indices in
    /// join order). Each is marked leaving, as if it had said `Leaving`;
    /// the operation's settling moves their states and lets them go.
    ///
    /// # Errors
    /// [`Error::Config`], with nothing marked, for an index that names no
    /// worker, one that is lost or already left or leaving, or when no
    /// worker would stay to hold the states.
    pub(crate) fn begin_retire(&mut self, ws: &[WorkerId]) -> Result<(), Error> {
        self.begin_op()?;
        for &w in ws {
            match self.slots.get(w) {
                None => {
                    return Err(Error::Config(format!(
                        "no worker {w}: this master has workers 0..{} (in the order they \
                         joined; Stats::workers)",
                        self.slots.len()
                    )))
                }
                Some(s) if !s.alive || s.leaving => {
                    return Err(Error::Config(format!(
                        "worker {w} cannot be retired: it is already lost, gone or leaving \
                         (Master::staying_workers lists those that can)"
                    )))
                }
                Some(_) => {}
            }
        }
        if self.staying().iter().all(|w| ws.contains(w)) {
            return Err(Error::Config(
                "retiring these workers would leave none to hold the states: keep at least \
                 one (or admit another first)"
                    .into(),
            ));
        }
        for &w in ws {
            self.mark_leaving(w);
        }
        Ok(())
    }

    /// Live workers that stay (not leaving).
    pub(crate) fn staying(&self) -> Vec<WorkerId> {
        (0..self.slots.len())
            .filter(|&w| self.slots[w].alive && !self.slots[w].leaving)
            .collect()
    }

    /// Between operations: moves the states of every leaving worker to the
    /// workers that stay, evenly, a state never onto a worker holding its
    /// replica where another may take it. Returns whether anything was
    /// sent (then run the driver, and call again).
    pub(crate) fn begin_evacuate(&mut self) -> bool {
        if self.failed_at.is_some() {
            return false;
        }
        let leaving: Vec<WorkerId> = (0..self.slots.len())
            .filter(|&w| self.slots[w].alive && self.slots[w].leaving)
            .collect();
        if leaving.is_empty() {
            return false;
        }
        let to = self.staying();
        if to.is_empty() {
            if !self.leave_warned {
                self.leave_warned = true;
                tracing::warn!(
                    "a worker asked to leave but no other takes states: it stays until \
                     another joins or the run ends"
                );
            }
            return false;
        }
        // Moved states are held, not evolved: the operation is over.
        self.evolving = false;
        let mut sent = false;
        let mut next = 0;
        for l in leaving {
            if !self.slots[l].in_flight.is_empty() {
                continue; // a move out of it still runs
            }
            let ids = self.held_by(l);
            if ids.is_empty() {
                continue;
            }
            let mut share: Vec<Vec<StateId>> = vec![Vec::new(); to.len()];
            for id in ids {
                // Round robin, skipping a worker that holds the state's
                // replica when some other does not.
                let k = (0..to.len())
                    .map(|j| (next + j) % to.len())
                    .find(|&k| !self.holds_replica(to[k], id))
                    .unwrap_or(next % to.len());
                share[k].push(id);
                next = k + 1;
            }
            for (k, ids) in share.into_iter().enumerate() {
                if !ids.is_empty() {
                    self.move_states(l, to[k], ids, true);
                    sent = true;
                }
            }
        }
        if sent {
            // Where the states are changed: the next round replicates them.
            self.buddy.changed();
        }
        sent
    }

    /// Between operations, after [`begin_evacuate`](Self::begin_evacuate)
    /// and the replication rounds: tells every leaving worker that holds
    /// nothing and owes nothing to exit, and stops counting it. Returns
    /// how many were let go.
    pub(crate) fn release_leavers(&mut self) -> usize {
        if self.failed_at.is_some() || self.staying().is_empty() {
            return 0;
        }
        let mut n = 0;
        for w in 0..self.slots.len() {
            let s = &self.slots[w];
            if !s.alive || !s.leaving || !s.in_flight.is_empty() || !self.held_by(w).is_empty() {
                continue;
            }
            let mut f = Vec::new();
            protocol::encode(&mut f, Kind::Shutdown, &[]);
            self.out.push((w, f));
            let s = &mut self.slots[w];
            // Not alive: its connection's end, when it exits, is no loss
            // (`on_disconnect`), and nothing is sent to it any more.
            s.alive = false;
            s.pending.clear();
            s.pending_cost = 0.0;
            s.stats.left = true;
            tracing::info!(worker = w, addr = %s.addr, "worker left");
            if let Some(t) = &self.tel {
                t.left(w);
            }
            n += 1;
        }
        n
    }
}
