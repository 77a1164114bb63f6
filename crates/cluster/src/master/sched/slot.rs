//! What the master keeps per worker connection (`Slot`), per request it
//! owes an answer to (`Req`), and per `Give` in progress (`Transfer`).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Instant;

use crate::evolve::StateId;
use crate::stats::WorkerStats;

/// Index of a worker connection.
pub(crate) type WorkerId = usize;

pub(super) enum Req {
    Setup,
    Evolve {
        ids: Vec<StateId>,
        step: u64,
        sent: Instant,
        solo: bool,
        cost: f64,
        /// Its states were started again elsewhere (`straggle.rs`): the
        /// operation does not wait for it.
        fenced: bool,
    },
    Add(u32),
    Remove {
        ids: Vec<StateId>,
        thief: WorkerId,
        step: u64,
        sent: Instant,
        /// The states went to the thief from the copies instead (the
        /// victim straggles, `straggle.rs`): the answer is discarded.
        fenced: bool,
    },
    Give {
        ticket: u64,
    },
    /// Not sent: the thief of a `Give` owes an `Arrived`.
    Arrive {
        ticket: u64,
        n: usize,
    },
    Drop,
    Fetch(Vec<StateId>),
    /// Answered `Shipped`.
    Replicate,
    /// Not sent: this worker owes a `Held` for `origin`'s replica.
    Hold {
        round: u64,
        origin: WorkerId,
    },
    /// Answered `Promoted n`.
    Promote(u32),
}

pub(super) struct Slot {
    pub(super) addr: SocketAddr,
    pub(super) alive: bool,
    /// When it was first sent a `Commit` (buddy mode): from then on it
    /// keeps the states it gives away as replicas (`gave_away`).
    pub(super) committed_at: Option<Instant>,
    /// States of this step not yet requested, cheapest first.
    pub(super) pending: Vec<StateId>,
    pub(super) pending_cost: f64,
    pub(super) in_flight: VecDeque<Req>,
    pub(super) evolving: usize,
    /// Transfers on their way to this worker.
    pub(super) incoming: usize,
    /// Whether it is in `Scheduler::idle`.
    pub(super) queued_idle: bool,
    /// Fenced evolve requests it still owes: while any, it is a straggler,
    /// gets no work and holds up no operation (`straggle.rs`).
    pub(super) fenced: usize,
    /// Where this worker takes handoffs from peers.
    pub(super) peer: Option<String>,
    pub(super) per_state_ns: Option<f64>,
    pub(super) rtt_ns: Option<f64>,
    /// Since when this worker has owed an answer, and when it last spoke.
    pub(super) owing_since: Instant,
    pub(super) last_heard: Instant,
    /// When its last `Evolved` came.
    pub(super) last_evolved: Instant,
    /// It sends heartbeats (one came, and the config asks for them):
    /// silence since this instant, or since the master last read from it,
    /// makes it lost (see `deadline.rs`).
    pub(super) beats_from: Option<Instant>,
    /// It said `Leaving`: it takes no more states, and between operations
    /// its states move to the others and it is told to exit (`leave.rs`).
    pub(super) leaving: bool,
    pub(super) stats: WorkerStats,
}

/// A `Give` in progress.
pub(super) struct Transfer {
    pub(super) victim: WorkerId,
    pub(super) thief: WorkerId,
    pub(super) ids: Vec<StateId>,
    pub(super) step: u64,
    pub(super) sent: Instant,
    /// The victim said `Given n` with n > 0.
    pub(super) given: bool,
    /// The master stopped waiting for it (its victim died first).
    pub(super) cancelled: bool,
}

impl Slot {
    pub(super) fn new(addr: SocketAddr, now: Instant) -> Self {
        Slot {
            addr,
            alive: true,
            pending: Vec::new(),
            pending_cost: 0.0,
            in_flight: VecDeque::new(),
            evolving: 0,
            incoming: 0,
            queued_idle: false,
            fenced: 0,
            peer: None,
            per_state_ns: None,
            rtt_ns: None,
            owing_since: now,
            last_heard: now,
            last_evolved: now,
            beats_from: None,
            leaving: false,
            committed_at: None,
            stats: WorkerStats::default(),
        }
    }
}
