//! Staged events: invisible until published, never stuck, never lost.

use super::*;

/// Polls everything `poller` can see now.
fn drain(
    poller: &mut statepipe_ring::EventPoller<u64, Adaptive, statepipe_ring::Single>,
) -> Vec<u64> {
    let mut seen = Vec::new();
    while let Ok(n) = poller.poll(|e, _, _| seen.push(*e)) {
        if n == 0 {
            break;
        }
    }
    seen
}

#[test]
fn staged_events_show_at_the_next_publish_and_at_drop() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(8, || 0u64).poller("p").build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        assert_eq!(p.try_stage_with(|s| *s = 1).ok(), Some(0));
        assert_eq!(p.stage_with(|s| *s = 2).ok(), Some(1));
        assert_eq!(p.staged(), 2);
        assert!(
            drain(&mut poller).is_empty(),
            "staged events are not published"
        );
        // A publish takes the staged events along, before its own.
        assert_eq!(p.publish(3), Ok(2));
        assert_eq!(p.staged(), 0);
        assert_eq!(drain(&mut poller), [1, 2, 3]);
        assert_eq!(p.publish_staged(), 3..3, "nothing staged: an empty range");
        p.try_stage_with(|s| *s = 4).expect("room");
        drop(p);
        assert_eq!(drain(&mut poller), [4], "dropping the handle publishes");
        assert_eq!(poller.poll(|_, _, _| {}), Err(PollError::Closed));
        drop(poller);
        assert_eq!(ring.join().expect("a clean drain").published, 4);
    });
}

#[test]
fn a_full_ring_publishes_what_was_staged() {
    watchdog(|| {
        let (mut p, mut ring) = RingBuilder::new(4, || 0u64).poller("p").build_single();
        let mut poller = ring.take_poller("p").expect("declared");
        for v in 0..4 {
            p.try_stage_with(|s| *s = v).expect("room");
        }
        match p.try_stage_with(|s| *s = 9) {
            Err(TryPublishError::Full(_)) => {}
            other => panic!("a full ring: {:?}", other.map_err(|_| "an error")),
        }
        assert_eq!(p.staged(), 0, "finding the ring full published the staged");
        assert_eq!(drain(&mut poller), [0, 1, 2, 3]);
        // The same for a publish that tries.
        for v in 4..8 {
            p.try_stage_with(|s| *s = v).expect("room again");
        }
        assert!(matches!(p.try_publish(9), Err(TryPublishError::Full(9))));
        assert_eq!(drain(&mut poller), [4, 5, 6, 7]);
        drop(p);
        assert_eq!(poller.poll(|_, _, _| {}), Err(PollError::Closed));
    });
}

#[test]
fn a_waiting_stage_publishes_the_staged_before_it_waits() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, ring) = RingBuilder::new(2, || 0u64).handler("h", h).build_single();
        // Five events through two slots, every one staged: each stage that
        // finds the ring full must publish the two before it, or it waits
        // for a consumer that cannot see them.
        for v in 0..5 {
            p.stage_with(|s| *s = v).expect("not halted");
        }
        drop(p);
        assert_eq!(ring.join().expect("a clean drain").published, 5);
        assert_eq!(snapshot(&values), vec![0, 1, 2, 3, 4]);
    });
}

#[test]
fn a_panicking_stage_stages_nothing() {
    watchdog(|| {
        let h = Probe::new();
        let values = h.logs().0;
        let (mut p, ring) = RingBuilder::new(4, || 0u64).handler("h", h).build_single();
        p.try_stage_with(|s| *s = 1).expect("room");
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            let _ = p.try_stage_with(|s| {
                *s = 99;
                panic!("fill failed");
            });
        }));
        assert!(unwound.is_err());
        assert_eq!(p.staged(), 1, "the event staged before stays staged");
        assert_eq!(
            p.try_stage_with(|s| *s = 2).ok(),
            Some(1),
            "the sequence was not used"
        );
        drop(p);
        assert_eq!(ring.join().expect("a clean drain").published, 2);
        assert_eq!(snapshot(&values), vec![1, 2]);
    });
}

#[test]
fn staging_on_a_halted_ring_hands_the_fill_back() {
    watchdog(|| {
        let (mut p, ring) = RingBuilder::new(4, || 0u64)
            .handler("h", |_: &u64, _: u64, _: bool| {})
            .build_single();
        ring.halt();
        assert!(matches!(
            p.try_stage_with(|s| *s = 1),
            Err(TryPublishError::Halted(_))
        ));
        assert!(matches!(
            p.stage_with(|s| *s = 1),
            Err(PublishError::Halted(_))
        ));
        assert_eq!(p.staged(), 0);
        drop(p);
        assert_halted_join(ring.join(), &[("h", 0)]);
    });
}
