//! Panicking handlers.

use super::*;

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
