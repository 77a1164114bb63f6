//! `statepipe pf | worker | master`: the distributed evolve engine's
//! commands, defined in `statepipe-cluster` so that crate's tests can run
//! them as real processes.

pub use statepipe_cluster::cmd::Command as ClusterCommand;

pub fn run(cmd: ClusterCommand) -> anyhow::Result<()> {
    statepipe_cluster::cmd::run(cmd)
}
