//! Lowering the description onto stations: how each construct of a
//! [`Pipeline`] deploys ([`Deploy`]), and how a stage runs fused
//! ([`Piece`]).

use std::error::Error;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use super::compile::{Compile, Deploy, Open, Routes};
use super::edge::{Move, Sink, Take};
use super::fork::{
    CloneOut, FirstHalf, Halves, MoveOut, PairGather, SecondHalf, Shared, VecGather,
};
use super::route::{ByKey, LeftSide, RightSide, RoundRobin, Route, Side};
use super::station::{Piece, UnitCounters, UnitSink};
use crate::either::Either;
use crate::failure::{Failure, StageState};
use crate::machine::Machine;
use crate::node::common::{fork_sizes, UnitsOf};
use crate::node::fork::{FanOutN, FanOutNode, ParNode};
use crate::node::route::{ChoiceNode, ChooseNode, MergeNode, ShardByKeyNode, ShardNode};
use crate::node::stage::{CostNode, StageNode, ThenNode, TryStageNode};
use crate::pipeline::Pipeline;
use crate::state::{shard_state_name, Visit};
use crate::upgrade::UpgradableNode;

impl<S, M> Deploy<M::In, M::Out> for StageNode<S, M>
where
    S: Send + 'static,
    M: Machine<S> + Send + 'static,
    M::In: Send + 'static,
    M::Out: Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<M::In>) -> Open<M::Out> {
        cx.unit(self, up)
    }

    fn fuse(
        self: Box<Self>,
        unit: usize,
        counters: Arc<UnitCounters>,
        next: Box<dyn Sink<M::Out>>,
    ) -> Box<dyn Sink<M::In>> {
        Box::new(UnitSink::new(unit, *self, counters, next))
    }
}

/// A fused stage runs its machine straight from the station's sink chain.
impl<S, M> Piece<M::In, M::Out> for StageNode<S, M>
where
    S: Send + 'static,
    M: Machine<S> + Send + 'static,
    M::In: Send + 'static,
    M::Out: Send + 'static,
{
    #[inline]
    fn run<E: FnMut(M::Out, &mut Vec<Failure>)>(
        &mut self,
        seq: u64,
        item: M::In,
        failures: &mut Vec<Failure>,
        emit: &mut E,
    ) {
        StageNode::run(self, seq, item, failures, emit);
    }

    fn states(self, out: &mut Vec<StageState>) {
        StageNode::states(self, out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        f(self);
    }
}

impl<S, M, O, Er> Deploy<M::In, O> for TryStageNode<S, M, O>
where
    S: Send + 'static,
    M: Machine<S, Out = Result<O, Er>> + Send + 'static,
    M::In: Clone + Debug + Send + 'static,
    O: Send + 'static,
    Er: 'static,
    Er: Into<Box<dyn Error + Send + Sync>>,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<M::In>) -> Open<O> {
        cx.unit(self, up)
    }

    fn fuse(
        self: Box<Self>,
        unit: usize,
        counters: Arc<UnitCounters>,
        next: Box<dyn Sink<O>>,
    ) -> Box<dyn Sink<M::In>> {
        Box::new(UnitSink::new(unit, *self, counters, next))
    }
}

/// A fused fallible stage, like a fused stage: its machine is called
/// straight from the station's sink chain.
impl<S, M, O, Er> Piece<M::In, O> for TryStageNode<S, M, O>
where
    S: Send + 'static,
    M: Machine<S, Out = Result<O, Er>> + Send + 'static,
    M::In: Clone + Debug + Send + 'static,
    O: Send + 'static,
    Er: 'static,
    Er: Into<Box<dyn Error + Send + Sync>>,
{
    #[inline]
    fn run<E: FnMut(O, &mut Vec<Failure>)>(
        &mut self,
        seq: u64,
        item: M::In,
        failures: &mut Vec<Failure>,
        emit: &mut E,
    ) {
        TryStageNode::run(self, seq, item, failures, emit);
    }

    fn states(self, out: &mut Vec<StageState>) {
        TryStageNode::states(self, out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        f(self);
    }
}

/// An upgradable stage is one unit, run through its `push` (one more
/// indirect call than a plain stage), so its machine can be replaced.
impl<I: Send + 'static, O: Send + 'static> Deploy<I, O> for UpgradableNode<I, O> {
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<O> {
        cx.unit(self, up)
    }
}

impl<A, B, C> Deploy<A, C> for ThenNode<A, B, C>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<A>) -> Open<C> {
        let mid = self.a.node.deploy(cx, up);
        self.b.node.deploy(cx, mid)
    }
}

impl<I: Send + 'static, O: Send + 'static> Deploy<I, O> for CostNode<I, O> {
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<O> {
        self.inner.node.deploy(cx, up)
    }
}

impl<I, C, D> Deploy<I, (C, D)> for FanOutNode<I, C, D>
where
    I: Clone + Send + 'static,
    C: Clone + Send + 'static,
    D: Clone + Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<(C, D)> {
        let (sizes, n) = fork_sizes(&[&self.a, &self.b]);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(self, up, n);
        }
        let me = *self;
        let (a, b) = ((me.a, CloneOut), (me.b, MoveOut));
        deploy_pair(cx, up, &sizes, a, b, Some, (me.left, me.right))
    }
}

impl<A, B, C, D> Deploy<(A, B), (C, D)> for ParNode<A, B, C, D>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Clone + Send + 'static,
    D: Clone + Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<(A, B)>) -> Open<(C, D)> {
        let (sizes, n) = fork_sizes(&[&self.a, &self.b]);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(self, up, n);
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

impl<I, O> Deploy<I, Vec<O>> for FanOutN<I, O>
where
    I: Clone + Send + 'static,
    O: Clone + Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<Vec<O>> {
        let parts: Vec<&dyn UnitsOf> = self.branches.iter().map(|b| b as &dyn UnitsOf).collect();
        let (sizes, n) = fork_sizes(&parts);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(self, up, n);
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

impl<A, B, C, D> Deploy<Either<A, B>, Either<C, D>> for ChoiceNode<A, B, C, D>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
    D: Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<Either<A, B>>) -> Open<Either<C, D>> {
        let (_, n) = fork_sizes(&[&self.a, &self.b]);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(self, up, n);
        }
        let me = *self;
        deploy_sides(
            cx,
            up,
            (me.a, |o| o.map(Either::Left)),
            (me.b, |o| o.map(Either::Right)),
        )
    }
}

impl<A, B, C> Deploy<Either<A, B>, C> for MergeNode<A, B, C>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<Either<A, B>>) -> Open<C> {
        let (_, n) = fork_sizes(&[&self.a, &self.b]);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(self, up, n);
        }
        let me = *self;
        deploy_sides(cx, up, (me.a, |o| o), (me.b, |o| o))
    }
}

impl<I, O, F> Deploy<I, O> for ChooseNode<I, O, F>
where
    I: Debug + Send + 'static,
    O: Send + 'static,
    F: FnMut(&I) -> usize + Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<O> {
        let parts: Vec<&dyn UnitsOf> = self.branches.iter().map(|b| b as &dyn UnitsOf).collect();
        let (_, n) = fork_sizes(&parts);
        if cx.fits_whole(up.worker, n) {
            return cx.whole(self, up, n);
        }
        let me = *self;
        let mut routes = Routes::new();
        let mut outs = Vec::with_capacity(me.branches.len());
        for branch in me.branches {
            let open = cx.route_branch::<_, Move>(&mut routes, &up);
            outs.push(branch.node.deploy(cx, open));
        }
        let m = cx.join_unit();
        let inputs = outs.into_iter().map(|o| cx.join_input(o, m)).collect();
        let pick = Route {
            name: me.name,
            route: me.route,
        };
        cx.route_close(up, routes, pick, inputs, m)
    }
}

impl<I: Send + 'static, O: Send + 'static> Deploy<I, O> for ShardNode<I, O> {
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<O> {
        let mut me = *self;
        let name = shard_state_name(me.first_stage().as_deref());
        cx.shard(
            me.copies.into_iter().map(|c| c.node).collect(),
            RoundRobin {
                next: me.next,
                name,
            },
            up,
        )
    }
}

impl<I, O, K, F> Deploy<I, O> for ShardByKeyNode<I, O, F>
where
    I: Send + 'static,
    O: Send + 'static,
    K: Hash + 'static,
    F: FnMut(&I) -> K + Send + 'static,
{
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<O> {
        let me = *self;
        cx.shard(
            me.copies.into_iter().map(|c| c.node).collect(),
            ByKey(me.key),
            up,
        )
    }
}

/// How a choice's branch end becomes the choice's output.
type Tag<C, O> = fn(Open<C>) -> Open<O>;

/// Deploys the two sides of a choice across workers: a router by side,
/// each branch on its own edge (its end passed through its `tag`, which
/// may wrap it in the side it came from), and a merge in input order.
fn deploy_sides<A, B, C, D, O>(
    cx: &mut Compile,
    up: Open<Either<A, B>>,
    (a, tag_a): (Pipeline<A, C>, Tag<C, O>),
    (b, tag_b): (Pipeline<B, D>, Tag<D, O>),
) -> Open<O>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
    D: Send + 'static,
    O: Send + 'static,
{
    let mut routes = Routes::new();
    let a_in = cx.route_branch::<_, LeftSide>(&mut routes, &up);
    let a_out = tag_a(a.node.deploy(cx, a_in));
    let b_in = cx.route_branch::<_, RightSide>(&mut routes, &up);
    let b_out = tag_b(b.node.deploy(cx, b_in));
    let m = cx.join_unit();
    let inputs = vec![cx.join_input(a_out, m), cx.join_input(b_out, m)];
    cx.route_close(up, routes, Side, inputs, m)
}
