//! The user's ends of a deployment: [`Input`] and [`Output`].

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Receiver;
use statepipe_ring::wait::Adaptive;
use statepipe_ring::{PublishError, TryPublishError};

use super::barrier::{is_barrier, Coordinator, BARRIER};
use super::edge::UnitStates;
use super::edge::{DepthProbe, Doorbell, EdgePoller, EdgeProducer, Msg, Sink, Source, SourceEnd};
use crate::failure::Failure;

/// Where items enter a deployed pipeline. Dropping it (or
/// [`close`](Self::close)) closes the pipeline's input: every item sent
/// goes through every stage, then the workers finish.
pub struct Input<I> {
    producer: EdgeProducer<I, Adaptive>,
    first: Arc<Doorbell>,
    next_seq: u64,
    /// `next_seq` for the barriers (where a checkpoint's barrier goes).
    accepted: Arc<AtomicU64>,
}

/// [`Input::send`] failed: the pipeline stopped (a stage panicked, or it was
/// stopped); the item comes back.
pub struct SendError<I>(pub I);

/// [`Input::try_send`] failed; the item comes back.
pub enum TrySendError<I> {
    /// The input ring is full: the pipeline is behind. Retry later, or
    /// `send` to wait.
    Full(I),
    /// The pipeline stopped.
    Stopped(I),
}

impl<I> fmt::Debug for SendError<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError(..)")
    }
}

impl<I> fmt::Display for SendError<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the pipeline stopped; join it to see why")
    }
}

impl<I> std::error::Error for SendError<I> {}

impl<I> fmt::Debug for TrySendError<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Stopped(_) => f.write_str("Stopped(..)"),
        }
    }
}

impl<I> TrySendError<I> {
    /// The item that was not sent.
    pub fn into_inner(self) -> I {
        match self {
            TrySendError::Full(x) | TrySendError::Stopped(x) => x,
        }
    }
}

/// The most items [`Input::send_all`] publishes at once.
pub const SEND_BATCH: usize = 256;

fn fill<I>(m: &mut Msg<I>, seq: u64, item: &mut Option<I>) {
    m.seq = seq;
    *m.item.get_mut() = item.take();
    m.last = true;
}

impl<I: Send + 'static> Input<I> {
    pub(crate) fn new(
        producer: EdgeProducer<I, Adaptive>,
        first: Arc<Doorbell>,
        accepted: Arc<AtomicU64>,
    ) -> Self {
        Input {
            producer,
            first,
            next_seq: accepted.load(Ordering::Relaxed),
            accepted,
        }
    }

    /// Records what was accepted (after it was published).
    #[inline]
    fn accept(&mut self, n: u64) {
        self.next_seq += n;
        // Relaxed: see `Coordinator::send`, the one reader.
        self.accepted.store(self.next_seq, Ordering::Relaxed);
    }

    /// Sends one item, waiting (by the ring's adaptive strategy) while the
    /// pipeline is full; returns the item's sequence number.
    ///
    /// # Errors
    /// [`SendError`] with the item if the pipeline stopped.
    pub fn send(&mut self, item: I) -> Result<u64, SendError<I>> {
        let seq = self.next_seq;
        let mut item = Some(item);
        match self.producer.publish_with(|m| fill(m, seq, &mut item)) {
            Ok(_) => {
                self.accept(1);
                self.first.ring();
                Ok(seq)
            }
            Err(PublishError::Halted(_)) => Err(SendError(
                item.expect("a refused publish did not run the fill"),
            )),
        }
    }

    /// Sends one item if there is room now; never waits.
    ///
    /// # Errors
    /// [`TrySendError::Full`] or [`TrySendError::Stopped`], with the item.
    pub fn try_send(&mut self, item: I) -> Result<u64, TrySendError<I>> {
        let seq = self.next_seq;
        let mut item = Some(item);
        let r = self
            .producer
            .try_publish_with(|m| fill(m, seq, &mut item))
            .map_err(|e| matches!(e, TryPublishError::Full(_)));
        match r {
            Ok(_) => {
                self.accept(1);
                self.first.ring();
                Ok(seq)
            }
            Err(full) => {
                let x = item.expect("a refused publish did not run the fill");
                Err(if full {
                    TrySendError::Full(x)
                } else {
                    TrySendError::Stopped(x)
                })
            }
        }
    }

    /// Sends every item of `items`, in batches (one claim, one publish and
    /// one wake-up per batch of up to [`SEND_BATCH`] items), waiting while
    /// the pipeline is full; returns how many were sent.
    ///
    /// # Errors
    /// [`SendError`] with the first item not sent if the pipeline stopped
    /// (the rest of `items` is dropped).
    pub fn send_all(&mut self, items: impl IntoIterator<Item = I>) -> Result<u64, SendError<I>> {
        let mut items = items.into_iter();
        let cap = (self.producer.capacity() as usize).min(SEND_BATCH);
        let mut chunk: Vec<I> = Vec::with_capacity(cap);
        let mut sent = 0;
        loop {
            chunk.extend(items.by_ref().take(cap));
            if chunk.is_empty() {
                return Ok(sent);
            }
            let n = chunk.len();
            let base = self.next_seq;
            let mut drain = chunk.drain(..);
            let r = self.producer.publish_batch(n, |i, m| {
                m.seq = base + i as u64;
                *m.item.get_mut() = drain.next();
                m.last = true;
            });
            let halted = r.is_err();
            let rest: Vec<I> = drain.collect();
            if halted {
                let first = rest.into_iter().next();
                return Err(SendError(first.expect("a refused batch keeps its items")));
            }
            self.accept(n as u64);
            sent += n as u64;
            self.first.ring();
        }
    }

    /// Sends one item numbered `seq`, waiting while the pipeline is full.
    /// Numbers never go back but may skip or repeat: a distributed
    /// pipeline's part numbers its inputs by the input they came from, and
    /// the outputs of one input share its number.
    pub(crate) fn send_at(&mut self, seq: u64, item: I) -> Result<(), SendError<I>> {
        debug_assert!(seq + 1 >= self.next_seq, "input numbers never go back");
        let mut item = Some(item);
        match self.producer.publish_with(|m| fill(m, seq, &mut item)) {
            Ok(_) => {
                self.next_seq = seq;
                self.accept(1);
                self.first.ring();
                Ok(())
            }
            Err(PublishError::Halted(_)) => Err(SendError(
                item.expect("a refused publish did not run the fill"),
            )),
        }
    }

    /// How many items were sent.
    pub fn sent(&self) -> u64 {
        self.next_seq
    }

    /// Closes the input: the same as dropping it.
    pub fn close(self) {}
}

impl<I> Drop for Input<I> {
    fn drop(&mut self) {
        // The producer closes the ring as it drops, right after this.
        self.first.ring();
    }
}

/// Where outputs and failures leave a deployed pipeline.
///
/// Outputs come in the sequential interpreter's order. Read them: the
/// output ring is bounded like every other, so a pipeline whose outputs are
/// never read stops when it fills. Failures go to an unbounded channel
/// (they are rare, and blocking a stage on an unread error channel would
/// turn an error into a hang); read them with [`failures`](Self::failures).
pub struct Output<O> {
    poller: EdgePoller<O, Adaptive>,
    last: Arc<Doorbell>,
    failures: Receiver<Failure>,
    /// Outputs, and with `events` on, the ends of groups with no output
    /// after them and barriers.
    buffer: VecDeque<(u64, Got<O>)>,
    ended: bool,
    events: bool,
}

/// One message of the output ring, as the buffer keeps it.
enum Got<O> {
    /// An output; `true` if it is the last of its input's.
    Item(O, bool),
    /// The end of an input's outputs, with no output (or after them).
    Close,
    /// A barrier.
    Barrier,
}

/// What [`Output::recv_event`] hands out.
pub(crate) enum Event<O> {
    /// An output, its input's number, and whether it is that input's last.
    Item(u64, O, bool),
    /// The outputs of input `seq` end here (none came, or the last one
    /// did not say so).
    Close(u64),
    /// A barrier passed the end of the pipeline: every output before it
    /// came first.
    Barrier(u64),
}

impl<O: Send + 'static> Output<O> {
    pub(crate) fn new(
        poller: EdgePoller<O, Adaptive>,
        last: Arc<Doorbell>,
        failures: Receiver<Failure>,
    ) -> Self {
        Output {
            poller,
            last,
            failures,
            buffer: VecDeque::new(),
            ended: false,
            events: false,
        }
    }

    /// Hands out the ends of inputs' outputs and barriers too, through
    /// [`recv_event`](Self::recv_event).
    pub(crate) fn with_events(mut self) -> Self {
        self.events = true;
        self
    }

    fn fill(&mut self, wait: Option<Duration>) {
        let buffer = &mut self.buffer;
        let events = self.events;
        let take = |m: &mut Msg<O>, _: u64, _: bool| match m.item.get_mut().take() {
            Some(x) => buffer.push_back((m.seq, Got::Item(x, m.last))),
            None if !events => {}
            None if is_barrier(m.seq) => buffer.push_back((m.seq & !BARRIER, Got::Barrier)),
            None if m.last => buffer.push_back((m.seq, Got::Close)),
            None => {}
        };
        let r = match wait {
            Some(t) => self.poller.poll_timeout(t, take),
            None => self.poller.poll(take),
        };
        match r {
            Ok(0) => {}
            Ok(_) => self.last.ring(),
            Err(_) => self.ended = true,
        }
    }

    /// The next output and the sequence number of the input it came from;
    /// waits for it. `None` once the pipeline has finished (input closed
    /// and drained) or stopped.
    pub fn recv(&mut self) -> Option<(u64, O)> {
        loop {
            while let Some((seq, x)) = self.buffer.pop_front() {
                if let Got::Item(x, _) = x {
                    return Some((seq, x));
                }
            }
            if self.ended {
                return None;
            }
            self.fill(Some(Duration::from_millis(50)));
        }
    }

    /// The next output if one is ready now.
    pub fn try_recv(&mut self) -> Option<(u64, O)> {
        loop {
            if self.buffer.is_empty() && !self.ended {
                self.fill(None);
            }
            match self.buffer.pop_front()? {
                (seq, Got::Item(x, _)) => return Some((seq, x)),
                _ => continue,
            }
        }
    }

    /// The next output or barrier, waiting up to `wait` for one; `Ok(None)`
    /// if none came, `Err(())` once the pipeline has finished and
    /// everything was read.
    pub(crate) fn recv_event(&mut self, wait: Option<Duration>) -> Result<Option<Event<O>>, ()> {
        if self.buffer.is_empty() && !self.ended {
            self.fill(wait);
        }
        match self.buffer.pop_front() {
            Some((seq, Got::Item(x, last))) => Ok(Some(Event::Item(seq, x, last))),
            Some((seq, Got::Close)) => Ok(Some(Event::Close(seq))),
            Some((id, Got::Barrier)) => Ok(Some(Event::Barrier(id))),
            None if self.ended => Err(()),
            None => Ok(None),
        }
    }

    /// Whether the pipeline has finished and every output was read.
    pub fn is_finished(&self) -> bool {
        self.ended && self.buffer.is_empty()
    }

    /// The failures reported so far (each once).
    pub fn failures(&self) -> impl Iterator<Item = Failure> + '_ {
        self.failures.try_iter()
    }
}

/// The outputs in order, each with its input's sequence number: `next`
/// is [`recv`](Output::recv), so iteration waits for each output and ends
/// when the pipeline has finished. Iterate `output.by_ref()` to keep the
/// handle for its failures.
impl<O: Send + 'static> Iterator for Output<O> {
    type Item = (u64, O);

    fn next(&mut self) -> Option<(u64, O)> {
        self.recv()
    }
}

/// A source that runs an iterator on the first worker: no hand-off at all
/// between where items are made and the first stages.
pub(crate) struct IterSource<It> {
    pub(crate) items: It,
    pub(crate) next_seq: u64,
    pub(crate) done: bool,
}

/// Items one poll of an [`IterSource`] takes from its iterator at most.
const ITER_BATCH: usize = 256;

impl<I: Send + 'static, It: Iterator<Item = I> + Send> IterSource<It> {
    fn take(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(u64, Option<I>, bool),
    ) -> Result<usize, SourceEnd> {
        if self.done {
            return Err(SourceEnd::Closed);
        }
        let mut n = 0;
        while n < max {
            match self.items.next() {
                Some(x) => {
                    f(self.next_seq, Some(x), true);
                    self.next_seq += 1;
                    n += 1;
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        if n == 0 && self.done {
            Err(SourceEnd::Closed)
        } else {
            Ok(n)
        }
    }
}

impl<I: Send + 'static, It: Iterator<Item = I> + Send> Source<I> for IterSource<It> {
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<I>, bool)) -> Result<usize, SourceEnd> {
        self.take(ITER_BATCH, f)
    }

    fn ready(&self) -> bool {
        true
    }

    fn depth_probe(&self) -> DepthProbe {
        Box::new(|| 0)
    }

    fn capacity(&self) -> u64 {
        0
    }
}

/// A sink that hands each output to a closure on the last worker.
pub(crate) struct FnSink<F>(pub(crate) F);

impl<O: Send + 'static, F: FnMut(u64, O) + Send> Sink<O> for FnSink<F> {
    #[inline]
    fn item(&mut self, seq: u64, item: O, _: &mut Vec<Failure>) {
        (self.0)(seq, item);
    }

    fn end(&mut self, _: u64, _: &mut Vec<Failure>) {}

    fn flush(&mut self) -> bool {
        true
    }

    fn can_flush(&self) -> bool {
        false
    }

    fn publish_stats(&mut self) {}

    fn barrier(&mut self, _: u64, _: &Coordinator) {}

    fn close(self: Box<Self>, _: &mut UnitStates) {}
}
