//! `statepipe`: the command line of the statepipe project.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod apps_cmd;
mod arg_values;
mod bench_cluster_targets;
mod bench_cmd;
mod bench_common;
mod bench_dashboard;
mod bench_elastic;
mod bench_pf;
mod bench_pf_targets;
mod bench_report;
mod bench_serve;
mod bench_serve_extras;
mod bench_serve_targets;
mod cluster_args;
mod cluster_ckpt;
mod cluster_cmd;
mod cluster_drive;
mod dashboard_cmd;
mod demos;
mod health;
mod netns_cmd;
mod one_route;
mod pipeline_cmd;
mod remote_cmd;
mod remote_metrics;
mod serve_cmd;
mod worker_cmd;

use clap::{Parser, Subcommand};

/// mimalloc rather than the C library's allocator: a run of cheap evolve
/// calls allocates a few small vectors per call and frees them in bulk on
/// another thread, the pattern glibc's malloc is slowest at (its slow paths
/// were about 30 % of `statepipe pf`'s instructions; see
/// bench/results/inprocess-run2). Built without its transparent huge
/// pages (`no_thp`): it would advise them for every region it maps, and
/// the first touch of each would zero 2 MB, starting before `main` (6 % of
/// a 2,000-particle `statepipe pf`, bench/results/pf-run8).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Stateful computation in parallel, from one core to a cluster.
#[derive(Parser, Debug)]
#[command(name = "statepipe", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a benchmark side by side with its peers.
    Bench(bench_cmd::BenchArgs),
    /// Deploy an example pipeline on workers and rings; --watch shows its
    /// per-stage metrics live, --svg draws the deployed graph.
    Run(pipeline_cmd::RunArgs),
    /// Calibrate example pipelines, predict each plan's throughput and
    /// bottleneck with the cost simulator, then measure it.
    Plan(pipeline_cmd::PlanArgs),
    /// Join a distributed pipeline run (`statepipe run EXAMPLE
    /// --coordinator ADDR`) and run the parts it gives. SIGTERM asks to
    /// leave: it exits 0 once its parts run on the other members; a second
    /// SIGTERM ends it at once (143), recovered as a crash.
    Member(remote_cmd::MemberArgs),
    /// Serve items over HTTP, durably, on the ring.
    Serve(serve_cmd::ServeArgs),
    #[command(flatten)]
    Cluster(cluster_cmd::Command),
    /// Write the Benchmarks Game's fasta output for N to stdout.
    Fasta(apps_cmd::FastaArgs),
    /// Benchmarks Game k-nucleotide: FASTA on stdin, the `>THREE` sequence's
    /// 1- and 2-mer frequencies and five k-mer counts on stdout.
    Knucleotide(apps_cmd::KnucleotideArgs),
    /// Graph500 BFS: Kronecker graph, CSR (kernel 1), validated searches
    /// (kernel 2), the specification's output block.
    Graph500(apps_cmd::Graph500Args),
    /// A master driving the `sleep` model (for measuring a network).
    #[command(hide = true)]
    SleepMaster(netns_cmd::SleepArgs),
}

fn main() -> anyhow::Result<()> {
    // `statepipe pf`: most runs are short, and where the system gives
    // every region transparent huge pages, the first touch of each zeroes
    // 2 MB (a sixth of a 2,000-particle run's time). First thing, before
    // the parser allocates; its workers inherit the setting.
    if std::env::args_os().nth(1).is_some_and(|a| a == "pf") {
        let _ = nix::sys::prctl::set_thp_disable(true);
    }
    init_tracing();
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench_cmd::run(args),
        Command::Run(args) => match args.coordinator.clone() {
            Some(addr) => remote_cmd::coordinate(&args, &addr),
            None => pipeline_cmd::run(args),
        },
        Command::Plan(args) => pipeline_cmd::plan(args),
        Command::Member(args) => remote_cmd::member(args),
        Command::Cluster(cmd) => cluster_cmd::run(cmd),
        Command::Serve(args) => serve_cmd::run(args),
        Command::Fasta(args) => apps_cmd::run_fasta(&args),
        Command::Knucleotide(args) => apps_cmd::run_knucleotide(&args),
        Command::Graph500(args) => apps_cmd::run_graph500(&args),
        Command::SleepMaster(args) => netns_cmd::run(&args),
    }
}

/// Logs go to stderr, `RUST_LOG` filters them (default: warnings).
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// On Ctrl-C or SIGTERM: SIGKILL every worker process this process started,
/// then exit 130. Installing twice is harmless (the second call does nothing).
fn kill_workers_on_signal() {
    let _ = ctrlc::set_handler(|| {
        statepipe_cluster::kill_spawned_workers();
        std::process::exit(130);
    });
}
