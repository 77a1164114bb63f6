//! Branches that all see the item and whose outputs are paired: fan-out, par,
//! N-ary fan-out.
//!
//! Each branch may emit `0..n` outputs per item; the pairing emits every
//! combination (the list meaning of `&&&`), first branch outermost. An item
//! that fails in a branch has no output there, so it produces no pair.
//!
//! Deployed, a fork whose units all sit on one worker with the stage
//! before it runs whole there (one call per item). Otherwise its branches
//! read one multicast ring and a join pairs their outputs
//! ([`runtime::fork`](crate::runtime::fork)).

use super::{fork_sizes, fork_units, Emit, Node, UnitsOf};
use crate::dot::{Dot, NodeId, Shape};
use crate::runtime::compile::{Compile, Open};
use crate::runtime::fork::{
    CloneOut, FirstHalf, Halves, MoveOut, PairGather, SecondHalf, Shared, VecGather,
};
use crate::runtime::Take;
use crate::runtime::UnitInfo;
use crate::{Failure, Pipeline, StageState};

/// Emits every pair of `left` × `right`, `left` outermost, and empties both.
pub(crate) fn pairs<C: Clone, D: Clone>(
    left: &mut Vec<C>,
    right: &mut Vec<D>,
    emit: &mut dyn FnMut((C, D)),
) {
    if let Some((last, rest)) = right.split_last() {
        for c in left.drain(..) {
            for d in rest {
                emit((c.clone(), d.clone()));
            }
            emit((c, last.clone()));
        }
    }
    left.clear();
    right.clear();
}

/// Emits every combination of one element per buffer (a vector, element
/// `k` from buffer `k`), the first buffer outermost, and empties them all;
/// nothing if any is empty.
pub(crate) fn combinations<O: Clone>(bufs: &mut [Vec<O>], emit: &mut dyn FnMut(Vec<O>)) {
    if bufs.iter().all(|b| !b.is_empty()) {
        // A mixed-radix counter over the buffers, last fastest.
        let mut idx = vec![0usize; bufs.len()];
        'all: loop {
            emit(
                idx.iter()
                    .zip(bufs.iter())
                    .map(|(&i, b)| b[i].clone())
                    .collect(),
            );
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                if idx[k] < bufs[k].len() {
                    continue 'all;
                }
                idx[k] = 0;
            }
            break;
        }
    }
    bufs.iter_mut().for_each(Vec::clear);
}

/// Deploys a fork of two branches across workers: a fork ring of slots `S`
/// (each item made one by `into`), each branch taking its input out of the
/// slot with its `Take`, and a join into pairs that starts with the buffers
/// `bufs`. `sizes` are the branches' unit counts.
fn deploy_pair<I, S, X, Y, C, D, KA, KB>(
    cx: &mut Compile,
    up: Open<I>,
    sizes: &[usize],
    (a, _): (Pipeline<X, C>, KA),
    (b, _): (Pipeline<Y, D>, KB),
    into: fn(I) -> S,
    (left, right): (Vec<C>, Vec<D>),
) -> Open<(C, D)>
where
    I: Send + 'static,
    S: Send + 'static,
    X: Send + 'static,
    Y: Send + 'static,
    C: Clone + Send + 'static,
    D: Clone + Send + 'static,
    KA: Take<S, Out = X>,
    KB: Take<S, Out = Y>,
{
    let mut ring = cx.fork_ring::<I, S>(&up, sizes);
    let a_in = cx.branch::<S, KA>(&mut ring);
    let a_out = a.node.deploy(cx, a_in);
    let b_in = cx.branch::<S, KB>(&mut ring);
    let b_out = b.node.deploy(cx, b_in);
    let j = cx.join_unit();
    let gather = PairGather {
        a: cx.join_input(a_out, j),
        b: cx.join_input(b_out, j),
        left,
        right,
    };
    cx.join(up, ring, into, gather, j)
}

/// Both branches read every item: `Pipeline::fan_out`.
pub(crate) struct FanOutNode<I, C, D> {
    pub(crate) a: Pipeline<I, C>,
    pub(crate) b: Pipeline<I, D>,
    pub(crate) left: Vec<C>,
    pub(crate) right: Vec<D>,
}

impl<I, C, D> Node<I, (C, D)> for FanOutNode<I, C, D>
where
    I: Clone + Send + 'static,
    C: Clone + Send + 'static,
    D: Clone + Send + 'static,
{
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, (C, D)>) {
        let (left, right) = (&mut self.left, &mut self.right);
        self.a
            .push(seq, item.clone(), failures, &mut |c, _| left.push(c));
        self.b.push(seq, item, failures, &mut |d, _| right.push(d));
        pairs(left, right, &mut |p| emit(p, failures));
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        draw_pair(
            dot,
            from,
            "fan-out",
            |dot, at| self.a.draw(dot, at),
            |dot, at| self.b.draw(dot, at),
        )
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.a.states(out);
        self.b.states(out);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        fork_units("fan-out", &[&self.a, &self.b], out);
    }

    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<(C, D)> {
        let (sizes, n) = fork_sizes(&[&self.a, &self.b]);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(Pipeline::from_box(self), up, n);
        }
        let me = *self;
        let (a, b) = ((me.a, CloneOut), (me.b, MoveOut));
        deploy_pair(cx, up, &sizes, a, b, Some, (me.left, me.right))
    }
}

/// One branch per half of a pair: `Pipeline::par`.
pub(crate) struct ParNode<A, B, C, D> {
    pub(crate) a: Pipeline<A, C>,
    pub(crate) b: Pipeline<B, D>,
    pub(crate) left: Vec<C>,
    pub(crate) right: Vec<D>,
}

impl<A, B, C, D> Node<(A, B), (C, D)> for ParNode<A, B, C, D>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Clone + Send + 'static,
    D: Clone + Send + 'static,
{
    fn push(
        &mut self,
        seq: u64,
        item: (A, B),
        failures: &mut Vec<Failure>,
        emit: Emit<'_, (C, D)>,
    ) {
        let (x, y) = item;
        let (left, right) = (&mut self.left, &mut self.right);
        self.a.push(seq, x, failures, &mut |c, _| left.push(c));
        self.b.push(seq, y, failures, &mut |d, _| right.push(d));
        pairs(left, right, &mut |p| emit(p, failures));
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        draw_pair(
            dot,
            from,
            "unpair",
            |dot, at| self.a.draw(dot, at),
            |dot, at| self.b.draw(dot, at),
        )
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.a.states(out);
        self.b.states(out);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        fork_units("par", &[&self.a, &self.b], out);
    }

    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<(A, B)>) -> Open<(C, D)> {
        let (sizes, n) = fork_sizes(&[&self.a, &self.b]);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(Pipeline::from_box(self), up, n);
        }
        let me = *self;
        // Each branch moves its own half out; the second empties the slot.
        let (a, b) = ((me.a, FirstHalf), (me.b, SecondHalf));
        let into = |(x, y)| (Some(x), Some(y));
        deploy_pair::<_, Halves<A, B>, _, _, _, _, _, _>(
            cx,
            up,
            &sizes,
            a,
            b,
            into,
            (me.left, me.right),
        )
    }
}

/// Every branch reads every item; outputs are vectors, one element per
/// branch: `Pipeline::fan_out_n`.
pub(crate) struct FanOutN<I, O> {
    pub(crate) branches: Vec<Pipeline<I, O>>,
    pub(crate) bufs: Vec<Vec<O>>,
}

impl<I, O> Node<I, Vec<O>> for FanOutN<I, O>
where
    I: Clone + Send + 'static,
    O: Clone + Send + 'static,
{
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, Vec<O>>) {
        for (branch, buf) in self.branches.iter_mut().zip(self.bufs.iter_mut()) {
            branch.push(seq, item.clone(), failures, &mut |o, _| buf.push(o));
        }
        combinations(&mut self.bufs, &mut |v| emit(v, failures));
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        let fork = dot.node(&format!("fan-out ×{}", self.branches.len()), Shape::Split);
        dot.edges(from, fork);
        let join = dot.node("tuple", Shape::Join);
        for b in &self.branches {
            let outs = b.draw(dot, &[fork]);
            dot.edges(&outs, join);
        }
        vec![join]
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.branches.into_iter().for_each(|b| b.states(out));
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        let parts: Vec<&dyn UnitsOf> = self.branches.iter().map(|b| b as &dyn UnitsOf).collect();
        fork_units("fan-out", &parts, out);
    }

    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<Vec<O>> {
        let parts: Vec<&dyn UnitsOf> = self.branches.iter().map(|b| b as &dyn UnitsOf).collect();
        let (sizes, n) = fork_sizes(&parts);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(Pipeline::from_box(self), up, n);
        }
        let me = *self;
        let mut ring = cx.fork_ring::<I, Shared<I>>(&up, &sizes);
        let last = me.branches.len() - 1;
        let mut outs = Vec::with_capacity(me.branches.len());
        for (k, branch) in me.branches.into_iter().enumerate() {
            let open = if k == last {
                cx.branch::<Shared<I>, MoveOut>(&mut ring)
            } else {
                cx.branch::<Shared<I>, CloneOut>(&mut ring)
            };
            outs.push(branch.node.deploy(cx, open));
        }
        let j = cx.join_unit();
        let gather = VecGather {
            sources: outs.into_iter().map(|o| cx.join_input(o, j)).collect(),
            bufs: me.bufs,
        };
        cx.join(up, ring, Some, gather, j)
    }
}

/// Draws a split into two branches joined back into pairs.
fn draw_pair(
    dot: &mut Dot,
    from: &[NodeId],
    label: &str,
    a: impl FnOnce(&mut Dot, &[NodeId]) -> Vec<NodeId>,
    b: impl FnOnce(&mut Dot, &[NodeId]) -> Vec<NodeId>,
) -> Vec<NodeId> {
    let fork = dot.node(label, Shape::Split);
    dot.edges(from, fork);
    let a = a(dot, &[fork]);
    let b = b(dot, &[fork]);
    let join = dot.node("pair", Shape::Join);
    dot.edges(&a, join);
    dot.edges(&b, join);
    vec![join]
}
