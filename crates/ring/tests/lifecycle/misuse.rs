//! Misuse panics.

use super::*;

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
