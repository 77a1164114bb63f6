//! `statepipe bench pipeline`: pipelines of state machines against what a Rust (or Go)
//! user would write instead.
//!
//! - [`workload`] defines the workloads (trivial3, scaling, thread-ring, message-ring,
//!   logger) and their expected answers, shared by statepipe and every peer;
//! - [`statepipe`] runs them as statepipe pipelines (and the logger on the ring);
//! - [`peers`] runs them on OS threads with crossbeam or std channels, on tokio tasks,
//!   and through `tracing-appender` or a mutexed `BufWriter`;
//! - [`targets`] reads a finished report against the targets of the issue.
//!
//! Cases, each a [`Group`] of contenders sampled round-robin by [`crate::harness`]:
//!
//! | case | unit | statepipe | peers |
//! |---|---|---|---|
//! | `laundry/{sequential,pipelined,shard2,shard3}` | s | one worker; one thread per unit | `ideal`: the perfect overlap |
//! | `thread-ring/503` | ns/hop | 503 stages fused on one worker | tokio `current_thread`, 503 OS threads (Go: `bench/go/run.sh`) |
//! | `message-ring` | M msg/s | stages on two workers, the caller re-injecting | a ring of crossbeam threads |
//! | `trivial3` | M items/s | three cheap stages, the default plan | crossbeam thread per stage |
//! | `scaling/{1w,2w,speed-up}` | M items/s, x | four ~1 µs stages on 1 and 2 workers | crossbeam thread per stage on 1 CPU and on all |
//! | `logger/{3p,10p}` | M lines/s | a multi-producer ring, one write per batch | `tracing-appender`, `Mutex<BufWriter<File>>` |
//! | `sizing/{auto,forced4,ratio}` | M items/s, x | scaling confined to one CPU, auto vs 4 workers | - |
//!
//! Every run checks its answer and fails with a [`crate::BenchError`] when it is wrong;
//! every sample deploys (or spawns) afresh. The Go thread-ring lives outside the
//! workspace, in `bench/go/`.

pub mod peers;
pub mod statepipe;
pub mod targets;
pub mod workload;

use std::time::Duration;

use crate::harness::{self, Contender, Group, Metric, SampleDone};
use crate::host::Host;
use crate::report::Report;
use crate::BenchError;
use peers::{chain, logger, message_ring, thread_ring};
use statepipe::{Laundry, NAME};
use workload::{calibrate_iters_for, message_ring_sends, Scaling, SCALING_STAGES, STAGES};

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
    /// Pin statepipe's workers, one per CPU (`Config::pin`).
    pub pin: bool,
    /// Run only the groups with a case whose name contains this.
    pub filter: Option<String>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            quick: false,
            samples: 5,
            pin: true,
            filter: None,
        }
    }
}

/// The size of every workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// How long each laundry stage sleeps (200 ms in the seed).
    pub laundry_stage: Duration,
    /// Hops of statepipe's and tokio's thread-ring.
    pub thread_ring_hops: u64,
    /// Hops of the OS-thread thread-ring (a few µs a hop).
    pub threads_hops: u64,
    /// Laps of each message of the message ring.
    pub ring_laps: u32,
    /// Items through trivial3.
    pub trivial3_items: u64,
    /// Items through the scaling and sizing pipelines.
    pub scaling_items: u64,
    /// Lines logged per logger case, spread over the producers.
    pub log_lines: u64,
}

impl Sizes {
    /// The sizes of a full run (each sample about a second or less).
    pub const FULL: Sizes = Sizes {
        laundry_stage: Duration::from_millis(200),
        thread_ring_hops: 10_000_000,
        threads_hops: 200_000,
        ring_laps: 2_000,
        trivial3_items: 5_000_000,
        scaling_items: 200_000,
        log_lines: 2_000_000,
    };

    /// The sizes of `--quick`.
    pub const QUICK: Sizes = Sizes {
        laundry_stage: Duration::from_millis(50),
        thread_ring_hops: 1_000_000,
        threads_hops: 50_000,
        ring_laps: 500,
        trivial3_items: 1_000_000,
        scaling_items: 40_000,
        log_lines: 300_000,
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
    };
}

/// Everything a run needs that costs time to find: the sizes, and the scaling case
/// (calibrated once per run, its answer computed once).
#[derive(Debug, Clone)]
pub struct Setup {
    /// What was asked for.
    pub options: PipelineOptions,
    /// The workloads' sizes.
    pub sizes: Sizes,
    /// The scaling (and sizing) case, when one of their cases runs.
    pub scaling: Option<Scaling>,
    /// The workers `Config::new()` finds in a thread confined to one CPU.
    pub sizing_auto_workers: Option<usize>,
}

impl Setup {
    /// Sizes the run and calibrates the scaling case (about as long as one scaling
    /// sample on one worker) if a scaling or sizing case is wanted.
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
            sizing_auto_workers: None,
        };
        let needs_scaling = setup.wants(&SCALING_CASES) || setup.wants(&SIZING_CASES);
        Setup {
            scaling: needs_scaling.then(|| {
                let iters = calibrate_iters_for(SCALING_STAGE_NS);
                Scaling::new(sizes.scaling_items, SCALING_STAGES, iters)
            }),
            sizing_auto_workers: setup
                .wants(&SIZING_CASES)
                .then(statepipe::sizing_auto_workers)
                .flatten(),
            ..setup
        }
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
const LOGGER_PRODUCERS: [usize; 2] = [3, 10];
const SIZING_CASES: [&str; 3] = ["sizing/auto", "sizing/forced4", "sizing/ratio"];

/// Every case name, in run order.
pub fn case_names() -> Vec<String> {
    let mut names: Vec<String> = LAUNDRY_CASES.iter().map(|c| c.to_string()).collect();
    names.extend([THREAD_RING_CASE, MESSAGE_RING_CASE, TRIVIAL3_CASE].map(String::from));
    names.extend(SCALING_CASES.map(String::from));
    names.extend(LOGGER_PRODUCERS.map(|p| format!("logger/{p}p")));
    names.extend(SIZING_CASES.map(String::from));
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
            "pipeline: statepipe workers pinned one per CPU (ids {}); thread_per_stage() and \
             every peer OS-scheduled",
            host.cpus
                .iter()
                .map(|c| c.id.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    } else {
        "pipeline: pinning off (--no-pin): the OS schedules every thread".to_string()
    });
    let stage_ms = s.laundry_stage.as_millis();
    lines.push(format!(
        "pipeline: laundry: {} loads through wash, dry, fold, each sleeping {stage_ms} ms{}; \
         ideal = (loads per copy + 2) x stage",
        statepipe::LAUNDRY_LOADS,
        if s.laundry_stage == Sizes::FULL.laundry_stage {
            String::new()
        } else {
            " (--quick: the seed's 200 ms scaled down, ideal scaled alike)".to_string()
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
         {} sends (seed 003: 1M messages, 4.39 M msg/s)",
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
            groups.push(laundry(layout, case, s.laundry_stage, pin));
        }
    }
    if setup.wants(&[THREAD_RING_CASE]) {
        groups.push(thread_ring_group(&s, pin));
    }
    if setup.wants(&[MESSAGE_RING_CASE]) {
        groups.push(message_ring_group(&s, pin));
    }
    if setup.wants(&[TRIVIAL3_CASE]) {
        groups.push(trivial3_group(&s, pin));
    }
    if let (true, Some(case)) = (setup.wants(&SCALING_CASES), setup.scaling) {
        groups.push(scaling_group(case, pin));
    }
    for producers in LOGGER_PRODUCERS {
        if setup.wants(&[&format!("logger/{producers}p")]) {
            groups.push(logger_group(producers, s.log_lines / producers as u64));
        }
    }
    if let (true, Some(case)) = (setup.wants(&SIZING_CASES), setup.scaling) {
        groups.push(sizing_group(case, setup.sizing_auto_workers, pin));
    }
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
        return Err(BenchError::failed(
            "bench pipeline",
            format!(
                "no case matches --case {}; the cases are: {}",
                setup.options.filter.as_deref().unwrap_or(""),
                case_names().join(", ")
            ),
        ));
    }
    let rows = harness::run(groups, setup.options.samples, progress)?;
    Ok(Report::new("pipeline", host, rows))
}

fn metric(case: &str, unit: &str, higher_is_better: bool) -> Metric {
    Metric {
        case: case.to_string(),
        unit: unit.to_string(),
        higher_is_better,
    }
}

/// Millions of `count` per second of `elapsed`.
fn mega_rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6
}

fn laundry(layout: Laundry, case: &str, stage: Duration, pin: bool) -> Group<'static> {
    let ideal = layout.ideal(stage).as_secs_f64();
    let ms = stage.as_millis();
    let copies = match layout {
        Laundry::Sequential => "3 stages x 6 loads".to_string(),
        Laundry::Pipelined => "6 loads + 2".to_string(),
        Laundry::Shard(k) => format!("6/{k} loads + 2"),
    };
    Group {
        name: case.to_string(),
        metrics: vec![metric(case, "s", false)],
        contenders: vec![
            Contender::new(NAME, layout.config(), move || {
                Ok(vec![statepipe::laundry(layout, stage, pin)?.as_secs_f64()])
            }),
            Contender::new("ideal", format!("({copies}) x {ms} ms"), move || {
                Ok(vec![ideal])
            }),
        ],
    }
}

fn thread_ring_group(s: &Sizes, pin: bool) -> Group<'static> {
    let per_hop = |elapsed: Duration, hops: u64| elapsed.as_nanos() as f64 / hops.max(1) as f64;
    let (hops, threads_hops) = (s.thread_ring_hops, s.threads_hops);
    Group {
        name: THREAD_RING_CASE.into(),
        metrics: vec![metric(THREAD_RING_CASE, "ns/hop", false)],
        contenders: vec![
            Contender::new(
                NAME,
                "503 stages fused on workers(1): a hop is a direct call, no scheduler",
                move || {
                    let (_, elapsed) = statepipe::thread_ring(hops, pin)?;
                    Ok(vec![per_hop(elapsed, hops)])
                },
            ),
            Contender::new(
                thread_ring::TOKIO_NAME,
                thread_ring::TOKIO_CONFIG,
                move || {
                    let (_, elapsed) = peers::tokio_thread_ring(hops)?;
                    Ok(vec![per_hop(elapsed, hops)])
                },
            ),
            Contender::new(
                thread_ring::THREADS_NAME,
                format!("{}; {threads_hops} hops", thread_ring::THREADS_CONFIG),
                move || {
                    let (_, elapsed) = peers::threads_thread_ring(threads_hops)?;
                    Ok(vec![per_hop(elapsed, threads_hops)])
                },
            ),
        ],
    }
}

fn message_ring_group(s: &Sizes, pin: bool) -> Group<'static> {
    let laps = s.ring_laps;
    let sends = message_ring_sends(RING_STAGES, RING_IN_FLIGHT, laps);
    let half = RING_STAGES / 2;
    Group {
        name: MESSAGE_RING_CASE.into(),
        metrics: vec![metric(MESSAGE_RING_CASE, "M msg/s", true)],
        contenders: vec![
            Contender::new(
                NAME,
                format!(
                    "workers(2), stages 0-{} | {half}-{}, capacity {RING_IN_FLIGHT}; caller re-injects",
                    half - 1,
                    RING_STAGES - 1
                ),
                move || {
                    let elapsed =
                        statepipe::message_ring(RING_STAGES, RING_IN_FLIGHT, laps, pin)?;
                    Ok(vec![mega_rate(sends, elapsed)])
                },
            ),
            Contender::new(
                message_ring::NAME,
                format!("{RING_STAGES} threads, crossbeam bounded({RING_IN_FLIGHT})"),
                move || {
                    let elapsed = peers::crossbeam_message_ring(RING_STAGES, RING_IN_FLIGHT, laps)?;
                    Ok(vec![mega_rate(sends, elapsed)])
                },
            ),
        ],
    }
}

fn trivial3_group(s: &Sizes, pin: bool) -> Group<'static> {
    let items = s.trivial3_items;
    Group {
        name: TRIVIAL3_CASE.into(),
        metrics: vec![metric(TRIVIAL3_CASE, "M items/s", true)],
        contenders: vec![
            Contender::new(
                NAME,
                format!(
                    "3 stages .cost({}) -> fused on 1 worker; send_all, capacity {CAPACITY}",
                    statepipe::TRIVIAL_COST_NS
                ),
                move || {
                    let elapsed = statepipe::trivial3(items, CAPACITY, pin)?;
                    Ok(vec![mega_rate(items, elapsed)])
                },
            ),
            Contender::new(chain::NAME, chain::config(CAPACITY), move || {
                let elapsed = peers::thread_per_stage_trivial3(items, CAPACITY)?;
                Ok(vec![mega_rate(items, elapsed)])
            }),
        ],
    }
}

/// Runs `a` and `b` in an order that alternates from one call to the next (so neither
/// always runs on a cooler or warmer host); returns their results in `(a, b)` order.
fn alternate<T>(
    flip: &mut bool,
    a: impl FnOnce() -> Result<T, BenchError>,
    b: impl FnOnce() -> Result<T, BenchError>,
) -> Result<(T, T), BenchError> {
    *flip = !*flip;
    if *flip {
        let x = a()?;
        Ok((x, b()?))
    } else {
        let y = b()?;
        Ok((a()?, y))
    }
}

fn scaling_group(case: Scaling, pin: bool) -> Group<'static> {
    let [one, two, speed_up] = SCALING_CASES;
    let cpu = statepipe::sizing_cpu();
    let items = case.items;
    let mut flip = false;
    let mut peer_flip = false;
    Group {
        name: "scaling".into(),
        metrics: vec![
            metric(one, "M items/s", true),
            metric(two, "M items/s", true),
            metric(speed_up, "x (2w/1w)", true),
        ],
        contenders: vec![
            Contender::new(
                NAME,
                format!(
                    "workers(1 | 2), stages .cost({}) -> plan [0,0,1,1]",
                    statepipe::SCALING_COST_NS
                ),
                move || {
                    let (t1, t2) = alternate(
                        &mut flip,
                        || statepipe::scaling(&case, 1, pin),
                        || statepipe::scaling(&case, 2, pin),
                    )?;
                    let (r1, r2) = (mega_rate(items, t1), mega_rate(items, t2));
                    Ok(vec![r1, r2, r2 / r1])
                },
            ),
            Contender::new(
                chain::NAME,
                format!(
                    "{}; 1w: 4 threads confined to CPU {cpu}, 2w: OS-scheduled",
                    chain::config(CAPACITY)
                ),
                move || {
                    let (t1, t2) = alternate(
                        &mut peer_flip,
                        || {
                            confined(cpu, move || {
                                peers::thread_per_stage_scaling(&case, CAPACITY)
                            })
                        },
                        || peers::thread_per_stage_scaling(&case, CAPACITY),
                    )?;
                    let (r1, r2) = (mega_rate(items, t1), mega_rate(items, t2));
                    Ok(vec![r1, r2, r2 / r1])
                },
            ),
        ],
    }
}

/// Runs `f` on a new thread pinned to `cpu` (threads it starts inherit the mask).
fn confined<T: Send + 'static>(
    cpu: usize,
    f: impl FnOnce() -> Result<T, BenchError> + Send + 'static,
) -> Result<T, BenchError> {
    std::thread::spawn(move || {
        if !statepipe_sys::pin::pin_current_thread(cpu) {
            return Err(BenchError::failed(
                "confined run",
                format!("could not pin to CPU {cpu}"),
            ));
        }
        f()
    })
    .join()
    .map_err(|_| BenchError::failed("confined run", "panicked"))?
}

fn logger_group(producers: usize, lines: u64) -> Group<'static> {
    let case = format!("logger/{producers}p");
    let total = producers as u64 * lines;
    let tag = format!("{producers}p");
    let rate = move |elapsed: Duration| vec![mega_rate(total, elapsed)];
    let (t1, t2, t3) = (tag.clone(), tag.clone(), tag);
    Group {
        name: case.clone(),
        metrics: vec![metric(&case, "M lines/s", true)],
        contenders: vec![
            Contender::new(NAME, statepipe::logger::config(), move || {
                let path = logger::temp_log_path(&format!("statepipe-{t1}"));
                let (elapsed, _writes) = statepipe::ring_logger(producers, lines, &path)?;
                Ok(rate(elapsed))
            }),
            Contender::new(logger::TRACING_NAME, logger::TRACING_CONFIG, move || {
                let path = logger::temp_log_path(&format!("tracing-{t2}"));
                Ok(rate(peers::tracing_appender_logger(
                    producers, lines, &path,
                )?))
            }),
            Contender::new(logger::MUTEX_NAME, logger::MUTEX_CONFIG, move || {
                let path = logger::temp_log_path(&format!("mutex-{t3}"));
                Ok(rate(peers::mutex_bufwriter_logger(
                    producers, lines, &path,
                )?))
            }),
        ],
    }
}

fn sizing_group(case: Scaling, auto_workers: Option<usize>, pin: bool) -> Group<'static> {
    let [auto, forced, ratio] = SIZING_CASES;
    let items = case.items;
    let auto_workers = auto_workers.map_or("?".to_string(), |n| n.to_string());
    let mut flip = false;
    Group {
        name: "sizing".into(),
        metrics: vec![
            metric(auto, "M items/s", true),
            metric(forced, "M items/s", true),
            metric(ratio, "x (auto/forced4)", true),
        ],
        contenders: vec![Contender::new(
            NAME,
            format!(
                "in a thread on CPU {}: Config::new() -> {auto_workers} worker(s) | \
                 .workers({FORCED_WORKERS})",
                statepipe::sizing_cpu()
            ),
            move || {
                let (ta, tf) = alternate(
                    &mut flip,
                    || statepipe::sizing(&case, None, pin),
                    || statepipe::sizing(&case, Some(FORCED_WORKERS), pin),
                )?;
                let (ra, rf) = (mega_rate(items, ta), mega_rate(items, tf));
                Ok(vec![ra, rf, ra / rf])
            },
        )],
    }
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
        };
        let setup = Setup::with_sizes(&options, Sizes::TINY);
        assert!(describe(&setup, &host).contains("thread-ring"));
        let groups = groups(&setup);
        for group in &groups {
            assert_eq!(group.contenders[0].imp, NAME, "{}: ours first", group.name);
        }
        let report = run(&setup, &host, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        let cases = report.cases();
        assert_eq!(cases, case_names(), "every case, in order");
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
}
