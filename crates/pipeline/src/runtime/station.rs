//! Stations: a source, the units fused behind it, and where their outputs
//! go; the piece of work a worker runs.
//!
//! Units on one station call each other directly ([`UnitSink`] holds the
//! next unit's sink) with no atomic hand-off. A stage's machine is called
//! straight from its sink (a [`Piece`]), so a fused stage costs one virtual
//! call per item, into the next unit's sink; a construct run whole costs
//! one more, through its `push`. A group's last output travels with its
//! end (`Sink::item_end`): each unit holds its latest output back until
//! the next one comes or the group ends, so a chain of one-output stages
//! makes one call per unit per item, not an item call and an end call. A station takes one batch of input per
//! [`Task::run`], and no batch while its outputs are held back by a full
//! ring, so what it holds is bounded by one batch.

use std::any::Any;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crossbeam_channel::Sender;

use super::barrier::{is_barrier, Coordinator};
use super::edge::{Sink, Source, SourceEnd, UnitStates};
use crate::failure::{Failure, StageState};
use crate::node::common::Node;
use crate::state::Visit;

/// What one [`Task::run`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Took input or moved held-back output.
    Progress,
    /// No input available.
    Idle,
    /// Output held back by a full ring.
    Blocked,
    /// Input closed and everything delivered: call [`Task::finish`].
    Done,
    /// An input ring was halted: the deployment is stopping.
    Halted,
}

/// A unit of work on a worker (a station).
pub(crate) trait Task: Send {
    fn run(&mut self) -> Step;
    /// Whether `run` would make progress now (checked before sleeping).
    fn ready(&mut self) -> bool;
    /// Time spent in `run`, by outcome.
    fn account(&self, step: Step, ns: u64);
    /// Closes the outputs; appends the final states of the fused units.
    fn finish(self: Box<Self>, states: &mut UnitStates);
}

/// Live counters of one unit, read by `metrics()` from any thread. Written
/// with plain stores by the one worker that owns the unit, once per batch.
#[derive(Debug, Default)]
pub(crate) struct UnitCounters {
    pub(crate) items_in: AtomicU64,
    pub(crate) items_out: AtomicU64,
}

/// Live counters of one station.
#[derive(Debug, Default)]
pub(crate) struct StationCounters {
    pub(crate) busy_ns: AtomicU64,
    pub(crate) blocked_ns: AtomicU64,
    pub(crate) idle_ns: AtomicU64,
    /// 0 running, 1 done.
    pub(crate) done: AtomicU8,
}

impl StationCounters {
    fn add(&self, which: &AtomicU64, ns: u64) {
        // One writer (the worker): a load and a store, no read-modify-write.
        which.store(which.load(Ordering::Relaxed) + ns, Ordering::Relaxed);
    }
}

/// A panic with a name attached where it was caught (a cycle's `step`),
/// carried through the unwinding to the worker.
#[derive(Debug)]
pub(crate) struct StagePanic {
    pub(crate) stage: String,
    pub(crate) message: String,
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

/// What [`running_unit`] says outside every unit: the station's own code
/// (sources, routers, merges) is running.
pub(crate) const NO_UNIT: usize = usize::MAX;

thread_local! {
    /// The unit whose code runs now on this thread: set around every call
    /// into a unit and restored after it.
    static RUNNING: Cell<usize> = const { Cell::new(NO_UNIT) };
}

/// Runs `f` as unit `unit`: a panic in it is named after that unit (the
/// restore is skipped by the unwinding, see [`UnitSink`]).
#[inline]
pub(crate) fn as_unit<R>(unit: usize, f: impl FnOnce() -> R) -> R {
    let prev = RUNNING.replace(unit);
    let r = f();
    RUNNING.set(prev);
    r
}

/// The unit that was running when a panic unwound to the worker.
pub(crate) fn running_unit() -> usize {
    RUNNING.get()
}

/// What a fused unit runs per item: a whole part through its `push` (one
/// indirect call), or a stage's machine, called directly.
pub(crate) trait Piece<A, B>: Send + 'static {
    /// Runs `item` of group `seq`; outputs go to `emit`.
    fn run<E: FnMut(B, &mut Vec<Failure>)>(
        &mut self,
        seq: u64,
        item: A,
        failures: &mut Vec<Failure>,
        emit: &mut E,
    );
    /// Appends the final states of its stages.
    fn states(self, out: &mut Vec<StageState>);
    /// Calls `f` on each of its stages (checkpoints and upgrades).
    fn visit(&mut self, f: Visit<'_>);
}

impl<A: Send + 'static, B: Send + 'static> Piece<A, B> for Box<dyn Node<A, B>> {
    #[inline]
    fn run<E: FnMut(B, &mut Vec<Failure>)>(
        &mut self,
        seq: u64,
        item: A,
        failures: &mut Vec<Failure>,
        emit: &mut E,
    ) {
        self.push(seq, item, failures, emit);
    }

    fn states(self, out: &mut Vec<StageState>) {
        Node::states(self, out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        Node::visit(&mut **self, f);
    }
}

/// One unit (a stage, or a construct run whole) fused in front of `next`.
pub(crate) struct UnitSink<B, P> {
    pub(crate) unit: usize,
    pub(crate) piece: P,
    pub(crate) next: Box<dyn Sink<B>>,
    pub(crate) counters: Arc<UnitCounters>,
    pub(crate) items_in: u64,
    pub(crate) items_out: u64,
}

impl<B, P> UnitSink<B, P> {
    pub(crate) fn new(
        unit: usize,
        piece: P,
        counters: Arc<UnitCounters>,
        next: Box<dyn Sink<B>>,
    ) -> Self {
        UnitSink {
            unit,
            piece,
            next,
            counters,
            items_in: 0,
            items_out: 0,
        }
    }
}

impl<A: Send + 'static, B: Send + 'static, P: Piece<A, B>> Sink<A> for UnitSink<B, P> {
    #[inline]
    fn item(&mut self, seq: u64, item: A, failures: &mut Vec<Failure>) {
        self.items_in += 1;
        let (next, out) = (&mut self.next, &mut self.items_out);
        let piece = &mut self.piece;
        // No catch_unwind per unit and item: a panic unwinds straight to
        // the worker, which names the unit from `RUNNING` (the restore
        // below is skipped by the unwinding, so it still names this unit,
        // or one further down if the panic came from there).
        as_unit(self.unit, || {
            piece.run(seq, item, failures, &mut |o, f| {
                *out += 1;
                next.item(seq, o, f);
            });
        });
    }

    #[inline]
    fn end(&mut self, seq: u64, failures: &mut Vec<Failure>) {
        self.next.end(seq, failures);
    }

    #[inline]
    fn item_end(&mut self, seq: u64, item: A, failures: &mut Vec<Failure>) {
        self.items_in += 1;
        let (next, out) = (&mut self.next, &mut self.items_out);
        let piece = &mut self.piece;
        // Hold each output back until the next one comes, so the group's
        // last output goes on with its end in one call.
        let mut held = None;
        as_unit(self.unit, || {
            piece.run(seq, item, failures, &mut |o, f| {
                *out += 1;
                if let Some(prev) = held.replace(o) {
                    next.item(seq, prev, f);
                }
            });
        });
        match held {
            Some(last) => self.next.item_end(seq, last, failures),
            None => self.next.end(seq, failures),
        }
    }

    fn flush(&mut self) -> bool {
        self.next.flush()
    }

    fn can_flush(&self) -> bool {
        self.next.can_flush()
    }

    fn barrier(&mut self, seq: u64, co: &Coordinator) {
        if let Some(b) = co.barrier(seq) {
            let piece = &mut self.piece;
            as_unit(self.unit, || co.at_barrier(&b, &mut |f| piece.visit(f)));
        }
        self.next.barrier(seq, co);
    }

    fn publish_stats(&mut self) {
        self.counters
            .items_in
            .store(self.items_in, Ordering::Relaxed);
        self.counters
            .items_out
            .store(self.items_out, Ordering::Relaxed);
        self.next.publish_stats();
    }

    fn close(self: Box<Self>, states: &mut UnitStates) {
        let me = *self;
        me.counters.items_in.store(me.items_in, Ordering::Relaxed);
        me.counters.items_out.store(me.items_out, Ordering::Relaxed);
        let mut mine = Vec::new();
        me.piece.states(&mut mine);
        states.push((me.unit, mine));
        me.next.close(states);
    }
}

/// A source and the sink chain behind it.
pub(crate) struct Station<I> {
    pub(crate) source: Box<dyn Source<I>>,
    pub(crate) sink: Box<dyn Sink<I>>,
    pub(crate) failures: Vec<Failure>,
    pub(crate) failure_tx: Sender<Failure>,
    pub(crate) counters: Arc<StationCounters>,
    pub(crate) errors: ErrorCounts,
    pub(crate) closed: bool,
    /// Where barriers are looked up.
    pub(crate) co: Arc<Coordinator>,
    /// Outputs are held back by a full ring: no input is taken until they
    /// are out, so the source's readiness does not count as work.
    pub(crate) blocked: bool,
}

/// Failures per stage name, shared by every station of a deployment
/// (touched once per failure, which is rare).
pub(crate) type ErrorCounts = Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>;

impl<I: Send + 'static> Task for Station<I> {
    fn run(&mut self) -> Step {
        self.blocked = !self.sink.flush();
        if self.blocked {
            return match self.source.absorb() {
                Ok(_) => Step::Blocked,
                Err(SourceEnd::Halted) => Step::Halted,
                // Nothing closes a feedback edge while items are in flight.
                Err(SourceEnd::Closed) => Step::Blocked,
            };
        }
        if self.closed {
            return Step::Done;
        }
        let (sink, failures, co) = (&mut self.sink, &mut self.failures, &*self.co);
        let r = self.source.poll(&mut |seq, item, last| match (item, last) {
            (Some(x), true) => sink.item_end(seq, x, failures),
            (Some(x), false) => sink.item(seq, x, failures),
            (None, true) => sink.end(seq, failures),
            (None, false) => {
                if is_barrier(seq) {
                    sink.barrier(seq, co);
                }
            }
        });
        if !self.failures.is_empty() {
            let mut counts = self.errors.lock().unwrap_or_else(|p| p.into_inner());
            for f in &self.failures {
                *counts.entry(f.stage.clone()).or_default() += 1;
            }
        }
        for f in self.failures.drain(..) {
            // The receiver lives as long as the deployment's output; if the
            // user dropped it, failures have nowhere to go.
            let _ = self.failure_tx.send(f);
        }
        match r {
            Ok(0) => Step::Idle,
            Ok(_) => {
                self.sink.publish_stats();
                // Push out what the batch produced (and wake downstream).
                self.blocked = !self.sink.flush();
                Step::Progress
            }
            Err(SourceEnd::Closed) => {
                self.closed = true;
                self.blocked = !self.sink.flush();
                if self.blocked {
                    Step::Blocked
                } else {
                    Step::Done
                }
            }
            Err(SourceEnd::Halted) => Step::Halted,
        }
    }

    fn ready(&mut self) -> bool {
        if self.blocked {
            // Only moving the held-back outputs (or a feedback edge) is
            // work: sleeping until the consumer makes room is right.
            self.sink.can_flush() || self.source.can_absorb()
        } else {
            self.closed || self.sink.can_flush() || self.source.ready()
        }
    }

    fn account(&self, step: Step, ns: u64) {
        let c = &self.counters;
        match step {
            Step::Progress | Step::Done => c.add(&c.busy_ns, ns),
            Step::Blocked => c.add(&c.blocked_ns, ns),
            Step::Idle | Step::Halted => c.add(&c.idle_ns, ns),
        }
    }

    fn finish(self: Box<Self>, states: &mut UnitStates) {
        self.counters.done.store(1, Ordering::Relaxed);
        self.sink.close(states);
    }
}
