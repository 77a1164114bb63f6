//! Peer: the workload as a plain loop on one thread, the stage functions called in turn
//! with their states in locals: no queue, no other thread. Where statepipe's row fuses
//! every stage on one worker (trivial3, thread-ring), this is what that fusion competes
//! with; on the message ring it is the sequential cost of the hops themselves.
//!
//! Each value goes through [`black_box`] once per stage, so the optimizer cannot fold
//! the stages of many items together or compute the answer in closed form; the checksum
//! is checked as every peer's is.

use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::pipeline::workload::{
    message_ring_expected, message_ring_hop, message_ring_start, thread_ring_answer,
    trivial3_expected, trivial_a, trivial_b, trivial_c, STAGES,
};
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "one-thread";
/// The `config` of its rows.
pub const CONFIG: &str = "a plain loop on the calling thread: the stages called in turn";

/// trivial3 as a loop: `c(b(a(x)))` for every item; returns the time of the loop.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the checksum is not [`trivial3_expected`]`(items)`.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::one_thread_trivial3;
/// one_thread_trivial3(1_000).unwrap();
/// ```
pub fn one_thread_trivial3(items: u64) -> Result<Duration, BenchError> {
    let expected = trivial3_expected(items);
    let started = Instant::now();
    let (mut a, mut b, mut c) = (0u64, 0u64, 0u64);
    let mut sum = 0u64;
    for x in 0..items {
        let y = trivial_a(&mut a, black_box(x));
        let y = trivial_b(&mut b, black_box(y));
        sum = sum.wrapping_add(trivial_c(&mut c, black_box(y)));
    }
    let elapsed = started.elapsed();
    check(&format!("{NAME} trivial3"), expected, sum)?;
    Ok(elapsed)
}

/// The message ring as loops: each of `in_flight` messages hops through `stages` stages
/// `laps` times; returns the time of the loops.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the retired values do not sum to
/// [`message_ring_expected`].
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::one_thread_message_ring;
/// one_thread_message_ring(4, 2, 10).unwrap();
/// ```
pub fn one_thread_message_ring(
    stages: usize,
    in_flight: usize,
    laps: u32,
) -> Result<Duration, BenchError> {
    let expected = message_ring_expected(stages, in_flight, laps);
    let started = Instant::now();
    let mut sum = 0u64;
    for m in 0..in_flight as u64 {
        let mut v = message_ring_start(m);
        for _ in 0..laps {
            for s in 0..stages {
                v = message_ring_hop(black_box(v), s);
            }
        }
        sum = sum.wrapping_add(v);
    }
    let elapsed = started.elapsed();
    check(
        &format!("{NAME} message-ring/{stages}x{in_flight}"),
        expected,
        sum,
    )?;
    Ok(elapsed)
}

/// Thread-ring as a loop: the token passes from stage to stage (`1..=503`), one
/// decrement per hop, until a stage receives 0; returns that stage and the time.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the stage is not [`thread_ring_answer`]`(hops)`.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::one_thread_thread_ring;
/// assert_eq!(one_thread_thread_ring(1_000).unwrap().0, 498);
/// ```
pub fn one_thread_thread_ring(hops: u64) -> Result<(u64, Duration), BenchError> {
    let started = Instant::now();
    let (mut token, mut stage) = (hops, 1u64);
    while black_box(token) != 0 {
        token -= 1;
        stage = if stage == STAGES as u64 { 1 } else { stage + 1 };
    }
    let elapsed = started.elapsed();
    check(
        &format!("{NAME} thread-ring/{STAGES}"),
        thread_ring_answer(hops),
        stage,
    )?;
    Ok((stage, elapsed))
}

fn check(who: &str, expected: u64, got: u64) -> Result<(), BenchError> {
    if got == expected {
        Ok(())
    } else {
        Err(BenchError::WrongSum {
            who: who.to_string(),
            expected,
            got,
        })
    }
}
