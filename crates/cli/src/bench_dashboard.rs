//! `statepipe bench dashboard`: what a dashboard with a browser attached
//! costs a run. Each case runs the same command with the dashboard off
//! and on, interleaved (each round starts with the other one); with it
//! on, a client reads `/api/stream` for the whole run, as an open page
//! does. The figure is the run's own time as the command prints it (the
//! filter's wall time for `pf`, the items' for `run`), so process start
//! and the model's set-up are left out.
//!
//! The `pf-stalled` case attaches a client that asks for the stream and
//! then never reads, for the whole run (over a minute), and samples the
//! process's resident memory in both modes: the run's time and its peak
//! memory must not notice the stalled client, which the dashboard cuts
//! off once its socket buffers are full.

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
    /// processes, where workers pay), `pf-200k` (the same at 200,000
    /// particles, 10 observations of 400 substeps: about 20 s a run on
    /// two CPUs), `pf-stalled` (40,000 particles, over a minute a run on
    /// two CPUs, with a client that never reads; peak memory compared)
    /// and `pipeline` (`statepipe run sharded` in one process).
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

/// A connection to the dashboard at `url` that has asked for its stream.
fn ask_for_stream(url: &str) -> anyhow::Result<TcpStream> {
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.write_all(b"GET /api/stream HTTP/1.1\r\nhost: bench\r\n\r\n")?;
    Ok(s)
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
        let mut s = ask_for_stream(url)?;
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
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

/// A client that asks for the stream and never reads it.
struct Stalled {
    socket: TcpStream,
}

impl Stalled {
    fn attach(url: &str) -> anyhow::Result<Stalled> {
        Ok(Stalled {
            socket: ask_for_stream(url)?,
        })
    }

    /// Whether the dashboard closed the connection (read what is buffered
    /// now, up to the end or what would block).
    fn was_cut_off(mut self) -> bool {
        let _ = self.socket.set_nonblocking(true);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match self.socket.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return e.kind() != std::io::ErrorKind::WouldBlock,
            }
        }
    }
}

/// Which client a run with the dashboard on has.
#[derive(Clone, Copy, PartialEq)]
enum Client {
    /// Reads the stream throughout, as an open page does.
    Reading,
    /// Asks for the stream and never reads.
    Stalled,
}

/// What one run gave: its stdout, snapshots read, the process's peak
/// resident memory as sampled (bytes), and whether a stalled client was
/// cut off.
struct Run {
    out: String,
    events: u64,
    peak_rss: u64,
    cut_off: bool,
}

/// The resident memory of process `pid` now (bytes; 0 once it is gone).
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Runs `statepipe ARGS` (with `--dashboard 127.0.0.1:0` and `client`
/// when it is given) and returns what it gave.
fn run_once(args: &[String], client: Option<Client>) -> anyhow::Result<Run> {
    let on = client.is_some();
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
    // Peak resident memory, sampled every 50 ms until the process ends.
    let (pid, done) = (child.id(), Arc::new(AtomicBool::new(false)));
    let sampler = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(rss(pid));
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        })
    };
    let (mut watcher, mut stalled) = (None, None);
    if let Some(client) = client {
        let url = url_rx
            .recv_timeout(Duration::from_secs(60))
            .context("the command printed no dashboard URL")?;
        match client {
            Client::Reading => watcher = Some(Watcher::attach(&url)?),
            Client::Stalled => stalled = Some(Stalled::attach(&url)?),
        }
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("piped")
        .read_to_string(&mut out)?;
    let status = child.wait()?;
    done.store(true, Ordering::Relaxed);
    let peak_rss = sampler.join().unwrap_or(0);
    let events = watcher.map_or(0, Watcher::finish);
    let cut_off = stalled.is_some_and(Stalled::was_cut_off);
    let errs = errs.join().unwrap_or_default();
    anyhow::ensure!(
        status.success(),
        "statepipe {args:?} failed ({status}):\n{errs}"
    );
    Ok(Run {
        out,
        events,
        peak_rss,
        cut_off,
    })
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

/// The `statepipe pf` arguments of the pharmacokinetic filter on
/// `workers` workers with `particles`, and `extra` arguments.
fn pf_args(workers: usize, particles: usize, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["pf", "--engine", "workers", "--model", "pk", "--quiet"]
        .map(str::to_owned)
        .to_vec();
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v.extend([
        "--workers".to_owned(),
        workers.to_string(),
        "--particles".to_owned(),
        particles.to_string(),
    ]);
    v
}

/// One case: its name, the command, where its figure is in the output,
/// and the client of its runs with the dashboard on.
struct Case {
    name: String,
    args: Vec<String>,
    key: &'static str,
    suffix: &'static str,
    client: Client,
}

/// `statepipe bench dashboard`.
pub fn run(a: &DashboardBenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let host = host::measure(Duration::from_millis(200));
    println!("{}", host.describe());
    let workers = a
        .workers
        .unwrap_or_else(|| statepipe_sys::cpus::usable_cpus().count.max(1));
    let mut cases = Vec::new();
    for c in &a.case {
        let pf = |name: String, args: Vec<String>, client| Case {
            name,
            args,
            key: "wall ",
            suffix: " s",
            client,
        };
        cases.push(match c.as_str() {
            "pf" => pf(
                format!("pf pk/{} on {workers} workers", a.particles),
                pf_args(workers, a.particles, &[]),
                Client::Reading,
            ),
            // The size: 200,000 particles, with fewer and cheaper
            // steps so that one run takes about 20 s on two CPUs.
            "pf-200k" => pf(
                format!("pf pk/200000 (10 h, 400 substeps) on {workers} workers"),
                pf_args(
                    workers,
                    200_000,
                    &["--pk-hours", "10", "--pk-substeps", "400"],
                ),
                Client::Reading,
            ),
            // A run of over a minute on two CPUs, a client stalled for all
            // of it.
            "pf-stalled" => pf(
                format!("pf pk/40000 on {workers} workers, a stalled client"),
                pf_args(workers, 40_000, &[]),
                Client::Stalled,
            ),
            "pipeline" => Case {
                name: format!("run sharded/{} items", a.items),
                args: ["run", "sharded", "--items", &a.items.to_string()]
                    .map(str::to_owned)
                    .to_vec(),
                key: "inputs in ",
                suffix: " s",
                client: Client::Reading,
            },
            other => {
                anyhow::bail!("--case {other}: the cases are pf, pf-200k, pf-stalled and pipeline")
            }
        });
    }
    println!(
        "each case with the dashboard off and on (a client reading /api/stream throughout, \
         or one that never reads); {} rounds, interleaved",
        a.samples
    );
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    for case in &cases {
        // A warm-up of each, not counted.
        run_once(&case.args, None)?;
        run_once(&case.args, Some(case.client))?;
        let (mut off, mut on) = (Vec::new(), Vec::new());
        let (mut rss_off, mut rss_on) = (Vec::new(), Vec::new());
        let (mut read, mut cut) = (0, 0);
        for round in 0..a.samples {
            for first in [round % 2 == 0, round % 2 != 0] {
                let r = run_once(&case.args, first.then_some(case.client))?;
                let s = figure(&r.out, case.key, case.suffix)?;
                let mb = r.peak_rss as f64 / (1 << 20) as f64;
                if first {
                    on.push(s);
                    rss_on.push(mb);
                    read += r.events;
                    cut += u32::from(r.cut_off);
                } else {
                    off.push(s);
                    rss_off.push(mb);
                }
            }
        }
        let (on_label, on_config) = match case.client {
            Client::Reading => ("statepipe", "dashboard on, a stream client reading"),
            Client::Stalled => ("statepipe", "dashboard on, a client that never reads"),
        };
        rows.push(row(&case.name, on_label, on_config, "s", &on));
        rows.push(row(
            &case.name,
            "statepipe, dashboard off",
            "no --dashboard",
            "s",
            &off,
        ));
        let med = |v: &[f64]| statepipe_bench::stats::Summary::of(v).map_or(f64::NAN, |s| s.median);
        let ratio = med(&on) / med(&off);
        let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
        let name = &case.name;
        match case.client {
            Client::Reading => checks.push(format!(
                "{name}: on/off {ratio:.3} (target ≤ 1.01: {}); the client read {read} snapshots",
                verdict(ratio <= 1.01)
            )),
            Client::Stalled => {
                let grew = med(&rss_on) - med(&rss_off);
                checks.push(format!(
                    "{name}: on/off {ratio:.3} (target ≤ 1.01: {}); peak memory {:.1} MB on, \
                     {:.1} MB off (medians): {grew:+.1} MB (target < 10 MB: {}); the stalled \
                     client was cut off in {cut} of {} runs",
                    verdict(ratio <= 1.01),
                    med(&rss_on),
                    med(&rss_off),
                    verdict(grew < 10.0),
                    a.samples
                ));
            }
        }
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
