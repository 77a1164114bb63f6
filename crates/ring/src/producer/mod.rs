//! Producer handles: claim slots, fill them in place, publish.
//!
//! [`Producer<T, W, K>`] has one API for every kind; the kind `K` decides how
//! sequences are claimed and how consumers learn what is published:
//! * [`Single`] (`SingleProducer`): the claim is a local counter and publishing
//!   is one Release store of the cursor and one of the range's end: no atomic
//!   read-modify-write. Consumers poll range ends (single events) or the
//!   cursor (batches), then read the slots: a hand-over moves two cache lines.
//! * [`Stamped`] (`StampedProducer`): one producer too, but each published
//!   slot carries its sequence (its *stamp*) on the event's cache line, and a
//!   waiting consumer polls the slot itself: a hand-over moves one line, for
//!   the lowest one-hop latency. The price is a stamp per slot (8 bytes, twice
//!   a `u64` event's slot) and a stamp stored and read per event: measured on
//!   2 vCPUs with `u64` events, about half the single-event and a third of
//!   the batch throughput of `Single`.
//! * [`Multi`] (`MultiProducer`, `Clone`): claims race on the cursor; each
//!   published slot is stamped as with `Stamped`, so consumers see exactly
//!   the contiguous published prefix.
//!
//! A producer caches the gate (the slowest consumer) and reads the consumer
//! sequences again only when the cached value says the ring is full.
//!
//! A sole producer ([`Single`] or [`Stamped`]) can also *stage* events
//! (`stage.rs`): fill slots now, publish them together later.

mod claim;
pub(crate) mod kind;
mod multi;
mod single;
mod stage;

use std::marker::PhantomData;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::error::{PublishError, PublishTimeoutError, TryPublishError};
use crate::shared::{Shared, HALTED};
use crate::sync::{Arc, Ordering};
use crate::wait::{Adaptive, WaitStrategy};
use claim::{ClaimError, Until};
pub use kind::{Multi, ProducerKind, Single, SoleProducer, Stamped};

/// The single-producer handle.
pub type SingleProducer<T, W = Adaptive> = Producer<T, W, Single>;
/// The stamped single-producer handle (lowest latency).
pub type StampedProducer<T, W = Adaptive> = Producer<T, W, Stamped>;
/// The multi-producer handle; clone it for each producing thread.
pub type MultiProducer<T, W = Adaptive> = Producer<T, W, Multi>;

/// A handle that publishes events into the ring.
///
/// Dropping the last producer handle closes the ring: consumers handle every
/// event published so far, then stop, and [`Ring::join`](crate::Ring::join)
/// returns.
pub struct Producer<T, W: WaitStrategy, K: ProducerKind> {
    shared: Arc<Shared<T, W, K>>,
    /// Single: the next sequence to claim (local). Multi: unused.
    next: u64,
    /// Single: the first sequence not published yet; below `next` while
    /// events are staged (see [`stage_with`](Self::stage_with)). Multi:
    /// unused.
    unpublished: u64,
    /// The gate last read: sequences below `cached_gate + capacity` are free.
    cached_gate: u64,
    _kind: PhantomData<K>,
}

impl<T, W: WaitStrategy, K: ProducerKind> std::fmt::Debug for Producer<T, W, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("multi", &K::MULTI)
            .field("capacity", &self.shared.capacity)
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync, W: WaitStrategy, K: ProducerKind> Producer<T, W, K> {
    pub(crate) fn new(shared: Arc<Shared<T, W, K>>) -> Self {
        Self {
            shared,
            next: 0,
            unpublished: 0,
            cached_gate: 0,
            _kind: PhantomData,
        }
    }

    /// The ring's capacity.
    pub fn capacity(&self) -> u64 {
        self.shared.capacity
    }

    /// Claims `n` sequences; returns the first.
    #[inline(always)]
    fn claim(&mut self, n: u64, until: Until) -> Result<u64, ClaimError> {
        assert!(
            n <= self.shared.capacity,
            "cannot publish {n} events at once into a ring of capacity {}",
            self.shared.capacity
        );
        if self.shared.state() & HALTED != 0 {
            return Err(ClaimError::Halted);
        }
        if K::MULTI {
            multi::claim(&self.shared, &mut self.cached_gate, n, until)
        } else {
            // The local counter is the claim; only a full cached gate
            // leaves this path.
            let end = self.next + n;
            if end > self.cached_gate + self.shared.capacity {
                self.make_room(end, until)?;
            }
            Ok(self.next)
        }
    }

    /// Writes `value` into the slot of `seq`, returning the previous value.
    #[inline(always)]
    fn replace(&self, seq: u64, value: T) -> T {
        self.shared.slot(seq).with_mut(|p| {
            // SAFETY: `seq` was claimed by this producer and is below the
            // gate plus capacity, so no consumer reads this slot and no other
            // producer writes it until we commit.
            unsafe { std::mem::replace(&mut *p, value) }
        })
    }

    #[inline(always)]
    fn put(&mut self, value: T, until: Until) -> Result<u64, (T, ClaimError)> {
        match self.claim(1, until) {
            Ok(seq) => {
                let old = self.replace(seq, value);
                self.commit(seq, 1);
                // The previous event is dropped after the publish, so a
                // panicking `Drop` cannot leave a claimed slot unpublished.
                drop(old);
                Ok(seq)
            }
            Err(e) => Err((value, e)),
        }
    }

    /// Publishes `value`, waiting by the wait strategy while the ring is full.
    /// Returns its sequence.
    ///
    /// # Errors
    /// [`PublishError::Halted`] with the value if the ring was halted.
    #[inline]
    pub fn publish(&mut self, value: T) -> Result<u64, PublishError<T>> {
        self.put(value, Until::Forever)
            .map_err(|(v, _)| PublishError::Halted(v))
    }

    /// Publishes `value` if a slot is free now; never waits.
    ///
    /// # Errors
    /// [`TryPublishError::Full`] or [`TryPublishError::Halted`] with the value.
    #[inline]
    pub fn try_publish(&mut self, value: T) -> Result<u64, TryPublishError<T>> {
        self.put(value, Until::Never).map_err(|(v, e)| e.refuse(v))
    }

    /// Publishes `value`, waiting at most `timeout` for a free slot.
    ///
    /// # Errors
    /// [`PublishTimeoutError::Timeout`] or [`PublishTimeoutError::Halted`]
    /// with the value.
    pub fn publish_timeout(
        &mut self,
        value: T,
        timeout: Duration,
    ) -> Result<u64, PublishTimeoutError<T>> {
        let until = Until::Deadline(Instant::now() + timeout);
        self.put(value, until).map_err(|(v, e)| match e {
            ClaimError::Halted => PublishTimeoutError::Halted(v),
            _ => PublishTimeoutError::Timeout(v),
        })
    }

    /// Fills the next slot in place with `f` and publishes it, waiting while
    /// the ring is full. The slot holds whatever the previous event left
    /// (or the factory's value): `f` updates it without allocating.
    ///
    /// If `f` panics, a single producer publishes nothing; a multi-producer
    /// still publishes the slot as `f` left it, so consumers never stall on a
    /// hole, and the panic goes on unwinding.
    ///
    /// # Errors
    /// [`PublishError::Halted`] with `f` if the ring was halted.
    #[inline]
    pub fn publish_with<F: FnOnce(&mut T)>(&mut self, f: F) -> Result<u64, PublishError<F>> {
        match self.claim(1, Until::Forever) {
            Ok(seq) => {
                self.fill_one(seq, f);
                Ok(seq)
            }
            Err(_) => Err(PublishError::Halted(f)),
        }
    }

    /// Like [`publish_with`](Self::publish_with) but never waits.
    ///
    /// # Errors
    /// [`TryPublishError::Full`] or [`TryPublishError::Halted`] with `f`.
    #[inline]
    pub fn try_publish_with<F: FnOnce(&mut T)>(&mut self, f: F) -> Result<u64, TryPublishError<F>> {
        match self.claim(1, Until::Never) {
            Ok(seq) => {
                self.fill_one(seq, f);
                Ok(seq)
            }
            Err(e) => Err(e.refuse(f)),
        }
    }

    /// Claims `n` slots, fills them in place with `f(i, slot)` for
    /// `i in 0..n`, and publishes the whole range at once. Waits while fewer
    /// than `n` slots are free.
    ///
    /// # Errors
    /// [`PublishError::Halted`] with `f` if the ring was halted.
    ///
    /// # Panics
    /// If `n` exceeds the capacity.
    #[inline]
    pub fn publish_batch<F: FnMut(usize, &mut T)>(
        &mut self,
        n: usize,
        f: F,
    ) -> Result<Range<u64>, PublishError<F>> {
        self.batch(n, Until::Forever, f)
            .map_err(|(f, _)| PublishError::Halted(f))
    }

    /// Like [`publish_batch`](Self::publish_batch) but never waits: either all
    /// `n` slots are free now, or nothing is published.
    ///
    /// # Errors
    /// [`TryPublishError::Full`] or [`TryPublishError::Halted`] with `f`.
    ///
    /// # Panics
    /// If `n` exceeds the capacity.
    #[inline]
    pub fn try_publish_batch<F: FnMut(usize, &mut T)>(
        &mut self,
        n: usize,
        f: F,
    ) -> Result<Range<u64>, TryPublishError<F>> {
        self.batch(n, Until::Never, f).map_err(|(f, e)| e.refuse(f))
    }

    #[inline(always)]
    fn batch<F: FnMut(usize, &mut T)>(
        &mut self,
        n: usize,
        until: Until,
        mut f: F,
    ) -> Result<Range<u64>, (F, ClaimError)> {
        let n64 = n as u64;
        if n == 0 {
            if self.shared.state() & HALTED != 0 {
                return Err((f, ClaimError::Halted));
            }
            let at = self.published_hint();
            return Ok(at..at);
        }
        match self.claim(n64, until) {
            Ok(start) => {
                self.fill_and_commit(start, n64, &mut f);
                Ok(start..start + n64)
            }
            Err(e) => Err((f, e)),
        }
    }

    /// Fills `[start, start + n)` and commits it; for a multi-producer the
    /// range is committed even if `f` panics (no hole for consumers).
    #[inline(always)]
    fn fill_and_commit(&mut self, start: u64, n: u64, mut f: impl FnMut(usize, &mut T)) {
        if K::MULTI {
            struct CommitOnUnwind<'a, T, W: WaitStrategy, K: ProducerKind> {
                shared: &'a Shared<T, W, K>,
                start: u64,
                n: u64,
            }
            impl<T, W: WaitStrategy, K: ProducerKind> Drop for CommitOnUnwind<'_, T, W, K> {
                fn drop(&mut self) {
                    self.shared.mark_published(self.start, self.n);
                    self.shared.wait.notify();
                }
            }
            let guard = CommitOnUnwind {
                shared: &self.shared,
                start,
                n,
            };
            self.fill_runs(start, n, &mut f);
            drop(guard); // commits
        } else {
            self.fill_runs(start, n, &mut f);
            self.commit(start, n);
        }
    }

    /// Runs `f(i, slot)` on the slots of `[start, start + n)`, walking them
    /// as contiguous runs (no masking or bounds check per slot).
    #[inline(always)]
    fn fill_runs(&self, start: u64, n: u64, f: &mut impl FnMut(usize, &mut T)) {
        let mut done = 0u64;
        while done < n {
            let run = self.shared.run(start + done, start + n);
            for (k, slot) in run.iter().enumerate() {
                slot.value.with_mut(|p| {
                    // SAFETY: as in `replace`: the range is claimed and not
                    // yet published, so this is the only access.
                    f(done as usize + k, unsafe { &mut *p })
                });
            }
            done += run.len() as u64;
        }
    }

    #[inline(always)]
    fn fill_one(&mut self, seq: u64, f: impl FnOnce(&mut T)) {
        let mut f = Some(f);
        self.fill_and_commit(seq, 1, |_, slot| {
            if let Some(f) = f.take() {
                f(slot);
            }
        });
    }

    fn published_hint(&self) -> u64 {
        if K::MULTI {
            // Relaxed: only a position to report for an empty batch.
            self.shared.cursor.load(Ordering::Relaxed)
        } else {
            self.next
        }
    }

    /// Closes this handle (the same as dropping it).
    pub fn close(self) {}
}

impl<T: Send + Sync, W: WaitStrategy, K: SoleProducer> Producer<T, W, K> {
    /// Whether one event could be published now without waiting: a hint
    /// for a thread that serves several rings and must not block on one
    /// (consumers only ever free space, so `true` stays true until this
    /// producer publishes).
    pub fn has_space(&self) -> bool {
        self.next < self.shared.gate() + self.shared.capacity
    }
}

impl<T, W: WaitStrategy> Clone for Producer<T, W, Multi> {
    fn clone(&self) -> Self {
        // Relaxed: the count only needs to be exact, not ordered; the last
        // decrement in `Drop` synchronises (AcqRel).
        self.shared.producers.fetch_add(1, Ordering::Relaxed);
        Self {
            shared: Arc::clone(&self.shared),
            next: 0,
            unpublished: 0,
            cached_gate: self.cached_gate,
            _kind: PhantomData,
        }
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> Producer<T, W, K> {
    /// Makes `[start, start + n)` visible to consumers; a single producer
    /// publishes the events it staged before `start` in the same range.
    #[inline(always)]
    fn commit(&mut self, start: u64, n: u64) {
        if K::MULTI {
            self.shared.mark_published(start, n);
        } else {
            // Staged events sit in `[unpublished, start)`: one range from
            // there. It is at most a capacity long, since the gate (which
            // never passes `unpublished`) held every claim in it.
            let from = self.unpublished;
            let end = start + n;
            self.next = end;
            self.unpublished = end;
            if K::STAMPED {
                // Each slot's stamp publishes it; then the cursor, which
                // consumers read only to see that a closed ring is drained
                // (`Shared::finished`) and `Monitor` for figures.
                self.shared.mark_published(from, end - from);
                // Release: pairs with the Acquire cursor load in
                // `Shared::finished`; the stamps happen before it.
                self.shared.cursor.store(end, Ordering::Release);
            } else {
                // Release: pairs with the Acquire cursor loads in
                // `Shared::published_from` (batches, a lagging consumer) and
                // `Shared::finished`; the slot writes happen before it.
                self.shared.cursor.store(end, Ordering::Release);
                // Release, after the cursor: pairs with the Acquire range-end
                // loads in `Shared::published_from`; the slot writes (and the
                // cursor) happen before a consumer that sees the range reads it.
                self.shared.range_ends[(from & self.shared.mask) as usize]
                    .store(end, Ordering::Release);
            }
        }
        self.shared.wait.notify();
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> Producer<T, W, K> {
    /// Single producer, when the cached gate says `[next, end)` does not
    /// fit: publishes what was staged (consumers cannot free slots for
    /// events they cannot see), then reads the gate again and waits as
    /// `until` says. Out of line, so that the claim stays small enough to
    /// inline.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, end: u64, until: Until) -> Result<(), ClaimError> {
        if self.unpublished < self.next {
            self.commit(self.next, 0);
        }
        single::wait_for_space(&self.shared, end, &mut self.cached_gate, until)
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> Drop for Producer<T, W, K> {
    fn drop(&mut self) {
        if !K::MULTI && self.unpublished < self.next {
            // Staged events are published, not lost, when the handle goes.
            self.commit(self.next, 0);
        }
        // AcqRel: the last handle to go acquires every other handle's
        // publishes (their Release decrements) before it closes the ring.
        if self.shared.producers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.shared.close();
        }
    }
}
