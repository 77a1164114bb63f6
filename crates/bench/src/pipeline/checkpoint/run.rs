//! The pipeline under test and one sample of each kind: throughput with
//! checkpoints, latency across a hot upgrade, a restore.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use statepipe_pipeline::{machine, Checkpoint, Config, Finished, Pipeline, StageState};

use super::base::*;
use crate::pipeline::statepipe::NAME;
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The slot of `table` item `x` lands in.
pub(super) fn slot(x: u64, slots: usize) -> usize {
    // Fibonacci hashing spreads consecutive items over the whole table.
    ((x.wrapping_mul(crate::pipeline::workload::GOLDEN) >> 20) % slots as u64) as usize
}

pub(super) fn table_step(table: &mut [u64], x: u64) -> u64 {
    let i = slot(x, table.len());
    table[i] = table[i].wrapping_add(x);
    x ^ table[i]
}

/// The table's state after an upgrade: the slots, and the items seen since.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct TableV2 {
    slots: Vec<u64>,
    since_upgrade: u64,
}

/// The table's first state: full-width pseudo-random values (the worst case of
/// postcard's variable-length integers: 10 bytes for 8), written so that its pages
/// exist before any clock starts.
pub(super) fn initial_table(slots: usize) -> Vec<u64> {
    (0..slots as u64).map(initial_slot).collect()
}

pub(super) fn initial_slot(i: u64) -> u64 {
    (i + 1)
        .wrapping_mul(crate::pipeline::workload::GOLDEN)
        .rotate_left(17)
        | 1 << 63
}

/// count -> table -> sum, every stage durable.
pub(super) fn pipeline(slots: usize) -> Pipeline<u64, u64> {
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

pub(super) fn config(pin: bool) -> Config {
    Config::new().workers(2).plan(vec![0, 1, 1]).pin(pin)
}

pub(super) fn state<'s, S: 'static>(states: &'s [StageState], name: &str) -> Option<&'s S> {
    states.iter().find(|s| s.name == name)?.get::<S>()
}

/// Checks the final states against `items` inputs `0..items` and the folded outputs.
pub(super) fn check(
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

pub(super) fn deploy_error(who: &str, e: impl std::fmt::Display) -> BenchError {
    BenchError::failed(who, e)
}

/// A folder for one sample's checkpoints, removed when dropped.
pub(super) struct SampleDir(pub(super) PathBuf);

impl SampleDir {
    pub(super) fn new(tag: &str) -> Result<SampleDir, BenchError> {
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
pub(super) struct Timed {
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
pub(super) struct Seen {
    outputs: u64,
    sum: u64,
    last: Option<Instant>,
}

pub(super) struct Sink {
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
    let _watchdog = Watchdog::arm(&who, crate::pipeline::peers::HANG_LIMIT + run);
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
    let _watchdog = Watchdog::arm(&who, crate::pipeline::peers::HANG_LIMIT + run);
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
    let _watchdog = Watchdog::arm(&who, crate::pipeline::peers::HANG_LIMIT);
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
