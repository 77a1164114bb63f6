//! The distributed evolve engine: states live on worker processes; a
//! single-threaded event-loop master batches evolve requests and steals
//! queued states for idle workers.
//!
//! - A model is an [`Evolve`]: `(state, input) -> children with outputs`.
//!   Every random number and id derives from `(run seed, step, parent)`
//!   ([`call_rng`]), so a run gives the same bits on one process or on 450.
//! - An [`Engine`] holds states and evolves them: [`Local`] in this process
//!   (the reference), [`Master`] over workers.
//! - Workers are the caller's program: a [`Registry`] names the models it
//!   can run, and [`worker::serve`] (started by [`LocalCluster`] or any
//!   launcher) or [`worker::run`] serves a master. A master admits workers
//!   through a [`Listener`] once they prove the shared [`Secret`].
//! - Workers come and go mid-run, and the results do not change: joiners
//!   ([`Master::admit`], [`Master::admit_from`]) evolve states from the
//!   step after they are admitted (the start-of-step rebalance or steals
//!   give them work); a worker that asks to leave (SIGTERM) or that the
//!   caller retires ([`Master::retire_workers`]) hands its states to the
//!   workers that stay ([`Master::staying_workers`]) and exits 0.
//! - [`pf`] runs a bootstrap particle filter on any engine.
//! - A [`Telemetry`] given to the master ([`MasterConfig::telemetry`])
//!   shows the run while it goes: steps, workers, losses, the filter's
//!   likelihood, as a [`TelemetrySnapshot`] any thread reads.
//!
//! A program that is its own master and workers:
//!
//! ```no_run
//! use std::time::Duration;
//! use statepipe_cluster::{worker, Engine, Evolve, LocalCluster, Master, MasterConfig,
//!                         Registry, Rng, WorkerCommand};
//!
//! #[derive(serde::Serialize, serde::Deserialize)]
//! struct Double;
//! impl Evolve for Double {
//!     const NAME: &'static str = "double";
//!     type State = u64;
//!     type Input = ();
//!     type Output = u64;
//!     fn evolve(&self, s: &u64, _: &(), _: &mut Rng) -> Vec<(u64, u64)> {
//!         vec![(s * 2, s * 2)]
//!     }
//! }
//!
//! fn main() -> Result<(), statepipe_cluster::Error> {
//!     let registry = Registry::new().with::<Double>();
//!     if worker::launched() {
//!         return worker::serve(registry); // this process was started as a worker
//!     }
//!     let cluster = LocalCluster::spawn(&WorkerCommand::current_exe()?, 2, &[])?;
//!     let mut master = Master::new(&Double, cluster.accept(Duration::from_secs(30))?,
//!                                  MasterConfig::default())?;
//!     let ids = master.reset_states(vec![1, 2, 3])?;
//!     let out = master.evolve_many(ids.iter().map(|&id| (id, ())).collect())?;
//!     assert_eq!(out[&ids[2]][0].1, 6);
//!     Ok(())
//! }
//! ```
//!
//! `README.md` beside this crate lists the API; the repository's book has
//! the protocol and the master's state machine
//! (`docs/src/concepts/evolve-internals.md`) and the guarantees
//! (`docs/src/operations/recovery.md`).
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod auth;
mod auto;
mod engine;
mod error;
mod evolve;
#[cfg(any(test, feature = "fuzzing"))]
mod fuzz;
mod ids;
mod listen;
mod local;
mod master;
mod math;
pub mod pf;
mod philox;
mod protocol;
mod registry;
mod restore;
mod rng;
mod snapshot;
mod spawn;
mod stats;
mod telemetry;
mod threads;
mod wire;
pub mod worker;

#[cfg(test)]
mod tests;
// The tests' shared helpers name the crate as its users do.
#[cfg(test)]
extern crate self as statepipe_cluster;

pub use auth::{Secret, SECRET_ENV};
pub use auto::{Auto, AutoConfig, Decision, ShipCost};
pub use engine::{Children, Engine, Inputs, Outputs};
pub use error::{Error, WorkerLost};
pub use evolve::{Batch, ChildNormals, Evolve, IdHash, IdHasher, IdMap, Offspring, StateId};
pub use listen::{Joined, Listener};
pub use local::Local;
pub use master::{Master, MasterConfig, MasterImpl};
pub use math::vectorised;
pub use protocol::MAX_STATE_BYTES;
pub use registry::Registry;
pub use restore::Restore;
pub use rng::{call_rng, Rng, Rngs};
pub use snapshot::Snapshot;
pub use spawn::{kill_spawned_workers, LocalCluster, WorkerCommand};
pub use stats::{Stats, WorkerStats};
pub use telemetry::{
    Telemetry, TelemetryEvent, TelemetryEventKind, TelemetryLane, TelemetryLaneKind, TelemetryPf,
    TelemetrySnapshot, TelemetryTotals, TelemetryWorker,
};

/// How the master schedules: batches, placement, stealing, deadlines
/// (the fields of [`MasterConfig::sched`]).
pub mod config {
    pub use crate::master::sched::config::{
        Batch, Deadlines, Placement, Recovery, SchedConfig, StealVia, AUTO_BUDDY_BYTES,
        DEFAULT_REPLICAS, HEARTBEAT, QUIET_BEATS, SILENCE,
    };
}

/// Fuzzing entry points (the `fuzzing` feature).
#[cfg(feature = "fuzzing")]
pub mod fuzzing {
    /// Bytes from the network through every frame and payload decoder, and
    /// a worker (holding `registry`'s models, taking no states from peers)
    /// answering whatever decodes. Nothing may panic, and no decoder may
    /// allocate more than its input's size.
    pub fn frames(bytes: &[u8], registry: &crate::Registry) {
        crate::fuzz::decode_all(bytes, registry);
    }
}
