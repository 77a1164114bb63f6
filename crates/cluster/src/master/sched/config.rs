//! The scheduler's knobs: plain data, set by the caller through
//! [`MasterConfig::sched`](crate::MasterConfig::sched).

use std::time::Duration;

/// How often drivers look for overdue workers.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(100);

/// Evolve batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// Always this many states per request (at least 1).
    Fixed(usize),
    /// `ceil(2 × rtt / per-state evolve time)`, both measured per worker,
    /// within `1..=max`, and at most half the worker's queued states.
    Adaptive {
        /// The largest batch.
        max: usize,
    },
}

/// Where `reset_states` puts states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Contiguous equal chunks, one per worker.
    Spread,
    /// Everything on the first worker (forces steals; for tests).
    First,
}

/// The path stolen states take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StealVia {
    /// Victim → master → thief (`Remove`, `Removed`, then `Add`).
    Master,
    /// Victim → thief directly (`Give`, `Handoff`, `Arrived`); falls back
    /// to the master for a thief without a peer address.
    Peer,
}

/// Scheduling knobs.
#[derive(Debug, Clone)]
pub struct SchedConfig {
    /// How many states one evolve request carries.
    pub batch: Batch,
    /// Evolve requests in flight per worker (2 hides one round trip).
    pub pipeline: usize,
    /// Move queued states to idle workers.
    pub steal: bool,
    /// Where `reset_states` puts states.
    pub placement: Placement,
    /// At the start of each step, move states so that every worker's
    /// expected work is even (longest first; see `plan.rs`).
    pub rebalance: bool,
    /// Use [`Evolve::expected_cost`](crate::evolve::Evolve::expected_cost);
    /// otherwise every state counts 1.
    pub cost_hints: bool,
    /// The path stolen states take.
    pub steal_via: StealVia,
    /// When a worker that owes answers is declared lost.
    pub deadlines: Deadlines,
    /// What happens to a lost worker's states.
    pub recovery: Recovery,
    /// With [`Recovery::Buddy`]: how many workers hold a replica of each
    /// worker's states (its buddies, the next `replicas` live workers; at
    /// least 1, and at most the live workers less two, so that some worker
    /// can always take a worker's states). Any set of losses within one
    /// replication round that leaves one copy of every state (at most
    /// `replicas` workers lost, say) is recovered.
    pub replicas: usize,
}

/// What the master does when a worker is lost (its connection closes, or
/// it stays silent past its deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    /// The operation fails with [`Error::WorkerLost`](crate::Error::WorkerLost),
    /// which says where every state is; the caller decides.
    Off,
    /// The master keeps a copy of every live state (workers send each
    /// child's bytes with its output, so every state crosses the network
    /// once more). A lost worker's states are placed on the survivors from
    /// those copies and the step's unfinished evolves run again there: as
    /// every random number derives from (seed, step, parent), the run ends
    /// with the same bits as a run without the loss. Stolen states travel
    /// through the master ([`StealVia::Master`]) in this mode. A worker that
    /// reports a failed evolve (a panic in the model) is not recovered:
    /// the same call would fail again.
    MasterCopy,
    /// Each worker keeps a replica of another's states (its buddy: the
    /// next live worker in order). After every operation that changed the
    /// states, each worker sends a copy of all it holds straight to its
    /// buddy, and the master commits the round once every replica is held:
    /// state bytes never load the master, at the cost of one extra round
    /// trip and every state crossing the network once per step. A lost
    /// worker's states are made live from their replicas where those are
    /// held, and the operation's work on them runs again there (with the
    /// same bits, as with `MasterCopy`). With [`SchedConfig::replicas`]
    /// buddies per worker (2 by default), any losses before the next
    /// round commits that leave one copy of every state are recovered;
    /// losing a worker together with all its buddies is not. Moves keep
    /// a state off its replicas' workers; stolen states travel through
    /// the master.
    Buddy,
    /// `Buddy` when the states are large and some worker is on another
    /// host, `MasterCopy` otherwise: decided at the first reset (or
    /// restore) from the mean encoded state size against
    /// [`AUTO_BUDDY_BYTES`] and the workers' addresses (all loopback: one
    /// host, where the master's copies cross no network), and said in one
    /// log line.
    Auto,
}

/// Replicas of each state kept by [`Recovery::Buddy`] by default: a
/// worker lost together with one of its two buddies, or two losses in one
/// round anywhere, still leave a copy.
pub const DEFAULT_REPLICAS: usize = 2;

/// Mean encoded state size from which [`Recovery::Auto`] picks
/// [`Recovery::Buddy`] for workers on other hosts. At 64 KiB, 2,000 states
/// are 131 MB per step: about 0.1 s through a 10 Gb/s master link with
/// `MasterCopy`, against a replication round that spreads those bytes over
/// every worker's link (2.6 ms each at 50 workers) plus a round trip.
pub const AUTO_BUDDY_BYTES: usize = 64 << 10;

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            batch: Batch::Adaptive { max: 64 },
            pipeline: 2,
            steal: true,
            placement: Placement::Spread,
            rebalance: true,
            cost_hints: true,
            steal_via: StealVia::Master,
            deadlines: Deadlines::default(),
            recovery: Recovery::MasterCopy,
            replicas: DEFAULT_REPLICAS,
        }
    }
}

/// When a worker is declared lost without closing its connection.
///
/// Workers send a `Heartbeat` every `heartbeat` from the moment they have
/// the model, on a thread of their own, whatever they are evolving. Once a
/// worker's first heartbeat has come, silence is the time since the master last
/// read any byte from it (a heartbeat, an answer, part of a frame still in
/// transit), and a worker silent for `silence` is lost: a stopped process,
/// a dead host or a cut link, however long its evolve calls are. Before
/// that (fake workers in tests, a worker of `heartbeat: None`), each
/// outstanding request has an allowance instead (`factor`, `floor`,
/// `unmeasured`; see `deadline.rs`).
///
/// A worker whose evolve never returns (a model that loops forever) still
/// heartbeats, so each batch it evolves has a deadline of its own: `fixed`,
/// or `factor` × its expected time (by the p99 per state, or by its
/// expected cost, whichever is longer), at least `floor`. A worker past it
/// is dropped and its states run elsewhere; a state that runs past its
/// deadline on three workers fails the operation with
/// [`Error::EvolveHung`](crate::Error::EvolveHung), naming it and the
/// step.
#[derive(Debug, Clone, PartialEq)]
pub struct Deadlines {
    /// How often workers send a heartbeat (`None`: never; requests'
    /// allowances apply instead).
    pub heartbeat: Option<Duration>,
    /// Silence after which a heartbeating worker is lost ([`SILENCE`] by
    /// default: thirty heartbeats, so that a loaded host's scheduling
    /// hiccup never costs a worker).
    pub silence: Duration,
    /// Silence after which a heartbeating worker that owes an evolve of the
    /// current step is taken for stopped, long before `silence`: with
    /// [`Recovery::MasterCopy`] its work starts again from the master's
    /// copies on idle workers (the first answer wins), and after twice
    /// this it is dropped as lost, its work placed where it starts
    /// soonest; with [`Recovery::Buddy`] it is dropped after twice this.
    /// `None`: [`QUIET_BEATS`] heartbeat intervals.
    pub quiet: Option<Duration>,
    /// One allowance for every request, replacing the measured ones and,
    /// for heartbeating workers, `silence` and each evolve's deadline.
    pub fixed: Option<Duration>,
    /// Multiple of the expected (p99) evolve time of a batch.
    pub factor: f64,
    /// The least allowance.
    pub floor: Duration,
    /// Before anything was measured, and for `Setup`.
    pub unmeasured: Duration,
}

/// The default heartbeat interval: short, so that a stopped worker is
/// noticed within a few of them (`Deadlines::quiet`); a heartbeat is an
/// 8-byte frame, so 200 workers send the master 32 KB/s.
pub const HEARTBEAT: Duration = Duration::from_millis(25);

/// The default silence after which a heartbeating worker is lost.
pub const SILENCE: Duration = Duration::from_millis(1500);

/// Heartbeat intervals of silence after which a worker owing an evolve is
/// taken for stopped (`Deadlines::quiet`): one late heartbeat is a busy
/// host, three missed in a row a stopped process.
pub const QUIET_BEATS: u32 = 3;

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            heartbeat: Some(HEARTBEAT),
            silence: SILENCE,
            quiet: None,
            fixed: None,
            factor: 10.0,
            floor: Duration::from_secs(1),
            unmeasured: Duration::from_secs(60),
        }
    }
}

impl Deadlines {
    /// The silence after which a heartbeating worker is lost.
    pub(crate) fn silence(&self) -> Duration {
        self.fixed.unwrap_or(self.silence)
    }

    /// The silence after which a worker owing an evolve is taken for
    /// stopped (none without heartbeats).
    pub fn quiet(&self) -> Option<Duration> {
        self.heartbeat?;
        self.quiet.or(self.heartbeat.map(|h| h * QUIET_BEATS))
    }

    /// The heartbeat interval sent in `Setup`, in milliseconds (0: none).
    pub(crate) fn heartbeat_ms(&self) -> u32 {
        self.heartbeat.map_or(0, |h| {
            u32::try_from(h.as_millis()).unwrap_or(u32::MAX).max(1)
        })
    }
}
