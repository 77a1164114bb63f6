//! Moving states between workers, through the master or directly.
//!
//! Through the master: `Remove` to the victim; its `Removed` payload is
//! forwarded to the thief as `Add` by rewriting the frame header (the
//! master never decodes a state), and the thief's evolve requests follow
//! the `Add` on the same connection: three one-way trips before the thief
//! can start.
//!
//! Directly (`StealVia::Peer`): `Give` to the victim, which sends the
//! states to the thief's peer listener and answers `Given n`; the thief
//! answers `Arrived` on its own connection, and only then can the master
//! ask it to evolve them: four one-way trips, plus a connection handshake
//! the first time a pair meets, but the state bytes cross the network once
//! instead of twice and never load the master.
//!
//! Where a moved state is in the books: at the victim until `Removed`,
//! `Given` or `Arrived` says it left. A state whose thief died after the
//! victim sent it is lost; one whose victim died before answering is lost
//! with the victim (if it turns up at the thief anyway, it is dropped there).

use std::time::Instant;

use super::{nanos, Req, Scheduler, StealVia, Transfer, WorkerId};
use crate::evolve::StateId;
use crate::protocol::{self, msg, Kind};

impl Scheduler {
    /// Sends `ids` (already out of the victim's `pending`) to `thief`.
    pub(super) fn move_states(
        &mut self,
        victim: WorkerId,
        thief: WorkerId,
        ids: Vec<StateId>,
        planned: bool,
    ) {
        let n = ids.len() as u64;
        if planned {
            self.slots[thief].stats.rebalanced_states += n;
        } else {
            self.slots[victim].stats.steals_out += 1;
            self.slots[thief].stats.steals_in += 1;
            self.slots[thief].stats.stolen_states += n;
        }
        self.slots[thief].incoming += 1;
        let step = self.step;
        let sent = Instant::now();
        match self.slots[thief].peer.clone() {
            Some(to) if self.cfg.steal_via == StealVia::Peer => {
                let ticket = self.next_ticket;
                self.next_ticket += 1;
                let mut f = Vec::new();
                let st = protocol::begin(&mut f, Kind::Give);
                msg::put_give(&mut f, ticket, &to, &ids);
                protocol::finish(&mut f, st);
                self.send(victim, f, Req::Give { ticket });
                self.expect(
                    thief,
                    Req::Arrive {
                        ticket,
                        n: ids.len(),
                    },
                );
                self.transfers.insert(
                    ticket,
                    Transfer {
                        victim,
                        thief,
                        ids,
                        step,
                        sent,
                        given: false,
                        cancelled: false,
                    },
                );
            }
            _ => {
                let req = Req::Remove {
                    ids: ids.clone(),
                    thief,
                    step,
                    sent,
                    fenced: false,
                };
                self.send_ids(victim, Kind::Remove, &ids, req);
            }
        }
    }

    /// States now held by `dest` join its pending ones if their step still runs.
    pub(super) fn landed(&mut self, dest: WorkerId, ids: Vec<StateId>, step: u64, sent: Instant) {
        self.landed_part(dest, ids, (step, sent), true);
    }

    /// [`Scheduler::landed`] for part of a move's states (`last`: its
    /// last part): the move is counted, and releases the step's evolves
    /// held behind it, once, with its last part.
    fn landed_part(
        &mut self,
        dest: WorkerId,
        ids: Vec<StateId>,
        (step, sent): (u64, Instant),
        last: bool,
    ) {
        let now = Instant::now();
        let t = nanos(now.saturating_duration_since(sent));
        self.move_ns = Some(self.move_ns.map_or(t, |o| 0.8 * o + 0.2 * t));
        let s = &mut self.slots[dest];
        if last {
            s.stats.transfers += 1;
            s.stats.transfer_ns += t as u64;
            if let Some(tel) = &self.tel {
                tel.transfer(dest, &s.stats, sent, now);
            }
        }
        if self.failed_at.is_none() && self.evolving && step == self.step {
            self.push_pending(dest, ids);
            if self.holding > 0 && last {
                self.holding -= 1;
                if self.holding == 0 {
                    // The step's moves have landed: everyone starts.
                    for w in 0..self.slots.len() {
                        self.refill(w);
                    }
                    return;
                }
            }
            self.refill(dest);
        } else {
            for id in ids {
                self.inputs.remove(&id);
            }
        }
    }

    /// `victim`'s `Removed` of `ids` (`p`: its payload) for `thief`, a
    /// move of `step` sent at `sent`; `last`: the move's last part (a
    /// large move comes in several).
    pub(super) fn on_removed(
        &mut self,
        victim: WorkerId,
        ids: Vec<StateId>,
        thief: WorkerId,
        (step, sent): (u64, Instant),
        p: &[u8],
        last: bool,
    ) {
        let ok = |w: WorkerId| self.slots[w].alive && self.slots[w].fenced == 0;
        let dest = if ok(thief) {
            thief
        } else if ok(victim) {
            victim
        } else {
            self.usable()[0]
        };
        if last {
            let t = &mut self.slots[thief];
            t.incoming = t.incoming.saturating_sub(1);
        }
        // Forward without decoding the states: `Removed` has `Add`'s layout.
        let mut f = Vec::with_capacity(protocol::HEADER_LEN + p.len());
        protocol::encode(&mut f, Kind::Add, p);
        for id in &ids {
            self.location.insert(*id, dest);
        }
        if dest != victim {
            self.gave_away(victim, &ids, sent);
        }
        self.send(dest, f, Req::Add(ids.len() as u32));
        self.landed_part(dest, ids, (step, sent), last);
        if dest != thief {
            self.refill(thief);
        }
    }

    pub(super) fn on_given(&mut self, victim: WorkerId, ticket: u64, n: u32) -> Result<(), String> {
        let Some(t) = self.transfers.get_mut(&ticket) else {
            return Ok(()); // its thief died and took the transfer along
        };
        if n != 0 && n as usize != t.ids.len() {
            return Err(format!("gave {n} states of {}", t.ids.len()));
        }
        let thief = t.thief;
        if n == 0 {
            // The victim could not reach the thief and kept the states.
            let t = self.transfers.remove(&ticket).expect("present");
            self.forget_arrival(thief, ticket);
            self.slots[thief].peer = None;
            tracing::warn!(thief, "peer handoff failed; stealing through the master");
            if t.cancelled {
                // A rollback forgot these states (`begin_clear`).
                self.send_ids(victim, Kind::Drop, &t.ids, Req::Drop);
                self.refill(thief);
                return Ok(());
            }
            self.landed(victim, t.ids, t.step, t.sent);
            self.refill(thief);
            return Ok(());
        }
        t.given = true;
        let (ids, sent) = (t.ids.clone(), t.sent);
        self.gave_away(victim, &ids, sent);
        if self.slots[thief].alive {
            for id in ids {
                if self.location.get(&id) == Some(&victim) {
                    self.location.insert(id, thief);
                }
            }
        } else {
            // Sent to a worker that died meanwhile.
            self.transfers.remove(&ticket);
            let mut gone = Vec::new();
            for id in ids {
                if self.location.remove(&id).is_some() {
                    self.inputs.remove(&id);
                    gone.push(id);
                }
            }
            if let Some(l) = self.lost.as_mut() {
                l.lost.extend(gone);
            }
        }
        Ok(())
    }

    pub(super) fn on_arrived(&mut self, thief: WorkerId, ticket: u64) {
        let Some(t) = self.transfers.remove(&ticket) else {
            return;
        };
        let s = &mut self.slots[thief];
        s.stats.direct_transfers += 1;
        if !t.cancelled {
            s.incoming = s.incoming.saturating_sub(1);
        }
        let (mut held, mut stray) = (Vec::new(), Vec::new());
        for id in t.ids {
            match self.location.get(&id) {
                Some(&w) if !t.cancelled && (w == t.victim || w == thief) => {
                    self.location.insert(id, thief);
                    held.push(id);
                }
                _ => stray.push(id),
            }
        }
        if !stray.is_empty() {
            self.send_ids(thief, Kind::Drop, &stray, Req::Drop);
        }
        self.landed(thief, held, t.step, t.sent);
    }

    /// Stops expecting the `Arrived` of `ticket` from `thief`.
    fn forget_arrival(&mut self, thief: WorkerId, ticket: u64) {
        let s = &mut self.slots[thief];
        s.in_flight
            .retain(|r| !matches!(r, Req::Arrive { ticket: t, .. } if *t == ticket));
        s.incoming = s.incoming.saturating_sub(1);
    }

    /// Forgets the transfers a lost worker took part in. States it had
    /// been given are at it in the books, and lost with it; states it was
    /// to give are lost with it too, and dropped if they turn up anyway.
    pub(super) fn transfers_lost_with(&mut self, w: WorkerId) {
        let tickets: Vec<u64> = self
            .transfers
            .iter()
            .filter(|(_, t)| t.victim == w || t.thief == w)
            .map(|(k, _)| *k)
            .collect();
        for ticket in tickets {
            let t = self.transfers.get_mut(&ticket).expect("listed");
            if t.thief == w {
                if t.given {
                    self.transfers.remove(&ticket);
                }
                // Not given yet: the victim will fail to reach it and keep
                // them (`Given 0`), or send them and say so (`on_given`).
            } else if !t.given && !t.cancelled {
                t.cancelled = true;
                let thief = t.thief;
                self.forget_arrival(thief, ticket);
            }
        }
    }
}
