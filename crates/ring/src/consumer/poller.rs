//! A consumer the user drives from their own thread.

use std::time::{Duration, Instant};

use crate::error::PollError;
use crate::producer::ProducerKind;
use crate::shared::{Seen, Shared, HALTED};
use crate::sync::{Arc, Ordering, UnsafeCell};
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
    /// How far the ring is known to be published (see `Shared::published_from`).
    seen: Seen,
    /// Empty polls in a row (see `Shared::prefetch_while_idle`).
    idle: u32,
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
        Self {
            ring,
            idx,
            next: 0,
            seen: Seen::default(),
            idle: 0,
        }
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
        self.poll_slots(|cell, s, end_of_batch| {
            cell.with(|p| {
                // SAFETY: `poll_slots` hands over only sequences that are
                // published and below every dependency, and producers wait
                // for this poller's sequence before reusing the slot: only
                // shared reads happen now.
                f(unsafe { &*p }, s, end_of_batch)
            });
            true
        })
    }

    /// Runs `f` on every slot available now (at most the ring's maximum
    /// batch) until it returns `false` (that slot is consumed too), then
    /// publishes the poller's progress.
    fn poll_slots<F: FnMut(&UnsafeCell<T>, u64, bool) -> bool>(
        &mut self,
        mut f: F,
    ) -> Result<usize, PollError> {
        let ring = &*self.ring;
        if ring.state_acquire() & HALTED != 0 {
            return Err(PollError::Halted);
        }
        let upper = ring.available_for(self.idx, self.next, &mut self.seen);
        if upper == self.next {
            if ring.finished(self.next) {
                return Err(if ring.state() & HALTED != 0 {
                    PollError::Halted
                } else {
                    PollError::Closed
                });
            }
            self.idle = self.idle.saturating_add(1);
            ring.prefetch_while_idle(self.next, self.idle);
            return Ok(0);
        }
        self.idle = 0;
        let mut end = upper.min(self.next.saturating_add(ring.max_batch));
        for s in self.next..end {
            if !f(ring.slot(s), s, s + 1 == end) {
                end = s + 1;
                break;
            }
        }
        // Release: pairs with the Acquire loads in `Shared::gate` and
        // `Shared::available_for`, as in the handler loop.
        ring.consumers[self.idx].seq.store(end, Ordering::Release);
        ring.wait.notify();
        let n = (end - self.next) as usize;
        self.next = end;
        Ok(n)
    }

    /// Whether events are ready for [`poll`](Self::poll) now, or the ring is
    /// finished for this poller (so `poll` would return an error). A cheap
    /// check for a thread that serves several pollers before it sleeps.
    pub fn ready(&self) -> bool {
        let ring = &*self.ring;
        // A copy: still what this consumer was told.
        ring.available_for(self.idx, self.next, &mut self.seen.clone()) > self.next
            || ring.finished(self.next)
            || ring.state_acquire() & HALTED != 0
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
        let (ring, idx, next, seen) = (&*self.ring, self.idx, self.next, &mut self.seen);
        let mut polls = 0u32;
        ring.wait.wait_until(Some(deadline), || {
            let ready = ring.available_for(idx, next, seen) > next || ring.finished(next);
            if !ready {
                polls = polls.saturating_add(1);
                ring.prefetch_while_idle(next, polls);
            }
            ready
        });
        self.poll(f)
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> Drop for EventPoller<T, W, K> {
    fn drop(&mut self) {
        self.ring.detach(self.idx, self.next);
    }
}

/// A poller that may mutate the events it handles (`&mut T`), declared with
/// [`RingBuilder::poller_mut`](crate::RingBuilder::poller_mut): like
/// [`handler_mut`](crate::RingBuilder::handler_mut) it is alone in its
/// stage, so no other consumer reads an event while it holds it. The usual
/// use is to move values out of the ring (`Option::take`) on a
/// single-consumer edge.
///
/// # Examples
///
/// ```
/// use statepipe_ring::RingBuilder;
///
/// let (mut producer, mut ring) = RingBuilder::new(4, || None::<String>)
///     .poller_mut("owner")
///     .build_single();
/// let mut owner = ring.take_poller_mut("owner").unwrap();
/// producer.publish(Some("moved, not cloned".to_string())).unwrap();
/// let mut got = Vec::new();
/// owner.poll(|slot, _seq, _eob| got.extend(slot.take())).unwrap();
/// assert_eq!(got, ["moved, not cloned"]);
/// ```
#[derive(Debug)]
pub struct EventPollerMut<T, W: WaitStrategy, K: ProducerKind>(pub(crate) EventPoller<T, W, K>);

impl<T: Send + Sync, W: WaitStrategy, K: ProducerKind> EventPollerMut<T, W, K> {
    /// The consumer's name, as given to the builder.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// Like [`EventPoller::poll`], with each event by `&mut T`.
    ///
    /// # Errors
    /// As [`EventPoller::poll`].
    pub fn poll<F: FnMut(&mut T, u64, bool)>(&mut self, mut f: F) -> Result<usize, PollError> {
        self.0.poll_slots(|cell, s, end_of_batch| {
            cell.with_mut(|p| {
                // SAFETY: as in `EventPoller::poll`, and in addition the
                // builder admits a mutable poller only as the sole consumer
                // of its stage, so between its dependencies (done with `s`)
                // and its dependents (waiting for this poller's sequence) no
                // other consumer touches the slot: the access is exclusive.
                f(unsafe { &mut *p }, s, end_of_batch)
            });
            true
        })
    }

    /// Like [`poll`](Self::poll), but stops after the first event on which
    /// `f` returns `false`: for a reader that takes events in groups and
    /// must not run into the next group.
    ///
    /// # Errors
    /// As [`EventPoller::poll`].
    pub fn poll_while<F: FnMut(&mut T, u64) -> bool>(
        &mut self,
        mut f: F,
    ) -> Result<usize, PollError> {
        self.0.poll_slots(|cell, s, _| {
            cell.with_mut(|p| {
                // SAFETY: as in `poll` above.
                f(unsafe { &mut *p }, s)
            })
        })
    }

    /// Like [`EventPoller::poll_timeout`], with each event by `&mut T`.
    ///
    /// # Errors
    /// As [`EventPoller::poll`].
    pub fn poll_timeout<F: FnMut(&mut T, u64, bool)>(
        &mut self,
        timeout: Duration,
        f: F,
    ) -> Result<usize, PollError> {
        let deadline = Instant::now() + timeout;
        let p = &mut self.0;
        let (ring, idx, next, seen) = (&*p.ring, p.idx, p.next, &mut p.seen);
        ring.wait.wait_until(Some(deadline), || {
            ring.available_for(idx, next, seen) > next || ring.finished(next)
        });
        self.poll(f)
    }

    /// Whether events are ready for [`poll`](Self::poll) now, or the ring is
    /// finished for this poller (so `poll` would return an error).
    pub fn ready(&self) -> bool {
        self.0.ready()
    }
}
