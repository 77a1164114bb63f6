//! Partial publishes.

use super::*;

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
