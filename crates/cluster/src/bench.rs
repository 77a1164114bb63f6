//! `statepipe bench cluster`: the master's ceiling, measured on a small
//! machine. Workers' evolve *sleeps* for its cost, so hundreds of worker
//! processes on two cores load only the master.
//!
//! Workload (the seed's shape): 2,000 states, 10 steps, 30 ms per call with
//! a heavy tail (5% of calls 10× slower), 0–3 children per state (systematic
//! resampling of random weights keeps the population at 2,000). Cases:
//! - `evolve/workers=W` for both masters: efficiency = (total evolve time /
//!   W) / wall time. With a 300 ms call in a 10-step run, no schedule beats
//!   `bound` = ideal / (Σ over steps of max(step work / W, longest call)),
//!   reported in the row's config.
//! - `roundtrips/200`: batch round trips per second through one master
//!   core, 200 workers, zero-cost evolve, batches of one state.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::{Rng as _, SeedableRng as _};
use serde::Serialize;

use crate::auth::Secret;
use crate::engine::Engine;
use crate::evolve::{Rng, StateId};
use crate::master::listen::Listener;
use crate::master::sched::{Batch, SchedConfig};
use crate::master::{Master, MasterConfig, MasterImpl};
use crate::models::{Sleep, SleepInput};
use crate::pf::systematic;
use crate::spawn::LocalCluster;
use crate::stats::{efficiency_svg, Series};

/// A result row in the shared `statepipe bench` JSON shape.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub case: String,
    #[serde(rename = "impl")]
    pub imp: String,
    pub config: String,
    pub unit: String,
    pub higher_is_better: bool,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: usize,
}

/// Options of the run.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchClusterArgs {
    /// Worker counts of the `evolve` cases.
    #[arg(long, value_delimiter = ',', default_value = "17,50,100,200,450")]
    pub workers: Vec<usize>,
    /// Cost of a normal call in milliseconds (the tail is 10×).
    #[arg(long, default_value_t = 30.0)]
    pub cost_ms: f64,
    #[arg(long, default_value_t = 2000)]
    pub states: usize,
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Samples per case and master.
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// Short run: 3 ms calls, one sample.
    #[arg(long)]
    pub quick: bool,
    /// Write the JSON report here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Write the efficiency-against-workers plot here.
    #[arg(long)]
    pub svg: Option<std::path::PathBuf>,
}

struct Sample {
    efficiency: f64,
    bound: f64,
    master_busy: Option<f64>,
    roundtrips_per_s: f64,
}

fn cluster(
    n: usize,
    imp: MasterImpl,
    sched: SchedConfig,
) -> anyhow::Result<(Master<Sleep>, LocalCluster)> {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone())?;
    let exe = std::env::current_exe()?;
    let c = LocalCluster::spawn(&exe, n, &l.local_addr()?.to_string(), &secret, &[])?;
    let joined = l.accept(n, Duration::from_secs(120))?;
    let cfg = MasterConfig {
        imp,
        sched,
        seed: 17,
        ..MasterConfig::default()
    };
    Ok((Master::new(&Sleep, joined, cfg)?, c))
}

fn sample(
    a: &BenchClusterArgs,
    w: usize,
    imp: MasterImpl,
    roundtrips: bool,
) -> anyhow::Result<Sample> {
    let sched = if roundtrips {
        SchedConfig {
            batch: Batch::Fixed(1),
            pipeline: 1,
            ..SchedConfig::default()
        }
    } else {
        SchedConfig::default()
    };
    let (mut m, _cluster) = cluster(w, imp, sched)?;
    let cost_us = if roundtrips {
        0
    } else {
        (a.cost_ms * 1000.0) as u32
    };
    let mut ids: Vec<StateId> = m.reset_states((0..a.states as u64).collect())?;
    let mut rng = Rng::seed_from_u64(5);
    let mut critical = 0.0;
    let t0 = Instant::now();
    for _ in 0..a.steps {
        let weights: Vec<f64> = ids.iter().map(|_| rng.random::<f64>().ln()).collect();
        let counts = systematic(&weights, a.states, rng.random());
        let mut inputs = HashMap::with_capacity(ids.len());
        let (mut work, mut longest) = (0.0f64, 0.0f64);
        for (&id, c) in ids.iter().zip(counts) {
            let cost = if rng.random::<f64>() < 0.05 {
                cost_us * 10
            } else {
                cost_us
            };
            work += f64::from(cost);
            longest = longest.max(f64::from(cost));
            inputs.insert(
                id,
                SleepInput {
                    cost_us: cost,
                    children: c.min(3),
                },
            );
        }
        critical += (work / w as f64).max(longest);
        let out = m.evolve_many(inputs)?;
        let mut next: Vec<StateId> = out.into_values().flatten().map(|c| c.0).collect();
        next.sort_unstable();
        ids = next;
    }
    let wall = t0.elapsed().as_secs_f64();
    let st = m.stats();
    let batches: u64 = st.workers.iter().map(|w| w.batches).sum();
    let ideal = st.total_busy().as_secs_f64() / w as f64;
    Ok(Sample {
        efficiency: st.efficiency(),
        bound: if critical > 0.0 {
            (ideal / (critical / 1e6)).min(1.0)
        } else {
            1.0
        },
        master_busy: st.master_busy_share(),
        roundtrips_per_s: batches as f64 / wall,
    })
}

fn summarise(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (med, v[0], v[n - 1])
}

/// Runs every case; `progress` hears about each finished sample.
///
/// # Errors
/// If workers cannot be started or a run fails.
pub fn run(a: &BenchClusterArgs, mut progress: impl FnMut(&str)) -> anyhow::Result<Vec<Row>> {
    let mut a = a.clone();
    if a.quick {
        a.cost_ms = 3.0;
        a.samples = 1;
    }
    let mut rows = Vec::new();
    for &w in &a.workers {
        for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
            let mut s = Vec::new();
            for _ in 0..a.samples.max(1) {
                s.push(sample(&a, w, imp, false)?);
                progress(&format!(
                    "evolve/workers={w} {}: {:.3}",
                    imp.name(),
                    s.last().map_or(0.0, |x| x.efficiency)
                ));
            }
            let (med, min, max) =
                summarise(&mut s.iter().map(|x| x.efficiency).collect::<Vec<_>>());
            let bound = s.iter().map(|x| x.bound).sum::<f64>() / s.len() as f64;
            let busy = s.iter().filter_map(|x| x.master_busy).sum::<f64>() / s.len() as f64;
            rows.push(Row {
                case: format!("evolve/workers={w}"),
                imp: imp.name().into(),
                config: format!(
                    "{} states, {} steps, {} ms calls (5% ×10), bound {:.3}, master busy {}",
                    a.states,
                    a.steps,
                    a.cost_ms,
                    bound,
                    if imp == MasterImpl::EventLoop {
                        format!("{:.1}%", busy * 100.0)
                    } else {
                        "n/a".into()
                    }
                ),
                unit: "efficiency".into(),
                higher_is_better: true,
                median: med,
                min,
                max,
                samples: s.len(),
            });
        }
    }
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let mut v = Vec::new();
        for _ in 0..a.samples.max(1) {
            let rt = BenchClusterArgs {
                states: 200 * 25,
                steps: 4,
                ..a.clone()
            };
            v.push(sample(&rt, 200, imp, true)?.roundtrips_per_s);
            progress(&format!(
                "roundtrips/200 {}: {:.0}/s",
                imp.name(),
                v.last().copied().unwrap_or(0.0)
            ));
        }
        let (med, min, max) = summarise(&mut v);
        rows.push(Row {
            case: "roundtrips/200".into(),
            imp: imp.name().into(),
            config: "200 workers, 5000 states, zero-cost evolve, batches of 1".into(),
            unit: "roundtrips/s".into(),
            higher_is_better: true,
            median: med,
            min,
            max,
            samples: v.len(),
        });
    }
    Ok(rows)
}

/// The efficiency-against-workers plot of `rows`.
pub fn svg(rows: &[Row]) -> String {
    let series: Vec<Series> = [MasterImpl::EventLoop, MasterImpl::Threaded]
        .iter()
        .map(|imp| Series {
            name: format!("{} master", imp.name()),
            points: rows
                .iter()
                .filter(|r| r.imp == imp.name() && r.unit == "efficiency")
                .filter_map(|r| {
                    Some((
                        r.case.strip_prefix("evolve/workers=")?.parse().ok()?,
                        r.median,
                    ))
                })
                .collect(),
        })
        .collect();
    efficiency_svg(
        "statepipe bench cluster: efficiency against workers",
        &series,
    )
}

/// `statepipe bench cluster` on its own (until the shared bench harness
/// calls [`run`]): prints rows, writes JSON and SVG.
///
/// # Errors
/// As [`run`], or if a file cannot be written.
pub fn main(a: &BenchClusterArgs) -> anyhow::Result<()> {
    let rows = run(a, |m| eprintln!("{m}"))?;
    for r in &rows {
        println!(
            "{:<22} {:<11} {:>10.3} {:<14} [{:.3}, {:.3}]  {}",
            r.case, r.imp, r.median, r.unit, r.min, r.max, r.config
        );
    }
    if let Some(p) = &a.json {
        let cpus = crate::spawn::usable_cpus().len();
        let j = serde_json::json!({ "bench": "cluster", "host": { "cpus": cpus, "pingpong_ns": null }, "results": rows });
        std::fs::write(p, serde_json::to_string_pretty(&j)? + "\n")?;
    }
    if let Some(p) = &a.svg {
        std::fs::write(p, svg(&rows))?;
    }
    Ok(())
}
