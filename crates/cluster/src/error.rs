//! The errors of the master's operations.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::evolve::StateId;

/// A worker died or was dropped during an operation.
///
/// Every state the caller knew is then in exactly one place: `lost` (it was
/// on the worker), `unfinished` (its evolve was in flight when the master gave
/// up waiting; gone too), `completed` (evolved: the parent is replaced by
/// the listed children, whose outputs are discarded), or still held under
/// its old id, unevolved.
#[derive(Debug, Clone)]
pub struct WorkerLost {
    pub worker: usize,
    pub addr: SocketAddr,
    pub reason: String,
    pub lost: Vec<StateId>,
    pub unfinished: Vec<StateId>,
    pub completed: HashMap<StateId, Vec<StateId>>,
    /// Further workers lost in the same operation.
    pub others: Vec<(usize, SocketAddr, String)>,
}

/// Why a master operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "worker {} ({}) lost: {}; {} states lost ({}), {} unfinished",
        .0.worker, .0.addr, .0.reason, .0.lost.len(), preview(&.0.lost), .0.unfinished.len()
    )]
    WorkerLost(Box<WorkerLost>),
    #[error("{} unknown state ids: {}", .0.len(), preview(.0))]
    UnknownStates(Vec<StateId>),
    #[error("no live worker")]
    NoWorkers,
    #[error("two states got the id {0}")]
    IdCollision(StateId),
    #[error("serialisation: {0}")]
    Codec(#[from] postcard::Error),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

fn preview(ids: &[StateId]) -> String {
    let mut s: Vec<String> = ids.iter().take(8).map(|i| i.to_string()).collect();
    if ids.len() > 8 {
        s.push("…".into());
    }
    s.join(", ")
}
