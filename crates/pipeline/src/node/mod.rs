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

pub(crate) use fork::{FanOutN, FanOutNode, ParNode};
pub use route::shard_of;
pub(crate) use route::{ChoiceNode, ChooseNode, MergeNode, ShardByKeyNode, ShardNode};
pub(crate) use stage::{CostNode, StageNode, ThenNode, TryStageNode};

use crate::dot::{Dot, NodeId};
use crate::runtime::compile::{Compile, Open};
use crate::runtime::{UnitInfo, UnitKind};
use crate::{Failure, StageState};

/// Where a node sends its outputs: each output together with the failure list
/// (handed along so the receiver may add to it).
pub(crate) type Emit<'a, O> = &'a mut dyn FnMut(O, &mut Vec<Failure>);

/// One construct of a pipeline description, from `I` to `O`.
pub(crate) trait Node<I, O>: Send {
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
}

/// The one unit of a construct that runs whole on one worker: its stages'
/// names joined, their costs summed.
pub(crate) fn whole_unit(label: &str, parts: &[&dyn UnitsOf], out: &mut Vec<UnitInfo>) {
    let mut inner = Vec::new();
    for p in parts {
        p.units_of(&mut inner);
    }
    let mut stages: Vec<String> = inner.iter().flat_map(|u| u.stages.clone()).collect();
    let names: Vec<&str> = inner.iter().map(|u| u.name.as_str()).collect();
    let name = format!("{label}({})", names.join(", "));
    stages.push(label.to_string());
    out.push(UnitInfo {
        name,
        stages,
        cost_ns: inner.iter().map(|u| u.cost_ns).sum(),
        cost_known: inner.iter().all(|u| u.cost_known),
        kind: UnitKind::Stage,
    });
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
