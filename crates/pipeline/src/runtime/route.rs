//! Shards and choices across workers: a router fused into the upstream
//! station, copies (or branches) on stations of their own, and a merge that
//! restores input order, with no shuffle thread.
//!
//! The router sends each item to one copy as a group of its own and writes
//! the copy's number to a *route log*, an edge to the merge; the end of an
//! upstream group goes to the route log too. The merge reads the route log
//! in order and, for each entry, the copy's next group. So outputs leave in
//! exactly the sequential interpreter's order, for `shard` (copy `i % n`)
//! and for `shard_by_key` alike (which also keeps order per key, and more).
//!
//! No deadlock: the merge only ever waits for the group of the earliest
//! item not yet merged, which is first in its copy's input and, once
//! produced, first in its copy's output; a copy never waits on the merge for
//! anything but space that the merge frees by reading that very group.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use statepipe_ring::wait::BusySpin;

use super::barrier::{align, is_barrier, Coordinator};
use super::edge::UnitStates;
use super::edge::{DepthProbe, RingSource, Sink, Source, SourceEnd, Take};
use super::ring_sink::RingSink;
use super::station::{as_unit, UnitCounters};
use crate::branch::{no_such_branch, shard_of};
use crate::either::Either;
use crate::failure::Failure;
use crate::state::{CounterCell, Visit};

/// How a router picks the copy (or branch) of an item.
pub(crate) trait Pick<T>: Send {
    /// The branch of `item`, of `copies`; or the failure of an item that
    /// has none (`choose` routing past its last branch).
    fn pick(&mut self, seq: u64, item: T, copies: usize) -> Result<(usize, T), Failure>;
    /// Calls `f` on the router's own state, if it has one to checkpoint.
    fn visit(&mut self, _f: Visit<'_>) {}
}

/// `shard`: the `i`-th item to reach the router goes to copy `i % n`.
pub(crate) struct RoundRobin {
    /// How many items reached the shard: the next goes to `next % n`.
    pub(crate) next: u64,
    /// The name this count is checkpointed under.
    pub(crate) name: String,
}

impl<T> Pick<T> for RoundRobin {
    #[inline]
    fn pick(&mut self, _: u64, item: T, copies: usize) -> Result<(usize, T), Failure> {
        let k = (self.next % copies as u64) as usize;
        self.next += 1;
        Ok((k, item))
    }

    fn visit(&mut self, f: Visit<'_>) {
        f(&mut CounterCell {
            name: self.name.clone(),
            value: &mut self.next,
        });
    }
}

/// `shard_by_key`: the copy `shard_of(key(item), n)`.
pub(crate) struct ByKey<F>(pub(crate) F);

impl<T, K: Hash, F: FnMut(&T) -> K + Send> Pick<T> for ByKey<F> {
    #[inline]
    fn pick(&mut self, _: u64, item: T, copies: usize) -> Result<(usize, T), Failure> {
        Ok((shard_of(&(self.0)(&item), copies), item))
    }
}

/// `choice` and `merge`: `Left` to branch 0, `Right` to branch 1.
pub(crate) struct Side;

impl<A, B> Pick<Either<A, B>> for Side {
    #[inline]
    fn pick(
        &mut self,
        _: u64,
        item: Either<A, B>,
        _: usize,
    ) -> Result<(usize, Either<A, B>), Failure> {
        let k = match item {
            Either::Left(_) => 0,
            Either::Right(_) => 1,
        };
        Ok((k, item))
    }
}

/// `choose`: the branch `route(&item)`; past the last one, a failure
/// under the router's name.
pub(crate) struct Route<F> {
    pub(crate) name: String,
    pub(crate) route: F,
}

impl<T, F> Pick<T> for Route<F>
where
    T: Debug + Send + 'static,
    F: FnMut(&T) -> usize + Send,
{
    #[inline]
    fn pick(&mut self, seq: u64, item: T, copies: usize) -> Result<(usize, T), Failure> {
        let k = (self.route)(&item);
        if k < copies {
            Ok((k, item))
        } else {
            Err(no_such_branch(&self.name, seq, item, k, copies))
        }
    }
}

/// A choice's first branch: the `Left` side of the item.
pub(crate) struct LeftSide;

impl<A: Send + 'static, B: Send + 'static> Take<Either<A, B>> for LeftSide {
    type Out = A;

    #[inline(always)]
    fn take(slot: &mut Option<Either<A, B>>) -> Option<A> {
        match slot.take()? {
            Either::Left(a) => Some(a),
            Either::Right(_) => None,
        }
    }
}

/// A choice's second branch: the `Right` side of the item.
pub(crate) struct RightSide;

impl<A: Send + 'static, B: Send + 'static> Take<Either<A, B>> for RightSide {
    type Out = B;

    #[inline(always)]
    fn take(slot: &mut Option<Either<A, B>>) -> Option<B> {
        match slot.take()? {
            Either::Right(b) => Some(b),
            Either::Left(_) => None,
        }
    }
}

/// The sending side of a shard.
pub(crate) struct Router<T, P> {
    pub(crate) copies: Vec<RingSink<T, BusySpin>>,
    pub(crate) log: RingSink<u32, BusySpin>,
    pub(crate) pick: P,
    /// The unit a panic in `pick` (the user's key or route function) is
    /// named after: the shard's merge, the choice's join.
    pub(crate) unit: usize,
}

impl<T: Send + 'static, P: Pick<T>> Sink<T> for Router<T, P> {
    fn item(&mut self, seq: u64, item: T, failures: &mut Vec<Failure>) {
        let (pick, copies) = (&mut self.pick, self.copies.len());
        match as_unit(self.unit, || pick.pick(seq, item, copies)) {
            Ok((k, item)) => {
                self.copies[k].item_end(seq, item, failures);
                self.log.item(seq, k as u32, failures);
            }
            // No branch takes it: nothing goes on, the group's end will.
            Err(f) => failures.push(f),
        }
    }

    fn end(&mut self, seq: u64, failures: &mut Vec<Failure>) {
        self.log.end(seq, failures);
    }

    fn flush(&mut self) -> bool {
        let mut empty = self.log.flush();
        for c in &mut self.copies {
            empty &= c.flush();
        }
        empty
    }

    fn can_flush(&self) -> bool {
        self.log.can_flush() || self.copies.iter().any(Sink::can_flush)
    }

    fn publish_stats(&mut self) {}

    fn barrier(&mut self, seq: u64, co: &Coordinator) {
        if let Some(b) = co.barrier(seq) {
            let pick = &mut self.pick;
            co.at_barrier(&b, &mut |f| pick.visit(f));
        }
        // Every copy, then the log: the merge finds it in the log, then
        // takes it from each copy.
        for c in &mut self.copies {
            c.barrier(seq, co);
        }
        self.log.barrier(seq, co);
    }

    fn close(self: Box<Self>, states: &mut UnitStates) {
        let me = *self;
        for c in me.copies {
            Box::new(c).close(states);
        }
        Box::new(me.log).close(states);
    }
}

/// The receiving side of a shard: the source of the station after it.
pub(crate) struct Merge<T> {
    pub(crate) log: RingSource<u32, BusySpin>,
    pub(crate) copies: Vec<RingSource<T, BusySpin>>,
    /// The route-log entry being served: (seq, copy, whether it closes the
    /// upstream group).
    pub(crate) current: Option<(u64, usize, bool)>,
    /// A barrier found in the log, and the next copy to take it from.
    pub(crate) barrier: Option<(u64, usize)>,
    pub(crate) counters: Arc<UnitCounters>,
    /// Outputs handed on, published to `counters` once per poll.
    pub(crate) delivered: u64,
}

/// How many messages one `poll` hands over at most.
const MERGE_BATCH: usize = 256;

impl<T: Send + 'static> Source<T> for Merge<T> {
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<T>, bool)) -> Result<usize, SourceEnd> {
        let r = self.merge(f);
        let n = self.delivered;
        self.counters.items_in.store(n, Ordering::Relaxed);
        self.counters.items_out.store(n, Ordering::Relaxed);
        r
    }

    fn ready(&self) -> bool {
        match (self.barrier, self.current) {
            (Some((_, k)), _) => self.copies[k].ready(),
            (None, Some((_, k, _))) => self.copies[k].ready(),
            (None, None) => self.log.ready(),
        }
    }

    fn depth_probe(&self) -> DepthProbe {
        let probes: Vec<DepthProbe> = self.copies.iter().map(Source::depth_probe).collect();
        Box::new(move || probes.iter().map(|p| p()).sum())
    }

    fn capacity(&self) -> u64 {
        self.copies.iter().map(Source::capacity).sum()
    }
}

impl<T: Send + 'static> Merge<T> {
    fn merge(&mut self, f: &mut dyn FnMut(u64, Option<T>, bool)) -> Result<usize, SourceEnd> {
        let mut n = 0;
        while n < MERGE_BATCH {
            if self.barrier.is_some() {
                // Every group before the barrier is merged: it waits first
                // on every copy's edge.
                let copies = &mut self.copies;
                match align(&mut self.barrier, copies.len(), |k| {
                    copies[k].take_barrier()
                })? {
                    Some(seq) => {
                        f(seq, None, false);
                        n += 1;
                        continue;
                    }
                    None => return Ok(n),
                }
            }
            let (seq, k, closes) = match self.current {
                Some(c) => c,
                None => match self.log.take_one() {
                    Ok(None) => return Ok(n),
                    Ok(Some((seq, None, false))) if is_barrier(seq) => {
                        self.barrier = Some((seq, 0));
                        continue;
                    }
                    Ok(Some((seq, None, _))) => {
                        // An upstream group that sent nothing here.
                        f(seq, None, true);
                        n += 1;
                        continue;
                    }
                    Ok(Some((seq, Some(k), last))) => {
                        self.current = Some((seq, k as usize, last));
                        (seq, k as usize, last)
                    }
                    Err(SourceEnd::Closed) if n > 0 => return Ok(n),
                    Err(e) => return Err(e),
                },
            };
            let mut group_done = false;
            let delivered = &mut self.delivered;
            let got = self.copies[k].poll_while(&mut |_, item, last| {
                if let Some(x) = item {
                    *delivered += 1;
                    f(seq, Some(x), false);
                }
                group_done = last;
                !last
            });
            match got {
                Ok(m) => n += m,
                // A copy closed in the middle of a group: only a halt does that.
                Err(_) => return Err(SourceEnd::Halted),
            }
            if !group_done {
                return Ok(n);
            }
            self.current = None;
            if closes {
                f(seq, None, true);
                n += 1;
            }
        }
        Ok(n)
    }
}
