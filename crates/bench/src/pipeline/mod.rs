//! `statepipe bench pipeline`: pipelines of state machines against what a Rust (or Go)
//! user would write instead.
//!
//! - [`workload`] defines the workloads (trivial3, scaling, fan-out, thread-ring,
//!   message-ring, logger) and their expected answers, shared by statepipe and every peer;
//! - [`statepipe`] runs them as statepipe pipelines (and the logger on the ring);
//! - [`peers`] runs them on OS threads with crossbeam or std channels, on tokio tasks,
//!   and through `tracing-appender` or a mutexed `BufWriter`;
//! - [`targets`] reads a finished report against the pipeline's targets.
//!
//! Cases, each a [`Group`] of contenders sampled round-robin by [`crate::harness`]:
//!
//! | case | unit | statepipe | peers |
//! |---|---|---|---|
//! | `laundry/{sequential,pipelined,shard2,shard3}` | s | one worker; one thread per unit | `ideal`: the perfect overlap, a computed bound (not sampled) |
//! | `thread-ring/503` | ns/hop | 503 stages fused on one worker | tokio `current_thread`, 503 OS threads (Go: `bench/go/run.sh`), a loop on one thread |
//! | `message-ring` | M msg/s | stages on two workers, the caller re-injecting | a ring of crossbeam threads, a loop on one thread |
//! | `trivial3` | M items/s | three cheap stages, the default plan | crossbeam thread per stage, a loop on one thread |
//! | `scaling/{1w,2w,speed-up}` | M items/s, x | four ~1 µs stages on 1 and 2 workers | crossbeam thread per stage on 1 CPU and on all |
//! | `fan-out/{1w,2w,speed-up}` | M items/s, x | `fan_out` of two branches of two ~1 µs stages, then a cheap combine, on 1 and 2 workers | crossbeam thread per stage, a fork and a join thread, on 1 CPU and on all |
//! | `logger/{3p,10p}` | M lines/s | a multi-producer ring, one write per batch | `tracing-appender`, `Mutex<BufWriter<File>>` |
//! | `sizing/{auto,forced4,ratio}` | M items/s, x | scaling confined to one CPU, auto vs 4 workers | - |
//! | `checkpoint/...` | M items/s, µs, s | see [`checkpoint`]: checkpoints every 1 s and 100 ms against none, stalls, an upgrade's latency, a restore | - |
//! | `remote/edge...` | M items/s, µs | see [`remote`]: one edge between two processes (statepipe's `RawLink` and `Link`) | ZeroMQ PUSH/PULL, timely's exchange |
//!
//! Every run checks its answer and fails with a [`crate::BenchError`] when it is wrong;
//! every sample deploys (or spawns) afresh. No contender is pinned unless `--pin`
//! asks for statepipe's workers to be (the config line then says the rows are not
//! pinned alike). The Go thread-ring lives outside the
//! workspace, in `bench/go/`.

mod cases;
pub mod checkpoint;
pub mod peers;
pub mod remote;
pub mod statepipe;
pub mod targets;
pub mod workload;

use std::ffi::OsString;
use std::time::Duration;

use crate::harness::{self, Group, SampleDone};
use crate::host::Host;
use crate::report::Report;
use crate::BenchError;
use statepipe::Laundry;
use workload::{calibrate_iters_for, message_ring_sends, FanOut, Scaling, SCALING_STAGES, STAGES};

/// Slots of every ring and channel in trivial3 and scaling, ours and the peers'.
pub const CAPACITY: usize = 1024;
/// Stages of the message ring.
pub const RING_STAGES: usize = 16;
/// Messages in flight in the message ring.
pub const RING_IN_FLIGHT: usize = 64;
/// Workers forced in `sizing/forced4`.
pub const FORCED_WORKERS: usize = 4;
/// What each scaling stage should cost, in nanoseconds.
pub const SCALING_STAGE_NS: u64 = 1_000;

/// What `statepipe bench pipeline` was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineOptions {
    /// Smaller workloads, so that the whole run takes under a minute.
    pub quick: bool,
    /// Samples per contender and case.
    pub samples: usize,
    /// Pin statepipe's workers, one per CPU (`Config::pin`). Off by default: no
    /// peer pins its threads, so the comparison pins none; with it on, the config
    /// line says that only statepipe is pinned.
    pub pin: bool,
    /// Run only the groups with a case whose name contains this.
    pub filter: Option<String>,
    /// The command that runs [`remote::child::child_main`] on its last argument (the
    /// `statepipe` binary and `bench remote-child`); without one the remote cases skip.
    pub remote_child: Option<Vec<OsString>>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            quick: false,
            samples: 5,
            pin: false,
            filter: None,
            remote_child: None,
        }
    }
}

/// The size of every workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// How long each laundry stage sleeps (200 ms in stevana's pipelined-state-machines).
    pub laundry_stage: Duration,
    /// Hops of statepipe's and tokio's thread-ring.
    pub thread_ring_hops: u64,
    /// Hops of the OS-thread thread-ring (a few µs a hop).
    pub threads_hops: u64,
    /// Laps of each message of the message ring.
    pub ring_laps: u32,
    /// Items through trivial3.
    pub trivial3_items: u64,
    /// Items through the scaling, fan-out and sizing pipelines.
    pub scaling_items: u64,
    /// Lines logged per logger case, spread over the producers.
    pub log_lines: u64,
    /// The checkpoint cases.
    pub checkpoint: checkpoint::CheckpointSizes,
    /// The remote cases.
    pub remote: remote::RemoteSizes,
}

impl Sizes {
    /// The sizes of a full run (each sample about a second or less).
    pub const FULL: Sizes = Sizes {
        laundry_stage: Duration::from_millis(200),
        thread_ring_hops: 10_000_000,
        threads_hops: 200_000,
        ring_laps: 5_000,
        trivial3_items: 5_000_000,
        scaling_items: 200_000,
        log_lines: 2_000_000,
        checkpoint: checkpoint::CheckpointSizes::FULL,
        remote: remote::RemoteSizes::FULL,
    };

    /// The sizes of `--quick`.
    pub const QUICK: Sizes = Sizes {
        laundry_stage: Duration::from_millis(50),
        thread_ring_hops: 1_000_000,
        threads_hops: 50_000,
        ring_laps: 2_000,
        trivial3_items: 1_000_000,
        scaling_items: 40_000,
        log_lines: 300_000,
        checkpoint: checkpoint::CheckpointSizes::QUICK,
        remote: remote::RemoteSizes::QUICK,
    };

    /// Sizes small enough for a debug-build test.
    #[cfg(test)]
    const TINY: Sizes = Sizes {
        laundry_stage: Duration::from_millis(1),
        thread_ring_hops: 5_000,
        threads_hops: 500,
        ring_laps: 5,
        trivial3_items: 5_000,
        scaling_items: 200,
        log_lines: 600,
        checkpoint: checkpoint::CheckpointSizes::TINY,
        remote: remote::RemoteSizes::TINY,
    };
}

/// Everything a run needs that costs time to find: the sizes, and the scaling and
/// fan-out cases (calibrated once per run, their answers computed once).
#[derive(Debug, Clone)]
pub struct Setup {
    /// What was asked for.
    pub options: PipelineOptions,
    /// The workloads' sizes.
    pub sizes: Sizes,
    /// The scaling (and sizing) case, when one of their cases runs.
    pub scaling: Option<Scaling>,
    /// The fan-out case (the scaling case's stages, two per branch), when one of its
    /// cases runs.
    pub fan_out: Option<FanOut>,
    /// The workers `Config::new()` finds in a thread confined to one CPU.
    pub sizing_auto_workers: Option<usize>,
}

impl Setup {
    /// Sizes the run and calibrates the scaling case (about as long as one scaling
    /// sample on one worker) if a scaling or sizing case is wanted, and the fan-out case
    /// (as long again) if a fan-out case is.
    pub fn new(options: &PipelineOptions) -> Setup {
        let sizes = if options.quick {
            Sizes::QUICK
        } else {
            Sizes::FULL
        };
        Setup::with_sizes(options, sizes)
    }

    fn with_sizes(options: &PipelineOptions, sizes: Sizes) -> Setup {
        let setup = Setup {
            options: options.clone(),
            sizes,
            scaling: None,
            fan_out: None,
            sizing_auto_workers: None,
        };
        let needs_scaling = setup.wants(&SCALING_CASES) || setup.wants(&SIZING_CASES);
        let needs_fan_out = setup.wants(&FAN_OUT_CASES);
        // One calibration for both: the fan-out's stages are the scaling case's.
        let iters = (needs_scaling || needs_fan_out).then(|| calibrate_iters_for(SCALING_STAGE_NS));
        Setup {
            scaling: iters
                .filter(|_| needs_scaling)
                .map(|iters| Scaling::new(sizes.scaling_items, SCALING_STAGES, iters)),
            fan_out: iters
                .filter(|_| needs_fan_out)
                .map(|iters| FanOut::new(sizes.scaling_items, iters)),
            sizing_auto_workers: setup
                .wants(&SIZING_CASES)
                .then(statepipe::sizing_auto_workers)
                .flatten(),
            ..setup
        }
    }

    /// How the remote cases start their child processes, if they can.
    fn children(&self) -> Option<remote::child::Children> {
        self.options
            .remote_child
            .clone()
            .map(remote::child::Children::new)
    }

    /// Whether any of `cases` passes the filter.
    fn wants(&self, cases: &[&str]) -> bool {
        match &self.options.filter {
            None => true,
            Some(f) => cases.iter().any(|c| c.contains(f.as_str())),
        }
    }
}

const LAUNDRY_CASES: [&str; 4] = [
    "laundry/sequential",
    "laundry/pipelined",
    "laundry/shard2",
    "laundry/shard3",
];
const THREAD_RING_CASE: &str = "thread-ring/503";
const MESSAGE_RING_CASE: &str = "message-ring";
const TRIVIAL3_CASE: &str = "trivial3";
const SCALING_CASES: [&str; 3] = ["scaling/1w", "scaling/2w", "scaling/speed-up"];
const FAN_OUT_CASES: [&str; 3] = ["fan-out/1w", "fan-out/2w", "fan-out/speed-up"];
const LOGGER_PRODUCERS: [usize; 2] = [3, 10];
const SIZING_CASES: [&str; 3] = ["sizing/auto", "sizing/forced4", "sizing/ratio"];

/// Every case name, in run order.
pub fn case_names() -> Vec<String> {
    let mut names: Vec<String> = LAUNDRY_CASES.iter().map(|c| c.to_string()).collect();
    names.extend([THREAD_RING_CASE, MESSAGE_RING_CASE, TRIVIAL3_CASE].map(String::from));
    names.extend(SCALING_CASES.map(String::from));
    names.extend(FAN_OUT_CASES.map(String::from));
    names.extend(LOGGER_PRODUCERS.map(|p| format!("logger/{p}p")));
    names.extend(SIZING_CASES.map(String::from));
    names.extend(checkpoint::case_names());
    names.extend(remote::case_names());
    names
}

/// Lines describing the run's set-up, printed under the host's.
pub fn describe(setup: &Setup, host: &Host) -> String {
    let s = &setup.sizes;
    let o = &setup.options;
    let mut lines = vec![format!(
        "pipeline: {} samples per contender, round-robin per case; a fresh deployment \
         (threads, rings) per sample; every answer checked",
        o.samples
    )];
    lines.push(if o.pin {
        format!(
            "pipeline: pinning: statepipe's workers only, one per CPU (ids {}; --pin); every \
             peer OS-scheduled, so its rows and the peers' are not pinned alike",
            host.cpus
                .iter()
                .map(|c| c.id.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    } else {
        "pipeline: pinning: none (statepipe's workers and every peer's threads OS-scheduled; \
         --pin pins statepipe's alone)"
            .to_string()
    });
    let stage_ms = s.laundry_stage.as_millis();
    lines.push(format!(
        "pipeline: laundry: {} loads through wash, dry, fold, each sleeping {stage_ms} ms{}; \
         ideal = (loads per copy + 2) x stage",
        statepipe::LAUNDRY_LOADS,
        if s.laundry_stage == Sizes::FULL.laundry_stage {
            String::new()
        } else {
            " (--quick: 200 ms scaled down, ideal scaled alike)".to_string()
        }
    ));
    lines.push(format!(
        "pipeline: thread-ring: {STAGES} stages; {} hops for statepipe and tokio, {} for 503 \
         OS threads; statepipe's hop is a direct call between fused state machines (no \
         scheduler), plus one round trip through the caller per {STAGES} hops; Go: \
         bench/go/run.sh",
        s.thread_ring_hops, s.threads_hops
    ));
    lines.push(format!(
        "pipeline: message-ring: {RING_STAGES} stages x {RING_IN_FLIGHT} messages x {} laps = \
         {} sends (Holk's Rust pipes, 2012: 1M messages, 4.39 M msg/s)",
        s.ring_laps,
        message_ring_sends(RING_STAGES, RING_IN_FLIGHT, s.ring_laps)
    ));
    lines.push(format!(
        "pipeline: trivial3: {} items, capacity {CAPACITY}",
        s.trivial3_items
    ));
    if let Some(case) = &setup.scaling {
        lines.push(format!(
            "pipeline: scaling: {} items x {} stages of spin_work({} iters) ~ {} ns (calibrated \
             this run); speed-up = 2w/1w of the same sample",
            case.items, case.stages, case.iters, SCALING_STAGE_NS
        ));
    }
    if let Some(case) = &setup.fan_out {
        lines.push(format!(
            "pipeline: fan-out: {} items x fan_out(2 stages, 2 stages) of spin_work({} iters) \
             ~ {} ns, then a cheap combine; speed-up = 2w/1w of the same sample",
            case.items, case.iters, SCALING_STAGE_NS
        ));
    }
    lines.push(format!(
        "pipeline: logger: {} lines of {} bytes per case, shared by the producers; files in {}",
        s.log_lines,
        workload::LINE_LEN,
        std::env::temp_dir().display()
    ));
    if setup.wants(&SIZING_CASES) {
        let auto = setup
            .sizing_auto_workers
            .map_or("? (could not pin)".to_string(), |n| n.to_string());
        lines.push(format!(
            "pipeline: sizing: the scaling case from a thread pinned to CPU {} (as taskset -c): \
             Config::new() finds {auto} worker(s) there; forced: {FORCED_WORKERS}",
            statepipe::sizing_cpu()
        ));
    }
    if setup.wants(
        &checkpoint::case_names()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    ) {
        lines.push(checkpoint::describe(&s.checkpoint));
    }
    let children = setup.children();
    lines.extend(remote::describe(&s.remote, children.as_ref(), |c| {
        setup.wants(c)
    }));
    if let Some(f) = &o.filter {
        lines.push(format!(
            "pipeline: --case {f}: only the groups of matching cases"
        ));
    }
    lines.join("\n")
}

/// Every wanted case of the pipeline benchmark, ours first in each.
pub fn groups(setup: &Setup) -> Vec<Group<'static>> {
    let (s, pin) = (setup.sizes, setup.options.pin);
    let mut groups = Vec::new();
    for (layout, case) in Laundry::ALL.into_iter().zip(LAUNDRY_CASES) {
        if setup.wants(&[case]) {
            groups.push(cases::laundry(layout, case, s.laundry_stage, pin));
        }
    }
    if setup.wants(&[THREAD_RING_CASE]) {
        groups.push(cases::thread_ring_group(&s, pin));
    }
    if setup.wants(&[MESSAGE_RING_CASE]) {
        groups.push(cases::message_ring_group(&s, pin));
    }
    if setup.wants(&[TRIVIAL3_CASE]) {
        groups.push(cases::trivial3_group(&s, pin));
    }
    if let (true, Some(case)) = (setup.wants(&SCALING_CASES), setup.scaling) {
        groups.push(cases::scaling_group(case, pin));
    }
    if let (true, Some(case)) = (setup.wants(&FAN_OUT_CASES), setup.fan_out) {
        groups.push(cases::fan_out_group(case, pin));
    }
    for producers in LOGGER_PRODUCERS {
        if setup.wants(&[&format!("logger/{producers}p")]) {
            groups.push(cases::logger_group(
                producers,
                s.log_lines / producers as u64,
            ));
        }
    }
    if let (true, Some(case)) = (setup.wants(&SIZING_CASES), setup.scaling) {
        groups.push(cases::sizing_group(case, setup.sizing_auto_workers, pin));
    }
    groups.extend(checkpoint::groups(&s.checkpoint, pin, |c| setup.wants(c)));
    let children = setup.children();
    groups.extend(remote::groups(&s.remote, children.as_ref(), |c| {
        setup.wants(c)
    }));
    groups
}

/// Runs every wanted case and returns the report.
///
/// # Errors
///
/// The first failed sample (see [`BenchError`]), or a filter that matches no case.
pub fn run(
    setup: &Setup,
    host: &Host,
    progress: &mut dyn FnMut(&SampleDone<'_>),
) -> Result<Report, BenchError> {
    let groups = groups(setup);
    if groups.is_empty() {
        return Err(BenchError::no_case_matches(
            "pipeline",
            setup.options.filter.as_deref(),
            &case_names(),
        ));
    }
    let rows = harness::run(groups, setup.options.samples, progress)?;
    Ok(Report::new("pipeline", host, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every contender of every case runs on tiny sizes and its answer checks out.
    #[test]
    fn every_contender_runs_with_checked_answers() {
        let host = crate::host::measure(Duration::from_millis(2));
        let options = PipelineOptions {
            quick: true,
            samples: 1,
            pin: true,
            filter: None,
            remote_child: None,
        };
        let setup = Setup::with_sizes(&options, Sizes::TINY);
        assert!(describe(&setup, &host).contains("thread-ring"));
        let groups = groups(&setup);
        for group in &groups {
            assert_eq!(
                group.contenders[0].imp,
                statepipe::NAME,
                "{}: ours first",
                group.name
            );
        }
        let report = run(&setup, &host, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        let cases = report.cases();
        let mut want = case_names();
        want.retain(|c| !c.starts_with("remote/"));
        assert_eq!(
            cases, want,
            "every case but the remote ones (no child command), in order"
        );
        assert!(
            report
                .results
                .iter()
                .all(|r| r.median > 0.0 && r.median.is_finite()),
            "{:?}",
            report.results
        );
        assert!(!targets::summary(&report).is_empty());
    }

    #[test]
    fn the_filter_selects_groups_and_reports_a_miss() {
        let options = PipelineOptions {
            filter: Some("laundry/shard".into()),
            ..PipelineOptions::default()
        };
        let setup = Setup::with_sizes(&options, Sizes::TINY);
        assert!(setup.scaling.is_none(), "no calibration for unwanted cases");
        assert!(setup.fan_out.is_none(), "no calibration for unwanted cases");
        let names: Vec<String> = groups(&setup).into_iter().map(|g| g.name).collect();
        assert_eq!(names, ["laundry/shard2", "laundry/shard3"]);

        let options = PipelineOptions {
            filter: Some("nothing".into()),
            ..options
        };
        let setup = Setup::with_sizes(&options, Sizes::TINY);
        let host = crate::host::measure(Duration::from_millis(2));
        let err = run(&setup, &host, &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("trivial3"), "{err}");
    }

    #[test]
    fn the_fan_out_filter_computes_only_the_fan_out_case() {
        let options = PipelineOptions {
            filter: Some("fan-out".into()),
            ..PipelineOptions::default()
        };
        let setup = Setup::with_sizes(&options, Sizes::TINY);
        assert!(setup.scaling.is_none());
        let case = setup.fan_out.expect("the fan-out case");
        assert_eq!(case.items, Sizes::TINY.scaling_items);
        let names: Vec<String> = groups(&setup).into_iter().map(|g| g.name).collect();
        assert_eq!(names, ["fan-out"]);
    }
}
