//! Fan-out, par and N-ary fan-out across workers: one multicast ring that
//! every branch reads, and a join that pairs the branches' outputs per item.
//!
//! ```text
//!                 ┌─► branch 0 (takes a copy) ─ring─┐
//! [up … fork] ─ring (one slot per item)             ├─► join ─► …
//!                 └─► branch 1 (moves it out) ─ring─┘
//!                       └─► join (reads where groups end, frees the slot)
//! ```
//!
//! The fork publishes each item once, into one slot of the *fork ring*,
//! with the upstream group structure of any edge (`last` closes the group
//! of pipeline input `seq`; a group with no item is a message with none).
//! Every branch reads that same slot through a poller of its own, and the
//! join reads it last: the pollers form a chain in the ring's dependency
//! graph (branch `k + 1` reads slot `s` only after branch `k` is done with
//! it, the join after the last branch), so each may have `&mut` access to
//! the slot without any of them waiting for another's *work*: a reader is
//! done with a slot when its poll batch ends, however long the stages
//! behind it take. Branches before the last take what they need out of the
//! slot by cloning (a stage takes its input by value); the last moves it
//! out, so an item is cloned once per extra branch, as in the sequential
//! meaning, and on the branches' workers instead of upstream. For `par`
//! each branch moves its own half out and nothing is cloned. The join
//! empties the slot.
//!
//! A branch makes each item a group of its own ([`EachItem`]), so it sends
//! the join one group per item. The join reads the fork ring in order and,
//! for each item, one group from every branch, in branch order, then emits
//! every combination of their outputs (the list meaning of `&&&`, first
//! branch outermost); where an upstream group ends, it ends the group too.
//!
//! No deadlock: the join only ever waits for a group of the earliest item
//! not yet joined. Every branch is past that item's slot (the join reads a
//! slot only after the last branch), and each branch's output of it is
//! first on its edge to the join, because the join took every earlier
//! group. A reader waits on the one before it only for the end of a poll
//! batch, never for space; the fork waits for the join to free slots, which
//! it does as it joins.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use statepipe_ring::wait::BusySpin;

use super::barrier::{align, is_barrier};
use super::edge::{DepthProbe, RingSource, Source, SourceEnd, Take};
use super::station::UnitCounters;

/// The slot of a `fan_out` fork: the item, which the last branch moves out
/// (leaving `Some(None)`, so the join still sees that an item was there).
pub(crate) type Shared<T> = Option<T>;

/// A fork branch before the last: clones the item out of the slot.
pub(crate) struct CloneOut;

impl<T: Clone + Send + 'static> Take<Shared<T>> for CloneOut {
    type Out = T;

    #[inline(always)]
    fn take(slot: &mut Option<Shared<T>>) -> Option<T> {
        slot.as_ref()?.clone()
    }
}

/// A fork's last branch: moves the item out.
pub(crate) struct MoveOut;

impl<T: Send + 'static> Take<Shared<T>> for MoveOut {
    type Out = T;

    #[inline(always)]
    fn take(slot: &mut Option<Shared<T>>) -> Option<T> {
        slot.as_mut()?.take()
    }
}

/// A slot of a `par` fork: each branch moves its half out.
pub(crate) type Halves<A, B> = (Option<A>, Option<B>);

/// `par`'s first branch: moves the first half out.
pub(crate) struct FirstHalf;

impl<A: Send + 'static, B: Send + 'static> Take<Halves<A, B>> for FirstHalf {
    type Out = A;

    #[inline(always)]
    fn take(slot: &mut Option<Halves<A, B>>) -> Option<A> {
        slot.as_mut()?.0.take()
    }
}

/// `par`'s second branch: moves the second half out.
pub(crate) struct SecondHalf;

impl<A: Send + 'static, B: Send + 'static> Take<Halves<A, B>> for SecondHalf {
    type Out = B;

    #[inline(always)]
    fn take(slot: &mut Option<Halves<A, B>>) -> Option<B> {
        slot.as_mut()?.1.take()
    }
}

/// The join, the fork ring's last reader: whether the message carried an
/// item (rather than only ending an upstream group); empties the slot.
pub(crate) struct Emptied;

impl<S: Send + 'static> Take<S> for Emptied {
    type Out = ();

    #[inline(always)]
    fn take(slot: &mut Option<S>) -> Option<()> {
        slot.take().map(drop)
    }
}

/// A branch's source: each item of the fork ring a group of its own (the
/// join pairs per item); messages that only end an upstream group are the
/// join's business, not the branch's.
pub(crate) struct EachItem<S>(pub(crate) S);

impl<X, S: Source<X>> Source<X> for EachItem<S> {
    #[inline]
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<X>, bool)) -> Result<usize, SourceEnd> {
        self.0.poll(&mut |seq, item, _| {
            if item.is_some() {
                f(seq, item, true);
            } else if is_barrier(seq) {
                f(seq, None, false);
            }
        })
    }

    fn ready(&self) -> bool {
        self.0.ready()
    }

    fn depth_probe(&self) -> DepthProbe {
        self.0.depth_probe()
    }

    fn capacity(&self) -> u64 {
        self.0.capacity()
    }
}

/// The branches' edges into a join, and what it gathered of the current
/// item: a pair of differently typed branches, or `n` of one type.
pub(crate) trait Gather: Send + 'static {
    /// What the join emits per combination.
    type Out: Send + 'static;
    /// How many branches.
    fn branches(&self) -> usize;
    /// Takes what has come of branch `k`'s current group: whether the
    /// group is closed, and how many messages were taken.
    fn read(&mut self, k: usize) -> Result<(bool, usize), SourceEnd>;
    /// Takes the barrier due next from branch `k`: `false` if it is not
    /// there yet.
    fn take_barrier(&mut self, k: usize) -> Result<bool, SourceEnd>;
    /// Whether `read(k)` would make progress now.
    fn ready(&self, k: usize) -> bool;
    /// Emits every combination of what was gathered, and forgets it;
    /// returns how many.
    fn emit(&mut self, f: &mut dyn FnMut(Self::Out)) -> usize;
    /// The depths of the branches' edges.
    fn depth_probes(&self) -> Vec<DepthProbe>;
    /// The slots of the branches' edges, together.
    fn capacity(&self) -> u64;
}

/// Takes one group, or what has come of it, from `src` into `buf`:
/// whether the group is closed, and how many messages were taken.
fn read_group<T: Send + 'static>(
    src: &mut RingSource<T, BusySpin>,
    buf: &mut Vec<T>,
) -> Result<(bool, usize), SourceEnd> {
    let (mut closed, mut taken) = (false, 0);
    loop {
        // A poll stops at the end of the group or of a batch; only an
        // empty edge ends the reading of an open group. An edge that closes
        // inside a group was halted.
        let n = src
            .poll_while(&mut |_, item, last| {
                buf.extend(item);
                closed = last;
                !last
            })
            .map_err(|_| SourceEnd::Halted)?;
        taken += n;
        if closed || n == 0 {
            return Ok((closed, taken));
        }
    }
}

/// A join of two branches into pairs (`fan_out`, `par`).
pub(crate) struct PairGather<C, D> {
    pub(crate) a: RingSource<C, BusySpin>,
    pub(crate) b: RingSource<D, BusySpin>,
    pub(crate) left: Vec<C>,
    pub(crate) right: Vec<D>,
}

impl<C, D> Gather for PairGather<C, D>
where
    C: Clone + Send + 'static,
    D: Clone + Send + 'static,
{
    type Out = (C, D);

    fn branches(&self) -> usize {
        2
    }

    fn read(&mut self, k: usize) -> Result<(bool, usize), SourceEnd> {
        match k {
            0 => read_group(&mut self.a, &mut self.left),
            _ => read_group(&mut self.b, &mut self.right),
        }
    }

    fn take_barrier(&mut self, k: usize) -> Result<bool, SourceEnd> {
        match k {
            0 => self.a.take_barrier(),
            _ => self.b.take_barrier(),
        }
    }

    fn ready(&self, k: usize) -> bool {
        match k {
            0 => self.a.ready(),
            _ => self.b.ready(),
        }
    }

    fn emit(&mut self, f: &mut dyn FnMut((C, D))) -> usize {
        let n = self.left.len() * self.right.len();
        crate::branch::pairs(&mut self.left, &mut self.right, f);
        n
    }

    fn depth_probes(&self) -> Vec<DepthProbe> {
        vec![self.a.depth_probe(), self.b.depth_probe()]
    }

    fn capacity(&self) -> u64 {
        self.a.capacity() + self.b.capacity()
    }
}

/// A join of `n` branches of one type into vectors (`fan_out_n`).
pub(crate) struct VecGather<O> {
    pub(crate) sources: Vec<RingSource<O, BusySpin>>,
    pub(crate) bufs: Vec<Vec<O>>,
}

impl<O: Clone + Send + 'static> Gather for VecGather<O> {
    type Out = Vec<O>;

    fn branches(&self) -> usize {
        self.sources.len()
    }

    fn read(&mut self, k: usize) -> Result<(bool, usize), SourceEnd> {
        read_group(&mut self.sources[k], &mut self.bufs[k])
    }

    fn take_barrier(&mut self, k: usize) -> Result<bool, SourceEnd> {
        self.sources[k].take_barrier()
    }

    fn ready(&self, k: usize) -> bool {
        self.sources[k].ready()
    }

    fn emit(&mut self, f: &mut dyn FnMut(Vec<O>)) -> usize {
        let mut n = 0;
        crate::branch::combinations(&mut self.bufs, &mut |v| {
            n += 1;
            f(v);
        });
        n
    }

    fn depth_probes(&self) -> Vec<DepthProbe> {
        self.sources.iter().map(Source::depth_probe).collect()
    }

    fn capacity(&self) -> u64 {
        self.sources.iter().map(Source::capacity).sum()
    }
}

/// The receiving side of a fork: the source of the station after it.
pub(crate) struct Join<G, S> {
    /// The fork ring, read last: where items and upstream groups end.
    pub(crate) fork: RingSource<S, BusySpin, Emptied>,
    pub(crate) gather: G,
    /// The item being joined: (seq, whether it closes the upstream group,
    /// the branch being read).
    pub(crate) current: Option<(u64, bool, usize)>,
    /// A barrier found in the fork ring, and the next branch to take it from.
    pub(crate) barrier: Option<(u64, usize)>,
    pub(crate) counters: Arc<UnitCounters>,
    /// Items joined and combinations handed on, published once per poll.
    pub(crate) joined: u64,
    pub(crate) delivered: u64,
}

/// How many messages one `poll` hands over at most.
const JOIN_BATCH: usize = 256;

impl<G: Gather, S: Send + 'static> Source<G::Out> for Join<G, S> {
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<G::Out>, bool)) -> Result<usize, SourceEnd> {
        let r = self.join(f);
        self.counters.items_in.store(self.joined, Ordering::Relaxed);
        self.counters
            .items_out
            .store(self.delivered, Ordering::Relaxed);
        r
    }

    fn ready(&self) -> bool {
        match (self.barrier, self.current) {
            (Some((_, k)), _) => self.gather.ready(k),
            (None, Some((_, _, k))) => self.gather.ready(k),
            (None, None) => self.fork.ready(),
        }
    }

    fn depth_probe(&self) -> DepthProbe {
        let probes = self.gather.depth_probes();
        Box::new(move || probes.iter().map(|p| p()).sum())
    }

    fn capacity(&self) -> u64 {
        self.gather.capacity()
    }
}

impl<G: Gather, S: Send + 'static> Join<G, S> {
    fn join(&mut self, f: &mut dyn FnMut(u64, Option<G::Out>, bool)) -> Result<usize, SourceEnd> {
        let mut n = 0;
        while n < JOIN_BATCH {
            if self.barrier.is_some() {
                // Every item before the barrier is joined: it waits first
                // on every branch's edge.
                let branches = self.gather.branches();
                let gather = &mut self.gather;
                match align(&mut self.barrier, branches, |k| gather.take_barrier(k))? {
                    Some(seq) => {
                        f(seq, None, false);
                        n += 1;
                        continue;
                    }
                    None => return Ok(n),
                }
            }
            let (seq, closes, mut k) = match self.current {
                Some(c) => c,
                None => match self.fork.take_one() {
                    Ok(None) => return Ok(n),
                    Ok(Some((seq, None, false))) if is_barrier(seq) => {
                        self.barrier = Some((seq, 0));
                        continue;
                    }
                    Ok(Some((seq, None, _))) => {
                        // An upstream group with no item.
                        f(seq, None, true);
                        n += 1;
                        continue;
                    }
                    Ok(Some((seq, Some(()), last))) => (seq, last, 0),
                    Err(SourceEnd::Closed) if n > 0 => return Ok(n),
                    Err(e) => return Err(e),
                },
            };
            while k < self.gather.branches() {
                let (closed, taken) = self.gather.read(k)?;
                n += taken;
                if !closed {
                    self.current = Some((seq, closes, k));
                    return Ok(n);
                }
                k += 1;
            }
            self.current = None;
            self.joined += 1;
            let emitted = self.gather.emit(&mut |o| f(seq, Some(o), false));
            self.delivered += emitted as u64;
            n += 1;
            if closes {
                f(seq, None, true);
            }
        }
        Ok(n)
    }
}
