//! A consumer the user drives from their own thread.

use std::time::{Duration, Instant};

use crate::error::PollError;
use crate::producer::ProducerKind;
use crate::shared::{Shared, HALTED};
use crate::sync::{Arc, Ordering};
use crate::wait::WaitStrategy;

/// A consumer without a thread of its own: call [`poll`](Self::poll) from
/// any thread to handle whatever is available.
///
/// The poller gates producers like any consumer: a poller that is never
/// polled fills the ring. Dropping it detaches it: it stops gating
/// producers and dependents; if it was the last consumer and had not handled
/// everything of a closed ring, the ring halts (nobody is left to consume,
/// so producers get `Halted` instead of publishing into the void).
pub struct EventPoller<T, W: WaitStrategy, K: ProducerKind> {
    ring: Arc<Shared<T, W, K>>,
    idx: usize,
    next: u64,
}

impl<T, W: WaitStrategy, K: ProducerKind> std::fmt::Debug for EventPoller<T, W, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventPoller")
            .field("idx", &self.idx)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync, W: WaitStrategy, K: ProducerKind> EventPoller<T, W, K> {
    pub(crate) fn new(ring: Arc<Shared<T, W, K>>, idx: usize) -> Self {
        Self { ring, idx, next: 0 }
    }

    /// The consumer's name, as given to the builder.
    pub fn name(&self) -> &str {
        &self.ring.consumers[self.idx].name
    }

    /// Handles every event available now (at most the ring's maximum batch)
    /// with `f(event, sequence, end_of_batch)`; returns how many. `Ok(0)`
    /// means nothing is available yet.
    ///
    /// # Errors
    /// [`PollError::Closed`] once every producer is gone and everything was
    /// handled; [`PollError::Halted`] if the ring was halted.
    pub fn poll<F: FnMut(&T, u64, bool)>(&mut self, mut f: F) -> Result<usize, PollError> {
        let ring = &*self.ring;
        if ring.state_acquire() & HALTED != 0 {
            return Err(PollError::Halted);
        }
        let upper = ring.available_for(self.idx, self.next);
        if upper == self.next {
            if ring.finished(self.next) {
                return Err(if ring.state() & HALTED != 0 {
                    PollError::Halted
                } else {
                    PollError::Closed
                });
            }
            return Ok(0);
        }
        let end = upper.min(self.next.saturating_add(ring.max_batch));
        for s in self.next..end {
            ring.slot(s).with(|p| {
                // SAFETY: `s` is published and below every dependency, and
                // producers wait for this poller's sequence before reusing
                // the slot: only shared reads happen now.
                f(unsafe { &*p }, s, s + 1 == end)
            });
        }
        // Release: pairs with the Acquire loads in `Shared::gate` and
        // `Shared::available_for`, as in the handler loop.
        ring.consumers[self.idx].seq.store(end, Ordering::Release);
        ring.wait.notify();
        let n = (end - self.next) as usize;
        self.next = end;
        Ok(n)
    }

    /// Like [`poll`](Self::poll) but waits by the wait strategy, at most
    /// `timeout`, for at least one event.
    ///
    /// # Errors
    /// As [`poll`](Self::poll).
    pub fn poll_timeout<F: FnMut(&T, u64, bool)>(
        &mut self,
        timeout: Duration,
        f: F,
    ) -> Result<usize, PollError> {
        let deadline = Instant::now() + timeout;
        let (ring, idx, next) = (&*self.ring, self.idx, self.next);
        ring.wait.wait_until(Some(deadline), || {
            ring.available_for(idx, next) > next || ring.finished(next)
        });
        self.poll(f)
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> Drop for EventPoller<T, W, K> {
    fn drop(&mut self) {
        self.ring.detach(self.idx, self.next);
    }
}
