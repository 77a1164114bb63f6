//! Stragglers (`straggle.rs`) driven delivery by delivery, without
//! sockets: a stopped worker's frames wait while the others' are
//! delivered, and an operation ends when the scheduler is quiet, as a
//! driver ends it.

use super::{cfg, decoded, model, state, Cluster, SEED};
use crate::engine::{Engine, Local};
use crate::evolve::StateId;
use crate::master::sched::{Batch, Placement, Recovery, SchedConfig};

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
