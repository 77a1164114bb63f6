//! Ours: the workloads of [`super::workload`] as statepipe pipelines, deployed on workers
//! by `statepipe-pipeline` (and, for the logger, the `statepipe-ring` ring on its own).
//!
//! | function | pipeline | deployment |
//! |---|---|---|
//! | [`laundry`] | wash, dry, fold: three stages that sleep | one worker, or one thread per unit (shards included) |
//! | [`thread_ring`] (in [`rings`]) | 503 stages passing a token | fused on one worker |
//! | [`message_ring`] (in [`rings`]) | `stages` hop stages closed into a cycle (`deploy_cycle`); also re-injected by the caller | two workers, half the stages each |
//! | [`trivial3`], [`trivial3_on_worker`] | trivial A, B, C, each declared 10 ns | the default plan: fused on one worker; fed by `send_all`, or source and sink on the worker (`deploy_with`) |
//! | [`scaling`], [`sizing`] | stages of [`spin_work`], each declared 1000 ns | `workers(n)`; auto or forced inside a thread confined to one CPU |
//! | [`fan_out`] | `fan_out` of two branches of two [`spin_work`] stages (1000 ns each), then a cheap combine | `workers(n)`, the default plan: on 2 workers one branch per worker |
//! | [`ring_logger`] (in [`logger`]) | many producers, one file-writing handler | a multi-producer ring |
//!
//! Every run deploys afresh, starts the clock once the workers exist, checks its answer
//! and fails with a [`BenchError`] when it is wrong. The inputs are fed from a second
//! thread with [`Input::send_all`](statepipe_pipeline::Input::send_all) (batched, as
//! [`Deployment::run`] does) while the calling thread folds the outputs, so nothing is
//! collected into a vector the peers would not build.
//!
//! Set `STATEPIPE_BENCH_METRICS=1` to print every deployment's per-unit metrics (busy,
//! blocked, idle, queue depth) to stderr when it finishes: the evidence to look at when
//! a figure is off.

pub mod logger;
pub mod rings;

use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use statepipe_pipeline::Spin;
use statepipe_pipeline::{machine, Config, DeployError, Deployment, Finished, Pipeline};

use crate::pipeline::peers::HANG_LIMIT;
use crate::pipeline::workload::{
    fan_out_combine, spin_work, trivial3_expected, trivial_a, trivial_b, trivial_c, FanOut,
    Scaling, FAN_OUT_SALT,
};
use crate::watchdog::Watchdog;
use crate::BenchError;
pub use logger::ring_logger;
pub use rings::{message_ring, thread_ring};

/// The implementation name in reports.
pub const NAME: &str = "statepipe";

/// The environment variable that makes every run print its deployment's metrics.
pub const METRICS_ENV: &str = "STATEPIPE_BENCH_METRICS";

/// The cost declared for each trivial3 stage, in nanoseconds: cheap enough that the
/// default plan fuses the three stages on one worker.
pub const TRIVIAL_COST_NS: f64 = 10.0;

/// The cost declared for each scaling stage, in nanoseconds (what it measures).
pub const SCALING_COST_NS: f64 = 1_000.0;

/// The cost declared for the stage after the fan-out's join, in nanoseconds: a xor and
/// a rotate, so the plan does not weigh it like a spinning stage.
pub const FAN_OUT_POST_COST_NS: f64 = 20.0;

/// Loads in the laundry case.
pub const LAUNDRY_LOADS: u64 = 6;

/// What each laundry stage adds to a load, so the output proves every stage ran once.
const LAUNDRY_MARKS: [(&str, u64); 3] = [("wash", 100), ("dry", 10), ("fold", 1)];

/// How the laundry is deployed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Laundry {
    /// The three stages fused on one worker.
    Sequential,
    /// One thread per stage.
    Pipelined,
    /// `Pipeline::shard(k, ..)` of the three stages, one thread per unit.
    Shard(usize),
}

impl Laundry {
    /// Every layout of the case, in the order of stevana's pipelined-state-machines.
    pub const ALL: [Laundry; 4] = [
        Laundry::Sequential,
        Laundry::Pipelined,
        Laundry::Shard(2),
        Laundry::Shard(3),
    ];

    /// `sequential`, `pipelined`, `shard2`, ...
    pub fn name(self) -> String {
        match self {
            Laundry::Sequential => "sequential".into(),
            Laundry::Pipelined => "pipelined".into(),
            Laundry::Shard(k) => format!("shard{k}"),
        }
    }

    /// The time a perfect runtime needs with stages of `stage`: the loads go through
    /// each copy one after the other, the copies' three stages overlap.
    pub fn ideal(self, stage: Duration) -> Duration {
        let loads = LAUNDRY_LOADS as u32;
        match self {
            Laundry::Sequential => stage * loads * 3,
            Laundry::Pipelined => stage * (loads + 2),
            Laundry::Shard(k) => stage * (loads.div_ceil(k as u32) + 2),
        }
    }

    /// The `config` of our row.
    pub fn config(self) -> String {
        match self {
            Laundry::Sequential => "workers(1): wash, dry, fold fused".into(),
            Laundry::Pipelined => "thread_per_stage(): 3 workers".into(),
            Laundry::Shard(k) => format!(
                "shard({k}) of wash, dry, fold; thread_per_stage(): {} workers",
                3 * k + 1
            ),
        }
    }

    fn deployment_config(self, pin: bool) -> Config {
        match self {
            Laundry::Sequential => Config::new().workers(1).pin(pin),
            Laundry::Pipelined | Laundry::Shard(_) => Config::new().thread_per_stage(),
        }
    }
}

/// Wash, dry and fold, each sleeping `stage`, named with `suffix`.
fn laundry_line(suffix: &str, stage: Duration) -> Pipeline<u64, u64> {
    let [first, rest @ ..] = LAUNDRY_MARKS.map(|(name, mark)| {
        Pipeline::map(&format!("{name}{suffix}"), move |load: u64| {
            thread::sleep(stage);
            load + mark
        })
    });
    rest.into_iter().fold(first, Pipeline::then)
}

/// Runs the laundry of stevana's pipelined-state-machines, [`LAUNDRY_LOADS`] loads
/// through three stages that each sleep `stage`, deployed as `layout`; returns the
/// time until the last load was out.
///
/// # Errors
///
/// [`BenchError::Failed`] when the loads come out wrong or out of order, or the
/// deployment fails.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use statepipe_bench::pipeline::statepipe::{laundry, Laundry};
/// let stage = Duration::from_millis(2);
/// let took = laundry(Laundry::Shard(2), stage, true).unwrap();
/// assert!(took >= Laundry::Shard(2).ideal(stage));
/// ```
pub fn laundry(layout: Laundry, stage: Duration, pin: bool) -> Result<Duration, BenchError> {
    let who = format!("{NAME} laundry/{}", layout.name());
    let pipeline = match layout {
        Laundry::Sequential | Laundry::Pipelined => laundry_line("", stage),
        Laundry::Shard(k) => Pipeline::shard(k, |i| laundry_line(&format!(" {i}"), stage)),
    };
    let add: u64 = LAUNDRY_MARKS.iter().map(|(_, mark)| mark).sum();
    let expected: Vec<u64> = (0..LAUNDRY_LOADS).map(|x| x + add).collect();
    let config = layout.deployment_config(pin);
    let run = feed_and_fold(
        &who,
        pipeline,
        &config,
        0..LAUNDRY_LOADS,
        Vec::new(),
        |mut v, x| {
            v.push(x);
            v
        },
    )?;
    if run.value != expected {
        return Err(BenchError::failed(
            &who,
            format!("loads came out as {:?}, expected {expected:?}", run.value),
        ));
    }
    Ok(run.elapsed)
}

/// Trivial A, B and C as three stateful stages, each declared [`TRIVIAL_COST_NS`].
pub fn trivial3_pipeline() -> Pipeline<u64, u64> {
    let stage = |name: &str, f: fn(&mut u64, u64) -> u64| {
        Pipeline::stage(name, 0u64, machine::step(f)).cost(TRIVIAL_COST_NS)
    };
    stage("a", trivial_a)
        .then(stage("b", trivial_b))
        .then(stage("c", trivial_c))
}

/// Runs trivial3 (items `0..items`) on the default deployment with rings of
/// `capacity` slots; returns the time from the first item sent until the last output
/// was read.
///
/// # Errors
///
/// [`BenchError::WrongSum`] or [`BenchError::WrongCount`] when the outputs are wrong;
/// [`BenchError::Failed`] when the deployment fails.
pub fn trivial3(items: u64, capacity: usize, pin: bool) -> Result<Duration, BenchError> {
    let who = format!("{NAME} trivial3");
    let config = Config::new().capacity(capacity).pin(pin);
    let run = feed_and_fold(
        &who,
        trivial3_pipeline(),
        &config,
        0..items,
        0u64,
        |sum, y| sum.wrapping_add(y),
    )?;
    run.check(&who, items, trivial3_expected(items))?;
    Ok(run.elapsed)
}

/// Runs trivial3 (items `0..items`) with `deploy_with`: the items are made on the
/// worker from the range and the outputs summed there, so there is no hand-off at either
/// end and the whole run is one thread. The clock includes starting the worker (tens of
/// µs), since the worker starts on the items at once.
///
/// # Errors
///
/// As [`trivial3`].
pub fn trivial3_on_worker(items: u64, capacity: usize, pin: bool) -> Result<Duration, BenchError> {
    let who = format!("{NAME} trivial3 (deploy_with)");
    let config = Config::new().capacity(capacity).pin(pin);
    let run = sum_on_workers(&who, trivial3_pipeline(), &config, items)?;
    run.check(&who, items, trivial3_expected(items))?;
    Ok(run.elapsed)
}

/// Deploys `pipeline` with `deploy_with`: the inputs `0..items` made on the first
/// worker and the outputs summed on the last, so no other thread takes part; returns
/// the sum, the outputs and the time from deploying until the workers joined (which
/// includes starting them: tens of µs).
fn sum_on_workers(
    who: &str,
    pipeline: Pipeline<u64, u64>,
    config: &Config,
    items: u64,
) -> Result<Folded<u64>, BenchError> {
    let folded = Arc::new(Mutex::new(None));
    let mut sink = SumOnDrop {
        sum: 0,
        outputs: 0,
        out: Arc::clone(&folded),
    };
    let _watchdog = Watchdog::arm(who, HANG_LIMIT);
    let t0 = Instant::now();
    let running = pipeline
        .deploy_with(config, 0..items, move |_seq, y: u64| sink.add(y))
        .map_err(|e| deploy_error(who, e))?;
    let finished = running.join().map_err(|e| deploy_error(who, e))?;
    let elapsed = t0.elapsed();
    report_metrics(who, &finished);
    let taken = folded.lock().unwrap_or_else(|p| p.into_inner()).take();
    let (value, outputs) =
        taken.ok_or_else(|| BenchError::failed(who, "the sink was not dropped at the end"))?;
    Ok(Folded {
        value,
        outputs,
        elapsed,
    })
}

/// The fold of a `deploy_with` sink, handed over when the runtime drops the sink.
struct SumOnDrop {
    sum: u64,
    outputs: u64,
    out: Arc<Mutex<Option<(u64, u64)>>>,
}

impl SumOnDrop {
    /// Folds one output. A method, so that the closure calling it moves the whole sink
    /// in (a closure naming only its `Copy` fields would copy them out instead).
    #[inline]
    fn add(&mut self, y: u64) {
        self.sum = self.sum.wrapping_add(y);
        self.outputs += 1;
    }
}

impl Drop for SumOnDrop {
    fn drop(&mut self) {
        *self.out.lock().unwrap_or_else(|p| p.into_inner()) = Some((self.sum, self.outputs));
    }
}

/// The scaling pipeline: `case.stages` stages of [`spin_work`]`(_, case.iters)`, each
/// declared [`SCALING_COST_NS`].
pub fn scaling_pipeline(case: &Scaling) -> Pipeline<u64, u64> {
    let iters = case.iters;
    let stage = |s: usize| {
        Pipeline::map(&format!("spin {s}"), move |x: u64| spin_work(x, iters)).cost(SCALING_COST_NS)
    };
    (1..case.stages.max(1)).fold(stage(0), |p, s| p.then(stage(s)))
}

/// Runs a [`Scaling`] case on `workers` workers (the default, cost-balanced plan),
/// the inputs made and the outputs summed on the workers (`deploy_with`), so the
/// figure is the workers' own scaling, with no user thread competing for the CPUs;
/// returns the time from deploying until the workers joined.
///
/// # Errors
///
/// As [`trivial3`], against `case.expected`.
pub fn scaling(case: &Scaling, workers: usize, pin: bool) -> Result<Duration, BenchError> {
    let who = format!("{NAME} scaling/{workers}w");
    let config = Config::new().workers(workers).pin(pin);
    let run = sum_on_workers(&who, scaling_pipeline(case), &config, case.items)?;
    run.check(&who, case.items, case.expected)?;
    Ok(run.elapsed)
}

/// The fan-out pipeline: `fan_out(s0 .then(s1), s2 .then(s3))`, each stage a
/// [`spin_work`]`(_, case.iters)` declared [`SCALING_COST_NS`] (branch b's first stage
/// on the item xored with [`FAN_OUT_SALT`]), then `post`, [`fan_out_combine`] of the
/// pair, declared [`FAN_OUT_POST_COST_NS`].
pub fn fan_out_pipeline(case: &FanOut) -> Pipeline<u64, u64> {
    let iters = case.iters;
    let spin = |name: &str, salt: u64| {
        Pipeline::map(name, move |x: u64| spin_work(x ^ salt, iters)).cost(SCALING_COST_NS)
    };
    let a = spin("s0", 0).then(spin("s1", 0));
    let b = spin("s2", FAN_OUT_SALT).then(spin("s3", 0));
    a.fan_out(b).then(
        Pipeline::map("post", |(a, b): (u64, u64)| fan_out_combine(a, b))
            .cost(FAN_OUT_POST_COST_NS),
    )
}

/// Runs a [`FanOut`] case on `workers` workers (the default, cost-balanced plan), the
/// inputs made and the outputs summed on the workers (`deploy_with`), as [`scaling`]
/// does; returns the time from deploying until the workers joined.
///
/// # Errors
///
/// As [`trivial3`], against `case.expected`.
pub fn fan_out(case: &FanOut, workers: usize, pin: bool) -> Result<Duration, BenchError> {
    let who = format!("{NAME} fan-out/{workers}w");
    let config = Config::new().workers(workers).pin(pin);
    let run = sum_on_workers(&who, fan_out_pipeline(case), &config, case.items)?;
    run.check(&who, case.items, case.expected)?;
    Ok(run.elapsed)
}

fn scaling_with(who: &str, case: &Scaling, config: &Config) -> Result<Duration, BenchError> {
    let run = feed_and_fold(
        who,
        scaling_pipeline(case),
        config,
        0..case.items,
        0u64,
        |sum, y| sum.wrapping_add(y),
    )?;
    run.check(who, case.items, case.expected)?;
    Ok(run.elapsed)
}

/// The first CPU of this process's affinity mask: where [`sizing`] confines itself.
pub fn sizing_cpu() -> usize {
    statepipe_sys::cpus::usable_cpus().ids[0]
}

/// The number of workers `Config::new()` resolves to in a thread confined to
/// [`sizing_cpu`] (the auto-detection [`sizing`] relies on); `None` when the thread
/// cannot be pinned there.
pub fn sizing_auto_workers() -> Option<usize> {
    let cpu = sizing_cpu();
    thread::spawn(move || {
        statepipe_sys::pin::pin_current_thread(cpu)
            .then(|| Config::new().resolved_workers().ok())
            .flatten()
    })
    .join()
    .ok()
    .flatten()
}

/// Runs a [`Scaling`] case the way `taskset -c 0` would: from a thread pinned to
/// [`sizing_cpu`] before deploying (every thread it starts inherits the mask, and
/// `Config::new()` reads it), with the workers auto-detected (`workers: None`) or
/// forced, and idle workers spinning as `spin` says (`Spin::Auto` is the default; a
/// long `Spin::For` imitates a runtime whose workers busy-spin); returns the time from
/// the first item sent until the last output was read.
///
/// # Errors
///
/// As [`scaling`]; [`BenchError::Failed`] when the thread cannot be pinned.
pub fn sizing(
    case: &Scaling,
    workers: Option<usize>,
    spin: Spin,
    pin: bool,
) -> Result<Duration, BenchError> {
    let who = match workers {
        None => format!("{NAME} sizing/auto ({spin:?})"),
        Some(n) => format!("{NAME} sizing/forced{n} ({spin:?})"),
    };
    let (cpu, case) = (sizing_cpu(), *case);
    let confined = thread::Builder::new()
        .name("bench-sizing".into())
        .spawn(move || {
            if !statepipe_sys::pin::pin_current_thread(cpu) {
                return Err(BenchError::failed(
                    &who,
                    format!("could not pin to CPU {cpu}"),
                ));
            }
            let config = Config::new().pin(pin).spin(spin);
            let config = match workers {
                Some(n) => config.workers(n),
                None => config,
            };
            scaling_with(&who, &case, &config)
        })
        .map_err(|e| BenchError::failed("sizing", format!("spawn: {e}")))?;
    confined
        .join()
        .map_err(|_| BenchError::failed("sizing", "the confined thread panicked"))?
}

/// What [`feed_and_fold`] hands back.
struct Folded<A> {
    /// The fold of every output.
    value: A,
    /// Outputs read.
    outputs: u64,
    /// From the first item sent until the last output was read.
    elapsed: Duration,
}

impl Folded<u64> {
    /// Checks a checksum run: one output per item, the right sum.
    fn check(&self, who: &str, items: u64, expected: u64) -> Result<(), BenchError> {
        if self.outputs != items {
            return Err(BenchError::WrongCount {
                who: who.to_string(),
                expected: items,
                got: self.outputs,
            });
        }
        if self.value != expected {
            return Err(BenchError::WrongSum {
                who: who.to_string(),
                expected,
                got: self.value,
            });
        }
        Ok(())
    }
}

/// A [`DeployError`] as the benchmark's error.
fn deploy_error(who: &str, e: DeployError) -> BenchError {
    BenchError::failed(who, e)
}

/// Deploys `pipeline` with `config`; feeds `inputs` from a second thread with
/// `send_all` while the calling thread folds the outputs into `init`; joins. The clock
/// runs from when both threads are ready until the last output was read.
fn feed_and_fold<I, O, A, It>(
    who: &str,
    pipeline: Pipeline<I, O>,
    config: &Config,
    inputs: It,
    init: A,
    mut fold: impl FnMut(A, O) -> A,
) -> Result<Folded<A>, BenchError>
where
    I: Send + 'static,
    O: Send + 'static,
    It: IntoIterator<Item = I>,
    It::IntoIter: Send,
{
    let Deployment {
        mut input,
        mut output,
        running,
    } = pipeline.deploy(config).map_err(|e| deploy_error(who, e))?;
    let inputs = inputs.into_iter();
    let _watchdog = Watchdog::arm(who, HANG_LIMIT);
    let start = Barrier::new(2);
    let (value, outputs, elapsed, fed) = thread::scope(|s| {
        let start = &start;
        let feeder = s.spawn(move || {
            start.wait();
            // An error means the pipeline stopped: join says why.
            input.send_all(inputs).is_ok()
        });
        start.wait();
        let t0 = Instant::now();
        let (mut value, mut outputs) = (init, 0u64);
        while let Some((_, o)) = output.recv() {
            value = fold(value, o);
            outputs += 1;
        }
        let elapsed = t0.elapsed();
        (value, outputs, elapsed, feeder.join().unwrap_or(false))
    });
    let finished = running.join().map_err(|e| deploy_error(who, e))?;
    report_metrics(who, &finished);
    if !fed {
        return Err(BenchError::failed(who, "the input stopped taking items"));
    }
    let failures: Vec<_> = output.failures().collect();
    if !failures.is_empty() {
        return Err(BenchError::failed(
            who,
            format!(
                "{} item(s) failed, first: {:?}",
                failures.len(),
                failures[0]
            ),
        ));
    }
    Ok(Folded {
        value,
        outputs,
        elapsed,
    })
}

/// Prints the deployment's metrics to stderr when [`METRICS_ENV`] is set.
fn report_metrics(who: &str, finished: &Finished) {
    if std::env::var_os(METRICS_ENV).is_some() {
        eprintln!("{who}: metrics at the end\n{}", finished.metrics);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::workload::{FanOut, Scaling};

    #[test]
    fn laundry_layouts_give_the_loads_in_order() {
        let stage = Duration::from_millis(1);
        for layout in Laundry::ALL {
            let took = laundry(layout, stage, true).unwrap_or_else(|e| panic!("{e}"));
            assert!(took >= layout.ideal(stage), "{layout:?}: {took:?}");
        }
        assert_eq!(
            Laundry::ALL.map(|l| l.ideal(Duration::from_millis(200)).as_millis()),
            [3600, 1600, 1000, 800]
        );
    }

    #[test]
    fn trivial3_fuses_and_checks() {
        let units = trivial3_pipeline().units();
        let plan = Config::new().workers(4).plan_for(&units).unwrap();
        assert_eq!(plan.worker_count, 1, "{plan}");
        trivial3(5_000, 64, true).unwrap();
        trivial3(0, 64, false).unwrap();
        trivial3_on_worker(5_000, 64, true).unwrap();
        trivial3_on_worker(0, 64, false).unwrap();
    }

    #[test]
    fn scaling_checks_on_one_and_two_workers() {
        let case = Scaling::new(400, 4, 20);
        let plan = Config::new()
            .workers(2)
            .plan_for(&scaling_pipeline(&case).units())
            .unwrap();
        assert_eq!(plan.workers, [0, 0, 1, 1]);
        for workers in [1, 2] {
            scaling(&case, workers, true).unwrap();
        }
        let mut wrong = case;
        wrong.expected ^= 1;
        assert!(matches!(
            scaling(&wrong, 1, false),
            Err(BenchError::WrongSum { .. })
        ));
    }

    #[test]
    fn fan_out_puts_a_branch_on_each_of_two_workers_and_checks() {
        let case = FanOut::new(300, 20);
        let units = fan_out_pipeline(&case).units();
        let names: Vec<&str> = units.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names.len(), 6, "{names:?}");
        assert_eq!(names[..4], ["s0", "s1", "s2", "s3"], "{names:?}");
        assert!(names[4].starts_with("fan-out("), "{names:?}");
        assert_eq!(names[5], "post", "{names:?}");
        let plan = Config::new().workers(2).plan_for(&units).unwrap();
        assert_eq!(plan.workers[..4], [0, 0, 1, 1], "{plan}");
        for workers in [1, 2] {
            fan_out(&case, workers, true).unwrap();
        }
        let mut wrong = case;
        wrong.expected ^= 1;
        assert!(matches!(
            fan_out(&wrong, 2, false),
            Err(BenchError::WrongSum { .. })
        ));
    }

    #[test]
    fn sizing_runs_confined_and_auto_sees_one_cpu() {
        let case = Scaling::new(200, 4, 10);
        sizing(&case, None, Spin::Auto, true).unwrap();
        sizing(&case, Some(4), Spin::For(Duration::from_micros(100)), true).unwrap();
        if std::env::var_os(statepipe_pipeline::WORKERS_ENV).is_none() {
            assert_eq!(sizing_auto_workers(), Some(1));
        }
    }
}
