//! Monitoring.

use super::*;

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
