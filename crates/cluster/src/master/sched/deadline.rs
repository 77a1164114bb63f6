//! Hung and partitioned workers: a worker that stays silent too long is
//! declared lost, exactly as if it had disconnected.
//!
//! A heartbeating worker (one whose `Setup` asked for heartbeats, once
//! the first has come) is lost once the master has read nothing from it for
//! `Deadlines::silence` (1.5 s by default; `fixed` replaces it): not a
//! heartbeat, not an answer, not a byte of a frame in transit. Its
//! heartbeats come from a thread of their own, so a long evolve is never
//! silence, and only a stopped process, a dead host or a cut link is. The
//! silence clock restarts at the start of every operation (the master reads
//! nothing between operations). Long before that, a worker silent for
//! `Deadlines::quiet` (three heartbeats) while it owes an evolve is taken
//! for stopped and its work starts again elsewhere (`straggle.rs`).
//! [`Scheduler::overdue`] also says when the next such deadline falls (and
//! when a batch held back behind a long call is due, `plan.rs`), so that
//! drivers wake up for it.
//!
//! A worker that does not heartbeat (before its first heartbeat; fake
//! workers in tests; `heartbeat: None`) is timed per request: its silence is the time since it started owing an answer, since
//! it last sent a frame, or since bytes last moved on its connection in
//! either direction (the driver reports that), whichever is latest: each
//! answer restarts the clock, so a worker is only ever timed on the
//! request it is working on, and a large frame still in transit (a
//! `reset_states` of big states, a big `Fetched`) does not count as silence. It may
//! be silent as long as its most generous outstanding request allows:
//! - an evolve of `n` states: `factor` (10) × the 99th percentile of the
//!   recent per-state evolve times (last 1,024 batches, all workers) × `n`,
//!   at least `floor` (1 s); before any batch was measured, `unmeasured`;
//! - `Setup` (a model may take time to build): `unmeasured` (60 s);
//! - anything else (answered at once by the worker's reader thread): `floor`;
//! - `fixed`, when set, replaces all of these.
//!
//! An evolve that never returns (a model that loops forever for some
//! state) keeps its worker beating, so silence cannot catch it. Each
//! heartbeating worker's batch in progress (the oldest evolve it owes,
//! counted from when it was sent or the batch before it came back) has a
//! deadline too: `fixed`, or `factor` × the larger of its expected time by
//! the p99 above and by its expected cost (the measured time per unit of
//! `Evolve::expected_cost`), at least `floor`; `unmeasured` before
//! anything was measured. Its clock ([`Scheduler::evolve_started`]) starts
//! when the batch was sent and the one before it came back, and again
//! whenever bytes of a large frame (`Io::bulk`: a state on its way, the
//! children coming back) move on the connection: time on the wire is not
//! evolve time (the straggler bounds of `straggle.rs` count the same way).
//! A worker past it is dropped like a silent one
//! (closing its connection ends the process, and the hung call with it),
//! its states are recovered elsewhere, and the batch's states are evolved
//! alone from then on. A state whose evolve runs past its deadline on
//! [`HUNG_TRIES`] workers fails the operation with `Error::EvolveHung`,
//! naming the state and the step: never an endless wait.
//!
//! Drivers call [`Scheduler::overdue`] every [`CHECK_EVERY`](super::CHECK_EVERY) while an
//! operation runs, so a hung worker is caught within its allowance plus
//! that period.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Io, Req, Scheduler, WorkerId};
use crate::evolve::StateId;

/// Recent batches kept for the percentile.
const SAMPLES: usize = 1024;

/// On how many workers a state's evolve may run past its deadline before
/// the operation fails naming it.
pub(crate) const HUNG_TRIES: u32 = 3;

impl Scheduler {
    /// Remembers one batch's time per state.
    pub(super) fn record_sample(&mut self, per_state_ns: f64) {
        if self.samples.len() == SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(per_state_ns);
    }

    /// Remembers one batch's evolve time over its expected time by cost.
    pub(super) fn record_ratio(&mut self, r: f64) {
        if self.ratios.len() == SAMPLES {
            self.ratios.pop_front();
        }
        self.ratios.push_back(r);
    }

    fn p99(&self) -> Option<f64> {
        percentile(&self.samples, 0.99)
    }

    /// The 90th percentile of recent batches' time over their expected
    /// time by cost: on a loaded host the tail of that ratio is long, and
    /// a batch is only started again where a worker would sit idle.
    pub(super) fn ratio_p90(&self) -> Option<f64> {
        percentile(&self.ratios, 0.90)
    }

    fn allowance(&self, req: &Req, p99: Option<f64>) -> Duration {
        let d = &self.cfg.deadlines;
        if let Some(f) = d.fixed {
            return f;
        }
        let states = match req {
            Req::Setup => return d.unmeasured,
            Req::Evolve { ids, .. } => ids.len(),
            Req::Arrive { n, .. } => *n,
            _ => return d.floor,
        };
        match p99 {
            None => d.unmeasured,
            Some(p) => {
                let ns = d.factor * p * states.max(1) as f64;
                d.floor.max(Duration::from_nanos(ns.min(1e18) as u64))
            }
        }
    }

    /// How long a batch of `n` states of expected `cost` may run.
    fn evolve_deadline(&self, n: usize, cost: f64, p99: Option<f64>) -> Duration {
        let d = &self.cfg.deadlines;
        if let Some(f) = d.fixed {
            return f;
        }
        let Some(p) = p99 else {
            return d.unmeasured;
        };
        let by_cost = self.ns_per_cost.map_or(0.0, |t| t * cost);
        let ns = d.factor * (p * n.max(1) as f64).max(by_cost);
        d.floor.max(Duration::from_nanos(ns.min(1e18) as u64))
    }

    /// When `w`'s batch sent at `sent` started evolving, as far as the
    /// master can tell: not before the batch before it came back, nor
    /// while bulk bytes (`bulk`: a large frame either way) were still
    /// moving on the connection: a request queued behind a large state,
    /// or the answer on its way back, is on the wire, not in an evolve.
    pub(super) fn evolve_started(
        &self,
        w: WorkerId,
        sent: Instant,
        bulk: Option<Instant>,
    ) -> Instant {
        let started = sent.max(self.slots[w].last_evolved);
        bulk.map_or(started, |b| started.max(b))
    }

    /// The batch `w` is evolving, if it had run past its deadline at
    /// `heard` (when the worker last spoke: a worker that beats after the
    /// deadline is alive and still in that evolve, where a stopped one
    /// would be silent), counted from when it started
    /// ([`Scheduler::evolve_started`], with `bulk` from the driver): its
    /// states, its step, and the deadline.
    fn hung_batch(
        &self,
        w: WorkerId,
        heard: Instant,
        bulk: Option<Instant>,
        p99: Option<f64>,
    ) -> Option<(Vec<StateId>, u64, Duration)> {
        let s = &self.slots[w];
        let (ids, step, sent, cost) = s.in_flight.iter().find_map(|r| match r {
            Req::Evolve {
                ids,
                step,
                sent,
                cost,
                ..
            } => Some((ids, *step, *sent, *cost)),
            _ => None,
        })?;
        let started = self.evolve_started(w, sent, bulk);
        let deadline = self.evolve_deadline(ids.len(), cost, p99);
        // A heartbeat interval later still: bytes a stopped worker sent
        // before it stopped may be read late by a busy master.
        let margin = self.cfg.deadlines.heartbeat.unwrap_or_default();
        (heard.saturating_duration_since(started) > deadline + margin)
            .then(|| (ids.clone(), step, deadline))
    }

    /// Called for a worker about to be dropped: if `overdue` found it past
    /// an evolve's deadline, counts that batch's states as hung once more.
    /// Returns whether one of them has now hung on `HUNG_TRIES` workers
    /// (the operation then fails naming it).
    pub(super) fn note_hung(&mut self, w: WorkerId) -> bool {
        let Some(at) = self.hung_workers.iter().position(|&h| h == w) else {
            return false;
        };
        self.hung_workers.swap_remove(at);
        let p99 = self.p99();
        // Without the driver's bulk time the batch started no later than
        // `overdue` found, so it is past its deadline still.
        let Some((ids, step, deadline)) = self.hung_batch(w, Instant::now(), None, p99) else {
            return false;
        };
        if !self.evolving || step != self.step {
            return false;
        }
        for id in &ids {
            let n = self.hung.entry(*id).or_default();
            *n += 1;
            if *n >= HUNG_TRIES && self.hung_fail.is_none() {
                self.hung_fail = Some((*id, step, deadline));
            }
        }
        tracing::warn!(
            worker = w,
            states = ids.len(),
            step,
            "an evolve ran past its deadline of {:.2} s; its states run again elsewhere, alone",
            deadline.as_secs_f64()
        );
        self.hung_fail.is_some()
    }

    /// Workers silent past their allowance, with the reason to drop them,
    /// and when the next heartbeat deadline falls. `io(w)` is when bytes
    /// last moved on `w`'s connection, either way and from the worker, if
    /// known. The caller drops each connection and calls
    /// [`Scheduler::on_disconnect`].
    pub(crate) fn overdue(
        &mut self,
        now: Instant,
        io: &dyn Fn(WorkerId) -> Io,
    ) -> (Vec<(WorkerId, String)>, Option<Instant>) {
        let p99 = self.p99();
        let mut late = Vec::new();
        let mut hung = Vec::new();
        let mut stopped = Vec::new();
        let mut next: Option<Instant> = None;
        let silence = self.cfg.deadlines.silence();
        for (w, s) in self.slots.iter().enumerate() {
            if !s.alive {
                continue;
            }
            let io = io(w);
            if let Some(from) = s.beats_from {
                let heard = [Some(from), io.read, Some(s.last_heard)]
                    .into_iter()
                    .flatten()
                    .max()
                    .unwrap_or(from);
                let quiet = now.saturating_duration_since(heard);
                if quiet > silence {
                    late.push((
                        w,
                        format!(
                            "silent for {:.2} s (heartbeats every {} ms, lost after {:.2} s)",
                            quiet.as_secs_f64(),
                            self.cfg.deadlines.heartbeat.unwrap_or_default().as_millis(),
                            silence.as_secs_f64()
                        ),
                    ));
                } else if let Some((ids, step, deadline)) =
                    // When it last really spoke (`heard` counts from the
                    // start of the operation too): a stopped worker is no
                    // hung evolve.
                    self.hung_batch(
                        w,
                        io.read.map_or(s.last_heard, |r| r.max(s.last_heard)),
                        io.bulk,
                        p99,
                    )
                {
                    // Still beating, but its evolve has not returned.
                    hung.push(w);
                    late.push((
                        w,
                        format!(
                            "an evolve of {} states at step {step} ran past its deadline of \
                             {:.2} s while the worker kept beating",
                            ids.len(),
                            deadline.as_secs_f64()
                        ),
                    ));
                } else {
                    let at = heard + silence + Duration::from_millis(1);
                    next = Some(next.map_or(at, |n| n.min(at)));
                    // Silent for a few heartbeats while it owes an evolve:
                    // taken for stopped, its work starts again on idle
                    // workers; silent twice as long (or owing anything
                    // outside an evolve), it is dropped, and its recovery
                    // places its work where it starts soonest (or its
                    // states from the copies, answering a fetch from
                    // them).
                    match self.stopped_at(w, heard, now) {
                        Some(d) if now >= d => late.push((
                            w,
                            format!(
                                "silent for {:.3} s owing {} (taken for stopped after {:.3} s)",
                                now.saturating_duration_since(heard).as_secs_f64(),
                                self.owed(w),
                                d.saturating_duration_since(heard).as_secs_f64()
                            ),
                        )),
                        Some(d) => next = Some(next.map_or(d, |n| n.min(d))),
                        None => {}
                    }
                    match self.quiet_at(w, heard) {
                        Some(q) if now >= q => stopped.push(w),
                        Some(q) => next = Some(next.map_or(q, |n| n.min(q))),
                        None => {}
                    }
                }
                continue;
            }
            if s.in_flight.is_empty() {
                continue;
            }
            let mut since = s.owing_since.max(s.last_heard);
            if let Some(t) = io.any {
                since = since.max(t);
            }
            let silent = now.saturating_duration_since(since);
            let allowed = s
                .in_flight
                .iter()
                .map(|r| self.allowance(r, p99))
                .max()
                .unwrap_or(self.cfg.deadlines.floor);
            if silent > allowed {
                late.push((
                    w,
                    format!(
                        "no answer for {:.2} s with {} requests outstanding (allowed {:.2} s{})",
                        silent.as_secs_f64(),
                        s.in_flight.len(),
                        allowed.as_secs_f64(),
                        p99.map_or(String::new(), |p| format!(
                            "; p99 evolve {:.3} ms per state",
                            p / 1e6
                        ))
                    ),
                ));
            }
        }
        // The drivers drop exactly the workers of their last call.
        self.hung_workers = hung;
        let mut slow = Vec::new();
        let ratio = self.ratio_p90();
        for w in 0..self.slots.len() {
            if let Some(at) = self.straggles_at(w, p99, ratio, io(w).bulk) {
                if now >= at {
                    slow.push(w);
                } else {
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
        }
        for &w in &stopped {
            if !late.iter().any(|l| l.0 == w) {
                self.speculate(w);
            }
        }
        for w in slow {
            if !late.iter().any(|l| l.0 == w) && !stopped.contains(&w) {
                self.speculate(w);
            }
        }
        if let Some(at) = self.release_held(now) {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        let exclude: Vec<WorkerId> = late.iter().map(|l| l.0).collect();
        let (drop, at) = self.buddy_stragglers(now, p99, ratio, &exclude, io);
        if let Some(at) = at {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        late.extend(drop);
        (late, next)
    }
}

/// The `q` quantile of `v`, if any.
fn percentile(v: &VecDeque<f64>, q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v: Vec<f64> = v.iter().copied().collect();
    let k = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    let (_, x, _) = v.select_nth_unstable_by(k, f64::total_cmp);
    Some(*x)
}
