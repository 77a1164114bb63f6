//! Pollers.

use super::*;

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

/// A dependent that reads only its dependency's sequence while it has one
/// may stand inside a published range when the dependency detaches; it must
/// still find the rest of that range and everything after it.
#[test]
fn a_dependent_left_inside_a_range_by_a_dropped_poller_reads_on() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, mut ring) = RingBuilder::new(8, || 0u64)
            .max_batch(2)
            .poller("p")
            .then()
            .handler("h", h)
            .build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        p.publish_batch(4, |i, s| *s = i as u64)
            .expect("not halted");
        assert_eq!(poller.poll(|_, _, _| {}), Ok(2), "max_batch splits it");
        while snapshot(&values).len() < 2 {
            std::thread::yield_now();
        }
        drop(poller);
        for i in 4..40 {
            p.publish(i).expect("not halted");
        }
        drop(p);
        ring.join().expect("a clean drain");
        assert_eq!(snapshot(&values), (0..40).collect::<Vec<_>>());
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

#[test]
fn a_mutable_poller_moves_events_out_and_stops_where_told() {
    let (mut producer, mut ring) = RingBuilder::new(4, || None::<String>)
        .poller_mut("owner")
        .build_single();
    assert!(ring.take_poller("nobody").is_none());
    let mut owner = ring.take_poller_mut("owner").expect("declared mutable");
    assert!(!owner.ready());
    for s in ["a", "b", "end", "c"] {
        producer.publish(Some(s.to_string())).unwrap();
    }
    assert!(!producer.has_space(), "four events fill a ring of four");
    assert!(owner.ready());
    // Take a group up to and including "end"; "c" stays for later.
    let mut group = Vec::new();
    let n = owner
        .poll_while(|slot, _| {
            let s = slot.take().unwrap();
            let more = s != "end";
            group.push(s);
            more
        })
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(group, ["a", "b", "end"]);
    assert!(producer.has_space(), "the group's slots are free again");
    let mut rest = Vec::new();
    owner.poll(|slot, _, _| rest.extend(slot.take())).unwrap();
    assert_eq!(rest, ["c"]);
    drop(producer);
    assert_eq!(owner.poll(|_, _, _| {}), Err(PollError::Closed));
    drop(owner);
    ring.join().unwrap();
}

#[test]
fn a_read_only_poller_cannot_be_taken_as_mutable() {
    let (_producer, mut ring) = RingBuilder::new(4, || 0u8).poller("reader").build_single();
    assert!(ring.take_poller_mut("reader").is_none());
    assert!(ring.take_poller("reader").is_some());
}
