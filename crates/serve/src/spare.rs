//! Zero-filled journal segments, prepared ahead on a thread of their own.
//!
//! A segment whose blocks are all written and synced before any record goes
//! in lets the journal's `fdatasync` flush data alone: no file size to
//! change, no extent to convert, so no commit through the file system's own
//! journal, which under ext4's `data=ordered` would also wait for the data
//! of every other file written meanwhile (a snapshot's). The thread keeps
//! one such segment (its header, then zeros) ready as `journal-spare.tmp` (a name recovery ignores),
//! written in 256 KiB pieces handed to the disk as they go, at most 64 MiB
//! a second, at nice 19 and `SCHED_BATCH`, like the snapshot thread. The writer renames it into place
//! when it needs a segment (see `journal::Writer`), and the thread starts
//! the next one.
//!
//! It prepares one only while the file system keeps at least two segments
//! free beyond it, so that a disk filling up is left to the journal's own
//! records; when it cannot, it says so once and tries again later, and the
//! journal appends meanwhile.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The file a segment is prepared in.
pub(crate) const SPARE: &str = "journal-spare.tmp";
/// Zeros are written this many bytes at a time, the stop flag checked
/// between, and handed to the disk in pieces of [`PIECE`].
const CHUNK: usize = 1 << 20;
const PIECE: usize = 256 << 10;
/// The most zeros written a second (16 MiB in a quarter of a second): a
/// journal `fdatasync` flushes the disk's cache, and with it whatever
/// zeros were written since the last; paced, each carries a few hundred
/// KiB at most, not megabytes.
const ZEROS_PER_SECOND: u64 = 64 << 20;
/// The first wait after a failed preparation; it doubles up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
struct State {
    /// A segment ready to be taken.
    ready: Option<PathBuf>,
    stop: bool,
}

#[derive(Debug, Default)]
struct Inner {
    state: Mutex<State>,
    cond: Condvar,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The preparing thread; stopped (and its partial file removed) on drop.
#[derive(Debug)]
pub(crate) struct Spares {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl Spares {
    /// Removes a spare left by an earlier run (it may be partial) and starts
    /// preparing segments of `bytes` bytes in `dir`, each starting with
    /// `header`.
    pub(crate) fn start(dir: &Path, bytes: u64, header: Vec<u8>) -> io::Result<Self> {
        let path = dir.join(SPARE);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let inner = Arc::new(Inner::default());
        let shared = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("serve-segments".into())
            .spawn(move || prepare_loop(&shared, &path, bytes, &header))?;
        Ok(Spares {
            inner,
            thread: Some(thread),
        })
    }

    /// Renames the ready segment, if there is one, to `dest` and returns it
    /// opened for writing; the thread then prepares the next (under the
    /// same name: the rename happens under the lock, before it can start).
    /// On an error the spare is removed.
    pub(crate) fn take_into(&self, dest: &Path) -> Option<io::Result<File>> {
        let mut state = self.inner.lock();
        let path = state.ready.take()?;
        let taken = OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|file| fs::rename(&path, dest).map(|()| file));
        if taken.is_err() {
            let _ = fs::remove_file(&path);
        }
        drop(state);
        self.inner.cond.notify_all();
        Some(taken)
    }
}

#[cfg(test)]
impl Spares {
    /// Waits until a segment is ready (tests: to make the writer's path
    /// certain).
    pub(crate) fn wait_ready(&self) {
        let mut state = self.inner.lock();
        while state.ready.is_none() {
            state = self
                .inner
                .cond
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for Spares {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.inner.cond.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        // An untaken spare is not trusted by the next start anyway.
        if let Some(path) = self.inner.lock().ready.take() {
            let _ = fs::remove_file(path);
        }
    }
}

/// Prepares a segment whenever none is ready, until stopped.
fn prepare_loop(inner: &Inner, path: &Path, bytes: u64, header: &[u8]) {
    // The lowest priority: zeros take what the I/O threads and the
    // handlers leave (as the snapshot thread).
    let _ = statepipe_sys::pin::set_current_thread_nice(19);
    let _ = statepipe_sys::pin::set_current_thread_batch();
    let mut retry = FIRST_RETRY;
    // The kind of the last failure warned about: a cause that persists
    // (a disk short of room, whose free bytes change) is said once.
    let mut said: Option<io::ErrorKind> = None;
    loop {
        {
            let mut state = inner.lock();
            while state.ready.is_some() && !state.stop {
                state = inner.cond.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.stop {
                return;
            }
        }
        match prepare(inner, path, bytes, header) {
            Ok(true) => {
                retry = FIRST_RETRY;
                said = None;
                inner.lock().ready = Some(path.to_path_buf());
                inner.cond.notify_all();
            }
            Ok(false) => {
                let _ = fs::remove_file(path);
                return;
            }
            Err(e) => {
                let _ = fs::remove_file(path);
                if said != Some(e.kind()) {
                    tracing::warn!(
                        error = %e,
                        "no zero-filled journal segment; the journal appends (each fsync also commits the file's size) until one can be made"
                    );
                    said = Some(e.kind());
                }
                let state = inner.lock();
                let (state, _) = inner
                    .cond
                    .wait_timeout_while(state, retry, |s| !s.stop)
                    .unwrap_or_else(|p| p.into_inner());
                if state.stop {
                    return;
                }
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}

/// Writes `header` and zeros up to `bytes` to `path` and syncs them;
/// `Ok(false)` if stopped on the way.
fn prepare(inner: &Inner, path: &Path, bytes: u64, header: &[u8]) -> io::Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let free = statepipe_sys::durable::available_bytes(dir)?;
    if free < bytes.saturating_mul(3) {
        return Err(io::Error::other(format!(
            "{free} bytes free in {}: a segment of {bytes} bytes is made only with room for two more",
            dir.display()
        )));
    }
    let mut file = File::create(path)?;
    file.write_all(header)?;
    let zeros = vec![0u8; CHUNK];
    let began = Instant::now();
    let mut written = header.len() as u64;
    while written < bytes {
        if inner.lock().stop {
            return Ok(false);
        }
        let n = (bytes - written).min(CHUNK as u64) as usize;
        statepipe_sys::durable::write_paced(&mut file, &zeros[..n], PIECE)?;
        written += n as u64;
        let due = Duration::from_secs_f64(written as f64 / ZEROS_PER_SECOND as f64);
        if let Some(early) = due.checked_sub(began.elapsed()) {
            std::thread::sleep(early);
        }
    }
    // Data and size: the records written over these zeros later flush
    // data alone.
    file.sync_all()?;
    Ok(true)
}
