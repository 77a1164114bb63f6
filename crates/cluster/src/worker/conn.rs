//! What the worker's threads share: the master connection and the store.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::evolve::StateId;
use crate::protocol::Kind;
use crate::wire;

/// A worker's states, serialised, shared by its threads.
pub(crate) type Store = Arc<Mutex<HashMap<StateId, Vec<u8>>>>;

/// Locks, ignoring poisoning (a panicking evolve is caught before it could
/// poison anything, and the worker exits after it anyway).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records a fatal error, tells the master, and closes the connection so
/// that the reader thread stops too.
pub(super) fn fail(conn: &Conn, msg: &str) {
    tracing::error!("{msg}");
    let mut slot = lock(&conn.failed);
    if slot.is_none() {
        *slot = Some(msg.to_string());
        let mut w = lock(&conn.writer);
        let _ = wire::write_frame(&mut *w, Kind::Failed, msg.as_bytes());
        let _ = w.shutdown(Shutdown::Both);
    }
}

/// The master connection as the worker's threads share it.
#[derive(Clone)]
pub(crate) struct Conn {
    pub(super) writer: Arc<Mutex<TcpStream>>,
    pub(super) failed: Arc<Mutex<Option<String>>>,
}

impl Conn {
    /// Writes whole frames; an error means the master is gone.
    pub(crate) fn send(&self, frames: &[u8]) -> std::io::Result<()> {
        lock(&self.writer).write_all(frames)
    }

    pub(crate) fn fail(&self, msg: &str) {
        fail(self, msg);
    }
}

/// A thread that sends the master a `Heartbeat` every interval, whatever
/// the other threads are doing, until dropped or the connection fails.
/// A long evolve keeps its worker audible; a stopped process, a dead host
/// or a cut link falls silent (the master's `Deadlines::silence`).
pub(super) struct Heartbeat {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Heartbeat {
    pub(super) fn start(conn: Conn, every: Duration) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("statepipe-heartbeat".into())
            .spawn(move || {
                let mut frame = Vec::with_capacity(crate::protocol::HEADER_LEN);
                crate::protocol::encode(&mut frame, Kind::Heartbeat, &[]);
                // The first at once: from it on the master times this
                // worker by its silence.
                loop {
                    // Relaxed: the flag publishes no data, it only ends the loop.
                    if flag.load(Ordering::Relaxed) || conn.send(&frame).is_err() {
                        return;
                    }
                    std::thread::park_timeout(every);
                }
            })?;
        Ok(Heartbeat {
            stop,
            thread: Some(thread),
        })
    }
}

/// A thread that watches a worker's leave flag and, once it is set, tells
/// the master `Leaving` (once), until dropped or the connection fails.
pub(super) struct Leaver {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Leaver {
    /// How often the flag is looked at: a signal handler only sets it.
    const POLL: Duration = Duration::from_millis(20);

    pub(super) fn start(conn: Conn, leave: Arc<AtomicBool>) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("statepipe-leave".into())
            .spawn(move || {
                let mut frame = Vec::with_capacity(crate::protocol::HEADER_LEN);
                crate::protocol::encode(&mut frame, Kind::Leaving, &[]);
                // Relaxed, both: flags that publish no data.
                while !flag.load(Ordering::Relaxed) {
                    if leave.load(Ordering::Relaxed) {
                        if conn.send(&frame).is_ok() {
                            tracing::info!("asked to leave: told the master");
                        }
                        return;
                    }
                    std::thread::park_timeout(Self::POLL);
                }
            })?;
        Ok(Leaver {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Leaver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}
