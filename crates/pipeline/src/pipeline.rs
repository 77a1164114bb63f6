//! [`Pipeline`]: the typed description of stages and how items flow between them.

use crate::dot::{Dot, NodeId};
use crate::failure::{Failure, StageState};
use crate::node::common::{Emit, UnitsOf};
use crate::runtime::compile::Deploy;
use crate::unit::UnitInfo;

/// A pipeline from `I` to `O`: named stages, each a state machine with its
/// own state, connected by sequence, fan-out, par, choice and shards.
///
/// A `Pipeline` only describes; [`run_sequential`](Pipeline::run_sequential)
/// gives its meaning, which every deployment must reproduce. Types line up
/// at every connection, so a mismatch is a compile error:
///
/// ```compile_fail,E0308
/// use statepipe_pipeline::Pipeline;
///
/// let count = Pipeline::map("count", |s: String| s.len());
/// let shout = Pipeline::map("shout", |s: String| s.to_uppercase());
/// let _ = count.then(shout); // usize into a String stage
/// ```
///
/// ```compile_fail,E0308
/// use statepipe_pipeline::Pipeline;
///
/// let a = Pipeline::map("a", |x: u32| x);
/// let b = Pipeline::map("b", |x: i64| x);
/// let _ = a.fan_out(b); // both branches must read the same input type
/// ```
///
/// ```compile_fail,E0308
/// use statepipe_pipeline::Pipeline;
///
/// let a = Pipeline::map("a", |x: u32| x);
/// let b = Pipeline::map("b", |x: u32| x as i64);
/// let _ = a.merge(b); // merged branches must emit the same type
/// ```
///
/// ```compile_fail,E0308
/// use statepipe_pipeline::{Either, Pipeline};
///
/// let c = Pipeline::map("a", |x: u32| x).choice(Pipeline::map("b", |x: u8| x));
/// let route = Pipeline::map("route", |x: u32| Either::<u32, u32>::Left(x));
/// let _ = route.then(c); // the choice's right side reads u8, not u32
/// ```
pub struct Pipeline<I, O> {
    pub(crate) node: Box<dyn Deploy<I, O>>,
}

impl<I, O> Pipeline<I, O> {
    /// Wraps a part.
    pub(crate) fn from_node(node: impl Deploy<I, O> + 'static) -> Self {
        Pipeline {
            node: Box::new(node),
        }
    }

    pub(crate) fn push(
        &mut self,
        seq: u64,
        item: I,
        failures: &mut Vec<Failure>,
        emit: Emit<'_, O>,
    ) {
        self.node.push(seq, item, failures, emit);
    }

    pub(crate) fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        self.node.draw(dot, from)
    }

    pub(crate) fn states(self, out: &mut Vec<StageState>) {
        self.node.states(out);
    }
}

impl<I, O> UnitsOf for Pipeline<I, O> {
    fn units_of(&self, out: &mut Vec<UnitInfo>) {
        self.node.units(out);
    }
}
