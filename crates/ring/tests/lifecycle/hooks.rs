//! Hooks and timeouts.

use super::*;

#[test]
fn hooks_run_around_the_events_of_every_kind_of_handler() {
    watchdog(|| {
        let h = Probe::new();
        let m = Probe::new();
        let (hh, mh) = (h.logs().1, m.logs().1);
        let mut group_hooks = Vec::new();
        let (mut p, ring) = RingBuilder::new(4, || 0u64)
            .handler("h", h)
            .then()
            .handler_mut("m", m)
            .then()
            .worker_group("w", 2, |_| {
                let probe = Probe::new();
                group_hooks.push(probe.logs().1);
                probe
            })
            .build_single();
        for i in 0..10 {
            p.publish(i).expect("not halted");
        }
        drop(p);
        ring.join().expect("a clean drain");
        assert_hooks("h", &hh, 0..10, true);
        assert_hooks("m", &mh, 0..10, true);
        assert_hooks("w/0", &group_hooks[0], (0..10).step_by(2), true);
        assert_hooks("w/1", &group_hooks[1], (1..10).step_by(2), true);
    });
}

#[test]
fn on_shutdown_runs_after_a_halt() {
    watchdog(|| {
        let h = Probe::new();
        let hooks = h.logs().1;
        let (p, ring) = RingBuilder::new(4, || 0u64).handler("h", h).build_single();
        ring.halt();
        assert_halted_join(ring.join(), &[("h", 0)]);
        assert_hooks("h", &hooks, [], true);
        drop(p);
    });
}

/// Records the sequences `on_timeout` was called with.
struct TimeoutProbe {
    timeouts: Log<u64>,
    values: Log<u64>,
}

impl TimeoutProbe {
    fn new() -> (Self, Log<u64>, Log<u64>) {
        let (timeouts, values) = (new_log(), new_log());
        let probe = Self {
            timeouts: Arc::clone(&timeouts),
            values: Arc::clone(&values),
        };
        (probe, timeouts, values)
    }
}

impl EventHandler<u64> for TimeoutProbe {
    fn on_event(&mut self, event: &u64, _: u64, _: bool) {
        push(&self.values, *event);
    }
    fn on_timeout(&mut self, next_sequence: u64) {
        push(&self.timeouts, next_sequence);
    }
}

impl EventHandlerMut<u64> for TimeoutProbe {
    fn on_event(&mut self, event: &mut u64, _: u64, _: bool) {
        push(&self.values, *event);
    }
    fn on_timeout(&mut self, next_sequence: u64) {
        push(&self.timeouts, next_sequence);
    }
}

#[test]
fn blocking_with_timeout_calls_on_timeout_with_the_next_sequence() {
    watchdog(|| {
        let (m, m_timeouts, m_values) = TimeoutProbe::new();
        let (h, h_timeouts, h_values) = TimeoutProbe::new();
        let (mut p, ring) = RingBuilder::new(8, || 0u64)
            .wait_strategy(Blocking::with_timeout(Duration::from_millis(2)))
            .handler_mut("m", m)
            .then()
            .handler("h", h)
            .build_single();
        // One range at once, so each consumer is only ever at 0 or 3.
        p.publish_batch(3, |i, s| *s = i as u64)
            .expect("not halted");
        wait_for("m to time out after the batch", || {
            snapshot(&m_timeouts).contains(&3)
        });
        wait_for("h to time out after the batch", || {
            snapshot(&h_timeouts).contains(&3)
        });
        drop(p);
        ring.join().expect("a clean drain");
        for (name, timeouts, values) in [("m", m_timeouts, m_values), ("h", h_timeouts, h_values)] {
            let timeouts = snapshot(&timeouts);
            assert!(
                timeouts.iter().all(|&s| s == 0 || s == 3),
                "{name}: {timeouts:?}"
            );
            assert_eq!(snapshot(&values), vec![0, 1, 2], "{name}");
        }
    });
}

#[test]
fn strategies_without_a_consumer_timeout_never_call_on_timeout() {
    watchdog(|| {
        let (h, timeouts, _) = TimeoutProbe::new();
        let (p, ring) = RingBuilder::new(8, || 0u64)
            .wait_strategy(Blocking::new())
            .handler("h", h)
            .build_single();
        settle();
        drop(p);
        ring.join().expect("a clean drain");
        assert_eq!(snapshot(&timeouts), Vec::<u64>::new());
    });
}
