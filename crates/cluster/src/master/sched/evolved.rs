//! An evolve request's answer: the worker's timings and the master's
//! estimates from them, each parent's children placed and its outputs kept,
//! and the children of an abandoned step or a straggler's rerun dropped.

use std::time::Instant;

use super::{nanos, Req, Scheduler, WorkerId};
use crate::protocol::{msg, Kind};

impl Scheduler {
    /// Takes `w`'s answer to an evolve request (`step`, `sent` then, alone
    /// on its connection if `solo`, of expected `cost`).
    pub(super) fn on_evolved(
        &mut self,
        w: WorkerId,
        e: msg::Evolved<'_>,
        step: u64,
        sent: Instant,
        solo: bool,
        cost: f64,
    ) {
        let current = self.evolving && step == self.step;
        let n = e.parents.len();
        let s = &mut self.slots[w];
        s.last_evolved = Instant::now();
        s.evolving = s.evolving.saturating_sub(1);
        s.stats.busy_ns += e.busy_ns;
        s.stats.evolved += n as u64;
        s.stats.batches += 1;
        if let Some(t) = &self.tel {
            t.batch(w, &s.stats, e.busy_ns, s.last_evolved);
        }
        if solo {
            let rtt = (nanos(sent.elapsed()) - e.busy_ns as f64).max(0.0);
            s.rtt_ns = Some(s.rtt_ns.map_or(rtt, |o| 0.8 * o + 0.2 * rtt));
        }
        if n > 0 {
            let t = e.busy_ns as f64 / n as f64;
            s.per_state_ns = Some(s.per_state_ns.map_or(t, |o| 0.8 * o + 0.2 * t));
            self.record_sample(t);
        }
        if cost > 0.0 {
            let t = e.busy_ns as f64 / cost;
            if let Some(expected) = self.ns_per_cost.filter(|x| *x > 0.0) {
                self.record_ratio(t / expected);
            }
            self.ns_per_cost = Some(self.ns_per_cost.map_or(t, |o| 0.9 * o + 0.1 * t));
        }
        let mut orphans = Vec::new();
        let copies = self.master_copies();
        let buddies = self.buddies();
        for (parent, children) in e.parents {
            if !current || self.results.contains_key(&parent) {
                // A step abandoned after a failure, or an evolve that
                // another worker finished first (`straggle.rs`): these
                // children are nobody's (the winner's have the same ids).
                orphans.extend(children.into_iter().map(|c| c.id));
                if !current {
                    self.location.remove(&parent);
                }
                continue;
            }
            let was = self.location.remove(&parent);
            if !self.dups.is_empty() {
                self.drop_other_copies(parent, w, was);
            }
            if !buddies {
                self.sent_inputs.remove(&parent);
                self.copies.remove(&parent);
            } else if current {
                let kids = children.iter().map(|c| c.id).collect();
                self.buddy.done.insert(parent, (w, kids));
            }
            for c in &children {
                if self.location.insert(c.id, w).is_some() {
                    self.collision = Some(c.id);
                }
                if copies && current {
                    self.copies.insert(c.id, c.state.to_vec());
                }
            }
            self.remaining -= 1;
            self.results.insert(
                parent,
                children
                    .into_iter()
                    .map(|c| (c.id, c.output.to_vec()))
                    .collect(),
            );
        }
        if !orphans.is_empty() {
            self.send_ids(w, Kind::Drop, &orphans, Req::Drop);
        }
        self.refill(w);
    }
}
