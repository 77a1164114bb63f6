//! Property test: random rings against a sequential model.
//!
//! Each case draws a topology (1–4 producers; 1–4 consumer units arranged in
//! stages: handlers, pollers driven from a thread, worker groups, mutating
//! handlers and mutating worker groups, so chains, multicast and diamonds), a
//! capacity (1..=64), a maximum batch, a wait strategy and, per producer, how
//! many events it publishes before it drops its handle (the close points) and
//! a seed that picks the publish call for every event. Events carry
//! `(producer, counter)`.
//!
//! The sequential model: the producers' returned sequences number the events
//! `0..total`; every consumer unit must see exactly that sequence of events,
//! once each, in order (a worker group: the union of its members, each member
//! only its residue), after each of its dependencies handled the event, with
//! the marks of every earlier mutating stage and of no later one; batches
//! respect `max_batch`; `join` and the monitor report the totals.
//!
//! `PROPTEST_CASES` overrides the number of cases (128 by default; about a
//! second in a debug build).
#![cfg(not(loom))]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use statepipe_ring::state::{Empty, ExclusiveStage, NewStage, SharedStage};
use statepipe_ring::wait::{Adaptive, Blocking, BusySpin, SpinYield, WaitStrategy};
use statepipe_ring::{
    EventHandler, EventHandlerMut, JoinReport, PollError, Producer, ProducerKind,
    PublishTimeoutError, Ring, RingBuilder, TryPublishError,
};

/// The event: who published it, its per-producer counter, and one bit per
/// mutating stage that has seen it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Ev {
    producer: u32,
    counter: u64,
    marks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Handler,
    Poller,
    Group(usize),
    HandlerMut,
    GroupMut(usize),
}

impl Kind {
    fn members(self) -> usize {
        match self {
            Kind::Group(n) | Kind::GroupMut(n) => n,
            _ => 1,
        }
    }

    fn exclusive(self) -> bool {
        matches!(self, Kind::HandlerMut | Kind::GroupMut(_))
    }
}

#[derive(Debug, Clone, Copy)]
enum Wait {
    Adaptive,
    AdaptiveEagerPark,
    BusySpin,
    SpinYield,
    Blocking,
    BlockingWithTimeout,
}

#[derive(Debug, Clone)]
struct Case {
    capacity: usize,
    max_batch: Option<usize>,
    wait: Wait,
    /// Per producer: events to publish before dropping the handle, and the
    /// seed that picks the publish call of each event.
    producers: Vec<(u64, u64)>,
    /// Consumer units in declaration order; `true` asks for a new stage
    /// before the unit (see `Topology::new`).
    units: Vec<(Kind, bool)>,
    /// Call `join` before the producers finish (only without pollers, whose
    /// threads must hand their poller back before `join` reads the counts).
    join_early: bool,
}

struct Unit {
    kind: Kind,
    name: String,
    stage: usize,
    /// Units of the previous stage.
    deps: Vec<usize>,
    /// The bit this unit sets in `Ev::marks` (mutating units only).
    mut_bit: Option<u64>,
    /// The marks every event must carry when this unit sees it.
    expected_marks: u64,
    first_member: usize,
}

struct Member {
    name: String,
    partition: Option<(u64, u64)>,
}

struct Topology {
    units: Vec<Unit>,
    stages: Vec<Vec<usize>>,
    members: Vec<Member>,
}

impl Topology {
    /// Arranges the drawn units into stages the builder accepts: a mutating
    /// unit gets a stage of its own; a reader starts a new stage when asked
    /// or when the current one is exclusive. At most two pollers (each needs
    /// a thread of the test).
    fn new(raw: &[(Kind, bool)]) -> Self {
        let mut stages: Vec<Vec<usize>> = vec![Vec::new()];
        let mut kinds = Vec::new();
        let mut current_exclusive = false;
        let mut pollers = 0;
        for (u, &(kind, new_stage)) in raw.iter().enumerate() {
            let kind = match kind {
                Kind::Poller if pollers == 2 => Kind::Handler,
                Kind::Poller => {
                    pollers += 1;
                    kind
                }
                other => other,
            };
            let current = stages.last().expect("at least one stage");
            if !current.is_empty() && (kind.exclusive() || current_exclusive || new_stage) {
                stages.push(Vec::new());
            }
            stages.last_mut().expect("at least one stage").push(u);
            current_exclusive = kind.exclusive();
            kinds.push(kind);
        }
        let mut units = Vec::new();
        let mut members = Vec::new();
        let mut marks_before_stage = 0u64;
        for (stage, in_stage) in stages.iter().enumerate() {
            let mut marks_of_stage = 0;
            for &u in in_stage {
                let kind = kinds[u];
                let name = match kind {
                    Kind::Handler => format!("h{u}"),
                    Kind::Poller => format!("p{u}"),
                    Kind::Group(_) => format!("g{u}"),
                    Kind::HandlerMut => format!("m{u}"),
                    Kind::GroupMut(_) => format!("gm{u}"),
                };
                let mut_bit = kind.exclusive().then_some(1u64 << stage);
                marks_of_stage |= mut_bit.unwrap_or(0);
                let first_member = members.len();
                match kind {
                    Kind::Group(n) | Kind::GroupMut(n) => {
                        for i in 0..n {
                            members.push(Member {
                                name: format!("{name}/{i}"),
                                partition: Some((i as u64, n as u64)),
                            });
                        }
                    }
                    _ => members.push(Member {
                        name: name.clone(),
                        partition: None,
                    }),
                }
                units.push(Unit {
                    kind,
                    name,
                    stage,
                    deps: if stage == 0 {
                        Vec::new()
                    } else {
                        stages[stage - 1].clone()
                    },
                    mut_bit,
                    expected_marks: marks_before_stage,
                    first_member,
                });
            }
            marks_before_stage |= marks_of_stage;
        }
        Self {
            units,
            stages,
            members,
        }
    }

    fn pollers(&self) -> impl Iterator<Item = &Unit> {
        self.units.iter().filter(|u| u.kind == Kind::Poller)
    }
}

/// `handled[unit * total + s]`: unit `unit` has handled event `s`. Set
/// (Relaxed) inside the handler, before the ring publishes the consumer's
/// progress (Release); a dependent reads it (Relaxed) after the ring let it
/// at `s` (Acquire), so the ring's ordering alone guarantees it sees `true`.
struct Flags {
    total: usize,
    handled: Vec<AtomicBool>,
}

impl Flags {
    fn get(&self, unit: usize, seq: u64) -> bool {
        self.handled[unit * self.total + seq as usize].load(Ordering::Relaxed)
    }

    fn set(&self, unit: usize, seq: u64) {
        self.handled[unit * self.total + seq as usize].store(true, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone)]
struct Rec {
    seq: u64,
    producer: u32,
    counter: u64,
    marks: u64,
    end_of_batch: bool,
    deps_done: bool,
}

type Logs = Arc<Mutex<Vec<Option<Vec<Rec>>>>>;

/// Records what one consumer (a member) saw; hands its log to `sink` when
/// dropped, which happens on the consumer thread before `join` returns.
struct Recorder {
    member: usize,
    unit: usize,
    deps: Vec<usize>,
    mut_bit: u64,
    flags: Arc<Flags>,
    log: Vec<Rec>,
    sink: Logs,
}

impl Recorder {
    fn see(&mut self, event: &Ev, seq: u64, end_of_batch: bool) {
        let in_range = (seq as usize) < self.flags.total;
        let deps_done = in_range && self.deps.iter().all(|&d| self.flags.get(d, seq));
        self.log.push(Rec {
            seq,
            producer: event.producer,
            counter: event.counter,
            marks: event.marks,
            end_of_batch,
            deps_done,
        });
    }

    fn done(&self, seq: u64) {
        if (seq as usize) < self.flags.total {
            self.flags.set(self.unit, seq);
        }
    }
}

impl EventHandler<Ev> for Recorder {
    fn on_event(&mut self, event: &Ev, seq: u64, end_of_batch: bool) {
        self.see(event, seq, end_of_batch);
        self.done(seq);
    }
}

impl EventHandlerMut<Ev> for Recorder {
    fn on_event(&mut self, event: &mut Ev, seq: u64, end_of_batch: bool) {
        self.see(event, seq, end_of_batch);
        event.marks |= self.mut_bit;
        self.done(seq);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let log = std::mem::take(&mut self.log);
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        sink[self.member] = Some(log);
    }
}

struct Ctx {
    flags: Arc<Flags>,
    sink: Logs,
}

impl Ctx {
    fn recorder(&self, topo: &Topology, unit: usize, i: usize) -> Recorder {
        let u = &topo.units[unit];
        Recorder {
            member: u.first_member + i,
            unit,
            deps: u.deps.clone(),
            mut_bit: u.mut_bit.unwrap_or(0),
            flags: Arc::clone(&self.flags),
            log: Vec::new(),
            sink: Arc::clone(&self.sink),
        }
    }
}

/// A builder in any of its states, so a topology can be built in a loop.
enum B<W: WaitStrategy> {
    Empty(RingBuilder<Ev, W, Empty>),
    New(RingBuilder<Ev, W, NewStage>),
    Shared(RingBuilder<Ev, W, SharedStage>),
    Excl(RingBuilder<Ev, W, ExclusiveStage>),
}

macro_rules! add_shared {
    ($b:expr, $x:ident => $e:expr) => {
        match $b {
            B::Empty($x) => B::Shared($e),
            B::New($x) => B::Shared($e),
            B::Shared($x) => B::Shared($e),
            B::Excl(_) => unreachable!("a reader never joins an exclusive stage"),
        }
    };
}

macro_rules! add_exclusive {
    ($b:expr, $x:ident => $e:expr) => {
        match $b {
            B::Empty($x) => B::Excl($e),
            B::New($x) => B::Excl($e),
            _ => unreachable!("a mutating unit always starts its own stage"),
        }
    };
}

fn run_case(case: Case) {
    let topo = Topology::new(&case.units);
    let threads = case.producers.len() + topo.members.len();
    match case.wait {
        Wait::Adaptive => run_with(&case, topo, Adaptive::default()),
        Wait::AdaptiveEagerPark => run_with(&case, topo, common::adaptive_eager_park()),
        // Busy-spinning threads that outnumber the 2 cores of CI would turn
        // a case into seconds of time slices: spin only on small rings.
        Wait::BusySpin if threads <= 3 => run_with(&case, topo, BusySpin),
        Wait::BusySpin | Wait::SpinYield => run_with(&case, topo, SpinYield::default()),
        Wait::Blocking => run_with(&case, topo, Blocking::new()),
        Wait::BlockingWithTimeout => run_with(
            &case,
            topo,
            Blocking::with_timeout(Duration::from_micros(500)),
        ),
    }
}

fn run_with<W: WaitStrategy>(case: &Case, topo: Topology, wait: W) {
    let total: u64 = case.producers.iter().map(|p| p.0).sum();
    let multi = case.producers.len() > 1;
    let ctx = Ctx {
        flags: Arc::new(Flags {
            total: total as usize,
            handled: (0..topo.units.len() * total as usize)
                .map(|_| AtomicBool::new(false))
                .collect(),
        }),
        sink: Arc::new(Mutex::new(vec![None; topo.members.len()])),
    };

    let mut builder = RingBuilder::new(case.capacity, Ev::default).wait_strategy(wait);
    if let Some(max) = case.max_batch {
        builder = builder.max_batch(max);
    }
    let mut b = B::Empty(builder);
    for (si, stage) in topo.stages.iter().enumerate() {
        if si > 0 {
            b = match b {
                B::Shared(x) => B::New(x.then()),
                B::Excl(x) => B::New(x.then()),
                _ => unreachable!("stages are never empty"),
            };
        }
        for &u in stage {
            let unit = &topo.units[u];
            let name = unit.name.as_str();
            b = match unit.kind {
                Kind::Handler => add_shared!(b, x => x.handler(name, ctx.recorder(&topo, u, 0))),
                Kind::Poller => add_shared!(b, x => x.poller(name)),
                Kind::Group(n) => add_shared!(b, x => x.worker_group(name, n, |i| {
                    ctx.recorder(&topo, u, i)
                })),
                Kind::HandlerMut => add_exclusive!(b, x => {
                    x.handler_mut(name, ctx.recorder(&topo, u, 0))
                }),
                Kind::GroupMut(n) => add_exclusive!(b, x => x.worker_group_mut(name, n, |i| {
                    ctx.recorder(&topo, u, i)
                })),
            };
        }
    }
    match (b, multi) {
        (B::Shared(x), false) => {
            let (p, r) = x.build_single();
            drive(case, &topo, &ctx, total, vec![p], r);
        }
        (B::Excl(x), false) => {
            let (p, r) = x.build_single();
            drive(case, &topo, &ctx, total, vec![p], r);
        }
        (B::Shared(x), true) => {
            let (p, r) = x.build_multi();
            let handles = case.producers.iter().map(|_| p.clone()).collect();
            // The handles on the threads keep the ring open.
            drop(p);
            drive(case, &topo, &ctx, total, handles, r);
        }
        (B::Excl(x), true) => {
            let (p, r) = x.build_multi();
            let handles = case.producers.iter().map(|_| p.clone()).collect();
            drop(p);
            drive(case, &topo, &ctx, total, handles, r);
        }
        _ => unreachable!("at least one consumer"),
    }
}

/// Runs a built case: pollers on threads, one thread per producer handle,
/// then checks everything against the sequential model.
fn drive<W: WaitStrategy, K: ProducerKind>(
    case: &Case,
    topo: &Topology,
    ctx: &Ctx,
    total: u64,
    producers: Vec<Producer<Ev, W, K>>,
    mut ring: Ring<Ev, W, K>,
) {
    assert_eq!(ring.capacity(), case.capacity as u64);
    let monitor = ring.monitor();

    // Pollers are taken before anything is published, each driven by a
    // thread that hands it back once the ring is closed and drained.
    let poller_threads: Vec<_> = topo
        .pollers()
        .map(|unit| {
            let mut poller = ring
                .take_poller(&unit.name)
                .unwrap_or_else(|| panic!("poller {} was declared", unit.name));
            assert_eq!(poller.name(), unit.name);
            assert!(ring.take_poller(&unit.name).is_none(), "taken twice");
            let u = topo
                .units
                .iter()
                .position(|x| x.name == unit.name)
                .expect("the unit exists");
            let mut rec = ctx.recorder(topo, u, 0);
            let name = unit.name.clone();
            thread::spawn(move || {
                let mut round = 0u64;
                let outcome = loop {
                    round += 1;
                    let result = if round % 3 == 0 {
                        poller.poll_timeout(Duration::from_micros(300), |e, s, eob| {
                            rec.see(e, s, eob);
                            rec.done(s);
                        })
                    } else {
                        poller.poll(|e, s, eob| {
                            rec.see(e, s, eob);
                            rec.done(s);
                        })
                    };
                    match result {
                        Ok(0) => thread::yield_now(),
                        Ok(_) => {}
                        Err(PollError::Closed) => break Ok(()),
                        Err(PollError::Halted) => {
                            break Err(format!("poller {name}: the ring halted"));
                        }
                    }
                };
                drop(rec);
                (poller, outcome)
            })
        })
        .collect();

    let producer_threads: Vec<thread::JoinHandle<Result<Vec<u64>, String>>> = producers
        .into_iter()
        .enumerate()
        .map(|(id, p)| {
            let (count, seed) = case.producers[id];
            thread::spawn(move || produce(p, id as u32, count, seed))
        })
        .collect();

    let join_producers = |threads: Vec<thread::JoinHandle<Result<Vec<u64>, String>>>| {
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Vec<_>>()
    };
    let (joined, produced, pollers) = if case.join_early && poller_threads.is_empty() {
        // `join` from another thread than the producers', while they run.
        let joined = ring.join();
        (joined, join_producers(producer_threads), Vec::new())
    } else {
        let produced = join_producers(producer_threads);
        let mut pollers = Vec::new();
        let mut poller_errors = Vec::new();
        for t in poller_threads {
            let (poller, outcome) = t.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            pollers.push(poller);
            if let Err(e) = outcome {
                poller_errors.push(e);
            }
        }
        let joined = ring.join();
        assert!(poller_errors.is_empty(), "{poller_errors:?} ({joined:?})");
        (joined, produced, pollers)
    };
    let report = joined.unwrap_or_else(|e| panic!("join failed: {e}"));
    let producer_seqs: Vec<Vec<u64>> = produced
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let logs: Vec<Vec<Rec>> = std::mem::take(&mut *ctx.sink.lock().expect("no panics"))
        .into_iter()
        .enumerate()
        .map(|(m, log)| {
            log.unwrap_or_else(|| panic!("consumer {} never handed its log", topo.members[m].name))
        })
        .collect();

    check_events(case, topo, total, K::MULTI, &producer_seqs, &logs);

    // `join` and the monitor agree with the model.
    let expected = JoinReport {
        published: total,
        consumers: topo
            .members
            .iter()
            .map(|m| (m.name.clone(), total))
            .collect(),
    };
    assert_eq!(report, expected, "join report");
    let stats = monitor.stats();
    assert_eq!(stats.capacity, case.capacity as u64);
    assert_eq!(stats.published, total, "monitor: published");
    assert_eq!(stats.fill, 0, "monitor: fill after the drain");
    assert!(stats.closed && !stats.halted, "monitor: {stats:?}");
    let names: Vec<&str> = stats.consumers.iter().map(|c| c.name.as_str()).collect();
    let expected_names: Vec<&str> = topo.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names, expected_names,
        "monitor: consumers in declaration order"
    );
    for c in &stats.consumers {
        assert_eq!(
            (c.handled, c.lag, c.detached),
            (total, 0, false),
            "monitor: {c:?}"
        );
    }
    // Dropped pollers detach.
    let poller_names: Vec<String> = pollers.iter().map(|p| p.name().to_string()).collect();
    drop(pollers);
    for c in monitor.stats().consumers {
        if poller_names.contains(&c.name) {
            assert!(c.detached, "dropped poller {c:?}");
            assert_eq!(
                c.handled, total,
                "a dropped poller keeps where it stopped: {c:?}"
            );
        }
    }
}

/// Publishes `count` events `(id, 0..count)`, picking the call for each
/// event with `seed`; returns the sequence of each event. Drops the handle
/// at the end: the producer's close point.
fn produce<W: WaitStrategy, K: ProducerKind>(
    mut p: Producer<Ev, W, K>,
    id: u32,
    count: u64,
    seed: u64,
) -> Result<Vec<u64>, String> {
    let cap = p.capacity();
    let mut rng = common::Rng::new(seed);
    let mut seqs: Vec<u64> = Vec::with_capacity(count as usize);
    let ev = |counter: u64| Ev {
        producer: id,
        counter,
        marks: 0,
    };
    let halted = |call: &str, c: u64| format!("producer {id}: {call} of event {c}: ring halted");
    while (seqs.len() as u64) < count {
        let c = seqs.len() as u64;
        match rng.below(8) {
            0 | 1 => {
                let s = p.publish(ev(c)).map_err(|_| halted("publish", c))?;
                seqs.push(s);
            }
            2 => {
                let s = p
                    .publish_with(|e| *e = ev(c))
                    .map_err(|_| halted("publish_with", c))?;
                seqs.push(s);
            }
            3 => {
                let mut v = ev(c);
                loop {
                    match p.try_publish(v) {
                        Ok(s) => break seqs.push(s),
                        Err(TryPublishError::Full(back)) => {
                            assert_eq!(back, ev(c), "try_publish hands the value back");
                            v = back;
                            thread::yield_now();
                        }
                        Err(TryPublishError::Halted(_)) => return Err(halted("try_publish", c)),
                    }
                }
            }
            4 => {
                let mut f = |e: &mut Ev| *e = ev(c);
                loop {
                    match p.try_publish_with(f) {
                        Ok(s) => break seqs.push(s),
                        Err(TryPublishError::Full(back)) => {
                            f = back;
                            thread::yield_now();
                        }
                        Err(TryPublishError::Halted(_)) => {
                            return Err(halted("try_publish_with", c));
                        }
                    }
                }
            }
            5 => {
                let mut v = ev(c);
                let timeout = Duration::from_micros(rng.below(300));
                loop {
                    match p.publish_timeout(v, timeout) {
                        Ok(s) => break seqs.push(s),
                        Err(PublishTimeoutError::Timeout(back)) => v = back,
                        Err(PublishTimeoutError::Halted(_)) => {
                            return Err(halted("publish_timeout", c));
                        }
                    }
                }
            }
            6 => {
                let k = 1 + rng.below(cap.min(count - c));
                let range = p
                    .publish_batch(k as usize, |i, e| *e = ev(c + i as u64))
                    .map_err(|_| halted("publish_batch", c))?;
                assert_eq!(range.end - range.start, k, "publish_batch range");
                seqs.extend(range);
            }
            _ => {
                let k = 1 + rng.below(cap.min(count - c));
                let mut f = |i: usize, e: &mut Ev| *e = ev(c + i as u64);
                loop {
                    match p.try_publish_batch(k as usize, f) {
                        Ok(range) => {
                            assert_eq!(range.end - range.start, k, "try_publish_batch range");
                            break seqs.extend(range);
                        }
                        Err(TryPublishError::Full(back)) => {
                            f = back;
                            thread::yield_now();
                        }
                        Err(TryPublishError::Halted(_)) => {
                            return Err(halted("try_publish_batch", c));
                        }
                    }
                }
            }
        }
    }
    Ok(seqs)
}

/// Compares what every consumer saw with the sequential model.
fn check_events(
    case: &Case,
    topo: &Topology,
    total: u64,
    multi: bool,
    producer_seqs: &[Vec<u64>],
    logs: &[Vec<Rec>],
) {
    // The model: the producers' sequences number the events 0..total.
    let mut by_seq: Vec<Option<(u32, u64)>> = vec![None; total as usize];
    for (p, seqs) in producer_seqs.iter().enumerate() {
        assert_eq!(seqs.len() as u64, case.producers[p].0, "producer {p} count");
        for (c, &s) in seqs.iter().enumerate() {
            assert!(
                s < total,
                "producer {p} event {c} got sequence {s} >= {total}"
            );
            assert!(
                by_seq[s as usize].is_none(),
                "sequence {s} returned twice (producer {p} event {c} and {:?})",
                by_seq[s as usize]
            );
            by_seq[s as usize] = Some((p as u32, c as u64));
            if c > 0 {
                assert!(seqs[c - 1] < s, "producer {p}: sequences not increasing");
            }
        }
    }
    if !multi {
        assert!(
            producer_seqs[0].iter().copied().eq(0..total),
            "a single producer's sequences are 0, 1, 2, ..."
        );
    }
    let batch_cap = case.max_batch.map_or(case.capacity as u64, |m| {
        (m as u64).min(case.capacity as u64)
    });

    for unit in &topo.units {
        let n = unit.kind.members();
        let mut times_seen = vec![0u32; total as usize];
        for i in 0..n {
            let member = &topo.members[unit.first_member + i];
            let log = &logs[unit.first_member + i];
            let name = &member.name;
            let mut last_seq: Option<u64> = None;
            let mut last_counter: Vec<Option<u64>> = vec![None; producer_seqs.len()];
            let mut in_batch = 0u64;
            let per_batch = match member.partition {
                None => batch_cap,
                Some((_, n)) => batch_cap.div_ceil(n),
            };
            for r in log {
                assert!(
                    r.seq < total,
                    "{name} handled sequence {} >= {total}",
                    r.seq
                );
                if let Some(l) = last_seq {
                    assert!(r.seq > l, "{name} handled {} after {l}", r.seq);
                }
                last_seq = Some(r.seq);
                if let Some((i, n)) = member.partition {
                    assert_eq!(r.seq % n, i, "{name} handled another member's {}", r.seq);
                }
                assert_eq!(
                    Some((r.producer, r.counter)),
                    by_seq[r.seq as usize],
                    "{name} saw the wrong event at sequence {}",
                    r.seq
                );
                let last = &mut last_counter[r.producer as usize];
                assert!(
                    !matches!(*last, Some(l) if l >= r.counter),
                    "{name}: producer {} order broken: {} after {last:?}",
                    r.producer,
                    r.counter
                );
                *last = Some(r.counter);
                assert!(
                    r.deps_done,
                    "{name} handled {} before its dependencies {:?} did",
                    r.seq,
                    unit.deps
                        .iter()
                        .map(|&d| &topo.units[d].name)
                        .collect::<Vec<_>>()
                );
                assert_eq!(
                    r.marks, unit.expected_marks,
                    "{name} at sequence {}: marks of the mutating stages (stage {})",
                    r.seq, unit.stage
                );
                times_seen[r.seq as usize] += 1;
                in_batch += 1;
                if r.end_of_batch {
                    assert!(
                        in_batch <= per_batch,
                        "{name}: a batch of {in_batch} > {per_batch} ending at {}",
                        r.seq
                    );
                    in_batch = 0;
                }
            }
            if let Some(r) = log.last() {
                assert!(r.end_of_batch, "{name}: its last event ends a batch");
            }
        }
        if let Some(s) = times_seen.iter().position(|&t| t != 1) {
            panic!(
                "{} handled sequence {s} {} times (every event exactly once)",
                unit.name, times_seen[s]
            );
        }
    }
}

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Handler),
        1 => Just(Kind::Poller),
        2 => (1usize..=3).prop_map(Kind::Group),
        2 => Just(Kind::HandlerMut),
        1 => (1usize..=3).prop_map(Kind::GroupMut),
    ]
}

fn wait_strategy() -> impl Strategy<Value = Wait> {
    prop_oneof![
        Just(Wait::Adaptive),
        Just(Wait::AdaptiveEagerPark),
        Just(Wait::BusySpin),
        Just(Wait::SpinYield),
        Just(Wait::Blocking),
        Just(Wait::BlockingWithTimeout),
    ]
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        0u32..=6,
        proptest::option::of(1usize..=80),
        wait_strategy(),
        proptest::collection::vec((0u64..=250, any::<u64>()), 1..=4),
        proptest::collection::vec((kind_strategy(), any::<bool>()), 1..=4),
        any::<bool>(),
    )
        .prop_map(
            |(cap_log, max_batch, wait, producers, units, join_early)| Case {
                capacity: 1 << cap_log,
                max_batch,
                wait,
                producers,
                units,
                join_early,
            },
        )
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    ProptestConfig {
        cases,
        // A hung case costs the watchdog's minute per shrink step: bound it.
        max_shrink_time: 120_000,
        ..ProptestConfig::default()
    }
}

fn run_watched(case: Case) {
    let name = format!("model case {case:?}");
    common::watchdog_named(&name, common::WATCHDOG, move || run_case(case));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ring_matches_the_sequential_model(case in case_strategy()) {
        run_watched(case);
    }
}

/// Shapes that must be covered whatever the random draw: a chain of four,
/// a diamond around a mutating stage, a mutating worker group feeding
/// readers, pollers in the middle of the graph, all on tiny rings.
#[test]
fn fixed_topologies() {
    use Kind::*;
    let shapes: Vec<Vec<(Kind, bool)>> = vec![
        vec![
            (Handler, false),
            (Handler, true),
            (Handler, true),
            (Handler, true),
        ],
        vec![
            (Handler, false),
            (HandlerMut, false),
            (Handler, false),
            (Group(2), false),
        ],
        vec![
            (GroupMut(3), false),
            (Handler, false),
            (Poller, false),
            (Handler, true),
        ],
        vec![
            (Poller, false),
            (Group(3), false),
            (Poller, true),
            (HandlerMut, false),
        ],
        vec![
            (HandlerMut, false),
            (HandlerMut, false),
            (GroupMut(2), false),
            (Handler, false),
        ],
    ];
    let waits = [
        Wait::Adaptive,
        Wait::AdaptiveEagerPark,
        Wait::SpinYield,
        Wait::Blocking,
        Wait::BlockingWithTimeout,
    ];
    for (i, units) in shapes.into_iter().enumerate() {
        for (j, &capacity) in [1usize, 2, 16].iter().enumerate() {
            run_watched(Case {
                capacity,
                max_batch: [None, Some(1), Some(3)][j],
                wait: waits[(i + j) % waits.len()],
                producers: vec![(120, i as u64), (0, 1), (77, 2 + j as u64)][..1 + (i + j) % 3]
                    .to_vec(),
                units: units.clone(),
                join_early: j == 0,
            });
        }
    }
}
