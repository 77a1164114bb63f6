//! Silence (`Deadlines::quiet`): when a worker that stopped answering is
//! taken for stopped, and when it is dropped as lost. With the master's
//! copies, a worker silent while it owes an evolve of the step has its
//! work started again on idle workers (`straggle.rs`), and silent
//! [`STOPPED_QUIETS`] times as long it is dropped: its recovery places
//! its work where it starts soonest (`recover.rs`). Outside an evolve (a
//! reset, a restore, a fetch, a drop) it is dropped after the same
//! silence owing any answer: its states are placed again from the copies,
//! a fetch is answered from them. Buddy mode drops silent workers in
//! `Scheduler::buddy_stragglers`, during an evolve and outside one alike.

use std::time::{Duration, Instant};

use super::straggle::STOPPED_QUIETS;
use super::{Req, Scheduler, WorkerId};

impl Scheduler {
    /// When `w`, silent since `heard`, is taken for stopped
    /// ([`Deadlines::quiet`](super::config::Deadlines::quiet)): with the
    /// master's copies, while it beats and owes an unfenced evolve of this
    /// step.
    pub(super) fn quiet_at(&self, w: WorkerId, heard: Instant) -> Option<Instant> {
        if self.slots[w].fenced > 0 {
            return None;
        }
        Some(heard + self.owing_quiet(w, false)?)
    }

    /// With the master's copies: when `w`, silent since `heard` while it
    /// owes an evolve of this step (fenced or not), or any answer outside
    /// an evolve, is dropped as stopped ([`STOPPED_QUIETS`] ×
    /// `Deadlines::quiet`, or longer where workers paused for long lately:
    /// `hiccup.rs`). What it owed is then done from the copies.
    pub(super) fn stopped_at(&self, w: WorkerId, heard: Instant, now: Instant) -> Option<Instant> {
        let quiet = self.owing_quiet(w, true).or_else(|| self.op_quiet(w))?;
        Some(heard + self.hiccups.stop_bound(quiet * STOPPED_QUIETS, now))
    }

    /// `Deadlines::quiet`, if silence can make `w` stopped outside an
    /// evolve: master copies (every state it holds has its bytes there),
    /// `w` alive and beating, owing an answer in a reset, restore, fetch or
    /// drop ([`owes`](Scheduler::owes)).
    fn op_quiet(&self, w: WorkerId) -> Option<Duration> {
        let s = &self.slots[w];
        if !self.master_copies()
            || self.evolving
            || self.failed_at.is_some()
            || !s.alive
            || s.beats_from.is_none()
            || !self.owes(w)
        {
            return None;
        }
        self.cfg.deadlines.quiet()
    }

    /// Whether `w` owes an answer that silence may make it dropped for:
    /// any but its `Setup`'s (a worker loading its model may not beat
    /// yet).
    pub(super) fn owes(&self, w: WorkerId) -> bool {
        self.slots[w]
            .in_flight
            .iter()
            .any(|r| !matches!(r, Req::Setup))
    }

    /// What `w` owes, for the reason it is dropped: an evolve of this
    /// step, or else the first answer it owes.
    pub(super) fn owed(&self, w: WorkerId) -> String {
        let in_flight = &self.slots[w].in_flight;
        let step = self.step;
        if in_flight
            .iter()
            .any(|r| matches!(r, Req::Evolve { step: x, .. } if *x == step))
        {
            return format!("an evolve of step {step}");
        }
        match in_flight.iter().find(|r| !matches!(r, Req::Setup)) {
            Some(Req::Evolve { step, .. }) => format!("a late evolve of step {step}"),
            Some(Req::Remove { .. } | Req::Give { .. } | Req::Arrive { .. }) => {
                format!("a move in step {step}")
            }
            Some(Req::Fetch(ids)) => format!("a fetch of {} states", ids.len()),
            Some(Req::Add(n)) => format!("the placing of {n} states"),
            Some(Req::Drop) => "a drop".to_string(),
            Some(Req::Replicate | Req::Hold { .. } | Req::Promote(_)) => {
                "its part in a replication round".to_string()
            }
            Some(Req::Setup) | None => "nothing".to_string(),
        }
    }

    /// `Deadlines::quiet`, if silence can make `w` stopped now: master
    /// copies, an evolve in progress, `w` alive and beating, and owing an
    /// evolve of this step (with `fenced_too`, a fenced one counts).
    fn owing_quiet(&self, w: WorkerId, fenced_too: bool) -> Option<Duration> {
        if !self.master_copies() || !self.evolving || self.failed_at.is_some() {
            return None;
        }
        let s = &self.slots[w];
        if !s.alive || s.beats_from.is_none() {
            return None;
        }
        let step = self.step;
        let owes = s.in_flight.iter().any(|r| {
            matches!(r, Req::Evolve { step: x, fenced, .. } if *x == step && (fenced_too || !fenced))
        });
        if owes {
            self.cfg.deadlines.quiet()
        } else {
            None
        }
    }
}
