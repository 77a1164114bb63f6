//! `statepipe serve`: the durable HTTP item service (crates/serve).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use statepipe_serve::{Config, HandlerWait, Server};

/// `statepipe serve --listen ADDR --data DIR [--max-connections N] [--snapshot-every N]
/// [--journal-segment-mib N] [--ring-capacity N] [--max-queue-delay DURATION] [--io-threads N]
/// [--idle-timeout SECONDS] [--pipeline-nice N] [--handler-wait blocking|adaptive]`.
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
    #[arg(long, default_value_t = 10_000, value_parser = crate::arg_values::at_least_one::<usize>)]
    max_connections: usize,
    /// Writes between snapshots at least (each restarts the journal); a
    /// snapshot also waits for as many writes as the last one had items.
    #[arg(long, default_value_t = 100_000)]
    snapshot_every: u64,
    /// MiB of a journal segment. Segments are zero-filled and synced ahead
    /// (on a thread of their own, at the lowest priority, while the disk
    /// has room for two more), so that each group commit's fsync flushes
    /// data alone; 0: segments that grow as records are appended.
    #[arg(long, value_name = "MIB", default_value_t = 16, value_parser = clap::value_parser!(u64).range(0..=4096))]
    journal_segment_mib: u64,
    /// Slots on the ring (a power of two): writes in flight at most; a
    /// write that finds it full is answered 429 at once.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    ring_capacity: usize,
    /// Once the oldest unanswered write is older than this, and has been
    /// for as long as this, writes are answered 429 with `Retry-After` at
    /// once: a number with `us`, `ms` or `s` (`20ms`, `0.5s`). Reads are
    /// never refused.
    #[arg(long, value_name = "DURATION", default_value = "20ms", value_parser = parse_duration)]
    max_queue_delay: Duration,
    /// I/O threads (each parses, answers reads, admits writes); by default
    /// one per usable CPU.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    io_threads: Option<u16>,
    /// Seconds a keep-alive connection may sit idle before it is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    idle_timeout: u64,
    /// The nice value (0-19) of the ring's handlers; above 0 they are also
    /// SCHED_BATCH (a woken handler does not preempt an I/O thread). By
    /// default 10 when the process has one usable CPU, so the I/O threads
    /// answer (or refuse with 429) first and the pipeline takes what they
    /// leave; 0 otherwise.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(0..=19))]
    pipeline_nice: Option<i32>,
    /// How the ring's handlers wait for work: `blocking` sleeps at once (no
    /// CPU while idle, a wake-up at each hand-off to a sleeping handler);
    /// `adaptive` spins briefly and yields before it sleeps (hand-offs
    /// without wake-ups while busy, some CPU while waiting).
    #[arg(long, value_enum, default_value = "blocking")]
    handler_wait: WaitArg,
    /// Serve a live dashboard of the service at ADDR (HOST:PORT, a port of
    /// its own, loopback: 127.0.0.1:8787): requests per second by route and
    /// status, p50 and p99, refusals, journal fsyncs, connections.
    /// Read-only; the URL is printed at the start. With
    /// STATEPIPE_DASHBOARD_TOKEN set, every request must carry it.
    #[arg(long, value_name = "ADDR")]
    dashboard: Option<String>,
}

/// `--handler-wait`.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
enum WaitArg {
    Blocking,
    Adaptive,
}

/// Serves until SIGINT or SIGTERM, then drains, fsyncs and returns.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = Config::new(args.listen, args.data);
    config.max_connections = args.max_connections;
    config.snapshot_every = args.snapshot_every;
    config.journal_segment_bytes = args.journal_segment_mib << 20;
    anyhow::ensure!(
        args.ring_capacity.is_power_of_two(),
        "--ring-capacity must be a power of two, not {}",
        args.ring_capacity
    );
    config.ring_capacity = args.ring_capacity;
    config.idle_timeout = std::time::Duration::from_secs(args.idle_timeout);
    config.pipeline_nice = args.pipeline_nice;
    config.handler_wait = match args.handler_wait {
        WaitArg::Blocking => HandlerWait::Blocking,
        WaitArg::Adaptive => HandlerWait::Adaptive,
    };
    config.max_queue_delay = args.max_queue_delay;
    config.io_threads = args.io_threads.map(usize::from);
    let server = Server::bind(config).context("starting the service")?;
    // On a port of its own; serves until the service has drained.
    let _board = match &args.dashboard {
        Some(addr) => {
            let title = format!("statepipe serve {}", server.local_addr()?);
            let source = statepipe_dashboard::ServiceSource::new(server.metrics(), title);
            Some(crate::dashboard_cmd::start(
                addr,
                std::sync::Arc::new(source),
            )?)
        }
        None => None,
    };
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

/// `20ms`, `500us`, `0.5s`: a non-negative number and its unit.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(format!(
            "`{text}` has no unit: write it as 500us, 20ms or 0.5s"
        ));
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number followed by us, ms or s"))?;
    Duration::try_from_secs_f64(value * scale)
        .map_err(|_| format!("`{text}` is not a duration from 0 up"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_their_unit() {
        assert_eq!(parse_duration("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("0.5s"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("20").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("fast ms").is_err());
    }
}
