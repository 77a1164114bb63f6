//! Loom models of the ring's synchronisation protocol.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test -p statepipe-ring --test loom --release`
//!
//! The ring's atomics, cells, locks and threads all come from `crate::sync`,
//! which swaps in loom's types under `--cfg loom`, so these models drive the
//! public API unchanged. Slots are loom `UnsafeCell`s: a producer writing a
//! slot a consumer may still read (a broken gate) is reported as a data race.
#![cfg(loom)]

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use statepipe_ring::state::SharedStage;
use statepipe_ring::wait::BusySpin;
use statepipe_ring::{
    PollError, Producer, PublishError, Ring, RingBuilder, RingError, SingleProducer, SoleProducer,
    TryPublishError,
};

/// Runs `f` under loom with room for the waiting loops (each wait is a
/// yield loop under loom, which costs branches). `LOOM_MAX_PREEMPTIONS`
/// bounds the preemptions, as usual.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(f);
}

/// A two-slot single-producer ring whose consumer checks that event `s`
/// holds `s + 1`; `publish` fills it, then the ring must have delivered
/// events `1..=n` exactly once.
fn single_producer_delivers(n: u64, publish: impl Fn(&mut SingleProducer<u64, BusySpin>)) {
    sole_producer_delivers(n, RingBuilder::build_single, publish);
}

/// As `single_producer_delivers`, for a ring that `build` makes.
fn sole_producer_delivers<K: SoleProducer>(
    n: u64,
    build: impl FnOnce(
        RingBuilder<u64, BusySpin, SharedStage>,
    ) -> (Producer<u64, BusySpin, K>, Ring<u64, BusySpin, K>),
    publish: impl Fn(&mut Producer<u64, BusySpin, K>),
) {
    let sum = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&sum);
    let (mut producer, ring) = build(
        RingBuilder::new(2, || 0u64)
            .wait_strategy(BusySpin)
            .handler("sum", move |e: &u64, seq: u64, _eob: bool| {
                assert_eq!(*e, seq + 1, "event {seq} read a stale or torn slot");
                seen.fetch_add(*e, Ordering::Relaxed);
            }),
    );
    publish(&mut producer);
    drop(producer);
    let report = ring.join().unwrap();
    assert_eq!(report.published, n);
    assert_eq!(sum.load(Ordering::Relaxed), n * (n + 1) / 2);
}

/// What a pipeline's barrier injection relies on: a mark the producing
/// thread stores (Relaxed) before it publishes event 2 is visible to the
/// consumer that reads event 2, through the ring's Release publication and
/// Acquire read alone. (`statepipe-pipeline` queues a checkpoint's barrier
/// this way before the sender publishes the next input, and the first
/// station checks the mark before handing each input on.)
#[test]
fn a_mark_stored_before_a_publish_is_seen_with_the_event() {
    model(|| {
        let mark = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let seen = Arc::clone(&mark);
        let (mut producer, ring) = RingBuilder::new(2, || 0u64)
            .wait_strategy(BusySpin)
            .handler("reader", move |e: &u64, _seq: u64, _eob: bool| {
                if *e == 2 {
                    assert!(seen.load(Ordering::Relaxed), "event 2 read before its mark");
                }
            })
            .build_single();
        producer.publish(1).unwrap();
        mark.store(true, Ordering::Relaxed);
        producer.publish(2).unwrap();
        drop(producer);
        ring.join().unwrap();
    });
}

/// One producer, one consumer, three events through two slots: the
/// producer must wait for the consumer before it wraps around.
#[test]
fn single_producer_wraps_around() {
    model(|| {
        single_producer_delivers(3, |producer| {
            for v in 1..=3u64 {
                producer.publish(v).unwrap();
            }
        });
    });
}

/// A batch, then single events, through two slots: the consumer reads the
/// batch by the cursor (a long range under loom), then switches back to
/// following range ends, across wrap-arounds in both ways of reading.
#[test]
fn single_producer_batches_then_singles() {
    model(|| {
        single_producer_delivers(4, |producer| {
            producer
                .publish_batch(2, |i, slot| *slot = i as u64 + 1)
                .unwrap();
            for v in 3..=4u64 {
                producer.publish(v).unwrap();
            }
        });
    });
}

/// Staged events through two slots, each way they get published: by a
/// later publish, in one range with its own event (when the producer saw
/// the ring free) or first on their own (when it saw it full); by a stage
/// that finds the ring full; by dropping the handle. The consumer follows
/// range ends here (ranges shorter than loom's `LONG_RANGE`), so a range
/// end stored at the wrong slot hangs it, and a slot read before its
/// publish is a data race.
#[test]
fn single_producer_stages() {
    model(|| {
        single_producer_delivers(5, |producer| {
            producer.publish(1).unwrap();
            producer.publish(2).unwrap();
            producer.stage_with(|slot| *slot = 3).unwrap();
            producer.publish(4).unwrap();
            producer.stage_with(|slot| *slot = 5).unwrap();
            assert_eq!(producer.staged(), 1);
        });
    });
}

/// The stamped single producer through two slots: single events, a batch
/// and staged events across wrap-arounds. The consumer polls each slot's
/// stamp; a stamp stored before its slot's write (or a stale stamp from the
/// lap before read as current) is a data race or a wrong event.
#[test]
fn stamped_producer_wraps_batches_and_stages() {
    model(|| {
        sole_producer_delivers(5, RingBuilder::build_stamped, |producer| {
            producer.publish(1).unwrap();
            producer
                .publish_batch(2, |i, slot| *slot = i as u64 + 2)
                .unwrap();
            producer.stage_with(|slot| *slot = 4).unwrap();
            producer.stage_with(|slot| *slot = 5).unwrap();
            // 4 is still staged if the consumer had made room for 5, or
            // published if staging 5 found the ring full.
            assert!((1..=2).contains(&producer.staged()));
        });
    });
}

/// Two producers claim and publish concurrently while a poller reads: it
/// must see each event exactly once and never a claimed but unpublished
/// slot (the availability array, not the claim cursor, says what is
/// published).
#[test]
fn multi_producer_claim_and_availability() {
    model(|| {
        let (mut producer, mut ring) = RingBuilder::new(2, || 0u64)
            .wait_strategy(BusySpin)
            .poller("sum")
            .build_multi();
        let mut poller = ring.take_poller("sum").unwrap();
        let mut other = producer.clone();
        let t = loom::thread::spawn(move || {
            other.publish(10).unwrap();
        });
        producer.publish(1).unwrap();
        drop(producer);
        let mut sum = 0;
        loop {
            match poller.poll(|e: &u64, _seq, _eob| {
                assert_ne!(*e, 0, "read a slot before it was published");
                sum += *e;
            }) {
                Ok(0) => loom::thread::yield_now(),
                Ok(_) => {}
                Err(PollError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        t.join().unwrap();
        assert_eq!(sum, 11);
        drop(poller);
        assert_eq!(ring.join().unwrap().published, 2);
    });
}

/// A dependent consumer gates both the producer and itself: `b` reads what
/// the exclusive stage `a` wrote, and the producer must not overwrite the
/// one slot before `b` is done with it.
#[test]
fn dependent_consumer_gates() {
    model(|| {
        let (mut producer, mut ring) = RingBuilder::new(1, || 0u64)
            .wait_strategy(BusySpin)
            .handler_mut("a", |e: &mut u64, _seq: u64, _eob: bool| *e *= 10)
            .then()
            .poller("b")
            .build_single();
        let mut b = ring.take_poller("b").unwrap();
        let mut sum = 0;
        let mut check = |e: &u64, seq: u64, _eob: bool| {
            assert_eq!(*e, (seq + 1) * 10, "b saw event {seq} before a finished it");
            sum += *e;
        };
        producer.publish(1).unwrap();
        // Publish 2 without blocking this thread (it also drives `b`), then
        // close the ring by dropping the producer.
        let mut producer = Some(producer);
        if let Some(p) = producer.as_mut() {
            loop {
                match p.try_publish(2) {
                    Ok(_) => break,
                    Err(TryPublishError::Full(_)) => {}
                    Err(e) => panic!("{e}"),
                }
                match b.poll(&mut check) {
                    Ok(0) => loom::thread::yield_now(),
                    Ok(_) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
        producer.take();
        loop {
            match b.poll(&mut check) {
                Ok(0) => loom::thread::yield_now(),
                Ok(_) => {}
                Err(PollError::Closed) => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(sum, 30);
        drop(b);
        ring.join().unwrap();
    });
}

/// A producer waiting on a full ring is released with its value when the
/// ring is halted from another thread.
#[test]
fn halt_releases_a_producer_waiting_on_a_full_ring() {
    model(|| {
        let (mut producer, mut ring) = RingBuilder::new(1, || 0u64)
            .wait_strategy(BusySpin)
            .poller("never-polled")
            .build_single();
        let poller = ring.take_poller("never-polled").unwrap();
        producer.publish(1).unwrap();
        let ring = Arc::new(ring);
        let halter = Arc::clone(&ring);
        let t = loom::thread::spawn(move || halter.halt());
        // The ring is full: this waits until the halt, then hands 2 back.
        assert_eq!(producer.publish(2), Err(PublishError::Halted(2)));
        t.join().unwrap();
        drop(poller);
        drop(producer);
        let ring = Arc::try_unwrap(ring).unwrap();
        assert!(matches!(ring.join(), Err(RingError::Halted { .. })));
    });
}

/// When the last consumer leaves, two producers racing for one slot must
/// still never write it at once (the slot is a loom cell: overlapping
/// writes are a reported race), and both come back with an answer.
#[test]
fn last_detach_keeps_producers_apart() {
    model(|| {
        let (mut producer, mut ring) = RingBuilder::new(1, || 0u64)
            .wait_strategy(BusySpin)
            .poller("p")
            .build_multi();
        let mut poller = ring.take_poller("p").unwrap();
        let mut other = producer.clone();
        let t = loom::thread::spawn(move || other.publish(2).is_ok());
        // Not `publish`: this thread also drives the poller, so it must not
        // wait for space.
        let mine = producer.try_publish(1).is_ok();
        let _ = poller.poll(|_, _, _| {});
        drop(poller);
        let theirs = t.join().unwrap();
        assert!(mine || theirs, "the one slot was free for one of them");
        drop(producer);
        drop(ring);
    });
}
