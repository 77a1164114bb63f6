//! `statepipe pf | worker | master`: the distributed evolve engine's
//! commands, on the `statepipe-cluster` library with the models of
//! `statepipe-models` and the benchmark's.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use statepipe_cluster::config::{Batch, Deadlines, SchedConfig, HEARTBEAT};
use statepipe_cluster::pf::{Bootstrap, SsModel};
use statepipe_cluster::{
    Auto, AutoConfig, Joined, Listener, LocalCluster, Master, MasterConfig, Secret, ShipCost,
    Stats, Telemetry,
};
use statepipe_dashboard::EvolveSource;
use statepipe_models::{Nile, Pk};
use statepipe_sys::lock::{FolderLock, LockError};

pub use crate::cluster_args::{MasterArg, RecoveryArg, StealViaArg};
use crate::cluster_ckpt;
use crate::cluster_drive::{drive, stop_on_sigterm, DriveOptions, Run};
use crate::worker_cmd::{worker_command, WorkerArgs};
use statepipe_cluster::pf::PfConfig;

/// The cluster subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Particle filter on local worker processes, one per usable CPU.
    Pf(PfArgs),
    /// Serve a master: `STATEPIPE_SECRET` must hold the cluster's secret.
    Worker(WorkerArgs),
    /// Wait for N workers started by any launcher, then run the filter.
    Master(MasterArgs),
}

/// Which state-space model the filter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// The Nile local-level model (exact answer known).
    Nile,
    /// The ODE pharmacokinetic model (cost set by --pk-substeps).
    Pk,
}

/// Options of the filter run, for `pf` and `master`.
#[derive(clap::Args, Debug, Clone)]
pub struct FilterArgs {
    /// Particles in all.
    #[arg(long, default_value_t = 2000, value_parser = crate::arg_values::at_least_one::<usize>)]
    pub particles: usize,
    /// Independent filters the particles are split into (for the standard error).
    #[arg(long, default_value_t = 20, value_parser = crate::arg_values::at_least_one::<usize>)]
    pub islands: usize,
    #[arg(long, value_enum, default_value = "nile")]
    pub model: Model,
    /// RK4 substeps per hour in the pk model (its cost per call).
    #[arg(long, default_value_t = 2000, value_parser = crate::arg_values::at_least_one::<u32>)]
    pub pk_substeps: u32,
    /// Observations in the pk model.
    #[arg(long, default_value_t = 48, value_parser = crate::arg_values::at_least_one::<usize>)]
    pub pk_hours: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The master implementation.
    #[arg(long, value_enum, default_value = "event-loop")]
    pub master: MasterArg,
    /// Fixed evolve batch size (default: adaptive).
    #[arg(long)]
    pub batch: Option<usize>,
    /// How stolen states travel: through the master (default, fewer hops)
    /// or worker to worker (the bytes skip the master).
    #[arg(long, value_enum, default_value = "master")]
    pub steal_via: StealViaArg,
    /// What a lost worker costs: `master-copy` (the master keeps a copy of
    /// every state and reruns the lost worker's share on the others, with
    /// the same result), `buddy` (each worker's states are replicated to
    /// the next worker after every step, straight between workers; a lost
    /// worker's replicas are promoted and its share rerun, with the same
    /// result), `auto` (buddy for states of 64 KiB and more on average) or
    /// `off` (the run fails, saying what was lost).
    #[arg(long, value_enum, default_value = "master-copy")]
    pub recovery: RecoveryArg,
    /// With `--recovery buddy`: how many other workers keep a replica of
    /// each worker's states (at most the workers less two). Any losses
    /// between two replication rounds that leave one copy of every state
    /// are recovered: with N, any N workers.
    #[arg(long, value_name = "N", default_value_t = statepipe_cluster::config::DEFAULT_REPLICAS as u16,
          value_parser = crate::arg_values::at_least_one::<u16>)]
    pub replicas: u16,
    /// Declare a worker lost after this many seconds of silence (default
    /// 1.5; workers send a heartbeat every 25 ms, or every two thirds of
    /// this if shorter), and let no evolve run longer than this.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub deadline_s: Option<Duration>,
    /// Write the run's state (every particle, the filter's accumulators)
    /// to FILE every `--every` steps and after the last, atomically, to
    /// resume from if the master dies. Written on a thread of its own: a
    /// step pays for the snapshot only, a newer checkpoint replaces one
    /// still waiting for the write before it, the last one is on disk
    /// before the command ends, and a failed write fails the run. The last
    /// checkpoint is also kept in memory: when workers are lost with every
    /// copy of some states, the run rolls back to it on the workers left
    /// and goes on, with the same result (said on stderr). `FILE.lock`
    /// beside it keeps the file to one run at a time.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,
    /// Steps between checkpoints.
    #[arg(long, default_value_t = 10, value_parser = crate::arg_values::at_least_one::<u64>)]
    pub every: u64,
    /// Go on from a checkpoint written by `--checkpoint` (the same model,
    /// particles, islands and seed; any number of workers). The result is
    /// what the run would have given had it never stopped.
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
    /// Write the result as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar, filtered means or worker table.
    #[arg(long)]
    pub quiet: bool,
    /// Serve a live dashboard of the run at ADDR (HOST:PORT, loopback:
    /// 127.0.0.1:8787; port 0 takes any free one): the page, `/metrics`
    /// and JSON, read-only. The URL is printed at the start. With
    /// STATEPIPE_DASHBOARD_TOKEN set, every request must carry it.
    #[arg(long, value_name = "ADDR")]
    pub dashboard: Option<String>,
}

/// Where `pf` evolves, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// The first step in process, timed; then stay, or move to workers if
    /// shipping the states costs less than it saves.
    Auto,
    /// Threads of this process, one per CPU it may use.
    InProcess,
    /// Worker processes from the start.
    Workers,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PfArgs {
    /// Where the steps run (the result is the same bits in each case).
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineArg,
    /// Worker processes (default: the CPUs this process may use).
    #[arg(long, value_parser = crate::arg_values::at_least_one::<usize>)]
    pub workers: Option<usize>,
    /// Do not pin workers to CPUs.
    #[arg(long)]
    pub no_pin: bool,
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct MasterArgs {
    /// Address to listen on (loopback unless workers are remote).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Workers to wait for.
    #[arg(long, value_parser = crate::arg_values::at_least_one::<usize>)]
    pub workers: usize,
    /// Seconds to wait for them.
    #[arg(long, default_value_t = 120)]
    pub wait_s: u64,
    #[command(flatten)]
    pub filter: FilterArgs,
}

fn seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s} is not a positive number of seconds"))
}

/// Runs one command.
///
/// # Errors
/// Whatever the command hits; `statepipe` prints it and exits non-zero.
pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Worker(a) => crate::worker_cmd::run(a),
        Command::Master(a) => {
            // Refuse a wrong filter or checkpoint before waiting for
            // anyone.
            let _lock = check_before_start(&a.filter)?;
            stop_on_sigterm()?;
            let l = Listener::bind(&a.listen, Secret::from_env()?)
                .with_context(|| format!("binding {}", a.listen))?;
            eprintln!(
                "listening on {}; waiting for {} workers (more may join later)",
                l.local_addr()?,
                a.workers
            );
            let joined = l.accept(a.workers, Duration::from_secs(a.wait_s))?;
            // Workers that join later are admitted at the next step.
            filter(Where::Workers(joined, Some(l)), &a.filter)
        }
        Command::Pf(a) => {
            let _lock = check_before_start(&a.filter)?;
            let cpus = statepipe_sys::cpus::usable_cpus();
            let n = a.workers.unwrap_or(cpus.count).max(1);
            match a.workers {
                Some(w) => eprintln!("cpus: {cpus}; --workers {w} overrides it"),
                None => eprintln!("cpus: {cpus}"),
            }
            // One worker per CPU the quota leaves, on the first `count` ids.
            let pins = if a.no_pin {
                Vec::new()
            } else {
                cpus.ids[..cpus.count].to_vec()
            };
            let quiet = a.filter.quiet;
            let mut cluster = None;
            let mut start = || -> Result<Vec<Joined>, statepipe_cluster::Error> {
                // Installed with the first worker (its thread cost the
                // 2,000-particle run in process half a millisecond, 7 %):
                // before that, Ctrl-C's default action leaves nothing
                // behind.
                crate::kill_workers_on_signal();
                let c = LocalCluster::spawn(&worker_command().map_err(spawn_error)?, n, &pins)?;
                tracing::info!(pids = ?c.pids(), "spawned {n} workers");
                if !quiet {
                    eprintln!("statepipe pf: {n} worker processes {:?}", c.pids());
                }
                let joined = c.accept(Duration::from_secs(60));
                cluster = Some(c);
                joined
            };
            let r = match a.engine {
                EngineArg::Workers => {
                    let joined = start()?;
                    filter(Where::Workers(joined, None), &a.filter)
                }
                EngineArg::InProcess | EngineArg::Auto => filter(
                    Where::Auto {
                        threads: cpus.count.max(1),
                        workers: n,
                        force_in_process: a.engine == EngineArg::InProcess,
                        start: Box::new(start),
                    },
                    &a.filter,
                ),
            };
            drop(cluster);
            r
        }
    }
}

fn spawn_error(e: anyhow::Error) -> statepipe_cluster::Error {
    statepipe_cluster::Error::Config(format!("{e:#}"))
}

/// Where a filter run evolves.
enum Where<'a> {
    /// Joined workers from the start (and a listener for late ones).
    Workers(Vec<Joined>, Option<Listener>),
    /// In process first; `start` gives workers if the run moves.
    Auto {
        threads: usize,
        workers: usize,
        force_in_process: bool,
        start: StartWorkers<'a>,
    },
}

type StartWorkers<'a> =
    Box<dyn FnOnce() -> Result<Vec<Joined>, statepipe_cluster::Error> + Send + 'a>;

/// The master's configuration from the command line, recording into
/// `telemetry` for a dashboard.
pub fn master_config(a: &FilterArgs, telemetry: Option<&Telemetry>) -> MasterConfig {
    MasterConfig {
        telemetry: telemetry.cloned(),
        imp: a.master.into(),
        seed: a.seed,
        sched: SchedConfig {
            batch: a.batch.map_or(Batch::Adaptive { max: 64 }, Batch::Fixed),
            steal_via: a.steal_via.into(),
            recovery: a.recovery.into(),
            replicas: usize::from(a.replicas),
            deadlines: Deadlines {
                fixed: a.deadline_s,
                heartbeat: Some(a.deadline_s.map_or(HEARTBEAT, |d| HEARTBEAT.min(d * 2 / 3))),
                ..Deadlines::default()
            },
            ..SchedConfig::default()
        },
        ..MasterConfig::default()
    }
}

fn filter(at: Where<'_>, a: &FilterArgs) -> anyhow::Result<()> {
    // Started before the model is built, so the page is up while it loads;
    // it serves until the report is printed.
    let board = match &a.dashboard {
        Some(addr) => {
            let telemetry = Telemetry::new();
            let title = format!(
                "statepipe pf: {:?} model, {} particles in {} islands",
                a.model, a.particles, a.islands
            );
            let source = Arc::new(EvolveSource::new(telemetry.clone(), title));
            Some((crate::dashboard_cmd::start(addr, source)?, telemetry))
        }
        None => None,
    };
    let t = board.as_ref().map(|b| &b.1);
    match a.model {
        Model::Nile => {
            let m = Nile::bundled();
            let exact = m.exact();
            let labels = m.years.iter().map(u32::to_string).collect();
            let obs = m.y.clone();
            report(run_model(m, at, a, t)?, a, Some(exact), labels, &obs)
        }
        Model::Pk => {
            let m = Pk::simulated(a.pk_hours, a.pk_substeps, a.seed);
            let labels = (1..=m.y.len()).map(|h| format!("{h}h")).collect();
            let obs = m.y.clone();
            report(run_model(m, at, a, t)?, a, None, labels, &obs)
        }
    }
}

/// What `drive` takes of the options.
fn drive_options(a: &FilterArgs) -> DriveOptions {
    DriveOptions {
        quiet: a.quiet,
        pf: PfConfig {
            particles: a.particles,
            islands: a.islands,
            seed: a.seed,
        },
        checkpoint: a.checkpoint.clone(),
        every: a.every,
        run_key: run_key(a),
    }
}

/// What must match for a checkpoint to be resumed by this run.
fn run_key(a: &FilterArgs) -> String {
    format!(
        "model {:?} (pk {}h x {} substeps), {} particles in {} islands, seed {}",
        a.model, a.pk_hours, a.pk_substeps, a.particles, a.islands, a.seed
    )
}

/// Whether `--resume` names a checkpoint of this run and `--checkpoint` a
/// file that can be written.
///
/// Returns the lock of the `--checkpoint` file (`FILE.lock` beside it),
/// held for the run: two runs replacing one checkpoint would each lose
/// the other's.
/// Refuses what the run would fail on only at its end, or after waiting
/// for its workers: a filter whose particles do not split over its
/// islands, a `--json` file in no folder, a wrong checkpoint or one that
/// cannot be written. Holds the checkpoint's lock.
fn check_before_start(a: &FilterArgs) -> anyhow::Result<Option<FolderLock>> {
    anyhow::ensure!(
        a.particles >= a.islands,
        "--particles {} is fewer than --islands {}: each island needs at least one particle",
        a.particles,
        a.islands
    );
    anyhow::ensure!(
        a.particles % a.islands == 0,
        "--islands {} does not divide --particles {}: give a multiple of it",
        a.islands,
        a.particles
    );
    if let Some(path) = &a.json {
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(folder) = folder.filter(|f| !f.is_dir()) {
            anyhow::bail!(
                "--json {}: there is no folder {}; make it or give another path",
                path.display(),
                folder.display()
            );
        }
    }
    let lock = match &a.checkpoint {
        Some(path) => Some(FolderLock::beside(path).map_err(|e| {
            match e {
                LockError::Held { holder } => anyhow::anyhow!(
                    "another run writes the checkpoint {}{}; give this one another --checkpoint",
                    path.display(),
                    holder.map_or(String::new(), |p| format!(" (process {p})"))
                ),
                LockError::Io(e) => anyhow::Error::new(e)
                    .context(format!("cannot write the checkpoint {}", path.display())),
            }
        })?),
        None => None,
    };
    cluster_ckpt::check(a.resume.as_deref(), a.checkpoint.as_deref(), &run_key(a))?;
    Ok(lock)
}

fn run_model<M: SsModel + Clone>(
    m: M,
    at: Where<'_>,
    a: &FilterArgs,
    telemetry: Option<&Telemetry>,
) -> anyhow::Result<Run> {
    let model = Bootstrap(m.clone());
    let resume = match &a.resume {
        Some(path) => {
            let c = cluster_ckpt::read(path, &run_key(a))?;
            eprintln!("resuming after step {} from {}", c.filter.t, path.display());
            Some(c)
        }
        None => None,
    };
    match at {
        Where::Workers(joined, late) => {
            let (mut master, start) = match resume {
                Some(c) => (
                    Master::resume(&model, joined, master_config(a, telemetry), c.snapshot)?,
                    Some(c.filter),
                ),
                None => (
                    Master::new(&model, joined, master_config(a, telemetry))?,
                    None,
                ),
            };
            if let Some(l) = late.filter(|_| a.master == MasterArg::EventLoop) {
                master.admit_from(l);
            }
            drive(&mut master, &m, start, &drive_options(a))
        }
        Where::Auto {
            threads,
            workers,
            force_in_process,
            start,
        } => {
            let mut ship = ShipCost::default();
            if force_in_process {
                // Nothing pays for the move.
                ship.start = Duration::MAX / 4;
            }
            let cfg = AutoConfig {
                master: master_config(a, telemetry),
                threads,
                workers,
                steps: Some(m.steps() as u64),
                ship,
            };
            let (mut auto, from) = match resume {
                Some(c) => (Auto::resume(model, cfg, c.snapshot, start)?, Some(c.filter)),
                None => (Auto::new(model, cfg, start), None),
            };
            drive(&mut auto, &m, from, &drive_options(a))
        }
    }
}

fn report(
    run: Run,
    a: &FilterArgs,
    exact: Option<(f64, Vec<f64>)>,
    labels: Vec<String>,
    y: &[f64],
) -> anyhow::Result<()> {
    let r = &run.result;
    if !a.quiet {
        println!(
            "{:>6} {:>10} {:>12} {:>12}",
            "t", "observed", "filtered", "exact"
        );
        for (i, mean) in r.filtered_means.iter().enumerate() {
            let ex = exact
                .as_ref()
                .map_or(String::new(), |e| format!("{:.2}", e.1[i]));
            println!("{:>6} {:>10.2} {:>12.2} {:>12}", labels[i], y[i], mean, ex);
        }
        println!();
        if let Some(stats) = &run.stats {
            println!("{}", stats.table());
        }
    }
    // One island gives no spread to measure the error by.
    let se = if r.loglik_se.is_finite() {
        format!(" ± {:.3}", r.loglik_se)
    } else {
        String::new()
    };
    let place = match (&run.stats, &run.decision) {
        (Some(stats), _) => format!("{} workers", stats.workers.len()),
        (None, Some(d)) => format!(
            "in process, {} thread{}",
            d.threads,
            if d.threads == 1 { "" } else { "s" }
        ),
        (None, None) => "in process".to_string(),
    };
    println!(
        "log-likelihood {:.3}{se} (particle filter, {} particles in {} island{}, {place})",
        r.loglik,
        r.particles,
        r.island_logliks.len(),
        if r.island_logliks.len() == 1 { "" } else { "s" },
    );
    if let Some((ll, _)) = &exact {
        if r.loglik_se.is_finite() {
            println!(
                "log-likelihood {:.3} (exact, Kalman filter): difference {:.2} standard errors",
                ll,
                (r.loglik - ll) / r.loglik_se
            );
        } else {
            println!(
                "log-likelihood {:.3} (exact, Kalman filter): difference {:.3} (a standard \
                 error needs --islands 2 or more)",
                ll,
                r.loglik - ll
            );
        }
    }
    let lost = run.stats.as_ref().map_or(0, Stats::lost_workers);
    if lost > 0 {
        println!(
            "{lost} worker(s) lost and recovered from; the result is what a run without the loss gives"
        );
    }
    let left = run.stats.as_ref().map_or(0, Stats::left_workers);
    if left > 0 {
        println!(
            "{left} worker(s) asked to leave (SIGTERM) and left, their states moved to the \
             others; nothing was lost"
        );
    }
    let rollbacks = run.stats.as_ref().map_or(0, |s| s.rollbacks);
    if rollbacks > 0 {
        println!(
            "{rollbacks} rollback(s) to a checkpoint after losing every copy of some states; \
             the result is what a run without the loss gives"
        );
    }
    match &run.stats {
        Some(stats) => println!(
            "wall {:.3} s, efficiency {:.1}%",
            run.wall.as_secs_f64(),
            stats.efficiency() * 100.0
        ),
        None => println!("wall {:.3} s", run.wall.as_secs_f64()),
    }
    if let Some(path) = &a.json {
        let j = serde_json::json!({
            "loglik": r.loglik,
            "loglik_se": r.loglik_se,
            "exact_loglik": exact.as_ref().map(|e| e.0),
            "filtered_means": r.filtered_means,
            "particles": r.particles,
            "engine": if run.stats.is_some() { "workers" } else { "in-process" },
            "workers": run.stats.as_ref().map_or(0, |s| s.workers.len()),
            "threads": run.decision.as_ref().map(|d| d.threads),
            "per_call_us": run.decision.as_ref().map(|d| d.per_call.as_secs_f64() * 1e6),
            "wall_s": run.wall.as_secs_f64(),
            "efficiency": run.stats.as_ref().map(Stats::efficiency),
            "lost_workers": lost,
            "left_workers": left,
            "rollbacks": rollbacks,
        });
        // Whole or not at all: a reader never sees half of it.
        let text = serde_json::to_string_pretty(&j)? + "\n";
        statepipe_sys::durable::write_atomic(path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
