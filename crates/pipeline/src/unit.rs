//! Units: what a deployment plan places, as the description lists them.
//!
//! A *unit* is a stage, the merge of a shard, or the join where the
//! branches of a fan-out, par, choice, merge or choose meet. The description
//! lists its units ([`Pipeline::units`](crate::Pipeline::units)); a plan
//! places them on workers.

/// What a unit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind {
    /// A stage (its machine may be fused combinators).
    Stage,
    /// Where a shard's copies meet again, in input order.
    Merge,
    /// Where the branches of a fan-out, par, choice, merge or choose meet:
    /// a fork's outputs for each item are paired, a choice's leave in input
    /// order. When every unit of the construct sits on one worker with the
    /// stage before it, the construct runs whole as this unit.
    Join,
}

/// One unit of a pipeline, as a plan sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct UnitInfo {
    /// The stage's name; for a construct run whole, its stages' names.
    pub name: String,
    /// The names of the stages (and routers) inside, which failures carry.
    pub stages: Vec<String>,
    /// The estimated cost of one item, in nanoseconds (declared with
    /// [`Pipeline::cost`](crate::Pipeline::cost); 1000 when not declared).
    pub cost_ns: f64,
    /// Whether the cost was declared or measured rather than assumed.
    pub cost_known: bool,
    /// Stage or merge.
    pub kind: UnitKind,
}

/// The cost assumed for a stage whose cost nobody declared or measured.
pub const DEFAULT_COST_NS: f64 = 1000.0;
