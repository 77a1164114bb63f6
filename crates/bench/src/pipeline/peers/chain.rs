//! Peer: one OS thread per stage, chained by crossbeam `bounded` channels: the pipeline
//! a Rust user writes by hand.
//!
//! The calling thread feeds items `0..n` into the first channel; each stage thread
//! receives, applies its stage with its own state and sends on; the last stage thread
//! also folds its outputs into the checksum (it is the collector) and returns it when
//! its input closes. The clock runs from the first send until the last stage returned.
//!
//! The fan-out adds a fork thread, which sends a copy of each item into each branch's
//! first channel, and a join thread in place of the collector, which receives one
//! output from each branch per item, combines them and folds the checksum.

use std::sync::{Arc, Barrier};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{join, join_all, HANG_LIMIT};
use crate::pipeline::workload::{
    fan_out_combine, spin_work, trivial3_expected, trivial_a, trivial_b, trivial_c, FanOut,
    Scaling, FAN_OUT_SALT,
};
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "crossbeam-threads";

/// The `config` of its rows.
pub fn config(capacity: usize) -> String {
    format!("thread per stage, crossbeam bounded({capacity})")
}

/// Runs trivial3 on three stage threads; returns the time from the first item sent
/// until the checksum was in.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the checksum is not
/// [`trivial3_expected`]`(items)`; [`BenchError::Failed`] when a stage panicked.
///
/// # Panics
///
/// If `capacity` is 0 (a rendezvous channel is another workload).
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::thread_per_stage_trivial3;
/// let elapsed = thread_per_stage_trivial3(1_000, 64).unwrap();
/// assert!(elapsed.as_nanos() > 0);
/// ```
pub fn thread_per_stage_trivial3(items: u64, capacity: usize) -> Result<Duration, BenchError> {
    assert!(capacity > 0, "capacity must be at least 1");
    let who = format!("{NAME} trivial3");
    let expected = trivial3_expected(items);
    let start = Arc::new(Barrier::new(4));
    let (feed, rx) = bounded::<u64>(capacity);
    // Each stage's state, moved into its thread.
    let (mut a, mut b, mut c) = (0u64, 0u64, 0u64);
    let (rx, stage_a) = stage(rx, capacity, &start, move |x| trivial_a(&mut a, x));
    let (rx, stage_b) = stage(rx, capacity, &start, move |x| trivial_b(&mut b, x));
    let collector = collect(rx, &start, move |x| trivial_c(&mut c, x));
    run(
        &who,
        items,
        feed,
        &start,
        vec![stage_a, stage_b],
        collector,
        expected,
    )
}

/// Runs a [`Scaling`] case on `case.stages` stage threads, each applying
/// [`spin_work`]`(_, case.iters)`; returns the time from the first item sent until the
/// checksum was in.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the checksum is not `case.expected`;
/// [`BenchError::Failed`] when a stage panicked.
///
/// # Panics
///
/// If `capacity` or `case.stages` is 0.
pub fn thread_per_stage_scaling(case: &Scaling, capacity: usize) -> Result<Duration, BenchError> {
    assert!(capacity > 0, "capacity must be at least 1");
    assert!(case.stages > 0, "a pipeline needs a stage");
    let who = format!("{NAME} scaling/{}", case.stages);
    let iters = case.iters;
    let start = Arc::new(Barrier::new(case.stages + 1));
    let (feed, mut rx) = bounded::<u64>(capacity);
    let mut stages = Vec::with_capacity(case.stages - 1);
    for _ in 1..case.stages {
        let (next, handle) = stage(rx, capacity, &start, move |x| spin_work(x, iters));
        rx = next;
        stages.push(handle);
    }
    let collector = collect(rx, &start, move |x| spin_work(x, iters));
    run(
        &who,
        case.items,
        feed,
        &start,
        stages,
        collector,
        case.expected,
    )
}

/// Runs a [`FanOut`] case on six threads: a fork copying each item into both branches,
/// two stage threads per branch ([`spin_work`]`(_, case.iters)`, branch b's first on the
/// item xored with [`FAN_OUT_SALT`]), and a join thread pairing the branches' outputs
/// per item with [`fan_out_combine`] and folding the checksum; returns the time from
/// the first item sent until the checksum was in.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the checksum is not `case.expected`;
/// [`BenchError::Failed`] when a thread panicked.
///
/// # Panics
///
/// If `capacity` is 0.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::thread_per_stage_fan_out;
/// use statepipe_bench::pipeline::workload::FanOut;
/// let elapsed = thread_per_stage_fan_out(&FanOut::new(200, 10), 16).unwrap();
/// assert!(elapsed.as_nanos() > 0);
/// ```
pub fn thread_per_stage_fan_out(case: &FanOut, capacity: usize) -> Result<Duration, BenchError> {
    assert!(capacity > 0, "capacity must be at least 1");
    let who = format!("{NAME} fan-out");
    let iters = case.iters;
    // The fork, four stages, the join and the feeding thread.
    let start = Arc::new(Barrier::new(7));
    let (feed, rx) = bounded::<u64>(capacity);
    let (rx_a, rx_b, fork) = fork(rx, capacity, &start);
    let spin = move |x| spin_work(x, iters);
    let (rx_a, a0) = stage(rx_a, capacity, &start, spin);
    let (rx_a, a1) = stage(rx_a, capacity, &start, spin);
    let (rx_b, b0) = stage(rx_b, capacity, &start, move |x| {
        spin_work(x ^ FAN_OUT_SALT, iters)
    });
    let (rx_b, b1) = stage(rx_b, capacity, &start, spin);
    let joiner = pair_up(rx_a, rx_b, &start, fan_out_combine);
    run(
        &who,
        case.items,
        feed,
        &start,
        vec![fork, a0, a1, b0, b1],
        joiner,
        case.expected,
    )
}

/// Feeds `0..items`, waits for the collector's checksum, joins the stages, checks.
fn run(
    who: &str,
    items: u64,
    feed: Sender<u64>,
    start: &Barrier,
    stages: Vec<JoinHandle<()>>,
    collector: JoinHandle<u64>,
    expected: u64,
) -> Result<Duration, BenchError> {
    let _watchdog = Watchdog::arm(who, HANG_LIMIT);
    start.wait();
    let t0 = Instant::now();
    // A failed send means a stage is gone (it panicked): stop feeding, the joins say why.
    let fed = (0..items).try_for_each(|x| feed.send(x));
    drop(feed);
    let got = join(who, "the last stage", collector);
    let elapsed = t0.elapsed();
    join_all(who, "a stage", stages)?;
    let got = got?;
    if fed.is_err() {
        return Err(BenchError::failed(who, "a stage stopped receiving"));
    }
    if got != expected {
        return Err(BenchError::WrongSum {
            who: who.to_string(),
            expected,
            got,
        });
    }
    Ok(elapsed)
}

/// Spawns a middle stage: `f` on every item, sent on to a new channel it returns.
fn stage(
    rx: Receiver<u64>,
    capacity: usize,
    start: &Arc<Barrier>,
    mut f: impl FnMut(u64) -> u64 + Send + 'static,
) -> (Receiver<u64>, JoinHandle<()>) {
    let (tx, next) = bounded::<u64>(capacity);
    let start = Arc::clone(start);
    let handle = thread::spawn(move || {
        start.wait();
        for x in rx.iter() {
            if tx.send(f(x)).is_err() {
                break;
            }
        }
    });
    (next, handle)
}

/// Spawns the last stage: `f` on every item, folded into the wrapping-sum checksum.
fn collect(
    rx: Receiver<u64>,
    start: &Arc<Barrier>,
    mut f: impl FnMut(u64) -> u64 + Send + 'static,
) -> JoinHandle<u64> {
    let start = Arc::clone(start);
    thread::spawn(move || {
        start.wait();
        rx.iter().fold(0u64, |sum, x| sum.wrapping_add(f(x)))
    })
}

/// Spawns a fork: every item of `rx` sent to both channels it returns, the first's
/// first.
fn fork(
    rx: Receiver<u64>,
    capacity: usize,
    start: &Arc<Barrier>,
) -> (Receiver<u64>, Receiver<u64>, JoinHandle<()>) {
    let (tx_a, rx_a) = bounded::<u64>(capacity);
    let (tx_b, rx_b) = bounded::<u64>(capacity);
    let start = Arc::clone(start);
    let handle = thread::spawn(move || {
        start.wait();
        for x in rx.iter() {
            if tx_a.send(x).is_err() || tx_b.send(x).is_err() {
                break;
            }
        }
    });
    (rx_a, rx_b, handle)
}

/// Spawns a join: one item from each of `a` and `b` at a time, `f` of the pair folded
/// into the wrapping-sum checksum, until either closes.
fn pair_up(
    a: Receiver<u64>,
    b: Receiver<u64>,
    start: &Arc<Barrier>,
    f: impl Fn(u64, u64) -> u64 + Send + 'static,
) -> JoinHandle<u64> {
    let start = Arc::clone(start);
    thread::spawn(move || {
        start.wait();
        let mut sum = 0u64;
        while let (Ok(x), Ok(y)) = (a.recv(), b.recv()) {
            sum = sum.wrapping_add(f(x, y));
        }
        sum
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trivial3_checksum_is_right() {
        for capacity in [1, 64] {
            thread_per_stage_trivial3(2_000, capacity).unwrap();
        }
        thread_per_stage_trivial3(0, 8).unwrap();
    }

    #[test]
    fn scaling_checksum_is_right() {
        for stages in [1, 4] {
            let case = Scaling::new(300, stages, 20);
            thread_per_stage_scaling(&case, 16).unwrap();
        }
    }

    #[test]
    fn fan_out_checksum_is_right() {
        for capacity in [1, 16] {
            thread_per_stage_fan_out(&FanOut::new(300, 20), capacity).unwrap();
        }
        thread_per_stage_fan_out(&FanOut::new(0, 20), 4).unwrap();
        let mut wrong = FanOut::new(50, 3);
        wrong.expected ^= 1;
        let err = thread_per_stage_fan_out(&wrong, 4).unwrap_err();
        assert!(matches!(err, BenchError::WrongSum { .. }), "{err}");
    }

    #[test]
    fn a_wrong_answer_is_an_error() {
        let mut case = Scaling::new(50, 2, 3);
        case.expected ^= 1;
        let err = thread_per_stage_scaling(&case, 4).unwrap_err();
        assert!(matches!(err, BenchError::WrongSum { .. }), "{err}");
    }
}
