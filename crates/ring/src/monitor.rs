//! Progress of a ring, readable from any thread without touching the hot
//! path: only loads of the cursor and the consumer sequences.

use crate::producer::ProducerKind;
use crate::shared::{Shared, CLOSED, DETACHED, HALTED};
use crate::sync::{Arc, Ordering};
use crate::wait::WaitStrategy;

/// A snapshot of one consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerStats {
    /// The name given to the builder.
    pub name: String,
    /// Events handled (for a dropped poller: where it stopped).
    pub handled: u64,
    /// Events published but not yet handled.
    pub lag: u64,
    /// A dropped poller: it no longer gates anyone.
    pub detached: bool,
    /// A handler of a multi-producer ring that lets its producers get ahead
    /// before it reads on, because that measured faster (see
    /// [`RingBuilder::linger`](crate::RingBuilder::linger)).
    pub lingering: bool,
}

/// A snapshot of a ring's progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingStats {
    /// Slots in the ring.
    pub capacity: u64,
    /// Events published so far (contiguously, for a multi-producer ring).
    pub published: u64,
    /// Slots holding events some consumer has not handled yet.
    pub fill: u64,
    /// Every producer handle is gone.
    pub closed: bool,
    /// The ring was halted.
    pub halted: bool,
    /// Per consumer, in the order they were declared.
    pub consumers: Vec<ConsumerStats>,
}

/// A cloneable view of a ring's progress.
pub struct Monitor<T, W: WaitStrategy, K: ProducerKind> {
    shared: Arc<Shared<T, W, K>>,
}

impl<T, W: WaitStrategy, K: ProducerKind> Clone for Monitor<T, W, K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> std::fmt::Debug for Monitor<T, W, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor").finish_non_exhaustive()
    }
}

impl<T, W: WaitStrategy, K: ProducerKind> Monitor<T, W, K> {
    pub(crate) fn new(shared: Arc<Shared<T, W, K>>) -> Self {
        Self { shared }
    }

    /// Reads the cursor and every consumer sequence once.
    ///
    /// The values are read one after the other while the ring runs, so they
    /// are each exact but not a single instant: lag may be off by the events
    /// published in between.
    pub fn stats(&self) -> RingStats {
        let shared = &*self.shared;
        let handled: Vec<u64> = shared
            .consumers
            .iter()
            // Relaxed: a statistic; nothing is read through it.
            .map(|c| c.seq.load(Ordering::Relaxed))
            .collect();
        // The slowest attached consumer; if none is attached, where the last
        // ones stopped (they still gate, see `Shared::gate`).
        let min = handled.iter().copied().min().unwrap_or(0);
        let min = if min >= DETACHED {
            min & !DETACHED
        } else {
            min
        };
        // Relaxed: a statistic.
        let claimed = shared.cursor.load(Ordering::Relaxed);
        let published = if K::MULTI {
            let mut s = min;
            while s < claimed && shared.published_at(s) {
                s += 1;
            }
            s
        } else {
            claimed
        };
        let state = shared.state.load(Ordering::Relaxed);
        RingStats {
            capacity: shared.capacity,
            published,
            fill: published.saturating_sub(min),
            closed: state & CLOSED != 0,
            halted: state & HALTED != 0,
            consumers: shared
                .consumers
                .iter()
                .zip(handled)
                .map(|(c, h)| ConsumerStats {
                    name: c.name.clone(),
                    handled: h & !DETACHED,
                    lag: published.saturating_sub(h & !DETACHED),
                    detached: h & DETACHED != 0,
                    // Relaxed: a figure; it orders nothing.
                    lingering: c.lingering.load(Ordering::Relaxed) != 0,
                })
                .collect(),
        }
    }
}
