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

/// How often a [`StallWatch`] sampler wakes.
pub const STALL_PERIOD: Duration = Duration::from_millis(1);
/// A sampler waking later than this counts the delay as a stall: well above
/// a real-time thread's wake-up latency on an idle or busy CPU (a few µs
/// to tens of µs), well below what a latency target cares about.
pub const STALL_THRESHOLD: Duration = Duration::from_micros(100);

/// Watches the CPUs for the moments they run nothing of this machine at
/// all: one thread pinned to each CPU, in `SCHED_FIFO`, sleeps to the next
/// millisecond again and again and notes every wake-up later than
/// [`STALL_THRESHOLD`]. A real-time thread preempts whatever runs on its
/// CPU the moment its timer fires, so it is late only when the CPU itself
/// was taken away (a virtual CPU the hypervisor did not run, interrupts):
/// time no program on the machine could use, a floor under every latency
/// measured then.
///
/// Watch next to a latency measurement, not during it. Its cost is only a
/// few µs per CPU per millisecond, but on a virtual machine a CPU woken
/// every millisecond never sits idle long enough for the hypervisor to
/// stop running it, and that changes the latencies: the overload run's 429
/// p99 had a median of 0.68 ms with the watch running against 1.15 ms
/// without it, in twelve interleaved pairs on the 2-vCPU host.
///
/// A stall that ends between two wake-ups is missed, and one that covers a
/// wake-up counts from that wake-up only, so what it reports are lower
/// bounds.
#[derive(Debug)]
pub struct StallWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    start: Instant,
    samplers: Vec<thread::JoinHandle<Sampled>>,
}

/// What one sampler saw.
#[derive(Debug)]
struct Sampled {
    cpu: usize,
    /// Pinned and real-time: its lateness is the CPU's, not its neighbours'.
    trusted: bool,
    /// `(due, woke)` of every late wake-up, from the watch's start.
    late: Vec<(Duration, Duration)>,
}

impl StallWatch {
    /// Starts a sampler on each of `cpus`.
    pub fn start(cpus: &[usize]) -> StallWatch {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let start = Instant::now();
        let samplers = cpus
            .iter()
            .map(|&cpu| {
                let stop = stop.clone();
                thread::Builder::new()
                    .name(format!("stall-watch-{cpu}"))
                    .spawn(move || sample(cpu, start, &stop))
                    .expect("spawning a stall sampler")
            })
            .collect();
        StallWatch {
            stop,
            start,
            samplers,
        }
    }

    /// Watches `cpus` for `window`, then says what it saw.
    pub fn over(cpus: &[usize], window: Duration) -> Stalls {
        let watch = StallWatch::start(cpus);
        thread::sleep(window);
        watch.finish()
    }

    /// Stops the samplers and says what they saw.
    pub fn finish(self) -> Stalls {
        // Relaxed: a flag polled every millisecond; `join` orders the rest.
        self.stop.store(true, Ordering::Relaxed);
        let window = self.start.elapsed();
        let mut stalls = Stalls {
            window,
            cpus: Vec::new(),
            refused: Vec::new(),
            late: Vec::new(),
        };
        for sampler in self.samplers {
            let s = sampler.join().expect("a stall sampler panicked");
            if s.trusted {
                stalls.cpus.push(s.cpu);
                stalls.late.push(s.late);
            } else {
                stalls.refused.push(s.cpu);
            }
        }
        stalls
    }
}

fn sample(cpu: usize, start: Instant, stop: &std::sync::atomic::AtomicBool) -> Sampled {
    let trusted = statepipe_sys::pin::pin_current_thread(cpu)
        && statepipe_sys::pin::set_current_thread_fifo(1);
    let mut late = Vec::new();
    let mut due = Instant::now();
    // Relaxed: see `finish`.
    while trusted && !stop.load(Ordering::Relaxed) {
        due += STALL_PERIOD;
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        let woke = Instant::now();
        if woke.duration_since(due) > STALL_THRESHOLD {
            late.push((due - start, woke - start));
        }
        // After a long stall, the next wake-up is due a period from now,
        // not at the missed ones.
        if woke > due + STALL_PERIOD {
            due = woke;
        }
    }
    Sampled { cpu, trusted, late }
}

/// What a [`StallWatch`] saw: for each CPU it could watch, the intervals
/// (from its start) in which that CPU was taken away.
#[derive(Debug, Clone, PartialEq)]
pub struct Stalls {
    /// How long the watch ran.
    pub window: Duration,
    /// The CPUs watched, in the order of `late`.
    pub cpus: Vec<usize>,
    /// The CPUs it could not watch: no pinning, or `SCHED_FIFO` refused
    /// (it needs root or `CAP_SYS_NICE`).
    pub refused: Vec<usize>,
    /// Per watched CPU, its stalls as `(from, to)`.
    pub late: Vec<Vec<(Duration, Duration)>>,
}

impl Stalls {
    /// This watch followed by `later`, as one watch over both windows
    /// (the time between them not counted): the CPUs both watched.
    pub fn then(mut self, later: Stalls) -> Stalls {
        let shift = self.window;
        let mut cpus = Vec::new();
        let mut late = Vec::new();
        for (cpu, mine) in self.cpus.iter().zip(std::mem::take(&mut self.late)) {
            let Some(k) = later.cpus.iter().position(|c| c == cpu) else {
                continue;
            };
            let theirs = later.late[k].iter().map(|(a, b)| (*a + shift, *b + shift));
            cpus.push(*cpu);
            late.push(mine.into_iter().chain(theirs).collect());
        }
        let mut refused = self.refused;
        for c in later.refused {
            if !refused.contains(&c) {
                refused.push(c);
            }
        }
        Stalls {
            window: self.window + later.window,
            cpus,
            refused,
            late,
        }
    }

    /// Whether any CPU was watched.
    pub fn watched(&self) -> bool {
        !self.cpus.is_empty()
    }

    /// The largest share of the window any one CPU was taken away, 0 to 1.
    pub fn lost(&self) -> f64 {
        let window = self.window.as_secs_f64();
        self.late
            .iter()
            .map(|l| l.iter().map(|(a, b)| (*b - *a).as_secs_f64()).sum::<f64>())
            .fold(0.0, f64::max)
            / window.max(f64::MIN_POSITIVE)
    }

    /// The longest stall of any CPU.
    pub fn longest(&self) -> Duration {
        self.late
            .iter()
            .flatten()
            .map(|(a, b)| *b - *a)
            .max()
            .unwrap_or_default()
    }

    /// Stalls longer than `over`, all CPUs together.
    pub fn count_over(&self, over: Duration) -> usize {
        self.late
            .iter()
            .flatten()
            .filter(|(a, b)| *b - *a > over)
            .count()
    }

    /// The share of the window's instants at which some watched CPU stays
    /// taken away for more than `x` yet: the share of requests arriving at
    /// random instants that wait more than `x` for the host alone, when a
    /// request waits for every CPU it passes (generator and server).
    pub fn share_delayed_over(&self, x: Duration) -> f64 {
        let mut spans: Vec<(Duration, Duration)> = self
            .late
            .iter()
            .flatten()
            .filter(|(a, b)| *b - *a > x)
            .map(|(a, b)| (*a, *b - x))
            .collect();
        spans.sort();
        let mut covered = Duration::ZERO;
        let mut open: Option<(Duration, Duration)> = None;
        for (a, b) in spans {
            open = match open {
                Some((oa, ob)) if a <= ob => Some((oa, ob.max(b))),
                Some((oa, ob)) => {
                    covered += ob - oa;
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        if let Some((oa, ob)) = open {
            covered += ob - oa;
        }
        covered.as_secs_f64() / self.window.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// The host's floor under a quantile `q` (0.99: the p99) of the
    /// latency of requests arriving at random instants: the least `x` that
    /// no more than `1 − q` of the instants wait longer than for the host
    /// alone. Zero where the stalls cover less than `1 − q` of the window.
    pub fn floor(&self, q: f64) -> Duration {
        let share = 1.0 - q;
        let (mut lo, mut hi) = (Duration::ZERO, self.longest());
        if self.share_delayed_over(lo) <= share {
            return Duration::ZERO;
        }
        // Bisection to a microsecond: the share only falls as `x` grows.
        while hi - lo > Duration::from_micros(1) {
            let mid = lo + (hi - lo) / 2;
            if self.share_delayed_over(mid) > share {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// One line for a report.
    pub fn describe(&self) -> String {
        if !self.watched() {
            return format!(
                "host stalls: not watched (a sampler needs pinning and SCHED_FIFO, which needs root or \
                 CAP_SYS_NICE; refused on CPUs {:?})",
                self.refused
            );
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "host stalls over {:.1} s (a SCHED_FIFO sampler every {} ms on CPUs {:?}): at least {:.2} % \
             of the time taken from a CPU, longest {:.2} ms, {} over 1 ms; the host alone delays 1 % of \
             arrivals by at least {:.2} ms",
            self.window.as_secs_f64(),
            ms(STALL_PERIOD),
            self.cpus,
            100.0 * self.lost(),
            ms(self.longest()),
            self.count_over(Duration::from_millis(1)),
            ms(self.floor(0.99)),
        )
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

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    fn stalls(late: Vec<Vec<(u64, u64)>>, window_ms: u64) -> Stalls {
        Stalls {
            window: ms(window_ms),
            cpus: (0..late.len()).collect(),
            refused: Vec::new(),
            late: late
                .into_iter()
                .map(|l| l.into_iter().map(|(a, b)| (ms(a), ms(b))).collect())
                .collect(),
        }
    }

    #[test]
    fn the_floor_is_where_the_stalls_cover_the_quantile() {
        // One 20 ms stall in a second: 2 % of arrivals wait, the p99's
        // floor is the wait of the arrival 10 ms before its end.
        let s = stalls(vec![vec![(100, 120)]], 1000);
        assert_eq!(s.longest(), ms(20));
        assert!((s.lost() - 0.02).abs() < 1e-9);
        let floor = s.floor(0.99);
        assert!(
            floor.abs_diff(ms(10)) <= Duration::from_micros(1),
            "{floor:?}"
        );
        // Below the quantile's share, no floor.
        assert_eq!(
            stalls(vec![vec![(100, 105)]], 1000).floor(0.99),
            Duration::ZERO
        );
    }

    #[test]
    fn stalls_of_two_cpus_at_once_count_once() {
        let both = stalls(vec![vec![(100, 120)], vec![(100, 120)]], 1000);
        assert!((both.share_delayed_over(Duration::ZERO) - 0.02).abs() < 1e-9);
        assert_eq!(both.count_over(ms(1)), 2);
        // Apart, each delays its own arrivals.
        let apart = stalls(vec![vec![(100, 120)], vec![(500, 520)]], 1000);
        assert!((apart.share_delayed_over(Duration::ZERO) - 0.04).abs() < 1e-9);
        assert!(apart.floor(0.99) > both.floor(0.99));
    }

    #[test]
    fn two_watches_join_into_one_over_both_windows() {
        let a = stalls(vec![vec![(100, 120)], vec![]], 1000);
        let b = stalls(vec![vec![], vec![(100, 120)]], 1000);
        let both = a.then(b);
        assert_eq!(both.window, ms(2000));
        assert_eq!(both.late[1], vec![(ms(1100), ms(1120))]);
        assert!((both.share_delayed_over(Duration::ZERO) - 0.02).abs() < 1e-9);
        assert!((both.lost() - 0.01).abs() < 1e-9);
    }

    #[test]
    fn a_watch_finishes_and_says_what_it_watched() {
        let cpus: Vec<usize> = usable_cpus().iter().map(|c| c.id).collect();
        let watch = StallWatch::start(&cpus);
        thread::sleep(ms(20));
        let seen = watch.finish();
        assert_eq!(seen.cpus.len() + seen.refused.len(), cpus.len());
        assert_eq!(seen.late.len(), seen.cpus.len());
        assert!(seen.describe().starts_with("host stalls"));
    }
}
