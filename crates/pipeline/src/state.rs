//! A stage's state as checkpoints and upgrades see it: how it is copied at a
//! barrier, encoded on the writer thread, decoded at a restore, and which
//! stage holds it ([`StageCell`]).
//!
//! A state opts in with serde: [`Pipeline::durable_stage`](crate::Pipeline::durable_stage)
//! records a [`Codec`] for it. Stateless stages (state `()`, as `map` and
//! `try_map` make) need nothing. Any other state has no codec, and a
//! deployment that checkpoints refuses it, naming the stage.

use std::any::{Any, TypeId};
use std::fmt;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A state copied at a barrier, waiting for the writer thread to encode it.
pub(crate) type Copied = Box<dyn Any + Send>;

/// How one state type is copied, encoded and decoded. Plain function
/// pointers, so a stage carries its codec without a bound on its state.
pub(crate) struct Codec<S> {
    /// A copy of the state, taken on the worker at a barrier: cloned into
    /// the previous copy when the writer handed one back (no allocation,
    /// no page faults), else a fresh clone.
    pub(crate) copy: fn(&S, Option<Copied>) -> Copied,
    /// The bytes of a copy, made on the writer thread.
    pub(crate) encode: fn(&(dyn Any + Send)) -> Result<Vec<u8>, String>,
    /// The state from its bytes, at a restore.
    pub(crate) decode: fn(&[u8]) -> Result<S, String>,
    /// The state's type, recorded in the manifest and checked at a restore.
    pub(crate) type_name: &'static str,
}

impl<S> Clone for Codec<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Codec<S> {}

fn copy_serde<S: Clone + Send + 'static>(s: &S, spare: Option<Copied>) -> Copied {
    match spare.and_then(|b| b.downcast::<S>().ok()) {
        Some(mut b) => {
            (*b).clone_from(s);
            b
        }
        None => Box::new(s.clone()),
    }
}

fn encode_serde<S: Serialize + 'static>(s: &(dyn Any + Send)) -> Result<Vec<u8>, String> {
    let s = s
        .downcast_ref::<S>()
        .ok_or_else(|| "a copy of another type reached the encoder".to_string())?;
    postcard::to_allocvec(s).map_err(|e| e.to_string())
}

fn decode_serde<S: DeserializeOwned>(b: &[u8]) -> Result<S, String> {
    postcard::from_bytes(b).map_err(|e| e.to_string())
}

/// The codec of a serde state: cloned at the barrier, `postcard` bytes on
/// the writer.
pub(crate) fn serde_codec<S>() -> Codec<S>
where
    S: Serialize + DeserializeOwned + Clone + Send + 'static,
{
    Codec {
        copy: copy_serde::<S>,
        encode: encode_serde::<S>,
        decode: decode_serde::<S>,
        type_name: std::any::type_name::<S>(),
    }
}

fn copy_unit<S>(_: &S, _: Option<Copied>) -> Copied {
    Box::new(())
}

fn encode_unit(_: &(dyn Any + Send)) -> Result<Vec<u8>, String> {
    Ok(Vec::new())
}

fn decode_unit<S: 'static>(b: &[u8]) -> Result<S, String> {
    if !b.is_empty() {
        return Err(format!("{} bytes for a stateless stage", b.len()));
    }
    let unit: Box<dyn Any> = Box::new(());
    unit.downcast::<S>()
        .map(|s| *s)
        .map_err(|_| "not a stateless stage".to_string())
}

/// The codec a stage gets without asking: one for `()` (nothing to save),
/// none for any other state.
pub(crate) fn default_codec<S: 'static>() -> Option<Codec<S>> {
    (TypeId::of::<S>() == TypeId::of::<()>()).then_some(Codec {
        copy: copy_unit::<S>,
        encode: encode_unit,
        decode: decode_unit::<S>,
        type_name: "()",
    })
}

/// A stage's state copied at a barrier, with what the writer needs.
pub(crate) struct Snapshot {
    pub(crate) stage: String,
    pub(crate) type_name: &'static str,
    pub(crate) copy: Copied,
    pub(crate) encode: fn(&(dyn Any + Send)) -> Result<Vec<u8>, String>,
}

/// One stage, as checkpoints, restores and upgrades reach it through a
/// description's tree ([`Node::visit`](crate::node::common::Node::visit)).
pub(crate) trait StageCell {
    /// The stage's name.
    fn name(&self) -> &str;
    /// The state's type name, if the state can be checkpointed.
    fn durable(&self) -> Option<&'static str>;
    /// A copy of the state (a clone, into `spare` if it is an old copy of
    /// this state), if it can be checkpointed.
    fn snapshot(&self, spare: Option<Copied>) -> Option<Snapshot>;
    /// Replaces the state with one decoded from `bytes`.
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String>;
    /// Applies an upgrade command (see `upgrade.rs`); stages that were not
    /// made upgradable refuse.
    fn upgrade(&mut self, _cmd: Box<dyn Any + Send>) -> Result<(), UpgradeError> {
        Err(UpgradeError::NoSuchStage(self.name().to_string()))
    }
}

/// The state of a round-robin shard's router: how many items reached the
/// shard, which decides where the next goes. Saved like a stage's, under
/// the name [`shard_state_name`] gives it.
pub(crate) struct CounterCell<'a> {
    pub(crate) name: String,
    pub(crate) value: &'a mut u64,
}

impl StageCell for CounterCell<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn durable(&self) -> Option<&'static str> {
        Some("u64")
    }

    fn snapshot(&self, _: Option<Copied>) -> Option<Snapshot> {
        let c = serde_codec::<u64>();
        Some(Snapshot {
            stage: self.name.clone(),
            type_name: "u64",
            copy: (c.copy)(self.value, None),
            encode: c.encode,
        })
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        *self.value = (serde_codec::<u64>().decode)(bytes)?;
        Ok(())
    }
}

/// The name a shard's router state is saved under: after the first stage
/// of its first copy.
pub(crate) fn shard_state_name(first_stage: Option<&str>) -> String {
    format!("{} (shard router)", first_stage.unwrap_or("(no stage)"))
}

/// Where a visit of a description's stages goes.
pub(crate) type Visit<'a> = &'a mut dyn FnMut(&mut dyn StageCell);

/// How many applied upgrades a deployment remembers
/// ([`Running::upgrades`](crate::Running::upgrades)): the last ones.
pub const UPGRADES_KEPT: usize = 1000;

/// One stage's upgrade as a deployment applied it at its barrier: one
/// record per stage (per copy, for [`Running::upgrade_all`](crate::Running::upgrade_all)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeInfo {
    /// The stage upgraded.
    pub stage: String,
    /// When the barrier reached it.
    pub completed: std::time::Instant,
    /// `Ok` if it runs the new code, or why it kept the old.
    pub result: Result<(), UpgradeError>,
}

/// Why an upgrade was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpgradeError {
    /// No stage of that name in this pipeline, or it was not built with
    /// [`Pipeline::upgradable`](crate::Pipeline::upgradable).
    NoSuchStage(String),
    /// The stage holds another state type than the handle says (an older
    /// handle, from before an earlier upgrade).
    StateType {
        /// The stage.
        stage: String,
        /// The type the handle expected.
        expected: &'static str,
    },
    /// `migrate` returned an error: the old machine and state stay.
    Migrate {
        /// The stage.
        stage: String,
        /// The error's text.
        message: String,
    },
    /// The pipeline ended, or was stopped, before the barrier reached the
    /// stage: nothing changed.
    Stopped(String),
}

impl fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpgradeError::NoSuchStage(s) => write!(
                f,
                "no upgradable stage named `{s}` (build it with Pipeline::upgradable)"
            ),
            UpgradeError::StateType { stage, expected } => write!(
                f,
                "stage `{stage}` does not hold a `{expected}`: use the handle the last upgrade returned"
            ),
            UpgradeError::Migrate { stage, message } => write!(
                f,
                "migrating the state of stage `{stage}` failed: {message}; the old code keeps running"
            ),
            UpgradeError::Stopped(m) => write!(f, "the upgrade was not applied: {m}"),
        }
    }
}

impl std::error::Error for UpgradeError {}
