//! What the worker's threads share: the master connection and the store.

use std::collections::HashMap;
use std::io::Write as _;
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};

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
