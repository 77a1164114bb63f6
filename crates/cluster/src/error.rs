//! The errors of the engine, the master's operations and the workers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

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
    /// The index of the first worker lost in the operation.
    pub worker: usize,
    /// Its address.
    pub addr: SocketAddr,
    /// Why the master dropped it (a closed connection, a deadline, a
    /// `Failed` frame with the worker's message).
    pub reason: String,
    /// States that were on the lost workers.
    pub lost: Vec<StateId>,
    /// States whose evolve was in flight when the master gave up waiting.
    pub unfinished: Vec<StateId>,
    /// Parents evolved in the operation, with their children's ids.
    pub completed: HashMap<StateId, Vec<StateId>>,
    /// Further workers lost in the same operation: index, address, reason.
    pub others: Vec<(usize, SocketAddr, String)>,
}

/// Why an engine operation, a cluster's start or a worker failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A worker was lost during an operation; says what became of each state.
    #[error(
        "worker {} ({}) lost: {}; {} states lost ({}), {} unfinished",
        .0.worker, .0.addr, .0.reason, .0.lost.len(), preview(&.0.lost), .0.unfinished.len()
    )]
    WorkerLost(Box<WorkerLost>),
    /// The operation named states the engine does not hold; nothing was done.
    #[error("{} unknown state ids: {}", .0.len(), preview(.0))]
    UnknownStates(Vec<StateId>),
    /// Every worker is gone (or none was given).
    #[error("no live worker")]
    NoWorkers,
    /// Two live states got the same id (a 64-bit hash collision); the step
    /// failed rather than merge them.
    #[error("two states got the id {0}")]
    IdCollision(StateId),
    /// A state's evolve ran past its deadline on several workers, each of
    /// which was dropped (a model that never returns for this state): the
    /// operation failed rather than wait forever.
    #[error(
        "the evolve of state {state} at step {step} ran past its deadline ({deadline:?}) \
         on {workers} workers; a model that never returns for it?"
    )]
    EvolveHung {
        /// The state.
        state: StateId,
        /// The step (1 for the first evolve of a run).
        step: u64,
        /// On how many workers it ran past the deadline (each was dropped).
        workers: u32,
        /// The deadline it ran past, the last time.
        deadline: Duration,
    },
    /// A state is larger, serialised, than a cluster places or keeps
    /// ([`MAX_STATE_BYTES`](crate::MAX_STATE_BYTES)); nothing was placed.
    #[error(
        "state {id} is {bytes} bytes serialised, more than a cluster can hold in one state \
         ({limit} bytes): keep its large data out of the state (a file read by path), or split \
         it over several states"
    )]
    StateTooLarge {
        /// The state (for a reset, the id it would have had).
        id: StateId,
        /// Its serialised length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// Fewer workers joined than were waited for.
    #[error(
        "{joined} of {wanted} workers joined within {timeout:?}: are they started, \
         pointed at this address, and given the same secret?"
    )]
    JoinTimeout {
        /// Workers that joined.
        joined: usize,
        /// Workers waited for.
        wanted: usize,
        /// How long.
        timeout: Duration,
    },
    /// A worker could not reach or join its master.
    #[error("cannot join the master at {addr}: {reason}")]
    Connect {
        /// The master's address as given.
        addr: String,
        /// What failed, and what to check.
        reason: String,
    },
    /// The master closed a worker's connection before sending any request:
    /// it refused the worker's answer to its challenge.
    #[error(
        "the master at {addr} closed the connection after the handshake: wrong secret \
         (both sides must share STATEPIPE_SECRET), or another protocol version"
    )]
    Refused {
        /// The master's address.
        addr: String,
    },
    /// The master closed a serving worker's connection without telling it
    /// to exit: it dropped the worker (silent too long, say: its log says
    /// why) or it ended abnormally (killed, crashed).
    #[error(
        "the master at {addr} closed the connection without telling this worker to exit: \
         it dropped this worker (the master's log says why) or it ended abnormally; \
         started again, a worker joins a running `statepipe master` at its next step"
    )]
    Disconnected {
        /// The master's address.
        addr: String,
    },
    /// A worker failed a request (a panicking evolve, a model it does not
    /// know, a malformed request) and told the master so.
    #[error("worker failed: {0}")]
    WorkerFailed(String),
    /// A setting from the environment is missing or malformed.
    #[error("{0}")]
    Config(String),
    /// A worker process could not be started.
    #[error("cannot start the worker process {program:?}: {source}")]
    Spawn {
        /// The program.
        program: std::path::PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A state, input, output or model did not (de)serialise.
    #[error("serialisation: {0}")]
    Codec(#[from] postcard::Error),
    /// A socket operation failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The caller asked the wait or the operation to stop
    /// (`Listener::accept_until`, `MasterConfig::stop`).
    #[error("interrupted")]
    Interrupted,
}

/// How the reason of a worker dropped for a `Failed` frame starts (its
/// evolve panicked, it lacks the model): a failure that would happen again
/// anywhere, so nothing is recovered or rolled back for it.
const REPORTED: &str = "worker reported: ";

/// The reason for dropping a worker that sent a `Failed` frame with `msg`.
pub(crate) fn reported(msg: &[u8]) -> String {
    format!("{REPORTED}{}", String::from_utf8_lossy(msg))
}

impl WorkerLost {
    /// Whether a worker lost in the operation said it failed a request
    /// (rather than disconnecting or falling silent).
    pub(crate) fn reported_failure(&self) -> bool {
        std::iter::once(&self.reason)
            .chain(self.others.iter().map(|o| &o.2))
            .any(|r| r.starts_with(REPORTED))
    }
}

fn preview(ids: &[StateId]) -> String {
    let mut s: Vec<String> = ids.iter().take(8).map(|i| i.to_string()).collect();
    if ids.len() > 8 {
        s.push("…".into());
    }
    s.join(", ")
}
