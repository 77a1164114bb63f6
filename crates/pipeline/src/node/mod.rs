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
pub(crate) use stage::{StageNode, ThenNode, TryStageNode};

use crate::dot::{Dot, NodeId};
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
}
