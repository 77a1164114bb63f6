//! The ring handle: lifecycle (join, halt), pollers, monitoring.

use crate::consumer::{EventPoller, EventPollerMut};
use crate::error::RingError;
use crate::monitor::Monitor;
use crate::producer::ProducerKind;
use crate::shared::{Shared, HALTED};
use crate::sync::{thread, Arc};
use crate::wait::WaitStrategy;

/// What a clean drain looked like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinReport {
    /// Events published over the ring's life.
    pub published: u64,
    /// Per consumer (handler threads and pollers): its name and how many
    /// events it went past.
    pub consumers: Vec<(String, u64)>,
}

/// A running ring: its consumer threads, pollers not yet taken, and the way
/// to stop it.
///
/// Dropping a `Ring` without [`join`](Self::join) halts it and waits for its
/// threads, so no thread outlives it.
pub struct Ring<T, W: WaitStrategy, K: ProducerKind> {
    shared: Arc<Shared<T, W, K>>,
    threads: Vec<thread::JoinHandle<()>>,
    /// Pollers not taken yet, each with whether it was declared mutable.
    pollers: Vec<(EventPoller<T, W, K>, bool)>,
    spawn_error: Option<String>,
    joined: bool,
}

impl<T, W: WaitStrategy, K: ProducerKind> std::fmt::Debug for Ring<T, W, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.shared.capacity)
            .field("threads", &self.threads.len())
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync, W: WaitStrategy, K: ProducerKind> Ring<T, W, K> {
    pub(crate) fn new(
        shared: Arc<Shared<T, W, K>>,
        threads: Vec<thread::JoinHandle<()>>,
        pollers: Vec<(EventPoller<T, W, K>, bool)>,
        spawn_error: Option<String>,
    ) -> Self {
        Self {
            shared,
            threads,
            pollers,
            spawn_error,
            joined: false,
        }
    }

    /// The number of slots.
    pub fn capacity(&self) -> u64 {
        self.shared.capacity
    }

    /// Takes the poller declared with
    /// [`RingBuilder::poller`](crate::RingBuilder::poller) under `name`.
    /// A poller declared with `poller_mut` may be taken this way too, to
    /// read only.
    pub fn take_poller(&mut self, name: &str) -> Option<EventPoller<T, W, K>> {
        let at = self.pollers.iter().position(|(p, _)| p.name() == name)?;
        Some(self.pollers.swap_remove(at).0)
    }

    /// Takes the poller declared with
    /// [`RingBuilder::poller_mut`](crate::RingBuilder::poller_mut) under
    /// `name`; `None` if there is none (or it was declared read-only).
    pub fn take_poller_mut(&mut self, name: &str) -> Option<EventPollerMut<T, W, K>> {
        let at = self
            .pollers
            .iter()
            .position(|(p, exclusive)| *exclusive && p.name() == name)?;
        Some(EventPollerMut(self.pollers.swap_remove(at).0))
    }

    /// A cheap, cloneable view of the ring's progress for any thread.
    pub fn monitor(&self) -> Monitor<T, W, K> {
        Monitor::new(Arc::clone(&self.shared))
    }

    /// Stops the ring now: consumers stop after their current batch,
    /// producers waiting for space (and every later publish) get a `Halted`
    /// error with their value. [`join`](Self::join) then reports what was
    /// left unhandled.
    pub fn halt(&self) {
        self.shared.halt();
    }

    /// Waits until every producer handle is gone and every consumer thread
    /// has handled every published event (or until the ring halts), then
    /// reports.
    ///
    /// Call it after the producers are dropped (or from another thread than
    /// theirs); pollers not taken are detached first.
    ///
    /// # Errors
    /// [`RingError::HandlerPanicked`] naming the consumer and the sequence if
    /// a handler panicked; [`RingError::Halted`] with the unhandled counts
    /// after [`halt`](Self::halt); [`RingError::Spawn`] if a consumer thread
    /// could not start.
    pub fn join(mut self) -> Result<JoinReport, RingError> {
        self.joined = true;
        self.pollers.clear();
        for handle in self.threads.drain(..) {
            // Handler panics are caught inside the thread; a join error could
            // only come from a panic outside the handler, which `fail` covers.
            let _ = handle.join();
        }
        if let Some(e) = self.spawn_error.take() {
            return Err(RingError::Spawn(e));
        }
        let failure = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(f) = failure {
            return Err(RingError::HandlerPanicked {
                consumer: f.consumer,
                sequence: f.sequence,
                message: f.message,
            });
        }
        let stats = self.monitor().stats();
        if self.shared.state_acquire() & HALTED != 0 {
            let unhandled = stats
                .consumers
                .iter()
                .map(|c| (c.name.clone(), c.lag))
                .collect();
            return Err(RingError::Halted { unhandled });
        }
        Ok(JoinReport {
            published: stats.published,
            consumers: stats
                .consumers
                .into_iter()
                .map(|c| (c.name, c.handled))
                .collect(),
        })
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> Drop for Ring<T, W, K> {
    fn drop(&mut self) {
        if self.joined {
            return;
        }
        self.shared.halt();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}
