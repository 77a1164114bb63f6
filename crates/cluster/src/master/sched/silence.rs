//! Silence (`Deadlines::quiet`): when a worker that stopped answering is
//! taken for stopped, and when it is dropped as lost. With the master's
//! copies, a worker silent while it owes an evolve of the step has its
//! work started again on idle workers (`straggle.rs`), and silent
//! [`STOPPED_QUIETS`] times as long, or owing a fetch, it is dropped: its
//! recovery places its work where it starts soonest, or answers the fetch
//! from the copies (`recover.rs`). Buddy mode drops silent workers in
//! `Scheduler::buddy_stragglers`.

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
    /// owes an evolve of this step (fenced or not) or a fetch, is dropped
    /// as stopped ([`STOPPED_QUIETS`] × `Deadlines::quiet`, or longer where
    /// workers paused for long lately: `hiccup.rs`). A fetch it owes is
    /// then answered from the copies.
    pub(super) fn stopped_at(&self, w: WorkerId, heard: Instant, now: Instant) -> Option<Instant> {
        let quiet = self.owing_quiet(w, true).or_else(|| self.fetch_quiet(w))?;
        Some(heard + self.hiccups.stop_bound(quiet * STOPPED_QUIETS, now))
    }

    /// `Deadlines::quiet`, if silence can make `w` stopped while it owes a
    /// fetch: master copies (to answer it from), `w` alive and beating.
    fn fetch_quiet(&self, w: WorkerId) -> Option<Duration> {
        let s = &self.slots[w];
        if !self.master_copies() || self.failed_at.is_some() || !s.alive || s.beats_from.is_none() {
            return None;
        }
        if s.in_flight.iter().any(|r| matches!(r, Req::Fetch(_))) {
            self.cfg.deadlines.quiet()
        } else {
            None
        }
    }

    /// Whether a live worker owes a fetch: a fetch is in progress.
    pub(super) fn fetching(&self) -> bool {
        self.slots
            .iter()
            .any(|s| s.alive && s.in_flight.iter().any(|r| matches!(r, Req::Fetch(_))))
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
