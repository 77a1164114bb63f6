//! Pipelines of state machines.
//!
//! A stage is a state machine `(&mut S, In) -> 0..n Out` ([`machine`]);
//! machines fuse into bigger machines inside one stage with no queue between
//! them (`then`, `first`, `fanout`, `split`, `choice`, `merge`, `map`). A
//! [`Pipeline`] connects named stages (sequence, fan-out, par, choice, N-ary
//! fan-out and choice, shards), typed so that mismatched stages do not
//! compile. Its meaning is the sequential interpreter
//! ([`Pipeline::run_sequential`]); deploying a pipeline on rings and workers
//! ([`Pipeline::deploy`]) produces the same outputs. A stage that returns an
//! error sends the item to the error output, and the pipeline goes on.
//!
//! A laundry: wash, dry on two dryers, fold; one load jams.
//!
//! ```
//! use statepipe_pipeline::{machine, Pipeline};
//!
//! #[derive(Clone, Debug, PartialEq)]
//! struct Load {
//!     owner: &'static str,
//!     steps: Vec<&'static str>,
//! }
//!
//! let wash = Pipeline::map("wash", |mut l: Load| {
//!     l.steps.push("washed");
//!     l
//! });
//! let dry = Pipeline::shard(2, |k| {
//!     Pipeline::try_map(&format!("dryer {k}"), |mut l: Load| {
//!         if l.owner == "mallory" {
//!             return Err("lint filter jammed");
//!         }
//!         l.steps.push("dried");
//!         Ok(l)
//!     })
//! });
//! let fold = Pipeline::stage("fold", 0u32, machine::step(|folded: &mut u32, mut l: Load| {
//!     *folded += 1;
//!     l.steps.push("folded");
//!     l
//! }));
//! let laundry = wash.then(dry).then(fold);
//! println!("{}", laundry.to_dot()); // paste into `dot -Tsvg`
//!
//! let loads = ["ann", "bob", "mallory", "cy"].map(|owner| Load { owner, steps: vec![] });
//! let run = laundry.run_sequential(loads);
//! let owners: Vec<_> = run.outputs.iter().map(|l| l.owner).collect();
//! assert_eq!(owners, ["ann", "bob", "cy"]);
//! assert_eq!(run.outputs[0].steps, ["washed", "dried", "folded"]);
//! assert_eq!(run.failures.len(), 1);
//! assert_eq!(run.failures[0].stage, "dryer 0"); // the third load, 2 % 2 == 0
//! assert_eq!(run.state::<u32>("fold"), Some(&3));
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod branch;
mod checkpoint;
mod construct;
mod dot;
mod either;
mod failure;
pub mod machine;
mod node;
mod pipeline;
pub mod remote;
mod runtime;
mod sequential;
mod state;
mod unit;
mod upgrade;

pub use branch::shard_of;
pub use checkpoint::{
    Checkpoint, CheckpointError, CheckpointInfo, CheckpointTicket, Manifest, PlannedUnit,
    StageEntry, CHECKPOINTS_KEPT,
};
pub use either::Either;
pub use failure::{FailedItem, Failure, StageState};
pub use machine::Machine;
pub use pipeline::Pipeline;
pub use runtime::checkpointing::UpgradeTicket;
pub use runtime::config::{Config, Spin, DEFAULT_OUTPUT_HOLD, SPIN_FREE, WORKERS_ENV};
pub use runtime::cycle::STEP_NAME;
pub use runtime::deploy::{Deployment, Finished, Running};
pub use runtime::error::DeployError;
pub use runtime::io::{Input, Output, SendError, TrySendError, SEND_BATCH};
pub use runtime::metrics::{Metrics, Observer, UnitMetrics};
pub use runtime::plan::{Plan, MIN_STATION_NS};
pub use runtime::simulate::{fit_fused, simulate, Prediction, UnitCost, HOP_NS};
pub use sequential::{Interpreter, Run};
pub use state::{UpgradeError, UpgradeInfo, UPGRADES_KEPT};
pub use unit::{UnitInfo, UnitKind, DEFAULT_COST_NS};
pub use upgrade::StageHandle;

/// Fuzzing entry points (the `fuzzing` feature).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    /// Bytes from the network through every frame and message decoder of
    /// a distributed pipeline's wire. Nothing may panic, and no decoder may
    /// allocate more than its input's size.
    pub fn frames(bytes: &[u8]) {
        crate::remote::decode_all(bytes);
    }

    /// Bytes from a checkpoint folder through every decoder a restore runs
    /// on them: a manifest, a state file's frame, a state's `postcard`
    /// bytes (each raw, and framed with a valid checksum to reach the
    /// decoder behind it). Nothing may panic.
    pub fn checkpoint(bytes: &[u8]) {
        crate::checkpoint::decode_all(bytes);
    }
}
