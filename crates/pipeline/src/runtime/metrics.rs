//! What a running deployment reports: per-unit counters, the deployed
//! graph drawn with them, and the [`Observer`] that reads both (and the
//! checkpoint and upgrade history) from any thread.
//!
//! Workers publish their counters with plain relaxed stores once per batch;
//! a snapshot only loads them, so watching a pipeline costs it nothing.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::compile::Compile;
use super::graph::{EdgeInfo, StationInfo, INPUT, OUTPUT};

use super::station::{ErrorCounts, UnitCounters};
use crate::checkpoint::{CheckpointInfo, History};
use crate::state::UpgradeInfo;
use crate::unit::{UnitInfo, UnitKind};

/// The counters of one unit.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitMetrics {
    /// The unit's name.
    pub name: String,
    /// The worker it runs on.
    pub worker: usize,
    /// Items it took in.
    pub items_in: u64,
    /// Outputs it emitted.
    pub items_out: u64,
    /// Items it rejected (sent to the error output).
    pub errors: u64,
    /// Share of the elapsed time its station spent working.
    pub busy: f64,
    /// Time its station spent working, in ns (shared by the units fused on
    /// one station).
    pub busy_ns: u64,
    /// Share of the elapsed time its station spent with its output held
    /// back by a full ring (back-pressure from downstream).
    pub blocked: f64,
    /// The rest: waiting for input.
    pub idle: f64,
    /// Messages waiting in its station's input ring(s) now.
    pub queue_depth: u64,
    /// The slots of its station's input ring(s), which `queue_depth` fills
    /// (the sum over the copies' or branches' rings at a merge or join; 0
    /// for a station fed by an iterator on its own worker, which has no
    /// ring).
    pub ring_capacity: u64,
}

/// A snapshot of a deployment's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// Time since the deployment started.
    pub elapsed: Duration,
    /// Workers in the plan.
    pub workers: usize,
    /// One entry per unit (shard merges included), in description order.
    pub units: Vec<UnitMetrics>,
    /// The deployed graph's edges, `(from, to)`, as
    /// [`Running::to_dot`](crate::Running::to_dot) draws them: units by
    /// their names, and `"input"` and `"output"` for the pipeline's ends
    /// (a cycle's feedback edge runs from `"output"` to `"input"`). An edge
    /// between two units on one worker is a direct call, one between
    /// workers a ring.
    pub edges: Vec<(String, String)>,
}

pub(crate) struct Registry {
    start: Instant,
    units: Vec<UnitInfo>,
    plan: Vec<usize>,
    workers: usize,
    counters: Vec<Arc<UnitCounters>>,
    stations: Vec<StationInfo>,
    /// Each unit's station, by index into `stations`.
    station_of: Vec<Option<usize>>,
    edges: Vec<EdgeInfo>,
    /// `edges` named, as snapshots report them (made once).
    edge_names: Vec<(String, String)>,
    errors: ErrorCounts,
}

impl Registry {
    pub(crate) fn new(cx: &mut Compile, start: Instant) -> Self {
        let stations = std::mem::take(&mut cx.stations);
        let edges = std::mem::take(&mut cx.edges);
        let units = cx.units.clone();
        let station_of = (0..units.len())
            .map(|u| stations.iter().position(|s| s.units.contains(&u)))
            .collect();
        let name = |n: usize| match n {
            INPUT => "input".to_string(),
            OUTPUT => "output".to_string(),
            u => units[u].name.clone(),
        };
        let edge_names = edges.iter().map(|e| (name(e.from), name(e.to))).collect();
        Registry {
            start,
            plan: cx.plan.clone(),
            workers: cx.bells.len(),
            counters: cx.unit_counters.clone(),
            units,
            stations,
            station_of,
            edges,
            edge_names,
            errors: Arc::clone(&cx.errors),
        }
    }

    /// When the deployment started.
    pub(crate) fn start(&self) -> Instant {
        self.start
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        let elapsed = self.start.elapsed();
        let total = elapsed.as_nanos().max(1) as f64;
        let errors = self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let units = self
            .units
            .iter()
            .enumerate()
            .map(|(u, info)| {
                let station = self.station_of[u].map(|s| &self.stations[s]);
                let (busy_ns, blocked, depth, capacity) = station.map_or((0, 0.0, 0, 0), |s| {
                    let c = &s.counters;
                    (
                        c.busy_ns.load(Ordering::Relaxed),
                        c.blocked_ns.load(Ordering::Relaxed) as f64 / total,
                        (s.depth)(),
                        s.capacity,
                    )
                });
                let busy = (busy_ns as f64 / total).min(1.0);
                let blocked = blocked.min(1.0 - busy);
                UnitMetrics {
                    name: info.name.clone(),
                    worker: self.plan[u],
                    items_in: self.counters[u].items_in.load(Ordering::Relaxed),
                    items_out: self.counters[u].items_out.load(Ordering::Relaxed),
                    errors: info.stages.iter().filter_map(|s| errors.get(s)).sum(),
                    busy,
                    busy_ns,
                    blocked,
                    idle: (1.0 - busy - blocked).max(0.0),
                    queue_depth: depth,
                    ring_capacity: capacity,
                }
            })
            .collect();
        Metrics {
            elapsed,
            workers: self.workers,
            units,
            edges: self.edge_names.clone(),
        }
    }

    pub(crate) fn to_dot(&self) -> String {
        let m = self.snapshot();
        let secs = m.elapsed.as_secs_f64().max(1e-9);
        let mut out = String::from(
            "digraph deployed {\n  rankdir=LR;\n  node [shape=box, fontname=\"Helvetica\"];\n",
        );
        out.push_str("  input [shape=cds];\n  output [shape=cds];\n");
        for w in 0..self.workers {
            out.push_str(&format!(
                "  subgraph cluster_w{w} {{\n    label=\"worker {w}\"; style=rounded;\n"
            ));
            for (u, info) in self.units.iter().enumerate() {
                if self.plan[u] != w {
                    continue;
                }
                let um = &m.units[u];
                let shape = match info.kind {
                    UnitKind::Stage => "box",
                    UnitKind::Merge => "invtriangle",
                    UnitKind::Join => "invhouse",
                };
                out.push_str(&format!(
                    "    u{u} [shape={shape}, label=\"{}\\nbusy {:.0}%  blocked {:.0}%\"];\n",
                    escape(&info.name),
                    um.busy * 100.0,
                    um.blocked * 100.0
                ));
            }
            out.push_str("  }\n");
        }
        for e in &self.edges {
            let name = |n: usize| match n {
                INPUT => "input".to_string(),
                OUTPUT => "output".to_string(),
                u => format!("u{u}"),
            };
            let rate = match e.from {
                // INPUT feeds the first stage; OUTPUT -> INPUT is a cycle's
                // feedback edge. Neither has counters of its own.
                INPUT | OUTPUT => None,
                u => Some(m.units[u].items_out as f64 / secs),
            };
            let mut label = rate.map_or(String::new(), rate_label);
            let style = match &e.depth {
                Some(depth) => {
                    label.push_str(&format!("\\ndepth {}", depth()));
                    "solid"
                }
                None => "dashed", // fused: a direct call, no queue
            };
            out.push_str(&format!(
                "  {} -> {} [label=\"{label}\", style={style}];\n",
                name(e.from),
                name(e.to)
            ));
        }
        out.push_str("}\n");
        out
    }
}

/// What an [`Observer`] reads: the live counters, then the last snapshot.
enum Watched {
    Live(Arc<Registry>),
    Finished(Metrics),
}

/// What a deployment shares with its observers.
pub(crate) struct Watch {
    started: Instant,
    state: Mutex<Watched>,
    checkpoints: Arc<History<CheckpointInfo>>,
    upgrades: Arc<History<UpgradeInfo>>,
}

impl Watch {
    pub(crate) fn new(
        registry: Arc<Registry>,
        checkpoints: Arc<History<CheckpointInfo>>,
        upgrades: Arc<History<UpgradeInfo>>,
    ) -> Self {
        Watch {
            started: registry.start(),
            state: Mutex::new(Watched::Live(registry)),
            checkpoints,
            upgrades,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The deployment ended with these counters: observers read them from
    /// now on, and let go of the live ones (and the rings they probe).
    pub(crate) fn finish(&self, last: Metrics) {
        let mut state = self.state();
        if matches!(*state, Watched::Live(_)) {
            *state = Watched::Finished(last);
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        matches!(*self.state(), Watched::Finished(_))
    }
}

/// A handle that reads a deployment's counters and its checkpoint and
/// upgrade history from any thread, while it runs and after it ended:
/// cheap to clone, it never slows the workers (a snapshot loads their
/// counters), and it does not keep the deployment running. Made by
/// [`Running::observer`](crate::Running::observer).
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::{Config, Pipeline};
///
/// let p = Pipeline::map("double", |x: u64| 2 * x);
/// let running = p.deploy_with(&Config::new().workers(1), 0..1000u64, |_, _| {}).unwrap();
/// let observer = running.observer();
/// let watcher = std::thread::spawn(move || {
///     let m = observer.metrics(); // while it runs, or after
///     assert_eq!(m.units[0].name, "double");
///     observer
/// });
/// running.join().unwrap();
/// let observer = watcher.join().unwrap();
/// assert!(observer.is_finished());
/// assert_eq!(observer.metrics().units[0].items_in, 1000);
/// ```
#[derive(Clone)]
pub struct Observer {
    watch: Arc<Watch>,
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observer")
            .field("started", &self.watch.started)
            .field("finished", &self.is_finished())
            .finish_non_exhaustive()
    }
}

impl Observer {
    pub(crate) fn new(watch: Arc<Watch>) -> Self {
        Observer { watch }
    }

    /// The counters now, as [`Running::metrics`](crate::Running::metrics)
    /// gives them; once the deployment has ended, the counters at its end
    /// (as [`Finished::metrics`](crate::Finished::metrics)).
    pub fn metrics(&self) -> Metrics {
        // The registry is cloned out, so the snapshot is taken unlocked.
        let live = match &*self.watch.state() {
            Watched::Live(r) => Arc::clone(r),
            Watched::Finished(m) => return m.clone(),
        };
        live.snapshot()
    }

    /// Whether the deployment has ended: joined, or dropped.
    pub fn is_finished(&self) -> bool {
        self.watch.is_finished()
    }

    /// When the deployment started (its [`Metrics::elapsed`] counts from
    /// here).
    pub fn started(&self) -> Instant {
        self.watch.started
    }

    /// The last checkpoints completed (at most
    /// [`CHECKPOINTS_KEPT`](crate::CHECKPOINTS_KEPT)), oldest first.
    pub fn checkpoints(&self) -> Vec<CheckpointInfo> {
        self.watch.checkpoints.all()
    }

    /// The last upgrades applied (at most
    /// [`UPGRADES_KEPT`](crate::UPGRADES_KEPT)), oldest first.
    pub fn upgrades(&self) -> Vec<UpgradeInfo> {
        self.watch.upgrades.all()
    }
}

fn rate_label(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.1} M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.1} /s")
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

impl fmt::Display for Metrics {
    /// A table, one row per unit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        writeln!(
            f,
            "{:<24} {:>3} {:>12} {:>12} {:>8} {:>10} {:>6} {:>8} {:>6} {:>7}",
            "unit", "wkr", "in", "out", "errors", "out/s", "busy", "blocked", "idle", "queue"
        )?;
        for u in &self.units {
            writeln!(
                f,
                "{:<24} {:>3} {:>12} {:>12} {:>8} {:>10} {:>5.0}% {:>7.0}% {:>5.0}% {:>7}",
                truncate(&u.name, 24),
                u.worker,
                u.items_in,
                u.items_out,
                u.errors,
                rate_label(u.items_out as f64 / secs),
                u.busy * 100.0,
                u.blocked * 100.0,
                u.idle * 100.0,
                u.queue_depth
            )?;
        }
        write!(
            f,
            "{} worker(s), {:.2} s elapsed",
            self.workers,
            self.elapsed.as_secs_f64()
        )
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('…');
        t
    }
}
