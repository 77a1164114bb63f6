//! `statepipe`: the command line of the statepipe project.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod bench_cmd;
mod cluster_cmd;
mod demos;
mod pipeline_cmd;

use clap::{Parser, Subcommand};

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
    #[command(flatten)]
    Cluster(cluster_cmd::ClusterCommand),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench(args) => bench_cmd::run(args),
        Command::Run(args) => pipeline_cmd::run(args),
        Command::Plan(args) => pipeline_cmd::plan(args),
        Command::Cluster(cmd) => cluster_cmd::run(cmd),
    }
}
