//! `statepipe bench serve`: finds (or installs) the load generators, builds
//! the peers if need be, runs the rounds once per server CPU set
//! (`--server-cpus`) and the extras once, prints a table and the targets
//! per set, writes `--json` and `--svg`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use statepipe_bench::report::{table, Report, ResultRow};
use statepipe_bench::serve::cpus::{self, CpuList, CpuSplit};
use statepipe_bench::serve::load::{find_tool, Endpoint, RateGenerator, Wrk};
use statepipe_bench::serve::{self, ServeOptions};

use crate::bench_common::{measure_host, write_files, CommonArgs};
use crate::bench_serve_extras::{extras_rows, OverloadLimits};
use crate::bench_serve_targets::targets;

/// Options of `statepipe bench serve`.
#[derive(Args, Debug)]
pub struct ServeBenchArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The peers' executable [default: bench/serve-peers/target/release/serve-peer
    /// in the repository this binary was built from, built when missing].
    #[arg(long, value_name = "PATH")]
    pub peer: Option<PathBuf>,
    /// Keep-alive connections of the closed-loop runs.
    #[arg(long, default_value_t = 200)]
    pub connections: usize,
    /// Seconds of each measured window (warm-up: a fifth of it, at least 1 s).
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub window: u64,
    /// Where the servers' data directories go (the disk the journal fsyncs to).
    #[arg(long, value_name = "DIR", default_value = "target/bench-serve")]
    pub data: PathBuf,
    /// Skip the restart, idle-memory and overload measurements.
    #[arg(long)]
    pub no_extras: bool,
    /// With `--overload-generator h2load`: install oha with `cargo install
    /// oha --locked` when h2load is not found and cannot be installed with
    /// apt-get (otherwise the overload run is skipped, saying so).
    #[arg(long)]
    pub install_oha: bool,
    /// The overload run's generator: `oha` (the default; installed with
    /// `cargo install oha --locked` when missing, h2load if that fails),
    /// whose rate spreads the requests evenly over time, or `h2load`
    /// (installed with `apt-get install -y nghttp2-client` when missing),
    /// whose `--rps` clocks start together on every connection, so that
    /// each tick sends a burst of one request per connection: its latencies
    /// then measure the burst (several ms at 400 connections against an
    /// idle server), not the server.
    #[arg(long, default_value = "oha", value_parser = ["h2load", "oha"])]
    pub overload_generator: String,
    /// Connections of the overload run.
    #[arg(long, default_value_t = 400)]
    pub overload_connections: usize,
    /// The CPU quota (in CPUs, through a cgroup) statepipe runs under in the
    /// overload run and the POST capacity measurement before it, so that the
    /// generator can offer twice that capacity; 0 (the default): no quota.
    /// A quota puts a floor under the refusals' latency (below); where the
    /// disk cap of `--overload-write-iops` cannot be made, a quota of 0.3
    /// CPU takes its place, and the notes say so.
    #[arg(long, value_name = "CPUS", default_value_t = 0.0)]
    pub overload_quota: f64,
    /// The CFS period of that quota, in microseconds (the kernel takes
    /// 1,000 to 1,000,000, and a quota of at least 1,000). The period
    /// bounds the latency the quota adds: once the server has spent its
    /// share of a period, none of its threads runs until the next, so a
    /// request arriving then waits unread. Under a quota of q CPUs, the
    /// p99 of that wait alone is about (0.99 − q) · period: 69 ms at the
    /// kernel's default 100 ms and q = 0.3.
    #[arg(long, value_name = "US", default_value_t = statepipe_bench::cgroup::PERIOD_US,
          value_parser = clap::value_parser!(u64).range(1000..=1_000_000))]
    pub overload_period_us: u64,
    /// Cap the write operations a second statepipe may issue to the disk
    /// that holds `--data`, through a `blkio`/`io` cgroup, in the overload
    /// run and the capacity measurement before it (0: no cap; with no
    /// quota either, the capacity is the rounds' POST figure). With the
    /// disk as the limit, the server's CPUs stay free: the overload run
    /// measures admission alone, not a CPU quota's throttling.
    #[arg(long, value_name = "IOPS", default_value_t = 200)]
    pub overload_write_iops: u64,
    /// The CPUs every server (statepipe and each peer) is pinned to, as
    /// `taskset -c` takes them (`0`, `0-3`, `0,2,4-7`); wrk gets the usable
    /// CPUs not in the list. Repeat it, or separate lists with `;`, for one
    /// run and one table per list. Default: the first usable CPU, wrk on
    /// the second.
    #[arg(long, value_name = "LIST")]
    pub server_cpus: Vec<String>,
    /// Only these peers (comma-separated): axum, axum16, axum16-value,
    /// actix-web, actix-web-value; and statepipe-append, statepipe with its
    /// journal appending (`--journal-segment-mib 0`), and
    /// statepipe-adaptive, statepipe with `--handler-wait adaptive`,
    /// reference rows run only when named and never the best peer of a
    /// target. Default: all the peers.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub peers: Vec<String>,
    /// Only these GET endpoints after `POST /item` (which always runs: it
    /// fills the store): get-one, get-list. Default: both.
    #[arg(long, value_delimiter = ',', value_name = "NAMES", value_parser = ["get-one", "get-list"])]
    pub gets: Vec<String>,
    /// A CPU quota (in CPUs, through a cgroup) every server runs under in
    /// the rounds, on top of its `--server-cpus` pinning; 0: none. Where
    /// the load generator's CPUs cannot outrun the servers' (wrk on one CPU
    /// against a server on one: both near 100 %), a quota below the pinned
    /// CPUs makes the servers the limit, so the rounds compare the servers
    /// and not the generator. The extras run without it.
    #[arg(long, value_name = "CPUS", default_value_t = 0.0)]
    pub server_quota: f64,
    /// The CFS period of `--server-quota`, in microseconds (1,000 to
    /// 1,000,000; the quota per period must be at least 1,000). A server
    /// that has spent its share waits out the rest of the period, which
    /// adds up to `(1 − quota) · period` to a request's latency.
    #[arg(long, value_name = "US", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1000..=1_000_000))]
    pub server_quota_period_us: u64,
}

/// The cgroup of `--server-quota`, made for the whole run (removed when
/// dropped), and the words that describe it; `None` without a quota.
fn server_quota(
    args: &ServeBenchArgs,
) -> anyhow::Result<Option<(statepipe_bench::cgroup::QuotaCgroup, String)>> {
    let (quota, period_us) = (args.server_quota, args.server_quota_period_us);
    if quota <= 0.0 {
        return Ok(None);
    }
    anyhow::ensure!(
        quota * period_us as f64 >= 1000.0,
        "--server-quota {quota} per --server-quota-period-us {period_us} is {:.0} µs a period; \
         the kernel's least is 1000 µs: give a longer period",
        quota * period_us as f64
    );
    let name = format!("statepipe-bench-rounds-{}", std::process::id());
    let cgroup = statepipe_bench::cgroup::QuotaCgroup::create_with_period(&name, quota, period_us)
        .with_context(|| {
            format!("--server-quota {quota}: making a cgroup with a CPU quota (needs root and a cpu controller)")
        })?;
    let words = format!("quota {quota} CPU per {} ms", period_us as f64 / 1e3);
    Ok(Some((cgroup, words)))
}

/// The CPU splits to run: one per `--server-cpus` list, else the default.
fn splits(args: &ServeBenchArgs, usable: &[usize]) -> anyhow::Result<Vec<CpuSplit>> {
    if args.server_cpus.is_empty() {
        return Ok(vec![cpus::default_split(usable)]);
    }
    let sets = cpus::parse_cpu_sets(&args.server_cpus).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(!sets.is_empty(), "--server-cpus: no CPU list given");
    sets.iter()
        .map(|set| cpus::split(usable, set).map_err(anyhow::Error::msg))
        .collect()
}

fn find_or_install_wrk() -> anyhow::Result<PathBuf> {
    if let Some(p) = find_tool("wrk") {
        println!("load generator: wrk found at {}", p.display());
        return Ok(p);
    }
    println!("load generator: wrk not found; installing it with apt-get install -y wrk");
    let ok = Command::new("apt-get")
        .args(["install", "-y", "wrk"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    anyhow::ensure!(ok, "could not install wrk (apt-get install -y wrk failed)");
    find_tool("wrk").context("wrk installed but not on PATH")
}

/// `tool` on the `PATH` (or where `find_tool` looks), else installed with
/// `install` (a command line) when that is allowed: `Err` carries why not.
/// `role` names it in the lines printed.
fn find_or_install(tool: &str, role: &str, install: Result<&[&str], &str>) -> Option<PathBuf> {
    if let Some(p) = find_tool(tool) {
        println!("{role}: {tool} found at {}", p.display());
        return Some(p);
    }
    let install = match install {
        Ok(cmd) => cmd,
        Err(why) => {
            println!("{role}: {tool} not found; {why}");
            return None;
        }
    };
    let line = install.join(" ");
    println!("{role}: {tool} not found; installing it with {line}");
    let ok = Command::new(install[0])
        .args(&install[1..])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        println!("{line} failed");
    }
    find_tool(tool)
}

fn find_or_install_h2load() -> Option<PathBuf> {
    find_or_install(
        "h2load",
        "rate generator",
        Ok(&["apt-get", "install", "-y", "nghttp2-client"]),
    )
}

fn rate_generator(args: &ServeBenchArgs) -> Option<RateGenerator> {
    if args.overload_generator == "h2load" {
        if let Some(p) = find_or_install_h2load() {
            return Some(RateGenerator::H2load(p));
        }
        println!("rate generator: trying oha instead of h2load");
        return find_or_install_oha(args.install_oha).map(RateGenerator::Oha);
    }
    if let Some(p) = find_or_install_oha(true) {
        return Some(RateGenerator::Oha(p));
    }
    println!("rate generator: trying h2load instead of oha");
    find_or_install_h2load().map(RateGenerator::H2load)
}

fn find_or_install_oha(install: bool) -> Option<PathBuf> {
    let cmd: &[&str] = &["cargo", "install", "oha", "--locked"];
    find_or_install(
        "oha",
        "open-loop generator",
        if install {
            Ok(cmd)
        } else {
            Err("the overload run is skipped (--install-oha, or cargo install oha --locked)")
        },
    )
}

/// `--peer` if given (it must exist); else the repository's
/// bench/serve-peers build, made when missing, wherever this command runs.
fn find_or_build_peer(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return std::fs::canonicalize(path)
            .with_context(|| format!("--peer {}: no such executable", path.display()));
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/serve-peers");
    let path = dir.join("target/release/serve-peer");
    if !path.is_file() {
        println!(
            "peers: {} missing; building bench/serve-peers (cargo build --release)",
            path.display()
        );
        let ok = Command::new("cargo")
            .args(["build", "--release", "--manifest-path"])
            .arg(dir.join("Cargo.toml"))
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        anyhow::ensure!(
            ok,
            "building {} failed (cargo's output above says why; or pass --peer PATH)",
            dir.display()
        );
    }
    Ok(std::fs::canonicalize(&path)?)
}

/// Runs `statepipe bench serve`.
pub fn run(args: ServeBenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let usable = statepipe_sys::cpus::usable_cpus().ids;
    let splits = splits(&args, &usable)?;
    let quota = server_quota(&args)?;
    let host = measure_host(&args.common);
    let wrk = find_or_install_wrk()?;
    let rate = if args.no_extras {
        None
    } else {
        rate_generator(&args)
    };
    let peer = find_or_build_peer(args.peer.as_deref())?;
    std::fs::create_dir_all(&args.data)?;
    let window = if args.common.quick {
        Duration::from_secs(3)
    } else {
        Duration::from_secs(args.window.max(1))
    };
    let base = ServeOptions {
        statepipe: std::env::current_exe().context("finding this executable")?,
        peer,
        wrk: Wrk {
            path: wrk,
            cpus: Vec::new(),
            connections: args.connections,
        },
        rate,
        server_cpus: Vec::new(),
        data: std::fs::canonicalize(&args.data)?,
        warmup: (window / 5).max(Duration::from_secs(1)),
        window,
        samples: args.common.samples.into(),
        extras: !args.no_extras,
        restart_items: if args.common.quick {
            100_000
        } else {
            1_000_000
        },
        idle_connections: 10_000,
        cgroups: Vec::new(),
        peers: args.peers.clone(),
        gets: args
            .gets
            .iter()
            .map(|g| {
                if g == "get-one" {
                    Endpoint::GetOne
                } else {
                    Endpoint::GetList
                }
            })
            .collect(),
    };
    base.kinds()?;
    let mut sections: Vec<(String, Vec<ResultRow>)> = Vec::new();
    let mut extra_rows = Vec::new();
    let mut notes = String::new();
    for (i, split) in splits.iter().enumerate() {
        let mut options = base.clone();
        options.server_cpus = split.server.clone();
        options.wrk.cpus = split.generator.clone();
        let mut rounds = options.clone();
        if let Some((cgroup, _)) = &quota {
            rounds.cgroups.push(cgroup.dir().to_path_buf());
        }
        println!("{}: {}\n", title(split, &quota), rounds.describe());
        let results = serve::run(&rounds, &mut |line| eprintln!("{line}"))?;
        let rows = serve::rows(&results);
        if i == 0 && options.extras {
            // The extras run once, with the first set's pinning.
            extras_rows(
                &options,
                args.overload_connections,
                OverloadLimits {
                    quota: args.overload_quota,
                    period_us: args.overload_period_us,
                    write_iops: args.overload_write_iops,
                },
                &rows,
                &mut extra_rows,
                &mut notes,
            )?;
        }
        sections.push((title(split, &quota), rows));
    }
    let mut all = Vec::new();
    for (i, (split, (title, rows))) in splits.iter().zip(&sections).enumerate() {
        let report = Report::new("serve", &host, rows.clone());
        println!("\n{title}\n");
        print!("{}", table::render(&report));
        // The first set's targets include the extras' (run with its pinning).
        let mut with_extras = report.clone();
        if i == 0 {
            with_extras.results.extend(extra_rows.iter().cloned());
        }
        println!();
        print!(
            "{}",
            targets(&with_extras).replacen("targets:", &format!("targets, {title}:"), 1)
        );
        let mut prefix = split.case_prefix();
        if quota.is_some() {
            prefix = prefix.replacen('/', &format!(" quota {}/", args.server_quota), 1);
        }
        all.extend(rows.iter().cloned().map(|mut r| {
            r.case = format!("{prefix}{}", r.case);
            r
        }));
    }
    if !extra_rows.is_empty() {
        let first = &splits[0];
        println!(
            "\nextras (statepipe, servers on CPUs {}, generators on CPUs {}; the quota run unpinned)\n",
            CpuList(&first.server),
            CpuList(&first.generator)
        );
        print!(
            "{}",
            table::render(&Report::new("serve", &host, extra_rows.clone()))
        );
        all.extend(extra_rows);
    }
    if !notes.is_empty() {
        println!();
        print!("{notes}");
    }
    println!("(run took {:.1} s)", started.elapsed().as_secs_f64());
    write_files(&Report::new("serve", &host, all), &args.common)
}

/// The title of a split's table, naming the rounds' quota if there is one.
fn title<T>(split: &CpuSplit, quota: &Option<(T, String)>) -> String {
    match quota {
        Some((_, words)) => format!("{}, every server under a CPU {words}", split.title()),
        None => split.title(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeBenchArgs,
    }

    fn args(line: &[&str]) -> ServeBenchArgs {
        Cli::parse_from(std::iter::once("serve").chain(line.iter().copied())).serve
    }

    #[test]
    fn one_split_per_list_repeated_or_semicolon_separated() {
        let usable = [0, 1, 2, 3];
        let got = splits(
            &args(&["--server-cpus", "0", "--server-cpus", "0-1;1,3"]),
            &usable,
        )
        .unwrap();
        let servers: Vec<_> = got.iter().map(|s| s.server.clone()).collect();
        assert_eq!(servers, [vec![0], vec![0, 1], vec![1, 3]]);
        let generators: Vec<_> = got.iter().map(|s| s.generator.clone()).collect();
        assert_eq!(generators, [vec![1, 2, 3], vec![2, 3], vec![0, 2]]);
    }

    #[test]
    fn without_the_option_the_first_cpu_serves_and_the_second_loads() {
        let got = splits(&args(&[]), &[0, 1]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].server.clone(), got[0].generator.clone()),
            (vec![0], vec![1])
        );
    }

    #[test]
    fn bad_lists_are_refused_before_anything_runs() {
        let e = splits(&args(&["--server-cpus", "0-1"]), &[0, 1]).unwrap_err();
        assert!(e.to_string().contains("no usable CPU is left"), "{e}");
        let e = splits(&args(&["--server-cpus", "7"]), &[0, 1]).unwrap_err();
        assert!(e.to_string().contains("usable CPUs are 0-1"), "{e}");
        assert!(splits(&args(&["--server-cpus", "1-0"]), &[0, 1]).is_err());
    }
}
