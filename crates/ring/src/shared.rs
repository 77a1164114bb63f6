//! The state every handle of one ring shares: slots, cursor, consumer
//! sequences, lifecycle flags.
//!
//! ## Sequences
//! All sequences are `u64` *counts*: the cursor is the number of events
//! published (single producers) or claimed (multi-producer); a consumer's
//! sequence is the number of events it has finished with. Event `s` lives in
//! slot `s & mask`. A producer may write event `s` only when
//! `s < min(consumer sequences) + capacity` (the *gate*).
//!
//! ## Memory ordering
//! * Producer → consumer: the producer writes the slot, then stores the
//!   cursor and the range's end (single) or the slot's stamp `= s`
//!   (stamped, multi) with Release; a consumer loads one of them with
//!   Acquire before it reads the slot. The stamped single producer stores
//!   the cursor too, after the stamps, for `finished` and `Monitor` only.
//! * Consumer → producer and consumer → dependent: a consumer stores its
//!   sequence with Release after its last access to the batch; producers
//!   (gate) and dependent consumers load it with Acquire before they touch
//!   those slots again.
//! * Close: the last producer handle to go sets `CLOSED` with Release after
//!   its last publish; a consumer that loads `CLOSED` with Acquire then sees
//!   the final cursor, and stops once it has handled everything up to it.

use crossbeam_utils::CachePadded;

use crate::producer::kind::ProducerKind;
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

/// A published range of at least this many events marks a producer that
/// publishes in batches (see [`Shared::published_from`]); 2 under loom, so
/// that a model with a 2-slot ring switches between both ways of reading.
pub(crate) const LONG_RANGE: u64 = if cfg!(loom) { 2 } else { 8 };

/// A chain of this many range ends means the consumer lags far behind a
/// producer of single events: it reads the cursor for the rest (see
/// [`Shared::published_from`]). Shorter chains must be walked: reading
/// the cursor whenever a few events were waiting brought back the contended
/// cursor line and the old single-event throughput.
pub(crate) const LAG_LINKS: u32 = if cfg!(loom) { 2 } else { 1024 };

/// How many bytes of slots a consumer of a stamped ring (`Stamped`, `Multi`)
/// checks for publication before it reads them: it reads every stamp, then every event,
/// so the window must still be in the nearer caches when the second pass
/// comes. Scanning up to the whole ring (1 MiB of `u64` slots) left the
/// consumer of 3p1c/batch at 310-415 M events/s on 2 vCPUs; windows of
/// 1,024 to 16,384 `u64` slots gave 520-580. So a stamped ring's
/// batches hold at most this many bytes of slots (64 KiB: 4,096 `u64`s).
pub(crate) const SCAN_BYTES: usize = 64 * 1024;
/// The fewest events such a window holds, however large the slots: a
/// consumer that does one expensive thing per batch (a `write` per batch of
/// log lines) still gets batches of at least this many.
pub(crate) const SCAN_MIN: usize = 1024;

/// The most events a consumer with dependencies takes in one batch, so
/// that it hands its progress on (to its own dependents and to the gate)
/// while its dependency runs ahead. Without a cap such a consumer takes
/// everything its dependency finished, which when threads share cores can
/// be a whole time slice of work that the next stage then waits for: on 2
/// vCPUs `pipeline3/batch` fell from about 700 to 570 M events/s and
/// `diamond/batch` from about 790 to 670; with 1,024 they ran 680-935 and
/// 920-1,020, and on 16 cores no worse than uncapped (A/B alternated).
pub(crate) const DEP_WINDOW: u64 = 1024;

/// Empty polls in a row after which a waiting consumer of a single-producer
/// ring starts prefetching the slot it waits for (see
/// [`Shared::prefetch_while_idle`]).
pub(crate) const PREFETCH_AFTER: u32 = 32;

/// What one consumer knows of how far a single-producer ring is published,
/// and how it reads further (see [`Shared::published_from`]).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Seen {
    /// A bound `published_from` returned: events below it are published,
    /// and it is where a published range ended.
    upper: u64,
    /// Read the cursor (batches), not the stamps (single events).
    by_cursor: bool,
}

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
    /// 1 while this handler lingers (see `consumer::chase`); Relaxed.
    pub(crate) lingering: AtomicU8,
}

/// One slot: the event, and for the stamped kinds (`Stamped`, `Multi`) the
/// sequence last published in it, on the same cache line so that publishing
/// one event moves one line between cores, not two.
pub(crate) struct Slot<T, S> {
    pub(crate) stamp: S,
    pub(crate) value: UnsafeCell<T>,
}

pub(crate) struct Shared<T, W, K: ProducerKind> {
    pub(crate) slots: Box<[Slot<T, K::Stamp>]>,
    /// Single producer: at the index of the first slot of each published
    /// range, the range's end (see [`published_from`](Self::published_from));
    /// empty for many producers.
    pub(crate) range_ends: Box<[AtomicU64]>,
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
    /// How long a handler of a multi-producer ring that chases its
    /// producers lets them get ahead (see `consumer::chase`).
    pub(crate) linger: std::time::Duration,
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

    /// The exclusive upper bound of events published contiguously from
    /// `next`. `seen` is the calling consumer's own (start it at
    /// `Seen::default()`); this function updates it.
    ///
    /// A single producer stores the cursor, then the range end `e` of the
    /// range `[s, e)` it published at `range_ends[s & mask]`. A consumer at
    /// `next < seen.upper` knows `[next, seen.upper)` is published without
    /// reading anything. At `next == seen.upper`, `next` is where a range
    /// ended (or 0), so the next range starts there, and the consumer reads
    /// on in one of two ways, whichever suits how the producer publishes:
    /// * **range ends** (single events): it follows the chain
    ///   `next → range_ends[next] → …`. A waiting consumer polls a line of
    ///   range ends, which the producer writes once per range and which
    ///   holds eight of them, instead of the cursor, which every publish
    ///   overwrites: measured on 2 vCPUs, 1p1c single publishes went from
    ///   about 30 to 80-200 M events/s.
    /// * **cursor** (batches): it reads the cursor, once per batch. Chasing
    ///   range ends there halved 1p1c batch throughput (the polled line of
    ///   range ends is written while the consumer reads the batch).
    ///
    /// It reads by the cursor while the range at `next` holds at least
    /// [`LONG_RANGE`] events, by range ends while it holds fewer. A chain
    /// of [`LAG_LINKS`] links means the consumer lags far behind (it is not
    /// polling, so the cursor is not contended): it then reads the cursor
    /// once rather than walk up to a capacity of range ends. Range ends
    /// left by earlier laps are at most their slot's current sequence (a
    /// range is at most a capacity long), so they read as "nothing here";
    /// later laps cannot be there yet (the gate holds the producer within a
    /// capacity of `next`).
    #[inline]
    pub(crate) fn published_from(&self, next: u64, seen: &mut Seen) -> u64 {
        let limit = next + self.capacity;
        if !K::STAMPED {
            if next < seen.upper {
                return seen.upper;
            }
            let upper = if seen.by_cursor {
                // Acquire: pairs with the Release cursor store in
                // `Producer::commit`; the slot writes happen before it.
                let c = self.cursor.load(Ordering::Acquire);
                // Only a little published since `next` (else the producer
                // still publishes long ranges, or this consumer lags:
                // either way the cursor is the read): is it short ranges?
                if c > next && c - next < 4 * LONG_RANGE {
                    // Relaxed: a hint for the next read; the cursor, not
                    // this, made the range visible.
                    let end = self.range_ends[(next & self.mask) as usize].load(Ordering::Relaxed);
                    // (A range end not stored yet reads as no news.)
                    if end > next && end - next < LONG_RANGE {
                        seen.by_cursor = false;
                    }
                }
                c
            } else {
                let mut upper = next;
                let mut links = 0u32;
                while upper < limit {
                    // Acquire: pairs with the Release range-end store in
                    // `Producer::commit`; the range's slots happen before.
                    let end = self.range_ends[(upper & self.mask) as usize].load(Ordering::Acquire);
                    if end <= upper {
                        break;
                    }
                    if upper == next && end - next >= LONG_RANGE {
                        seen.by_cursor = true;
                    }
                    upper = end;
                    links += 1;
                    if links == LAG_LINKS {
                        // A long chain: this consumer lags, so the cursor
                        // is not contended and says the rest in one load.
                        // Acquire: pairs with the Release cursor store in
                        // `Producer::commit`, which came before the range
                        // end just read, so it is at least `upper`.
                        upper = self.cursor.load(Ordering::Acquire);
                        break;
                    }
                }
                upper
            };
            seen.upper = upper;
            return upper;
        }
        // Stamped kinds: the slots' stamps alone say what is published; the
        // cursor is the producers' contended line, so stay off it.
        // The scan stops after a window of slots that stays in the nearer
        // caches until the consumer reads the events (see `SCAN_BYTES`).
        let window = (SCAN_BYTES / std::mem::size_of::<Slot<T, K::Stamp>>().max(1)).max(SCAN_MIN);
        let limit = next + self.capacity.min(window as u64);
        let mut s = next;
        while s < limit && self.published_at(s) {
            s += 1;
        }
        s
    }

    /// Stamped kinds only: whether event `seq` is published, by its slot's
    /// stamp (read by `published_from`, a lingering consumer's probe, and
    /// `Monitor::stats`).
    #[inline(always)]
    pub(crate) fn published_at(&self, seq: u64) -> bool {
        // Acquire inside: pairs with the Release in `K::mark_published`
        // (`Shared::mark_published`), making the slot visible.
        K::is_published(&self.slots[(seq & self.mask) as usize].stamp, seq)
    }

    /// Stamped kinds: marks `[start, start + n)` published, slot by slot,
    /// after the producer wrote them (a commit of either stamped kind).
    #[inline(always)]
    pub(crate) fn mark_published(&self, start: u64, n: u64) {
        for s in start..start + n {
            // Release inside: pairs with the Acquire in `K::is_published`
            // (`published_at`); the slot write happens before it.
            K::mark_published(&self.slots[(s & self.mask) as usize].stamp, s);
        }
    }

    /// A consumer of a single-producer ring that has polled `polls` times
    /// in a row for event `seq` without seeing it: past [`PREFETCH_AFTER`]
    /// polls, asks the CPU to bring the cache line of slot `seq` to this
    /// core (a hint, no access), on every poll. The poll that sees `seq`
    /// published then has the slot's line on its way together with the
    /// line that told it, instead of fetching the two one after the other:
    /// on 2 vCPUs in their slow cross-core state that was one transfer
    /// (40-70 ns) of a one-hop hand-over. Only after a while: a consumer
    /// right behind its producer that prefetched on every poll pulled the
    /// line the producer was still filling and halved 1p1c single-event
    /// throughput. Stamped kinds: the consumer polls the slot's own stamp,
    /// which brings its line already. (Reading the slot itself would race
    /// with its producer.)
    #[inline(always)]
    pub(crate) fn prefetch_while_idle(&self, seq: u64, polls: u32) {
        if !K::STAMPED && polls > PREFETCH_AFTER {
            self.prefetch_slot(seq);
        }
    }

    #[inline(always)]
    fn prefetch_slot(&self, seq: u64) {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let p = self.slot(seq).with(|p| p.cast::<i8>());
            // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 target
            // has. A prefetch never faults, and it is not a memory access
            // of the program: it reads nothing the program sees and cannot
            // race with the producer writing the slot.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p) };
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        let _ = seq;
    }

    /// The exclusive upper bound of events consumer `idx` may handle now;
    /// `seen` as in [`published_from`](Self::published_from).
    ///
    /// A consumer with dependencies reads only their sequences (and takes
    /// at most [`DEP_WINDOW`] events at a time), not the producers' cursor
    /// or stamps: a dependency never passes what is published, so the
    /// smallest of their sequences already bounds both, and the cursor's
    /// line, which every publish writes, stays off the dependent's path
    /// (the `disruptor` crate's barriers do the same). Only when every
    /// dependency has detached (a dropped poller) does the dependent read
    /// publication itself again.
    #[inline(always)]
    pub(crate) fn available_for(&self, idx: usize, next: u64, seen: &mut Seen) -> u64 {
        let deps = &self.consumers[idx].deps;
        if deps.is_empty() {
            return self.published_from(next, seen);
        }
        let mut upper = u64::MAX;
        for &d in deps.iter() {
            // Acquire: pairs with the dependency's Release store of its
            // sequence, so its access to the slots happens before ours, and
            // so do the producers' writes of the slots it saw published
            // (happens-before is transitive).
            upper = upper.min(self.consumers[d].seq.load(Ordering::Acquire));
        }
        if upper < DETACHED {
            return upper.min(next + DEP_WINDOW);
        }
        self.published_without_deps(next, seen)
    }

    /// `available_for` once every dependency has detached (kept out of line,
    /// so that the hot path stays small enough to inline).
    #[cold]
    #[inline(never)]
    fn published_without_deps(&self, next: u64, seen: &mut Seen) -> u64 {
        // `next` may sit inside a published range, where a chain of range
        // ends cannot start: read the cursor.
        if next != seen.upper {
            seen.by_cursor = true;
        }
        self.published_from(next, seen)
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
