//! The peers of `statepipe bench pipeline`: what a Rust user would write instead of a
//! statepipe pipeline, on the workloads of [`super::workload`].
//!
//! | module | peer | workloads |
//! |---|---|---|
//! | [`chain`] | one OS thread per stage, crossbeam `bounded` channels between them | trivial3, scaling, fan-out |
//! | [`message_ring`] | a ring of OS threads, crossbeam `bounded` channels | message-ring |
//! | [`thread_ring`] | 503 OS threads with `std::sync::mpsc`; 503 tokio tasks on a `current_thread` runtime | thread-ring |
//! | [`one_thread`] | a plain loop on one thread, the stages called in turn | trivial3, thread-ring, message-ring |
//! | [`logger`] | `tracing_appender::non_blocking` over a `File`; `Arc<Mutex<BufWriter<File>>>` | logger |
//!
//! Each run builds its threads, channels and runtime before the clock starts, returns
//! the time of the work only, and checks its answer (the checksum, the printed stage,
//! the file's lines) before returning: a wrong answer is a [`BenchError`], never a
//! figure. Each run is bounded by a [`crate::watchdog::Watchdog`] of [`HANG_LIMIT`].

pub mod chain;
pub mod logger;
pub mod message_ring;
pub mod one_thread;
pub mod thread_ring;

use std::thread::JoinHandle;
use std::time::Duration;

use crate::BenchError;
pub use chain::{thread_per_stage_fan_out, thread_per_stage_scaling, thread_per_stage_trivial3};
pub use logger::{mutex_bufwriter_logger, temp_log_path, tracing_appender_logger};
pub use message_ring::crossbeam_message_ring;
pub use one_thread::{one_thread_message_ring, one_thread_thread_ring, one_thread_trivial3};
pub use thread_ring::{threads_thread_ring, tokio_thread_ring};

/// How long one peer run may take before the watchdog ends the process: far beyond any
/// sensible size on a slow machine, so it only fires on a hang.
pub const HANG_LIMIT: Duration = Duration::from_secs(300);

/// Joins a thread of `who`, turning a panic into [`BenchError::Failed`].
fn join<T>(who: &str, what: &str, handle: JoinHandle<T>) -> Result<T, BenchError> {
    handle
        .join()
        .map_err(|_| BenchError::failed(who, format!("{what} panicked")))
}

/// Joins every thread, reporting the first that panicked.
fn join_all(who: &str, what: &str, handles: Vec<JoinHandle<()>>) -> Result<(), BenchError> {
    handles
        .into_iter()
        .map(|h| join(who, what, h))
        .fold(Ok(()), Result::and)
}
