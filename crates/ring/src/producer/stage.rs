//! Staging, for a sole producer ([`Single`](super::Single) or
//! [`Stamped`](super::Stamped)): fill slots one at a time as events
//! come, publish them together later.
//!
//! A producer that makes events one by one but has no hurry to show each
//! (a pipeline stage between two batches of its input) would otherwise pay
//! a publish per event: a cursor store, a range end, and, with a consumer
//! polling right behind, a cache line fetched back from that consumer for
//! every slot. Staged events are written in place exactly like a batch, and
//! one publish makes the whole run visible, so the consumer reads them as
//! one range.
//!
//! Staged events are claimed: they count against the ring's capacity, and
//! consumers cannot see (or free) them until they are published. So any
//! call that finds the ring full (staging or publishing, trying or
//! waiting) publishes what was staged first, any publish publishes it
//! together with its own events, and dropping the handle publishes it too:
//! a staged event is never stuck and never lost while the ring runs.

use std::ops::Range;

use super::claim::Until;
use super::kind::SoleProducer;
use super::Producer;
use crate::error::{PublishError, TryPublishError};
use crate::wait::WaitStrategy;

impl<T: Send + Sync, W: WaitStrategy, K: SoleProducer> Producer<T, W, K> {
    /// Fills the next slot in place with `f`, like
    /// [`try_publish_with`](Self::try_publish_with), but does not publish
    /// it: consumers see it at the next [`publish_staged`](Self::publish_staged),
    /// or at the next publish of any kind, which publishes the staged
    /// events before its own. Never waits. Returns the event's sequence.
    ///
    /// If `f` panics, nothing is staged for it (the events staged before
    /// stay staged).
    ///
    /// # Errors
    /// [`TryPublishError::Full`] with `f` when no slot is free now, counting
    /// the staged ones (which it then publishes: consumers must see them to
    /// make room); [`TryPublishError::Halted`] with `f` if the ring was
    /// halted.
    ///
    /// # Examples
    /// ```
    /// use statepipe_ring::RingBuilder;
    ///
    /// let (mut producer, mut ring) = RingBuilder::new(8, || 0u64)
    ///     .poller("p")
    ///     .build_single();
    /// let mut poller = ring.take_poller("p").unwrap();
    /// for v in [10, 20, 30] {
    ///     producer.try_stage_with(|slot| *slot = v).unwrap();
    /// }
    /// assert_eq!(producer.staged(), 3);
    /// assert_eq!(poller.poll(|_, _, _| {}), Ok(0)); // nothing visible yet
    /// assert_eq!(producer.publish_staged(), 0..3);
    /// let mut seen = Vec::new();
    /// poller.poll(|e, _, _| seen.push(*e)).unwrap();
    /// assert_eq!(seen, [10, 20, 30]);
    /// ```
    #[inline]
    pub fn try_stage_with<F: FnOnce(&mut T)>(&mut self, f: F) -> Result<u64, TryPublishError<F>> {
        match self.claim(1, Until::Never) {
            Ok(seq) => {
                self.fill_staged(seq, f);
                Ok(seq)
            }
            Err(e) => Err(e.refuse(f)),
        }
    }

    /// Like [`try_stage_with`](Self::try_stage_with), but waits by the wait
    /// strategy while the ring is full (having published the staged
    /// events).
    ///
    /// # Errors
    /// [`PublishError::Halted`] with `f` if the ring was halted.
    #[inline]
    pub fn stage_with<F: FnOnce(&mut T)>(&mut self, f: F) -> Result<u64, PublishError<F>> {
        match self.claim(1, Until::Forever) {
            Ok(seq) => {
                self.fill_staged(seq, f);
                Ok(seq)
            }
            Err(_) => Err(PublishError::Halted(f)),
        }
    }

    /// Publishes every staged event as one range; returns the range (empty
    /// when nothing was staged). On a halted ring it publishes too, and
    /// nobody reads them.
    #[inline]
    pub fn publish_staged(&mut self) -> Range<u64> {
        let from = self.unpublished;
        if from < self.next {
            self.commit(self.next, 0);
        }
        from..self.next
    }

    /// How many events are staged and not yet published.
    #[inline]
    pub fn staged(&self) -> u64 {
        self.next - self.unpublished
    }

    /// Runs `f` on the claimed slot `seq` and counts it staged.
    #[inline(always)]
    fn fill_staged(&mut self, seq: u64, f: impl FnOnce(&mut T)) {
        let mut f = Some(f);
        self.fill_runs(seq, 1, &mut |_, slot| {
            if let Some(f) = f.take() {
                f(slot);
            }
        });
        // Only now: a panicking `f` leaves the slot unstaged.
        self.next = seq + 1;
    }
}
