//! Peer: the message ring on OS threads and crossbeam `bounded` channels.
//!
//! Stage 0 runs on the calling thread: it injects the messages, counts their laps,
//! retires them and sums their final values; stages `1..stages` are threads that hop and
//! forward. Every channel holds `in_flight` messages, so a send never waits for room:
//! with only `in_flight` messages in the ring, a full channel would hold all of them
//! and its sender none. The clock runs from the first injection until the last retirement.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, Sender};

use super::{join_all, HANG_LIMIT};
use crate::pipeline::workload::{
    message_ring_expected, message_ring_hop, message_ring_start, RingMessage,
};
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "crossbeam-threads";
/// The `config` of its rows.
pub const CONFIG: &str = "thread per stage, crossbeam bounded(in_flight)";

/// Runs `in_flight` messages `laps` times around a ring of `stages` stages; returns the
/// time from the first injection until the last message retired. Rate:
/// [`message_ring_sends`](crate::pipeline::workload::message_ring_sends) per second.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the retired values do not sum to
/// [`message_ring_expected`]; [`BenchError::Failed`] when a stage panicked.
///
/// # Panics
///
/// If `stages`, `in_flight` or `laps` is 0.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::crossbeam_message_ring;
/// crossbeam_message_ring(4, 2, 10).unwrap();
/// ```
pub fn crossbeam_message_ring(
    stages: usize,
    in_flight: usize,
    laps: u32,
) -> Result<Duration, BenchError> {
    assert!(stages > 0 && in_flight > 0 && laps > 0, "an empty ring");
    let who = format!("{NAME} message-ring/{stages}x{in_flight}");
    let expected = message_ring_expected(stages, in_flight, laps);
    // inboxes[s] is what stage s receives; stage s sends to inboxes[(s + 1) % stages].
    let (senders, mut inboxes): (Vec<Sender<RingMessage>>, Vec<Receiver<RingMessage>>) =
        (0..stages).map(|_| bounded(in_flight)).unzip();
    let start = Arc::new(Barrier::new(stages));
    let handles: Vec<_> = inboxes
        .drain(1..)
        .enumerate()
        .map(|(i, rx)| {
            let s = i + 1;
            let next = senders[(s + 1) % stages].clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                for mut msg in rx.iter() {
                    msg.value = message_ring_hop(msg.value, s);
                    if next.send(msg).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();
    let inbox = inboxes.pop().expect("stage 0's inbox");
    let next = senders[1 % stages].clone();
    // Only the stages' clones remain: a stage's input closes when its sender exits.
    drop(senders);

    let _watchdog = Watchdog::arm(&who, HANG_LIMIT);
    start.wait();
    let t0 = Instant::now();
    let stage0 = lap_master(&inbox, &next, in_flight, laps);
    let elapsed = t0.elapsed();
    // Closing stage 1's input stops the stages one after the other.
    drop(next);
    drop(inbox);
    join_all(&who, "a stage", handles)?;
    let got = stage0.map_err(|what| BenchError::failed(&who, what))?;
    if got != expected {
        return Err(BenchError::WrongSum { who, expected, got });
    }
    Ok(elapsed)
}

/// Stage 0: injects, counts laps, retires; the wrapping sum of the retired values.
fn lap_master(
    inbox: &Receiver<RingMessage>,
    next: &Sender<RingMessage>,
    in_flight: usize,
    laps: u32,
) -> Result<u64, &'static str> {
    const GONE: &str = "a stage stopped";
    for m in 0..in_flight as u64 {
        let value = message_ring_hop(message_ring_start(m), 0);
        next.send(RingMessage { value, laps: 0 })
            .map_err(|_| GONE)?;
    }
    let (mut retired, mut sum) = (0, 0u64);
    while retired < in_flight {
        let mut msg = inbox.recv().map_err(|_| GONE)?;
        msg.laps += 1;
        if msg.laps == laps {
            sum = sum.wrapping_add(msg.value);
            retired += 1;
        } else {
            msg.value = message_ring_hop(msg.value, 0);
            next.send(msg).map_err(|_| GONE)?;
        }
    }
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sums_are_right() {
        for (stages, in_flight, laps) in [(1, 1, 1), (1, 3, 4), (2, 1, 50), (8, 8, 20), (16, 3, 7)]
        {
            crossbeam_message_ring(stages, in_flight, laps)
                .unwrap_or_else(|e| panic!("{stages}x{in_flight}x{laps}: {e}"));
        }
    }
}
