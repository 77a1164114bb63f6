//! [`Doorbell`]: where a worker sleeps, and how the other end of an edge
//! wakes it.

use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Duration;

/// Where a worker sleeps when it has nothing to do, and how the other end
/// of an edge wakes it.
///
/// Sleeper: `sleeping = true` (SeqCst), re-check every task, park with a
/// timeout. Waker: move the edge forward (Release, inside the ring), then
/// `fence(SeqCst)` and load `sleeping`. Either the sleeper's re-check sees
/// the progress or the waker sees `sleeping` and unparks.
#[derive(Debug)]
pub(crate) struct Doorbell {
    sleeping: AtomicBool,
    thread: std::sync::OnceLock<Thread>,
}

impl Doorbell {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Doorbell {
            sleeping: AtomicBool::new(false),
            thread: std::sync::OnceLock::new(),
        })
    }

    /// Binds the doorbell to the calling thread (the worker's).
    pub(crate) fn bind(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Wakes the worker if it sleeps.
    #[inline]
    pub(crate) fn ring(&self) {
        // SeqCst: pairs with the SeqCst store in `sleep`, after the caller's
        // Release publication of its progress (see the type's docs).
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Sleeps at most `max` unless `ready()` says there is work.
    pub(crate) fn sleep(&self, max: Duration, ready: impl FnOnce() -> bool) {
        // SeqCst: pairs with the fence in `ring`.
        self.sleeping.store(true, Ordering::SeqCst);
        if !ready() {
            std::thread::park_timeout(max);
        }
        self.sleeping.store(false, Ordering::Relaxed);
    }
}
