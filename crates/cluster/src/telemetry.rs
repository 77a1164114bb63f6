//! What a running master shows while it runs: a [`Telemetry`] handle the
//! master writes into (steps, batches, moves, losses, the particle
//! filter's likelihood) and any other thread reads as a
//! [`TelemetrySnapshot`], whose JSON is the `evolve` data object of the
//! dashboard (`crates/dashboard/README.md`).
//!
//! Costs: one short, uncontended lock per answered batch, per move landed,
//! per step and per event; nothing per state. The reader holds the same
//! lock only to copy the books. Every buffer has a cap, so a run of any
//! length on any number of workers keeps a bounded amount: the workers'
//! rows (one per connection), the last [`STEP_TIMES`] step times and
//! particle-filter points, the last [`EVENTS`] events, and the last
//! [`LANE_WINDOW_S`] seconds of lane segments, at most [`LANES`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use serde::{Serialize, Serializer};

use crate::stats::WorkerStats;

/// Step times (and particle-filter points) kept: the last this many.
pub(crate) const STEP_TIMES: usize = 10_000;
/// Events kept: the last this many.
pub(crate) const EVENTS: usize = 1_000;
/// Lane segments kept at most.
pub(crate) const LANES: usize = 20_000;
/// Lane segments kept: those that ended within this many seconds.
pub(crate) const LANE_WINDOW_S: f64 = 60.0;
/// A worker's segments of one kind closer than this (seconds) are kept as
/// one: a pixel of a 60 s lane 1,280 pixels wide is about 50 ms, so
/// nothing visible is lost, and a worker answering small batches back to
/// back costs one segment, not thousands, in every snapshot.
pub(crate) const LANE_MERGE_GAP_S: f64 = 0.005;

/// A live view of a master's run: give a clone to the master
/// ([`MasterConfig::telemetry`](crate::MasterConfig::telemetry)) and read
/// [`Telemetry::snapshot`] from any thread while it runs.
///
/// A cheap handle: clones share one set of books. Times are seconds since
/// the handle was made ([`Telemetry::new`]).
///
/// # Examples
///
/// ```
/// use statepipe_cluster::Telemetry;
///
/// let telemetry = Telemetry::new();
/// telemetry.set_total_steps(10);
/// telemetry.record_pf_step(1, -12.5, 812.0, 1000);
/// let s = telemetry.snapshot();
/// assert_eq!(s.total_steps, Some(10));
/// assert_eq!(s.pf.unwrap().ess, vec![(1, 812.0)]);
/// ```
#[derive(Clone)]
pub struct Telemetry {
    inner: Arc<Inner>,
}

struct Inner {
    start: Instant,
    books: Mutex<Books>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("elapsed_s", &self.now())
            .finish_non_exhaustive()
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Telemetry::new()
    }
}

/// One worker's row in the books.
#[derive(Default)]
struct Row {
    name: String,
    alive: bool,
    states: u64,
    stats: WorkerStats,
    /// When it joined and, if it was lost, when (seconds).
    joined_s: f64,
    lost_s: Option<f64>,
    /// Its newest busy and transfer segments, still growing while the
    /// next one comes within [`LANE_MERGE_GAP_S`] (`[start, end]` by
    /// kind: busy, then transfer).
    open: [Option<(f64, f64)>; 2],
}

/// Everything behind the lock.
#[derive(Default)]
struct Books {
    step: u64,
    total_steps: Option<u64>,
    finished_s: Option<f64>,
    step_times: VecDeque<(u64, f64)>,
    /// Every step's time added up (the kept ones are only the last).
    step_seconds: f64,
    rows: Vec<Row>,
    lanes: VecDeque<TelemetryLane>,
    totals: TelemetryTotals,
    events: VecDeque<TelemetryEvent>,
    pf: Option<PfBooks>,
}

#[derive(Default)]
struct PfBooks {
    particles: u64,
    loglik: VecDeque<(u64, f64)>,
    ess: VecDeque<(u64, f64)>,
}

/// Pushes `x` onto `q`, dropping the oldest beyond `cap`.
fn push_capped<T>(q: &mut VecDeque<T>, x: T, cap: usize) {
    if q.len() >= cap {
        q.pop_front();
    }
    q.push_back(x);
}

impl Telemetry {
    /// Empty books; its clock starts now.
    pub fn new() -> Self {
        Telemetry {
            inner: Arc::new(Inner {
                start: Instant::now(),
                books: Mutex::new(Books::default()),
            }),
        }
    }

    /// Sets how many steps the run will take (the particle filter sets
    /// its number of observations).
    pub fn set_total_steps(&self, n: u64) {
        self.books().total_steps = Some(n);
    }

    /// Records the particle filter's step `step`: the log-likelihood
    /// estimate so far, the effective sample size of the step's normalized
    /// weights (1 / Σ w²), and the particles in all.
    pub fn record_pf_step(&self, step: u64, loglik: f64, ess: f64, particles: usize) {
        let mut b = self.books();
        let pf = b.pf.get_or_insert_with(PfBooks::default);
        pf.particles = particles as u64;
        push_capped(&mut pf.loglik, (step, loglik), STEP_TIMES);
        push_capped(&mut pf.ess, (step, ess), STEP_TIMES);
    }

    /// The run as it stands: a copy of the books (the lock is held only to
    /// copy them), lane segments of the last 60 seconds.
    pub fn snapshot(&self) -> TelemetrySnapshot {
        let now = self.now();
        let b = self.books();
        let end = b.finished_s.unwrap_or(now);
        let workers = b
            .rows
            .iter()
            .enumerate()
            .map(|(id, r)| {
                let busy_s = r.stats.busy_ns as f64 / 1e9;
                let transfer_s = r.stats.transfer_ns as f64 / 1e9;
                let alive_s = (r.lost_s.unwrap_or(end) - r.joined_s).max(0.0);
                TelemetryWorker {
                    id,
                    name: r.name.clone(),
                    alive: r.alive,
                    states: r.states,
                    bytes_in: r.stats.bytes_in,
                    bytes_out: r.stats.bytes_out,
                    busy_s: tenth_ms(busy_s),
                    transfer_s: tenth_ms(transfer_s),
                    wait_s: tenth_ms((alive_s - busy_s - transfer_s).max(0.0)),
                    evolved: r.stats.evolved,
                    batches: r.stats.batches,
                    steals_in: r.stats.steals_in,
                    steals_out: r.stats.steals_out,
                    recovered_states: r.stats.recovered_states,
                    left: r.stats.left,
                }
            })
            .collect::<Vec<_>>();
        let from = now - LANE_WINDOW_S;
        let open = b.rows.iter().enumerate().flat_map(|(worker, r)| {
            LANE_KINDS
                .iter()
                .zip(r.open)
                .filter_map(move |(&kind, seg)| {
                    seg.map(|(start_s, end_s)| TelemetryLane {
                        worker,
                        kind,
                        start_s,
                        end_s,
                    })
                })
        });
        let lanes = b
            .lanes
            .iter()
            .cloned()
            .chain(open)
            .filter(|l| l.end_s >= from)
            .collect();
        let mut totals = b.totals.clone();
        let snap = TelemetrySnapshot {
            step: b.step,
            total_steps: b.total_steps,
            elapsed_s: end,
            finished: b.finished_s.is_some(),
            step_times: b.step_times.iter().copied().collect(),
            step_seconds: b.step_seconds,
            workers,
            lanes,
            totals: TelemetryTotals::default(),
            events: b.events.iter().cloned().collect(),
            pf: b.pf.as_ref().map(|p| TelemetryPf {
                particles: p.particles,
                loglik: p.loglik.iter().copied().collect(),
                ess: p.ess.iter().copied().collect(),
            }),
        };
        drop(b);
        totals.states = snap.workers.iter().map(|w| w.states).sum();
        totals.bytes = snap.workers.iter().map(|w| w.bytes_in + w.bytes_out).sum();
        totals.steals = snap.workers.iter().map(|w| w.steals_in).sum();
        TelemetrySnapshot { totals, ..snap }
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        // A panic elsewhere while the lock was held leaves counters, never
        // a broken invariant: read on.
        self.inner
            .books
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Seconds since the handle was made.
    pub(crate) fn now(&self) -> f64 {
        self.inner.start.elapsed().as_secs_f64()
    }

    /// `t` in seconds since the handle was made (0 before it).
    pub(crate) fn at(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.inner.start).as_secs_f64()
    }

    fn event(
        b: &mut Books,
        t: f64,
        kind: TelemetryEventKind,
        worker: Option<usize>,
        detail: String,
    ) {
        push_capped(
            &mut b.events,
            TelemetryEvent {
                t,
                kind,
                worker,
                detail,
            },
            EVENTS,
        );
    }

    fn row(b: &mut Books, w: usize) -> &mut Row {
        if b.rows.len() <= w {
            b.rows.resize_with(w + 1, Row::default);
        }
        &mut b.rows[w]
    }

    /// Worker `w` joined the run.
    pub(crate) fn joined(&self, w: usize, addr: std::net::SocketAddr) {
        let t = self.now();
        let mut b = self.books();
        let r = Self::row(&mut b, w);
        *r = Row {
            name: format!("worker {w} ({addr})"),
            alive: true,
            joined_s: t,
            ..Row::default()
        };
        Self::event(
            &mut b,
            t,
            TelemetryEventKind::Joined,
            Some(w),
            addr.to_string(),
        );
    }

    /// Worker `w` was lost, for `reason`.
    pub(crate) fn lost(&self, w: usize, reason: &str) {
        let t = self.now();
        let mut b = self.books();
        let r = Self::row(&mut b, w);
        r.alive = false;
        r.states = 0;
        r.lost_s.get_or_insert(t);
        b.totals.losses += 1;
        Self::event(
            &mut b,
            t,
            TelemetryEventKind::Lost,
            Some(w),
            reason.to_string(),
        );
    }

    /// Lost worker `w`'s `states` were placed on `onto` survivors.
    pub(crate) fn recovered(&self, w: usize, states: usize, onto: usize) {
        let t = self.now();
        let detail = format!("{states} states placed on {onto} workers");
        Self::event(
            &mut self.books(),
            t,
            TelemetryEventKind::Recovered,
            Some(w),
            detail,
        );
    }

    /// Replicas of lost worker `w`'s states were promoted: `n` on `holders` workers.
    pub(crate) fn promoted(&self, w: usize, n: usize, holders: usize) {
        let t = self.now();
        let mut b = self.books();
        b.totals.promotions += n as u64;
        let detail = format!("{n} replicas promoted on {holders} workers");
        Self::event(&mut b, t, TelemetryEventKind::Promoted, Some(w), detail);
    }

    /// Straggler `w`'s work of the step started again elsewhere.
    pub(crate) fn straggler_rerun(&self, w: usize, detail: String) {
        let t = self.now();
        let mut b = self.books();
        b.totals.stragglers_rerun += 1;
        Self::event(
            &mut b,
            t,
            TelemetryEventKind::StragglerRerun,
            Some(w),
            detail,
        );
    }

    /// Worker `w` asked to leave.
    pub(crate) fn leaving(&self, w: usize) {
        let t = self.now();
        let detail = "asked to leave; its states move to the others".to_string();
        Self::event(
            &mut self.books(),
            t,
            TelemetryEventKind::Leaving,
            Some(w),
            detail,
        );
    }

    /// Worker `w`, leaving, gave its states to the others and was told to
    /// exit.
    pub(crate) fn left(&self, w: usize) {
        let t = self.now();
        let mut b = self.books();
        let r = Self::row(&mut b, w);
        r.alive = false;
        r.states = 0;
        r.lost_s.get_or_insert(t);
        let detail = "its states moved to the others; told to exit".to_string();
        Self::event(&mut b, t, TelemetryEventKind::Left, Some(w), detail);
    }

    /// The run went back to a snapshot taken after step `to`.
    pub(crate) fn rolled_back(&self, to: u64, states: usize) {
        let t = self.now();
        let mut b = self.books();
        b.totals.rollbacks += 1;
        b.step = to;
        let detail = format!("back to step {to} ({states} states)");
        Self::event(&mut b, t, TelemetryEventKind::RolledBack, None, detail);
    }

    /// The run ended (once; later calls do nothing): the clock stops.
    pub(crate) fn finish(&self) {
        let t = self.now();
        let mut b = self.books();
        if b.finished_s.is_none() {
            b.finished_s = Some(t);
            Self::event(&mut b, t, TelemetryEventKind::Finished, None, String::new());
        }
    }

    /// Step `step` ended after `secs` seconds. Steps only go forward: a
    /// run that moved from this process to a master (whose count starts
    /// again) goes on from the last step recorded.
    pub(crate) fn step_done(&self, step: u64, secs: f64) {
        let mut b = self.books();
        let step = step.max(b.step + 1);
        b.step = step;
        b.totals.steps += 1;
        b.step_seconds += secs;
        push_capped(&mut b.step_times, (step, secs), STEP_TIMES);
    }

    /// Worker `w` answered a batch at `answered` after `busy_ns` of
    /// evolving; `stats` are its counters now.
    pub(crate) fn batch(&self, w: usize, stats: &WorkerStats, busy_ns: u64, answered: Instant) {
        let end = self.at(answered);
        let start = (end - busy_ns as f64 / 1e9).max(0.0);
        let mut b = self.books();
        Self::row(&mut b, w).stats = stats.clone();
        Self::lane(&mut b, w, TelemetryLaneKind::Busy, start, end);
    }

    /// States moved to worker `w` became evolvable there: a move decided
    /// at `sent`; `stats` are its counters now.
    pub(crate) fn transfer(&self, w: usize, stats: &WorkerStats, sent: Instant, landed: Instant) {
        let (start, end) = (self.at(sent), self.at(landed));
        let mut b = self.books();
        Self::row(&mut b, w).stats = stats.clone();
        Self::lane(&mut b, w, TelemetryLaneKind::Transfer, start, end);
    }

    /// Every worker's counters and the states each holds now, in worker
    /// order (at the end of an operation).
    pub(crate) fn workers(&self, rows: impl Iterator<Item = (WorkerStats, u64)>) {
        let mut b = self.books();
        for (w, (stats, states)) in rows.enumerate() {
            let r = Self::row(&mut b, w);
            r.stats = stats;
            r.states = if r.alive { states } else { 0 };
        }
    }

    /// Adds a segment: it extends the worker's open segment of its kind
    /// when it starts within [`LANE_MERGE_GAP_S`] of its end; otherwise
    /// the open one is closed into the books and this one opens.
    fn lane(b: &mut Books, worker: usize, kind: TelemetryLaneKind, start_s: f64, end_s: f64) {
        let slot = &mut Self::row(b, worker).open[kind as usize];
        let closed = match *slot {
            Some((s, e)) if start_s <= e + LANE_MERGE_GAP_S => {
                *slot = Some((s.min(start_s), e.max(end_s)));
                None
            }
            prev => {
                *slot = Some((start_s, end_s));
                prev
            }
        };
        if let Some((start_s, end_s)) = closed {
            Self::close_lane(b, worker, kind, start_s, end_s);
        }
    }

    /// Appends a closed segment, forgetting those that ended before the
    /// window (segments come in nearly in order of their ends) and the
    /// oldest beyond the cap.
    fn close_lane(b: &mut Books, worker: usize, kind: TelemetryLaneKind, start_s: f64, end_s: f64) {
        let from = end_s - LANE_WINDOW_S;
        while b.lanes.front().is_some_and(|l| l.end_s < from) {
            b.lanes.pop_front();
        }
        let seg = TelemetryLane {
            worker,
            kind,
            start_s,
            end_s,
        };
        push_capped(&mut b.lanes, seg, LANES);
    }
}

/// The run as a [`Telemetry`] saw it at one moment: the `evolve` data
/// object of the dashboard, field for field (`crates/dashboard/README.md`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetrySnapshot {
    /// The master's step counter (evolve steps done, as a snapshot or
    /// rollback sets it).
    pub step: u64,
    /// Steps the run will take, if known.
    pub total_steps: Option<u64>,
    /// Seconds since the telemetry was made (until the run finished).
    pub elapsed_s: f64,
    /// Whether the run ended.
    pub finished: bool,
    /// The last steps' wall times: `(step, seconds)`.
    pub step_times: Vec<(u64, f64)>,
    /// Every step's wall time added up, in seconds (not in the JSON: a
    /// counter for metrics).
    #[serde(skip)]
    pub step_seconds: f64,
    /// One entry per worker connection, in the order they joined.
    pub workers: Vec<TelemetryWorker>,
    /// Busy and transfer segments of the last 60 seconds.
    pub lanes: Vec<TelemetryLane>,
    /// Counters of the whole run.
    pub totals: TelemetryTotals,
    /// The last events, oldest first.
    pub events: Vec<TelemetryEvent>,
    /// The particle filter's series, when one runs.
    pub pf: Option<TelemetryPf>,
}

/// One worker in a [`TelemetrySnapshot`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetryWorker {
    /// Its number (the order it joined).
    pub id: usize,
    /// `worker N (address)`.
    pub name: String,
    /// Whether it is still part of the run.
    pub alive: bool,
    /// States it held at the end of the last operation.
    pub states: u64,
    /// Bytes the master received from it.
    pub bytes_in: u64,
    /// Bytes the master sent it.
    pub bytes_out: u64,
    /// Seconds it reported evolving.
    pub busy_s: f64,
    /// Seconds of moves to it (decision to evolvable there).
    pub transfer_s: f64,
    /// Its time in the run neither busy nor transferring.
    pub wait_s: f64,
    /// States it evolved.
    pub evolved: u64,
    /// Evolve batches it answered.
    pub batches: u64,
    /// Steals it received (as the idle one).
    pub steals_in: u64,
    /// Steals taken from it.
    pub steals_out: u64,
    /// Lost workers' states placed on it.
    pub recovered_states: u64,
    /// It asked to leave and left, its states moved to the others (not
    /// alive, and not lost).
    pub left: bool,
}

/// What a worker did in a [`TelemetryLane`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TelemetryLaneKind {
    /// Evolving a batch.
    Busy = 0,
    /// States moving to it.
    Transfer = 1,
}

/// The kinds in the order of `Row::open`.
const LANE_KINDS: [TelemetryLaneKind; 2] = [TelemetryLaneKind::Busy, TelemetryLaneKind::Transfer];

/// A segment of a worker's time line: JSON `[worker, kind, start_s, end_s]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TelemetryLane {
    /// The worker.
    pub worker: usize,
    /// Busy or transferring.
    pub kind: TelemetryLaneKind,
    /// When it began, in seconds.
    pub start_s: f64,
    /// When it ended, in seconds.
    pub end_s: f64,
}

/// `x` to a tenth of a millisecond, which prints short (`12.3456`, not
/// `12.345600000000001`): lanes are most of a snapshot of many workers.
fn tenth_ms(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

impl Serialize for TelemetryLane {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (a, b) = (tenth_ms(self.start_s), tenth_ms(self.end_s));
        (self.worker, self.kind, a, b).serialize(s)
    }
}

/// Counters of the whole run in a [`TelemetrySnapshot`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TelemetryTotals {
    /// Evolve steps done (every one, rolled back or not).
    pub steps: u64,
    /// States held on the workers at the end of the last operation.
    pub states: u64,
    /// Bytes the master sent and received.
    pub bytes: u64,
    /// Steals.
    pub steals: u64,
    /// Workers lost.
    pub losses: u64,
    /// Replicas promoted to live states (`Recovery::Buddy`).
    pub promotions: u64,
    /// Rollbacks to a snapshot.
    pub rollbacks: u64,
    /// Stragglers whose work was started again on other workers.
    pub stragglers_rerun: u64,
}

/// What happened, in a [`TelemetryEvent`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TelemetryEventKind {
    /// A worker joined.
    Joined,
    /// A worker was lost (the detail says why).
    Lost,
    /// A lost worker's states were placed on the others.
    Recovered,
    /// Replicas of a lost worker's states were promoted.
    Promoted,
    /// The run went back to a snapshot.
    RolledBack,
    /// A straggler's work started again elsewhere.
    StragglerRerun,
    /// A worker asked to leave (SIGTERM).
    Leaving,
    /// A worker that asked to leave gave its states to the others and was
    /// told to exit.
    Left,
    /// The run ended.
    Finished,
}

/// Something that happened to the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetryEvent {
    /// When, in seconds.
    pub t: f64,
    /// What.
    pub kind: TelemetryEventKind,
    /// The worker it concerns, if one.
    pub worker: Option<usize>,
    /// In words.
    pub detail: String,
}

/// The particle filter's series in a [`TelemetrySnapshot`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetryPf {
    /// Particles in all.
    pub particles: u64,
    /// The log-likelihood estimate after each step: `(step, value)`.
    pub loglik: Vec<(u64, f64)>,
    /// The effective sample size of each step's weights: `(step, value)`.
    pub ess: Vec<(u64, f64)>,
}

#[cfg(test)]
mod tests;
