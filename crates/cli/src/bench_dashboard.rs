//! `statepipe bench dashboard`: what a dashboard with a browser attached
//! costs a run. Each case runs the same command with the dashboard off
//! and on, interleaved (each round starts with the other one); with it
//! on, a client reads `/api/stream` for the whole run, as an open page
//! does. The figure is the run's own time as the command prints it (the
//! filter's wall time for `pf`, the items' for `run`), so process start
//! and the model's set-up are left out.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use statepipe_bench::host;
use statepipe_bench::report::{table, Report};

use crate::bench_pf::row;

/// Options of `statepipe bench dashboard`.
#[derive(Args, Debug)]
pub struct DashboardBenchArgs {
    /// Rounds of samples (each runs every case off and on).
    #[arg(long, default_value_t = 7, value_parser = crate::arg_values::at_least_one::<u16>)]
    pub samples: u16,
    /// Cases: `pf` (the pharmacokinetic model's filter on worker
    /// processes, where workers pay) and `pipeline` (`statepipe run
    /// sharded` in one process).
    #[arg(long, value_delimiter = ',', default_value = "pf,pipeline")]
    pub case: Vec<String>,
    /// Particles of the `pf` case.
    #[arg(long, default_value_t = 2_000)]
    pub particles: usize,
    /// Worker processes of the `pf` case (default: the CPUs this process
    /// may use).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Items of the `pipeline` case.
    #[arg(long, default_value_t = 2_000_000)]
    pub items: u64,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
}

/// A client that reads a dashboard's stream until told to stop, counting
/// the snapshots it got.
struct Watcher {
    stop: Arc<AtomicBool>,
    events: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl Watcher {
    fn attach(url: &str) -> anyhow::Result<Watcher> {
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let mut s = TcpStream::connect(&addr).with_context(|| format!("connecting to {addr}"))?;
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
        s.write_all(b"GET /api/stream HTTP/1.1\r\nhost: bench\r\n\r\n")?;
        let stop = Arc::new(AtomicBool::new(false));
        let events = Arc::new(AtomicU64::new(0));
        let (stop2, events2) = (Arc::clone(&stop), Arc::clone(&events));
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while !stop2.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let k = buf[..n].windows(6).filter(|w| w == b"data: ").count();
                        events2.fetch_add(k as u64, Ordering::Relaxed);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
            }
        });
        Ok(Watcher {
            stop,
            events,
            thread,
        })
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        self.events.load(Ordering::Relaxed)
    }
}

/// Runs `statepipe ARGS` (with `--dashboard 127.0.0.1:0` and a stream
/// reader when `on`) and returns its stdout, and the snapshots read.
fn run_once(args: &[String], on: bool) -> anyhow::Result<(String, u64)> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(args);
    if on {
        cmd.args(["--dashboard", "127.0.0.1:0"]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting statepipe")?;
    let stderr = child.stderr.take().expect("piped");
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let errs = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(url) = line.strip_prefix("dashboard: http://") {
                let _ = url_tx.send(format!("http://{url}"));
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let watcher = if on {
        let url = url_rx
            .recv_timeout(Duration::from_secs(60))
            .context("the command printed no dashboard URL")?;
        Some(Watcher::attach(&url)?)
    } else {
        None
    };
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut out)?;
    let status = child.wait()?;
    let events = watcher.map_or(0, Watcher::finish);
    let errs = errs.join().unwrap_or_default();
    anyhow::ensure!(
        status.success(),
        "statepipe {args:?} failed ({status}):\n{errs}"
    );
    Ok((out, events))
}

/// The number before `suffix` on the first line of `out` holding `key`.
fn figure(out: &str, key: &str, suffix: &str) -> anyhow::Result<f64> {
    let line = out
        .lines()
        .find(|l| l.contains(key))
        .with_context(|| format!("no line with {key:?} in:\n{out}"))?;
    let at = line[line.find(key).expect("found") + key.len()..].trim_start();
    let num = at.split(suffix).next().unwrap_or("").trim();
    num.parse()
        .with_context(|| format!("no number after {key:?} in {line:?}"))
}

/// `statepipe bench dashboard`.
pub fn run(a: &DashboardBenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let host = host::measure(Duration::from_millis(200));
    println!("{}", host.describe());
    let workers = a
        .workers
        .unwrap_or_else(|| statepipe_sys::cpus::usable_cpus().count.max(1));
    let mut cases: Vec<(String, Vec<String>, &str, &str)> = Vec::new();
    for c in &a.case {
        match c.as_str() {
            "pf" => cases.push((
                format!("pf pk/{} on {workers} workers", a.particles),
                [
                    "pf",
                    "--engine",
                    "workers",
                    "--model",
                    "pk",
                    "--quiet",
                    "--workers",
                    &workers.to_string(),
                    "--particles",
                    &a.particles.to_string(),
                ]
                .map(str::to_owned)
                .to_vec(),
                "wall ",
                " s",
            )),
            "pipeline" => cases.push((
                format!("run sharded/{} items", a.items),
                ["run", "sharded", "--items", &a.items.to_string()]
                    .map(str::to_owned)
                    .to_vec(),
                "inputs in ",
                " s",
            )),
            other => anyhow::bail!("--case {other}: the cases are pf and pipeline"),
        }
    }
    println!(
        "each case with the dashboard off and on (a client reading /api/stream throughout); \
         {} rounds, interleaved",
        a.samples
    );
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    for (name, args, key, suffix) in &cases {
        // A warm-up of each, not counted.
        run_once(args, false)?;
        run_once(args, true)?;
        let (mut off, mut on) = (Vec::new(), Vec::new());
        let mut read = 0;
        for round in 0..a.samples {
            for first in [round % 2 == 0, round % 2 != 0] {
                let (out, events) = run_once(args, first)?;
                let s = figure(&out, key, suffix)?;
                if first {
                    on.push(s);
                    read += events;
                } else {
                    off.push(s);
                }
            }
        }
        rows.push(row(
            name,
            "statepipe",
            "dashboard on, a stream client reading",
            "s",
            &on,
        ));
        rows.push(row(
            name,
            "statepipe, dashboard off",
            "no --dashboard",
            "s",
            &off,
        ));
        let med = |v: &[f64]| statepipe_bench::stats::Summary::of(v).map_or(f64::NAN, |s| s.median);
        let ratio = med(&on) / med(&off);
        checks.push(format!(
            "{name}: on/off {ratio:.3} (target ≤ 1.01: {}); the client read {read} snapshots",
            if ratio <= 1.01 { "met" } else { "NOT met" }
        ));
    }
    let report = Report::new("dashboard", &host, rows);
    print!("{}", table::render(&report));
    for c in &checks {
        println!("{c}");
    }
    println!("(run took {:.1} s)", started.elapsed().as_secs_f64());
    if let Some(p) = &a.json {
        std::fs::write(p, report.to_json() + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::figure;

    #[test]
    fn figures_are_read_from_the_commands_lines() {
        let out = "x\nwall 1.250 s, efficiency 90.0%\n";
        assert_eq!(figure(out, "wall ", " s").unwrap(), 1.25);
        let out = "200 outputs from 200 inputs in 0.512 s: 0.4 M items/s\n";
        assert_eq!(figure(out, "inputs in ", " s").unwrap(), 0.512);
        assert!(figure("nothing", "wall ", " s").is_err());
    }
}
