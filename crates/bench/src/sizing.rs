//! `statepipe bench sizing`: one CPU-bound pipeline under a real cgroup CPU
//! quota of [`QUOTA_CPUS`], run by runtimes that size themselves differently.
//!
//! The pipeline is the scaling workload of [`crate::pipeline`]:
//! [`SCALING_STAGES`] stages of [`spin_work`] of about
//! [`SCALING_STAGE_NS`] each; every item carries the instant it was made, and
//! the sink records its age in an HDR histogram. Contenders:
//!
//! | impl | config |
//! |---|---|
//! | `statepipe` | `Config::new()`: the worker count from [`usable_cpus`] (the quota's) |
//! | `statepipe` | `.workers(n)` with `n` the host's CPUs in the affinity mask |
//! | `spinning-workers` | the same `n` workers, idle ones busy-spinning ([`Spin::For`]) as a spinning runtime's do |
//! | `tokio` | `Runtime::new()` (multi-thread, its default worker count); a task per stage, bounded `mpsc` channels |
//!
//! Each sample is a child process: the parent creates the cgroup
//! ([`QuotaCgroup`]), then runs the `child` command it was given with a
//! [`ChildRequest`] as its last argument; the child (through [`child_main`])
//! moves itself into the cgroup before it starts a thread, runs one contender
//! and prints a [`ChildResult`] as JSON. The parent itself stays outside the
//! quota. Metrics: `sizing/quota/throughput` (M items/s, from making the
//! first item to summing the last) and `sizing/quota/p99` (ns, the 99th
//! percentile of the items' ages at the sink).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use statepipe_pipeline::{Config, Pipeline};
use statepipe_pipeline::{Spin, WORKERS_ENV};
use statepipe_sys::cpus::usable_cpus;

use crate::cgroup::{self, CgroupError, QuotaCgroup};
use crate::harness::{self, Contender, Group, Metric, SampleDone};
use crate::host::Host;
use crate::pipeline::peers::HANG_LIMIT;
use crate::pipeline::statepipe::{NAME, SCALING_COST_NS};
use crate::pipeline::workload::{calibrate_iters_for, spin_work, Scaling, SCALING_STAGES};
use crate::pipeline::{CAPACITY, SCALING_STAGE_NS};
use crate::report::Report;
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The quota of the cgroup every contender runs in, in CPUs.
pub const QUOTA_CPUS: f64 = 1.0;
/// The throughput case.
pub const THROUGHPUT_CASE: &str = "sizing/quota/throughput";
/// The latency case.
pub const P99_CASE: &str = "sizing/quota/p99";
/// How long `spinning-workers`' idle workers spin before they sleep.
pub const SPINNING: Duration = Duration::from_millis(2);
/// The implementation name of the spinning contender.
pub const SPINNING_NAME: &str = "spinning-workers";
/// The implementation name of the tokio contender.
pub const TOKIO_NAME: &str = "tokio";

/// Who runs the pipeline in one child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Runner {
    /// statepipe, `Config::new()`: as many workers as [`usable_cpus`] counts.
    Auto,
    /// statepipe, `.workers(n)`.
    Forced(usize),
    /// statepipe, `.workers(n)`, idle workers spinning [`SPINNING`].
    Spinning(usize),
    /// tokio's multi-thread runtime with its default worker count.
    Tokio,
}

/// What a child is asked to run; sent as JSON, the last argument.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildRequest {
    /// The contender.
    pub runner: Runner,
    /// Items through the pipeline.
    pub items: u64,
    /// [`spin_work`] iterations per stage and item.
    pub iters: u32,
    /// The cgroup to enter first; `None` runs where the child is.
    pub cgroup: Option<PathBuf>,
}

/// What a child measured; printed as JSON on its last line of stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildResult {
    /// Millions of items per second.
    pub mitems_per_s: f64,
    /// The 99th percentile of the items' ages at the sink, in nanoseconds.
    pub p99_ns: f64,
    /// The workers (statepipe) or worker threads (tokio) that ran.
    pub workers: usize,
    /// [`usable_cpus`]'s line, as the child saw it inside the cgroup.
    pub cpus: String,
}

/// The entry point of a child: enters the cgroup, runs the request and
/// returns the [`ChildResult`] as JSON for the caller to print.
///
/// Call it before the process starts any thread: threads started before the
/// move stay where they are on cgroup v1.
///
/// # Errors
///
/// A request that does not parse, a cgroup that cannot be entered, or a run
/// that fails its check.
pub fn child_main(request: &str) -> Result<String, BenchError> {
    let request: ChildRequest = serde_json::from_str(request)
        .map_err(|e| BenchError::failed("sizing child", format!("bad request: {e}")))?;
    if let Some(dir) = &request.cgroup {
        cgroup::enter(dir).map_err(|e| BenchError::failed("sizing child", e))?;
    }
    let case = Scaling::new(request.items, SCALING_STAGES, request.iters);
    let result = run_runner(request.runner, &case)?;
    serde_json::to_string(&result).map_err(|e| BenchError::failed("sizing child", e))
}

/// Runs `runner` on `case` in this process.
///
/// # Errors
///
/// [`BenchError::WrongSum`] or [`BenchError::WrongCount`] when the outputs are
/// wrong; [`BenchError::Failed`] when the runtime fails.
pub fn run_runner(runner: Runner, case: &Scaling) -> Result<ChildResult, BenchError> {
    let cpus = usable_cpus().to_string();
    let (run, workers) = match runner {
        Runner::Auto => statepipe_run(case, Config::new())?,
        Runner::Forced(n) => statepipe_run(case, Config::new().workers(n))?,
        Runner::Spinning(n) => {
            statepipe_run(case, Config::new().workers(n).spin(Spin::For(SPINNING)))?
        }
        Runner::Tokio => tokio_run(case)?,
    };
    run.check(&format!("{runner:?}"), case)?;
    Ok(ChildResult {
        mitems_per_s: case.items as f64 / run.elapsed.as_secs_f64().max(1e-9) / 1e6,
        p99_ns: run.ages.value_at_quantile(0.99) as f64,
        workers,
        cpus,
    })
}

/// A finished run: the outputs' sum and count, the items' ages, the time.
struct Run {
    sum: u64,
    outputs: u64,
    ages: Histogram<u64>,
    elapsed: Duration,
}

impl Run {
    fn check(&self, who: &str, case: &Scaling) -> Result<(), BenchError> {
        if self.outputs != case.items {
            return Err(BenchError::WrongCount {
                who: who.into(),
                expected: case.items,
                got: self.outputs,
            });
        }
        if self.sum != case.expected {
            return Err(BenchError::WrongSum {
                who: who.into(),
                expected: case.expected,
                got: self.sum,
            });
        }
        Ok(())
    }
}

/// The sink's fold: a sum, a count and the items' ages.
struct Sink {
    sum: u64,
    outputs: u64,
    ages: Histogram<u64>,
}

impl Sink {
    fn new() -> Sink {
        Sink {
            sum: 0,
            outputs: 0,
            // 1 ns to an hour, 3 significant digits; auto-resizing never needed.
            ages: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds"),
        }
    }

    #[inline]
    fn add(&mut self, (y, made): (u64, Instant)) {
        self.sum = self.sum.wrapping_add(y);
        self.outputs += 1;
        let age = u64::try_from(made.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.ages.saturating_record(age.max(1));
    }
}

/// The scaling pipeline over `(item, made at)` pairs.
fn stamped_pipeline(case: &Scaling) -> Pipeline<(u64, Instant), (u64, Instant)> {
    let iters = case.iters;
    let stage = move |s: usize| {
        Pipeline::map(&format!("spin {s}"), move |(x, made): (u64, Instant)| {
            (spin_work(x, iters), made)
        })
        .cost(SCALING_COST_NS)
    };
    (1..case.stages.max(1)).fold(stage(0), |p, s| p.then(stage(s)))
}

/// Runs `case` on statepipe with `config` (rings of [`CAPACITY`], workers
/// pinned): items made lazily on the first worker (`deploy_with`), each
/// stamped as it is made, and summed on the last; returns the run and the
/// worker count.
fn statepipe_run(case: &Scaling, config: Config) -> Result<(Run, usize), BenchError> {
    let who = "statepipe sizing/quota";
    let config = config.capacity(CAPACITY).pin(true);
    let pipeline = stamped_pipeline(case);
    let plan = config
        .plan_for(&pipeline.units())
        .map_err(|e| BenchError::failed(who, e))?;
    let folded = Arc::new(Mutex::new(None));
    let mut sink = SinkOnDrop {
        sink: Some(Sink::new()),
        out: Arc::clone(&folded),
    };
    let _watchdog = Watchdog::arm(who, HANG_LIMIT);
    let t0 = Instant::now();
    let running = pipeline
        .deploy_with(
            &config,
            (0..case.items).map(|x| (x, Instant::now())),
            move |_, out| sink.add(out),
        )
        .map_err(|e| BenchError::failed(who, e))?;
    running.join().map_err(|e| BenchError::failed(who, e))?;
    let elapsed = t0.elapsed();
    let sink = folded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or_else(|| BenchError::failed(who, "the sink was not dropped at the end"))?;
    let run = Run {
        sum: sink.sum,
        outputs: sink.outputs,
        ages: sink.ages,
        elapsed,
    };
    Ok((run, plan.worker_count))
}

/// A [`Sink`] handed over when the runtime drops it.
struct SinkOnDrop {
    sink: Option<Sink>,
    out: Arc<Mutex<Option<Sink>>>,
}

impl SinkOnDrop {
    /// A method, so the closure calling it moves the whole value in.
    #[inline]
    fn add(&mut self, out: (u64, Instant)) {
        if let Some(s) = self.sink.as_mut() {
            s.add(out);
        }
    }
}

impl Drop for SinkOnDrop {
    fn drop(&mut self) {
        *self.out.lock().unwrap_or_else(|p| p.into_inner()) = self.sink.take();
    }
}

/// Runs `case` on tokio as its documentation shows: `Runtime::new()` (the
/// multi-thread scheduler, one worker per CPU it counts), a task per stage
/// joined by bounded `mpsc` channels of [`CAPACITY`], a source task that
/// stamps each item as it sends it, and a sink task. Each stage's work
/// between two `.await`s is about a microsecond, far below the 10 to 100 µs
/// tokio's docs give as the most a task should run without yielding.
fn tokio_run(case: &Scaling) -> Result<(Run, usize), BenchError> {
    use tokio::sync::mpsc;
    let who = "tokio sizing/quota";
    let runtime = tokio::runtime::Runtime::new().map_err(|e| BenchError::failed(who, e))?;
    let workers = runtime.metrics().num_workers();
    let (items, iters) = (case.items, case.iters);
    let _watchdog = Watchdog::arm(who, HANG_LIMIT);
    let t0 = Instant::now();
    let sink = runtime.block_on(async move {
        let (tx, mut rx) = mpsc::channel::<(u64, Instant)>(CAPACITY);
        tokio::spawn(async move {
            for x in 0..items {
                if tx.send((x, Instant::now())).await.is_err() {
                    return;
                }
            }
        });
        for _ in 0..case.stages {
            let (tx, next) = mpsc::channel(CAPACITY);
            tokio::spawn(async move {
                while let Some((x, made)) = rx.recv().await {
                    if tx.send((spin_work(x, iters), made)).await.is_err() {
                        return;
                    }
                }
            });
            rx = next;
        }
        tokio::spawn(async move {
            let mut sink = Sink::new();
            while let Some(out) = rx.recv().await {
                sink.add(out);
            }
            sink
        })
        .await
    });
    let elapsed = t0.elapsed();
    let sink = sink.map_err(|e| BenchError::failed(who, format!("the sink task: {e}")))?;
    let run = Run {
        sum: sink.sum,
        outputs: sink.outputs,
        ages: sink.ages,
        elapsed,
    };
    Ok((run, workers))
}

/// What `statepipe bench sizing` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizingOptions {
    /// Fewer items per sample.
    pub quick: bool,
    /// Samples per contender.
    pub samples: usize,
    /// The command that runs [`child_main`] on its last argument, program
    /// first (e.g. this executable and a hidden subcommand).
    pub child: Vec<OsString>,
}

/// A prepared run: the cgroup (removed when this is dropped), the
/// calibrated case, the host's CPU count.
#[derive(Debug)]
pub struct Setup {
    options: SizingOptions,
    cgroup: QuotaCgroup,
    case: Scaling,
    host_cpus: usize,
}

impl Setup {
    /// Creates the quota cgroup and calibrates the stages (outside the
    /// quota, so throttling does not skew it).
    ///
    /// # Errors
    ///
    /// [`CgroupError`] when the cgroup cannot be made: the run cannot take
    /// place here, and the caller says why and skips it.
    pub fn new(options: &SizingOptions) -> Result<Setup, CgroupError> {
        let name = format!("statepipe-bench-sizing-{}", std::process::id());
        let cgroup = QuotaCgroup::create(&name, QUOTA_CPUS)?;
        let items = if options.quick { 50_000 } else { 300_000 };
        let iters = calibrate_iters_for(SCALING_STAGE_NS);
        Ok(Setup {
            options: options.clone(),
            cgroup,
            case: Scaling::new(items, SCALING_STAGES, iters),
            host_cpus: usable_cpus().ids.len(),
        })
    }

    /// Lines describing the run, printed under the host's.
    pub fn describe(&self) -> String {
        format!(
            "sizing: cgroup {} with a quota of {QUOTA_CPUS:.1} CPU per {} ms; each sample a \
             child process that enters it before starting a thread\n\
             sizing: {} items x {} stages of spin_work({} iters) ~ {SCALING_STAGE_NS} ns; \
             rings and channels of {CAPACITY}; every answer checked; p99 = age of an item \
             from being made to reaching the sink\n\
             sizing: forced and spinning use the host's {} CPU(s) in the affinity mask",
            self.cgroup.dir().display(),
            cgroup::PERIOD_US / 1000,
            self.case.items,
            self.case.stages,
            self.case.iters,
            self.host_cpus
        )
    }

    /// The contenders, ours first.
    fn runners(&self) -> [(&'static str, Runner); 4] {
        let n = self.host_cpus;
        [
            (NAME, Runner::Auto),
            (NAME, Runner::Forced(n)),
            (SPINNING_NAME, Runner::Spinning(n)),
            (TOKIO_NAME, Runner::Tokio),
        ]
    }

    /// Runs every contender `samples` times, each sample in its own child
    /// inside the cgroup, and returns the report. `probes` (from
    /// [`probe`](Setup::probe)) give each row's worker count.
    ///
    /// # Errors
    ///
    /// A child that cannot be started, fails, or prints no result.
    pub fn run(
        &self,
        host: &Host,
        probes: &[(Runner, ChildResult)],
        progress: &mut dyn FnMut(&SampleDone<'_>),
    ) -> Result<Report, BenchError> {
        let contenders = self
            .runners()
            .into_iter()
            .map(|(imp, runner)| {
                let request = ChildRequest {
                    runner,
                    items: self.case.items,
                    iters: self.case.iters,
                    cgroup: Some(self.cgroup.dir().to_path_buf()),
                };
                let child = self.options.child.clone();
                let workers = probes
                    .iter()
                    .find(|(r, _)| *r == runner)
                    .map(|(_, p)| p.workers);
                Contender::new(imp, config_of(runner, workers), move || {
                    let got = run_child(&child, &request)?;
                    Ok(vec![got.mitems_per_s, got.p99_ns])
                })
            })
            .collect();
        let group = Group {
            name: "sizing/quota".into(),
            metrics: vec![
                Metric {
                    case: THROUGHPUT_CASE.into(),
                    unit: "M items/s".into(),
                    higher_is_better: true,
                },
                Metric::latency_ns(P99_CASE),
            ],
            contenders,
        };
        let rows = harness::run(vec![group], self.options.samples, progress)?;
        Ok(Report::new("sizing", host, rows))
    }

    /// One short child run of each contender, to show what each saw inside
    /// the cgroup and sized itself to (the `cpus` line, the workers).
    ///
    /// # Errors
    ///
    /// As [`run`](Setup::run).
    pub fn probe(&self) -> Result<Vec<(Runner, ChildResult)>, BenchError> {
        self.runners()
            .into_iter()
            .map(|(_, runner)| {
                let request = ChildRequest {
                    runner,
                    items: self.case.items / 10,
                    iters: self.case.iters,
                    cgroup: Some(self.cgroup.dir().to_path_buf()),
                };
                Ok((runner, run_child(&self.options.child, &request)?))
            })
            .collect()
    }
}

/// The `config` column of a contender that ran `workers` in its probe.
fn config_of(runner: Runner, workers: Option<usize>) -> String {
    let ran = workers.map_or(String::new(), |w| format!(" -> {w} worker(s)"));
    let text = match runner {
        Runner::Auto => "Config::new(): workers from usable_cpus(), the quota's".into(),
        Runner::Forced(n) => format!(".workers({n}): the host's CPUs, quota ignored"),
        Runner::Spinning(n) => format!(
            ".workers({n}), idle workers spinning {} ms (Spin::For), as a spinning runtime's",
            SPINNING.as_millis()
        ),
        Runner::Tokio => format!(
            "Runtime::new() (multi-thread, default workers); a task per stage, \
             mpsc::channel({CAPACITY})"
        ),
    };
    text + &ran
}

/// Runs one child and reads its result from the last line of its stdout.
fn run_child(child: &[OsString], request: &ChildRequest) -> Result<ChildResult, BenchError> {
    let who = format!("sizing child {:?}", request.runner);
    let (program, args) = child
        .split_first()
        .ok_or_else(|| BenchError::failed(&who, "no child command"))?;
    let request_json = serde_json::to_string(request).map_err(|e| BenchError::failed(&who, e))?;
    let out = Command::new(program)
        .args(args)
        .arg(request_json)
        // The contenders size themselves: nothing from the parent's
        // environment may choose for them.
        .env_remove(WORKERS_ENV)
        .env_remove("TOKIO_WORKER_THREADS")
        .output()
        .map_err(|e| BenchError::failed(&who, format!("starting {program:?}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(BenchError::failed(
            &who,
            format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .map_err(|e| BenchError::failed(&who, format!("result {last:?}: {e}")))
}

/// The figures against the targets: under the quota, auto's p99 at most half
/// of forced's, and its throughput at least forced's.
pub fn summary(report: &Report) -> String {
    let row = |case: &str, imp: &str, nth: usize| {
        report
            .results
            .iter()
            .filter(|r| r.case == case && r.imp == imp)
            .nth(nth)
            .map(|r| r.median)
    };
    let mut lines = Vec::new();
    if let (Some(auto), Some(forced)) = (row(P99_CASE, NAME, 0), row(P99_CASE, NAME, 1)) {
        let ratio = auto / forced;
        lines.push(format!(
            "target: p99 auto/forced = {ratio:.5} (at most 0.5): {}",
            if ratio <= 0.5 { "met" } else { "missed" }
        ));
    }
    if let (Some(auto), Some(forced)) =
        (row(THROUGHPUT_CASE, NAME, 0), row(THROUGHPUT_CASE, NAME, 1))
    {
        let ratio = auto / forced;
        lines.push(format!(
            "target: throughput auto/forced = {ratio:.3} (at least 1.0): {}",
            if ratio >= 1.0 { "met" } else { "missed" }
        ));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_runner_checks_its_answer_in_process() {
        let case = Scaling::new(300, SCALING_STAGES, 10);
        for runner in [
            Runner::Auto,
            Runner::Forced(2),
            Runner::Spinning(2),
            Runner::Tokio,
        ] {
            let got = run_runner(runner, &case).unwrap_or_else(|e| panic!("{runner:?}: {e}"));
            assert!(got.mitems_per_s > 0.0, "{runner:?}: {got:?}");
            assert!(got.p99_ns >= 1.0, "{runner:?}: {got:?}");
            assert!(got.workers >= 1, "{runner:?}: {got:?}");
        }
        let forced = run_runner(Runner::Forced(4), &case).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(forced.workers, 4, "one stage per worker");
    }

    #[test]
    fn a_child_request_round_trips_and_bad_ones_are_errors() {
        let request = ChildRequest {
            runner: Runner::Spinning(4),
            items: 10,
            iters: 3,
            cgroup: Some("/sys/fs/cgroup/cpu/x".into()),
        };
        let json = serde_json::to_string(&request).expect("serializes");
        assert_eq!(
            serde_json::from_str::<ChildRequest>(&json).expect("parses"),
            request
        );
        assert!(child_main("not json").is_err());
        let no_cgroup = ChildRequest {
            cgroup: None,
            ..request
        };
        let out = child_main(&serde_json::to_string(&no_cgroup).expect("serializes"))
            .unwrap_or_else(|e| panic!("{e}"));
        let result: ChildResult = serde_json::from_str(&out).expect("a result");
        assert_eq!(result.workers, 4);
    }
}
