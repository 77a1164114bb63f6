//! The type-erased parts a [`Pipeline`](crate::Pipeline) is made of.
//!
//! A [`Node`] is one construct of the description (a stage, a sequence, a
//! fan-out, a shard, ...) with its input and output types visible and
//! everything else (machine, state, branch types) hidden behind `dyn`. The
//! sequential interpreter pushes one item at a time, depth first; the drawing
//! walks the same tree. A future deployment walks it too, to place stages.

mod fork;
mod route;
mod stage;

pub(crate) use fork::{combinations, pairs, FanOutN, FanOutNode, ParNode};
pub use route::shard_of;
pub(crate) use route::{
    no_such_branch, ChoiceNode, ChooseNode, MergeNode, ShardByKeyNode, ShardNode,
};
pub(crate) use stage::{CostNode, StageNode, ThenNode, TryStageNode};

use std::sync::Arc;

use crate::dot::{Dot, NodeId};
use crate::runtime::compile::{Compile, Open};
use crate::runtime::edge::Sink;
use crate::runtime::station::{UnitCounters, UnitSink};
use crate::runtime::{UnitInfo, UnitKind};
use crate::{Failure, Pipeline, StageState};

/// Where a node sends its outputs: each output together with the failure list
/// (handed along so the receiver may add to it).
pub(crate) type Emit<'a, O> = &'a mut dyn FnMut(O, &mut Vec<Failure>);

/// One construct of a pipeline description, from `I` to `O`.
pub(crate) trait Node<I, O>: Send + IntoDyn<I, O> {
    /// Runs `item`, which came from pipeline input number `seq`, through this
    /// part: outputs go to `emit` in order, rejected items to `failures`.
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, O>);

    /// Draws this part, fed by the nodes `from`; returns the nodes its
    /// outputs leave from.
    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId>;

    /// Appends the final state of every stage, in description order.
    fn states(self: Box<Self>, out: &mut Vec<StageState>);

    /// Appends the units a deployment plan places, in description order.
    fn units(&self, out: &mut Vec<UnitInfo>);

    /// Deploys this part behind the open station `up`.
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<O>;

    /// This part as unit `unit` of a station, fused in front of `next`.
    /// Any part can run as a [`UnitSink`] (a call through [`push`](Node::push));
    /// a stage runs its machine straight from the sink instead, one
    /// indirect call per item fewer.
    fn fuse(
        self: Box<Self>,
        unit: usize,
        counters: Arc<UnitCounters>,
        next: Box<dyn Sink<O>>,
    ) -> Box<dyn Sink<I>>
    where
        I: Send + 'static,
        O: Send + 'static,
    {
        Box::new(UnitSink::new(
            unit,
            Pipeline::from_box(self.into_dyn()),
            counters,
            next,
        ))
    }
}

/// Turns a boxed node into a boxed `dyn Node` (what [`Node::fuse`]'s
/// default needs, and cannot write itself for an unsized `Self`).
pub(crate) trait IntoDyn<I, O> {
    fn into_dyn(self: Box<Self>) -> Box<dyn Node<I, O>>;
}

impl<I, O, T: Node<I, O> + 'static> IntoDyn<I, O> for T {
    fn into_dyn(self: Box<Self>) -> Box<dyn Node<I, O>> {
        self
    }
}

/// The units of a construct with branches (fan-out, par, N-ary fan-out,
/// choice, merge, choose): every branch's, then the join where they meet,
/// named after the stages inside, since a construct whose units share a
/// worker runs whole as its join. Returns how many units each branch has.
pub(crate) fn fork_units(
    label: &str,
    parts: &[&dyn UnitsOf],
    out: &mut Vec<UnitInfo>,
) -> Vec<usize> {
    let start = out.len();
    let mut sizes = Vec::with_capacity(parts.len());
    for p in parts {
        let before = out.len();
        p.units_of(out);
        sizes.push(out.len() - before);
    }
    let names: Vec<&str> = out[start..]
        .iter()
        .filter(|u| u.kind == UnitKind::Stage)
        .map(|u| u.name.as_str())
        .collect();
    out.push(UnitInfo {
        name: format!("{label}({})", names.join(", ")),
        stages: Vec::new(),
        cost_ns: JOIN_COST_NS,
        cost_known: false,
        kind: UnitKind::Join,
    });
    sizes
}

/// The estimated cost of joining one item (a log read, a group read per
/// branch, the pairing).
const JOIN_COST_NS: f64 = 50.0;

/// How many units `parts` have, per part, and in all with the join.
pub(crate) fn fork_sizes(parts: &[&dyn UnitsOf]) -> (Vec<usize>, usize) {
    let mut v = Vec::new();
    let sizes = fork_units("", parts, &mut v);
    (sizes, v.len())
}

/// Something whose units can be listed: lets branches of different types
/// be summarised by one function.
pub(crate) trait UnitsOf {
    fn units_of(&self, out: &mut Vec<UnitInfo>);
}

impl<I, O> UnitsOf for crate::Pipeline<I, O> {
    fn units_of(&self, out: &mut Vec<UnitInfo>) {
        self.node.units(out);
    }
}
