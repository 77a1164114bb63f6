//! Cycles: a pipeline whose outputs go round again.
//!
//! [`Pipeline::deploy_cycle`] closes a pipeline on itself: each output goes
//! to the user's `step`, which sends it round once more or retires it. The
//! way back is one more ring, the *feedback edge*, from the last station to
//! the first; nothing outside the workers takes part, so an item that goes
//! round a hundred times crosses no thread that is not a worker.
//!
//! The feedback edge carries, per group (everything one input produced),
//! the items `step` sent round and a closing message, so the first station
//! knows exactly how many groups are in flight: the cycle is over when the
//! seeds are exhausted and no group is.
//!
//! Bounded rings in a cycle can wait on each other: the first station
//! blocked on a full ring to the last, the last blocked on the full
//! feedback edge. The first station therefore drains the feedback edge into
//! a queue of its own even while it is blocked ([`Source::absorb`]), and
//! takes from that queue before it takes new seeds. That queue is the only
//! unbounded one; it holds at most what the cycle's own items multiply to
//! (a stage with several outputs per input makes more items than it took).

use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;

use statepipe_ring::wait::BusySpin;

use super::barrier::Coordinator;
use super::barrier::{is_barrier, BARRIER, CYCLE_STATE};
use super::compile::Open;
use super::config::Config;
use super::deploy::{Feed, Running};
use super::edge::UnitStates;
use super::edge::{inner_edge, probe, DepthProbe, RingSource, Sink, Source, SourceEnd};
use super::error::DeployError;
use super::graph::{EdgeInfo, INPUT, OUTPUT};
use super::ring_sink::RingSink;
use super::station::{panic_message, StagePanic};
use crate::checkpoint::CheckpointError;
use crate::failure::Failure;
use crate::pipeline::Pipeline;
use crate::state::{serde_codec, Codec, Copied, Snapshot, StageCell};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The name a panic in a cycle's `step` is reported under.
pub const STEP_NAME: &str = "(cycle step)";

/// Polls of the feedback ring per drain: enough to empty it (each poll
/// takes at most an eighth of a ring, see `edge::max_batch`).
const DRAIN_POLLS: usize = 8;

/// Items one poll of a [`CycleSource`] hands on at most.
const CYCLE_BATCH: usize = 256;

/// The first station's source in a cycle: what came back round first, then
/// new seeds.
pub(crate) struct CycleSource<I, It> {
    seeds: It,
    seeds_done: bool,
    back: RingSource<I, BusySpin>,
    /// Items that came back and wait to go round again.
    again: VecDeque<I>,
    /// Whether the feedback edge's producer runs on this worker.
    local: bool,
    /// Groups sent in whose closing message has not come back.
    in_flight: u64,
    next_seq: u64,
    /// Where barriers are queued and reported.
    co: Arc<Coordinator>,
    /// How the items that wait to go round are saved (a durable cycle).
    codec: Option<CycleCodec<I>>,
    /// Barriers sent round that have not come back: the cycle does not
    /// end before they do.
    barriers_out: u64,
    /// Seeds taken so far: a checkpoint's position.
    seeds_taken: u64,
    /// Checkpoints whose barrier is on its way round: what waited when it
    /// went in, and what has come back since (Chandy–Lamport's record of
    /// the channel).
    recording: Vec<(u64, CycleState<I>)>,
}

/// How a durable cycle copies and saves its items.
pub(crate) struct CycleCodec<I> {
    state: Codec<CycleState<I>>,
    clone: fn(&I) -> I,
}

impl<I> Clone for CycleCodec<I> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<I> Copy for CycleCodec<I> {}

fn clone_item<I: Clone>(x: &I) -> I {
    x.clone()
}

/// What a durable cycle saves besides its stages: the seeds taken, the
/// next group's number, and the items waiting to go round.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct CycleState<I> {
    seeds_taken: u64,
    next_seq: u64,
    again: Vec<I>,
}

/// A cycle's state handed over at a barrier, as a stage's would be.
struct CycleCell<I> {
    state: std::cell::RefCell<Option<CycleState<I>>>,
    codec: Codec<CycleState<I>>,
}

impl<I: Send + 'static> StageCell for CycleCell<I> {
    fn name(&self) -> &str {
        CYCLE_STATE
    }

    fn durable(&self) -> Option<&'static str> {
        Some(self.codec.type_name)
    }

    fn snapshot(&self, _: Option<Copied>) -> Option<Snapshot> {
        let state = self.state.borrow_mut().take()?;
        Some(Snapshot {
            stage: CYCLE_STATE.to_string(),
            type_name: self.codec.type_name,
            copy: Box::new(state),
            encode: self.codec.encode,
        })
    }

    fn restore(&mut self, _: &[u8]) -> Result<(), String> {
        Err("a cycle's state is restored by its source".into())
    }
}

impl<I: Send + 'static, It: Iterator<Item = I> + Send> CycleSource<I, It> {
    /// Moves everything waiting on the feedback ring into `again` (a few
    /// polls, each at most a ring's `max_batch`).
    fn drain(&mut self) -> Result<usize, SourceEnd> {
        let mut total = 0;
        for _ in 0..DRAIN_POLLS {
            match self.drain_once()? {
                0 => break,
                n => total += n,
            }
        }
        Ok(total)
    }

    fn drain_once(&mut self) -> Result<usize, SourceEnd> {
        let (again, in_flight) = (&mut self.again, &mut self.in_flight);
        // Barriers that came back, each with what was recorded up to it
        // (the items after it in the same batch are not its).
        let (recording, back) = (&mut self.recording, &mut Vec::new());
        let keep = self.codec.map(|c| c.clone);
        let r = self.back.poll(&mut |seq, item, last| {
            if let Some(x) = item {
                if let Some(clone) = keep {
                    for (_, r) in recording.iter_mut() {
                        r.again.push(clone(&x));
                    }
                }
                again.push_back(x);
            } else if is_barrier(seq) {
                let state = recording
                    .iter()
                    .position(|(s, _)| *s == seq)
                    .map(|k| recording.remove(k).1);
                back.push((seq, state));
            }
            if last {
                *in_flight -= 1;
            }
        });
        // A barrier came back round: everything sent before it is back.
        for (seq, state) in std::mem::take(back) {
            self.barriers_out -= 1;
            if let Some(b) = self.co.barrier(seq) {
                let mut cell = self.codec.map(|c| CycleCell {
                    state: std::cell::RefCell::new(state),
                    codec: c.state,
                });
                self.co.at_barrier(&b, &mut |f| {
                    if let Some(mut c) = cell.take() {
                        f(&mut c);
                    }
                });
            }
        }
        match r {
            Ok(n) => Ok(n),
            // The last station closes the edge only after this station
            // finished, which needs every group back: anything else is a
            // deployment that is coming down.
            Err(SourceEnd::Closed) if self.in_flight == 0 => Ok(0),
            Err(_) => Err(SourceEnd::Halted),
        }
    }
}

impl<I: Send + 'static, It: Iterator<Item = I> + Send> Source<I> for CycleSource<I, It> {
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<I>, bool)) -> Result<usize, SourceEnd> {
        let mut moved = self.drain()?;
        let mut n = 0;
        // Relaxed: see `inject.rs`; a cycle's barriers go in between two
        // items of this source, whatever their position.
        if self.co.queued.load(std::sync::atomic::Ordering::Relaxed) {
            while let Some((id, _)) = self.co.front() {
                self.co.pop(id, self.next_seq);
                let seq = BARRIER | id;
                self.barriers_out += 1;
                let checkpoint = self.co.barrier(seq).is_some_and(|b| b.checkpoint);
                if let Some(c) = self.codec.filter(|_| checkpoint) {
                    let state = CycleState {
                        seeds_taken: self.seeds_taken,
                        next_seq: self.next_seq,
                        again: self.again.iter().map(c.clone).collect(),
                    };
                    self.recording.push((seq, state));
                }
                f(seq, None, false);
                n += 1;
            }
        }
        while n < CYCLE_BATCH {
            let x = match self.again.pop_front() {
                Some(x) => x,
                // When the whole cycle runs on this worker, what this batch
                // sent round is back already: keep going, a batch is a batch.
                // (Across workers, watching the other worker's cursor per
                // item would only bounce its cache line.)
                None if self.local && n > 0 && self.back.ready() => {
                    moved += self.drain()?;
                    continue;
                }
                None if self.seeds_done => break,
                None => match self.seeds.next() {
                    Some(x) => {
                        self.seeds_taken += 1;
                        x
                    }
                    None => {
                        self.seeds_done = true;
                        break;
                    }
                },
            };
            f(self.next_seq, Some(x), true);
            self.next_seq += 1;
            self.in_flight += 1;
            n += 1;
        }
        if n + moved == 0 && self.seeds_done && self.in_flight == 0 && self.barriers_out == 0 {
            return Err(SourceEnd::Closed);
        }
        Ok(n + moved)
    }

    fn ready(&self) -> bool {
        !self.again.is_empty()
            || !self.seeds_done
            || self.in_flight == 0
            || self.back.ready()
            || self.co.queued.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn depth_probe(&self) -> DepthProbe {
        self.back.depth_probe()
    }

    fn capacity(&self) -> u64 {
        self.back.capacity()
    }

    fn absorb(&mut self) -> Result<usize, SourceEnd> {
        self.drain()
    }

    fn can_absorb(&self) -> bool {
        self.back.ready()
    }
}

/// The last station's sink in a cycle: `step` decides, per output, whether
/// it goes round again.
pub(crate) struct CycleSink<I, F> {
    step: F,
    back: RingSink<I, BusySpin>,
}

impl<I, O, F> Sink<O> for CycleSink<I, F>
where
    I: Send + 'static,
    O: Send + 'static,
    F: FnMut(u64, O) -> Option<I> + Send,
{
    #[inline]
    fn item(&mut self, seq: u64, item: O, failures: &mut Vec<Failure>) {
        let step = &mut self.step;
        match catch_unwind(AssertUnwindSafe(|| step(seq, item))) {
            Ok(Some(next)) => self.back.item(seq, next, failures),
            Ok(None) => {}
            Err(payload) => resume_unwind(Box::new(StagePanic {
                stage: STEP_NAME.to_string(),
                message: panic_message(&*payload),
            })),
        }
    }

    #[inline]
    fn end(&mut self, seq: u64, failures: &mut Vec<Failure>) {
        self.back.end(seq, failures);
    }

    fn flush(&mut self) -> bool {
        self.back.flush()
    }

    fn can_flush(&self) -> bool {
        self.back.can_flush()
    }

    fn publish_stats(&mut self) {}

    fn barrier(&mut self, seq: u64, co: &Coordinator) {
        self.back.barrier(seq, co);
    }

    fn close(self: Box<Self>, states: &mut UnitStates) {
        Box::new(self.back).close(states);
    }
}

impl<I: Send + 'static, O: Send + 'static> Pipeline<I, O> {
    /// Starts the pipeline as a cycle: the `seeds` enter the first stage on
    /// the first worker; each output goes to `step(seq, output)` on the last
    /// worker, which sends the next item round (`Some`) or retires the
    /// output (`None`). Items that came back go in before new seeds. The
    /// deployment finishes when the seeds are exhausted and every item has
    /// retired; [`Running::join`] returns the final states and the failures
    /// (an item that fails at a stage retires there).
    ///
    /// The way back is a ring between workers like any other, so a cycle on
    /// two workers passes its items from worker to worker with no other
    /// thread in the loop. A panic in `step` stops the deployment like a
    /// panicking stage, named [`STEP_NAME`].
    ///
    /// # Examples
    ///
    /// Collatz: each number goes round until it reaches 1; the cycle counts
    /// the steps.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use statepipe_pipeline::{Config, Pipeline};
    ///
    /// let p = Pipeline::map("collatz", |(n, steps): (u64, u32)| {
    ///     (if n % 2 == 0 { n / 2 } else { 3 * n + 1 }, steps + 1)
    /// });
    /// let done = Arc::new(Mutex::new(Vec::new()));
    /// let out = Arc::clone(&done);
    /// let seeds = [6u64, 7, 27].map(|n| (n, 0u32));
    /// let running = p
    ///     .deploy_cycle(&Config::new().workers(1), seeds, move |_seq, (n, steps)| {
    ///         if n == 1 {
    ///             out.lock().unwrap().push(steps);
    ///             None
    ///         } else {
    ///             Some((n, steps))
    ///         }
    ///     })
    ///     .unwrap();
    /// running.join().unwrap();
    /// let mut steps = done.lock().unwrap().clone();
    /// steps.sort();
    /// assert_eq!(steps, [8, 16, 111]);
    /// ```
    ///
    /// # Errors
    /// As [`deploy`](Self::deploy).
    pub fn deploy_cycle<It, F>(
        self,
        config: &Config,
        seeds: It,
        step: F,
    ) -> Result<Running, DeployError>
    where
        It: IntoIterator<Item = I>,
        It::IntoIter: Send + 'static,
        F: FnMut(u64, O) -> Option<I> + Send + 'static,
    {
        self.cycle(config, seeds, step, None)
    }

    /// Like [`deploy_cycle`](Pipeline::deploy_cycle), and checkpointed:
    /// with [`Config::checkpoint_dir`] a checkpoint saves, besides every
    /// stage's state, the items waiting to go round and those on their way
    /// back when it was taken (the barrier goes round once; what comes
    /// back before it is recorded, as Chandy and Lamport's snapshots
    /// record a channel). A deployment restored from it
    /// ([`Config::restore`]) is given the same `seeds`: it passes over
    /// those the checkpoint had taken, sends the saved items round first,
    /// and numbers its groups from the checkpoint's
    /// [`position`](crate::Checkpoint::position) on. Every group numbered
    /// below the position had gone round before the checkpoint, so a `step`
    /// that keeps what it retired drops, after a restore, what the old run
    /// retired from groups numbered at or above the position: the new run
    /// retires those again. Stages can be upgraded too
    /// ([`Running::upgrade`]).
    ///
    /// # Errors
    /// As [`deploy`](Self::deploy).
    pub fn deploy_durable_cycle<It, F>(
        self,
        config: &Config,
        seeds: It,
        step: F,
    ) -> Result<Running, DeployError>
    where
        I: Clone + Serialize + DeserializeOwned,
        It: IntoIterator<Item = I>,
        It::IntoIter: Send + 'static,
        F: FnMut(u64, O) -> Option<I> + Send + 'static,
    {
        let codec = CycleCodec {
            state: serde_codec::<CycleState<I>>(),
            clone: clone_item::<I>,
        };
        self.cycle(config, seeds, step, Some(codec))
    }

    fn cycle<It, F>(
        self,
        config: &Config,
        seeds: It,
        step: F,
        codec: Option<CycleCodec<I>>,
    ) -> Result<Running, DeployError>
    where
        It: IntoIterator<Item = I>,
        It::IntoIter: Send + 'static,
        F: FnMut(u64, O) -> Option<I> + Send + 'static,
    {
        let seeds = seeds.into_iter();
        let mut restore_error = None;
        let back = inner_edge::<I>(config.capacity);
        let depth = probe(&back.monitor);
        let (producer, poller, monitor) = (back.producer, back.poller, back.monitor);
        let (mut running, failures) = self.launch(
            config,
            0,
            vec![back.handle],
            match codec {
                Some(c) => Feed::DurableCycle(c.state.type_name),
                // Barriers would need the items on the way back saved too.
                None => Feed::Cycle,
            },
            |cx, w| {
                // The last station runs on the worker of the last unit.
                let last = cx.plan.last().copied().unwrap_or(w);
                cx.edges.push(EdgeInfo {
                    from: OUTPUT,
                    to: INPUT,
                    depth: Some(depth),
                });
                let _ = cx.co.first.set(Arc::clone(&cx.bells[w]));
                let restored = match (codec, cx.restored_extra.take()) {
                    (Some(c), Some(bytes)) => Some((c.state.decode)(&bytes)),
                    _ => None,
                };
                let mut seeds = seeds;
                let (seeds_taken, next_seq, again) = match restored {
                    Some(Ok(s)) => {
                        // The seeds the checkpoint took are in its state.
                        for _ in 0..s.seeds_taken {
                            if seeds.next().is_none() {
                                break;
                            }
                        }
                        (s.seeds_taken, s.next_seq, s.again.into())
                    }
                    Some(Err(e)) => {
                        restore_error = Some(e);
                        (0, 0, VecDeque::new())
                    }
                    None => (0, cx.resume, VecDeque::new()),
                };
                let source = CycleSource {
                    seeds,
                    seeds_done: false,
                    back: RingSource::new(poller, monitor, Arc::clone(&cx.bells[last])),
                    again,
                    local: last == w,
                    in_flight: 0,
                    next_seq,
                    co: Arc::clone(&cx.co),
                    codec,
                    seeds_taken,
                    recording: Vec::new(),
                    barriers_out: 0,
                };
                Open::at(w, vec![INPUT], Box::new(source))
            },
            |cx, open: Open<O>| {
                // The first station runs on the worker of the first unit.
                let first = cx.plan.first().copied().unwrap_or(0);
                let sink = CycleSink {
                    step,
                    back: cx.ring_sink(producer, Arc::clone(&cx.bells[first])),
                };
                cx.output_fn(open, Box::new(sink));
            },
        )?;
        if let Some(e) = restore_error {
            running.stop();
            return Err(DeployError::Checkpoint(CheckpointError::Damaged {
                file: CYCLE_STATE.to_string(),
                what: format!("the cycle's saved items do not decode: {e}"),
            }));
        }
        running.failures = Some(failures);
        Ok(running)
    }
}
