//! The measurements of `statepipe serve` alone: restart time after SIGKILL
//! with many items journalled, resident memory under idle keep-alive
//! connections, and open-loop overload.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use statepipe_serve::journal::{Op, Start, Writer};

use super::load::{self, Endpoint, RateGenerator, RateResult, WrkResult};
use super::server::{get, Kind, Running};
use super::ServeOptions;
use crate::BenchError;

/// Writes a journal of `items` creates into `dir` (the records the service
/// itself writes, committed 10,000 at a time), with no snapshot.
///
/// # Errors
///
/// I/O errors.
pub fn journal_items(dir: &Path, items: u64) -> Result<(), BenchError> {
    let io = |e: std::io::Error| BenchError::failed("journal", e);
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut w = Writer::open(dir, Start::new(1)).map_err(io)?;
    for i in 0..items {
        let body = format!(r#"{{"name":"item {i}","price":{}.5}}"#, i % 1000);
        w.append(&Op::Create(body.into_bytes()));
        if i % 10_000 == 9_999 {
            w.commit().map_err(|e| io(e.source))?;
        }
    }
    w.commit().map_err(|e| io(e.source))
}

/// Starts statepipe on `data`, waits until `/health` answers 200; how long
/// that took.
fn time_to_ready(options: &ServeOptions, data: &Path) -> Result<(Running, Duration), BenchError> {
    let started = Instant::now();
    let server = Running::start(options, Kind::Statepipe, data, &[])?;
    loop {
        if let Some((200, _)) = get(server.addr, "/health") {
            return Ok((server, started.elapsed()));
        }
        if started.elapsed() > Duration::from_secs(120) {
            server.kill();
            return Err(BenchError::failed("statepipe", "not ready in 120 s"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Restart times after SIGKILL, with `options.restart_items` items
/// journalled: `samples` restarts, each after the previous one was killed
/// with SIGKILL. Also returns the items the first one recovered.
///
/// # Errors
///
/// A server that does not start or recovers the wrong count.
pub fn restart(
    options: &ServeOptions,
    scratch: &Path,
    samples: usize,
) -> Result<Vec<f64>, BenchError> {
    let data = scratch.join("restart");
    journal_items(&data, options.restart_items)?;
    let mut times = Vec::new();
    for _ in 0..samples.max(1) {
        let (server, took) = time_to_ready(options, &data)?;
        let (status, body) = get(server.addr, &format!("/item/{}", options.restart_items))
            .ok_or_else(|| BenchError::failed("statepipe", "no answer after restart"))?;
        if status != 200 {
            server.kill();
            return Err(BenchError::failed(
                "statepipe",
                format!(
                    "item {} missing after restart: {status} {body}",
                    options.restart_items
                ),
            ));
        }
        times.push(took.as_secs_f64());
        server.kill(); // SIGKILL: the next start recovers from the same files
    }
    let _ = std::fs::remove_dir_all(&data);
    Ok(times)
}

/// Raises this process's open-file limit to its hard limit (the server
/// inherits it); the limit now.
pub fn raise_nofile() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) => {
            if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Err(_) => 0,
    }
}

fn rss_mb(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// statepipe's resident memory (MB) before and with `options.idle_connections`
/// keep-alive connections open, each having had one request answered.
///
/// # Errors
///
/// A server that does not start, or a connection that is refused.
pub fn idle_rss(options: &ServeOptions, scratch: &Path) -> Result<(f64, f64), BenchError> {
    let n = options.idle_connections;
    let limit = raise_nofile();
    // The server and this process each hold one descriptor per connection.
    if limit < n as u64 + 100 {
        return Err(BenchError::failed(
            "idle connections",
            format!(
                "the open-file limit is {limit}; {n} connections need about {}",
                n + 100
            ),
        ));
    }
    let data = scratch.join("idle");
    let cap = (2 * n).to_string();
    let server = Running::start(
        options,
        Kind::Statepipe,
        &data,
        &["--max-connections", &cap],
    )?;
    let before = rss_mb(server.pid()).unwrap_or(0.0);
    let mut conns = Vec::with_capacity(n);
    let fail = |e: String| BenchError::failed("idle connections", e);
    for i in 0..n {
        let mut s =
            TcpStream::connect(server.addr).map_err(|e| fail(format!("connect {i}: {e}")))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| fail(e.to_string()))?;
        s.write_all(b"GET /health HTTP/1.1\r\n\r\n")
            .map_err(|e| fail(e.to_string()))?;
        conns.push(s);
    }
    let mut buf = [0u8; 512];
    for (i, s) in conns.iter_mut().enumerate() {
        let got = s
            .read(&mut buf)
            .map_err(|e| fail(format!("read {i}: {e}")))?;
        if !buf[..got].starts_with(b"HTTP/1.1 200") {
            return Err(fail(format!(
                "connection {i} got {:?}",
                String::from_utf8_lossy(&buf[..got])
            )));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let with = rss_mb(server.pid()).unwrap_or(f64::NAN);
    drop(conns);
    server.stop()?;
    let _ = std::fs::remove_dir_all(&data);
    Ok((before, with))
}

/// How long the host is watched for stalls ([`crate::host::StallWatch`])
/// just before the overload run and again just after it.
pub const STALL_WATCH: Duration = Duration::from_secs(2);

/// statepipe's closed-loop `POST /item` capacity as `options` runs it (in
/// its cgroups, if it has any) with a ring of `ring` slots (the overload
/// run's: with a slow disk, the writes in flight per commit bound the
/// rate), over no more connections than the ring has slots (more would
/// spend the server's CPU on refusing the surplus, and understate what it
/// can accept): wrk's warm-up, then one measured window. Its rate counts
/// 2xx answers only.
///
/// # Errors
///
/// A server or wrk that fails.
pub fn post_capacity(
    options: &ServeOptions,
    scratch: &Path,
    ring: usize,
) -> Result<WrkResult, BenchError> {
    let data = scratch.join("capacity");
    let ring_s = ring.to_string();
    let mut options = options.clone();
    options.wrk.connections = options.wrk.connections.min(ring);
    let options = &options;
    let server = Running::start(
        options,
        Kind::Statepipe,
        &data,
        &["--ring-capacity", &ring_s],
    )?;
    let post = load::wrk_script(Endpoint::Post, super::GET_IDS);
    options
        .wrk
        .run(scratch, &post, server.addr, options.warmup)?;
    let r = options
        .wrk
        .run(scratch, &post, server.addr, options.window)?;
    server.stop()?;
    let _ = std::fs::remove_dir_all(&data);
    Ok(r)
}

/// The overload run: statepipe with a ring of `ring` slots, `generator`
/// sending POSTs at `rate` per second over `connections` connections for
/// `length`; then every 201 must be an item in the store.
///
/// # Errors
///
/// A server or generator that fails, or acknowledged writes missing.
pub fn overload(
    options: &ServeOptions,
    generator: &RateGenerator,
    scratch: &Path,
    ring: usize,
    connections: usize,
    rate: f64,
    length: Duration,
) -> Result<(RateResult, u64), BenchError> {
    let data = scratch.join("overload");
    let ring_s = ring.to_string();
    let server = Running::start(
        options,
        Kind::Statepipe,
        &data,
        &["--ring-capacity", &ring_s],
    )?;
    let url = format!("http://{}/item", server.addr);
    let spec = load::RateSpec {
        cpus: &options.wrk.cpus,
        url: &url,
        post: true,
        connections,
        rate,
        length,
    };
    let result = load::rate_run(generator, &spec, &scratch.join("generator"));
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            server.kill();
            return Err(e);
        }
    };
    // Every 201 is an item: count them, page by page.
    let mut held = 0u64;
    let mut after = 0u64;
    loop {
        let (status, body) = get(server.addr, &format!("/item?after={after}&limit=1000"))
            .ok_or_else(|| BenchError::failed("statepipe", "no answer to GET /item"))?;
        if status != 200 {
            return Err(BenchError::failed(
                "statepipe",
                format!("GET /item: {status}"),
            ));
        }
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| BenchError::failed("statepipe", e))?;
        held += v["items"].as_array().map_or(0, |a| a.len() as u64);
        match v["next_after"].as_u64() {
            Some(n) => after = n,
            None => break,
        }
    }
    server.stop()?;
    let _ = std::fs::remove_dir_all(&data);
    Ok((result, held))
}

/// `GET /item/{id}` with each server started inside a cgroup with a 1-CPU
/// quota (v1 `cpu.cfs_quota_us`, or v2 `cpu.max`), not pinned, wrk not
/// pinned either: statepipe sizes itself from affinity ∩ quota, tokio's
/// default runtime from the CPUs it sees. POSTs first fill the store.
///
/// # Errors
///
/// The cgroup cannot be made (the caller prints it and skips), a server or
/// wrk fails.
pub fn quota(
    options: &ServeOptions,
    scratch: &Path,
    kinds: &[Kind],
) -> Result<Vec<(Kind, WrkResult)>, BenchError> {
    let name = format!("statepipe-bench-serve-{}", std::process::id());
    let cgroup = crate::cgroup::QuotaCgroup::create(&name, 1.0)
        .map_err(|e| BenchError::failed("quota", e))?;
    let mut inside = options.clone();
    inside.server_cpus.clear();
    inside.wrk.cpus.clear();
    inside.cgroups.push(cgroup.dir().to_path_buf());
    let mut out = Vec::new();
    for &kind in kinds {
        let data = scratch.join(format!("quota-{}", kind.slug()));
        let server = Running::start(&inside, kind, &data, &[])?;
        let post = load::wrk_script(Endpoint::Post, super::GET_IDS);
        inside.wrk.run(scratch, &post, server.addr, inside.warmup)?;
        let get = load::wrk_script(Endpoint::GetOne, super::GET_IDS);
        inside.wrk.run(scratch, &get, server.addr, inside.warmup)?;
        let r = inside.wrk.run(scratch, &get, server.addr, inside.window)?;
        server.stop()?;
        let _ = std::fs::remove_dir_all(&data);
        out.push((kind, r));
    }
    drop(cgroup);
    Ok(out)
}
