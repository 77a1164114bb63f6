//! The extras of `statepipe bench serve`, run once with the first CPU
//! set's pinning: restart after SIGKILL with many items journalled, RSS
//! with idle keep-alive connections, `GET /item/{id}` under a 1-CPU quota,
//! and the overload run at twice a measured POST capacity.

use std::path::Path;

use statepipe_bench::report::ResultRow;
use statepipe_bench::serve::load::RateGenerator;
use statepipe_bench::serve::{self, extras, ServeOptions};

use crate::bench_serve_targets::ours;

fn one(case: &str, unit: &str, higher: bool, values: &[f64]) -> Option<ResultRow> {
    let s = statepipe_bench::stats::Summary::of(values)?;
    Some(ResultRow {
        case: case.into(),
        imp: "statepipe".into(),
        config: "mio I/O + ring, group commit".into(),
        unit: unit.into(),
        higher_is_better: higher,
        median: s.median,
        min: s.min,
        max: s.max,
        samples: s.samples,
    })
}

/// The ring slots statepipe gets in the overload run (and its capacity
/// measurement): fewer than the run's connections, so the ring can fill.
const OVERLOAD_RING: usize = 128;

/// What limits statepipe's capacity in the overload run, so that the
/// generator can offer twice it: a CPU quota and its period, a cap on
/// the data disk's write operations; none: the rounds' POST figure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OverloadLimits {
    pub(crate) quota: f64,
    pub(crate) period_us: u64,
    pub(crate) write_iops: u64,
}

impl OverloadLimits {
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.quota > 0.0 {
            parts.push(format!(
                "quota {} CPU per {} ms",
                self.quota,
                self.period_us as f64 / 1e3
            ));
        }
        if self.write_iops > 0 {
            parts.push(format!("disk writes capped at {} IOPS", self.write_iops));
        }
        parts.join(", ")
    }
}

/// The CPU quota the overload run falls back to where the disk cap it was
/// given cannot be made (no `blkio`/`io` controller, `--data` on no block
/// device) and it was given no quota: 0.3 CPU. Under a quota the run
/// measures the quota's pauses as well as admission (the book's
/// `docs/src/performance/serve.md` derives the floor they put under every
/// latency), so its notes say
/// that the fallback was taken and why.
const FALLBACK_QUOTA: f64 = 0.3;

/// The options of the overload run, and the cgroups they start statepipe
/// in (kept until the run is over; removed when dropped).
struct Overload {
    options: ServeOptions,
    _quota: Option<statepipe_bench::cgroup::QuotaCgroup>,
    _iops: Option<statepipe_bench::cgroup::WriteIopsCgroup>,
    /// What limits the capacity, or "" for nothing.
    limits: String,
    /// The limits in force (the fallback quota where it took the disk
    /// cap's place).
    used: OverloadLimits,
}

/// The POST capacity the overload run offers twice, and how to run it:
/// under the `limits`' cgroups, measured there first (a row of its own);
/// without limits (or no cgroup can be made: a note says why), the rounds'
/// POST figure.
fn overload_capacity(
    options: &ServeOptions,
    limits: OverloadLimits,
    scratch: &Path,
    measured: &[ResultRow],
    rows: &mut Vec<ResultRow>,
    notes: &mut String,
) -> anyhow::Result<(f64, Overload)> {
    let unlimited = |notes: &mut String, why: String| {
        if !why.is_empty() {
            notes.push_str(&format!("overload: no limit on statepipe: {why}\n"));
        }
        let capacity = ours(measured, "post/req/s").map_or(1000.0, |r| r.median);
        let plain = Overload {
            options: options.clone(),
            _quota: None,
            _iops: None,
            limits: String::new(),
            used: OverloadLimits {
                quota: 0.0,
                period_us: limits.period_us,
                write_iops: 0,
            },
        };
        (capacity, plain)
    };
    let OverloadLimits {
        quota,
        period_us,
        write_iops,
    } = limits;
    if quota <= 0.0 && write_iops == 0 {
        return Ok(unlimited(notes, String::new()));
    }
    let mut inside = options.clone();
    let mut under = Overload {
        options: options.clone(),
        _quota: None,
        _iops: None,
        limits: limits.describe(),
        used: limits,
    };
    if quota > 0.0 {
        anyhow::ensure!(
            quota * period_us as f64 >= 1000.0,
            "--overload-quota {quota} per --overload-period-us {period_us} is {:.0} µs a period; \
             the kernel's least is 1000 µs: give a longer period",
            quota * period_us as f64
        );
        let name = format!("statepipe-bench-overload-{}", std::process::id());
        let made =
            statepipe_bench::cgroup::QuotaCgroup::create_with_period(&name, quota, period_us);
        let cgroup = match made {
            Ok(c) => c,
            Err(e) => return Ok(unlimited(notes, e.to_string())),
        };
        inside.cgroups.push(cgroup.dir().to_path_buf());
        under._quota = Some(cgroup);
    }
    if write_iops > 0 {
        let name = format!("statepipe-bench-overload-io-{}", std::process::id());
        let made = statepipe_bench::cgroup::WriteIopsCgroup::create(&name, scratch, write_iops);
        let cgroup = match made {
            Ok(c) => c,
            Err(e) if quota <= 0.0 => {
                notes.push_str(&format!(
                    "overload: no cap on disk writes ({e}); a quota of {FALLBACK_QUOTA} CPU instead, \
                     which puts a floor under every latency the run measures\n"
                ));
                let instead = OverloadLimits {
                    quota: FALLBACK_QUOTA,
                    write_iops: 0,
                    ..limits
                };
                return overload_capacity(options, instead, scratch, measured, rows, notes);
            }
            Err(e) => return Ok(unlimited(notes, e.to_string())),
        };
        inside.cgroups.push(cgroup.dir().to_path_buf());
        under._iops = Some(cgroup);
    }
    eprintln!(
        "overload: POST capacity with statepipe under {}",
        under.limits
    );
    let r = extras::post_capacity(&inside, scratch, OVERLOAD_RING)?;
    let limited = |mut row: ResultRow| {
        row.config = format!("{}, {}", row.config, under.limits);
        row
    };
    rows.extend(one("overload 2x/capacity", "req/s", true, &[r.rate()]).map(limited));
    let p99 = r.p99_us as f64 / 1e3;
    rows.extend(one("overload 2x/capacity p99", "ms", false, &[p99]).map(limited));
    under.options = inside;
    Ok((r.rate().max(1.0), under))
}

/// Runs the extras once (restart after SIGKILL, idle connections, the
/// 1-CPU quota GET, the overload run) and adds their rows and notes.
pub(crate) fn extras_rows(
    options: &ServeOptions,
    conns: usize,
    limits: OverloadLimits,
    measured: &[ResultRow],
    rows: &mut Vec<ResultRow>,
    notes: &mut String,
) -> anyhow::Result<()> {
    let scratch = options.data.join(format!("extras-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    eprintln!(
        "restart: journalling {} items, then 3 restarts each after SIGKILL",
        options.restart_items
    );
    let times = extras::restart(options, &scratch, 3)?;
    let case = format!(
        "restart after SIGKILL, {} items journalled",
        options.restart_items
    );
    rows.extend(one(&case, "s", false, &times));
    eprintln!("idle: {} keep-alive connections", options.idle_connections);
    match extras::idle_rss(options, &scratch) {
        Ok((before, with)) => {
            rows.extend(one("RSS, idle server", "MB", false, &[before]));
            rows.extend(one(
                &format!(
                    "RSS, {} idle keep-alive connections",
                    options.idle_connections
                ),
                "MB",
                false,
                &[with],
            ));
        }
        Err(e) => notes.push_str(&format!("idle connections: skipped: {e}\n")),
    }
    eprintln!("quota: GET /item/{{id}} with each server in a cgroup with a 1-CPU quota");
    match extras::quota(
        options,
        &scratch,
        &[
            serve::server::Kind::Statepipe,
            serve::server::Kind::Axum {
                worker_threads: None,
                typed: true,
            },
        ],
    ) {
        Ok(results) => {
            for (kind, r) in results {
                let mut add = |case: &str, unit: &str, higher: bool, v: f64| {
                    rows.extend(one(case, unit, higher, &[v]).map(|mut row| {
                        row.imp = kind.imp().into();
                        row.config = kind.config();
                        row
                    }))
                };
                add(
                    "quota 1 CPU, unpinned/get-one/req/s",
                    "req/s",
                    true,
                    r.rate(),
                );
                add(
                    "quota 1 CPU, unpinned/get-one/p99",
                    "ms",
                    false,
                    r.p99_us as f64 / 1e3,
                );
                add(
                    "quota 1 CPU, unpinned/get-one/p99.9",
                    "ms",
                    false,
                    r.p999_us as f64 / 1e3,
                );
                add(
                    "quota 1 CPU, unpinned/get-one/non-2xx",
                    "responses",
                    false,
                    r.status as f64,
                );
            }
        }
        Err(e) => notes.push_str(&format!("quota: skipped: {e}\n")),
    }
    if let Some(generator) = &options.rate {
        let (capacity, under) =
            overload_capacity(options, limits, &scratch, measured, rows, notes)?;
        let rate = 2.0 * capacity;
        let ring = OVERLOAD_RING;
        let name = generator.name();
        eprintln!("overload: {name} at {rate:.0} POST/s, {conns} connections, ring of {ring}");
        // The CPUs the server and the generator run on, watched for the
        // moments the host takes them away, just before the run and just
        // after it (not during: see `StallWatch`).
        let cpus: Vec<usize> = statepipe_bench::host::usable_cpus()
            .iter()
            .map(|c| c.id)
            .collect();
        let watch = || statepipe_bench::host::StallWatch::over(&cpus, extras::STALL_WATCH);
        let before = watch();
        let (r, held) = extras::overload(
            &under.options,
            generator,
            &scratch,
            ring,
            conns,
            rate,
            options.window,
        )?;
        let stalls = before.then(watch());
        eprintln!("overload: {}", stalls.describe());
        notes.push_str(&format!("overload: {}\n", stalls.describe()));
        if stalls.watched() {
            rows.extend(one(
                "overload 2x/host stalls",
                "%",
                false,
                &[100.0 * stalls.lost()],
            ));
            rows.extend(one(
                "overload 2x/host longest stall",
                "ms",
                false,
                &[stalls.longest().as_secs_f64() * 1e3],
            ));
            rows.extend(one(
                "overload 2x/host p99 floor",
                "ms",
                false,
                &[stalls.floor(0.99).as_secs_f64() * 1e3],
            ));
        }
        let created = r.count(201);
        rows.extend(one("overload 2x/offered", "req/s", true, &[r.rate]));
        rows.extend(one("overload 2x/sent", "req/s", true, &[r.sent]));
        rows.extend(one("overload 2x/answered", "req/s", true, &[r.achieved]));
        rows.extend(one("overload 2x/2xx", "req/s", true, &[r.succeeded]));
        rows.extend(one("overload 2x/201", "responses", true, &[created as f64]));
        rows.extend(one(
            "overload 2x/429",
            "responses",
            false,
            &[r.count(429) as f64],
        ));
        rows.extend(one(
            "overload 2x/429 p99",
            "ms",
            false,
            &[r.rejected_p99_ms],
        ));
        rows.extend(one(
            "overload 2x/accepted p99",
            "ms",
            false,
            &[r.accepted_p99_ms],
        ));
        rows.extend(one(
            "overload 2x/errors",
            "requests",
            false,
            &[r.errors as f64],
        ));
        rows.extend(one(
            "overload 2x/acked writes lost",
            "items",
            false,
            &[created.saturating_sub(held) as f64],
        ));
        notes.push_str(&format!(
            "overload: {name}: statuses {:?}; {held} items held for {created} 201s (ring {ring}, {conns} connections, {}{})\n",
            r.statuses,
            if !under.limits.is_empty() {
                let mut s = format!("statepipe under {}, offered twice its capacity there", under.limits);
                let used = under.used;
                if used.quota > 0.0 {
                    s.push_str(&format!(
                        "; the quota alone adds a wait whose p99 is about {:.2} ms",
                        (0.99 - used.quota).max(0.0) * used.period_us as f64 / 1e3
                    ));
                }
                s
            } else {
                "statepipe with no CPU quota, offered twice the rounds' POST capacity".into()
            },
            match generator {
                RateGenerator::H2load(_) => ", h2load --rps per connection: latency from each request's send",
                RateGenerator::Oha(_) => ", oha --latency-correction: latency from each request's scheduled start",
            }
        ));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}
