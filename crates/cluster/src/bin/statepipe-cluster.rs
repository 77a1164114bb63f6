//! Only the cluster commands (`pf`, `worker`, `master`), without the rest of
//! the `statepipe` CLI: this crate's integration tests spawn it as real
//! worker and master processes.
#![deny(unsafe_op_in_unsafe_fn)]

use clap::Parser;

#[derive(Parser)]
#[command(name = "statepipe-cluster", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: statepipe_cluster::cmd::Command,
}

fn main() -> anyhow::Result<()> {
    statepipe_cluster::cmd::run(Cli::parse().cmd)
}
