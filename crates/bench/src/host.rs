//! The state of the host, measured before any benchmark: which CPUs the process may use
//! and how long a cache line takes to travel between two of them and back.
//!
//! On a shared or virtualised machine the cross-core round trip flips between about a
//! hundred nanoseconds and several microseconds; rankings between ring buffers flip with
//! it. Every report therefore starts with this measurement.

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use core_affinity::CoreId;
use crossbeam_utils::CachePadded;

use crate::stats;

/// A round trip below this many nanoseconds marks a quiet host: no other load
/// slows the cross-core hand-off that every benchmark here depends on.
pub const QUIET_PINGPONG_NS: f64 = 200.0;

/// The CPUs this process may run on (its scheduler affinity), in id order: the
/// `ids` of [`statepipe_sys::cpus::usable_cpus`], as `core_affinity` ids.
///
/// Never empty: where the mask cannot be read, the ids are guessed from
/// [`std::thread::available_parallelism`], and pinning to them may fail.
pub fn usable_cpus() -> Vec<CoreId> {
    let ids = statepipe_sys::cpus::usable_cpus().ids;
    ids.into_iter().map(|id| CoreId { id }).collect()
}

/// Pins the calling thread to `cpu` when given ([`statepipe_sys::pin::pin_current_thread`]);
/// returns whether the thread is pinned.
pub fn pin_current(cpu: Option<CoreId>) -> bool {
    cpu.is_some_and(|c| statepipe_sys::pin::pin_current_thread(c.id))
}

/// What [`measure`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    /// The CPUs the process may use (see [`usable_cpus`]).
    pub cpus: Vec<CoreId>,
    /// The number of CPUs the process may use, at least 1.
    pub cpu_count: usize,
    /// Median cross-core round trip, in nanoseconds.
    pub pingpong_ns: f64,
    /// The two CPUs the ping-pong threads were pinned to, when pinning worked.
    pub pingpong_cpus: Option<(usize, usize)>,
    /// The 1-minute load average before the run (Linux), counting runnable threads of
    /// every process: other work competing for the CPUs, or a build that just ended.
    pub load_average: Option<f64>,
}

impl Host {
    /// Whether the host counts as quiet (round trip under [`QUIET_PINGPONG_NS`]).
    pub fn is_quiet(&self) -> bool {
        self.pingpong_ns < QUIET_PINGPONG_NS
    }

    /// The environment lines printed at the top of every run.
    pub fn describe(&self) -> String {
        let ids: Vec<String> = self.cpus.iter().map(|c| c.id.to_string()).collect();
        let ids = if ids.is_empty() {
            "unknown ids".to_string()
        } else {
            format!("ids {}", ids.join(","))
        };
        let pinned = match self.pingpong_cpus {
            Some((a, b)) => format!("threads pinned to CPUs {a} and {b}"),
            None => "threads not pinned".to_string(),
        };
        let verdict = if self.is_quiet() {
            format!("quiet host (< {QUIET_PINGPONG_NS} ns)")
        } else {
            format!("NOISY host (>= {QUIET_PINGPONG_NS} ns): rankings may flip between runs")
        };
        let load = match self.load_average {
            Some(load) if load >= self.cpu_count as f64 => format!(
                "; 1-min load average {load:.2}: the CPUs were oversubscribed in the last \
                 minute, expect noise"
            ),
            Some(load) => format!("; 1-min load average {load:.2}"),
            None => String::new(),
        };
        format!(
            "host: {} usable CPU(s) ({ids}), by scheduler affinity{load}\n\
             host: cross-core ping-pong {:.0} ns per round trip ({pinned}); {verdict}",
            self.cpu_count, self.pingpong_ns
        )
    }
}

/// The 1-minute load average from `/proc/loadavg`; `None` where there is none.
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Measures the host: usable CPUs and load, then a ping-pong for about `budget`.
pub fn measure(budget: Duration) -> Host {
    let load_average = load_average();
    let cpus = usable_cpus();
    // By affinity alone, as the report says; `statepipe_sys::cpus::Cpus::count`
    // would also honour a cgroup quota.
    let cpu_count = cpus.len().max(1);
    let pair = match cpus.as_slice() {
        [a, b, ..] => Some((*a, *b)),
        _ => None,
    };
    let (pingpong_ns, pinned) = pingpong(pair, budget);
    Host {
        cpus,
        cpu_count,
        load_average,
        pingpong_ns,
        pingpong_cpus: pinned.then(|| pair.map(|(a, b)| (a.id, b.id))).flatten(),
    }
}

/// Round trips timed together; a batch is short enough that a preemption spoils few.
const ROUNDS_PER_BATCH: u64 = 1_000;
/// Bounds on the number of batches (the first one is a discarded warm-up).
const MIN_BATCHES: usize = 5;
const MAX_BATCHES: usize = 400;
/// Spins before a waiting side yields its CPU, so that a descheduled partner (one CPU,
/// a busy host) can run.
const SPINS_BEFORE_YIELD: u32 = 1 << 12;
/// Sent by the client to end the server.
const STOP: u64 = u64::MAX;

/// Median nanoseconds per round trip of a value bounced between two threads, pinned
/// to `pair` when given; returns it with whether both threads were pinned.
///
/// The protocol: the client writes an odd value `2k+1`; the server, seeing an odd value
/// `v`, writes `v+1`; the client waits for `2k+2`. The ball is the only data exchanged,
/// so `Relaxed` suffices: coherence orders the stores of one atomic, and what is timed
/// is the cache line's trip, not any publication of other memory.
pub fn pingpong(pair: Option<(CoreId, CoreId)>, budget: Duration) -> (f64, bool) {
    let ball = CachePadded::new(AtomicU64::new(0));
    let ball = &ball;
    thread::scope(|s| {
        let server = s.spawn(move || {
            let pinned = pin_current(pair.map(|p| p.1));
            let mut spins = 0u32;
            loop {
                let v = ball.load(Ordering::Relaxed);
                if v == STOP {
                    return pinned;
                }
                if v % 2 == 1 {
                    ball.store(v + 1, Ordering::Relaxed);
                    spins = 0;
                } else {
                    spins = spin_or_yield(spins);
                }
            }
        });
        let client = s.spawn(move || {
            let pinned = pin_current(pair.map(|p| p.0));
            let mut per_round = Vec::with_capacity(MAX_BATCHES);
            let start = Instant::now();
            let mut next = 1u64;
            for batch in 0..MAX_BATCHES {
                if batch > MIN_BATCHES && start.elapsed() >= budget {
                    break;
                }
                let t0 = Instant::now();
                for _ in 0..ROUNDS_PER_BATCH {
                    ball.store(next, Ordering::Relaxed);
                    let mut spins = 0u32;
                    while ball.load(Ordering::Relaxed) != next + 1 {
                        spins = spin_or_yield(spins);
                    }
                    next += 2;
                }
                if batch > 0 {
                    per_round.push(t0.elapsed().as_nanos() as f64 / ROUNDS_PER_BATCH as f64);
                }
            }
            ball.store(STOP, Ordering::Relaxed);
            (stats::median(&per_round), pinned)
        });
        let (ns, client_pinned) = client.join().expect("ping-pong client panicked");
        let server_pinned = server.join().expect("ping-pong server panicked");
        (ns, client_pinned && server_pinned)
    })
}

fn spin_or_yield(spins: u32) -> u32 {
    if spins < SPINS_BEFORE_YIELD {
        std::hint::spin_loop();
        spins + 1
    } else {
        thread::yield_now();
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pingpong_finishes_and_is_positive() {
        let (ns, _) = pingpong(None, Duration::from_millis(5));
        assert!(ns > 0.0 && ns.is_finite(), "{ns}");
    }

    #[test]
    fn measure_reports_at_least_one_cpu() {
        let host = measure(Duration::from_millis(5));
        assert!(host.cpu_count >= 1);
        assert!(host.describe().contains("ping-pong"));
    }
}
