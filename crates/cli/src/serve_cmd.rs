//! `statepipe serve`: the durable HTTP item service (crates/serve).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use statepipe_serve::{Config, Server};

/// `statepipe serve --listen ADDR --data DIR [--max-connections N] [--snapshot-every N]
/// [--idle-timeout SECONDS]`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port; the bound address
    /// is printed on stdout as `listening on ADDR`).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
    /// The data directory: journal and snapshot (created if missing).
    #[arg(long)]
    data: PathBuf,
    /// Open connections at most; newcomers get 503.
    #[arg(long, default_value_t = 10_000)]
    max_connections: usize,
    /// Writes between snapshots (each restarts the journal).
    #[arg(long, default_value_t = 100_000)]
    snapshot_every: u64,
    /// Slots on the ring (a power of two): requests in flight at most; a
    /// request that finds it full is answered 429 at once.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    ring_capacity: usize,
    /// Seconds a keep-alive connection may sit idle before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    idle_timeout: u64,
    /// The nice value (0-19) of the ring's handlers. By default 10 when the
    /// process has one usable CPU, so the I/O threads answer (or refuse
    /// with 429) first and the pipeline takes what they leave; 0 otherwise.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..=19))]
    pipeline_nice: Option<i32>,
}

/// Serves until SIGINT or SIGTERM, then drains, fsyncs and returns.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = Config::new(args.listen, args.data);
    config.max_connections = args.max_connections;
    config.snapshot_every = args.snapshot_every;
    anyhow::ensure!(
        args.ring_capacity.is_power_of_two(),
        "--ring-capacity must be a power of two, not {}",
        args.ring_capacity
    );
    config.ring_capacity = args.ring_capacity;
    config.idle_timeout = std::time::Duration::from_secs(args.idle_timeout);
    config.pipeline_nice = args.pipeline_nice;
    let server = Server::bind(config).context("starting the service")?;
    let stop = server.shutdown_handle();
    ctrlc::set_handler(move || stop.shutdown()).context("installing the signal handler")?;
    println!(
        "listening on {} ({} items recovered)",
        server.local_addr()?,
        server.items()
    );
    server.run().context("serving")?;
    Ok(())
}
