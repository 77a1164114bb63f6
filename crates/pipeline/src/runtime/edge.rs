//! Edges between stations: what travels on a ring, and the two ends of one
//! (the reading end, [`RingSource`], is here; the producing end is
//! `ring_sink.rs`).
//!
//! Every edge is a single-producer `statepipe-ring` ring of [`Msg`]s read by
//! one mutable poller, which moves each item out of its slot. A message is
//! one output of the station upstream, tagged with the sequence number of
//! the pipeline input it came from; `last` closes a *group* (everything one
//! unit of input produced), so joins downstream know when a group is
//! complete. A group with no output is a message with no item. A 1→1 stage
//! therefore costs one slot per item: the sink holds each output back until
//! it knows whether it is the group's last.
//!
//! Neither end ever blocks on the ring: a full ring sends outputs to a small
//! overflow (at most one input batch's worth), and the station takes no new
//! input until it has drained; an empty ring makes the station report idle.
//! Workers sleep on their [`Doorbell`], which each end rings after it moved
//! the edge forward, so a worker never sleeps while the other end waits on
//! it (and a missed ring costs at most the park timeout, never a hang).

use std::marker::PhantomData;
use std::sync::Arc;

use statepipe_ring::wait::{BusySpin, WaitStrategy};
use statepipe_ring::{EventPollerMut, Monitor, PollError, Producer, Ring, RingBuilder, Single};
use sync_wrapper::SyncWrapper;

use super::barrier::Coordinator;
pub(crate) use super::doorbell::Doorbell;
use crate::failure::{Failure, StageState};

/// Final stage states by unit number, as a worker hands them back.
pub(crate) type UnitStates = Vec<(usize, Vec<StageState>)>;

/// One message on an edge.
pub(crate) struct Msg<T> {
    /// The pipeline input this output came from.
    pub(crate) seq: u64,
    /// The output; `None` in a message that only closes a group.
    pub(crate) item: SyncWrapper<Option<T>>,
    /// Whether this message closes its group.
    pub(crate) last: bool,
}

impl<T> Msg<T> {
    pub(crate) fn empty() -> Self {
        Msg {
            seq: 0,
            item: SyncWrapper::new(None),
            last: false,
        }
    }
}

/// Where a station's outputs go: the next fused unit, a ring, a router.
pub(crate) trait Sink<T>: Send {
    /// One output of the group `seq`.
    fn item(&mut self, seq: u64, item: T, failures: &mut Vec<Failure>);
    /// The group `seq` is complete here.
    fn end(&mut self, seq: u64, failures: &mut Vec<Failure>);
    /// The last output of the group `seq`: `item`, then `end`, in one call
    /// (a fused chain of one-output stages makes one call per unit per
    /// item instead of two).
    #[inline]
    fn item_end(&mut self, seq: u64, item: T, failures: &mut Vec<Failure>) {
        self.item(seq, item, failures);
        self.end(seq, failures);
    }
    /// Moves held-back messages into the ring(s); `true` when none is left.
    fn flush(&mut self) -> bool;
    /// Whether `flush` would make progress now (for the sleep check).
    fn can_flush(&self) -> bool;
    /// Publishes per-unit counters to the monitor (once per batch).
    fn publish_stats(&mut self);
    /// A barrier (its `seq` marked, see [`barrier`](super::barrier))
    /// between two groups: act on it, then pass it on in order.
    fn barrier(&mut self, seq: u64, co: &Coordinator);
    /// No more input will come: close the ring(s) and hand back the states
    /// of the fused units, in description order.
    fn close(self: Box<Self>, states: &mut UnitStates);
}

/// Why a source has nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SourceEnd {
    /// Every producer closed and everything was read.
    Closed,
    /// The ring was halted (a failure elsewhere).
    Halted,
}

impl From<PollError> for SourceEnd {
    fn from(e: PollError) -> Self {
        match e {
            PollError::Closed => SourceEnd::Closed,
            _ => SourceEnd::Halted,
        }
    }
}

/// Where a station's input comes from: a ring, or a merge of several.
pub(crate) trait Source<T>: Send {
    /// Hands what is available (at most a batch) to `f(seq, item, last)`;
    /// `Ok(0)` when nothing is.
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<T>, bool)) -> Result<usize, SourceEnd>;
    /// Whether `poll` would make progress or report the end now.
    fn ready(&self) -> bool;
    /// Reads how many messages wait in the input ring(s), from any thread.
    fn depth_probe(&self) -> DepthProbe;
    /// The slots of the input ring(s) that [`depth_probe`](Self::depth_probe)
    /// counts in (0 for a source with no ring): what the depth fills.
    fn capacity(&self) -> u64;
    /// Takes in what waits without handing it on, while the station is
    /// blocked on output. A cycle's feedback edge must keep moving even
    /// then, or its two ends wait on each other; other sources take
    /// nothing (their producers have somewhere else to make progress).
    fn absorb(&mut self) -> Result<usize, SourceEnd> {
        Ok(0)
    }
    /// Whether [`absorb`](Self::absorb) would take something now.
    fn can_absorb(&self) -> bool {
        false
    }
}

/// Reads a queue depth from any thread.
pub(crate) type DepthProbe = Box<dyn Fn() -> u64 + Send + Sync>;

/// A probe of the messages waiting for the consumer of a ring.
pub(crate) fn probe<T: Send + 'static, W: WaitStrategy>(
    monitor: &Monitor<Msg<T>, W, Single>,
) -> DepthProbe {
    let m = monitor.clone();
    Box::new(move || m.stats().consumers.first().map_or(0, |c| c.lag))
}

/// The ring type of an edge between two workers, and of the pipeline's
/// input and output, with the wait strategy `W` of the user's side.
pub(crate) type EdgeProducer<T, W> = Producer<Msg<T>, W, Single>;
pub(crate) type EdgePoller<T, W> = EventPollerMut<Msg<T>, W, Single>;

/// A ring's handle, kept by the deployment to halt the ring on a failure.
/// Dropping it halts the ring too (so a deployment dropped without `join`
/// stops its workers).
pub(crate) trait Halt: Send {
    fn halt(&self);
}

impl<T: Send + 'static, W: WaitStrategy> Halt for Ring<Msg<T>, W, Single> {
    fn halt(&self) {
        Ring::halt(self);
    }
}

/// The parts of a new edge.
pub(crate) struct Edge<T, W: WaitStrategy> {
    pub(crate) producer: EdgeProducer<T, W>,
    pub(crate) poller: EdgePoller<T, W>,
    pub(crate) monitor: Monitor<Msg<T>, W, Single>,
    pub(crate) handle: Box<dyn Halt>,
}

/// The most messages a station takes from an edge in one poll: an eighth
/// of the ring, but at least 32 (or the whole ring, if smaller), so small
/// rings still spread the per-batch work over many items. The poller gives its slots back only when its batch is
/// done, so a station that took the whole ring would leave its producer
/// blocked until it finished, then itself idle while the producer refilled:
/// the two workers would take turns instead of overlapping.
pub(crate) fn max_batch(capacity: usize) -> usize {
    (capacity / 8).max(32).min(capacity)
}

/// The name of an edge's one poller.
pub(crate) const EDGE_POLLER: &str = "edge";

/// A new edge of `capacity` slots.
pub(crate) fn edge<T: Send + 'static, W: WaitStrategy>(capacity: usize, wait: W) -> Edge<T, W> {
    let (producer, mut ring) = RingBuilder::new(capacity, Msg::empty)
        .wait_strategy(wait)
        .max_batch(max_batch(capacity))
        .poller_mut(EDGE_POLLER)
        .build_single();
    let poller = ring
        .take_poller_mut(EDGE_POLLER)
        .expect("the edge's poller was declared just above");
    Edge {
        producer,
        poller,
        monitor: ring.monitor(),
        handle: Box::new(ring),
    }
}

/// A worker-to-worker edge: the spinning strategy's `notify` is free, and
/// workers never wait inside the ring (they sleep on doorbells).
pub(crate) fn inner_edge<T: Send + 'static>(capacity: usize) -> Edge<T, BusySpin> {
    edge(capacity, BusySpin)
}

/// One message as a reader gets it: (seq, item, last).
pub(crate) type Message<X> = (u64, Option<X>, bool);

/// How a reader takes its input out of a slot (`Option<T>`): moved out
/// (every edge's one reader), or, for the branches of a fork or a choice,
/// cloned out, one half, one side. A type, not a value, so the call is
/// inlined into the poll loop.
pub(crate) trait Take<T>: Send + 'static {
    /// What the reader gets.
    type Out: Send + 'static;
    fn take(slot: &mut Option<T>) -> Option<Self::Out>;
}

/// Moves the item out of its slot.
pub(crate) struct Move;

impl<T: Send + 'static> Take<T> for Move {
    type Out = T;

    #[inline(always)]
    fn take(slot: &mut Option<T>) -> Option<T> {
        slot.take()
    }
}

/// The consuming end of an edge: a poller that takes each item out of its
/// slot as `K` says.
pub(crate) struct RingSource<T, W: WaitStrategy, K = Move> {
    poller: EdgePoller<T, W>,
    monitor: Monitor<Msg<T>, W, Single>,
    /// The poller's name in the ring, for its depth.
    name: String,
    /// The producing worker's doorbell (it may wait for space), or for a
    /// fork's branch the next reader's.
    wake: Arc<Doorbell>,
    _take: PhantomData<fn() -> K>,
}

impl<T: Send + 'static, W: WaitStrategy> RingSource<T, W> {
    /// The one reader of an edge.
    pub(crate) fn new(
        poller: EdgePoller<T, W>,
        monitor: Monitor<Msg<T>, W, Single>,
        wake: Arc<Doorbell>,
    ) -> Self {
        RingSource::reading(poller, monitor, EDGE_POLLER, wake)
    }
}

impl<T: Send + 'static, W: WaitStrategy, K: Take<T>> RingSource<T, W, K> {
    /// The reader `name` of a ring.
    pub(crate) fn reading(
        poller: EdgePoller<T, W>,
        monitor: Monitor<Msg<T>, W, Single>,
        name: &str,
        wake: Arc<Doorbell>,
    ) -> Self {
        RingSource {
            poller,
            monitor,
            name: name.to_string(),
            wake,
            _take: PhantomData,
        }
    }

    /// Takes the next message, if there is one.
    pub(crate) fn take_one(&mut self) -> Result<Option<Message<K::Out>>, SourceEnd> {
        let mut msg = None;
        self.poll_while(&mut |seq, item, last| {
            msg = Some((seq, item, last));
            false
        })?;
        Ok(msg)
    }

    /// Takes the barrier that must come next on this edge (at a merge or
    /// join aligning one): `Ok(false)` if nothing waits yet. Anything else
    /// first would break the barrier protocol, so it halts.
    pub(crate) fn take_barrier(&mut self) -> Result<bool, SourceEnd> {
        match self.take_one()? {
            None => Ok(false),
            Some((seq, None, false)) if super::barrier::is_barrier(seq) => Ok(true),
            Some(_) => {
                debug_assert!(false, "an item where a barrier was due");
                Err(SourceEnd::Halted)
            }
        }
    }

    /// Takes messages while `f` returns `true` (the one it returns `false`
    /// on is taken too).
    pub(crate) fn poll_while(
        &mut self,
        f: &mut dyn FnMut(u64, Option<K::Out>, bool) -> bool,
    ) -> Result<usize, SourceEnd> {
        let n = self
            .poller
            .poll_while(|m, _| f(m.seq, K::take(m.item.get_mut()), m.last))?;
        if n > 0 {
            self.wake.ring();
        }
        Ok(n)
    }
}

impl<T: Send + 'static, W: WaitStrategy, K: Take<T>> Source<K::Out> for RingSource<T, W, K> {
    #[inline]
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<K::Out>, bool)) -> Result<usize, SourceEnd> {
        let n = self
            .poller
            .poll(|m, _, _| f(m.seq, K::take(m.item.get_mut()), m.last))?;
        if n > 0 {
            self.wake.ring();
        }
        Ok(n)
    }

    fn ready(&self) -> bool {
        self.poller.ready()
    }

    fn capacity(&self) -> u64 {
        self.monitor.stats().capacity
    }

    fn depth_probe(&self) -> DepthProbe {
        let (m, name) = (self.monitor.clone(), self.name.clone());
        Box::new(move || {
            m.stats()
                .consumers
                .iter()
                .find(|c| c.name == name)
                .map_or(0, |c| c.lag)
        })
    }
}
