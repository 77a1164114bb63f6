//! Stress: more threads than cores on small rings, with each wait strategy.
//!
//! Sized by cfg: `N` events per test in debug builds, a million in release;
//! `STATEPIPE_STRESS_N` overrides both. Busy-spinning threads that outnumber
//! the cores hand over only at time-slice boundaries (tens of events per
//! second on 2 cores, in release as in debug: the documented collapse the
//! adaptive strategy exists for), so on such a host the `BusySpin` variants
//! run at most `BUSY_SPIN_OVERSUBSCRIBED` events, and say so (a `REDUCED`
//! line, which `scripts/test` lists at its end).
//!
//! Every check is on counts, sums and orders, never on time.
#![cfg(not(loom))]

mod common;
#[path = "../../../scripts/skip.rs"]
mod skip;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::Rng;
use statepipe_ring::state::SharedStage;
use statepipe_ring::wait::WaitStrategy;
use statepipe_ring::{
    EventHandler, JoinReport, MultiProducer, Producer, PublishError, Ring, RingBuilder, RingError,
    SoleProducer,
};

const N: u64 = if cfg!(debug_assertions) {
    20_000
} else {
    1_000_000
};
const BUSY_SPIN_OVERSUBSCRIBED: u64 = 100;
const PRODUCERS: u64 = 4;
/// The most threads a stress ring runs (producers and consumers).
const THREADS: usize = 8;

/// `N`, or `STATEPIPE_STRESS_N` when set.
fn stress_n() -> u64 {
    std::env::var("STATEPIPE_STRESS_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(N)
}

/// The watchdog's limit: a minute per 200,000 events (a million events
/// through the blocking strategy take tens of seconds on 2 cores).
fn limit() -> Duration {
    common::WATCHDOG * (1 + stress_n() / 200_000) as u32
}

/// Events for a test under `wait`.
fn events_for(wait: &impl WaitStrategy) -> u64 {
    let n = stress_n();
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let n = if wait.name() == "busy-spin" && cores < THREADS && n > BUSY_SPIN_OVERSUBSCRIBED {
        skip::reduce(
            &format!("busy-spin: {BUSY_SPIN_OVERSUBSCRIBED} events of {n}"),
            &format!("{cores} CPUs for up to {THREADS} spinning threads"),
        );
        BUSY_SPIN_OVERSUBSCRIBED
    } else {
        n
    };
    // A multiple of the producer count, and never empty.
    (n / PRODUCERS).max(1) * PRODUCERS
}

/// `(producer << 40) | counter`.
fn encode(producer: u64, counter: u64) -> u64 {
    producer << 40 | counter
}

fn decode(value: u64) -> (usize, u64) {
    ((value >> 40) as usize, value & ((1 << 40) - 1))
}

/// What a consumer saw, shared with the test.
#[derive(Default)]
struct Tally {
    count: AtomicU64,
    sum: AtomicU64,
    /// One past the last sequence handled: dependents read it after the
    /// ring let them at a sequence (see `Checker::on_event`).
    done: AtomicU64,
    /// Per producer: events seen.
    per_producer: Mutex<Vec<u64>>,
}

/// A full consumer (not a group member): checks per-producer order (every
/// counter exactly the next one: nothing lost, duplicated or reordered) and
/// that its dependencies finished each sequence first.
struct Checker {
    name: &'static str,
    tally: Arc<Tally>,
    next: [u64; PRODUCERS as usize],
    deps: Vec<Arc<Tally>>,
    /// A worker group this consumer depends on: member `s % n` handles `s`.
    group_deps: Vec<Arc<Tally>>,
}

impl Checker {
    fn new(name: &'static str, tally: &Arc<Tally>) -> Self {
        Self {
            name,
            tally: Arc::clone(tally),
            next: [0; PRODUCERS as usize],
            deps: Vec::new(),
            group_deps: Vec::new(),
        }
    }

    fn after(mut self, deps: &[&Arc<Tally>]) -> Self {
        self.deps = deps.iter().map(|t| Arc::clone(t)).collect();
        self
    }

    fn after_group(mut self, members: &[Arc<Tally>]) -> Self {
        self.group_deps = members.to_vec();
        self
    }

    fn check(&mut self, value: u64, seq: u64) {
        let (p, counter) = decode(value);
        assert_eq!(
            counter, self.next[p],
            "{}: producer {p}'s event {counter} at sequence {seq}, expected {}",
            self.name, self.next[p]
        );
        self.next[p] += 1;
        // Relaxed is enough: the dependency stored `done` before the ring
        // published its progress (Release), which the ring read (Acquire)
        // before handing us `seq`.
        for (i, d) in self.deps.iter().enumerate() {
            let done = d.done.load(Ordering::Relaxed);
            assert!(
                done > seq,
                "{}: sequence {seq} before dependency {i} ({done})",
                self.name
            );
        }
        if !self.group_deps.is_empty() {
            let member = &self.group_deps[(seq % self.group_deps.len() as u64) as usize];
            let done = member.done.load(Ordering::Relaxed);
            assert!(
                done > seq,
                "{}: sequence {seq} before its group member ({done})",
                self.name
            );
        }
        self.tally.count.fetch_add(1, Ordering::Relaxed);
        self.tally.sum.fetch_add(value, Ordering::Relaxed);
        self.tally.done.store(seq + 1, Ordering::Relaxed);
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        *self
            .tally
            .per_producer
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = self.next.to_vec();
    }
}

impl EventHandler<u64> for Checker {
    fn on_event(&mut self, event: &u64, sequence: u64, _: bool) {
        self.check(*event, sequence);
    }
}

/// A worker-group member: only its residue, each sequence once across the
/// group (`claimed`), per-producer order within what it sees.
struct Member {
    index: u64,
    size: u64,
    tally: Arc<Tally>,
    claimed: Arc<Vec<AtomicBool>>,
    last: [Option<u64>; PRODUCERS as usize],
}

impl Member {
    fn new(index: usize, size: usize, tally: &Arc<Tally>, claimed: &Arc<Vec<AtomicBool>>) -> Self {
        Self {
            index: index as u64,
            size: size as u64,
            tally: Arc::clone(tally),
            claimed: Arc::clone(claimed),
            last: [None; PRODUCERS as usize],
        }
    }

    fn check(&mut self, value: u64, seq: u64) {
        assert_eq!(
            seq % self.size,
            self.index,
            "member {} got sequence {seq}",
            self.index
        );
        assert!(
            !self.claimed[seq as usize].swap(true, Ordering::Relaxed),
            "sequence {seq} handled twice in the group"
        );
        let (p, counter) = decode(value);
        assert!(
            !matches!(self.last[p], Some(l) if l >= counter),
            "member {}: producer {p}'s {counter} after {:?}",
            self.index,
            self.last[p]
        );
        self.last[p] = Some(counter);
        self.tally.count.fetch_add(1, Ordering::Relaxed);
        self.tally.sum.fetch_add(value, Ordering::Relaxed);
        self.tally.done.store(seq + 1, Ordering::Relaxed);
    }
}

impl EventHandler<u64> for Member {
    fn on_event(&mut self, event: &u64, sequence: u64, _: bool) {
        self.check(*event, sequence);
    }
}

/// Publishes `count` events for producer `id`, mixing single publishes and
/// batches; stops at a halt. Returns how many were published.
fn produce<W: WaitStrategy>(mut p: MultiProducer<u64, W>, id: u64, count: u64, seed: u64) -> u64 {
    let cap = p.capacity();
    let mut rng = Rng::new(seed);
    let mut sent = 0;
    while sent < count {
        if rng.below(4) == 0 {
            let k = (1 + rng.below(cap)).min(count - sent);
            let start = sent;
            match p.publish_batch(k as usize, |i, slot| *slot = encode(id, start + i as u64)) {
                Ok(range) => assert_eq!(range.end - range.start, k),
                Err(PublishError::Halted(_)) => return sent,
            }
            sent += k;
        } else {
            match p.publish(encode(id, sent)) {
                Ok(_) => sent += 1,
                Err(PublishError::Halted(v)) => {
                    assert_eq!(v, encode(id, sent), "the value comes back");
                    return sent;
                }
            }
        }
    }
    sent
}

/// The stress topology: `PRODUCERS` producers; `a` and a worker group `w`
/// of two, then `c` after both (a diamond). Eight busy threads on two cores.
struct Diamond {
    a: Arc<Tally>,
    w: Vec<Arc<Tally>>,
    c: Arc<Tally>,
    claimed: Arc<Vec<AtomicBool>>,
}

impl Diamond {
    fn build<W: WaitStrategy>(
        wait: W,
        capacity: usize,
        total: u64,
    ) -> (
        Self,
        MultiProducer<u64, W>,
        statepipe_ring::Ring<u64, W, statepipe_ring::Multi>,
    ) {
        let d = Diamond {
            a: Arc::default(),
            w: vec![Arc::default(), Arc::default()],
            c: Arc::default(),
            claimed: Arc::new((0..total).map(|_| AtomicBool::new(false)).collect()),
        };
        let (producer, ring) = RingBuilder::new(capacity, || 0u64)
            .wait_strategy(wait)
            .handler("a", Checker::new("a", &d.a))
            .worker_group("w", 2, |i| Member::new(i, 2, &d.w[i], &d.claimed))
            .then()
            .handler(
                "c",
                Checker::new("c", &d.c).after(&[&d.a]).after_group(&d.w),
            )
            .build_multi();
        (d, producer, ring)
    }
}

fn expected_sum(per_producer: &[u64]) -> u64 {
    per_producer
        .iter()
        .enumerate()
        .map(|(p, &n)| (0..n).map(|c| encode(p as u64, c)).sum::<u64>())
        .sum()
}

/// Four producers into a diamond with a worker group, capacity 8 (every
/// slot contended) and 4,096 (dependents take capped windows, not all
/// their dependencies finished): every consumer sees every event once, in
/// per-producer order, after its dependencies.
fn mpmc_diamond<W: WaitStrategy>(make: fn() -> W) {
    for capacity in [8, 4096] {
        mpmc_diamond_of(make(), capacity);
    }
}

fn mpmc_diamond_of<W: WaitStrategy>(wait: W, capacity: usize) {
    let total = events_for(&wait);
    let (d, producer, ring) = Diamond::build(wait, capacity, total);
    let per = total / PRODUCERS;
    let threads: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let p = producer.clone();
            thread::spawn(move || produce(p, id, per, id))
        })
        .collect();
    drop(producer);
    let sent: Vec<u64> = threads
        .into_iter()
        .map(|t| t.join().expect("producer"))
        .collect();
    assert_eq!(sent, vec![per; PRODUCERS as usize]);
    let report = ring.join().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        report,
        JoinReport {
            published: total,
            consumers: ["a", "w/0", "w/1", "c"]
                .iter()
                .map(|n| (n.to_string(), total))
                .collect(),
        }
    );
    let sum = expected_sum(&sent);
    for (name, t) in [("a", &d.a), ("c", &d.c)] {
        assert_eq!(t.count.load(Ordering::Relaxed), total, "{name} count");
        assert_eq!(t.sum.load(Ordering::Relaxed), sum, "{name} sum");
        assert_eq!(
            *t.per_producer.lock().expect("no panic"),
            sent,
            "{name} per producer"
        );
    }
    let group_count: u64 = d.w.iter().map(|t| t.count.load(Ordering::Relaxed)).sum();
    let group_sum: u64 = d.w.iter().map(|t| t.sum.load(Ordering::Relaxed)).sum();
    assert_eq!(
        (group_count, group_sum),
        (total, sum),
        "the group splits every event once"
    );
    assert!(
        d.claimed.iter().all(|c| c.load(Ordering::Relaxed)),
        "no sequence missed"
    );
}
per_wait_strategy!(
    mpmc_diamond_with_worker_group,
    super::mpmc_diamond,
    super::limit()
);

/// One producer, a mutating worker group of three, then two readers that
/// check the mutation, then a mutating tail; capacity 4.
fn spsc_pipeline_with_mutation<W: WaitStrategy>(make: fn() -> W) {
    let wait = make();
    let total = events_for(&wait);
    let f = |x: u64| x.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let tails = Arc::new(AtomicU64::new(0));
    let tails2 = Arc::clone(&tails);
    let reader = |name: &'static str| {
        let mut next = 0u64;
        move |e: &(u64, u64), seq: u64, _: bool| {
            assert_eq!(e.0, next, "{name}: order at {seq}");
            assert_eq!(
                e.1,
                f(e.0),
                "{name}: the group's change is visible at {seq}"
            );
            next += 1;
        }
    };
    let (mut p, ring) = RingBuilder::new(4, || (0u64, 0u64))
        .wait_strategy(wait)
        .worker_group_mut("m", 3, |i| {
            move |e: &mut (u64, u64), seq: u64, _: bool| {
                assert_eq!(seq % 3, i as u64);
                assert_eq!(e.1, 0, "the producer reset the slot");
                e.1 = f(e.0);
            }
        })
        .then()
        .handler("r1", reader("r1"))
        .handler("r2", reader("r2"))
        .then()
        .handler_mut("tail", move |e: &mut (u64, u64), _: u64, _: bool| {
            assert_eq!(e.1, f(e.0));
            e.1 = 7;
            tails2.fetch_add(1, Ordering::Relaxed);
        })
        .build_single();
    let mut sent = 0u64;
    let mut rng = Rng::new(total);
    while sent < total {
        let k = (1 + rng.below(4)).min(total - sent);
        let start = sent;
        p.publish_batch(k as usize, |i, e| *e = (start + i as u64, 0))
            .unwrap_or_else(|e| panic!("{e}"));
        sent += k;
    }
    drop(p);
    let report = ring.join().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.published, total);
    assert_eq!(tails.load(Ordering::Relaxed), total);
}
per_wait_strategy!(
    spsc_pipeline_with_mutating_group,
    super::spsc_pipeline_with_mutation,
    super::limit()
);

/// One producer switching between runs of single publishes and batches of
/// up to 64, into 4,096 slots, read by a consumer that now and then stalls
/// (so it falls thousands of events behind) and a dependent after it: the
/// consumers read by range ends, by the cursor, and by the cursor after a
/// long chain (`Shared::published_from`), and each must see every event
/// once, in order.
fn spsc_singles_batches_and_lag<W: WaitStrategy>(make: fn() -> W) {
    singles_batches_and_lag(make, RingBuilder::build_single);
}

/// The same through the stamped producer, whose consumers read stamps
/// (a lagging one scans whole windows of them).
fn stamped_singles_batches_and_lag<W: WaitStrategy>(make: fn() -> W) {
    singles_batches_and_lag(make, RingBuilder::build_stamped);
}

fn singles_batches_and_lag<W: WaitStrategy, K: SoleProducer>(
    make: fn() -> W,
    build: impl FnOnce(RingBuilder<u64, W, SharedStage>) -> (Producer<u64, W, K>, Ring<u64, W, K>),
) {
    let wait = make();
    let total = events_for(&wait);
    let reader = |name: &'static str, stall: bool| {
        let mut next = 0u64;
        move |e: &u64, seq: u64, _: bool| {
            assert_eq!(seq, next, "{name}: sequence order");
            assert_eq!(*e, seq, "{name}: event {seq} read a stale slot");
            next += 1;
            if stall && seq % 5_000 == 4_999 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    };
    let (mut p, ring) = build(
        RingBuilder::new(4096, || u64::MAX)
            .wait_strategy(wait)
            .handler("lagging", reader("lagging", true))
            .then()
            .handler("after", reader("after", false)),
    );
    let mut sent = 0u64;
    let mut rng = Rng::new(total ^ 0x5eed);
    while sent < total {
        // A run of single publishes, or of batches.
        let batches = rng.below(2) == 0;
        for _ in 0..rng.below(5_000) {
            if sent == total {
                break;
            }
            let k = if batches { 1 + rng.below(64) } else { 1 }.min(total - sent);
            let start = sent;
            p.publish_batch(k as usize, |i, e| *e = start + i as u64)
                .unwrap_or_else(|e| panic!("{e}"));
            sent += k;
        }
    }
    drop(p);
    let report = ring.join().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.published, total);
}
per_wait_strategy!(
    spsc_single_events_batches_and_a_lagging_consumer,
    super::spsc_singles_batches_and_lag,
    super::limit()
);
per_wait_strategy!(
    stamped_single_events_batches_and_a_lagging_consumer,
    super::stamped_singles_batches_and_lag,
    super::limit()
);

/// Producers of single events as fast as they go, into a ring big enough
/// for its consumer to linger (see `RingBuilder::linger`) and larger than
/// the window a multi-producer consumer checks at once, read by a light
/// consumer that keeps up with them (a slow one never chases, so never
/// lingers): every event once, in per-producer order, whether or not (and
/// however often) the consumer lingered. Then the same with a linger far
/// longer than the run, so that lingers for the producers' last events end
/// by the clock, not by the probe.
fn mpsc_dense_singles<W: WaitStrategy>(make: fn() -> W) {
    const P: usize = 3;
    for linger in [statepipe_ring::DEFAULT_LINGER, Duration::from_millis(20)] {
        let wait = make();
        let per = events_for(&wait) / PRODUCERS;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let out = Arc::clone(&seen);
        let mut next = [0u64; P];
        let mut sum = 0u64;
        let (producer, ring) = RingBuilder::new(16384, || 0u64)
            .wait_strategy(wait)
            .linger(linger)
            .handler("a", move |e: &u64, seq: u64, end: bool| {
                let (p, counter) = decode(*e);
                assert_eq!(counter, next[p], "producer {p}'s event at sequence {seq}");
                next[p] += 1;
                sum = sum.wrapping_add(*e);
                if end {
                    *out.lock().expect("no panic") = vec![next.iter().sum(), sum];
                }
            })
            .build_multi();
        let threads: Vec<_> = (0..P as u64)
            .map(|id| {
                let mut p = producer.clone();
                thread::spawn(move || {
                    for counter in 0..per {
                        p.publish(encode(id, counter))
                            .unwrap_or_else(|e| panic!("{e}"));
                    }
                })
            })
            .collect();
        drop(producer);
        for t in threads {
            t.join().expect("producer");
        }
        let report = ring.join().unwrap_or_else(|e| panic!("{e}"));
        let total = per * P as u64;
        assert_eq!(report.published, total);
        let expected = expected_sum(&[per; P]);
        assert_eq!(*seen.lock().expect("no panic"), vec![total, expected]);
    }
}
per_wait_strategy!(
    mpsc_dense_single_events_with_lingering,
    super::mpsc_dense_singles,
    super::limit()
);

/// Halts the diamond at a random point from another thread, three times:
/// producers stop with `Halted`, consumers stop, `join` reports `Halted`, and
/// what was handled is an exactly-once prefix of what was published.
fn random_halts<W: WaitStrategy>(make: fn() -> W) {
    for round in 0..3u64 {
        let wait = make();
        let total = events_for(&wait);
        let mut rng = Rng::new(round * 7919 + total);
        let halt_after = rng.below(total);
        let capacity = [4, 8, 16][rng.below(3) as usize];
        let (d, producer, ring) = Diamond::build(wait, capacity, total);
        let monitor = ring.monitor();
        let per = total / PRODUCERS;
        let sent: Vec<u64> = thread::scope(|s| {
            let threads: Vec<_> = (0..PRODUCERS)
                .map(|id| {
                    let p = producer.clone();
                    s.spawn(move || produce(p, id, per, round * 100 + id))
                })
                .collect();
            drop(producer);
            let ring = &ring;
            let monitor = &monitor;
            s.spawn(move || {
                while monitor.stats().published < halt_after {
                    thread::sleep(Duration::from_micros(100));
                }
                ring.halt();
            });
            threads
                .into_iter()
                .map(|t| t.join().expect("producer"))
                .collect()
        });
        let stats = monitor.stats();
        assert!(stats.halted, "round {round}");
        let published = stats.published;
        assert!(
            published >= halt_after,
            "round {round}: halted before {halt_after}"
        );
        assert!(
            published <= sent.iter().sum::<u64>(),
            "round {round}: {published} > {sent:?}"
        );
        let unhandled = match ring.join() {
            Err(RingError::Halted { unhandled }) => unhandled,
            other => panic!("round {round}: expected Halted, got {other:?}"),
        };
        let lag = |name: &str| {
            unhandled
                .iter()
                .find(|(n, _)| n == name)
                .unwrap_or_else(|| panic!("{name} in {unhandled:?}"))
                .1
        };
        for (name, t) in [("a", &d.a), ("c", &d.c)] {
            let count = t.count.load(Ordering::Relaxed);
            assert_eq!(
                count + lag(name),
                published,
                "round {round}: {name} handled + unhandled"
            );
            let seen = t.per_producer.lock().expect("no panic").clone();
            assert_eq!(seen.iter().sum::<u64>(), count, "round {round}: {name}");
            for (p, (&seen, &sent)) in seen.iter().zip(&sent).enumerate() {
                assert!(
                    seen <= sent,
                    "round {round}: {name} saw {seen} of producer {p}'s {sent}"
                );
            }
            assert_eq!(
                t.sum.load(Ordering::Relaxed),
                expected_sum(&seen),
                "round {round}: {name}"
            );
        }
        // The group: each member is done with its residue below its own
        // sequence, so everything below the smaller one was handled once.
        let below = published - lag("w/0").max(lag("w/1"));
        assert!(
            d.claimed
                .iter()
                .take(below as usize)
                .all(|c| c.load(Ordering::Relaxed)),
            "round {round}: the group missed a sequence below {below}"
        );
        assert!(
            d.claimed
                .iter()
                .skip(published as usize)
                .all(|c| !c.load(Ordering::Relaxed)),
            "round {round}: the group handled an unpublished sequence"
        );
    }
}
per_wait_strategy!(
    random_halts_end_cleanly,
    super::random_halts,
    super::limit()
);
