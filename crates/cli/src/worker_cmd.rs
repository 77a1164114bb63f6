//! `statepipe worker`: one worker process of the distributed evolve
//! engine, and what every worker can run.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use statepipe_cluster::pf::Bootstrap;
use statepipe_cluster::worker::{self, WorkerOptions};
use statepipe_cluster::{Error, Registry, Secret, WorkerCommand};
use statepipe_models::{Nile, Pk};

/// Every model a `statepipe worker` can run: the particle filters and the
/// cluster benchmark's.
pub fn registry() -> Registry {
    statepipe_bench::cluster::register(
        Registry::new()
            .with::<Bootstrap<Nile>>()
            .with::<Bootstrap<Pk>>(),
    )
}

/// The command that starts a local worker: this binary, `statepipe worker`.
pub fn worker_command() -> anyhow::Result<WorkerCommand> {
    Ok(WorkerCommand::current_exe()?.arg("worker"))
}

#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    /// The master's address (default: $STATEPIPE_CONNECT, as `statepipe pf`
    /// and other local launchers set it).
    #[arg(long)]
    pub connect: Option<String>,
    /// Pin the worker to this CPU.
    #[arg(long)]
    pub pin: Option<usize>,
    /// Seconds to keep trying to reach the master (it may start later).
    #[arg(long, default_value_t = 30.0, value_parser = positive_seconds)]
    pub connect_timeout_s: f64,
    /// For a launcher that starts a failed worker again in place (a
    /// Kubernetes Job with `restartPolicy: OnFailure`): a worker cut off
    /// by its master (dropped, or the master died) writes FILE before it
    /// exits non-zero; started again with FILE there, it rejoins a master
    /// that is still up, and exits 0 if none can be reached, since the run
    /// it served is over (the master's own exit says how it ended). FILE
    /// must outlive the process (a pod's `emptyDir`).
    #[arg(long, value_name = "FILE")]
    pub served_file: Option<PathBuf>,
    /// Ask the running worker with this process id to leave, as SIGTERM
    /// does (what Kubernetes sends): its states move to the other workers
    /// when the step in progress ends and it exits 0. Waits for it to exit.
    #[arg(long, value_name = "PID", conflicts_with_all = ["connect", "pin", "served_file", "health"])]
    pub drain: Option<u32>,
    /// Serve `GET /health` on HOST:PORT for a readiness probe: 200 while
    /// the worker is joined, set up and not leaving, 503 otherwise.
    #[arg(long, value_name = "HOST:PORT")]
    pub health: Option<String>,
    /// With --drain: how long to wait for the worker to exit, in seconds.
    #[arg(long, default_value_t = 120.0, value_parser = positive_seconds, requires = "drain")]
    pub drain_wait_s: f64,
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s} is not a positive number of seconds")),
    }
}

/// Runs `statepipe worker`.
///
/// # Errors
/// The worker's: the master could not be reached, refused it, cut it off,
/// or a request failed; `statepipe` prints it and exits non-zero.
pub fn run(a: WorkerArgs) -> anyhow::Result<()> {
    if let Some(pid) = a.drain {
        return drain(pid, Duration::from_secs_f64(a.drain_wait_s));
    }
    let leave = leave_on_sigterm()?;
    let ready = Arc::new(AtomicBool::new(false));
    if let Some(addr) = &a.health {
        crate::health::serve(addr, Arc::clone(&ready), Arc::clone(&leave))?;
    }
    let Some(connect) = a.connect else {
        anyhow::ensure!(
            worker::launched(),
            "give the master's address: --connect HOST:PORT (or set {})",
            worker::CONNECT_ENV
        );
        let opts = WorkerOptions {
            leave: Some(leave),
            ready: Some(ready),
            ..WorkerOptions::default()
        };
        return Ok(worker::serve_with_options(registry(), &opts)?);
    };
    // A worker started by hand says what it found (one started by `pf`
    // leaves that to its master).
    eprintln!("cpus: {}", statepipe_sys::cpus::usable_cpus());
    let opts = WorkerOptions {
        pin: a.pin,
        connect_timeout: Duration::from_secs_f64(a.connect_timeout_s),
        leave: Some(leave),
        ready: Some(ready),
        ..WorkerOptions::default()
    };
    // The record of an earlier start of this worker, if there is one.
    let record = a.served_file.as_deref();
    let served_before = record.filter(|f| f.exists());
    match (
        worker::run(&connect, &Secret::from_env()?, registry(), &opts),
        served_before,
    ) {
        (Ok(()), _) => {
            if let Some(f) = record {
                let _ = std::fs::remove_file(f);
            }
            Ok(())
        }
        (Err(Error::Connect { addr, reason }), Some(f)) => {
            eprintln!(
                "no master at {addr} ({reason}), and this worker served one before it was \
                 cut off ({} exists): that run is over, nothing left to do",
                f.display()
            );
            Ok(())
        }
        (Err(e @ Error::Disconnected { .. }), _) => {
            if let Some(f) = record {
                std::fs::write(f, format!("{connect}\n"))
                    .with_context(|| format!("{e}; and writing {} failed", f.display()))?;
            }
            Err(e.into())
        }
        (Err(e), _) => Err(e.into()),
    }
}

/// SIGTERM (how Kubernetes and every cluster manager ask a process to go)
/// sets the returned flag: the worker (or pipeline member) tells its
/// master (or coordinator), its states (or parts) move to the others, and
/// it exits 0 when it is let go. A second SIGTERM exits at once with
/// status 143, as a crash: the master recovers its states as from any
/// lost worker (the coordinator, from the last committed checkpoint).
pub(crate) fn leave_on_sigterm() -> anyhow::Result<Arc<AtomicBool>> {
    use signal_hook::consts::SIGTERM;
    let leave = Arc::new(AtomicBool::new(false));
    // Registered first, so that it sees the flag as it was before this
    // signal: only a SIGTERM after one already noted ends the process.
    signal_hook::flag::register_conditional_shutdown(SIGTERM, 143, Arc::clone(&leave))
        .context("installing the SIGTERM handler")?;
    signal_hook::flag::register(SIGTERM, Arc::clone(&leave))
        .context("installing the SIGTERM handler")?;
    Ok(leave)
}

/// `statepipe worker --drain PID`: SIGTERM to that worker, then wait for it
/// to exit.
fn drain(pid: u32, wait: Duration) -> anyhow::Result<()> {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .with_context(|| format!("no process {pid}: give the pid of a running statepipe worker"))?;
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let is_worker = args.first().is_some_and(|p| p.ends_with("statepipe"))
        && args.get(1).is_some_and(|a| a == "worker");
    anyhow::ensure!(
        is_worker,
        "process {pid} is not a statepipe worker ({}): nothing sent",
        args.join(" ")
    );
    let p = Pid::from_raw(i32::try_from(pid).context("a process id")?);
    kill(p, Signal::SIGTERM).with_context(|| format!("sending SIGTERM to {pid}"))?;
    eprintln!("asked worker {pid} to leave; waiting for it to hand its states over and exit");
    let deadline = std::time::Instant::now() + wait;
    while std::time::Instant::now() < deadline {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() || zombie(pid) {
            eprintln!("worker {pid} left");
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    anyhow::bail!(
        "worker {pid} did not exit within {} s (a step longer than that, or a master not \
         reading); it is still leaving: wait more, or SIGTERM it again to end it at once",
        wait.as_secs_f64()
    )
}

/// Whether `pid` has exited and waits for its parent to reap it.
fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}
