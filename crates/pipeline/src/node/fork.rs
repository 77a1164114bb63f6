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

use super::common::{fork_units, Emit, Node, UnitsOf};
use crate::branch::{combinations, pairs};
use crate::dot::{Dot, NodeId, Shape};
use crate::failure::{Failure, StageState};
use crate::pipeline::Pipeline;
use crate::state::Visit;
use crate::unit::UnitInfo;

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

    fn visit(&mut self, f: Visit<'_>) {
        self.a.node.visit(f);
        self.b.node.visit(f);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        fork_units("fan-out", &[&self.a, &self.b], out);
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

    fn visit(&mut self, f: Visit<'_>) {
        self.a.node.visit(f);
        self.b.node.visit(f);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        fork_units("par", &[&self.a, &self.b], out);
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

    fn visit(&mut self, f: Visit<'_>) {
        for b in &mut self.branches {
            b.node.visit(f);
        }
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        let parts: Vec<&dyn UnitsOf> = self.branches.iter().map(|b| b as &dyn UnitsOf).collect();
        fork_units("fan-out", &parts, out);
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
