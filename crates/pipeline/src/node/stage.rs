//! Stages (one state machine each) and their sequencing.

use std::error::Error;
use std::fmt::Debug;
use std::marker::PhantomData;

use super::common::{Emit, Node};
use crate::dot::{Dot, NodeId, Shape};
use crate::failure::{Failure, StageState};
use crate::machine::Machine;
use crate::pipeline::Pipeline;
use crate::state::{Codec, Copied, Snapshot, StageCell, Visit};
use crate::unit::{UnitInfo, UnitKind, DEFAULT_COST_NS};

/// The one unit of a stage named `name`, its cost not yet known.
fn stage_unit(name: &str) -> UnitInfo {
    UnitInfo {
        name: name.to_string(),
        stages: vec![name.to_string()],
        cost_ns: DEFAULT_COST_NS,
        cost_known: false,
        kind: UnitKind::Stage,
    }
}

/// Draws a stage named `name`, fed by `from`.
fn draw_stage(dot: &mut Dot, from: &[NodeId], name: &str, shape: Shape) -> Vec<NodeId> {
    let me = dot.node(name, shape);
    dot.edges(from, me);
    vec![me]
}

/// A named state machine with its state.
pub(crate) struct StageNode<S, M> {
    pub(crate) name: String,
    pub(crate) state: S,
    pub(crate) machine: M,
    /// How the state is checkpointed, if it can be.
    pub(crate) codec: Option<Codec<S>>,
}

impl<S, M> Node<M::In, M::Out> for StageNode<S, M>
where
    S: Send + 'static,
    M: Machine<S> + Send + 'static,
    M::In: Send + 'static,
    M::Out: Send + 'static,
{
    fn push(&mut self, seq: u64, item: M::In, failures: &mut Vec<Failure>, emit: Emit<'_, M::Out>) {
        self.run(seq, item, failures, &mut |o, f| emit(o, f));
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        draw_stage(dot, from, &self.name, Shape::Stage)
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        (*self).states(out);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        out.push(stage_unit(&self.name));
    }

    fn visit(&mut self, f: Visit<'_>) {
        f(self);
    }
}

/// Running the stage's machine on one item, as the sequential meaning
/// and a fused station both do.
impl<S, M> StageNode<S, M>
where
    S: Send + 'static,
    M: Machine<S> + Send + 'static,
    M::In: Send + 'static,
    M::Out: Send + 'static,
{
    #[inline]
    pub(crate) fn run<E: FnMut(M::Out, &mut Vec<Failure>)>(
        &mut self,
        _seq: u64,
        item: M::In,
        failures: &mut Vec<Failure>,
        emit: &mut E,
    ) {
        self.machine
            .step(&mut self.state, item, &mut |_, o| emit(o, failures));
    }

    pub(crate) fn states(self, out: &mut Vec<StageState>) {
        out.push(StageState::new(&self.name, self.state));
    }
}

/// A named state machine whose outputs are `Result`s: `Err`s go to the
/// failures, `Ok`s on.
pub(crate) struct TryStageNode<S, M, O> {
    pub(crate) name: String,
    pub(crate) state: S,
    pub(crate) machine: M,
    /// How the state is checkpointed, if it can be.
    pub(crate) codec: Option<Codec<S>>,
    pub(crate) _ok: PhantomData<fn() -> O>,
}

impl<S, M, O, Er> Node<M::In, O> for TryStageNode<S, M, O>
where
    S: Send + 'static,
    M: Machine<S, Out = Result<O, Er>> + Send + 'static,
    M::In: Clone + Debug + Send + 'static,
    O: Send + 'static,
    Er: 'static,
    Er: Into<Box<dyn Error + Send + Sync>>,
{
    fn push(&mut self, seq: u64, item: M::In, failures: &mut Vec<Failure>, emit: Emit<'_, O>) {
        self.run(seq, item, failures, &mut |o, f| emit(o, f));
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        draw_stage(dot, from, &self.name, Shape::FallibleStage)
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        (*self).states(out);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        out.push(stage_unit(&self.name));
    }

    fn visit(&mut self, f: Visit<'_>) {
        f(self);
    }
}

/// Running the stage's machine on one item, as the sequential meaning
/// and a fused station both do.
impl<S, M, O, Er> TryStageNode<S, M, O>
where
    S: Send + 'static,
    M: Machine<S, Out = Result<O, Er>> + Send + 'static,
    M::In: Clone + Debug + Send + 'static,
    O: Send + 'static,
    Er: 'static,
    Er: Into<Box<dyn Error + Send + Sync>>,
{
    #[inline]
    pub(crate) fn run<E: FnMut(O, &mut Vec<Failure>)>(
        &mut self,
        seq: u64,
        item: M::In,
        failures: &mut Vec<Failure>,
        emit: &mut E,
    ) {
        // The machine consumes the item, so a copy is kept to hand back with
        // an error.
        let copy = item.clone();
        let name = &self.name;
        self.machine
            .step(&mut self.state, item, &mut |_, r| match r {
                Ok(o) => emit(o, failures),
                Err(e) => failures.push(Failure {
                    seq,
                    stage: name.clone(),
                    item: Box::new(copy.clone()),
                    error: e.into(),
                }),
            });
    }

    pub(crate) fn states(self, out: &mut Vec<StageState>) {
        out.push(StageState::new(&self.name, self.state));
    }
}

/// `a` then `b` (`:>>>` in arrow notation).
pub(crate) struct ThenNode<A, B, C> {
    pub(crate) a: Pipeline<A, B>,
    pub(crate) b: Pipeline<B, C>,
}

impl<A, B, C> Node<A, C> for ThenNode<A, B, C>
where
    A: Send + 'static,
    B: Send + 'static,
    C: Send + 'static,
{
    fn push(&mut self, seq: u64, item: A, failures: &mut Vec<Failure>, emit: Emit<'_, C>) {
        let b = &mut self.b;
        self.a
            .push(seq, item, failures, &mut |x, f| b.push(seq, x, f, emit));
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        let mid = self.a.draw(dot, from);
        self.b.draw(dot, &mid)
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.a.states(out);
        self.b.states(out);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        self.a.node.units(out);
        self.b.node.units(out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        self.a.node.visit(f);
        self.b.node.visit(f);
    }
}

/// A part with a declared cost per item: `Pipeline::cost`.
pub(crate) struct CostNode<I, O> {
    pub(crate) inner: Pipeline<I, O>,
    pub(crate) ns: f64,
}

impl<I: Send + 'static, O: Send + 'static> Node<I, O> for CostNode<I, O> {
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, O>) {
        self.inner.push(seq, item, failures, emit);
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        self.inner.draw(dot, from)
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.inner.states(out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        self.inner.node.visit(f);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        let from = out.len();
        self.inner.node.units(out);
        let stages = out[from..]
            .iter()
            .filter(|u| u.kind == UnitKind::Stage)
            .count()
            .max(1);
        for u in &mut out[from..] {
            if u.kind == UnitKind::Stage {
                u.cost_ns = self.ns / stages as f64;
                u.cost_known = true;
            }
        }
    }
}

/// What checkpoints need of a stage with state `S` named `name`.
pub(crate) fn snapshot_of<S>(
    name: &str,
    state: &S,
    codec: Option<&Codec<S>>,
    spare: Option<Copied>,
) -> Option<Snapshot> {
    let c = codec?;
    Some(Snapshot {
        stage: name.to_string(),
        type_name: c.type_name,
        copy: (c.copy)(state, spare),
        encode: c.encode,
    })
}

/// Decodes `bytes` into `state` with `codec`.
pub(crate) fn restore_into<S>(
    name: &str,
    state: &mut S,
    codec: Option<&Codec<S>>,
    bytes: &[u8],
) -> Result<(), String> {
    let c = codec.ok_or_else(|| format!("stage `{name}` has no codec for its state"))?;
    *state = (c.decode)(bytes)?;
    Ok(())
}

/// A stage's state as checkpoints reach it: the same for both kinds of
/// stage node, which hold a name, a state and its codec alike.
macro_rules! stage_cell {
    ($node:ty, $($p:ident),*) => {
        impl<S: 'static, $($p),*> StageCell for $node {
            fn name(&self) -> &str {
                &self.name
            }

            fn durable(&self) -> Option<&'static str> {
                self.codec.as_ref().map(|c| c.type_name)
            }

            fn snapshot(&self, spare: Option<Copied>) -> Option<Snapshot> {
                snapshot_of(&self.name, &self.state, self.codec.as_ref(), spare)
            }

            fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
                restore_into(&self.name, &mut self.state, self.codec.as_ref(), bytes)
            }
        }
    };
}

stage_cell!(StageNode<S, M>, M);
stage_cell!(TryStageNode<S, M, O>, M, O);
