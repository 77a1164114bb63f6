//! Drain on close.

use super::*;

/// Every event published before the producer drops is handled by every
/// consumer exactly once, in order, before `join` returns, though one
/// consumer is much slower than the producer and the ring is full most of
/// the time.
fn drain_on_close_single<W: WaitStrategy>(wait: fn() -> W) {
    drain_on_close_sole(wait, RingBuilder::build_single);
}

/// The same with the stamped producer, whose consumers read slot stamps.
fn drain_on_close_stamped<W: WaitStrategy>(wait: fn() -> W) {
    drain_on_close_sole(wait, RingBuilder::build_stamped);
}

fn drain_on_close_sole<W: WaitStrategy, K: SoleProducer>(
    wait: fn() -> W,
    build: impl FnOnce(RingBuilder<u64, W, SharedStage>) -> (Producer<u64, W, K>, Ring<u64, W, K>),
) {
    const N: u64 = 300;
    let fast = Probe::new();
    let slow = Probe::new().slow(50);
    let after = Probe::new();
    let logs = [fast.logs(), slow.logs(), after.logs()];
    let (mut producer, ring) = build(
        RingBuilder::new(4, || 0u64)
            .wait_strategy(wait())
            .handler("fast", fast)
            .handler("slow", slow)
            .then()
            .handler("after", after),
    );
    for i in 0..N {
        let seq = if i % 10 == 9 {
            // Now and then a staged event, published with the next one.
            producer
                .stage_with(|slot| *slot = i * 3)
                .map_err(|_| "halted")
        } else {
            producer.publish(i * 3).map_err(|_| "halted")
        };
        assert_eq!(seq.expect("not halted"), i);
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
per_wait_strategy!(
    drain_on_close_stamped_producer,
    super::drain_on_close_stamped
);

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
