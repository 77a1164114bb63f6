//! Halt releases producers.

use super::*;

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
pub(crate) fn assert_halted<W: WaitStrategy, K: ProducerKind>(p: &mut Producer<u64, W, K>) {
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

pub(crate) fn assert_halted_join(joined: Result<JoinReport, RingError>, unhandled: &[(&str, u64)]) {
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
