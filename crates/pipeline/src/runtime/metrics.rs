//! What a running deployment reports: per-unit counters, and the deployed
//! graph drawn with them.
//!
//! Workers publish their counters with plain relaxed stores once per batch;
//! a snapshot only loads them, so watching a pipeline costs it nothing.

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::compile::Compile;
use super::graph::{EdgeInfo, StationInfo, INPUT, OUTPUT};

use super::station::{ErrorCounts, UnitCounters};
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
}

pub(crate) struct Registry {
    start: Instant,
    units: Vec<UnitInfo>,
    plan: Vec<usize>,
    workers: usize,
    counters: Vec<Arc<UnitCounters>>,
    stations: Vec<StationInfo>,
    edges: Vec<EdgeInfo>,
    errors: ErrorCounts,
}

impl Registry {
    pub(crate) fn new(cx: &mut Compile, start: Instant) -> Self {
        Registry {
            start,
            units: cx.units.clone(),
            plan: cx.plan.clone(),
            workers: cx.bells.len(),
            counters: cx.unit_counters.clone(),
            stations: std::mem::take(&mut cx.stations),
            edges: std::mem::take(&mut cx.edges),
            errors: Arc::clone(&cx.errors),
        }
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
                let station = self.stations.iter().find(|s| s.units.contains(&u));
                let (busy_ns, blocked, depth) = station.map_or((0, 0.0, 0), |s| {
                    let c = &s.counters;
                    (
                        c.busy_ns.load(Ordering::Relaxed),
                        c.blocked_ns.load(Ordering::Relaxed) as f64 / total,
                        (s.depth)(),
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
                }
            })
            .collect();
        Metrics {
            elapsed,
            workers: self.workers,
            units,
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
