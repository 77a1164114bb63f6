//! Stragglers (`straggle.rs`) driven delivery by delivery, without
//! sockets: a stopped worker's frames wait while the others' are
//! delivered, and an operation ends when the scheduler is quiet, as a
//! driver ends it.

use std::time::{Duration, Instant};

use super::{cfg, decoded, model, state, Cluster, SEED};
use crate::engine::Engine;
use crate::evolve::StateId;
use crate::local::Local;
use crate::master::sched::straggle::BUDDY_STRAGGLE_FLOOR;
use crate::master::sched::{Batch, Io, Placement, Recovery, SchedConfig};

/// Delivers the frames of every worker but `stopped`, lowest worker
/// first, until none waits.
fn pump_but(c: &mut Cluster, stopped: usize) {
    while let Some(w) = (0..c.queues.len()).find(|&w| w != stopped && !c.queues[w].is_empty()) {
        c.deliver(w);
    }
}

/// Runs the step started on `c` to quiet with `stopped` stopped (woken
/// only while the step waits for it) and checks it against `local`.
fn finish_step(
    c: &mut Cluster,
    local: &mut Local<super::Branchy>,
    stopped: usize,
    ids: &[StateId],
) -> Vec<StateId> {
    loop {
        pump_but(c, stopped);
        if c.sched.is_quiet() {
            break;
        }
        c.deliver(stopped);
    }
    let got = decoded(c.sched.finish_evolve().unwrap());
    let want = local
        .evolve_many(ids.iter().map(|&id| (id, 0)).collect())
        .unwrap();
    assert_eq!(got, want, "other bits than the single-process engine");
    let mut next: Vec<StateId> = got.values().flatten().map(|x| x.0).collect();
    next.sort_unstable();
    next
}

/// Worker 0 straggles in one step and is still behind when the next
/// starts, whose rebalance moves a state from worker 1 to worker 2; worker
/// 0 then answers (late) and is idle, and worker 1 stops. Starting worker
/// 1's work again lands its move from the copies, which releases every
/// worker's first batch: worker 1's states must be fenced or gone by
/// then, not stolen by worker 0 with a `Remove` nobody waits for (the step
/// would end quiet with them never evolved).
#[test]
fn landing_a_stragglers_move_lets_nobody_steal_from_it() {
    let cfg = SchedConfig {
        batch: Batch::Fixed(2),
        pipeline: 2,
        recovery: Recovery::MasterCopy,
        ..cfg(Placement::Spread, true, true)
    };
    let mut c = Cluster::new(3, cfg);
    let mut local = Local::new(model(), SEED);
    let ids = c.reset(12);
    local.reset_states((0..12).map(state).collect()).unwrap();
    // Step 1: worker 0 stops with all its states in flight (two batches
    // of two).
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    pump_but(&mut c, 0);
    assert!(c.sched.speculate(0));
    c.collect();
    let ids = finish_step(&mut c, &mut local, 0, &ids);
    assert!(c.sched.slots[0].fenced > 0, "worker 0 is still behind");
    // Step 2: three expensive states on worker 1, one of which the
    // rebalance moves to worker 2 (worker 0 straggles: it takes none).
    let held = c.held();
    let on_1: Vec<StateId> = ids.iter().copied().filter(|id| held[id] == 1).collect();
    assert!(on_1.len() >= 3);
    let inputs: Vec<_> = ids
        .iter()
        .map(|id| (*id, 0u32, if on_1[..3].contains(id) { 1e9 } else { 0.0 }))
        .collect();
    c.begin(&inputs);
    assert_eq!(c.sched.holding, 1, "one planned move, from worker 1");
    // Worker 0's late answers: it is idle now, and worker 1 stops.
    while !c.queues[0].is_empty() {
        c.deliver(0);
    }
    assert!(c.sched.speculate(1));
    c.collect();
    finish_step(&mut c, &mut local, 1, &ids);
}

/// Delivers until nothing waits, then runs replication rounds (as
/// `Master::settle` does) until none starts.
fn settle(c: &mut Cluster) {
    loop {
        while let Some(w) = (0..c.queues.len()).find(|&w| !c.queues[w].is_empty()) {
            c.deliver(w);
        }
        if !c.sched.begin_replicate() {
            break;
        }
        c.collect();
    }
}

/// A buddy-mode cluster whose silence deadlines never fire in a test, so
/// that only the straggler bound can drop a worker.
fn buddy_cluster(n: usize) -> Cluster {
    let mut cfg = SchedConfig {
        batch: Batch::Fixed(1),
        pipeline: 2,
        recovery: Recovery::Buddy,
        replicas: 2,
        ..cfg(Placement::Spread, false, false)
    };
    cfg.deadlines.heartbeat = None;
    cfg.deadlines.floor = Duration::from_secs(3600);
    cfg.deadlines.unmeasured = Duration::from_secs(3600);
    Cluster::new(n, cfg)
}

/// Who `overdue` drops a little past the buddy straggler bound (the
/// batches here take microseconds, so the floor is the bound).
fn dropped_soon_after(c: &mut Cluster) -> Vec<(usize, String)> {
    let now = Instant::now() + BUDDY_STRAGGLE_FLOOR + Duration::from_millis(200);
    c.sched.overdue(now, &|_| Io::default()).0
}

/// What the driver does with a worker `overdue` names: closes its
/// connection (its frames never arrive) and tells the scheduler.
fn drop_worker(c: &mut Cluster, w: usize, reason: &str) {
    c.alive[w] = false;
    c.queues[w].clear();
    c.sched.on_disconnect(w, reason);
    c.collect();
}

/// `Recovery::Buddy`: a worker stopped with its batches in flight is
/// dropped as a straggler once the bound has passed (no silence
/// deadline), its states are promoted on their buddies and evolved there,
/// and the step ends with the single-process engine's bits.
#[test]
fn a_stopped_worker_in_buddy_mode_is_dropped_and_its_work_promoted() {
    let mut c = buddy_cluster(6);
    let mut local = Local::new(model(), SEED);
    let ids = c.reset(18);
    settle(&mut c);
    local.reset_states((0..18).map(state).collect()).unwrap();
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    pump_but(&mut c, 2);
    assert!(!c.queues[2].is_empty(), "worker 2 owes evolves");
    let late = dropped_soon_after(&mut c);
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0].0, 2);
    assert!(late[0].1.contains("straggler"), "{}", late[0].1);
    drop_worker(&mut c, 2, &late[0].1);
    finish_step(&mut c, &mut local, 2, &ids);
}

/// Two neighbours stop (worker 2 and its first buddy, 3): 2 is not
/// dropped while the holder of its replicas straggles, 3 is (its buddies
/// 4 and 5 are well); once 3 is gone, 2's replicas are on 4, and 2 is
/// dropped in turn. The step ends with the single-process engine's bits.
#[test]
fn neighbours_that_straggle_together_are_dropped_one_at_a_time() {
    let mut c = buddy_cluster(6);
    let mut local = Local::new(model(), SEED);
    let ids = c.reset(18);
    settle(&mut c);
    local.reset_states((0..18).map(state).collect()).unwrap();
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    let stopped = |w: usize| w == 2 || w == 3;
    for w in [3, 2] {
        // The others answer everything (work promoted onto them too).
        while let Some(w) = (0..c.queues.len()).find(|&w| !stopped(w) && !c.queues[w].is_empty()) {
            c.deliver(w);
        }
        let late = dropped_soon_after(&mut c);
        let got: Vec<usize> = late.iter().map(|l| l.0).collect();
        assert_eq!(got, [w], "{late:?}");
        drop_worker(&mut c, w, &late[0].1);
    }
    finish_step(&mut c, &mut local, 2, &ids);
}
