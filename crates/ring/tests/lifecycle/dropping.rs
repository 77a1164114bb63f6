//! Dropping the ring.

use super::*;

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
