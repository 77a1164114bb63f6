//! Accounting: per worker busy and waiting time, steals, bytes; the master
//! loop's busy share; a final table.

use std::fmt::Write as _;
use std::time::Duration;

/// Counters for one worker, kept by the master.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Time the worker reported spending in `evolve` calls.
    pub busy_ns: u64,
    /// States evolved.
    pub evolved: u64,
    /// Evolve batches answered.
    pub batches: u64,
    /// Steals this worker received (as the idle one).
    pub steals_in: u64,
    /// Steals taken from this worker.
    pub steals_out: u64,
    /// States moved to this worker by steals.
    pub stolen_states: u64,
    /// States moved to this worker by the start-of-step rebalance.
    pub rebalanced_states: u64,
    /// Moves (steals and rebalance) that reached this worker, and their
    /// total time from the master's decision to the states being evolvable here.
    pub transfers: u64,
    /// The total time of those moves, in nanoseconds.
    pub transfer_ns: u64,
    /// Of those, how many came straight from the victim (`StealVia::Peer`).
    pub direct_transfers: u64,
    /// A lost worker's states placed on this worker (recovery).
    pub recovered_states: u64,
    /// Bytes the master sent to this worker.
    pub bytes_out: u64,
    /// Bytes the master received from this worker.
    pub bytes_in: u64,
    /// Replicas this worker sent its buddy (`Recovery::Buddy`): rounds.
    pub replicas_sent: u64,
    /// And their state bytes, straight to the buddy (not through the master).
    pub replica_bytes: u64,
    /// It asked to leave (SIGTERM), its states moved to the others and it
    /// was told to exit: a departure, not a loss.
    pub left: bool,
}

/// Counters for a whole cluster.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// One entry per worker connection, in the order they joined.
    pub workers: Vec<WorkerStats>,
    /// Wall time spent inside `evolve_many`.
    pub evolve_wall: Duration,
    /// Time the master thread spent handling events inside `evolve_many`
    /// (event-loop master only; the threaded one cannot tell).
    pub master_busy: Option<Duration>,
    /// `evolve_many` calls.
    pub steps: u64,
    /// When each lost worker was recovered from (the master noticed the
    /// loss and placed its states on the others), in order.
    pub recovered_at: Vec<std::time::Instant>,
    /// Rollbacks to a snapshot (`Master::rollback`): runs that went back to
    /// a checkpoint because no copy of some state survived.
    pub rollbacks: u64,
}

impl Stats {
    /// Workers lost and recovered from (their states placed on the others).
    pub fn lost_workers(&self) -> usize {
        self.recovered_at.len()
    }

    /// Workers that asked to leave and left, their states moved to the
    /// others (no loss, nothing recovered).
    pub fn left_workers(&self) -> usize {
        self.workers.iter().filter(|w| w.left).count()
    }

    /// Total reported evolve time.
    pub fn total_busy(&self) -> Duration {
        Duration::from_nanos(self.workers.iter().map(|w| w.busy_ns).sum())
    }

    /// Ideal wall time over actual: (total evolve time / workers) / wall time.
    pub fn efficiency(&self) -> f64 {
        let wall = self.evolve_wall.as_secs_f64();
        if wall == 0.0 || self.workers.is_empty() {
            return 0.0;
        }
        self.total_busy().as_secs_f64() / self.workers.len() as f64 / wall
    }

    /// Mean time from deciding a move to the states being evolvable at the
    /// thief, if any move happened.
    pub fn mean_transfer(&self) -> Option<Duration> {
        let n: u64 = self.workers.iter().map(|w| w.transfers).sum();
        let t: u64 = self.workers.iter().map(|w| w.transfer_ns).sum();
        (n > 0).then(|| Duration::from_nanos(t / n))
    }

    /// Share of `evolve_many` wall time the master loop was busy.
    pub fn master_busy_share(&self) -> Option<f64> {
        let wall = self.evolve_wall.as_secs_f64();
        self.master_busy.map(|b| {
            if wall > 0.0 {
                b.as_secs_f64() / wall
            } else {
                0.0
            }
        })
    }

    /// The per-worker table: busy and waiting share, batches, steals, bytes.
    pub fn table(&self) -> String {
        let wall = self.evolve_wall.as_secs_f64().max(1e-12);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:>6} {:>7} {:>7} {:>8} {:>8} {:>9} {:>10} {:>11} {:>11}",
            "worker",
            "busy%",
            "wait%",
            "states",
            "batches",
            "steals in",
            "steals out",
            "MB to",
            "MB from"
        );
        for (i, w) in self.workers.iter().enumerate() {
            let busy = w.busy_ns as f64 / 1e9 / wall * 100.0;
            let _ = writeln!(
                s,
                "{:>6} {:>7.1} {:>7.1} {:>8} {:>8} {:>9} {:>10} {:>11.3} {:>11.3}",
                i,
                busy,
                (100.0 - busy).max(0.0),
                w.evolved,
                w.batches,
                w.steals_in,
                w.steals_out,
                w.bytes_out as f64 / 1e6,
                w.bytes_in as f64 / 1e6
            );
        }
        let _ = write!(
            s,
            "steps {}  wall {:.3} s  efficiency {:.1}%",
            self.steps,
            wall,
            self.efficiency() * 100.0
        );
        if let Some(b) = self.master_busy_share() {
            let _ = write!(s, "  master loop busy {:.1}%", b * 100.0);
        }
        s
    }
}
