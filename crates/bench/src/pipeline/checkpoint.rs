//! The `checkpoint/*` cases of `statepipe bench pipeline`: what checkpoints, a hot
//! upgrade and a restore cost a running stateful pipeline.
//!
//! The pipeline: three durable stages on two workers (plan `[0, 1, 1]`) —
//! `count` (a `u64` counter), `table` (a `Vec<u64>` of `slots` slots, filled with
//! full-width values, each item adding itself to the slot its hash picks) and `sum` (a
//! running sum) — fed from a range on
//! the first worker and folded on the second (`deploy_with`), so no other thread takes
//! part besides the checkpoint writer and timer.
//!
//! | case | unit | contenders |
//! |---|---|---|
//! | `checkpoint/{8B,1MiB,64MiB}` | M items/s | no checkpoints; `Config::checkpoint_every(1 s)`; `(100 ms)` |
//! | `checkpoint/{..}/max-stall` | µs | the same samples: the longest `CheckpointInfo::max_stall` of the run's checkpoints |
//! | `checkpoint/{..}/taken` | checkpoints | the same samples: checkpoints completed during the run |
//! | `checkpoint/{..}/vs-none` | x | the same samples: each rate over the same round's rate without checkpoints (a paired ratio) |
//! | `checkpoint/upgrade/{p50,p99,max}` | µs | items sent at a steady rate, latency from send to output, inside a window around the middle: without an upgrade; with `Running::upgrade` of `table` (1 MiB) at the middle |
//! | `checkpoint/restore-64MiB`, `checkpoint/write-64MiB` | s | `Checkpoint::latest` + deploy with `Config::restore` until deploy returns; the checkpoint's own `duration` |
//!
//! A throughput sample runs for a fixed time from its first item; its rate is the
//! items out over the time from the first item in to the last out (deployment and the
//! final checkpoint's write excluded: neither is steady-state work). Every sample checks
//! that no item was lost or duplicated: the counter, the table's sum and the folded
//! sum must all match the items sent.
//!
//! The stall, count and paired-ratio rows are read back from the throughput samples
//! (their groups replay what those samples recorded, they run nothing), so a filter
//! that selects one brings the other along. Checkpoints go under [`root_dir`].

use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use statepipe_pipeline::{machine, Checkpoint, Config, Finished, Pipeline, StageState};

use super::statepipe::NAME;
use crate::harness::{Contender, Group, Metric};
use crate::report::{Report, ResultRow, OURS};
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The environment variable naming the folder the checkpoints are written under
/// (default `target/bench-checkpoint`).
pub const DIR_ENV: &str = "STATEPIPE_BENCH_CHECKPOINT_DIR";

/// The labels of the three state sizes, in case names.
pub const SIZE_LABELS: [&str; 3] = ["8B", "1MiB", "64MiB"];

/// The upgrade cases' metrics.
pub const UPGRADE_CASES: [&str; 3] = [
    "checkpoint/upgrade/p50",
    "checkpoint/upgrade/p99",
    "checkpoint/upgrade/max",
];
/// The restore cases' metrics.
pub const RESTORE_CASES: [&str; 2] = ["checkpoint/restore-64MiB", "checkpoint/write-64MiB"];

/// Labels at the start of each contender's `config`, to find its row.
const NONE: &str = "no checkpoints";
const NO_UPGRADE: &str = "no upgrade";
const UPGRADE: &str = "upgrade at the middle";

/// Throughput with a checkpoint every second, as a share of none (1 MiB states).
pub const EVERY_1S_RATIO: f64 = 0.97;
/// The same with one every 100 ms.
pub const EVERY_100MS_RATIO: f64 = 0.90;
/// The longest a worker may stall at a barrier with 1 MiB of state, in µs.
pub const STALL_US: f64 = 1_000.0;
/// What an upgrade may add to the p99 latency of the items around it, in µs.
pub const UPGRADE_P99_US: f64 = 1_000.0;
/// The longest a restore of 64 MiB of state may take, in s.
pub const RESTORE_S: f64 = 0.5;

/// How big and long the checkpoint cases are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointSizes {
    /// How long each throughput sample feeds items.
    pub run: Duration,
    /// The two checkpoint periods compared with none (1 s and 100 ms in a full run).
    pub periods: [Duration; 2],
    /// Slots of `u64` in the table for each of [`SIZE_LABELS`].
    pub slots: [usize; 3],
    /// Slots of the upgraded table (1 MiB in a full run).
    pub upgrade_slots: usize,
    /// How long the upgrade samples send items.
    pub upgrade_run: Duration,
    /// Items per second sent in the upgrade samples.
    pub upgrade_rate: u64,
    /// Half the window of items (by send time) around the middle whose latency counts.
    pub upgrade_window: Duration,
    /// Slots of the restored table (64 MiB in a full run).
    pub restore_slots: usize,
    /// Items through the pipeline before the restore case's checkpoint.
    pub restore_items: u64,
}

const MIB_SLOTS: usize = (1 << 20) / 8;

impl CheckpointSizes {
    /// A full run.
    pub const FULL: CheckpointSizes = CheckpointSizes {
        run: Duration::from_secs(3),
        periods: [Duration::from_secs(1), Duration::from_millis(100)],
        slots: [1, MIB_SLOTS, 64 * MIB_SLOTS],
        upgrade_slots: MIB_SLOTS,
        upgrade_run: Duration::from_secs(1),
        upgrade_rate: 20_000,
        upgrade_window: Duration::from_millis(100),
        restore_slots: 64 * MIB_SLOTS,
        restore_items: 1_000_000,
    };

    /// `--quick`: shorter samples, the same states.
    pub const QUICK: CheckpointSizes = CheckpointSizes {
        run: Duration::from_millis(1_200),
        upgrade_run: Duration::from_millis(600),
        restore_items: 100_000,
        ..CheckpointSizes::FULL
    };

    /// Small enough for a debug-build test (the labels stay those of a full run).
    #[cfg(test)]
    pub(super) const TINY: CheckpointSizes = CheckpointSizes {
        run: Duration::from_millis(300),
        periods: [Duration::from_millis(20), Duration::from_millis(5)],
        slots: [1, 128, 8192],
        upgrade_slots: 128,
        upgrade_run: Duration::from_millis(100),
        upgrade_rate: 20_000,
        upgrade_window: Duration::from_millis(20),
        restore_slots: 8192,
        restore_items: 1_000,
    };
}

/// The throughput case of state size `label`.
fn throughput_case(label: &str) -> String {
    format!("checkpoint/{label}")
}

fn stall_case(label: &str) -> String {
    format!("checkpoint/{label}/max-stall")
}

fn taken_case(label: &str) -> String {
    format!("checkpoint/{label}/taken")
}

fn vs_none_case(label: &str) -> String {
    format!("checkpoint/{label}/vs-none")
}

/// Every case of this module, in run order.
pub fn case_names() -> Vec<String> {
    let mut names = Vec::new();
    for label in SIZE_LABELS {
        names.push(throughput_case(label));
        names.push(stall_case(label));
        names.push(taken_case(label));
        names.push(vs_none_case(label));
    }
    names.extend(UPGRADE_CASES.map(String::from));
    names.extend(RESTORE_CASES.map(String::from));
    names
}

/// Where the checkpoints go: `$STATEPIPE_BENCH_CHECKPOINT_DIR`, else
/// `target/bench-checkpoint` under the working directory.
pub fn root_dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .map_or_else(|| PathBuf::from("target/bench-checkpoint"), PathBuf::from)
}

/// The file system `path` (or the nearest folder above it that exists) is on, as
/// `/proc/self/mounts` names it: `ext4 on /`; `?` where it cannot be told.
pub fn filesystem_of(path: &Path) -> String {
    let mut p = path.to_path_buf();
    while !p.exists() {
        if !p.pop() {
            break;
        }
    }
    let abs = std::fs::canonicalize(if p.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &p
    })
    .unwrap_or(p);
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return "?".into();
    };
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (dev, at, ty) = (f.next()?, f.next()?, f.next()?);
            abs.starts_with(at)
                .then(|| (at.len(), format!("{ty} on {at} ({dev})")))
        })
        .max_by_key(|(len, _)| *len)
        .map_or("?".into(), |(_, s)| s)
}

fn bytes_label(slots: usize) -> String {
    let bytes = slots * 8;
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

fn period_label(p: Duration) -> String {
    if p.as_millis() >= 1000 && p.as_millis() % 1000 == 0 {
        format!("{} s", p.as_secs())
    } else {
        format!("{} ms", p.as_millis())
    }
}

/// Lines describing the checkpoint cases, for the run's header.
pub fn describe(s: &CheckpointSizes) -> String {
    let root = root_dir();
    [
        format!(
            "pipeline: checkpoint: durable stages count -> table -> sum on workers(2), plan \
             [0,1,1], deploy_with; table = Vec<u64> of {} | {} | {}, each item adding itself \
             to one slot; {} per sample from the first item; checkpoints every {} | {} | none",
            bytes_label(s.slots[0]),
            bytes_label(s.slots[1]),
            bytes_label(s.slots[2]),
            period_label(s.run),
            period_label(s.periods[0]),
            period_label(s.periods[1]),
        ),
        format!(
            "pipeline: checkpoint: written under {} ({}; {DIR_ENV} to change)",
            root.display(),
            filesystem_of(&root)
        ),
        format!(
            "pipeline: checkpoint/upgrade: {} items/s for {}, table of {}; latency send -> \
             output of the items sent within ±{} of the middle, where the upgrade (migrate: \
             copy into a new state type) is asked for",
            s.upgrade_rate,
            period_label(s.upgrade_run),
            bytes_label(s.upgrade_slots),
            period_label(s.upgrade_window),
        ),
        format!(
            "pipeline: checkpoint/restore: a checkpoint of a {} table after {} items, then \
             Checkpoint::latest + deploy(Config::restore) timed until deploy returns (the \
             files were just written: read from the page cache)",
            bytes_label(s.restore_slots),
            s.restore_items
        ),
    ]
    .join("\n")
}

// ---------------------------------------------------------------------------------------
// The workload.

/// The slot of `table` item `x` lands in.
fn slot(x: u64, slots: usize) -> usize {
    // Fibonacci hashing spreads consecutive items over the whole table.
    ((x.wrapping_mul(super::workload::GOLDEN) >> 20) % slots as u64) as usize
}

fn table_step(table: &mut [u64], x: u64) -> u64 {
    let i = slot(x, table.len());
    table[i] = table[i].wrapping_add(x);
    x ^ table[i]
}

/// The table's state after an upgrade: the slots, and the items seen since.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TableV2 {
    slots: Vec<u64>,
    since_upgrade: u64,
}

/// The table's first state: full-width pseudo-random values (the worst case of
/// postcard's variable-length integers: 10 bytes for 8), written so that its pages
/// exist before any clock starts.
fn initial_table(slots: usize) -> Vec<u64> {
    (0..slots as u64).map(initial_slot).collect()
}

fn initial_slot(i: u64) -> u64 {
    (i + 1)
        .wrapping_mul(super::workload::GOLDEN)
        .rotate_left(17)
        | 1 << 63
}

/// count -> table -> sum, every stage durable.
fn pipeline(slots: usize) -> Pipeline<u64, u64> {
    let count = Pipeline::durable_stage(
        "count",
        0u64,
        machine::step(|n: &mut u64, x: u64| {
            *n += 1;
            x
        }),
    );
    let table = Pipeline::durable_stage(
        "table",
        initial_table(slots),
        machine::step(|t: &mut Vec<u64>, x: u64| table_step(t, x)),
    );
    let sum = Pipeline::durable_stage(
        "sum",
        0u64,
        machine::step(|s: &mut u64, y: u64| {
            *s = s.wrapping_add(y);
            y
        }),
    );
    count.then(table).then(sum)
}

fn config(pin: bool) -> Config {
    Config::new().workers(2).plan(vec![0, 1, 1]).pin(pin)
}

fn state<'s, S: 'static>(states: &'s [StageState], name: &str) -> Option<&'s S> {
    states.iter().find(|s| s.name == name)?.get::<S>()
}

/// Checks the final states against `items` inputs `0..items` and the folded outputs.
fn check(
    who: &str,
    states: &[StageState],
    items: u64,
    outputs: u64,
    folded: u64,
) -> Result<(), BenchError> {
    let fail = |what: String| Err(BenchError::failed(who, what));
    if outputs != items {
        return fail(format!("{outputs} outputs for {items} items"));
    }
    if state::<u64>(states, "count") != Some(&items) {
        return fail(format!(
            "count = {:?}, expected {items}",
            state::<u64>(states, "count")
        ));
    }
    let table: &[u64] = match (
        state::<Vec<u64>>(states, "table"),
        state::<TableV2>(states, "table"),
    ) {
        (Some(t), _) => t,
        (_, Some(t)) => &t.slots,
        _ => return fail("no table state".into()),
    };
    let initial = (0..table.len() as u64)
        .map(initial_slot)
        .fold(0, u64::wrapping_add);
    let want = (0..items).fold(initial, u64::wrapping_add);
    let got = table.iter().fold(0u64, |a, &b| a.wrapping_add(b));
    if got != want {
        return fail(format!(
            "the table sums to {got}, expected {want}: an item lost or repeated"
        ));
    }
    if state::<u64>(states, "sum") != Some(&folded) {
        return fail(format!(
            "sum = {:?}, the sink folded {folded}",
            state::<u64>(states, "sum")
        ));
    }
    Ok(())
}

fn deploy_error(who: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::failed(who, e)
}

/// A folder for one sample's checkpoints, removed when dropped.
struct SampleDir(PathBuf);

impl SampleDir {
    fn new(tag: &str) -> Result<SampleDir, BenchError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only a unique number.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = root_dir().join(format!("{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| {
            BenchError::failed("checkpoint folder", format!("{}: {e}", dir.display()))
        })?;
        Ok(SampleDir(dir))
    }
}

impl Drop for SampleDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The inputs `0..`, until `run` after the first one is taken; counts what it gave.
struct Timed {
    next: u64,
    run: Duration,
    deadline: Option<Instant>,
    first: Arc<Mutex<Option<Instant>>>,
}

impl Iterator for Timed {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        let x = self.next;
        if x % 1024 == 0 {
            let now = Instant::now();
            match self.deadline {
                None => {
                    self.deadline = Some(now + self.run);
                    *self.first.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
                }
                Some(d) if now >= d => return None,
                Some(_) => {}
            }
        }
        self.next += 1;
        Some(x)
    }
}

/// What the sink saw, kept when it is dropped (after the last output).
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    outputs: u64,
    sum: u64,
    last: Option<Instant>,
}

struct Sink {
    seen: Seen,
    out: Arc<Mutex<Seen>>,
}

impl Sink {
    fn add(&mut self, y: u64) {
        self.seen.outputs += 1;
        self.seen.sum = self.seen.sum.wrapping_add(y);
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.seen.last = Some(Instant::now());
        *self.out.lock().unwrap_or_else(|p| p.into_inner()) = self.seen;
    }
}

/// One throughput sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    /// Millions of items per second, first item in to last out.
    pub rate: f64,
    /// The longest `max_stall` of the checkpoints completed during the run, in µs.
    pub max_stall_us: f64,
    /// Checkpoints completed during the run.
    pub taken: u64,
}

/// Runs the pipeline with a table of `slots` for `run`, with a checkpoint every `every`
/// (none if `None`).
///
/// # Errors
///
/// A failed deployment or checkpoint folder, or a wrong answer.
pub fn throughput(
    slots: usize,
    run: Duration,
    every: Option<Duration>,
    pin: bool,
) -> Result<Throughput, BenchError> {
    let who = format!(
        "{NAME} checkpoint/{} every {}",
        bytes_label(slots),
        every.map_or("-".into(), period_label)
    );
    let dir = every.map(|_| SampleDir::new("throughput")).transpose()?;
    let mut cfg = config(pin);
    if let (Some(every), Some(dir)) = (every, &dir) {
        cfg = cfg.checkpoint_dir(&dir.0).checkpoint_every(every);
    }
    let first = Arc::new(Mutex::new(None));
    let source = Timed {
        next: 0,
        run,
        deadline: None,
        first: Arc::clone(&first),
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut sink = Sink {
        seen: Seen::default(),
        out: Arc::clone(&seen),
    };
    let p = pipeline(slots);
    let _watchdog = Watchdog::arm(&who, super::peers::HANG_LIMIT + run);
    let running = p
        .deploy_with(&cfg, source, move |_seq, y: u64| sink.add(y))
        .map_err(|e| deploy_error(&who, e))?;
    // Every contender polls alike; only a checkpointing one finds anything.
    let (mut last_id, mut max_stall, mut taken) = (0u64, Duration::ZERO, 0u64);
    let mut look = |running: &statepipe_pipeline::Running| {
        if let Some(info) = running.last_checkpoint() {
            if info.id != last_id {
                last_id = info.id;
                taken += 1;
                max_stall = max_stall.max(info.max_stall);
            }
        }
    };
    while !running.is_finished() {
        look(&running);
        thread::sleep(Duration::from_millis(5));
    }
    look(&running);
    let finished: Finished = running.join().map_err(|e| deploy_error(&who, e))?;
    if !finished.failures.is_empty() {
        return Err(BenchError::failed(
            &who,
            format!("{:?}", finished.failures[0]),
        ));
    }
    let seen = *seen.lock().unwrap_or_else(|p| p.into_inner());
    let start = first.lock().unwrap_or_else(|p| p.into_inner()).take();
    let (Some(start), Some(end)) = (start, seen.last) else {
        return Err(BenchError::failed(&who, "no item went through"));
    };
    check(&who, &finished.states, seen.outputs, seen.outputs, seen.sum)?;
    Ok(Throughput {
        rate: seen.outputs as f64 / (end - start).as_secs_f64().max(1e-9) / 1e6,
        max_stall_us: max_stall.as_secs_f64() * 1e6,
        taken,
    })
}

/// Latencies of the items around the middle of an upgrade sample, in µs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// Sends items at `rate` per second for `run` through count -> table (upgradable,
/// `slots` slots) -> sum, upgrading `table` at the middle if `upgrade`; returns the
/// latency, send to output, of the items sent within `window` of the middle.
///
/// # Errors
///
/// A failed deployment or upgrade, or a wrong answer.
pub fn upgrade_latency(
    slots: usize,
    run: Duration,
    rate: u64,
    window: Duration,
    upgrade: bool,
    pin: bool,
) -> Result<Latency, BenchError> {
    let who = format!(
        "{NAME} checkpoint/upgrade ({})",
        if upgrade { UPGRADE } else { NO_UPGRADE }
    );
    // Inputs carry their send time, in ns from t0; outputs give it back.
    let count = Pipeline::durable_stage(
        "count",
        0u64,
        machine::step(|n: &mut u64, x: (u64, u64)| {
            *n += 1;
            x
        }),
    );
    let (table, handle) = Pipeline::upgradable(
        "table",
        initial_table(slots),
        machine::step(|t: &mut Vec<u64>, (x, sent): (u64, u64)| (table_step(t, x), sent)),
    );
    let sum = Pipeline::durable_stage(
        "sum",
        0u64,
        machine::step(|s: &mut u64, (y, sent): (u64, u64)| {
            *s = s.wrapping_add(y);
            (y, sent)
        }),
    );
    let d = count
        .then(table)
        .then(sum)
        .deploy(&config(pin))
        .map_err(|e| deploy_error(&who, e))?;
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    let _watchdog = Watchdog::arm(&who, super::peers::HANG_LIMIT + run);
    let items = (run.as_secs_f64() * rate as f64) as u64;
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    let middle = items / 2;
    let t0 = Instant::now();
    let (received, fed) = thread::scope(|s| {
        let drain = s.spawn(move || {
            let mut got = Vec::with_capacity(items as usize);
            let (mut n, mut sum) = (0u64, 0u64);
            while let Some((_, (y, sent))) = output.recv() {
                let now = t0.elapsed().as_nanos() as u64;
                got.push((sent, now.saturating_sub(sent)));
                n += 1;
                sum = sum.wrapping_add(y);
            }
            (got, n, sum, output.failures().count())
        });
        let mut ticket = None;
        let mut upgraded_at = None;
        for x in 0..items {
            if x == middle {
                upgraded_at = Some(t0.elapsed());
                if upgrade {
                    let migrate = |old: &Vec<u64>| {
                        Ok::<_, std::convert::Infallible>(TableV2 {
                            slots: old.clone(),
                            since_upgrade: 0,
                        })
                    };
                    let next = machine::step(|t: &mut TableV2, (x, sent): (u64, u64)| {
                        t.since_upgrade += 1;
                        (table_step(&mut t.slots, x), sent)
                    });
                    ticket = Some(running.upgrade(&handle, next, migrate));
                }
            }
            let due = period * x as u32;
            let now = t0.elapsed();
            if due > now {
                thread::sleep(due - now);
            }
            let sent = t0.elapsed().as_nanos() as u64;
            if input.send((x, sent)).is_err() {
                break;
            }
        }
        drop(input);
        let upgraded = match ticket {
            Some(Ok(t)) => t.wait().map(|_| ()).map_err(|e| e.to_string()),
            Some(Err(e)) => Err(e.to_string()),
            None => Ok(()),
        };
        (drain.join(), (upgraded, upgraded_at))
    });
    let (got, n, sum, failures) =
        received.map_err(|_| BenchError::failed(&who, "the output thread panicked"))?;
    let (upgraded, upgraded_at) = fed;
    upgraded.map_err(|e| BenchError::failed(&who, e))?;
    let finished = running.join().map_err(|e| deploy_error(&who, e))?;
    if failures > 0 {
        return Err(BenchError::failed(
            &who,
            format!("{failures} item(s) failed"),
        ));
    }
    check(&who, &finished.states, items, n, sum)?;
    let since = state::<TableV2>(&finished.states, "table").map(|t| t.since_upgrade);
    if upgrade != since.is_some() || (since == Some(0) && middle < items) {
        return Err(BenchError::failed(
            &who,
            format!("the table's state after the run: upgraded {since:?}"),
        ));
    }
    let mid = upgraded_at.unwrap_or(run / 2).as_nanos() as u64;
    let w = window.as_nanos() as u64;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3)
        .map_err(|e| BenchError::failed(&who, e))?;
    for (sent, latency) in got {
        if sent + w >= mid && sent <= mid + w {
            hist.saturating_record(latency.max(1));
        }
    }
    if hist.is_empty() {
        return Err(BenchError::failed(&who, "no item inside the window"));
    }
    let us = |ns: u64| ns as f64 / 1e3;
    Ok(Latency {
        p50: us(hist.value_at_quantile(0.5)),
        p99: us(hist.value_at_quantile(0.99)),
        max: us(hist.max()),
    })
}

/// One restore sample: seconds to write the checkpoint and to restore it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Restore {
    /// `Checkpoint::latest` + deploy with `Config::restore`, in s.
    pub restore: f64,
    /// The checkpoint's `duration`: request to manifest durable, in s.
    pub write: f64,
}

/// Runs `items` items through a pipeline whose table has `slots` slots, checkpoints it,
/// and times restoring the checkpoint into a new deployment.
///
/// # Errors
///
/// A failed deployment, checkpoint or restore, or a wrong restored state.
pub fn restore(slots: usize, items: u64, pin: bool) -> Result<Restore, BenchError> {
    let who = format!("{NAME} checkpoint/restore {}", bytes_label(slots));
    let dir = SampleDir::new("restore")?;
    let _watchdog = Watchdog::arm(&who, super::peers::HANG_LIMIT);
    let d = pipeline(slots)
        .deploy(&config(pin).checkpoint_dir(&dir.0))
        .map_err(|e| deploy_error(&who, e))?;
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    let (info, sum) = thread::scope(|s| {
        let drain = s.spawn(move || {
            let mut sum = 0u64;
            while let Some((_, y)) = output.recv() {
                sum = sum.wrapping_add(y);
            }
            sum
        });
        let sent = input.send_all(0..items).is_ok();
        let ticket = running.checkpoint();
        drop(input);
        let sum = drain.join().unwrap_or(0);
        (
            ticket.map_err(|e| e.to_string()).and_then(|t| {
                if sent {
                    t.wait().map_err(|e| e.to_string())
                } else {
                    Err("the input stopped taking items".into())
                }
            }),
            sum,
        )
    });
    let info = info.map_err(|e| BenchError::failed(&who, e))?;
    let first = running.join().map_err(|e| deploy_error(&who, e))?;
    check(&who, &first.states, items, items, sum)?;
    if info.position != items {
        return Err(BenchError::failed(
            &who,
            format!("checkpoint at {} of {items}", info.position),
        ));
    }

    // Built before the clock: its initial table is the caller's, not the restore's.
    let fresh = pipeline(slots);
    let t0 = Instant::now();
    let ckpt = Checkpoint::latest(&dir.0)
        .map_err(|e| BenchError::failed(&who, e))?
        .ok_or_else(|| BenchError::failed(&who, "no complete checkpoint"))?;
    let d = fresh
        .deploy(&config(pin).restore(ckpt))
        .map_err(|e| deploy_error(&who, e))?;
    let restore = t0.elapsed();
    let (input, output, running) = (d.input, d.output, d.running);
    if running.resumed_from() != Some(items) {
        return Err(BenchError::failed(
            &who,
            format!(
                "resumed from {:?}, expected {items}",
                running.resumed_from()
            ),
        ));
    }
    drop(input);
    drop(output);
    let second = running.join().map_err(|e| deploy_error(&who, e))?;
    check(&who, &second.states, items, items, sum)?;
    Ok(Restore {
        restore: restore.as_secs_f64(),
        write: info.duration.as_secs_f64(),
    })
}

// ---------------------------------------------------------------------------------------
// The groups.

fn metric(case: &str, unit: &str, higher_is_better: bool) -> Metric {
    Metric {
        case: case.to_string(),
        unit: unit.to_string(),
        higher_is_better,
    }
}

type Replay = Rc<RefCell<VecDeque<Throughput>>>;

/// The groups of state size `k` (`SIZE_LABELS[k]`): its throughput, then the stalls
/// and checkpoint counts of the same samples (replayed, not run again).
pub fn size_groups(s: &CheckpointSizes, k: usize, pin: bool) -> Vec<Group<'static>> {
    let (label, slots, run) = (SIZE_LABELS[k], s.slots[k], s.run);
    let bytes = bytes_label(slots);
    let replays: [Replay; 2] = Default::default();
    // The rates without checkpoints, one per round, for the paired ratios.
    let nones: Rc<RefCell<Vec<f64>>> = Rc::default();
    let record = Rc::clone(&nones);
    let mut contenders = vec![Contender::new(
        NAME,
        format!("{NONE}; table of {bytes}"),
        move || {
            let rate = throughput(slots, run, None, pin)?.rate;
            record.borrow_mut().push(rate);
            Ok(vec![rate])
        },
    )];
    for (period, replay) in s.periods.into_iter().zip(&replays) {
        let replay = Rc::clone(replay);
        contenders.push(Contender::new(
            NAME,
            format!("every {}; table of {bytes}", period_label(period)),
            move || {
                let t = throughput(slots, run, Some(period), pin)?;
                replay.borrow_mut().push_back(t);
                Ok(vec![t.rate])
            },
        ));
    }
    let case = throughput_case(label);
    let mut groups = vec![Group {
        name: case.clone(),
        metrics: vec![metric(&case, "M items/s", true)],
        contenders,
    }];
    let contenders = s
        .periods
        .into_iter()
        .zip(replays)
        .map(|(period, replay)| {
            let nones = Rc::clone(&nones);
            let mut round = 0;
            Contender::new(
                NAME,
                format!(
                    "every {}; the samples of {case}: longest stall of the run's checkpoints | \
                     checkpoints completed | rate / the same round's rate without",
                    period_label(period)
                ),
                move || {
                    let missing =
                        || BenchError::failed("checkpoint stalls", "no throughput sample to read");
                    let t = replay.borrow_mut().pop_front().ok_or_else(missing)?;
                    let none = *nones.borrow().get(round).ok_or_else(missing)?;
                    round += 1;
                    Ok(vec![t.max_stall_us, t.taken as f64, t.rate / none])
                },
            )
        })
        .collect();
    groups.push(Group {
        name: stall_case(label),
        metrics: vec![
            metric(&stall_case(label), "µs", false),
            metric(&taken_case(label), "checkpoints", true),
            metric(&vs_none_case(label), "x (same round)", true),
        ],
        contenders,
    });
    groups
}

/// The upgrade group: the same window without and with an upgrade.
pub fn upgrade_group(s: &CheckpointSizes, pin: bool) -> Group<'static> {
    let s = *s;
    let contender = |label: &str, upgrade: bool| {
        Contender::new(
            NAME,
            format!(
                "{label}; {} items/s, table of {}, items sent within ±{} of the middle",
                s.upgrade_rate,
                bytes_label(s.upgrade_slots),
                period_label(s.upgrade_window)
            ),
            move || {
                let l = upgrade_latency(
                    s.upgrade_slots,
                    s.upgrade_run,
                    s.upgrade_rate,
                    s.upgrade_window,
                    upgrade,
                    pin,
                )?;
                Ok(vec![l.p50, l.p99, l.max])
            },
        )
    };
    Group {
        name: "checkpoint/upgrade".into(),
        metrics: UPGRADE_CASES
            .iter()
            .map(|c| metric(c, "µs", false))
            .collect(),
        contenders: vec![contender(NO_UPGRADE, false), contender(UPGRADE, true)],
    }
}

/// The restore group.
pub fn restore_group(s: &CheckpointSizes, pin: bool) -> Group<'static> {
    let (slots, items) = (s.restore_slots, s.restore_items);
    Group {
        name: "checkpoint/restore".into(),
        metrics: vec![
            metric(RESTORE_CASES[0], "s", false),
            metric(RESTORE_CASES[1], "s", false),
        ],
        contenders: vec![Contender::new(
            NAME,
            format!(
                "table of {}: Checkpoint::latest + deploy(restore) | the checkpoint's duration",
                bytes_label(slots)
            ),
            move || {
                let r = restore(slots, items, pin)?;
                Ok(vec![r.restore, r.write])
            },
        )],
    }
}

/// Every wanted group, given which cases pass the filter.
pub fn groups(
    s: &CheckpointSizes,
    pin: bool,
    wants: impl Fn(&[&str]) -> bool,
) -> Vec<Group<'static>> {
    let mut groups = Vec::new();
    for (k, label) in SIZE_LABELS.into_iter().enumerate() {
        let cases = [
            throughput_case(label),
            stall_case(label),
            taken_case(label),
            vs_none_case(label),
        ];
        if wants(&cases.each_ref().map(String::as_str)) {
            groups.extend(size_groups(s, k, pin));
        }
    }
    if wants(&UPGRADE_CASES) {
        groups.push(upgrade_group(s, pin));
    }
    if wants(&RESTORE_CASES) {
        groups.push(restore_group(s, pin));
    }
    groups
}

// ---------------------------------------------------------------------------------------
// The targets.

/// Our rows of `case`, in contender order.
fn ours_in<'r>(report: &'r Report, case: &str) -> Vec<&'r ResultRow> {
    report
        .results
        .iter()
        .filter(|r| r.case == case && r.imp == OURS)
        .collect()
}

/// A row's contender label: its config up to the first `;`.
fn label_of(row: &ResultRow) -> &str {
    row.config.split(';').next().unwrap_or("")
}

fn find<'r>(report: &'r Report, case: &str, label: &str) -> Option<&'r ResultRow> {
    report
        .results
        .iter()
        .find(|r| r.case == case && r.imp == OURS && r.config.starts_with(label))
}

/// One line per checkpoint target whose rows are in `report`: what, the figure, the
/// bound, and whether it is met.
pub fn targets(report: &Report) -> Vec<(String, f64, String, bool)> {
    let mut out = Vec::new();
    // Rows by position: the contenders are [none, periods[0], periods[1]] (1 s and
    // 100 ms in a full run), the stall and ratio cases' [periods[0], periods[1]].
    let case = throughput_case("1MiB");
    let rates = ours_in(report, &case);
    let paired = ours_in(report, &vs_none_case("1MiB"));
    let bounds = [EVERY_1S_RATIO, EVERY_100MS_RATIO];
    if let ([none, with @ ..], true) = (rates.as_slice(), paired.len() == 2) {
        for ((row, paired), bound) in with.iter().zip(&paired).zip(bounds) {
            let label = label_of(row);
            out.push((
                format!(
                    "{case} {label} / {NONE}, median of the rounds' ratios ({:.3}..{:.3}; \
                     medians {:.2} / {:.2} M items/s = {:.3})",
                    paired.min,
                    paired.max,
                    row.median,
                    none.median,
                    row.median / none.median.max(1e-12)
                ),
                paired.median,
                format!(">= {bound}"),
                paired.median >= bound,
            ));
        }
    }
    let case = stall_case("1MiB");
    for row in ours_in(report, &case) {
        out.push((
            format!(
                "{case} {}, ms (median of the runs' longest; largest {:.3} ms)",
                label_of(row),
                row.max / 1e3
            ),
            row.median / 1e3,
            format!("<= {}", STALL_US / 1e3),
            row.median <= STALL_US,
        ));
    }
    let case = UPGRADE_CASES[1];
    if let (Some(none), Some(up)) = (find(report, case, NO_UPGRADE), find(report, case, UPGRADE)) {
        let added = up.median - none.median;
        out.push((
            format!(
                "{case} added by the upgrade, ms ({:.3} - {:.3} ms)",
                up.median / 1e3,
                none.median / 1e3
            ),
            added / 1e3,
            format!("<= {}", UPGRADE_P99_US / 1e3),
            added <= UPGRADE_P99_US,
        ));
    }
    if let Some(row) = report.results.iter().find(|r| r.case == RESTORE_CASES[0]) {
        out.push((
            format!("{} s", RESTORE_CASES[0]),
            row.median,
            format!("<= {RESTORE_S}"),
            row.median <= RESTORE_S,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_checkpoint_case_runs_with_checked_answers() {
        let s = CheckpointSizes::TINY;
        let groups = groups(&s, false, |_| true);
        let host = crate::host::measure(Duration::from_millis(2));
        let rows = crate::harness::run(groups, 2, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        let report = Report::new("pipeline", &host, rows);
        let mut cases = report.cases();
        cases.dedup();
        assert_eq!(cases, case_names());
        let t = targets(&report);
        assert_eq!(t.len(), 6, "{t:?}");
        let taken = report
            .results
            .iter()
            .filter(|r| r.case == taken_case("1MiB"))
            .map(|r| r.max)
            .fold(0.0, f64::max);
        assert!(taken >= 1.0, "a checkpoint was taken in {:?}", s.run);
    }

    /// CPU time of the calling thread (user + system), in ms.
    fn thread_cpu_ms() -> f64 {
        use nix::sys::resource::{getrusage, UsageWho};
        getrusage(UsageWho::RUSAGE_THREAD).map_or(f64::NAN, |u| {
            let ms =
                |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e3 + t.tv_usec() as f64 / 1e3;
            ms(u.user_time()) + ms(u.system_time())
        })
    }

    fn timed<T>(what: &str, runs: usize, mut f: impl FnMut() -> T) {
        let (mut ms, mut cpu): (Vec<f64>, Vec<f64>) = (0..runs)
            .map(|_| {
                let (t0, c0) = (Instant::now(), thread_cpu_ms());
                std::hint::black_box(f());
                (t0.elapsed().as_secs_f64() * 1e3, thread_cpu_ms() - c0)
            })
            .unzip();
        ms.sort_by(f64::total_cmp);
        cpu.sort_by(f64::total_cmp);
        println!(
            "{what}: median {:.3} ms, min {:.3}, max {:.3}; this thread's CPU median {:.3} ms \
             ({runs} runs)",
            ms[runs / 2],
            ms[0],
            ms[runs - 1],
            cpu[runs / 2]
        );
    }

    /// What a checkpoint and a restore of the bench's tables cost, step by step (the
    /// steps of the library's writer and restore, measured here on the same data).
    #[test]
    #[ignore = "a cost breakdown for the results notes: cargo test --release -p statepipe-bench checkpoint::tests::cost_breakdown -- --ignored --nocapture"]
    fn cost_breakdown() {
        let dir = SampleDir::new("breakdown").unwrap();
        // The barrier's pattern: a worker thread (new with each deployment) clones
        // the state, the writer thread frees the copy once written.
        for slots in [MIB_SLOTS, 64 * MIB_SLOTS] {
            let table = Arc::new(initial_table(slots));
            for deployment in 0..3 {
                let t = Arc::clone(&table);
                let (tx, rx) = std::sync::mpsc::channel::<Vec<u64>>();
                let writer = thread::spawn(move || rx.into_iter().for_each(drop));
                let us: Vec<u64> = thread::spawn(move || {
                    (0..8)
                        .map(|_| {
                            let t0 = Instant::now();
                            let copy = (*t).clone();
                            let took = t0.elapsed().as_micros() as u64;
                            tx.send(copy).unwrap();
                            thread::sleep(Duration::from_millis(20));
                            took
                        })
                        .collect()
                })
                .join()
                .unwrap();
                writer.join().unwrap();
                println!(
                    "{}: clone on a new thread, freed on another, deployment {deployment}: {us:?} µs",
                    bytes_label(slots)
                );
            }
        }
        for slots in [MIB_SLOTS, 64 * MIB_SLOTS] {
            let label = bytes_label(slots);
            let table = initial_table(slots);
            let runs = if slots > MIB_SLOTS { 5 } else { 50 };
            timed(
                &format!("{label}: clone (a fresh allocation, as at a barrier)"),
                runs,
                || table.clone(),
            );
            let mut reused = table.clone();
            timed(
                &format!("{label}: copy into a buffer already mapped"),
                runs,
                || reused.copy_from_slice(&table),
            );
            timed(&format!("{label}: postcard encode"), runs, || {
                postcard::to_allocvec(&table).unwrap()
            });
            let bytes = postcard::to_allocvec(&table).unwrap();
            println!("{label}: encoded {} bytes", bytes.len());
            let path = dir.0.join(format!("{slots}.state"));
            timed(
                &format!("{label}: write_atomic (temp file, fsync, rename)"),
                runs.min(10),
                || statepipe_sys::durable::write_atomic(&path, &bytes).unwrap(),
            );
            timed(&format!("{label}: fs::read (page cache)"), runs, || {
                std::fs::read(&path).unwrap()
            });
            timed(&format!("{label}: to_vec of the payload"), runs, || {
                bytes.to_vec()
            });
            timed(&format!("{label}: postcard decode"), runs, || {
                postcard::from_bytes::<Vec<u64>>(&bytes).unwrap()
            });
        }
    }

    #[test]
    fn the_filesystem_is_named() {
        let fs = filesystem_of(Path::new("target/surely/not/there"));
        assert!(fs.contains(" on /") || fs == "?", "{fs}");
    }

    #[test]
    fn an_upgrade_changes_the_state_type_and_loses_nothing() {
        let l = upgrade_latency(
            64,
            Duration::from_millis(50),
            10_000,
            Duration::from_millis(10),
            true,
            false,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(l.p50 <= l.p99 && l.p99 <= l.max, "{l:?}");
    }
}
