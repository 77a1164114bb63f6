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
use super::compile::Open;
use super::config::Config;
use super::deploy::{Feed, Running};
use super::edge::UnitStates;
use super::edge::{inner_edge, probe, DepthProbe, RingSource, Sink, Source, SourceEnd};
use super::error::DeployError;
use super::graph::{EdgeInfo, INPUT, OUTPUT};
use super::ring_sink::RingSink;
use super::station::{panic_message, StagePanic};
use crate::failure::Failure;
use crate::pipeline::Pipeline;

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
        let r = self.back.poll(&mut |_, item, last| {
            if let Some(x) = item {
                again.push_back(x);
            }
            if last {
                *in_flight -= 1;
            }
        });
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
                    Some(x) => x,
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
        if n + moved == 0 && self.seeds_done && self.in_flight == 0 {
            return Err(SourceEnd::Closed);
        }
        Ok(n + moved)
    }

    fn ready(&self) -> bool {
        !self.again.is_empty() || !self.seeds_done || self.in_flight == 0 || self.back.ready()
    }

    fn depth_probe(&self) -> DepthProbe {
        self.back.depth_probe()
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
        let seeds = seeds.into_iter();
        let back = inner_edge::<I>(config.capacity);
        let depth = probe(&back.monitor);
        let (producer, poller, monitor) = (back.producer, back.poller, back.monitor);
        let (mut running, failures) = self.launch(
            config,
            0,
            vec![back.handle],
            // Barriers would need the items on the way back saved too.
            Feed::Cycle,
            |cx, w| {
                // The last station runs on the worker of the last unit.
                let last = cx.plan.last().copied().unwrap_or(w);
                cx.edges.push(EdgeInfo {
                    from: OUTPUT,
                    to: INPUT,
                    depth: Some(depth),
                });
                let source = CycleSource {
                    seeds,
                    seeds_done: false,
                    back: RingSource::new(poller, monitor, Arc::clone(&cx.bells[last])),
                    again: VecDeque::new(),
                    local: last == w,
                    in_flight: 0,
                    next_seq: 0,
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
        running.failures = Some(failures);
        Ok(running)
    }
}
