//! Hot upgrade of a stage: new code and a migrated state, switched between
//! two items (the `code_change` of Erlang/OTP).
//!
//! A stage built with [`Pipeline::upgradable`] holds its machine behind one
//! more indirect call, so it can be replaced while the pipeline runs. An
//! upgrade names the stage by a typed [`StageHandle`], so the new machine
//! must read and emit the same types as the old one (a compile error
//! otherwise); the state type may change: `migrate(&old) -> Result<new, E>`
//! builds the new state from the old. The sequential interpreter
//! ([`Interpreter::upgrade`](crate::Interpreter::upgrade)) applies it
//! between two pushes; a deployment
//! ([`Running::upgrade`](crate::Running::upgrade)) at a barrier, so items
//! before the barrier meet the old code and items after it the new. If
//! `migrate` fails, the old machine and state stay, and the error comes
//! back.

use std::any::Any;
use std::fmt;
use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::dot::{Dot, NodeId};
use crate::failure::{Failure, StageState};
use crate::machine::Machine;
use crate::node::common::{Emit, Node};
use crate::node::stage::StageNode;
use crate::pipeline::Pipeline;
use crate::state::{serde_codec, Copied, Snapshot, StageCell, UpgradeError, Visit};
use crate::unit::UnitInfo;

/// A typed name for an upgradable stage: its state `S`, input `I` and
/// output `O`. Made by [`Pipeline::upgradable`]; an upgrade returns the
/// handle for the new state type.
pub struct StageHandle<S, I, O> {
    name: String,
    _types: PhantomData<Types<S, I, O>>,
}

impl<S, I, O> Clone for StageHandle<S, I, O> {
    fn clone(&self) -> Self {
        StageHandle {
            name: self.name.clone(),
            _types: PhantomData,
        }
    }
}

impl<S, I, O> fmt::Debug for StageHandle<S, I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StageHandle")
            .field("name", &self.name)
            .field("state", &std::any::type_name::<S>())
            .finish()
    }
}

impl<S, I, O> StageHandle<S, I, O> {
    pub(crate) fn new(name: &str) -> Self {
        StageHandle {
            name: name.to_string(),
            _types: PhantomData,
        }
    }

    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The types a [`StageHandle`] stands for (a function type, so the handle
/// is `Send`, `Sync` and covariant whatever they are).
type Types<S, I, O> = fn() -> (S, I, O);

/// A stage whose code can be swapped: a stage node behind a `dyn`.
pub(crate) trait DynStage<I, O>: Node<I, O> + StageCell {
    fn state_any(&self) -> &dyn Any;
}

impl<S, M> DynStage<M::In, M::Out> for StageNode<S, M>
where
    S: Send + 'static,
    M: Machine<S> + Send + 'static,
    M::In: Send + 'static,
    M::Out: Send + 'static,
{
    fn state_any(&self) -> &dyn Any {
        &self.state
    }
}

/// What a type-erased upgrade carries to the stage: builds the new stage
/// from the old state, or says why not.
type Apply<I, O> =
    Box<dyn FnOnce(&dyn Any) -> Result<Box<dyn DynStage<I, O>>, UpgradeError> + Send>;

/// An upgrade for one stage, typed by the stage's input and output.
pub(crate) struct UpgradeCmd<I, O> {
    pub(crate) apply: Apply<I, O>,
}

/// The upgrade of the stage `handle` names to `machine`, its state made by
/// `migrate` from the old one.
pub(crate) fn command<S, S2, I, O, M, F, E>(
    handle: &StageHandle<S, I, O>,
    machine: M,
    migrate: F,
) -> UpgradeCmd<I, O>
where
    S: 'static,
    S2: Serialize + DeserializeOwned + Clone + Send + 'static,
    I: Send + 'static,
    O: Send + 'static,
    M: Machine<S2, In = I, Out = O> + Send + 'static,
    F: FnOnce(&S) -> Result<S2, E> + Send + 'static,
    E: fmt::Display,
{
    let name = handle.name.clone();
    UpgradeCmd {
        apply: Box::new(move |old: &dyn Any| {
            let old = old.downcast_ref::<S>().ok_or(UpgradeError::StateType {
                stage: name.clone(),
                expected: std::any::type_name::<S>(),
            })?;
            let state = migrate(old).map_err(|e| UpgradeError::Migrate {
                stage: name.clone(),
                message: e.to_string(),
            })?;
            Ok(Box::new(StageNode {
                name,
                state,
                machine,
                codec: Some(serde_codec::<S2>()),
            }) as Box<dyn DynStage<I, O>>)
        }),
    }
}

/// A stage whose machine and state can be replaced.
pub(crate) struct UpgradableNode<I, O> {
    pub(crate) inner: Box<dyn DynStage<I, O>>,
}

impl<I: Send + 'static, O: Send + 'static> Node<I, O> for UpgradableNode<I, O> {
    #[inline]
    fn push(&mut self, seq: u64, item: I, failures: &mut Vec<Failure>, emit: Emit<'_, O>) {
        self.inner.push(seq, item, failures, emit);
    }

    fn draw(&self, dot: &mut Dot, from: &[NodeId]) -> Vec<NodeId> {
        self.inner.draw(dot, from)
    }

    fn states(self: Box<Self>, out: &mut Vec<StageState>) {
        self.inner.states(out);
    }

    fn units(&self, out: &mut Vec<UnitInfo>) {
        self.inner.units(out);
    }

    fn visit(&mut self, f: Visit<'_>) {
        f(self);
    }
}

impl<I: Send + 'static, O: Send + 'static> StageCell for UpgradableNode<I, O> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn durable(&self) -> Option<&'static str> {
        self.inner.durable()
    }

    fn snapshot(&self, spare: Option<Copied>) -> Option<Snapshot> {
        self.inner.snapshot(spare)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.inner.restore(bytes)
    }

    fn upgrade(&mut self, cmd: Box<dyn Any + Send>) -> Result<(), UpgradeError> {
        // A handle's types fix the input and output at compile time; only
        // a handle of another pipeline's stage of the same name gets here.
        let cmd = cmd
            .downcast::<UpgradeCmd<I, O>>()
            .map_err(|_| UpgradeError::NoSuchStage(self.name().to_string()))?;
        self.inner = (cmd.apply)(self.inner.state_any())?;
        Ok(())
    }
}

impl<I: Send + 'static, O: Send + 'static> Pipeline<I, O> {
    /// A stage like [`durable_stage`](Pipeline::durable_stage) whose machine
    /// and state can be replaced while the pipeline runs; the handle names
    /// it, typed, for [`Running::upgrade`](crate::Running::upgrade) and
    /// [`Interpreter::upgrade`](crate::Interpreter::upgrade). It costs one
    /// more indirect call per item than a plain stage.
    ///
    /// # Examples
    ///
    /// A counter that starts counting in twos at item 2:
    ///
    /// ```
    /// use statepipe_pipeline::{machine, Pipeline};
    ///
    /// let (count, handle) = Pipeline::upgradable("count", 0u32, machine::step(|n: &mut u32, _x: char| {
    ///     *n += 1;
    ///     *n
    /// }));
    /// let mut run = count.sequential();
    /// run.push('a');
    /// run.push('b');
    /// let twos = machine::step(|n: &mut u64, _x: char| {
    ///     *n += 2;
    ///     *n as u32
    /// });
    /// run.upgrade(&handle, twos, |old: &u32| Ok::<u64, String>(u64::from(*old))).unwrap();
    /// run.push('c');
    /// assert_eq!(run.outputs(), [1, 2, 4]);
    /// ```
    pub fn upgradable<S, M>(name: &str, state: S, machine: M) -> (Self, StageHandle<S, I, O>)
    where
        S: Serialize + DeserializeOwned + Clone + Send + 'static,
        M: Machine<S, In = I, Out = O> + Send + 'static,
    {
        let node = StageNode {
            name: name.to_owned(),
            state,
            machine,
            codec: Some(serde_codec::<S>()),
        };
        (
            Pipeline::from_node(UpgradableNode {
                inner: Box::new(node),
            }),
            StageHandle::new(name),
        )
    }
}
