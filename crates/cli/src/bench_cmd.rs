//! `statepipe bench ...`: benchmarks of statepipe side by side with its peers.
//!
//! Every subcommand follows the same steps, so that `bench pipeline` and `bench cluster`
//! only add a [`BenchWhich`] variant and a function building their report:
//! measure the host and print it, run the groups (progress on stderr), print the table
//! on stdout, write `--json` and `--svg` when asked.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, Subcommand};
use statepipe_bench::cluster::{self, ClusterOptions};
use statepipe_bench::harness::SampleDone;
use statepipe_bench::host;
use statepipe_bench::pipeline::{self, PipelineOptions, Setup};
use statepipe_bench::report::{table, Report};

use crate::bench_common::{finish, measure_host, write, CommonArgs};
use statepipe_bench::ring::{self, RingOptions};
use statepipe_bench::sizing::{self, SizingOptions};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub which: BenchWhich,
}

#[derive(Subcommand, Debug)]
pub enum BenchWhich {
    /// The Disruptor ring against the `disruptor` crate, rtrb, crossbeam-channel and
    /// std::sync::mpsc, on every topology, plus oversubscription and one-hop latency.
    Ring(RingArgs),
    /// Pipelines of state machines against threads and channels, tokio and
    /// tracing-appender: laundry, thread-ring, message-ring, trivial3, scaling, fan-out,
    /// logger, sizing (the Go thread-ring runs separately: bench/go/run.sh); a
    /// distributed run's member leaving (`remote-leave`) and joining (`remote-join`).
    Pipeline(PipelineArgs),
    /// One CPU-bound pipeline inside a real cgroup with a 1-CPU quota: statepipe sized
    /// by the quota, statepipe forced to the host's CPUs, workers that spin, tokio
    /// (needs permission to create a cgroup; skips, saying why, without it).
    Sizing(SizingArgs),
    /// Runs one `bench sizing` contender and prints its result as JSON (the child
    /// process `bench sizing` starts inside the cgroup).
    #[command(hide = true)]
    SizingChild {
        /// The request, as JSON.
        request: String,
    },
    /// Plays one end of a `bench pipeline` remote sample and prints its result as
    /// JSON (the child processes of the `remote/*` cases).
    #[command(hide = true)]
    RemoteChild {
        /// The request, as JSON.
        request: String,
    },
    /// The distributed evolve engine's two masters: efficiency against workers (workers
    /// that sleep, so hundreds fit on two cores), steal routes, batch round trips.
    Cluster(ClusterArgs),
    /// Graph500 BFS and k-nucleotide against rayon and plain-threads peers.
    Apps(AppsArgs),
    /// The recorded runs (bench/results/RUN/): writes their index
    /// (bench/results/README.md, docs/src/performance/runs.md, tables/RUN.md); with
    /// --check, checks the docs' figures and links against them.
    Report(crate::bench_report::ReportArgs),
    /// The Python package against Dask, Ray and `particles` (python/bench/):
    /// sets up target/bench-pyenv (peers from PyPI) and runs
    /// bench_python.py with the arguments after `--`.
    Python(PythonArgs),
    /// The Nile particle filter in process against `particles` (numpy)
    /// and a hand-written loop with no engine, in ns per particle-step,
    /// on one thread and on all.
    Pf(crate::bench_pf::PfBenchArgs),
    /// `statepipe serve` against axum and actix-web peers with the same
    /// durability, under wrk (and h2load or oha for open-loop overload),
    /// the servers pinned to k CPUs (`--server-cpus`) and the load
    /// generator to the others.
    Serve(crate::bench_serve::ServeBenchArgs),
    /// What a dashboard with a browser attached costs: `statepipe pf` on
    /// workers and `statepipe run` with `--dashboard` off and on, a client
    /// reading its stream, interleaved.
    Dashboard(crate::bench_dashboard::DashboardBenchArgs),
}

/// Options of `statepipe bench python`.
#[derive(Args, Debug)]
pub struct PythonArgs {
    /// Arguments of python/bench/bench_python.py (e.g. `-- --workers 10,50 --out DIR`).
    #[arg(last = true)]
    pub args: Vec<String>,
}

/// Options of `statepipe bench apps`.
#[derive(Args, Debug)]
pub struct AppsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Run only what the comma-separated FILTERs name: the groups whose
    /// name contains one (`graph500/`, `graph500-run`, `knucleotide`,
    /// `host`), or single contenders by `group imp config` (e.g.
    /// `graph500-run/scale24 statepipe edges=file`).
    #[arg(long = "case", value_name = "FILTER")]
    pub case: Option<String>,
    /// The Graph500 scale (default 20; 16 with --quick).
    #[arg(long)]
    pub scale: Option<u32>,
    /// The Graph500 roots a sample searches from (default 16; 8 with --quick).
    #[arg(long)]
    pub roots: Option<usize>,
    /// Another build of statepipe to run beside this one in the
    /// `graph500-run` group (as `baseline`): an A/B comparison of whole
    /// runs, interleaved.
    #[arg(long, value_name = "EXE")]
    pub baseline: Option<std::path::PathBuf>,
}

#[derive(Args, Debug)]
pub struct RingArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Run only the cases whose name contains FILTER (e.g. `1p1c`, `latency`, `/batch`).
    #[arg(long = "case", value_name = "FILTER")]
    pub case: Option<String>,
    /// Do not pin threads to CPUs, even where a case's threads fit one per CPU.
    #[arg(long)]
    pub no_pin: bool,
}

#[derive(Args, Debug)]
pub struct PipelineArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Run only the cases whose name contains FILTER (e.g. `laundry`, `logger/10p`,
    /// `checkpoint`); a case measured together with others (scaling, fan-out, sizing,
    /// a checkpoint case's stalls) brings them along.
    #[arg(long = "case", value_name = "FILTER")]
    pub case: Option<String>,
    /// Pin statepipe's workers to CPUs (the library's default) while the peers stay
    /// OS-scheduled; the config line then says the rows are not pinned alike. Off by
    /// default: no contender is pinned.
    #[arg(long)]
    pub pin: bool,
}

/// Options of `statepipe bench cluster` (the workload's, and the output files).
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Worker counts of the `evolve` cases (`0` alone: none).
    #[arg(long, value_delimiter = ',', default_value = "17,50,100,200,450")]
    pub workers: Vec<usize>,
    /// Cost of a normal call in milliseconds (the tail is 10×).
    #[arg(long, default_value_t = 30.0)]
    pub cost_ms: f64,
    /// States per step.
    #[arg(long, default_value_t = 2000)]
    pub states: usize,
    /// Steps per sample.
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Samples per case and contender.
    #[arg(long, default_value_t = 3, value_parser = crate::arg_values::at_least_one::<u16>)]
    pub samples: u16,
    /// Short run: 3 ms calls, 5 steps, one sample.
    #[arg(long)]
    pub quick: bool,
    /// Also run the event-loop master with the cost hints ignored.
    #[arg(long)]
    pub blind: bool,
    /// Workers of the steal-route comparison (0: skip it).
    #[arg(long, default_value_t = 100)]
    pub steal_workers: usize,
    /// States of this many KiB in the steal-route comparison (0: 8 bytes).
    #[arg(long, default_value_t = 0)]
    pub state_kib: usize,
    /// Skip the `roundtrips/200` case.
    #[arg(long)]
    pub no_roundtrips: bool,
    /// Also run the `faults` case: kill 5% of this many workers once each
    /// at random moments, against the same run with none killed.
    #[arg(long, value_name = "WORKERS", num_args = 0..=1, default_missing_value = "200")]
    pub faults: Option<usize>,
    /// With `--faults`: also 10% of the workers killed, in both recovery
    /// modes, and chaos schedules (clusters of one or two neighbouring
    /// workers killed or stopped at one moment, some at the end of the
    /// run). Every faulty run must end with the bits of the runs without.
    #[arg(long, requires = "faults")]
    pub chaos: bool,
    /// Also run the `checkpoint` case: the run without checkpoints, with
    /// one after every step and with one every 10 steps (the default of
    /// `--every`), on this many workers.
    #[arg(long, value_name = "WORKERS", num_args = 0..=1, default_missing_value = "450")]
    pub checkpoint: Option<usize>,
    /// Also run the `copies` cases: the master's copies, buddy replicas
    /// and recovery off, with states of each of these sizes (KiB), on
    /// `--copy-workers`.
    #[arg(long, value_delimiter = ',')]
    pub copy_kib: Vec<usize>,
    /// Workers of the `copies` cases.
    #[arg(long, default_value_t = 50)]
    pub copy_workers: usize,
    /// With `--faults`: also write each faults sample's step times to
    /// FILE, a line per sample as it ends: case, contender, sample, each
    /// step's wall time in ms, and the signals sent (`step:worker`, `K`
    /// SIGKILL or `S` SIGSTOP, `@` ms into the step).
    #[arg(long, value_name = "FILE", requires = "faults")]
    pub step_log: Option<PathBuf>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the efficiency-against-workers plot as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct SizingArgs {
    #[command(flatten)]
    pub common: CommonArgs,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.which {
        BenchWhich::Ring(args) => run_ring(args),
        BenchWhich::Pipeline(args) => run_pipeline(args),
        BenchWhich::Sizing(args) => run_sizing(args),
        BenchWhich::SizingChild { request } => {
            println!("{}", sizing::child_main(&request)?);
            Ok(())
        }
        BenchWhich::RemoteChild { request } => {
            println!("{}", pipeline::remote::child::child_main(&request)?);
            Ok(())
        }
        BenchWhich::Cluster(args) => run_cluster(&args),
        BenchWhich::Apps(args) => run_apps(&args),
        BenchWhich::Python(args) => run_python(&args),
        BenchWhich::Serve(args) => crate::bench_serve::run(args),
        BenchWhich::Pf(args) => crate::bench_pf::run(&args),
        BenchWhich::Dashboard(args) => crate::bench_dashboard::run(&args),
        BenchWhich::Report(args) => crate::bench_report::run(&args),
    }
}

/// `statepipe bench python`: the Python benchmark is a Python script; this
/// prepares its environment and runs it from the repository's root.
fn run_python(a: &PythonArgs) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = |cmd: &mut std::process::Command, what: &str| -> anyhow::Result<()> {
        let st = cmd
            .current_dir(&root)
            .status()
            .with_context(|| format!("cannot run {what}"))?;
        anyhow::ensure!(st.success(), "{what} failed ({st})");
        Ok(())
    };
    status(
        std::process::Command::new("bash").arg("python/bench/setup.sh"),
        "python/bench/setup.sh",
    )?;
    status(
        std::process::Command::new("target/bench-pyenv/bin/python")
            .arg("python/bench/bench_python.py")
            .args(&a.args),
        "python/bench/bench_python.py",
    )
}

/// `statepipe bench cluster`: measures the host, runs, prints the table,
/// writes `--json` (the shared shape) and `--svg`.
fn run_cluster(a: &ClusterArgs) -> anyhow::Result<()> {
    crate::kill_workers_on_signal();
    let started = Instant::now();
    let host = host::measure(Duration::from_millis(if a.quick { 100 } else { 300 }));
    println!("{}", host.describe());
    let options = ClusterOptions {
        workers: a.workers.clone(),
        cost_ms: a.cost_ms,
        states: a.states,
        steps: a.steps,
        samples: a.samples.into(),
        quick: a.quick,
        blind: a.blind,
        steal_workers: a.steal_workers,
        state_kib: a.state_kib,
        no_roundtrips: a.no_roundtrips,
        fault_workers: a.faults.unwrap_or(0),
        chaos: a.chaos,
        checkpoint_workers: a.checkpoint.unwrap_or(0),
        copy_kib: a.copy_kib.clone(),
        copy_workers: a.copy_workers,
        step_log: a.step_log.clone(),
        ..ClusterOptions::new(crate::worker_cmd::worker_command()?)
    };
    println!("{}\n", options.describe());
    let (rows, series) =
        cluster::run(&options, &mut print_progress).context("bench cluster failed")?;
    let report = Report::new("cluster", &host, rows);
    print!("{}", table::render(&report));
    print!("{}", crate::bench_cluster_targets::targets(&report.results));
    println!("(run took {:.1} s)", started.elapsed().as_secs_f64());
    if let Some(p) = &a.json {
        write(p, &(report.to_json() + "\n"))?;
    }
    if let Some(p) = &a.svg {
        let title = "statepipe bench cluster: efficiency against workers";
        write(p, &cluster::efficiency_svg(title, &series))?;
    }
    Ok(())
}

fn run_apps(args: &AppsArgs) -> anyhow::Result<()> {
    use statepipe_bench::apps;
    let host = measure_host(&args.common);
    let mut options = apps::AppsOptions::new(args.common.quick, args.common.samples.into());
    options.scale = args.scale.unwrap_or(options.scale);
    options.roots = args.roots.unwrap_or(options.roots);
    options.filter = args.case.clone();
    options.baseline = args.baseline.clone();
    options.statepipe = Some(std::env::current_exe().context("finding this executable")?);
    println!("{}\n", apps::describe(&options));
    let started = Instant::now();
    let report = apps::run(&options, &host, &mut print_progress).context("bench apps failed")?;
    finish(&report, &args.common, started, &apps::scaling(&report))
}

fn run_ring(args: RingArgs) -> anyhow::Result<()> {
    let host = measure_host(&args.common);
    let options = RingOptions {
        quick: args.common.quick,
        samples: args.common.samples.into(),
        pin: !args.no_pin,
        filter: args.case,
    };
    println!("{}", ring::describe(&options, &host));
    println!();
    let started = Instant::now();
    let report = ring::run(&options, &host, &mut print_progress).context("bench ring failed")?;
    finish(&report, &args.common, started, "")
}

fn run_pipeline(args: PipelineArgs) -> anyhow::Result<()> {
    let host = measure_host(&args.common);
    let options = PipelineOptions {
        quick: args.common.quick,
        samples: args.common.samples.into(),
        pin: args.pin,
        filter: args.case,
        remote_child: Some(vec![
            std::env::current_exe()
                .context("finding this executable")?
                .into(),
            "bench".into(),
            "remote-child".into(),
        ]),
    };
    let filter = options.filter.clone();
    // `remote-leave` and `remote-join` alone: none of the other cases.
    let elastic_only = filter.as_deref().is_some_and(|f| {
        !pipeline::case_names().iter().any(|c| c.contains(f))
            && crate::bench_elastic::CASES.iter().any(|c| c.contains(f))
    });
    if !elastic_only {
        let started = Instant::now();
        let setup = Setup::new(&options);
        println!("{}", pipeline::describe(&setup, &host));
        println!();
        let report =
            pipeline::run(&setup, &host, &mut print_progress).context("bench pipeline failed")?;
        finish(
            &report,
            &args.common,
            started,
            &pipeline::targets::summary(&report),
        )?;
    }
    crate::bench_elastic::run(filter.as_deref(), args.common.quick)
}

fn run_sizing(args: SizingArgs) -> anyhow::Result<()> {
    let host = measure_host(&args.common);
    let options = SizingOptions {
        quick: args.common.quick,
        samples: args.common.samples.into(),
        child: vec![
            std::env::current_exe()
                .context("finding this executable")?
                .into(),
            "bench".into(),
            "sizing-child".into(),
        ],
    };
    let started = Instant::now();
    let setup = match sizing::Setup::new(&options) {
        Ok(setup) => setup,
        Err(e) => {
            println!("sizing: skipped: cannot create a cgroup with a CPU quota here: {e}");
            return Ok(());
        }
    };
    println!("{}", setup.describe());
    let probes = setup.probe().context("bench sizing failed")?;
    for (runner, probe) in &probes {
        println!(
            "sizing: in the cgroup, {runner:?} ran {} worker(s); it saw: {}",
            probe.workers, probe.cpus
        );
    }
    println!();
    let report = setup
        .run(&host, &probes, &mut print_progress)
        .context("bench sizing failed")?;
    finish(&report, &args.common, started, &sizing::summary(&report))
}

fn print_progress(done: &SampleDone<'_>) {
    eprintln!("{done}");
}
