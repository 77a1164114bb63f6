//! The state every handle of one ring shares: slots, cursor, consumer
//! sequences, lifecycle flags.
//!
//! ## Sequences
//! All sequences are `u64` *counts*: the cursor is the number of events
//! published (single producer) or claimed (multi-producer); a consumer's
//! sequence is the number of events it has finished with. Event `s` lives in
//! slot `s & mask`. A producer may write event `s` only when
//! `s < min(consumer sequences) + capacity` (the *gate*).
//!
//! ## Memory ordering
//! * Producer → consumer: the producer writes the slot, then stores the
//!   cursor (single) or the slot's stamp `= s` (multi) with Release; a
//!   consumer loads them with Acquire before it reads the slot.
//! * Consumer → producer and consumer → dependent: a consumer stores its
//!   sequence with Release after its last access to the batch; producers
//!   (gate) and dependent consumers load it with Acquire before they touch
//!   those slots again.
//! * Close: the last producer handle to go sets `CLOSED` with Release after
//!   its last publish; a consumer that loads `CLOSED` with Acquire then sees
//!   the final cursor, and stops once it has handled everything up to it.

use crossbeam_utils::CachePadded;

use crate::producer::ProducerKind;
use crate::sync::{AtomicU64, AtomicU8, AtomicUsize, Mutex, Ordering, UnsafeCell};
use crate::wait::WaitStrategy;

/// Set when every producer handle has been dropped: consumers drain and stop.
pub(crate) const CLOSED: u8 = 1;
/// Set by `halt` or a panicking handler: everyone stops as soon as they look.
pub(crate) const HALTED: u8 = 2;

/// Set in the sequence of a consumer that left (a dropped poller). Real
/// sequences stay below 2^63, so a detached sequence constrains neither
/// dependents nor producers through `min`; the bits below it keep where the
/// consumer stopped.
pub(crate) const DETACHED: u64 = 1 << 63;

/// What made the ring halt, if a handler panicked.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub(crate) consumer: String,
    pub(crate) sequence: u64,
    pub(crate) message: String,
}

/// One consumer as the ring sees it.
pub(crate) struct ConsumerCell {
    pub(crate) name: String,
    /// Number of events this consumer is done with (Release by its owner).
    pub(crate) seq: CachePadded<AtomicU64>,
    /// Indices of the consumers it must stay behind.
    pub(crate) deps: Box<[usize]>,
    /// `(i, n)`: handles only `s % n == i` (a worker-group member).
    pub(crate) partition: Option<(u64, u64)>,
}

/// One slot: the event, and for a multi-producer ring the sequence last
/// published in it, on the same cache line so that publishing one event
/// moves one line between cores, not two.
pub(crate) struct Slot<T, S> {
    pub(crate) stamp: S,
    pub(crate) value: UnsafeCell<T>,
}

pub(crate) struct Shared<T, W, K: ProducerKind> {
    pub(crate) slots: Box<[Slot<T, K::Stamp>]>,
    pub(crate) mask: u64,
    pub(crate) capacity: u64,
    /// Published (single) or claimed (multi) count.
    pub(crate) cursor: CachePadded<AtomicU64>,
    pub(crate) consumers: Box<[ConsumerCell]>,
    pub(crate) state: CachePadded<AtomicU8>,
    pub(crate) producers: AtomicUsize,
    /// Consumers not detached; the last one to detach halts an undrained ring.
    pub(crate) attached: AtomicUsize,
    pub(crate) max_batch: u64,
    pub(crate) wait: W,
    pub(crate) failure: Mutex<Option<Failure>>,
}

// SAFETY: slots are shared between producer and consumer threads. Access is
// serialised by the sequence protocol in the module docs: a slot is written
// only by the producer that claimed it while no consumer may read it (gate),
// read concurrently only through `&T` (requires `T: Sync`) and mutated by a
// consumer only when the builder proved no other consumer can read it (and
// the value then crosses threads: `T: Send`).
unsafe impl<T: Send + Sync, W: Send + Sync, K: ProducerKind> Sync for Shared<T, W, K> {}
// SAFETY: see `Sync` above; owning the ring moves `T`s between threads.
unsafe impl<T: Send + Sync, W: Send, K: ProducerKind> Send for Shared<T, W, K> {}

impl<T, W: WaitStrategy, K: ProducerKind> Shared<T, W, K> {
    /// The slot of event `seq`.
    #[inline(always)]
    pub(crate) fn slot(&self, seq: u64) -> &UnsafeCell<T> {
        // `mask < slots.len()`, so the index is always in bounds.
        &self.slots[(seq & self.mask) as usize].value
    }

    /// The slots of `[from, end)` that are contiguous in memory from `from`:
    /// all of them, or those up to the end of the array (the rest wraps).
    #[inline(always)]
    pub(crate) fn run(&self, from: u64, end: u64) -> &[Slot<T, K::Stamp>] {
        let at = (from & self.mask) as usize;
        let len = ((end - from) as usize).min(self.slots.len() - at);
        &self.slots[at..at + len]
    }

    /// The smallest attached consumer sequence: producers may write below it
    /// plus the capacity. If every consumer is detached (the ring is then
    /// halted or drained), where the last ones stopped still gates, so two
    /// producers can never reach the same slot.
    #[inline]
    pub(crate) fn gate(&self) -> u64 {
        let mut min = u64::MAX;
        for c in self.consumers.iter() {
            // Acquire: pairs with the Release store of `seq` in the
            // consumer loop (`consumer::run`) / `EventPoller::poll` / its
            // `Drop`, so their reads of the slot happen before we overwrite it.
            min = min.min(c.seq.load(Ordering::Acquire));
        }
        if min >= DETACHED {
            min & !DETACHED
        } else {
            min
        }
    }

    /// Detaches consumer `idx` (a dropped poller) that stopped at `next`.
    pub(crate) fn detach(&self, idx: usize, next: u64) {
        // Release: pairs with the Acquire loads in `gate` / `available_for`;
        // the consumer's reads happen before producers reuse its slots.
        self.consumers[idx]
            .seq
            .store(next | DETACHED, Ordering::Release);
        // AcqRel: the last consumer to leave sees every other detach.
        let last = self.attached.fetch_sub(1, Ordering::AcqRel) == 1;
        if last && !self.finished(next) {
            // Nobody is left to consume: stop the producers rather than let
            // them publish into a ring nobody reads.
            self.halt();
        } else {
            self.wait.notify();
        }
    }

    /// The exclusive upper bound of events published contiguously from `next`.
    #[inline]
    pub(crate) fn published_from(&self, next: u64) -> u64 {
        if !K::MULTI {
            // Acquire: pairs with the Release cursor store in
            // `Producer::commit` (single producer), making the slots visible.
            return self.cursor.load(Ordering::Acquire);
        }
        // Multi-producer: the availability flags alone say what is published;
        // the claim cursor is the producers' contended line, so stay off it.
        let mut s = next;
        let limit = next + self.capacity;
        while s < limit {
            // Acquire inside: pairs with the Release in `K::mark_published`
            // (`producer::multi::commit`), making the slot visible.
            if !K::is_published(&self.slots[(s & self.mask) as usize].stamp, s) {
                break;
            }
            s += 1;
        }
        s
    }

    /// The exclusive upper bound of events consumer `idx` may handle now.
    #[inline]
    pub(crate) fn available_for(&self, idx: usize, next: u64) -> u64 {
        let mut upper = self.published_from(next);
        for &d in self.consumers[idx].deps.iter() {
            // Acquire: pairs with the dependency's Release store of its
            // sequence, so its access to the slots happens before ours.
            upper = upper.min(self.consumers[d].seq.load(Ordering::Acquire));
        }
        upper
    }

    #[inline(always)]
    pub(crate) fn state(&self) -> u8 {
        // Relaxed: a hint on hot paths; decisions that depend on what was
        // published before the flag use `state_acquire`.
        self.state.load(Ordering::Relaxed)
    }

    #[inline]
    pub(crate) fn state_acquire(&self) -> u8 {
        // Acquire: pairs with the Release `fetch_or` in `close` / `halt`.
        self.state.load(Ordering::Acquire)
    }

    /// Whether a consumer at `next` has nothing left to do, ever.
    pub(crate) fn finished(&self, next: u64) -> bool {
        let state = self.state_acquire();
        if state & HALTED != 0 {
            return true;
        }
        // After CLOSED every claimed sequence is published (producers publish
        // before they drop), so the cursor is final.
        // Acquire: pairs with the producers' Release cursor stores.
        state & CLOSED != 0 && next >= self.cursor.load(Ordering::Acquire)
    }

    /// Marks the ring closed (last producer gone) and wakes everyone.
    pub(crate) fn close(&self) {
        // Release: pairs with the Acquire load in `finished`; everything the
        // producers published happens before it.
        self.state.fetch_or(CLOSED, Ordering::Release);
        self.wait.notify();
    }

    /// Stops the ring: producers get `Halted`, consumers stop.
    pub(crate) fn halt(&self) {
        // Release: pairs with the Acquire load in `finished`.
        self.state.fetch_or(HALTED, Ordering::Release);
        self.wait.notify();
    }

    /// Records the first handler failure and halts.
    pub(crate) fn fail(&self, failure: Failure) {
        {
            let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(failure);
            }
        }
        self.halt();
    }
}
