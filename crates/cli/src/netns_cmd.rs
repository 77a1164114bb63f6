//! `statepipe sleep-master` (hidden): a master that waits for workers started
//! by any launcher, like `statepipe master`, and drives the cluster
//! benchmark's `sleep` model (every call sleeps for a fixed time) instead of
//! a filter. `deploy/netns/run.sh` uses it to measure what a network costs:
//! the workers' evolve time is known, so efficiency against a loopback run
//! isolates the network. Its JSON names the final states, which depend only
//! on the seed and the sizes, so runs on any network must write the same.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use statepipe_bench::cluster::{Sleep, SleepInput};
use statepipe_cluster::{Engine as _, Listener, Master, MasterConfig, Secret, StateId};

/// Options of `statepipe sleep-master`.
#[derive(clap::Args, Debug, Clone)]
pub struct SleepArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Workers to wait for.
    #[arg(long)]
    pub workers: usize,
    /// Seconds to wait for them.
    #[arg(long, default_value_t = 60)]
    pub wait_s: u64,
    /// Milliseconds each evolve call sleeps.
    #[arg(long, default_value_t = 30)]
    pub sleep_ms: u32,
    /// States (each call has one child, so the population stays this size).
    #[arg(long, default_value_t = 32)]
    pub states: usize,
    /// Steps (one `evolve_many` each).
    #[arg(long, default_value_t = 8)]
    pub steps: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write the final states, wall time and efficiency as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `statepipe sleep-master`.
///
/// # Errors
/// Binding, the workers not joining in time, a failed step, writing the JSON.
pub fn run(a: &SleepArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.states > 0 && a.steps > 0,
        "--states and --steps must be positive"
    );
    let l = Listener::bind(&a.listen, Secret::from_env()?)
        .with_context(|| format!("binding {}", a.listen))?;
    eprintln!(
        "listening on {}; waiting for {} workers",
        l.local_addr()?,
        a.workers
    );
    let joined = l.accept(a.workers, Duration::from_secs(a.wait_s))?;
    let cfg = MasterConfig {
        seed: a.seed,
        ..MasterConfig::default()
    };
    let mut m = Master::new(&Sleep, joined, cfg)?;
    let call = SleepInput {
        cost_us: a.sleep_ms.saturating_mul(1000),
        children: 1,
    };
    let mut ids: Vec<StateId> = m.reset_states((0..a.states as u64).collect())?;
    let t0 = Instant::now();
    for step in 0..a.steps {
        let out = m.evolve_many(ids.iter().map(|&id| (id, call)).collect())?;
        let mut next: Vec<StateId> = out.into_values().flatten().map(|c| c.0).collect();
        anyhow::ensure!(
            next.len() == a.states,
            "step {step}: {} children of {} states",
            next.len(),
            a.states
        );
        next.sort_unstable();
        ids = next;
    }
    let wall = t0.elapsed().as_secs_f64();
    let held: HashMap<StateId, u64> = m.fetch_states(&ids)?;
    let states: Vec<u64> = ids.iter().map(|id| held[id]).collect();
    let stats = m.stats();
    println!("{}", stats.table());
    println!(
        "{} workers, {} states × {} steps of {} ms: wall {wall:.3} s, efficiency {:.1}%",
        stats.workers.len(),
        a.states,
        a.steps,
        a.sleep_ms,
        stats.efficiency() * 100.0
    );
    if let Some(path) = &a.json {
        // When each lost worker was recovered from, as Unix time, so that a
        // caller that cut a link can tell how long detection took.
        let (now, unix) = (Instant::now(), std::time::SystemTime::now());
        let recovered: Vec<f64> = stats
            .recovered_at
            .iter()
            .filter_map(|&t| unix.checked_sub(now.saturating_duration_since(t)))
            .filter_map(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_secs_f64())
            .collect();
        let j = serde_json::json!({
            "states": states,
            "workers": stats.workers.len(),
            "wall_s": wall,
            "efficiency": stats.efficiency(),
            "lost_workers": stats.lost_workers(),
            "recovered_unix_s": recovered,
        });
        std::fs::write(path, serde_json::to_string_pretty(&j)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    m.shutdown();
    Ok(())
}
