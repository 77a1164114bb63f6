//! Ours on the two ring workloads: the Benchmarks Game's thread-ring and the message
//! ring of Eric Holk's "Rust Pipes Performance" (2012,
//! <http://theincredibleholk.wordpress.com/2012/07/10/rust-pipes-performance/>). In
//! both, the calling thread closes the ring: it sends what comes out of the
//! pipeline's last stage back into its first.
//!
//! **thread-ring.** The 503 stages are fused on one worker: a hop is a direct call from
//! one state machine to the next, with no scheduler, queue or atomic between them (the
//! peers pay a task switch or a context switch per hop). The token goes around the
//! pipeline and back through the calling thread once per 503 hops; that round trip (two
//! ring hand-offs and a cross-core wake-up) is in the figure.
//! [`thread_ring_on_worker`] closes the ring on the worker instead (`deploy_cycle`: a
//! feedback ring from stage 503 to stage 1), which leaves the hops alone in the figure.
//!
//! **message-ring.** `stages` stages, half on each of two workers, with a ring between
//! the halves. [`message_ring`] closes the ring with `deploy_cycle` (a feedback ring from
//! the last stage to the first, so only the two workers take part);
//! [`message_ring_via_caller`] has the calling thread inject `in_flight` messages and
//! re-inject each one that comes out until it has done its laps. Rates count
//! [`message_ring_sends`](crate::pipeline::workload::message_ring_sends), the
//! stage-to-stage sends the peer makes, although ours makes fewer hand-offs (fused
//! stages call each other).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use statepipe_pipeline::{machine, Config, Deployment, Pipeline};

use super::{deploy_error, report_metrics, NAME};
use crate::pipeline::peers::HANG_LIMIT;
use crate::pipeline::workload::{
    message_ring_expected, message_ring_hop, message_ring_start, thread_ring_answer, RingMessage,
    STAGES,
};
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The thread-ring's token as it travels through the stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// Hops left before a stage wins.
    pub remaining: u64,
    /// The number of the stage that received 0, once one has.
    pub winner: Option<u32>,
}

/// Stage `k` (1-based) of the thread-ring: if nobody has won yet, wins on 0 or
/// decrements; passes the token on either way.
#[inline]
fn thread_ring_stage(k: &mut u32, mut token: Token) -> Token {
    if token.winner.is_none() {
        if token.remaining == 0 {
            token.winner = Some(*k);
        } else {
            token.remaining -= 1;
        }
    }
    token
}

/// The [`STAGES`] stages of thread-ring in sequence, stage `k`'s state its number.
pub fn thread_ring_pipeline() -> Pipeline<Token, Token> {
    let stage =
        |k: u32| Pipeline::stage(&format!("stage {k}"), k, machine::step(thread_ring_stage));
    (2..=STAGES as u32).fold(stage(1), |p, k| p.then(stage(k)))
}

/// Runs thread-ring for `hops` passes on one worker; returns the winning stage and the
/// time from the first send until the winner came out.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the winner is not
/// [`thread_ring_answer`]`(hops)`; [`BenchError::Failed`] when the deployment fails.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::statepipe::thread_ring;
/// let (answer, _elapsed) = thread_ring(1_000, true).unwrap();
/// assert_eq!(answer, 498);
/// ```
pub fn thread_ring(hops: u64, pin: bool) -> Result<(u64, Duration), BenchError> {
    let who = format!("{NAME} thread-ring/{STAGES}");
    let config = Config::new().workers(1).pin(pin);
    let Deployment {
        mut input,
        mut output,
        running,
    } = thread_ring_pipeline()
        .deploy(&config)
        .map_err(|e| deploy_error(&who, e))?;
    let stopped = || BenchError::failed(&who, "the pipeline stopped");
    let _watchdog = Watchdog::arm(&who, HANG_LIMIT);
    let t0 = Instant::now();
    let mut token = Token {
        remaining: hops,
        winner: None,
    };
    let mut laps = 0u64;
    let winner = loop {
        input.send(token).map_err(|_| stopped())?;
        let (_, back) = output.recv().ok_or_else(stopped)?;
        laps += 1;
        match back.winner {
            Some(k) => break u64::from(k),
            None => token = back,
        }
    };
    let elapsed = t0.elapsed();
    drop(input);
    if output.recv().is_some() {
        return Err(BenchError::failed(&who, "a second token came out"));
    }
    let finished = running.join().map_err(|e| deploy_error(&who, e))?;
    report_metrics(&who, &finished);
    let first_in = finished.metrics.units.first().map_or(0, |u| u.items_in);
    if first_in != laps {
        return Err(BenchError::WrongCount {
            who: format!("{who} laps through stage 1"),
            expected: laps,
            got: first_in,
        });
    }
    let expected = thread_ring_answer(hops);
    if winner != expected {
        return Err(BenchError::WrongSum {
            who,
            expected,
            got: winner,
        });
    }
    Ok((winner, elapsed))
}

/// Runs thread-ring for `hops` passes with the ring closed on the worker: the 503
/// stages are deployed on one worker with [`Pipeline::deploy_cycle`], so the token
/// goes from stage 503 back to stage 1 over the feedback ring, on the same thread, with
/// no caller in the loop; returns the winning stage and the time from deploying until
/// the worker joined.
///
/// # Errors
///
/// As [`thread_ring`]; [`BenchError::Failed`] when the token retired without a winner.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::statepipe::rings::thread_ring_on_worker;
/// let (answer, _elapsed) = thread_ring_on_worker(1_000, true).unwrap();
/// assert_eq!(answer, 498);
/// ```
pub fn thread_ring_on_worker(hops: u64, pin: bool) -> Result<(u64, Duration), BenchError> {
    let who = format!("{NAME} thread-ring/{STAGES} (cycle)");
    let config = Config::new().workers(1).pin(pin);
    // Written once, by the worker, when the token retires.
    let winner = Arc::new(Mutex::new(None));
    let out = Arc::clone(&winner);
    let token = Token {
        remaining: hops,
        winner: None,
    };
    let _watchdog = Watchdog::arm(&who, HANG_LIMIT);
    let t0 = Instant::now();
    let running = thread_ring_pipeline()
        .deploy_cycle(&config, [token], move |_seq, token: Token| {
            if token.winner.is_none() {
                return Some(token);
            }
            *out.lock().unwrap_or_else(|p| p.into_inner()) = token.winner;
            None
        })
        .map_err(|e| deploy_error(&who, e))?;
    let finished = running.join().map_err(|e| deploy_error(&who, e))?;
    let elapsed = t0.elapsed();
    report_metrics(&who, &finished);
    let won = *winner.lock().unwrap_or_else(|p| p.into_inner());
    let winner = won.map(u64::from).ok_or_else(|| {
        BenchError::failed(
            &who,
            format!(
                "the token retired after {} laps without a winner",
                finished.metrics.units.first().map_or(0, |u| u.items_in)
            ),
        )
    })?;
    let expected = thread_ring_answer(hops);
    if winner != expected {
        return Err(BenchError::WrongSum {
            who,
            expected,
            got: winner,
        });
    }
    Ok((winner, elapsed))
}

/// `stages` hop stages in sequence; stage `s` applies
/// [`message_ring_hop`]`(_, s)`.
pub fn message_ring_pipeline(stages: usize) -> Pipeline<RingMessage, RingMessage> {
    let stage = |s: usize| {
        Pipeline::map(&format!("hop {s}"), move |m: RingMessage| RingMessage {
            value: message_ring_hop(m.value, s),
            laps: m.laps,
        })
    };
    (1..stages).fold(stage(0), |p, s| p.then(stage(s)))
}

/// The plan of the message ring on `workers` workers: contiguous runs of stages of
/// (nearly) equal length.
pub fn message_ring_plan(stages: usize, workers: usize) -> Vec<usize> {
    (0..stages).map(|s| s * workers / stages).collect()
}

/// Both message-ring deployments: two workers, half the stages each, rings as
/// deep as the messages in flight.
fn message_ring_config(stages: usize, in_flight: usize, pin: bool) -> Config {
    Config::new()
        .workers(2)
        .plan(message_ring_plan(stages, 2))
        .capacity(in_flight)
        .pin(pin)
}

/// The `in_flight` messages at the start of their first lap.
fn message_ring_seeds(in_flight: usize) -> impl Iterator<Item = RingMessage> {
    (0..in_flight as u64).map(|m| RingMessage {
        value: message_ring_start(m),
        laps: 0,
    })
}

/// Runs `in_flight` messages `laps` times around a ring of `stages` stages, half on
/// each of two workers, the ring closed by [`Pipeline::deploy_cycle`]: the last stage's
/// outputs go back to the first over a feedback ring, with no other thread in the loop;
/// returns the time from deploying until the workers joined. Rate:
/// [`message_ring_sends`](crate::pipeline::workload::message_ring_sends) per second.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the retired values do not sum to
/// [`message_ring_expected`]; [`BenchError::WrongCount`] when not every message
/// retired; [`BenchError::Failed`] when the deployment fails.
///
/// # Panics
///
/// If `stages`, `in_flight` or `laps` is 0.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::statepipe::message_ring;
/// message_ring(4, 2, 10, true).unwrap();
/// ```
pub fn message_ring(
    stages: usize,
    in_flight: usize,
    laps: u32,
    pin: bool,
) -> Result<Duration, BenchError> {
    assert!(stages > 0 && in_flight > 0 && laps > 0, "an empty ring");
    let who = format!("{NAME} message-ring/{stages}x{in_flight} (cycle)");
    let expected = message_ring_expected(stages, in_flight, laps);
    let config = message_ring_config(stages, in_flight, pin);
    // Touched once per retired message, by the last worker only.
    let retired = Arc::new(Mutex::new((0usize, 0u64)));
    let out = Arc::clone(&retired);
    let seeds = message_ring_seeds(in_flight);
    let _watchdog = Watchdog::arm(&who, HANG_LIMIT);
    let t0 = Instant::now();
    let running = message_ring_pipeline(stages)
        .deploy_cycle(&config, seeds, move |_seq, mut msg: RingMessage| {
            msg.laps += 1;
            if msg.laps < laps {
                return Some(msg);
            }
            let mut r = out.lock().unwrap_or_else(|p| p.into_inner());
            r.0 += 1;
            r.1 = r.1.wrapping_add(msg.value);
            None
        })
        .map_err(|e| deploy_error(&who, e))?;
    let finished = running.join().map_err(|e| deploy_error(&who, e))?;
    let elapsed = t0.elapsed();
    report_metrics(&who, &finished);
    let (count, sum) = *retired.lock().unwrap_or_else(|p| p.into_inner());
    if count != in_flight {
        return Err(BenchError::WrongCount {
            who,
            expected: in_flight as u64,
            got: count as u64,
        });
    }
    if sum != expected {
        return Err(BenchError::WrongSum {
            who,
            expected,
            got: sum,
        });
    }
    Ok(elapsed)
}

/// Runs `in_flight` messages `laps` times around a ring of `stages` stages, on two
/// workers, the calling thread re-injecting each message; returns the time from the
/// first injection until the last message retired. Rate:
/// [`message_ring_sends`](crate::pipeline::workload::message_ring_sends) per second.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the retired values do not sum to
/// [`message_ring_expected`]; [`BenchError::Failed`] when the deployment fails.
///
/// # Panics
///
/// If `stages`, `in_flight` or `laps` is 0.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::statepipe::rings::message_ring_via_caller;
/// message_ring_via_caller(4, 2, 10, true).unwrap();
/// ```
pub fn message_ring_via_caller(
    stages: usize,
    in_flight: usize,
    laps: u32,
    pin: bool,
) -> Result<Duration, BenchError> {
    assert!(stages > 0 && in_flight > 0 && laps > 0, "an empty ring");
    let who = format!("{NAME} message-ring/{stages}x{in_flight} (via caller)");
    let expected = message_ring_expected(stages, in_flight, laps);
    let config = message_ring_config(stages, in_flight, pin);
    let Deployment {
        mut input,
        mut output,
        running,
    } = message_ring_pipeline(stages)
        .deploy(&config)
        .map_err(|e| deploy_error(&who, e))?;
    let stopped = || BenchError::failed(&who, "the pipeline stopped");
    let _watchdog = Watchdog::arm(&who, HANG_LIMIT);
    let t0 = Instant::now();
    input
        .send_all(message_ring_seeds(in_flight))
        .map_err(|_| stopped())?;
    let (mut retired, mut sum) = (0usize, 0u64);
    let mut again = Vec::with_capacity(in_flight);
    // Bounded: every message retires after `laps` laps, or the pipeline stops.
    while retired < in_flight {
        let (_, first) = output.recv().ok_or_else(stopped)?;
        let mut lap_done = |mut msg: RingMessage| {
            msg.laps += 1;
            if msg.laps == laps {
                sum = sum.wrapping_add(msg.value);
                retired += 1;
            } else {
                again.push(msg);
            }
        };
        lap_done(first);
        while let Some((_, msg)) = output.try_recv() {
            lap_done(msg);
        }
        input.send_all(again.drain(..)).map_err(|_| stopped())?;
    }
    let elapsed = t0.elapsed();
    drop(input);
    if output.recv().is_some() {
        return Err(BenchError::failed(&who, "a retired message came out again"));
    }
    let finished = running.join().map_err(|e| deploy_error(&who, e))?;
    report_metrics(&who, &finished);
    if sum != expected {
        return Err(BenchError::WrongSum {
            who,
            expected,
            got: sum,
        });
    }
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ring_reports_the_right_stage() {
        for hops in [0, 1, 502, 503, 1_200] {
            let (answer, _) = thread_ring(hops, true).unwrap();
            assert_eq!(answer, thread_ring_answer(hops), "{hops}");
            let (answer, _) = thread_ring_on_worker(hops, false).unwrap();
            assert_eq!(answer, thread_ring_answer(hops), "{hops}");
        }
    }

    #[test]
    fn message_ring_sums_are_right() {
        for (stages, in_flight, laps) in [(1, 1, 1), (2, 3, 4), (5, 2, 7), (16, 8, 5)] {
            message_ring(stages, in_flight, laps, true)
                .unwrap_or_else(|e| panic!("{stages}x{in_flight}x{laps}: {e}"));
            message_ring_via_caller(stages, in_flight, laps, true)
                .unwrap_or_else(|e| panic!("via caller {stages}x{in_flight}x{laps}: {e}"));
        }
        assert_eq!(message_ring_plan(4, 2), [0, 0, 1, 1]);
        assert_eq!(message_ring_plan(5, 2), [0, 0, 0, 1, 1]);
        assert_eq!(message_ring_plan(1, 2), [0]);
    }
}
