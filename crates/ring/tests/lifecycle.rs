//! Lifecycle: drain on close, halt, panicking handlers, hooks, pollers,
//! monitoring, and the panics that reject misuse.
//!
//! Where a test wants a producer *blocked* on a full ring when something
//! happens, it pauses briefly (`settle`) before acting. The pause only makes
//! the interesting interleaving likely; every assertion holds whichever
//! interleaving happens, so nothing here depends on timing.
#![cfg(not(loom))]

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{wait_for, watchdog, WATCHDOG};
use statepipe_ring::state::SharedStage;
use statepipe_ring::wait::{Adaptive, Blocking, WaitStrategy};
use statepipe_ring::{
    EventHandler, EventHandlerMut, JoinReport, PollError, Producer, ProducerKind, PublishError,
    PublishTimeoutError, Ring, RingBuilder, RingError, TryPublishError,
};

/// Lets another thread reach its blocking call. Correctness never depends
/// on it (see the module docs).
fn settle() {
    thread::sleep(Duration::from_millis(20));
}

type Log<T> = Arc<Mutex<Vec<T>>>;

fn new_log<T>() -> Log<T> {
    Arc::new(Mutex::new(Vec::new()))
}

/// A copy of what the log holds now.
fn snapshot<T: Clone>(log: &Log<T>) -> Vec<T> {
    log.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn push<T>(log: &Log<T>, value: T) {
    log.lock().unwrap_or_else(|e| e.into_inner()).push(value);
}

/// A configurable handler: logs the values it sees and its hooks, and can
/// stall, slow down or panic at a chosen sequence.
struct Probe {
    values: Log<u64>,
    hooks: Log<String>,
    /// Busy work per event, in rounds of 100 iterations: a consumer slower
    /// than the producers. (Not `yield_now`: under `BusySpin` a yield hands
    /// the core to a spinner for a whole time slice.)
    slow: u32,
    /// At this sequence: report it, then wait for the go-ahead.
    stall_at: Option<(u64, Sender<u64>, Receiver<()>)>,
    /// At this sequence (after any stall): panic.
    panic_at: Option<u64>,
}

impl Probe {
    fn new() -> Self {
        Self {
            values: new_log(),
            hooks: new_log(),
            slow: 0,
            stall_at: None,
            panic_at: None,
        }
    }

    fn slow(mut self, rounds: u32) -> Self {
        self.slow = rounds;
        self
    }

    fn panic_at(mut self, seq: u64) -> Self {
        self.panic_at = Some(seq);
        self
    }

    /// Stalls at `seq`; returns the channel that reports the stall and the
    /// one that releases it.
    fn stall_at(mut self, seq: u64) -> (Self, Receiver<u64>, Sender<()>) {
        let (entered_tx, entered_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel();
        self.stall_at = Some((seq, entered_tx, go_rx));
        (self, entered_rx, go_tx)
    }

    fn logs(&self) -> (Log<u64>, Log<String>) {
        (Arc::clone(&self.values), Arc::clone(&self.hooks))
    }

    fn event(&mut self, value: u64, seq: u64) {
        if let Some((at, entered, go)) = &self.stall_at {
            if *at == seq {
                entered.send(seq).expect("the test waits for the stall");
                go.recv_timeout(WATCHDOG)
                    .expect("the test releases the stall");
            }
        }
        if self.panic_at == Some(seq) {
            panic!("boom at {seq}");
        }
        for i in 0..self.slow * 100 {
            std::hint::black_box(i);
        }
        push(&self.values, value);
        push(&self.hooks, format!("event {seq}"));
    }
}

impl EventHandler<u64> for Probe {
    fn on_event(&mut self, event: &u64, sequence: u64, _end_of_batch: bool) {
        self.event(*event, sequence);
    }
    fn on_start(&mut self) {
        push(&self.hooks, "start".to_string());
    }
    fn on_shutdown(&mut self) {
        push(&self.hooks, "shutdown".to_string());
    }
}

impl EventHandlerMut<u64> for Probe {
    fn on_event(&mut self, event: &mut u64, sequence: u64, _end_of_batch: bool) {
        self.event(*event, sequence);
    }
    fn on_start(&mut self) {
        push(&self.hooks, "start".to_string());
    }
    fn on_shutdown(&mut self) {
        push(&self.hooks, "shutdown".to_string());
    }
}

/// Asserts `hooks` is `start`, the events of `seqs`, `shutdown` (the last
/// one only if `shutdown`).
fn assert_hooks(
    name: &str,
    hooks: &Log<String>,
    seqs: impl IntoIterator<Item = u64>,
    shutdown: bool,
) {
    let mut expected = vec!["start".to_string()];
    expected.extend(seqs.into_iter().map(|s| format!("event {s}")));
    if shutdown {
        expected.push("shutdown".to_string());
    }
    assert_eq!(snapshot(hooks), expected, "hooks of {name}");
}

// ---------------------------------------------------------------------------
// Drain on close

/// Every event published before the producer drops is handled by every
/// consumer exactly once, in order, before `join` returns, though one
/// consumer is much slower than the producer and the ring is full most of
/// the time.
fn drain_on_close_single<W: WaitStrategy>(wait: fn() -> W) {
    const N: u64 = 300;
    let fast = Probe::new();
    let slow = Probe::new().slow(50);
    let after = Probe::new();
    let logs = [fast.logs(), slow.logs(), after.logs()];
    let (mut producer, ring) = RingBuilder::new(4, || 0u64)
        .wait_strategy(wait())
        .handler("fast", fast)
        .handler("slow", slow)
        .then()
        .handler("after", after)
        .build_single();
    for i in 0..N {
        assert_eq!(producer.publish(i * 3).expect("not halted"), i);
    }
    drop(producer);
    let report = ring.join().expect("a clean drain");
    assert_eq!(
        report,
        JoinReport {
            published: N,
            consumers: vec![("fast".into(), N), ("slow".into(), N), ("after".into(), N)],
        }
    );
    for (name, (values, hooks)) in ["fast", "slow", "after"].iter().zip(&logs) {
        assert_eq!(
            snapshot(values),
            (0..N).map(|i| i * 3).collect::<Vec<_>>(),
            "{name}"
        );
        assert_hooks(name, hooks, 0..N, true);
    }
}
per_wait_strategy!(drain_on_close_single_producer, super::drain_on_close_single);

/// The same with three producer threads; per-producer order and
/// exactly-once across them.
fn drain_on_close_multi<W: WaitStrategy>(wait: fn() -> W) {
    const PER: u64 = 200;
    const PRODUCERS: u64 = 3;
    let slow = Probe::new().slow(30);
    let after = Probe::new();
    let logs = [slow.logs().0, after.logs().0];
    let (producer, ring) = RingBuilder::new(4, || 0u64)
        .wait_strategy(wait())
        .handler("slow", slow)
        .then()
        .handler("after", after)
        .build_multi();
    let threads: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let mut p = producer.clone();
            thread::spawn(move || {
                for i in 0..PER {
                    p.publish(id << 32 | i).expect("not halted");
                }
            })
        })
        .collect();
    drop(producer);
    for t in threads {
        t.join().expect("producer thread");
    }
    let report = ring.join().expect("a clean drain");
    assert_eq!(report.published, PER * PRODUCERS);
    for log in &logs {
        let values = snapshot(log);
        assert_eq!(values.len() as u64, PER * PRODUCERS, "exactly once");
        for id in 0..PRODUCERS {
            let mine: Vec<u64> = values
                .iter()
                .filter(|v| *v >> 32 == id)
                .map(|v| v & 0xFFFF_FFFF)
                .collect();
            assert_eq!(
                mine,
                (0..PER).collect::<Vec<_>>(),
                "producer {id}: in order, none lost"
            );
        }
    }
}
per_wait_strategy!(drain_on_close_multi_producer, super::drain_on_close_multi);

/// A consumer that starts after the close: nothing it has not seen is lost
/// (LMAX-Exchange/disruptor#517 loses such events).
struct LateStarter {
    go: Receiver<()>,
    values: Log<u64>,
}

impl EventHandler<u64> for LateStarter {
    fn on_event(&mut self, event: &u64, _sequence: u64, _end_of_batch: bool) {
        push(&self.values, *event);
    }
    fn on_start(&mut self) {
        self.go
            .recv_timeout(WATCHDOG)
            .expect("the test lets the consumer start");
    }
}

#[test]
fn consumers_that_start_after_the_close_still_drain() {
    watchdog(|| {
        let (go_a, rx_a) = mpsc::channel();
        let (go_b, rx_b) = mpsc::channel();
        let (a, b) = (new_log(), new_log());
        let (mut producer, ring) = RingBuilder::new(8, || 0u64)
            .handler(
                "a",
                LateStarter {
                    go: rx_a,
                    values: Arc::clone(&a),
                },
            )
            .then()
            .handler(
                "b",
                LateStarter {
                    go: rx_b,
                    values: Arc::clone(&b),
                },
            )
            .build_multi();
        producer
            .publish_batch(8, |i, slot| *slot = i as u64)
            .expect("not halted");
        drop(producer);
        // Both consumers are still inside `on_start`: the ring is closed
        // and full before they read anything.
        go_b.send(()).expect("b waits");
        go_a.send(()).expect("a waits");
        let report = ring.join().expect("a clean drain");
        assert_eq!(report.published, 8);
        assert_eq!(snapshot(&a), (0..8).collect::<Vec<_>>());
        assert_eq!(snapshot(&b), (0..8).collect::<Vec<_>>());
    });
}

#[test]
fn closing_an_empty_ring_runs_the_hooks_and_joins() {
    watchdog(|| {
        let h = Probe::new();
        let m = Probe::new();
        let (hl, ml) = (h.logs().1, m.logs().1);
        let (producer, ring) = RingBuilder::new(2, || 0u64)
            .handler_mut("m", m)
            .then()
            .handler("h", h)
            .build_single();
        producer.close();
        let report = ring.join().expect("a clean drain");
        assert_eq!(report.published, 0);
        assert_eq!(report.consumers, vec![("m".into(), 0), ("h".into(), 0)]);
        assert_hooks("m", &ml, [], true);
        assert_hooks("h", &hl, [], true);
    });
}

// ---------------------------------------------------------------------------
// Halt releases producers

/// A blocking call that waits for space.
#[derive(Debug, Clone, Copy)]
enum BlockingCall {
    Publish,
    PublishTimeout,
    PublishWith,
    PublishBatch,
}

impl BlockingCall {
    const ALL: [BlockingCall; 4] = [
        BlockingCall::Publish,
        BlockingCall::PublishTimeout,
        BlockingCall::PublishWith,
        BlockingCall::PublishBatch,
    ];

    /// Publishes `value`; `Err` carries the value the error handed back
    /// (for the closures: the value they write when called).
    fn call<W: WaitStrategy, K: ProducerKind>(
        self,
        p: &mut Producer<u64, W, K>,
        value: u64,
    ) -> Result<u64, u64> {
        match self {
            BlockingCall::Publish => p.publish(value).map_err(|PublishError::Halted(v)| v),
            BlockingCall::PublishTimeout => {
                p.publish_timeout(value, WATCHDOG).map_err(|e| match e {
                    PublishTimeoutError::Halted(v) => v,
                    PublishTimeoutError::Timeout(_) => panic!("timed out instead of halting"),
                })
            }
            BlockingCall::PublishWith => {
                p.publish_with(move |slot| *slot = value)
                    .map_err(|PublishError::Halted(f)| {
                        let mut slot = 0;
                        f(&mut slot);
                        slot
                    })
            }
            BlockingCall::PublishBatch => p
                .publish_batch(1, move |_, slot| *slot = value)
                .map(|range| range.start)
                .map_err(|PublishError::Halted(mut f)| {
                    let mut slot = 0;
                    f(0, &mut slot);
                    slot
                }),
        }
    }
}

/// A ring of capacity 2 whose only consumer takes event 0 and stalls there
/// (with `max_batch(1)`, so it is done with exactly one event afterwards).
fn stalled_ring<W: WaitStrategy>(
    wait: W,
) -> (RingBuilder<u64, W, SharedStage>, Receiver<u64>, Sender<()>) {
    let (probe, entered, go) = Probe::new().stall_at(0);
    let builder = RingBuilder::new(2, || 0u64)
        .wait_strategy(wait)
        .max_batch(1)
        .handler("stalled", probe);
    (builder, entered, go)
}

/// On a full ring: the non-blocking calls say `Full`/`Timeout` and hand
/// the value back.
fn assert_full<W: WaitStrategy, K: ProducerKind>(p: &mut Producer<u64, W, K>) {
    assert!(matches!(p.try_publish(7), Err(TryPublishError::Full(7))));
    assert!(matches!(
        p.publish_timeout(8, Duration::from_millis(2)),
        Err(PublishTimeoutError::Timeout(8))
    ));
    assert!(matches!(
        p.try_publish_with(|s| *s = 9),
        Err(TryPublishError::Full(_))
    ));
    assert!(matches!(
        p.try_publish_batch(1, |_, s| *s = 9),
        Err(TryPublishError::Full(_))
    ));
    assert_eq!(TryPublishError::Full(5u64).into_inner(), 5);
}

/// After a halt every call fails at once with `Halted` and the value.
fn assert_halted<W: WaitStrategy, K: ProducerKind>(p: &mut Producer<u64, W, K>) {
    assert!(matches!(p.publish(1), Err(PublishError::Halted(1))));
    assert!(matches!(p.try_publish(2), Err(TryPublishError::Halted(2))));
    assert!(matches!(
        p.publish_timeout(3, WATCHDOG),
        Err(PublishTimeoutError::Halted(3))
    ));
    assert!(matches!(
        p.publish_with(|s| *s = 4),
        Err(PublishError::Halted(_))
    ));
    assert!(matches!(
        p.try_publish_with(|s| *s = 5),
        Err(TryPublishError::Halted(_))
    ));
    assert!(matches!(
        p.publish_batch(2, |_, s| *s = 6),
        Err(PublishError::Halted(_))
    ));
    assert!(matches!(
        p.try_publish_batch(1, |_, s| *s = 7),
        Err(TryPublishError::Halted(_))
    ));
    for call in BlockingCall::ALL {
        assert_eq!(call.call(p, 8), Err(8), "{call:?} after the halt");
    }
}

fn assert_halted_join(joined: Result<JoinReport, RingError>, unhandled: &[(&str, u64)]) {
    match joined {
        Err(RingError::Halted { unhandled: got }) => {
            let expected: Vec<(String, u64)> =
                unhandled.iter().map(|(n, c)| (n.to_string(), *c)).collect();
            assert_eq!(got, expected, "unhandled events per consumer");
        }
        other => panic!("expected RingError::Halted, got {other:?}"),
    }
}

/// A single producer blocked on a full ring gets `Halted` with its value
/// when the ring is halted, for each blocking call.
fn halt_releases_a_blocked_single_producer<W: WaitStrategy>(wait: fn() -> W) {
    for call in BlockingCall::ALL {
        let (builder, entered, go) = stalled_ring(wait());
        let (mut p, ring) = builder.build_single();
        assert_eq!(p.publish(100), Ok(0));
        assert_eq!(
            entered.recv_timeout(WATCHDOG),
            Ok(0),
            "the consumer stalls at 0"
        );
        assert_eq!(p.publish(101), Ok(1)); // the ring is now full
        assert_full(&mut p);
        let blocked = thread::spawn(move || {
            let result = call.call(&mut p, 102);
            (p, result)
        });
        settle();
        ring.halt();
        let (mut p, result) = blocked.join().expect("producer thread");
        assert_eq!(
            result,
            Err(102),
            "{call:?} blocked on a full ring, then halted"
        );
        assert_halted(&mut p);
        go.send(()).expect("release the consumer");
        assert_halted_join(ring.join(), &[("stalled", 1)]);
    }
}
per_wait_strategy!(
    halt_releases_blocked_single_producer,
    super::halt_releases_a_blocked_single_producer
);

/// Several multi-producer handles blocked at once (claimed ranges and
/// conditional claims) all get `Halted`.
fn halt_releases_blocked_multi_producers<W: WaitStrategy>(wait: fn() -> W) {
    let (builder, entered, go) = stalled_ring(wait());
    let (mut p, ring) = builder.build_multi();
    assert_eq!(p.publish(100), Ok(0));
    assert_eq!(entered.recv_timeout(WATCHDOG), Ok(0));
    assert_eq!(p.publish(101), Ok(1));
    assert_full(&mut p);
    let blocked: Vec<_> = BlockingCall::ALL
        .iter()
        .enumerate()
        .map(|(i, &call)| {
            let mut p = p.clone();
            thread::spawn(move || call.call(&mut p, 200 + i as u64))
        })
        .collect();
    settle();
    ring.halt();
    for (i, t) in blocked.into_iter().enumerate() {
        assert_eq!(t.join().expect("producer thread"), Err(200 + i as u64));
    }
    assert_halted(&mut p);
    go.send(()).expect("release the consumer");
    assert_halted_join(ring.join(), &[("stalled", 1)]);
}
per_wait_strategy!(
    halt_releases_blocked_multi_producer,
    super::halt_releases_blocked_multi_producers
);

#[test]
fn halting_a_drained_ring_reports_nothing_unhandled() {
    watchdog(|| {
        let (mut p, ring) = RingBuilder::new(4, || 0u64)
            .handler("h", |_: &u64, _: u64, _: bool| {})
            .build_single();
        p.publish_batch(3, |i, s| *s = i as u64)
            .expect("not halted");
        let monitor = ring.monitor();
        wait_for("h to drain", || monitor.stats().consumers[0].lag == 0);
        ring.halt();
        assert_halted(&mut p);
        assert_halted_join(ring.join(), &[("h", 0)]);
    });
}

// ---------------------------------------------------------------------------
// Panicking handlers

fn assert_panicked(
    joined: Result<JoinReport, RingError>,
    consumer: &str,
    sequence: u64,
    message: &str,
) {
    match joined {
        Err(e @ RingError::HandlerPanicked { .. }) => {
            let shown = e.to_string();
            let RingError::HandlerPanicked {
                consumer: c,
                sequence: s,
                message: m,
            } = e
            else {
                unreachable!()
            };
            assert_eq!((c.as_str(), s), (consumer, sequence), "who panicked where");
            assert!(
                m.contains(message),
                "panic message {m:?} should contain {message:?}"
            );
            assert!(
                shown.contains(&format!("'{consumer}'")) && shown.contains(&sequence.to_string()),
                "display names the consumer and the sequence: {shown}"
            );
        }
        other => panic!("expected RingError::HandlerPanicked, got {other:?}"),
    }
}

/// `a` panics at sequence 5 while the producer is blocked on the full ring:
/// the producer gets `Halted`, later calls too, `join` names `a` and 5,
/// and `a`'s dependent never sees 5 or later.
fn panicking_handler_single<W: WaitStrategy>(wait: fn() -> W) {
    let (a, entered, go) = Probe::new().panic_at(5).stall_at(5);
    let b = Probe::new();
    let c = Probe::new();
    let (a_hooks, (b_values, b_hooks), (c_values, c_hooks)) = (a.logs().1, b.logs(), c.logs());
    let (mut p, ring) = RingBuilder::new(4, || 0u64)
        .wait_strategy(wait())
        .handler("a", a)
        .handler("b", b)
        .then()
        .handler("c", c)
        .build_single();
    let producer = thread::spawn(move || {
        let mut next = 0u64;
        let halted_at = loop {
            match p.publish(next) {
                Ok(seq) => assert_eq!(seq, next),
                Err(PublishError::Halted(v)) => break v,
            }
            next += 1;
        };
        (p, halted_at)
    });
    assert_eq!(entered.recv_timeout(WATCHDOG), Ok(5));
    settle(); // the producer fills the ring behind `a` and blocks
    go.send(()).expect("a waits");
    let (mut p, halted_at) = producer.join().expect("producer thread");
    // `a` never got past 5, so at most 5 + capacity events were published.
    assert!((6..=9).contains(&halted_at), "halted at {halted_at}");
    assert_halted(&mut p);
    let joined = ring.join();
    assert_panicked(joined, "a", 5, "boom at 5");
    let c_seen = snapshot(&c_values);
    assert!(
        c_seen.iter().copied().eq(0..c_seen.len() as u64),
        "c: {c_seen:?}"
    );
    assert!(
        c_seen.len() <= 5,
        "c handled an event `a` never finished: {c_seen:?}"
    );
    let b_seen = snapshot(&b_values);
    assert!(
        b_seen.iter().copied().eq(0..b_seen.len() as u64),
        "b: {b_seen:?}"
    );
    // The panicking handler does not shut down; the others do.
    assert_eq!(
        snapshot(&a_hooks).first().map(String::as_str),
        Some("start")
    );
    assert!(!snapshot(&a_hooks).contains(&"shutdown".to_string()));
    assert_eq!(
        snapshot(&b_hooks).last().map(String::as_str),
        Some("shutdown")
    );
    assert_eq!(
        snapshot(&c_hooks).last().map(String::as_str),
        Some("shutdown")
    );
}
per_wait_strategy!(
    panicking_handler_single_producer,
    super::panicking_handler_single
);

/// The same with three multi-producer threads, all blocked by the time the
/// handler panics; each gets `Halted`.
fn panicking_handler_multi<W: WaitStrategy>(wait: fn() -> W) {
    let (a, entered, go) = Probe::new().panic_at(5).stall_at(5);
    let (p, ring) = RingBuilder::new(4, || 0u64)
        .wait_strategy(wait())
        .handler("a", a)
        .then()
        .handler("c", Probe::new())
        .build_multi();
    let producers: Vec<_> = (0..3u64)
        .map(|id| {
            let mut p = p.clone();
            thread::spawn(move || {
                let mut i = 0u64;
                loop {
                    if let Err(PublishError::Halted(v)) = p.publish(id << 32 | i) {
                        assert_eq!(v, id << 32 | i, "the value comes back");
                        break p;
                    }
                    i += 1;
                }
            })
        })
        .collect();
    assert_eq!(entered.recv_timeout(WATCHDOG), Ok(5));
    settle();
    go.send(()).expect("a waits");
    for t in producers {
        let mut p = t.join().expect("producer thread");
        assert_halted(&mut p);
    }
    drop(p);
    assert_panicked(ring.join(), "a", 5, "boom at 5");
}
per_wait_strategy!(
    panicking_handler_multi_producer,
    super::panicking_handler_multi
);

#[test]
fn panicking_worker_group_member_is_named() {
    watchdog(|| {
        let (mut p, ring) = RingBuilder::new(4, || 0u64)
            .worker_group("w", 3, |i| {
                if i == 1 {
                    Probe::new().panic_at(7)
                } else {
                    Probe::new()
                }
            })
            .build_single();
        let mut next = 0;
        while p.publish(next).is_ok() {
            next += 1;
        }
        assert!(next > 7, "event 7 was published before the halt");
        assert_panicked(ring.join(), "w/1", 7, "boom at 7");
    });
}

#[test]
fn panicking_mutating_handler_stops_its_dependents() {
    watchdog(|| {
        struct PanicAny;
        impl EventHandlerMut<u64> for PanicAny {
            fn on_event(&mut self, event: &mut u64, sequence: u64, _: bool) {
                if sequence == 3 {
                    std::panic::panic_any(42u32);
                }
                *event += 1000;
            }
        }
        let reader = Probe::new();
        let values = reader.logs().0;
        let (mut p, ring) = RingBuilder::new(8, || 0u64)
            .handler_mut("m", PanicAny)
            .then()
            .handler("r", reader)
            .build_multi();
        for i in 0..3 {
            p.publish(i).expect("the ring has room for these");
        }
        let mut next = 3;
        while p.publish(next).is_ok() {
            next += 1;
        }
        drop(p);
        assert_panicked(ring.join(), "m", 3, "non-string panic payload");
        let seen = snapshot(&values);
        assert!(seen.len() <= 3, "r handled past the panic: {seen:?}");
        assert!(
            seen.iter().copied().eq((1000..).take(seen.len())),
            "r sees m's changes: {seen:?}"
        );
    });
}

// ---------------------------------------------------------------------------
// Hooks and timeouts

#[test]
fn hooks_run_around_the_events_of_every_kind_of_handler() {
    watchdog(|| {
        let h = Probe::new();
        let m = Probe::new();
        let (hh, mh) = (h.logs().1, m.logs().1);
        let mut group_hooks = Vec::new();
        let (mut p, ring) = RingBuilder::new(4, || 0u64)
            .handler("h", h)
            .then()
            .handler_mut("m", m)
            .then()
            .worker_group("w", 2, |_| {
                let probe = Probe::new();
                group_hooks.push(probe.logs().1);
                probe
            })
            .build_single();
        for i in 0..10 {
            p.publish(i).expect("not halted");
        }
        drop(p);
        ring.join().expect("a clean drain");
        assert_hooks("h", &hh, 0..10, true);
        assert_hooks("m", &mh, 0..10, true);
        assert_hooks("w/0", &group_hooks[0], (0..10).step_by(2), true);
        assert_hooks("w/1", &group_hooks[1], (1..10).step_by(2), true);
    });
}

#[test]
fn on_shutdown_runs_after_a_halt() {
    watchdog(|| {
        let h = Probe::new();
        let hooks = h.logs().1;
        let (p, ring) = RingBuilder::new(4, || 0u64).handler("h", h).build_single();
        ring.halt();
        assert_halted_join(ring.join(), &[("h", 0)]);
        assert_hooks("h", &hooks, [], true);
        drop(p);
    });
}

/// Records the sequences `on_timeout` was called with.
struct TimeoutProbe {
    timeouts: Log<u64>,
    values: Log<u64>,
}

impl TimeoutProbe {
    fn new() -> (Self, Log<u64>, Log<u64>) {
        let (timeouts, values) = (new_log(), new_log());
        let probe = Self {
            timeouts: Arc::clone(&timeouts),
            values: Arc::clone(&values),
        };
        (probe, timeouts, values)
    }
}

impl EventHandler<u64> for TimeoutProbe {
    fn on_event(&mut self, event: &u64, _: u64, _: bool) {
        push(&self.values, *event);
    }
    fn on_timeout(&mut self, next_sequence: u64) {
        push(&self.timeouts, next_sequence);
    }
}

impl EventHandlerMut<u64> for TimeoutProbe {
    fn on_event(&mut self, event: &mut u64, _: u64, _: bool) {
        push(&self.values, *event);
    }
    fn on_timeout(&mut self, next_sequence: u64) {
        push(&self.timeouts, next_sequence);
    }
}

#[test]
fn blocking_with_timeout_calls_on_timeout_with_the_next_sequence() {
    watchdog(|| {
        let (m, m_timeouts, m_values) = TimeoutProbe::new();
        let (h, h_timeouts, h_values) = TimeoutProbe::new();
        let (mut p, ring) = RingBuilder::new(8, || 0u64)
            .wait_strategy(Blocking::with_timeout(Duration::from_millis(2)))
            .handler_mut("m", m)
            .then()
            .handler("h", h)
            .build_single();
        // One range at once, so each consumer is only ever at 0 or 3.
        p.publish_batch(3, |i, s| *s = i as u64)
            .expect("not halted");
        wait_for("m to time out after the batch", || {
            snapshot(&m_timeouts).contains(&3)
        });
        wait_for("h to time out after the batch", || {
            snapshot(&h_timeouts).contains(&3)
        });
        drop(p);
        ring.join().expect("a clean drain");
        for (name, timeouts, values) in [("m", m_timeouts, m_values), ("h", h_timeouts, h_values)] {
            let timeouts = snapshot(&timeouts);
            assert!(
                timeouts.iter().all(|&s| s == 0 || s == 3),
                "{name}: {timeouts:?}"
            );
            assert_eq!(snapshot(&values), vec![0, 1, 2], "{name}");
        }
    });
}

#[test]
fn strategies_without_a_consumer_timeout_never_call_on_timeout() {
    watchdog(|| {
        let (h, timeouts, _) = TimeoutProbe::new();
        let (p, ring) = RingBuilder::new(8, || 0u64)
            .wait_strategy(Blocking::new())
            .handler("h", h)
            .build_single();
        settle();
        drop(p);
        ring.join().expect("a clean drain");
        assert_eq!(snapshot(&timeouts), Vec::<u64>::new());
    });
}

// ---------------------------------------------------------------------------
// Dropping the ring

/// Sets its flag when dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn dropping_the_ring_without_join_halts_it_and_ends_its_threads() {
    watchdog(|| {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = DropFlag(Arc::clone(&dropped));
        let (mut p, ring) = RingBuilder::new(4, || 0u64)
            .handler("h", move |_: &u64, _: u64, _: bool| {
                let _keep = &flag;
            })
            .build_single();
        p.publish(1).expect("not halted");
        let monitor = ring.monitor();
        drop(ring);
        // The handler lived on the consumer thread: it is gone, so the
        // thread has finished.
        assert!(
            dropped.load(Ordering::SeqCst),
            "the consumer thread outlived the ring"
        );
        assert!(monitor.stats().halted);
        assert_halted(&mut p);
    });
}

#[test]
fn dropping_the_ring_releases_a_producer_blocked_on_a_full_ring() {
    watchdog(|| {
        // The untaken poller is never polled: it fills the ring.
        let (mut p, ring) = RingBuilder::new(2, || 0u64)
            .poller("idle")
            .handler("h", |_: &u64, _: u64, _: bool| {})
            .build_single();
        let monitor = ring.monitor();
        let producer = thread::spawn(move || {
            let mut i = 0;
            loop {
                if let Err(PublishError::Halted(v)) = p.publish(i) {
                    return v;
                }
                i += 1;
            }
        });
        wait_for("the ring to fill", || monitor.stats().published == 2);
        settle();
        drop(ring);
        assert_eq!(producer.join().expect("producer thread"), 2);
    });
}

/// Regression: `Ring`'s `Drop` used to return early when the ring has no consumer threads
/// (only pollers), so it does not halt, contrary to its docs ("Dropping a
/// `Ring` without `join` halts it").
#[test]
fn dropping_a_ring_of_pollers_halts_it() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(2, || 0u64).poller("p").build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        let monitor = ring.monitor();
        drop(ring);
        assert!(monitor.stats().halted, "dropping the ring halts it");
        assert_eq!(poller.poll(|_, _, _| {}), Err(PollError::Halted));
        assert!(matches!(p.publish(1), Err(PublishError::Halted(1))));
    });
}

// ---------------------------------------------------------------------------
// Pollers

#[test]
fn poller_reports_empty_then_events_then_closed() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(8, || 0u64).poller("p").build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        assert_eq!(poller.name(), "p");
        assert!(ring.take_poller("p").is_none(), "taken once");
        assert!(ring.take_poller("nope").is_none());
        let mut got = Vec::new();
        assert_eq!(
            poller.poll(|e, s, eob| got.push((*e, s, eob))),
            Ok(0),
            "empty"
        );
        for v in [10, 11, 12] {
            p.publish(v).expect("not halted");
        }
        assert_eq!(poller.poll(|e, s, eob| got.push((*e, s, eob))), Ok(3));
        assert_eq!(got, vec![(10, 0, false), (11, 1, false), (12, 2, true)]);
        assert_eq!(poller.poll(|_, _, _| panic!("nothing new")), Ok(0));
        p.publish(13).expect("not halted");
        drop(p);
        got.clear();
        assert_eq!(
            poller.poll(|e, s, eob| got.push((*e, s, eob))),
            Ok(1),
            "drains first"
        );
        assert_eq!(got, vec![(13, 3, true)]);
        assert_eq!(
            poller.poll(|_, _, _| panic!("closed")),
            Err(PollError::Closed)
        );
        assert_eq!(
            poller.poll(|_, _, _| panic!("closed")),
            Err(PollError::Closed)
        );
        assert_eq!(
            poller.poll_timeout(WATCHDOG, |_, _, _| panic!("closed")),
            Err(PollError::Closed),
            "poll_timeout returns at once on a closed ring"
        );
        // A taken poller that is still alive is reported by `join`.
        assert_eq!(
            ring.join(),
            Ok(JoinReport {
                published: 4,
                consumers: vec![("p".into(), 4)]
            })
        );
    });
}

#[test]
fn poller_reports_halted_after_a_halt() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(8, || 0u64).poller("p").build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        p.publish(1).expect("not halted");
        assert_eq!(poller.poll(|_, _, _| {}), Ok(1));
        ring.halt();
        assert_eq!(
            poller.poll(|_, _, _| panic!("halted")),
            Err(PollError::Halted)
        );
        assert_eq!(
            poller.poll_timeout(WATCHDOG, |_, _, _| panic!("halted")),
            Err(PollError::Halted)
        );
        assert_halted(&mut p);
        assert_halted_join(ring.join(), &[("p", 0)]);
    });
}

/// Regression: after `Ring::halt`, `poll` used to keep handing out events that were
/// published before the halt, while `Ring::halt` says consumers stop and
/// `PollError::Halted` is documented as the answer on a halted ring.
#[test]
fn poller_stops_at_a_halt_even_with_events_pending() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(8, || 0u64).poller("p").build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        p.publish_batch(3, |i, s| *s = i as u64)
            .expect("not halted");
        ring.halt();
        assert_eq!(
            poller.poll(|_, s, _| panic!("handled {s} after the halt")),
            Err(PollError::Halted)
        );
    });
}

#[test]
fn poller_batches_respect_max_batch() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(8, || 0u64)
            .max_batch(2)
            .poller("p")
            .build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        p.publish_batch(5, |i, s| *s = i as u64)
            .expect("not halted");
        let mut batches = Vec::new();
        loop {
            let mut batch = Vec::new();
            match poller.poll(|e, _, eob| batch.push((*e, eob))) {
                Ok(0) => break,
                Ok(n) => {
                    assert_eq!(n, batch.len());
                    batches.push(batch);
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(
            batches,
            vec![
                vec![(0, false), (1, true)],
                vec![(2, false), (3, true)],
                vec![(4, true)],
            ]
        );
        drop(p);
        ring.join().expect("a clean drain");
    });
}

#[test]
fn poll_timeout_waits_for_an_event_or_the_timeout() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(8, || 0u64).poller("p").build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        assert_eq!(
            poller.poll_timeout(Duration::from_millis(5), |_, _, _| {}),
            Ok(0)
        );
        let producer = thread::spawn(move || {
            settle();
            p.publish(42).expect("not halted");
        });
        let mut got = Vec::new();
        assert_eq!(
            poller.poll_timeout(WATCHDOG, |e, s, _| got.push((*e, s))),
            Ok(1)
        );
        assert_eq!(got, vec![(42, 0)]);
        producer.join().expect("producer thread");
        assert_eq!(
            poller.poll_timeout(WATCHDOG, |_, _, _| {}),
            Err(PollError::Closed)
        );
        drop(poller);
        ring.join().expect("a clean drain");
    });
}

#[test]
fn a_dropped_poller_stops_gating_producers_and_dependents() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, mut ring) = RingBuilder::new(4, || 0u64)
            .poller("p")
            .then()
            .handler("h", h)
            .build_single();
        let poller = ring.take_poller("p").expect("declared");
        for i in 0..4 {
            p.publish(i).expect("room");
        }
        assert!(
            matches!(p.try_publish(4), Err(TryPublishError::Full(4))),
            "the poller gates"
        );
        assert_eq!(
            snapshot(&values),
            Vec::<u64>::new(),
            "h waits for the poller"
        );
        drop(poller);
        for i in 4..104 {
            p.publish(i).expect("not halted");
        }
        drop(p);
        let report = ring.join().expect("a clean drain");
        assert_eq!(
            report,
            JoinReport {
                published: 104,
                consumers: vec![("p".into(), 0), ("h".into(), 104)]
            },
            "a detached poller is reported where it stopped"
        );
        assert_eq!(snapshot(&values), (0..104).collect::<Vec<_>>());
    });
}

/// Dropping the last consumer, a poller that gates a producer blocked on a
/// full ring, halts the ring and wakes the producer with its value (the
/// sleeping strategies need the drop to notify).
fn dropping_a_poller_wakes_a_blocked_producer<W: WaitStrategy>(wait: fn() -> W) {
    let (mut p, mut ring) = RingBuilder::new(2, || 0u64)
        .wait_strategy(wait())
        .poller("p")
        .build_single();
    let poller = ring.take_poller("p").expect("declared");
    let monitor = ring.monitor();
    let producer = thread::spawn(move || {
        for i in 0..10 {
            if let Err(e) = p.publish(i) {
                return Some(e);
            }
        }
        None
    });
    wait_for("the ring to fill", || monitor.stats().published == 2);
    settle();
    drop(poller);
    assert_eq!(
        producer.join().expect("producer thread"),
        Some(PublishError::Halted(2)),
        "the blocked producer gets its value back"
    );
    assert_eq!(monitor.stats().published, 2);
    assert_halted_join(ring.join(), &[("p", 2)]);
}
per_wait_strategy!(
    dropped_poller_wakes_blocked_producer,
    super::dropping_a_poller_wakes_a_blocked_producer
);

#[test]
fn join_detaches_pollers_nobody_took() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, ring) = RingBuilder::new(4, || 0u64)
            .poller("untaken")
            .handler("h", h)
            .build_single();
        let producer = thread::spawn(move || {
            for i in 0..100 {
                p.publish(i).expect("not halted");
            }
        });
        // The producer blocks behind the untaken poller until `join`
        // detaches it.
        let report = ring.join().expect("a clean drain");
        producer.join().expect("producer thread");
        assert_eq!(
            report,
            JoinReport {
                published: 100,
                consumers: vec![("untaken".into(), 0), ("h".into(), 100)]
            }
        );
        assert_eq!(snapshot(&values), (0..100).collect::<Vec<_>>());
    });
}

// ---------------------------------------------------------------------------
// Monitoring

/// Three pollers (`a`, `b`, then `c` depending on both) make every point
/// quiescent, so the stats are exact.
fn monitor_at_quiescent_points(multi: bool) {
    let builder = RingBuilder::new(8, || 0u64)
        .poller("a")
        .poller("b")
        .then()
        .poller("c");
    if multi {
        let (p, ring) = builder.build_multi();
        let second = p.clone();
        monitor_at_quiescent_points_with(ring, vec![p, second]);
    } else {
        let (p, ring) = builder.build_single();
        monitor_at_quiescent_points_with(ring, vec![p]);
    }
}

/// Publishes `v` through producer `v % n` (alternating for two handles).
fn publish_round_robin<K: ProducerKind>(
    producers: &mut [Producer<u64, Adaptive, K>],
    v: u64,
) -> Result<u64, PublishError<u64>> {
    let n = producers.len() as u64;
    producers[(v % n) as usize].publish(v)
}

fn monitor_at_quiescent_points_with<K: ProducerKind>(
    mut ring: Ring<u64, Adaptive, K>,
    mut producers: Vec<Producer<u64, Adaptive, K>>,
) {
    let publish = |ps: &mut Vec<Producer<u64, Adaptive, K>>, v: u64| {
        publish_round_robin(ps, v).map(drop).expect("room")
    };
    let mut a = ring.take_poller("a").expect("declared");
    let mut b = ring.take_poller("b").expect("declared");
    let mut c = ring.take_poller("c").expect("declared");
    let monitor = ring.monitor();
    let check =
        |published: u64, fill: u64, handled: [Option<u64>; 3], closed: bool, halted: bool| {
            // Read from another thread: the monitor is for any thread.
            let m = monitor.clone();
            let stats = thread::spawn(move || m.stats())
                .join()
                .expect("monitor thread");
            assert_eq!(stats.capacity, 8);
            assert_eq!(
                (stats.published, stats.fill),
                (published, fill),
                "{stats:?}"
            );
            assert_eq!((stats.closed, stats.halted), (closed, halted), "{stats:?}");
            let got: Vec<(&str, Option<u64>, Option<u64>)> = stats
                .consumers
                .iter()
                .map(|c| {
                    let attached = !c.detached;
                    (
                        c.name.as_str(),
                        attached.then_some(c.handled),
                        attached.then_some(c.lag),
                    )
                })
                .collect();
            let expected: Vec<(&str, Option<u64>, Option<u64>)> = ["a", "b", "c"]
                .iter()
                .zip(handled)
                .map(|(n, h)| (*n, h, h.map(|h| published - h)))
                .collect();
            assert_eq!(got, expected);
        };
    check(0, 0, [Some(0); 3], false, false);
    for v in 0..5 {
        publish(&mut producers, v);
    }
    check(5, 5, [Some(0); 3], false, false);
    assert_eq!(c.poll(|_, _, _| {}), Ok(0), "c waits for a and b");
    assert_eq!(a.poll(|_, _, _| {}), Ok(5));
    check(5, 5, [Some(5), Some(0), Some(0)], false, false);
    assert_eq!(b.poll(|_, _, _| {}), Ok(5));
    assert_eq!(c.poll(|_, _, _| {}), Ok(5));
    check(5, 0, [Some(5); 3], false, false);
    for v in 5..8 {
        publish(&mut producers, v);
    }
    assert_eq!(a.poll(|_, _, _| {}), Ok(3));
    assert_eq!(b.poll(|_, _, _| {}), Ok(3));
    check(8, 3, [Some(8), Some(8), Some(5)], false, false);
    drop(a);
    check(8, 3, [None, Some(8), Some(5)], false, false);
    producers.clear();
    check(8, 3, [None, Some(8), Some(5)], true, false);
    assert_eq!(c.poll(|_, _, _| {}), Ok(3));
    check(8, 0, [None, Some(8), Some(8)], true, false);
    ring.halt();
    check(8, 0, [None, Some(8), Some(8)], true, true);
    drop((b, c));
}

#[test]
fn monitor_stats_are_exact_at_quiescent_points_single_producer() {
    watchdog(|| monitor_at_quiescent_points(false));
}

#[test]
fn monitor_stats_are_exact_at_quiescent_points_multi_producer() {
    watchdog(|| monitor_at_quiescent_points(true));
}

/// When the last consumer leaves a ring that is not drained, nobody is left
/// to consume: the ring halts and producers get their values back instead of
/// publishing into the void; `join` reports what was left.
fn last_detach_halts(multi: bool) {
    let builder = RingBuilder::new(4, || 0u64).poller("p");
    if multi {
        let (p, ring) = builder.build_multi();
        last_detach_halts_with(ring, vec![p]);
    } else {
        let (p, ring) = builder.build_single();
        last_detach_halts_with(ring, vec![p]);
    }
}

fn last_detach_halts_with<K: ProducerKind>(
    mut ring: Ring<u64, Adaptive, K>,
    mut producers: Vec<Producer<u64, Adaptive, K>>,
) {
    let mut publish = |v: u64| publish_round_robin(&mut producers, v);
    for i in 0..3 {
        assert_eq!(publish(i), Ok(i));
    }
    let mut poller = ring.take_poller("p").expect("declared");
    assert_eq!(poller.poll(|_, _, _| {}), Ok(3));
    assert_eq!(publish(3), Ok(3));
    drop(poller);
    assert_eq!(publish(4), Err(PublishError::Halted(4)));
    let stats = ring.monitor().stats();
    assert_eq!(
        (stats.published, stats.fill, stats.halted),
        (4, 1, true),
        "{stats:?}"
    );
    assert!(stats.consumers[0].detached);
    producers.clear();
    assert_halted_join(ring.join(), &[("p", 1)]);
}

#[test]
fn dropping_the_last_consumer_of_an_undrained_ring_halts_it_single() {
    watchdog(|| last_detach_halts(false));
}

#[test]
fn dropping_the_last_consumer_of_an_undrained_ring_halts_it_multi() {
    watchdog(|| last_detach_halts(true));
}

/// A drained, closed ring whose last poller leaves joins cleanly.
#[test]
fn dropping_the_last_poller_of_a_drained_ring_joins_cleanly() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(4, || 0u64).poller("p").build_multi();
        let mut poller = ring.take_poller("p").expect("declared");
        for i in 0..3 {
            p.publish(i).expect("room");
        }
        drop(p);
        assert_eq!(poller.poll(|_, _, _| {}), Ok(3));
        assert_eq!(poller.poll(|_, _, _| {}), Err(PollError::Closed));
        drop(poller);
        let report = ring.join().expect("a clean drain");
        assert_eq!(report.published, 3);
        assert_eq!(report.consumers, vec![("p".to_string(), 3)]);
    });
}

/// Four multi-producer threads fill a ring of capacity 1 with
/// `publish_with`; each slot counts the writers inside it. Returns how many
/// times a writer found another one already there.
fn slot_overlaps(detach_every_consumer: bool) -> u64 {
    #[derive(Default)]
    struct Slot {
        writers: AtomicU64,
    }
    let builder = RingBuilder::new(1, Slot::default);
    let (p, mut ring) = if detach_every_consumer {
        builder.poller("p").build_multi()
    } else {
        builder
            .handler("h", |_: &Slot, _: u64, _: bool| {})
            .build_multi()
    };
    drop(ring.take_poller("p"));
    let overlaps = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut p = p.clone();
            let overlaps = Arc::clone(&overlaps);
            thread::spawn(move || {
                for _ in 0..2_000 {
                    let published = p.publish_with(|slot| {
                        if slot.writers.fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::Relaxed);
                        }
                        thread::yield_now();
                        slot.writers.fetch_sub(1, Ordering::SeqCst);
                    });
                    // With every consumer gone the ring halts; until then
                    // (and after) no two producers may share a slot.
                    if published.is_err() {
                        assert!(detach_every_consumer, "halted with a consumer attached");
                        break;
                    }
                }
            })
        })
        .collect();
    drop(p);
    for t in threads {
        t.join().expect("producer thread");
    }
    let joined = ring.join();
    assert_eq!(joined.is_err(), detach_every_consumer, "{joined:?}");
    overlaps.load(Ordering::Relaxed)
}

#[test]
fn multi_producers_never_share_a_slot() {
    watchdog(|| assert_eq!(slot_overlaps(false), 0, "two producers in one slot at once"));
}

/// Regression (soundness): once every consumer was detached, the gate used to
/// be the multi-producer cursor, which counts *claimed* sequences, so two
/// producers could fill one slot at once. Now where the consumers stopped
/// still gates, and the ring halts.
#[test]
fn multi_producers_never_share_a_slot_when_every_consumer_is_detached() {
    watchdog(|| assert_eq!(slot_overlaps(true), 0, "two producers in one slot at once"));
}

// ---------------------------------------------------------------------------
// Partial publishes

#[test]
fn a_panicking_publish_with_publishes_nothing_on_a_single_producer() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, ring) = RingBuilder::new(4, || 0u64).handler("h", h).build_single();
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            let _ = p.publish_with(|slot| {
                *slot = 99;
                panic!("fill failed");
            });
        }));
        assert!(unwound.is_err());
        assert_eq!(p.publish(1), Ok(0), "the sequence was not used");
        assert_eq!(p.publish(2), Ok(1));
        drop(p);
        assert_eq!(ring.join().expect("a clean drain").published, 2);
        assert_eq!(snapshot(&values), vec![1, 2]);
    });
}

#[test]
fn a_panicking_publish_with_leaves_no_hole_on_a_multi_producer() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, ring) = RingBuilder::new(4, || 0u64).handler("h", h).build_multi();
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            let _ = p.publish_with(|slot| {
                *slot = 99;
                panic!("fill failed");
            });
        }));
        assert!(unwound.is_err());
        assert_eq!(p.publish(1), Ok(1));
        assert_eq!(p.publish(2), Ok(2));
        drop(p);
        assert_eq!(ring.join().expect("a clean drain").published, 3);
        assert_eq!(
            snapshot(&values),
            vec![99, 1, 2],
            "the slot is published as the closure left it"
        );
    });
}

// ---------------------------------------------------------------------------
// Misuse panics

#[test]
#[should_panic(expected = "ring capacity must be a power of two")]
fn capacity_zero_panics() {
    watchdog(|| drop(RingBuilder::new(0, || 0u64)));
}

#[test]
#[should_panic(expected = "ring capacity must be a power of two")]
fn capacity_not_a_power_of_two_panics() {
    watchdog(|| drop(RingBuilder::new(12, || 0u64)));
}

#[test]
#[should_panic(expected = "ring capacity must be a power of two")]
fn capacity_above_the_limit_panics_before_allocating() {
    watchdog(|| drop(RingBuilder::new(1 << 41, || 0u64)));
}

#[test]
fn capacity_one_works() {
    watchdog(|| {
        let (a, b, c) = (Probe::new(), Probe::new(), Probe::new());
        let logs = [a.logs().0, b.logs().0, c.logs().0];
        let (p, ring) = RingBuilder::new(1, || 0u64)
            .handler("a", a)
            .handler("b", b)
            .then()
            .handler("c", c)
            .build_multi();
        let threads: Vec<_> = (0..2u64)
            .map(|id| {
                let mut p = p.clone();
                thread::spawn(move || {
                    for i in 0..50 {
                        p.publish(id * 100 + i).expect("not halted");
                    }
                })
            })
            .collect();
        drop(p);
        for t in threads {
            t.join().expect("producer thread");
        }
        assert_eq!(ring.join().expect("a clean drain").published, 100);
        let first = snapshot(&logs[0]);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..50).chain(100..150).collect::<Vec<_>>());
        for log in &logs[1..] {
            assert_eq!(snapshot(log), first, "every consumer sees the same order");
        }
    });
}

#[test]
#[should_panic(expected = "max_batch must be at least 1")]
fn max_batch_zero_panics() {
    watchdog(|| drop(RingBuilder::new(8, || 0u64).max_batch(0)));
}

#[test]
#[should_panic(expected = "cannot publish 9 events at once into a ring of capacity 8")]
fn publish_batch_larger_than_the_capacity_panics() {
    watchdog(|| {
        let (mut p, _ring) = RingBuilder::new(8, || 0u64)
            .handler("h", |_: &u64, _: u64, _: bool| {})
            .build_single();
        let _ = p.publish_batch(9, |_, _| {});
    });
}

#[test]
#[should_panic(expected = "cannot publish 5 events at once into a ring of capacity 4")]
fn try_publish_batch_larger_than_the_capacity_panics() {
    watchdog(|| {
        let (mut p, _ring) = RingBuilder::new(4, || 0u64)
            .handler("h", |_: &u64, _: u64, _: bool| {})
            .build_multi();
        let _ = p.try_publish_batch(5, |_, _| {});
    });
}

#[test]
fn publish_batch_of_the_whole_capacity_works() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, ring) = RingBuilder::new(4, || 0u64).handler("h", h).build_single();
        for round in 0..5u64 {
            let range = p
                .publish_batch(4, |i, s| *s = round * 4 + i as u64)
                .expect("not halted");
            assert_eq!(range, round * 4..round * 4 + 4);
        }
        drop(p);
        ring.join().expect("a clean drain");
        assert_eq!(snapshot(&values), (0..20).collect::<Vec<_>>());
    });
}

#[test]
#[should_panic(expected = "two consumers are named 'a'")]
fn duplicate_handler_names_panic() {
    watchdog(|| {
        drop(
            RingBuilder::new(8, || 0u64)
                .handler("a", |_: &u64, _: u64, _: bool| {})
                .handler("a", |_: &u64, _: u64, _: bool| {}),
        )
    });
}

#[test]
#[should_panic(expected = "two consumers are named 'a'")]
fn duplicate_names_across_stages_and_kinds_panic() {
    watchdog(|| {
        drop(
            RingBuilder::new(8, || 0u64)
                .poller("a")
                .then()
                .handler_mut("a", |_: &mut u64, _: u64, _: bool| {}),
        )
    });
}

#[test]
#[should_panic(expected = "two consumers are named 'w/1'")]
fn worker_group_names_clash_with_other_consumers() {
    watchdog(|| {
        drop(
            RingBuilder::new(8, || 0u64)
                .handler("w/1", |_: &u64, _: u64, _: bool| {})
                .worker_group("w", 2, |_| |_: &u64, _: u64, _: bool| {}),
        )
    });
}

#[test]
#[should_panic(expected = "a worker group needs at least one member")]
fn an_empty_worker_group_panics() {
    watchdog(|| {
        drop(RingBuilder::new(8, || 0u64).worker_group("w", 0, |_| |_: &u64, _: u64, _: bool| {}))
    });
}

/// The default strategy is `Adaptive` and the builder can say so.
#[test]
fn default_and_explicit_adaptive_behave_alike() {
    watchdog(|| {
        for explicit in [false, true] {
            let h = Probe::new();
            let values = h.logs().0;
            let builder = RingBuilder::new(2, || 0u64);
            let (mut p, ring) = if explicit {
                builder
                    .wait_strategy(Adaptive::default())
                    .handler("h", h)
                    .build_single()
            } else {
                builder.handler("h", h).build_single()
            };
            for i in 0..20 {
                p.publish(i).expect("not halted");
            }
            drop(p);
            ring.join().expect("a clean drain");
            assert_eq!(snapshot(&values), (0..20).collect::<Vec<_>>());
        }
    });
}
