//! Ours on the logging test of stevana's pipelined-state-machines
//! (<https://github.com/stevana/pipelined-state-machines>): the `statepipe-ring`
//! ring used directly, many producers and one file-writing handler.
//!
//! Each producer formats a line with [`format_line`] and publishes it into a slot of a
//! multi-producer ring (one `publish_with` per line, as a logging call would). The one
//! handler appends each slot's bytes to a buffer and, at the end of every batch the ring
//! hands it, writes the buffer with a single `write_all`: the more producers outrun the
//! disk, the bigger the batches and the fewer the system calls. The clock runs from the
//! producers' common start until the ring has joined (every line written by `write(2)`,
//! not synced, like the peers).

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use statepipe_ring::{EventHandler, RingBuilder};

use super::NAME;
use crate::pipeline::peers::HANG_LIMIT;
use crate::pipeline::workload::{format_line, verify_log, LINE_LEN, MAX_LINES, MAX_PRODUCERS};
use crate::watchdog::Watchdog;
use crate::BenchError;

/// Slots of the ring, each holding one line.
pub const LOG_CAPACITY: usize = 4096;

/// Bytes a slot can hold: a [`LINE_LEN`] line with room to spare.
const SLOT_BYTES: usize = 96;

/// The `config` of our rows.
pub fn config() -> String {
    format!(
        "multi-producer ring({LOG_CAPACITY}) of {SLOT_BYTES}-byte slots; \
         one write_all per batch"
    )
}

/// One line in the ring.
#[derive(Clone, Copy)]
struct LineSlot {
    len: u8,
    bytes: [u8; SLOT_BYTES],
}

/// What the handler reports when the ring shuts down.
#[derive(Debug, Default)]
struct Written {
    /// `write_all` calls.
    writes: u64,
    /// The first write error.
    error: Option<String>,
}

/// The one consumer: batches lines into `buf`, writes each batch once.
struct FileWriter {
    file: File,
    buf: Vec<u8>,
    writes: u64,
    error: Option<String>,
    report: Arc<Mutex<Written>>,
}

impl FileWriter {
    fn write_out(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if let Err(e) = self.file.write_all(&self.buf) {
            self.error.get_or_insert_with(|| format!("write: {e}"));
        }
        self.writes += 1;
        self.buf.clear();
    }
}

impl EventHandler<LineSlot> for FileWriter {
    #[inline]
    fn on_event(&mut self, line: &LineSlot, _sequence: u64, end_of_batch: bool) {
        self.buf
            .extend_from_slice(&line.bytes[..usize::from(line.len)]);
        if end_of_batch {
            self.write_out();
        }
    }

    fn on_shutdown(&mut self) {
        self.write_out();
        let mut report = self.report.lock().unwrap_or_else(|p| p.into_inner());
        report.writes = self.writes;
        report.error = self.error.take();
    }
}

/// Logs `lines_per_producer` lines from each of `producers` threads through a
/// multi-producer ring into a new file at `path`; returns the time until the last line
/// was written and how many `write_all` calls that took. The file is removed afterwards.
///
/// # Errors
///
/// [`BenchError::WrongCount`] or [`BenchError::Failed`] from [`verify_log`] when lines
/// were lost, duplicated or torn; [`BenchError::Failed`] when the file cannot be
/// created or written, the ring fails, or a producer panicked.
///
/// # Panics
///
/// If `producers` is 0 or above [`MAX_PRODUCERS`], or `lines_per_producer` above
/// [`MAX_LINES`].
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::peers::temp_log_path;
/// use statepipe_bench::pipeline::statepipe::ring_logger;
/// let (_elapsed, writes) = ring_logger(3, 1_000, &temp_log_path("doc")).unwrap();
/// assert!((1..=3_000).contains(&writes));
/// ```
pub fn ring_logger(
    producers: usize,
    lines_per_producer: u64,
    path: &Path,
) -> Result<(Duration, u64), BenchError> {
    assert!(
        (1..=MAX_PRODUCERS).contains(&producers),
        "1 to {MAX_PRODUCERS} producers"
    );
    assert!(lines_per_producer <= MAX_LINES, "at most {MAX_LINES} lines");
    const _: () = assert!(LINE_LEN <= SLOT_BYTES && SLOT_BYTES <= u8::MAX as usize);
    let who = format!("{NAME} logger/{producers}p");
    let file = File::create(path)
        .map_err(|e| BenchError::failed(&who, format!("create {}: {e}", path.display())))?;
    let timed = produce(&who, file, producers, lines_per_producer);
    let checked = timed.and_then(|(elapsed, writes)| {
        verify_log(&who, path, producers, lines_per_producer).map(|()| (elapsed, writes))
    });
    let _ = fs::remove_file(path);
    checked
}

/// Builds the ring, runs the producers, joins; the time and the writes.
fn produce(
    who: &str,
    file: File,
    producers: usize,
    lines: u64,
) -> Result<(Duration, u64), BenchError> {
    let report = Arc::new(Mutex::new(Written::default()));
    let writer = FileWriter {
        file,
        buf: Vec::with_capacity(LOG_CAPACITY * LINE_LEN),
        writes: 0,
        error: None,
        report: Arc::clone(&report),
    };
    let empty = LineSlot {
        len: 0,
        bytes: [0; SLOT_BYTES],
    };
    let (producer, ring) = RingBuilder::new(LOG_CAPACITY, move || empty)
        .handler("file", writer)
        .build_multi();
    let handles: Vec<_> = (0..producers).map(|_| producer.clone()).collect();
    // Only the producers' clones keep the ring open now.
    drop(producer);

    let _watchdog = Watchdog::arm(who, HANG_LIMIT);
    let start = Barrier::new(producers + 1);
    let (t0, results) = thread::scope(|s| {
        let threads: Vec<_> = handles
            .into_iter()
            .enumerate()
            .map(|(p, mut producer)| {
                let start = &start;
                s.spawn(move || -> Result<(), &'static str> {
                    let mut line = Vec::with_capacity(LINE_LEN);
                    start.wait();
                    for i in 0..lines {
                        line.clear();
                        format_line(&mut line, p, i);
                        producer
                            .publish_with(|slot| {
                                slot.len = line.len() as u8;
                                slot.bytes[..line.len()].copy_from_slice(&line);
                            })
                            .map_err(|_| "publish: the ring halted")?;
                    }
                    Ok(())
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let results: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
        (t0, results)
    });
    let joined = ring.join();
    let elapsed = t0.elapsed();
    for result in results {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(what)) => return Err(BenchError::failed(who, what)),
            Err(_) => return Err(BenchError::failed(who, "a producer panicked")),
        }
    }
    joined.map_err(|e| BenchError::failed(who, format!("ring: {e:?}")))?;
    let report = report.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(e) = &report.error {
        return Err(BenchError::failed(who, e));
    }
    Ok((elapsed, report.writes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::peers::temp_log_path;

    #[test]
    fn every_line_arrives_in_producer_order() {
        for producers in [1, 3, 10] {
            let path = temp_log_path("statepipe-test");
            let (_, writes) = ring_logger(producers, 500, &path).unwrap();
            assert!(writes >= 1 && writes <= producers as u64 * 500, "{writes}");
            assert!(!path.exists());
        }
    }
}
