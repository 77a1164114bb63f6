//! Branches that each see some of the items: choice, merge, N-ary choice and
//! the two kinds of shard.
//!
//! In the sequential meaning every item goes through its branch at once, so
//! outputs leave in input order. A deployment must keep that order for
//! `shard` (merging by sequence number) and per key for `shard_by_key`.

use std::fmt::Debug;
use std::hash::Hash;

use super::common::{fork_units, Emit, Node, UnitsOf};
use crate::branch::{no_such_branch, shard_of};
use crate::dot::{Dot, NodeId, Shape};
use crate::either::Either;
use crate::failure::{Failure, StageState};
use crate::pipeline::Pipeline;
use crate::state::{shard_state_name, CounterCell, Visit};
use crate::unit::{UnitInfo, UnitKind};

/// `Left` items to `a`, `Right` items to `b`, outputs tagged: `Pipeline::choice`.
pub(crate) struct ChoiceNode<A, B, C, D> {
    pub(crate) a: Pipeline<A, C>,
    pub(crate) b: Pipeline<B, D>,
}

impl<A, B, C, D> Node<Either<A, B>, Either<C, D>> for ChoiceNode<A, B, C, D>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
    D: Send + 'static,
{
    fn push(
        &mut self,
        seq: u64,
        item: Either<A, B>,
        failures: &mut Vec<Failure>,
        emit: Emit<'_, Either<C, D>>,
    ) {
        match item {
            Either::Left(x) => self
                .a
                .push(seq, x, failures, &mut |c, f| emit(Either::Left(c), f)),
            Either::Right(y) => self
                .b
                .push(seq, y, failures, &mut |d, f| emit(Either::Right(d), f)),
        }
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        draw_branches(
            dot,
            from,
            "choice",
            "either",
            [&self.a as &dyn Draw, &self.b],
        )
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.a.states(out);
        self.b.states(out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        self.a.node.visit(f);
        self.b.node.visit(f);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        fork_units("choice", &[&self.a, &self.b], out);
    }
}

/// `Left` items to `a`, `Right` items to `b`, outputs merged: `Pipeline::merge`.
pub(crate) struct MergeNode<A, B, C> {
    pub(crate) a: Pipeline<A, C>,
    pub(crate) b: Pipeline<B, C>,
}

impl<A, B, C> Node<Either<A, B>, C> for MergeNode<A, B, C>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
{
    fn push(
        &mut self,
        seq: u64,
        item: Either<A, B>,
        failures: &mut Vec<Failure>,
        emit: Emit<'_, C>,
    ) {
        match item {
            Either::Left(x) => self.a.push(seq, x, failures, emit),
            Either::Right(y) => self.b.push(seq, y, failures, emit),
        }
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        draw_branches(
            dot,
            from,
            "choice",
            "merge",
            [&self.a as &dyn Draw, &self.b],
        )
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.a.states(out);
        self.b.states(out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        self.a.node.visit(f);
        self.b.node.visit(f);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        fork_units("merge", &[&self.a, &self.b], out);
    }
}

/// Each item to the branch `route` picks: `Pipeline::choose`.
pub(crate) struct ChooseNode<I, O, F> {
    pub(crate) name: String,
    pub(crate) route: F,
    pub(crate) branches: Vec<Pipeline<I, O>>,
}

impl<I, O, F> Node<I, O> for ChooseNode<I, O, F>
where
    I: Debug + Send + 'static,
    O: Send + 'static,
    F: FnMut(&I) -> usize + Send + 'static,
{
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, O>) {
        let k = (self.route)(&item);
        let n = self.branches.len();
        match self.branches.get_mut(k) {
            Some(branch) => branch.push(seq, item, failures, emit),
            None => failures.push(no_such_branch(&self.name, seq, item, k, n)),
        }
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        let branches: Vec<&dyn Draw> = self.branches.iter().map(|b| b as &dyn Draw).collect();
        draw_routes(dot, from, &self.name, "merge", branches, true)
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.branches.into_iter().for_each(|b| b.states(out));
    }

    fn visit(&mut self, f: Visit<'_>) {
        for b in &mut self.branches {
            b.node.visit(f);
        }
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        let parts: Vec<&dyn UnitsOf> = self.branches.iter().map(|b| b as &dyn UnitsOf).collect();
        fork_units(&self.name, &parts, out);
    }
}

/// Item number `i` (counted at the shard's input) to copy `i % n`:
/// `Pipeline::shard`.
pub(crate) struct ShardNode<I, O> {
    pub(crate) copies: Vec<Pipeline<I, O>>,
    pub(crate) next: u64,
}

impl<I: Send + 'static, O: Send + 'static> Node<I, O> for ShardNode<I, O> {
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, O>) {
        let n = self.copies.len() as u64;
        let copy = (self.next % n) as usize;
        self.next += 1;
        self.copies[copy].push(seq, item, failures, emit);
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        let n = self.copies.len();
        draw_copies(dot, from, &format!("shard ×{n} (i mod {n})"), &self.copies)
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.copies.into_iter().for_each(|c| c.states(out));
    }

    fn visit(&mut self, f: Visit<'_>) {
        let name = shard_state_name(self.first_stage().as_deref());
        f(&mut CounterCell {
            name,
            value: &mut self.next,
        });
        for c in &mut self.copies {
            c.node.visit(f);
        }
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        copy_units(&self.copies, out);
    }
}

impl<I, O> ShardNode<I, O> {
    /// The name of the first stage of the first copy.
    pub(crate) fn first_stage(&mut self) -> Option<String> {
        let mut first = None;
        self.copies[0].node.visit(&mut |c| {
            first.get_or_insert_with(|| c.name().to_string());
        });
        first
    }
}

/// The units of a shard: every copy's, then the merge.
fn copy_units<I, O>(copies: &[Pipeline<I, O>], out: &mut Vec<UnitInfo>) {
    for c in copies {
        c.units_of(out);
    }
    out.push(UnitInfo {
        name: format!("merge ×{}", copies.len()),
        stages: Vec::new(),
        cost_ns: MERGE_COST_NS,
        cost_known: false,
        kind: UnitKind::Merge,
    });
}

/// The estimated cost of merging one item (a route-log read and a group
/// read on two rings).
const MERGE_COST_NS: f64 = 50.0;

/// Each item to the copy its key hashes to: `Pipeline::shard_by_key`.
pub(crate) struct ShardByKeyNode<I, O, F> {
    pub(crate) copies: Vec<Pipeline<I, O>>,
    pub(crate) key: F,
}

impl<I, O, K, F> Node<I, O> for ShardByKeyNode<I, O, F>
where
    I: Send + 'static,
    O: Send + 'static,
    K: Hash + 'static,
    F: FnMut(&I) -> K + Send + 'static,
{
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, O>) {
        let copy = shard_of(&(self.key)(&item), self.copies.len());
        self.copies[copy].push(seq, item, failures, emit);
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        draw_copies(
            dot,
            from,
            &format!("shard ×{} by key", self.copies.len()),
            &self.copies,
        )
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.copies.into_iter().for_each(|c| c.states(out));
    }

    fn visit(&mut self, f: Visit<'_>) {
        for c in &mut self.copies {
            c.node.visit(f);
        }
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        copy_units(&self.copies, out);
    }
}

/// Something that can be drawn from some nodes: lets branches of different
/// types be drawn by one function.
trait Draw {
    fn draw_from(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId>;
}

impl<I, O> Draw for Pipeline<I, O> {
    fn draw_from(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        self.draw(dot, from)
    }
}

fn draw_branches<'a>(
    dot: &mut Dot,
    from: &[NodeId],
    split: &str,
    join: &str,
    branches: impl IntoIterator<Item = &'a dyn Draw>,
) -> Vec<NodeId> {
    draw_routes(dot, from, split, join, branches, false)
}

/// Draws a router named `split`, its branches, and where they meet, `join`;
/// a router that can reject items gets an edge to the error output.
fn draw_routes<'a>(
    dot: &mut Dot,
    from: &[NodeId],
    split: &str,
    join: &str,
    branches: impl IntoIterator<Item = &'a dyn Draw>,
    may_fail: bool,
) -> Vec<NodeId> {
    let fork = dot.node(split, Shape::Split);
    if may_fail {
        dot.may_fail(fork);
    }
    dot.edges(from, fork);
    let outs: Vec<NodeId> = branches
        .into_iter()
        .flat_map(|b| b.draw_from(dot, &[fork]))
        .collect();
    let merge = dot.node(join, Shape::Join);
    dot.edges(&outs, merge);
    vec![merge]
}

fn draw_copies<I, O>(
    dot: &mut Dot,
    from: &[NodeId],
    label: &str,
    copies: &[Pipeline<I, O>],
) -> Vec<NodeId> {
    let fork = dot.node(label, Shape::Split);
    dot.edges(from, fork);
    let mut outs = Vec::new();
    for (k, c) in copies.iter().enumerate() {
        dot.begin_cluster(&format!("copy {k}"));
        outs.extend(c.draw(dot, &[fork]));
        dot.end_cluster();
    }
    let merge = dot.node("merge by seq", Shape::Join);
    dot.edges(&outs, merge);
    vec![merge]
}
