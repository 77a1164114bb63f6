//! A run between two operations, as data.

use crate::evolve::StateId;

/// A run between two operations, as [`Master::snapshot`](crate::Master::snapshot) records it and
/// [`Master::resume`](crate::Master::resume) takes it up: serialise it with serde.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// The run seed.
    pub seed: u64,
    /// Evolve steps taken.
    pub step: u64,
    /// `reset_states` calls made.
    pub epoch: u64,
    /// Every live state, by id, serialised.
    pub states: Vec<(StateId, Vec<u8>)>,
}
