//! The load generators: `wrk` (closed loop, keep-alive) with a Lua script
//! per endpoint that prints its figures as JSON; and for the overload run a
//! rate-driven one, `h2load` (`--rps` per connection; nghttp2's benchmark
//! tool, written in C) or `oha` (`-q`, open loop).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::BenchError;

/// An endpoint the bench loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `GET /item/{id}`, ids drawn uniformly from the preloaded ones.
    GetOne,
    /// `GET /item?after=R&limit=10`.
    GetList,
    /// `POST /item` (durable).
    Post,
}

impl Endpoint {
    /// Every endpoint, in the order they run on a fresh server (POST first:
    /// it fills the store the GETs read).
    pub const ALL: [Endpoint; 3] = [Endpoint::Post, Endpoint::GetOne, Endpoint::GetList];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::GetOne => "GET /item/{id}",
            Endpoint::GetList => "GET /item?limit=10",
            Endpoint::Post => "POST /item",
        }
    }

    /// A short key for the report's case names.
    pub fn key(self) -> &'static str {
        match self {
            Endpoint::GetOne => "get-one",
            Endpoint::GetList => "get-list",
            Endpoint::Post => "post",
        }
    }
}

/// The body every POST sends.
pub const POST_BODY: &str = r#"{"name":"widget","price":9.5}"#;

/// The Lua script of `endpoint` over ids `1..=items`: it builds each request
/// and, at the end, prints one JSON line with wrk's figures.
pub fn wrk_script(endpoint: Endpoint, items: u64) -> String {
    // The GET requests are formatted once per wrk thread (`init`) and
    // cycled from a random start, as wrk's scripting guide advises:
    // `request()` runs for every request, and a `wrk.format` there costs
    // the generator more than a cheap read costs the server.
    let cycle = |path: &str| {
        format!(
            "local reqs = {{}}\nlocal n = 0\n\
             init = function(args)\n  for i = 1, {items} do reqs[i] = wrk.format(\"GET\", {path}) end\n  \
             n = math.random(0, {items} - 1)\nend\n\
             request = function()\n  n = n % {items} + 1\n  return reqs[n]\nend\n"
        )
    };
    let request = match endpoint {
        Endpoint::GetOne => cycle("\"/item/\" .. i"),
        Endpoint::GetList => cycle("\"/item?after=\" .. (i - 1) .. \"&limit=10\""),
        Endpoint::Post => format!(
            "wrk.method = \"POST\"\nwrk.path = \"/item\"\nwrk.body = '{POST_BODY}'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
        ),
    };
    request
        + r#"done = function(summary, latency, requests)
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
"#
}

/// What one wrk run measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WrkResult {
    /// Responses completed.
    pub requests: u64,
    /// The run's length in microseconds.
    pub duration_us: u64,
    /// Connect errors.
    pub connect: u64,
    /// Read errors.
    pub read: u64,
    /// Write errors.
    pub write: u64,
    /// Responses with a status of 400 or more (wrk's `errors.status`):
    /// refusals such as 429 and 503, and failures.
    pub status: u64,
    /// Requests that timed out.
    pub timeout: u64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Largest latency, µs.
    pub max_us: u64,
}

impl WrkResult {
    /// Successful responses (status below 400) per second: a refusal is
    /// not throughput, and is counted in [`WrkResult::status`] instead.
    pub fn rate(&self) -> f64 {
        self.requests.saturating_sub(self.status) as f64 / self.secs()
    }

    /// Responses with a status of 400 or more, per second.
    pub fn refused_rate(&self) -> f64 {
        self.status as f64 / self.secs()
    }

    fn secs(&self) -> f64 {
        self.duration_us.max(1) as f64 / 1e6
    }

    /// Socket errors of every kind.
    pub fn socket_errors(&self) -> u64 {
        self.connect + self.read + self.write + self.timeout
    }
}

/// How to run wrk.
#[derive(Debug, Clone)]
pub struct Wrk {
    /// The executable.
    pub path: PathBuf,
    /// The CPUs it is pinned to (`taskset -c LIST`); empty: not pinned.
    pub cpus: Vec<usize>,
    /// Connections.
    pub connections: usize,
}

impl Wrk {
    /// Runs `script` (written to `dir`) against `addr` for `length`.
    ///
    /// # Errors
    ///
    /// When wrk fails or prints no figures.
    pub fn run(
        &self,
        dir: &Path,
        script: &str,
        addr: SocketAddr,
        length: Duration,
    ) -> Result<WrkResult, BenchError> {
        let path = dir.join("load.lua");
        std::fs::write(&path, script).map_err(|e| BenchError::failed("wrk", e))?;
        // One wrk thread per generator CPU (one when unpinned), never more
        // threads than connections: one thread saturates near 150 k req/s.
        let threads = self.cpus.len().clamp(1, self.connections.max(1));
        let mut cmd = pinned(&self.cpus, &self.path);
        cmd.args([
            &format!("-t{threads}"),
            &format!("-c{}", self.connections),
            &format!("-d{}s", length.as_secs().max(1)),
            "--timeout",
            "5s",
            "-s",
        ])
        .arg(&path)
        .arg(format!("http://{addr}"));
        let out = cmd
            .output()
            .map_err(|e| BenchError::failed("wrk", format!("running {:?}: {e}", self.path)))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix("WRKJSON "))
            .ok_or_else(|| {
                BenchError::failed(
                    "wrk",
                    format!(
                        "no figures ({}): {stdout}{}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    ),
                )
            })?;
        serde_json::from_str(line).map_err(|e| BenchError::failed("wrk", e))
    }
}

/// `taskset -c LIST PROGRAM` (the child's affinity: exactly `cpus`), or
/// just `PROGRAM` when `cpus` is empty.
pub fn pinned(cpus: &[usize], program: &Path) -> Command {
    if cpus.is_empty() {
        return Command::new(program);
    }
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    let mut c = Command::new("taskset");
    c.arg("-c").arg(list.join(",")).arg(program);
    c
}

/// `PROGRAM` on `PATH` or in `~/.cargo/bin`.
pub fn find_tool(program: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
    }
    dirs.into_iter()
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The generator of the overload run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateGenerator {
    /// `h2load --h1 --rps R/C -c C`: each connection sends on its own clock
    /// at `R/C` requests per second, one request in flight at a time.
    H2load(PathBuf),
    /// `oha -q R --latency-correction`: open loop over a pool of
    /// connections, latency counted from each request's scheduled start.
    Oha(PathBuf),
}

impl RateGenerator {
    /// Its name in the report.
    pub fn name(&self) -> &'static str {
        match self {
            RateGenerator::H2load(_) => "h2load",
            RateGenerator::Oha(_) => "oha",
        }
    }
}

/// What a rate-driven run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateResult {
    /// The rate asked for, requests per second.
    pub rate: f64,
    /// Requests the generator sent per second (below `rate` when the
    /// generator, not the server, was the limit).
    pub sent: f64,
    /// Responses per second achieved, whatever their status.
    pub achieved: f64,
    /// 2xx responses per second: the throughput; refusals (429) are in
    /// `statuses`.
    pub succeeded: f64,
    /// Responses by status.
    pub statuses: Vec<(u16, u64)>,
    /// Requests that got no response: connection errors and timeouts
    /// (h2load's `errored` and `timeout`; for oha, see `oha_unanswered`).
    pub errors: u64,
    /// p99 of the answers that were not 429, ms.
    pub accepted_p99_ms: f64,
    /// p99 of the 429 answers, ms.
    pub rejected_p99_ms: f64,
}

impl RateResult {
    /// Responses with `status`.
    pub fn count(&self, status: u16) -> u64 {
        self.statuses
            .iter()
            .filter(|s| s.0 == status)
            .map(|s| s.1)
            .sum()
    }
}

/// What a fixed-rate run sends.
#[derive(Debug, Clone)]
pub struct RateSpec<'a> {
    /// The CPUs the generator is pinned to (empty: not pinned).
    pub cpus: &'a [usize],
    /// The target.
    pub url: &'a str,
    /// `POST` a JSON body (else `GET`).
    pub post: bool,
    /// Keep-alive connections.
    pub connections: usize,
    /// Requests per second, all connections together.
    pub rate: f64,
    /// How long.
    pub length: Duration,
}

/// Runs `generator` as `spec` says, and splits latencies by status.
/// `scratch` holds the request body and the per-request log.
///
/// # Errors
///
/// When the generator fails or its output does not parse.
pub fn rate_run(
    generator: &RateGenerator,
    spec: &RateSpec<'_>,
    scratch: &Path,
) -> Result<RateResult, BenchError> {
    match generator {
        RateGenerator::H2load(p) => h2load(p, spec, scratch),
        RateGenerator::Oha(p) => oha(p, spec),
    }
}

/// `h2load --h1` with `--rps rate/connections` per connection: a
/// connection sends its next request on its own clock, as soon as the one
/// in flight is answered if that clock has passed. Latencies come from
/// `--log-file` (tab-separated: start in µs since the epoch, status, µs to
/// the end of the response). No warm-up: h2load's log leaves warm-up
/// requests out, and the overload run must count every 201 it got.
fn h2load(path: &Path, spec: &RateSpec<'_>, scratch: &Path) -> Result<RateResult, BenchError> {
    let RateSpec {
        cpus,
        url,
        post,
        connections,
        rate,
        length,
    } = *spec;
    let fail = |m: String| BenchError::failed("h2load", m);
    std::fs::create_dir_all(scratch).map_err(|e| fail(format!("{scratch:?}: {e}")))?;
    let log = scratch.join("h2load.log");
    let body = scratch.join("body.json");
    std::fs::write(&body, POST_BODY).map_err(|e| fail(format!("{body:?}: {e}")))?;
    // h2load appends to its log: start from an empty one.
    let _ = std::fs::remove_file(&log);
    let per_conn = rate / connections.max(1) as f64;
    // One h2load thread per generator CPU (one when unpinned), never more
    // threads than connections.
    let threads = cpus.len().clamp(1, connections.max(1));
    let mut cmd = pinned(cpus, path);
    cmd.args(["--h1", "-c", &connections.to_string()])
        .args(["-t", &threads.to_string()])
        .args(["--rps", &format!("{per_conn:.3}")])
        .args(["-D", &length.as_secs().max(1).to_string()])
        .arg("--log-file")
        .arg(&log);
    if post {
        cmd.arg("-d")
            .arg(&body)
            .args(["-H", "content-type: application/json"]);
    }
    cmd.arg(url);
    let out = cmd
        .output()
        .map_err(|e| fail(format!("running {path:?}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(fail(format!(
            "{}: {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let text = std::fs::read_to_string(&log).map_err(|e| fail(format!("{log:?}: {e}")))?;
    let _ = std::fs::remove_file(&log);
    let mut r = parse_h2load_log(&text, rate)?;
    r.errors = parse_h2load_errors(&stdout)?;
    Ok(r)
}

/// `errored + timeout` from h2load's `requests:` summary line.
fn parse_h2load_errors(stdout: &str) -> Result<u64, BenchError> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("requests:"))
        .ok_or_else(|| BenchError::failed("h2load", format!("no requests: line in {stdout}")))?;
    let mut errors = 0;
    for part in line.trim_start_matches("requests:").split(',') {
        let mut words = part.split_whitespace();
        if let (Some(n), Some(what)) = (words.next(), words.next()) {
            if what == "errored" || what == "timeout" {
                errors += n.parse::<u64>().map_err(|_| {
                    BenchError::failed("h2load", format!("bad count {n:?} in {line:?}"))
                })?;
            }
        }
    }
    Ok(errors)
}

fn parse_h2load_log(text: &str, rate: f64) -> Result<RateResult, BenchError> {
    let mut samples = Vec::new();
    for line in text.lines() {
        let mut f = line.split('\t');
        let (Some(start), Some(status), Some(took)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (Ok(start), Ok(status), Ok(took)) = (
            start.trim().parse::<f64>(),
            status.trim().parse::<u16>(),
            took.trim().parse::<f64>(),
        ) else {
            continue;
        };
        samples.push((start / 1e6, took / 1e6, status));
    }
    if samples.is_empty() {
        return Err(BenchError::failed("h2load", "its log lists no request"));
    }
    Ok(summarise(rate, &samples, 0.0))
}

/// Runs oha at `rate` requests per second (open loop, latency corrected)
/// against `url` for `length`, and splits latencies by status from its
/// per-request CSV (columns `request-start`, `request-duration` in seconds,
/// `status`; answered requests only).
fn oha(path: &Path, spec: &RateSpec<'_>) -> Result<RateResult, BenchError> {
    let RateSpec {
        cpus,
        url,
        post,
        connections,
        rate,
        length,
    } = *spec;
    let mut cmd = pinned(cpus, path);
    cmd.args([
        "--no-tui",
        "--latency-correction",
        // Requests in flight at the deadline are answered, not dropped
        // (they would count as errors).
        "--wait-ongoing-requests-after-deadline",
        "-c",
        &connections.to_string(),
        "-q",
        &format!("{rate:.0}"),
        "-z",
        &format!("{}s", length.as_secs().max(1) + OHA_WARM_UP_S as u64),
        "--output-format",
        "csv",
    ]);
    if post {
        cmd.args(["-m", "POST", "-T", "application/json", "-d", POST_BODY]);
    }
    cmd.arg(url);
    let out = cmd
        .output()
        .map_err(|e| BenchError::failed("oha", format!("running {path:?}: {e}")))?;
    if !out.status.success() {
        return Err(BenchError::failed(
            "oha",
            format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr)),
        ));
    }
    let csv = String::from_utf8_lossy(&out.stdout);
    let mut r = parse_oha_csv(&csv, rate)?;
    r.errors = oha_unanswered(&r, rate.round(), oha_dials(&csv)?, connections);
    Ok(r)
}

/// Requests of oha's CSV that opened a connection (a `DNS+dialup` time).
fn oha_dials(csv: &str) -> Result<u64, BenchError> {
    let mut lines = csv.lines();
    let header = lines.next().unwrap_or_default();
    let col = header
        .split(',')
        .position(|h| h.trim() == "DNS+dialup")
        .ok_or_else(|| BenchError::failed("oha", format!("no column DNS+dialup in {header:?}")))?;
    Ok(lines
        .filter(|l| {
            l.split(',')
                .nth(col)
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|v| v > 0.0)
        })
        .count() as u64)
}

/// Requests oha scheduled and got no answer for. Its CSV lists answered
/// requests only, so two signs count them, and the larger is taken:
/// - a failed request takes its connection with it, and oha opens a new
///   one: each of the `dials` past the first `connections` is a failure;
/// - the starts are about `1/q` apart, so the schedule between the first
///   and the last holds about `span · q + 1`; a shortfall beyond 1 % (plus
///   ten: the starts jitter, and oha may stop scheduling a few slots before
///   its deadline) is requests that never got an answer.
fn oha_unanswered(r: &RateResult, q: f64, dials: u64, connections: usize) -> u64 {
    let reconnects = dials.saturating_sub(connections as u64);
    let answered: u64 = r.statuses.iter().map(|s| s.1).sum();
    if answered == 0 || r.sent <= 0.0 {
        return reconnects;
    }
    let span = answered as f64 / r.sent;
    let scheduled = (span * q).round() as u64 + 1;
    let slack = scheduled / 100 + 10;
    reconnects.max(scheduled.saturating_sub(answered + slack))
}

/// Seconds oha runs before the window whose latencies count: its
/// connections are opened together at the start, and the requests
/// scheduled meanwhile wait for them (latency correction counts that). Its
/// requests still count in the statuses and the 201s.
const OHA_WARM_UP_S: f64 = 1.0;

fn parse_oha_csv(csv: &str, rate: f64) -> Result<RateResult, BenchError> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines
        .next()
        .ok_or_else(|| BenchError::failed("oha", "empty CSV"))?
        .split(',')
        .collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h.trim() == name)
            .ok_or_else(|| BenchError::failed("oha", format!("no column {name} in {header:?}")))
    };
    let (start, took, status) = (
        col("request-start")?,
        col("request-duration")?,
        col("status")?,
    );
    let mut samples = Vec::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let (Some(s), Some(d), Some(st)) = (f.get(start), f.get(took), f.get(status)) else {
            continue;
        };
        let (Ok(s), Ok(d), Ok(st)) = (s.parse::<f64>(), d.parse::<f64>(), st.parse::<u16>()) else {
            continue;
        };
        samples.push((s, d, st));
    }
    Ok(summarise(rate, &samples, OHA_WARM_UP_S))
}

/// Statuses, rates and p99s of `(start s, duration s, status)` samples;
/// the p99s leave out requests started within `warm_up` seconds of the
/// first.
fn summarise(rate: f64, samples: &[(f64, f64, u16)], warm_up: f64) -> RateResult {
    let mut ok = Vec::new();
    let mut busy = Vec::new();
    let mut statuses: std::collections::BTreeMap<u16, u64> = Default::default();
    let (mut first, mut last, mut last_start) = (f64::MAX, 0f64, 0f64);
    for &(s, d, st) in samples {
        first = first.min(s);
        last = last.max(s + d);
        last_start = last_start.max(s);
        *statuses.entry(st).or_default() += 1;
    }
    for &(s, d, st) in samples {
        if s - first >= warm_up {
            if st == 429 { &mut busy } else { &mut ok }.push(d * 1e3);
        }
    }
    let answered: u64 = statuses.values().sum();
    let succeeded: u64 = statuses
        .iter()
        .filter(|(st, _)| (200..300).contains(*st))
        .map(|(_, n)| n)
        .sum();
    let p99 = |v: &mut Vec<f64>| {
        if v.is_empty() {
            return 0.0;
        }
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1]
    };
    RateResult {
        rate,
        sent: answered as f64 / (last_start - first).max(1e-9),
        achieved: answered as f64 / (last - first).max(1e-9),
        succeeded: succeeded as f64 / (last - first).max(1e-9),
        statuses: statuses.into_iter().collect(),
        errors: 0,
        accepted_p99_ms: p99(&mut ok),
        rejected_p99_ms: p99(&mut busy),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oha_csv_splits_latencies_by_status() {
        let csv = "request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status\n\
                   0.0,0,0.0005,0.009,0.009,8,201\n\
                   0.5,0,0,0.001,0.009,30,429\n\
                   1.0,0,0,0.003,0.004,8,201\n\
                   1.5,0,0,0.0001,0.0002,30,429\n\
                   2.0,0,0,0.003,0.003,8,201\n\
                   garbage line\n";
        let r = parse_oha_csv(csv, 10.0).unwrap();
        // Every request counts; the p99s leave out the first second's.
        assert_eq!(r.statuses, vec![(201, 3), (429, 2)]);
        assert_eq!((r.count(201), r.count(429), r.count(500)), (3, 2, 0));
        assert!((r.accepted_p99_ms - 4.0).abs() < 1e-9);
        assert!((r.rejected_p99_ms - 0.2).abs() < 1e-9);
        assert!((r.achieved - 5.0 / 2.003).abs() < 1e-9);
        assert!((r.succeeded - 3.0 / 2.003).abs() < 1e-9);
        assert!(parse_oha_csv("status\n", 1.0).is_err());
    }

    #[test]
    fn oha_failures_are_reconnections_or_a_short_schedule() {
        let head = "request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status\n";
        // 100 a second for 2 s on 2 connections; request 50 reconnects.
        let mut csv = String::from(head);
        for i in 0..=200 {
            let dial = if i < 2 || i == 50 { 0.0002 } else { 0.0 };
            csv.push_str(&format!(
                "{:.3},0,{dial},0.001,0.001,8,201\n",
                f64::from(i) / 100.0
            ));
        }
        let r = parse_oha_csv(&csv, 100.0).unwrap();
        let dials = oha_dials(&csv).unwrap();
        assert_eq!(dials, 3);
        assert_eq!(oha_unanswered(&r, 100.0, dials, 2), 1);
        // A few slots missing is jitter; a fifth of them is failures.
        let mut csv = String::from(head);
        for i in (0..=200).filter(|i| i % 5 != 3) {
            csv.push_str(&format!(
                "{:.3},0,0,0.001,0.001,8,429\n",
                f64::from(i) / 100.0
            ));
        }
        let r = parse_oha_csv(&csv, 100.0).unwrap();
        let missing = 40;
        assert_eq!(oha_unanswered(&r, 100.0, 0, 2), missing - (201 / 100 + 10));
        let mut csv = String::from(head);
        for i in (0..=200).filter(|i| ![7, 99, 150].contains(i)) {
            csv.push_str(&format!(
                "{:.3},0,0,0.001,0.001,8,429\n",
                f64::from(i) / 100.0
            ));
        }
        let r = parse_oha_csv(&csv, 100.0).unwrap();
        assert_eq!(oha_unanswered(&r, 100.0, 0, 2), 0);
    }

    #[test]
    fn wrk_throughput_counts_successful_answers_only() {
        let r = WrkResult {
            requests: 1000,
            duration_us: 2_000_000,
            connect: 0,
            read: 0,
            write: 0,
            status: 200,
            timeout: 0,
            p50_us: 1,
            p99_us: 1,
            p999_us: 1,
            max_us: 1,
        };
        assert_eq!((r.rate(), r.refused_rate()), (400.0, 100.0));
    }

    #[test]
    fn h2load_log_and_summary_parse() {
        let log = "1700000000000000\t201\t2000\n\
                   1700000000500000\t429\t200\n\
                   1700000001000000\t201\t4000\n\
                   not a line\n";
        let r = parse_h2load_log(log, 10.0).unwrap();
        assert_eq!(r.statuses, vec![(201, 2), (429, 1)]);
        assert!((r.accepted_p99_ms - 4.0).abs() < 1e-9);
        assert!((r.rejected_p99_ms - 0.2).abs() < 1e-9);
        assert!((r.sent - 3.0).abs() < 1e-6);
        assert!(parse_h2load_log("", 1.0).is_err());
        let out = "finished in 6.02s, 25943.40 req/s, 2.72MB/s\n\
                   requests: 129717 total, 129822 started, 129717 done, 52090 succeeded, 77627 failed, 3 errored, 4 timeout\n";
        assert_eq!(parse_h2load_errors(out).unwrap(), 7);
        assert!(parse_h2load_errors("nothing").is_err());
    }

    #[test]
    fn every_script_prints_its_figures() {
        for e in Endpoint::ALL {
            let s = wrk_script(e, 1000);
            assert!(s.contains("WRKJSON"), "{s}");
            assert!(s.contains("/item"), "{s}");
        }
        assert!(wrk_script(Endpoint::Post, 1).contains(POST_BODY));
    }
}
