//! `statepipe bench serve`: `statepipe serve` against the same item service
//! on axum (tokio's default multi-thread runtime, and oversubscribed with 16
//! worker threads) and on actix-web (k workers), each with the same
//! durability (`bench/serve-peers`), under a real load generator.
//!
//! Each round starts every server in turn on a fresh data directory, pinned
//! to the same k CPUs (`taskset -c LIST`; [`cpus`]: k = 1 unless asked), and
//! drives it from the other CPUs with `wrk`
//! (keep-alive connections, closed loop): `POST /item` (which also fills
//! the store), then `GET /item/{id}` and `GET /item?limit=10`, each a
//! warm-up then a measured window. statepipe sizes itself from its
//! affinity (k workers), tokio's default runtime too, actix-web is told
//! `workers(k)`. Rounds interleave the servers, in a
//! rotating order; the report gives the median and spread over rounds.
//! After each window a progress line says where its CPU time went
//! ([`cpu`]): the server's threads by group, and wrk's, each against the
//! CPUs it had, so a figure capped by one busy thread, by the server's
//! CPUs or by the generator's says which.
//!
//! Then, for `statepipe serve` alone ([`extras`]): restart time after
//! SIGKILL with 1 M items journalled, resident memory with 10,000 idle
//! keep-alive connections, and a rate-driven overload run at twice the
//! measured POST capacity (`oha -q`, or `h2load --rps`), whose 201s are
//! then all found in the store.

pub mod cpu;
pub mod cpus;
pub mod extras;
pub mod load;
pub mod server;

use std::path::PathBuf;
use std::time::Duration;

use crate::harness::Metric;
use crate::report::ResultRow;
use crate::stats::Summary;
use crate::BenchError;
use load::{Endpoint, Wrk, WrkResult};
use server::{Kind, Running};

/// How to run the bench.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The `statepipe` executable (its `serve` subcommand is ours).
    pub statepipe: PathBuf,
    /// The `serve-peer` executable (bench/serve-peers).
    pub peer: PathBuf,
    /// The load generator.
    pub wrk: Wrk,
    /// The generator of the overload run (skipped without one).
    pub rate: Option<load::RateGenerator>,
    /// The CPUs every server is pinned to (k of them; empty: not pinned).
    pub server_cpus: Vec<usize>,
    /// Where the data directories go (a fresh one per server start).
    pub data: PathBuf,
    /// Warm-up before each measured window.
    pub warmup: Duration,
    /// Each measured window.
    pub window: Duration,
    /// Rounds.
    pub samples: usize,
    /// Whether to run the extras (restart, idle memory, overload).
    pub extras: bool,
    /// Items journalled before the restart measurement.
    pub restart_items: u64,
    /// Idle keep-alive connections of the memory measurement.
    pub idle_connections: usize,
    /// Cgroups the servers start in (`cgroup.procs` of each directory):
    /// one per controller (a CPU quota, a cap on disk writes).
    pub cgroups: Vec<PathBuf>,
    /// The peers to run, by [`Kind::slug`] (empty: all of [`contenders`]);
    /// statepipe always runs.
    pub peers: Vec<String>,
    /// The GET endpoints to measure after `POST /item` (which always runs
    /// first: it fills the store); empty: both.
    pub gets: Vec<Endpoint>,
}

impl ServeOptions {
    /// One line per setting, printed before the run.
    pub fn describe(&self) -> String {
        format!(
            "serve: servers pinned to CPUs {} (k={}), wrk ({}) pinned to CPUs {}, {} keep-alive connections, \
             {} s warm-up + {} s measured per endpoint, {} round(s); data under {}{}",
            cpus::CpuList(&self.server_cpus),
            self.server_cpus.len(),
            self.wrk.path.display(),
            cpus::CpuList(&self.wrk.cpus),
            self.wrk.connections,
            self.warmup.as_secs(),
            self.window.as_secs(),
            self.samples,
            self.data.display(),
            file_system(&self.data)
                .map(|(kind, source)| format!(" ({kind} on {source}: the disk the journals fsync to)"))
                .unwrap_or_default(),
        )
    }

    /// The contenders this run starts: statepipe, then the chosen peers.
    ///
    /// # Errors
    ///
    /// A name in `peers` that is no contender's slug.
    pub fn kinds(&self) -> Result<Vec<Kind>, BenchError> {
        let all = contenders(self.server_cpus.len().max(1));
        if let Some(bad) = self
            .peers
            .iter()
            .find(|p| !all.iter().any(|k| k.slug() == **p))
        {
            let known: Vec<String> = all.iter().skip(1).map(|k| k.slug()).collect();
            return Err(BenchError::failed(
                "bench serve",
                format!("no peer named {bad:?}; the peers are {}", known.join(", ")),
            ));
        }
        Ok(all
            .into_iter()
            .filter(|k| chosen(*k, &self.peers))
            .collect())
    }

    /// The endpoints each server start measures, in order.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        Endpoint::ALL
            .into_iter()
            .filter(|e| *e == Endpoint::Post || self.gets.is_empty() || self.gets.contains(e))
            .collect()
    }
}

/// Whether `--peers` (`peers`, empty: the default) runs `kind`: statepipe
/// always, the reference rows only when named, a peer when named or by
/// default.
fn chosen(kind: Kind, peers: &[String]) -> bool {
    match kind {
        Kind::Statepipe => true,
        Kind::StatepipeAppend | Kind::StatepipeAdaptive => peers.contains(&kind.slug()),
        _ => peers.is_empty() || peers.contains(&kind.slug()),
    }
}

/// The contenders: statepipe first (ours), then the peers, each decoding
/// POST bodies with a typed `Json<T>` extractor as its documentation does;
/// the two fastest peers also as they were first written here, through a
/// `serde_json::Value` (the report compares against the best row either way).
/// actix-web gets `workers` workers (k, the servers' CPUs). Last,
/// statepipe with its journal appending and with its handlers spinning
/// before they sleep, reference rows that run only when named and are no
/// peers of the targets.
pub fn contenders(workers: usize) -> Vec<Kind> {
    vec![
        Kind::Statepipe,
        Kind::Axum {
            worker_threads: None,
            typed: true,
        },
        Kind::Axum {
            worker_threads: Some(16),
            typed: true,
        },
        Kind::Axum {
            worker_threads: Some(16),
            typed: false,
        },
        Kind::Actix {
            workers,
            typed: true,
        },
        Kind::Actix {
            workers,
            typed: false,
        },
        Kind::StatepipeAppend,
        Kind::StatepipeAdaptive,
    ]
}

/// Ids the GET endpoints draw from (the POST phase creates far more).
pub const GET_IDS: u64 = 1000;

/// The per-round figures of one contender on one endpoint.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    /// wrk's figures per round.
    pub wrk: Vec<WrkResult>,
    /// For statepipe's POST: (fsyncs per second, writes per fsync) per round.
    pub journal: Vec<(f64, f64)>,
}

/// Runs the rounds; `progress` gets a line per measured window.
///
/// # Errors
///
/// A server that does not start or a load generator that fails.
pub fn run(
    options: &ServeOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<Vec<(Kind, Endpoint, Samples)>, BenchError> {
    let kinds = options.kinds()?;
    let endpoints = options.endpoints();
    let mut results: Vec<(Kind, Endpoint, Samples)> = kinds
        .iter()
        .flat_map(|k| endpoints.iter().map(move |e| (*k, *e, Samples::default())))
        .collect();
    let scratch = tempdir_in(&options.data)?;
    for round in 0..options.samples {
        for i in 0..kinds.len() {
            let kind = kinds[(i + round) % kinds.len()];
            let data = scratch.join(format!("{}-{round}", kind.slug()));
            let server = Running::start(options, kind, &data, &[])?;
            for &endpoint in &endpoints {
                let script = load::wrk_script(endpoint, GET_IDS);
                options
                    .wrk
                    .run(&scratch, &script, server.addr, options.warmup)?;
                let before = (matches!(
                    kind,
                    Kind::Statepipe | Kind::StatepipeAppend | Kind::StatepipeAdaptive
                ) && endpoint == Endpoint::Post)
                    .then(|| server.journal_counters())
                    .flatten();
                let (threads, wrk_cpu, t0) = (
                    cpu::Threads::of(server.pid()),
                    cpu::children_cpu_s(),
                    std::time::Instant::now(),
                );
                let r = options
                    .wrk
                    .run(&scratch, &script, server.addr, options.window)?;
                let took = t0.elapsed();
                let used = threads.usage(&cpu::Threads::of(server.pid()), took);
                let wrk_cpu = (cpu::children_cpu_s() - wrk_cpu) / took.as_secs_f64();
                let slot = results
                    .iter_mut()
                    .find(|(k, e, _)| *k == kind && *e == endpoint)
                    .expect("every pair has a slot");
                if let (Some(b), Some(a)) = (before, server.journal_counters()) {
                    let secs = r.duration_us as f64 / 1e6;
                    let fsyncs = (a.fsyncs - b.fsyncs).max(1.0);
                    let writes = r.requests.saturating_sub(r.status) as f64;
                    slot.2.journal.push((fsyncs / secs, writes / fsyncs));
                }
                progress(&format!(
                    "round {}/{}: {:<22} {:<20} {:>9.0} ok req/s  p50 {:>7.2} ms  p99 {:>7.2} ms  non-2xx {}  socket errors {}",
                    round + 1,
                    options.samples,
                    kind.label(),
                    endpoint.name(),
                    r.rate(),
                    r.p50_us as f64 / 1e3,
                    r.p99_us as f64 / 1e3,
                    r.status,
                    r.socket_errors()
                ));
                progress(&format!(
                    "  {}",
                    cpu::describe(
                        &used,
                        options.server_cpus.len(),
                        wrk_cpu,
                        options.wrk.cpus.len()
                    )
                ));
                slot.2.wrk.push(r);
            }
            server.stop()?;
            let _ = std::fs::remove_dir_all(&data);
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(results)
}

/// A fresh directory under `root`.
pub(crate) fn tempdir_in(root: &std::path::Path) -> Result<PathBuf, BenchError> {
    let dir = root.join(format!("statepipe-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .map_err(|e| BenchError::failed("bench serve", format!("creating {dir:?}: {e}")))?;
    Ok(dir)
}

fn row(case: String, unit: &str, higher: bool, kind: Kind, values: &[f64]) -> Option<ResultRow> {
    let metric = Metric {
        case,
        unit: unit.into(),
        higher_is_better: higher,
    };
    Summary::of(values).map(|s| ResultRow::new(&metric, kind.imp(), &kind.config(), s))
}

/// The report rows of the rounds: per endpoint req/s (successful answers
/// only), p50, p99, p99.9, max (ms), non-2xx (refusals and failures: their
/// own column, never throughput) and socket errors, and for statepipe's
/// POST the fsyncs per second and writes per fsync.
pub fn rows(results: &[(Kind, Endpoint, Samples)]) -> Vec<ResultRow> {
    let mut rows = Vec::new();
    for endpoint in Endpoint::ALL {
        let key = endpoint.key();
        let of = |f: &dyn Fn(&WrkResult) -> f64| {
            results
                .iter()
                .filter(|r| r.1 == endpoint)
                .map(move |(k, _, s)| (*k, s.wrk.iter().map(f).collect::<Vec<f64>>()))
                .collect::<Vec<_>>()
        };
        type Figure = (&'static str, &'static str, bool, fn(&WrkResult) -> f64);
        let figures: [Figure; 7] = [
            ("req/s", "req/s", true, |r| r.rate()),
            ("p50", "ms", false, |r| r.p50_us as f64 / 1e3),
            ("p99", "ms", false, |r| r.p99_us as f64 / 1e3),
            ("p99.9", "ms", false, |r| r.p999_us as f64 / 1e3),
            ("max", "ms", false, |r| r.max_us as f64 / 1e3),
            ("non-2xx", "responses", false, |r| r.status as f64),
            ("socket errors", "errors", false, |r| {
                r.socket_errors() as f64
            }),
        ];
        for (name, unit, higher, f) in figures {
            for (kind, values) in of(&f) {
                rows.extend(row(format!("{key}/{name}"), unit, higher, kind, &values));
            }
        }
        for (kind, _, s) in results.iter().filter(|r| r.1 == endpoint) {
            if s.journal.is_empty() {
                continue;
            }
            let fsyncs: Vec<f64> = s.journal.iter().map(|j| j.0).collect();
            let batch: Vec<f64> = s.journal.iter().map(|j| j.1).collect();
            rows.extend(row(format!("{key}/fsyncs"), "per s", false, *kind, &fsyncs));
            rows.extend(row(
                format!("{key}/writes per fsync"),
                "writes",
                true,
                *kind,
                &batch,
            ));
        }
    }
    rows
}

/// The file system that holds `path` (or would, once created): its type
/// and source, from the longest mount point in `/proc/self/mounts` that is
/// a prefix of the nearest existing ancestor; `None` where that cannot be
/// read (not Linux).
fn file_system(path: &std::path::Path) -> Option<(String, String)> {
    let existing = path.ancestors().find(|p| p.exists())?.canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (source, point, kind) = (f.next()?, f.next()?, f.next()?);
            existing
                .starts_with(point)
                .then(|| (point.len(), kind.to_string(), source.to_string()))
        })
        .max_by_key(|m| m.0)
        .map(|(_, kind, source)| (kind, source))
}

#[cfg(test)]
mod tests {
    use super::{chosen, contenders, Kind};

    #[test]
    fn the_appending_statepipe_runs_only_when_named() {
        let run = |peers: &[&str]| -> Vec<String> {
            let peers: Vec<String> = peers.iter().map(|p| p.to_string()).collect();
            contenders(2)
                .into_iter()
                .filter(|k| chosen(*k, &peers))
                .map(Kind::slug)
                .collect()
        };
        let default = run(&[]);
        assert_eq!(default[0], "statepipe");
        assert!(default.contains(&"actix-web".to_string()));
        assert!(!default.contains(&"statepipe-append".to_string()));
        assert!(!default.contains(&"statepipe-adaptive".to_string()));
        assert_eq!(
            run(&["actix-web", "statepipe-append"]),
            ["statepipe", "actix-web", "statepipe-append"]
        );
    }

    #[test]
    fn a_path_not_made_yet_is_on_its_ancestors_file_system() {
        let here = std::env::temp_dir();
        let fs = super::file_system(&here).expect("/proc/self/mounts names it");
        assert!(!fs.0.is_empty() && !fs.1.is_empty());
        assert_eq!(super::file_system(&here.join("not/made/yet")), Some(fs));
    }
}
