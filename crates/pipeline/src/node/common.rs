//! The trait every construct of a description implements, and what the
//! constructs with branches share.

use crate::dot::{Dot, NodeId};
use crate::failure::{Failure, StageState};
use crate::state::Visit;
use crate::unit::{UnitInfo, UnitKind};

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

    /// Calls `f` on every stage, in description order (checkpoints,
    /// restores and upgrades reach the states this way).
    fn visit(&mut self, f: Visit<'_>);
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
