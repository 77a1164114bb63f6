//! Peers: many producer threads logging [`format_line`] lines into one file, through
//! `tracing_appender::non_blocking` (a channel to a writer thread) or through an
//! `Arc<Mutex<BufWriter<File>>>` (each producer writes under the lock).
//!
//! Each producer formats its lines into its own buffer and hands them over one by one.
//! The clock runs from the producers' common start until every line is in the file
//! (written by `write(2)`, not synced to disk: neither peer syncs). The file is then
//! checked with [`verify_log`] and removed.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tracing_appender::non_blocking::NonBlockingBuilder;

use super::HANG_LIMIT;
use crate::pipeline::workload::{format_line, verify_log, LINE_LEN, MAX_LINES, MAX_PRODUCERS};
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The implementation name of the `tracing-appender` peer in reports.
pub const TRACING_NAME: &str = "tracing-appender";
/// The `config` of the `tracing-appender` peer's rows.
pub const TRACING_CONFIG: &str = "non_blocking(File), lossy(false), 128k lines buffered";
/// The implementation name of the mutex peer in reports.
pub const MUTEX_NAME: &str = "mutex-bufwriter";
/// The `config` of the mutex peer's rows.
pub const MUTEX_CONFIG: &str = "Arc<Mutex<BufWriter<File>>>, 8 KiB buffer";

/// How long the `tracing-appender` run waits for its worker after the guard returned:
/// past it, lines were lost (a write error) and [`verify_log`] says so.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// A fresh path in the system's temporary directory for a log file tagged `tag`
/// (process id, a counter and the clock make it unique). Nothing is created.
pub fn temp_log_path(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!(
        "statepipe-bench-{tag}-{}-{n}-{nanos}.log",
        std::process::id()
    ))
}

/// Logs `lines_per_producer` lines from each of `producers` threads through
/// `tracing_appender::non_blocking` into a new file at `path`; returns the time until
/// the last line was written. The file is removed afterwards.
///
/// The worker's guard is dropped inside the timing, which flushes; if its shutdown
/// handshake times out (it waits at most ~1 s), the clock runs on until the worker has
/// written every byte.
///
/// # Errors
///
/// [`BenchError::WrongCount`] or [`BenchError::Failed`] from [`verify_log`] when lines
/// were lost, duplicated or torn; [`BenchError::Failed`] when the file cannot be
/// created or a producer panicked.
///
/// # Panics
///
/// If `producers` is 0 or above [`MAX_PRODUCERS`], or `lines_per_producer` above
/// [`MAX_LINES`].
pub fn tracing_appender_logger(
    producers: usize,
    lines_per_producer: u64,
    path: &Path,
) -> Result<Duration, BenchError> {
    let who = format!("{TRACING_NAME} logger/{producers}p");
    check_sizes(producers, lines_per_producer);
    let file = create(&who, path)?;
    let written = Arc::new(AtomicU64::new(0));
    let counted = Counted {
        file,
        written: Arc::clone(&written),
    };
    let (writer, guard) = NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("bench-tracing-appender")
        .finish(counted);
    let writers = (0..producers).map(|_| writer.clone()).collect();
    drop(writer);
    let expected_bytes = producers as u64 * lines_per_producer * LINE_LEN as u64;
    let timed = produce(&who, writers, lines_per_producer, || {
        drop(guard);
        // Acquire: pairs with the Release add of the worker's `Counted::write`.
        let deadline = Instant::now() + DRAIN_LIMIT;
        while written.load(Ordering::Acquire) < expected_bytes && Instant::now() < deadline {
            thread::sleep(Duration::from_micros(50));
        }
        Ok(())
    });
    finish(&who, timed, path, producers, lines_per_producer)
}

/// Logs `lines_per_producer` lines from each of `producers` threads into one
/// `Arc<Mutex<BufWriter<File>>>` at `path` (a fresh file); returns the time until the
/// writer was flushed. The file is removed afterwards.
///
/// # Errors
///
/// As [`tracing_appender_logger`], and [`BenchError::Failed`] on a write error.
///
/// # Panics
///
/// As [`tracing_appender_logger`].
pub fn mutex_bufwriter_logger(
    producers: usize,
    lines_per_producer: u64,
    path: &Path,
) -> Result<Duration, BenchError> {
    let who = format!("{MUTEX_NAME} logger/{producers}p");
    check_sizes(producers, lines_per_producer);
    let shared = Arc::new(Mutex::new(BufWriter::new(create(&who, path)?)));
    let writers = (0..producers)
        .map(|_| Locked(Arc::clone(&shared)))
        .collect();
    let timed = produce(&who, writers, lines_per_producer, || {
        Locked(Arc::clone(&shared)).flush()
    });
    drop(shared);
    finish(&who, timed, path, producers, lines_per_producer)
}

fn check_sizes(producers: usize, lines_per_producer: u64) {
    assert!(
        (1..=MAX_PRODUCERS).contains(&producers),
        "1 to {MAX_PRODUCERS} producers"
    );
    assert!(lines_per_producer <= MAX_LINES, "at most {MAX_LINES} lines");
}

fn create(who: &str, path: &Path) -> Result<File, BenchError> {
    File::create(path)
        .map_err(|e| BenchError::failed(who, format!("create {}: {e}", path.display())))
}

/// Checks the file if the run went well, removes it either way.
fn finish(
    who: &str,
    timed: Result<Duration, BenchError>,
    path: &Path,
    producers: usize,
    lines_per_producer: u64,
) -> Result<Duration, BenchError> {
    let checked = timed
        .and_then(|elapsed| verify_log(who, path, producers, lines_per_producer).map(|()| elapsed));
    let _ = fs::remove_file(path);
    checked
}

/// Runs one thread per writer, each writing its producer's lines, released together;
/// then `drain` (the clock still running) until every line is in the file.
fn produce<W: Write + Send>(
    who: &str,
    writers: Vec<W>,
    lines: u64,
    drain: impl FnOnce() -> io::Result<()>,
) -> Result<Duration, BenchError> {
    let _watchdog = Watchdog::arm(who, HANG_LIMIT);
    let start = Barrier::new(writers.len() + 1);
    let (t0, results) = thread::scope(|s| {
        let handles: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(producer, mut writer)| {
                let start = &start;
                s.spawn(move || -> io::Result<()> {
                    let mut line = Vec::with_capacity(LINE_LEN);
                    start.wait();
                    for i in 0..lines {
                        line.clear();
                        format_line(&mut line, producer, i);
                        writer.write_all(&line)?;
                    }
                    Ok(())
                })
            })
            .collect();
        start.wait();
        let t0 = Instant::now();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        (t0, results)
    });
    for result in results {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(BenchError::failed(who, format!("write: {e}"))),
            Err(_) => return Err(BenchError::failed(who, "a producer panicked")),
        }
    }
    drain().map_err(|e| BenchError::failed(who, format!("flush: {e}")))?;
    Ok(t0.elapsed())
}

/// A `File` that counts the bytes written to it, so the run knows when the
/// `tracing-appender` worker is done.
struct Counted {
    file: File,
    written: Arc<AtomicU64>,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        // Release: pairs with the Acquire load in `tracing_appender_logger`.
        self.written.fetch_add(n as u64, Ordering::Release);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// One producer's handle on the shared, mutexed writer: each `write_all` is one lock.
struct Locked(Arc<Mutex<BufWriter<File>>>);

impl Locked {
    fn lock(&self) -> io::Result<std::sync::MutexGuard<'_, BufWriter<File>>> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("a producer panicked holding the lock"))
    }
}

impl Write for Locked {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.lock()?.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.lock()?.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.lock()?.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracing_appender_writes_every_line() {
        let path = temp_log_path("tracing-test");
        tracing_appender_logger(3, 2_000, &path).unwrap();
        assert!(!path.exists(), "the log file is removed");
    }

    #[test]
    fn mutex_bufwriter_writes_every_line() {
        let path = temp_log_path("mutex-test");
        mutex_bufwriter_logger(3, 2_000, &path).unwrap();
        mutex_bufwriter_logger(1, 0, &path).unwrap();
        assert!(!path.exists(), "the log file is removed");
    }

    #[test]
    fn temp_paths_differ() {
        assert_ne!(temp_log_path("a"), temp_log_path("a"));
    }
}
