//! The ring workload every implementation runs: topologies, publish modes, the producer
//! loop, the timing of one sample and the check of the consumers' sums.
//!
//! A sample is *time-boxed*: producers publish the counter `0, 1, 2, ...` in chunks of
//! [`BATCH`] events until the sample's duration has passed (a stop flag checked between
//! chunks), then close; the clock stops when every consumer has drained the ring. The
//! rate is every event published divided by that time, so each sample takes about the
//! same wall time whether an implementation moves 10 or 2,000 million events a second,
//! and a collapsing one (busy-spinning threads outnumbering cores) cannot stall a run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use core_affinity::CoreId;

use crate::host::pin_current;
use crate::watchdog::Watchdog;
use crate::BenchError;

/// Ring capacity (or channel bound) of every implementation, in events.
pub const CAPACITY: usize = 65_536;
/// Events per batch publish, and per chunk between two checks of the stop flag.
pub const BATCH: usize = 64;
/// A safety cap per producer and sample; at 2,000 M events/s it is hit after 8 s, far
/// beyond any sample's duration. Keeps the consumers' wrapping sums unambiguous.
const MAX_EVENTS_PER_PRODUCER: u64 = 1 << 34;
/// How long past its duration a sample may run (drain, joins) before the watchdog
/// declares it hung.
const HANG_LIMIT: Duration = Duration::from_secs(60);

/// Who is connected to whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One producer, one consumer.
    OneToOne,
    /// `n` producers, one consumer.
    ManyToOne(usize),
    /// One producer, three consumers that each see every event (multicast).
    OneToThree,
    /// P -> A -> B -> C: B handles an event after A did, C after B.
    Pipeline3,
    /// P -> A, B -> C: A and B in parallel, C after both.
    Diamond,
}

impl Topology {
    /// The topologies of the main cases.
    pub const MAIN: [Topology; 5] = [
        Topology::OneToOne,
        Topology::ManyToOne(3),
        Topology::OneToThree,
        Topology::Pipeline3,
        Topology::Diamond,
    ];

    /// The name in case names: `1p1c`, `3p1c`, `1p3c`, `pipeline3`, `diamond`.
    pub fn name(self) -> String {
        match self {
            Topology::OneToOne => "1p1c".into(),
            Topology::ManyToOne(n) => format!("{n}p1c"),
            Topology::OneToThree => "1p3c".into(),
            Topology::Pipeline3 => "pipeline3".into(),
            Topology::Diamond => "diamond".into(),
        }
    }

    /// Number of producer threads.
    pub fn producers(self) -> usize {
        match self {
            Topology::ManyToOne(n) => n,
            _ => 1,
        }
    }

    /// The consumers, named as in the ring's builder.
    pub fn consumers(self) -> &'static [&'static str] {
        match self {
            Topology::OneToOne | Topology::ManyToOne(_) => &["c"],
            Topology::OneToThree | Topology::Pipeline3 | Topology::Diamond => &["a", "b", "c"],
        }
    }

    /// Producer and consumer threads together.
    pub fn threads(self) -> usize {
        self.producers() + self.consumers().len()
    }
}

/// How producers hand events over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One publish call per event.
    Single,
    /// One publish call per [`BATCH`] events.
    Batch,
}

impl Mode {
    /// Both modes.
    pub const ALL: [Mode; 2] = [Mode::Single, Mode::Batch];

    /// The name in case names: `single`, `batch`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Single => "single",
            Mode::Batch => "batch",
        }
    }
}

/// Which CPU each thread of a sample is pinned to: producers first, then consumers in
/// [`Topology::consumers`] order. Empty = nothing pinned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins(Vec<CoreId>);

impl Pins {
    /// One CPU per thread when `threads` fit on `cpus`, otherwise none (the OS
    /// schedules them; pinning more threads than CPUs would only stack them).
    pub fn spread(threads: usize, cpus: &[CoreId]) -> Pins {
        if threads <= cpus.len() {
            Pins(cpus[..threads].to_vec())
        } else {
            Pins::default()
        }
    }

    /// Whether any thread is pinned.
    pub fn any(&self) -> bool {
        !self.0.is_empty()
    }

    /// The CPU of producer `i`.
    pub fn producer(&self, i: usize) -> Option<CoreId> {
        self.0.get(i).copied()
    }

    /// The CPU of consumer `j` of `topology`.
    pub fn consumer(&self, topology: Topology, j: usize) -> Option<CoreId> {
        self.0.get(topology.producers() + j).copied()
    }
}

/// Everything an implementation needs to take one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Who is connected to whom.
    pub topology: Topology,
    /// How producers publish.
    pub mode: Mode,
    /// How long producers publish.
    pub duration: Duration,
    /// Thread placement.
    pub pins: Pins,
}

/// The producer side of an implementation, as the workload drives it.
///
/// Errors are static strings: the hot path must not allocate.
pub(crate) trait Publisher: Send {
    /// Publishes one event with one publish call, waiting while the ring is full.
    fn publish_one(&mut self, value: u64) -> Result<(), &'static str>;
    /// Publishes `first..first + BATCH` in the implementation's batch form.
    fn publish_batch(&mut self, first: u64) -> Result<(), &'static str>;
}

/// What one consumer saw: the wrapping sum of the values it handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tally {
    pub consumer: &'static str,
    pub sum: u64,
}

/// Sums written by consumers that run on threads the library owns (written at
/// shutdown), read after the library joined those threads.
#[derive(Debug, Clone)]
pub(crate) struct SumCells(Vec<(&'static str, Arc<AtomicU64>)>);

impl SumCells {
    pub fn new(topology: Topology) -> Self {
        SumCells(
            topology
                .consumers()
                .iter()
                .map(|name| (*name, Arc::new(AtomicU64::new(0))))
                .collect(),
        )
    }

    /// The cell of consumer `j`.
    pub fn cell(&self, j: usize) -> Arc<AtomicU64> {
        Arc::clone(&self.0[j].1)
    }

    /// Reads every sum. Acquire: pairs with the Release store of the consumer at its
    /// shutdown (the join already orders it; the pairing keeps the reasoning local).
    pub fn tallies(&self) -> Vec<Tally> {
        self.0
            .iter()
            .map(|(name, cell)| Tally {
                consumer: name,
                sum: cell.load(Ordering::Acquire),
            })
            .collect()
    }
}

/// What [`drive`] measured.
#[derive(Debug)]
pub(crate) struct Driven<T> {
    /// Events each producer published.
    pub published: Vec<u64>,
    /// From the start signal until `finish` returned.
    pub elapsed: Duration,
    /// What `finish` returned.
    pub finished: T,
}

/// Runs one sample: spawns a thread per producer (pinned by `pins`), releases them
/// together, raises the stop flag after `duration` (or when they all return), joins
/// them, then calls `finish` to wait for the consumers. `produce` publishes until the
/// flag is raised and returns how many events it published; the producer thread then
/// drops its producer (closing it is measured: some implementations drain there).
/// The clock runs from the release until `finish` returns.
pub(crate) fn drive<P, T>(
    who: &str,
    duration: Duration,
    pins: &Pins,
    producers: Vec<P>,
    produce: impl Fn(&mut P, &AtomicBool) -> Result<u64, &'static str> + Sync,
    finish: impl FnOnce() -> Result<T, BenchError>,
) -> Result<Driven<T>, BenchError>
where
    P: Send,
{
    let _watchdog = Watchdog::arm(format!("sample of {who}"), duration + HANG_LIMIT);
    let n = producers.len();
    // Relaxed everywhere on `stop`: it carries no data, it only ends loops; a late
    // sight of it costs one more chunk.
    let stop = AtomicBool::new(false);
    let start = Barrier::new(n + 1);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let (published, t0) = thread::scope(|s| {
        let handles: Vec<_> = producers
            .into_iter()
            .enumerate()
            .map(|(i, mut producer)| {
                let (done_tx, stop, start, produce) = (done_tx.clone(), &stop, &start, &produce);
                let cpu = pins.producer(i);
                s.spawn(move || {
                    pin_current(cpu);
                    start.wait();
                    let published = produce(&mut producer, stop);
                    // Closing the producer is part of the measured work (it may drain).
                    drop(producer);
                    let _ = done_tx.send(());
                    published
                })
            })
            .collect();
        drop(done_tx);
        start.wait();
        let t0 = Instant::now();
        let deadline = t0 + duration;
        let mut returned = 0;
        while returned < n {
            match done_rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(()) => returned += 1,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        stop.store(true, Ordering::Relaxed);
        let published: Result<Vec<u64>, BenchError> = handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(Ok(count)) => Ok(count),
                Ok(Err(what)) => Err(BenchError::failed(who, what)),
                Err(_) => Err(BenchError::failed(who, "a producer thread panicked")),
            })
            .collect();
        (published, t0)
    });
    let published = published?;
    let finished = finish()?;
    Ok(Driven {
        published,
        elapsed: t0.elapsed(),
        finished,
    })
}

/// Publishes the counter in chunks of [`BATCH`] until `stop`; returns the count.
pub(crate) fn produce<P: Publisher>(
    producer: &mut P,
    mode: Mode,
    stop: &AtomicBool,
) -> Result<u64, &'static str> {
    let mut next = 0u64;
    while next < MAX_EVENTS_PER_PRODUCER && !stop.load(Ordering::Relaxed) {
        match mode {
            Mode::Single => {
                for value in next..next + BATCH as u64 {
                    producer.publish_one(value)?;
                }
            }
            Mode::Batch => producer.publish_batch(next)?,
        }
        next += BATCH as u64;
    }
    Ok(next)
}

/// The sum every consumer must see when producer `i` published `0..published[i]`,
/// wrapping like the consumers' sums.
pub(crate) fn expected_sum(published: &[u64]) -> u64 {
    published.iter().fold(0u64, |acc, &n| {
        let n = u128::from(n);
        acc.wrapping_add((n * n.saturating_sub(1) / 2) as u64)
    })
}

/// Takes one throughput sample: drives `producers`, waits for the consumers with
/// `finish`, checks every consumer's sum, and returns millions of events per second.
///
/// # Errors
///
/// A failed producer or consumer, or a consumer whose sum is wrong.
pub(crate) fn throughput<P: Publisher>(
    who: &str,
    spec: &Spec,
    producers: Vec<P>,
    finish: impl FnOnce() -> Result<Vec<Tally>, BenchError>,
) -> Result<f64, BenchError> {
    assert_eq!(
        producers.len(),
        spec.topology.producers(),
        "{who}: producer count"
    );
    let mode = spec.mode;
    let driven = drive(
        who,
        spec.duration,
        &spec.pins,
        producers,
        |p, stop| produce(p, mode, stop),
        finish,
    )?;
    let expected = expected_sum(&driven.published);
    if driven.finished.len() != spec.topology.consumers().len() {
        return Err(BenchError::failed(
            who,
            format!("{} consumers reported", driven.finished.len()),
        ));
    }
    for tally in &driven.finished {
        if tally.sum != expected {
            return Err(BenchError::WrongSum {
                who: format!("{who} consumer {}", tally.consumer),
                expected,
                got: tally.sum,
            });
        }
    }
    let events: u64 = driven.published.iter().sum();
    Ok(events as f64 / driven.elapsed.as_secs_f64() / 1e6)
}

/// Joins a consumer thread we spawned, which returns its sum.
pub(crate) fn join_consumer(
    who: &str,
    consumer: &'static str,
    handle: thread::JoinHandle<u64>,
) -> Result<Tally, BenchError> {
    handle
        .join()
        .map(|sum| Tally { consumer, sum })
        .map_err(|_| BenchError::failed(who, format!("consumer {consumer} panicked")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_sum_matches_a_loop() {
        let published = [0, 1, 64, 1000];
        let by_loop: u64 = published.iter().map(|&n| (0..n).sum::<u64>()).sum();
        assert_eq!(expected_sum(&published), by_loop);
    }

    #[test]
    fn topologies_name_and_count() {
        let names: Vec<String> = Topology::MAIN.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["1p1c", "3p1c", "1p3c", "pipeline3", "diamond"]);
        assert_eq!(Topology::ManyToOne(3).threads(), 4);
        assert_eq!(Topology::Diamond.consumers(), ["a", "b", "c"]);
    }

    #[test]
    fn pins_spread_only_when_threads_fit() {
        let cpus = [CoreId { id: 0 }, CoreId { id: 1 }];
        let pins = Pins::spread(2, &cpus);
        assert_eq!(pins.producer(0), Some(CoreId { id: 0 }));
        assert_eq!(pins.consumer(Topology::OneToOne, 0), Some(CoreId { id: 1 }));
        assert!(!Pins::spread(3, &cpus).any());
    }

    /// A publisher that counts into a shared sum: the workload's own bookkeeping,
    /// without any queue.
    struct Direct(Arc<AtomicU64>);

    impl Publisher for Direct {
        fn publish_one(&mut self, value: u64) -> Result<(), &'static str> {
            self.0.fetch_add(value, Ordering::Relaxed);
            Ok(())
        }
        fn publish_batch(&mut self, first: u64) -> Result<(), &'static str> {
            (first..first + BATCH as u64).try_for_each(|v| self.publish_one(v))
        }
    }

    #[test]
    fn throughput_checks_the_sum() {
        for mode in Mode::ALL {
            let spec = Spec {
                topology: Topology::ManyToOne(2),
                mode,
                duration: Duration::from_millis(5),
                pins: Pins::default(),
            };
            let sum = Arc::new(AtomicU64::new(0));
            let producers = vec![Direct(Arc::clone(&sum)), Direct(Arc::clone(&sum))];
            let good = || {
                Ok(vec![Tally {
                    consumer: "c",
                    sum: sum.load(Ordering::Relaxed),
                }])
            };
            assert!(throughput("direct", &spec, producers, good).unwrap() > 0.0);

            let producers = vec![
                Direct(Arc::new(AtomicU64::new(0))),
                Direct(Arc::new(AtomicU64::new(0))),
            ];
            let wrong = || {
                Ok(vec![Tally {
                    consumer: "c",
                    sum: 12345,
                }])
            };
            let err = throughput("direct", &spec, producers, wrong).unwrap_err();
            assert!(matches!(err, BenchError::WrongSum { .. }), "{err}");
        }
    }
}
