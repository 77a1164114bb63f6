//! Peers: the Benchmarks Game's thread-ring on 503 OS threads with `std::sync::mpsc`,
//! and on 503 tokio tasks with `tokio::sync::mpsc` on a `current_thread` runtime.
//!
//! Only one token exists, so only one stage can run at a time: the workload measures the
//! cost of handing control from one thread (task) to the next, a wake-up and a context
//! switch per hop for OS threads. The stage that receives 0 reports its number and
//! returns; its input and output close, which stops its neighbours one after the other.
//! The clock runs from sending the token to stage 1 until the answer is in.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use super::{join, HANG_LIMIT};
use crate::pipeline::workload::{thread_ring_answer, STAGES};
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The implementation name of the OS-thread peer in reports.
pub const THREADS_NAME: &str = "std-threads";
/// The `config` of the OS-thread peer's rows.
pub const THREADS_CONFIG: &str = "503 OS threads, std::sync::mpsc::channel";
/// The implementation name of the tokio peer in reports.
pub const TOKIO_NAME: &str = "tokio";
/// The `config` of the tokio peer's rows.
pub const TOKIO_CONFIG: &str = "503 tasks, current_thread runtime, tokio::sync::mpsc::channel(1)";

/// Stack of each ring thread: a receive loop needs little, and 503 default stacks
/// (2 MiB each) would only cost address space and page-table setup.
const STACK: usize = 128 * 1024;

/// Runs thread-ring for `hops` passes on 503 OS threads; returns the printed stage
/// number and the time of the hops. About 3.5 µs a hop on a 2-CPU VM: keep `hops` near
/// 100,000.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the stage that reported is not
/// [`thread_ring_answer`]`(hops)`; [`BenchError::Failed`] when a thread could not be
/// spawned or panicked.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::threads_thread_ring;
/// let (answer, _elapsed) = threads_thread_ring(1_000).unwrap();
/// assert_eq!(answer, 498);
/// ```
pub fn threads_thread_ring(hops: u64) -> Result<(u64, Duration), BenchError> {
    let who = format!("{THREADS_NAME} thread-ring/{STAGES}");
    let (senders, receivers): (Vec<mpsc::Sender<u64>>, Vec<mpsc::Receiver<u64>>) =
        (0..STAGES).map(|_| mpsc::channel()).unzip();
    let (done_tx, done_rx) = mpsc::channel::<u64>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let mut handles = Vec::with_capacity(STAGES);
    let mut spawn_error = None;
    for (i, rx) in receivers.into_iter().enumerate() {
        let id = i as u64 + 1;
        let next = senders[(i + 1) % STAGES].clone();
        let (done, ready) = (done_tx.clone(), ready_tx.clone());
        let spawned = thread::Builder::new()
            .name(format!("ring-{id}"))
            .stack_size(STACK)
            .spawn(move || {
                let _ = ready.send(());
                for token in rx.iter() {
                    if token == 0 {
                        let _ = done.send(id);
                        return;
                    }
                    if next.send(token - 1).is_err() {
                        return;
                    }
                }
            });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                spawn_error = Some(BenchError::failed(&who, format!("spawn thread {id}: {e}")));
                break;
            }
        }
    }
    let first = senders[0].clone();
    // The threads hold the only other senders: a thread's input closes when the one
    // before it returns.
    drop((senders, done_tx, ready_tx));
    let started = (0..handles.len()).all(|_| ready_rx.recv().is_ok());
    if spawn_error.is_some() || !started {
        // Stage 1 "wins" at once and the shutdown ripples through the spawned ones.
        let _ = first.send(0);
        drop(first);
        handles.into_iter().for_each(|h| drop(h.join()));
        return Err(spawn_error
            .unwrap_or_else(|| BenchError::failed(&who, "a thread died before starting")));
    }

    let _watchdog = Watchdog::arm(&who, HANG_LIMIT);
    let t0 = Instant::now();
    let sent = first.send(hops);
    let answer = done_rx.recv();
    let elapsed = t0.elapsed();
    drop(first);
    for handle in handles {
        join(&who, "a ring thread", handle)?;
    }
    if sent.is_err() {
        return Err(BenchError::failed(&who, "stage 1 was gone"));
    }
    let answer = answer.map_err(|_| BenchError::failed(&who, "no stage reported"))?;
    check(who, hops, answer)?;
    Ok((answer, elapsed))
}

/// Runs thread-ring for `hops` passes on 503 tokio tasks on a `current_thread` runtime
/// (one OS thread: each hop is a task switch inside the scheduler); returns the printed
/// stage number and the time of the hops.
///
/// # Errors
///
/// [`BenchError::WrongSum`] when the stage that reported is not
/// [`thread_ring_answer`]`(hops)`; [`BenchError::Failed`] when the runtime could not be
/// built or a task panicked.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::tokio_thread_ring;
/// let (answer, _elapsed) = tokio_thread_ring(1_000).unwrap();
/// assert_eq!(answer, 498);
/// ```
pub fn tokio_thread_ring(hops: u64) -> Result<(u64, Duration), BenchError> {
    use tokio::sync::mpsc;

    let who = format!("{TOKIO_NAME} thread-ring/{STAGES}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .map_err(|e| BenchError::failed(&who, format!("build the runtime: {e}")))?;
    let _watchdog = Watchdog::arm(&who, HANG_LIMIT);
    let (answer, elapsed) = runtime.block_on(async {
        let (senders, receivers): (Vec<mpsc::Sender<u64>>, Vec<mpsc::Receiver<u64>>) =
            (0..STAGES).map(|_| mpsc::channel(1)).unzip();
        let (done_tx, mut done_rx) = mpsc::channel::<u64>(1);
        // Relaxed: a count read on the same thread that wrote it (current_thread).
        let started = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = receivers
            .into_iter()
            .enumerate()
            .map(|(i, mut rx)| {
                let id = i as u64 + 1;
                let next = senders[(i + 1) % STAGES].clone();
                let (done, started) = (done_tx.clone(), Arc::clone(&started));
                tokio::spawn(async move {
                    started.fetch_add(1, Ordering::Relaxed);
                    while let Some(token) = rx.recv().await {
                        if token == 0 {
                            let _ = done.send(id).await;
                            return;
                        }
                        if next.send(token - 1).await.is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        let first = senders[0].clone();
        drop((senders, done_tx));
        // Let every task reach its first `recv` before the clock starts.
        while started.load(Ordering::Relaxed) < STAGES {
            tokio::task::yield_now().await;
        }

        let t0 = Instant::now();
        let sent = first.send(hops).await;
        let answer = done_rx.recv().await;
        let elapsed = t0.elapsed();
        drop(first);
        for task in tasks {
            task.await
                .map_err(|e| BenchError::failed(&who, format!("a ring task: {e}")))?;
        }
        if sent.is_err() {
            return Err(BenchError::failed(&who, "stage 1 was gone"));
        }
        let answer = answer.ok_or_else(|| BenchError::failed(&who, "no stage reported"))?;
        Ok((answer, elapsed))
    })?;
    check(who, hops, answer)?;
    Ok((answer, elapsed))
}

/// The reported stage must be the rule's.
fn check(who: String, hops: u64, got: u64) -> Result<(), BenchError> {
    let expected = thread_ring_answer(hops);
    if got != expected {
        return Err(BenchError::WrongSum { who, expected, got });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_report_the_right_stage() {
        for hops in [0, 1, 502, 503, 1_200] {
            let (answer, _) = threads_thread_ring(hops).unwrap();
            assert_eq!(answer, thread_ring_answer(hops), "{hops}");
        }
    }

    #[test]
    fn tokio_reports_the_right_stage() {
        for hops in [0, 1, 502, 503, 5_000] {
            let (answer, _) = tokio_thread_ring(hops).unwrap();
            assert_eq!(answer, thread_ring_answer(hops), "{hops}");
        }
    }
}
