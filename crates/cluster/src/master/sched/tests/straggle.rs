//! Stragglers (`straggle.rs`) driven delivery by delivery, without
//! sockets: a stopped worker's frames wait while the others' are
//! delivered, and an operation ends when the scheduler is quiet, as a
//! driver ends it; and, under proptest, several workers stopped at any
//! moment of a run (perhaps one more lost), against the single-process
//! engine.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::{cfg, decoded, model, state, Cluster, SEED};
use crate::engine::Engine;
use crate::error::Error;
use crate::evolve::StateId;
use crate::local::Local;
use crate::master::sched::straggle::BUDDY_STRAGGLE_FLOOR;
use crate::master::sched::{Batch, Io, Placement, Recovery, SchedConfig};
use crate::protocol::Kind;

/// Delivers the frames of every worker but `stopped`, lowest worker
/// first, until none waits.
fn pump_but(c: &mut Cluster, stopped: usize) {
    while let Some(w) = (0..c.queues.len()).find(|&w| w != stopped && !c.queues[w].is_empty()) {
        c.deliver(w);
    }
}

/// `cfg` with heartbeats every 25 ms and the silence deadline out of
/// reach, so that a slow test host cannot make it the bound that fires.
pub(super) fn heartbeats(mut cfg: SchedConfig) -> SchedConfig {
    cfg.deadlines.heartbeat = Some(Duration::from_millis(25));
    cfg.deadlines.silence = Duration::from_secs(3600);
    cfg
}

/// Six workers of `cfg` and the single-process engine, each with the same
/// eighteen states (placed, and replicated in buddy mode), and their ids.
fn six_with_eighteen(cfg: SchedConfig) -> (Cluster, Local<super::Branchy>, Vec<StateId>) {
    let mut c = Cluster::new(6, cfg);
    let mut local = Local::new(model(), SEED);
    let ids = c.reset(18);
    c.settle();
    local.reset_states((0..18).map(state).collect()).unwrap();
    (c, local, ids)
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

/// A buddy-mode cluster whose silence deadlines never fire in a test, so
/// that only the straggler bound can drop a worker.
fn buddy_cluster(n: usize) -> Cluster {
    let mut cfg = super::chaos::buddy_cfg(2, 1, false, false);
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

/// `Recovery::Buddy`: a worker stopped with its batches in flight is
/// dropped as a straggler once the bound has passed (no silence
/// deadline), its states are promoted on their buddies and evolved there,
/// and the step ends with the single-process engine's bits.
#[test]
fn a_stopped_worker_in_buddy_mode_is_dropped_and_its_work_promoted() {
    let mut c = buddy_cluster(6);
    let mut local = Local::new(model(), SEED);
    let ids = c.reset(18);
    c.settle();
    local.reset_states((0..18).map(state).collect()).unwrap();
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    pump_but(&mut c, 2);
    assert!(!c.queues[2].is_empty(), "worker 2 owes evolves");
    let late = dropped_soon_after(&mut c);
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0].0, 2);
    assert!(late[0].1.contains("straggler"), "{}", late[0].1);
    c.lose(2, &late[0].1);
    finish_step(&mut c, &mut local, 2, &ids);
}

/// A batch counts as evolving only once bulk bytes stop moving on its
/// worker's connection (a large state on its way there, or its children
/// on their way back): past the straggler bound since it was sent, but
/// with a large frame in transit until just before, worker 2 is not a
/// straggler; a bound after the bytes stopped, it is.
#[test]
fn bulk_bytes_in_transit_do_not_count_towards_the_straggler_bound() {
    let mut c = buddy_cluster(6);
    let ids = c.reset(18);
    c.settle();
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    pump_but(&mut c, 2);
    assert!(!c.queues[2].is_empty(), "worker 2 owes evolves");
    let now = Instant::now() + BUDDY_STRAGGLE_FLOOR + Duration::from_millis(200);
    let moved = now - Duration::from_millis(10);
    let bulk = |w: usize| Io {
        bulk: (w == 2).then_some(moved),
        ..Io::default()
    };
    let late = c.sched.overdue(now, &bulk).0;
    assert!(late.is_empty(), "{late:?}");
    let later = moved + BUDDY_STRAGGLE_FLOOR + Duration::from_millis(200);
    let late = c.sched.overdue(later, &bulk).0;
    assert_eq!(
        late.iter().map(|l| l.0).collect::<Vec<_>>(),
        [2],
        "{late:?}"
    );
    assert!(late[0].1.contains("straggler"), "{}", late[0].1);
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
    c.settle();
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
        c.lose(w, &late[0].1);
    }
    finish_step(&mut c, &mut local, 2, &ids);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Workers that stop (their frames wait) at any moment of a step (and
    /// perhaps one more lost) have
    /// their work started again on an idle worker, as the master does for
    /// a batch far past its expected time; they wake a few deliveries into
    /// the next operation, and their late answers lose. Every step gives
    /// the single-process engine's bits, and in the end every worker holds
    /// exactly the states the books place on it.
    #[test]
    fn stragglers_started_again_elsewhere_change_no_bit(
        n in 2usize..6,
        states in 1u64..24,
        batch in 1usize..4,
        steal in any::<bool>(),
        stops in prop::collection::vec((0usize..6, 0usize..16, 0usize..3), 1..4),
        wake_after in 0usize..12,
        kill in prop::option::of((0usize..6, 0usize..16, 0usize..3)),
        picks in prop::collection::vec(any::<usize>(), 64),
    ) {
        stragglers(n, states, batch, steal, &stops, wake_after, kill, &picks)?;
    }
}

/// One case of `stragglers_started_again_elsewhere_change_no_bit`: `n`
/// workers, `states` states, batches of `batch`; each of `stops` stops
/// worker `.0` at delivery `.1` of step `.2`, all wake `wake_after`
/// deliveries into each operation (or when nothing else can move);
/// `kill` loses a worker likewise; `picks` orders the deliveries.
#[allow(clippy::too_many_arguments)]
fn stragglers(
    n: usize,
    states: u64,
    batch: usize,
    steal: bool,
    stops: &[(usize, usize, usize)],
    wake_after: usize,
    kill: Option<(usize, usize, usize)>,
    picks: &[usize],
) -> Result<(), TestCaseError> {
    let cfg = SchedConfig {
        batch: Batch::Fixed(batch),
        pipeline: 2,
        recovery: Recovery::MasterCopy,
        ..cfg(Placement::Spread, true, steal)
    };
    let mut c = Cluster::new(n, cfg);
    let mut local = Local::new(model(), SEED);
    let mut ids = c.reset(states);
    local
        .reset_states((0..states).map(state).collect())
        .unwrap();
    let mut stopped = vec![false; n];
    let mut k = 0usize;
    let mut may_fail = false;
    let mut pump = |c: &mut Cluster,
                    stopped: &mut Vec<bool>,
                    may_fail: &mut bool,
                    step: usize,
                    until_quiet: bool| {
        let mut delivered = 0usize;
        let mut applied = vec![false; stops.len()];
        loop {
            if delivered == wake_after {
                stopped.iter_mut().for_each(|s| *s = false);
            }
            if let Some((w, at, s)) = kill {
                if s == step && at == delivered && c.alive[w % n] {
                    let w = w % n;
                    // Only the last worker's loss fails the step; one
                    // while every other is a straggler, or behind on
                    // evolves finished elsewhere, waits (`can_recover`).
                    *may_fail |= (0..n).all(|v| v == w || !c.alive[v]);
                    c.alive[w] = false;
                    c.queues[w].clear();
                    stopped[w] = false;
                    c.sched.on_disconnect(w, "chaos: killed");
                    c.collect();
                }
            }
            for (j, &(w, at, s)) in stops.iter().enumerate() {
                if s == step && at == delivered && !applied[j] {
                    applied[j] = true;
                    stopped[w % n] = true;
                }
            }
            // What `overdue` does for a batch far past its time, or a
            // worker fallen silent.
            for (w, &stop) in stopped.iter().enumerate() {
                if stop && c.alive[w] && c.sched.slots[w].fenced == 0 && c.sched.speculate(w) {
                    c.collect();
                }
            }
            let ready: Vec<usize> = (0..n)
                .filter(|&w| !stopped[w] && !c.queues[w].is_empty())
                .collect();
            if ready.is_empty() {
                if until_quiet && c.sched.is_quiet() {
                    break;
                }
                if !stopped.iter().any(|s| *s) {
                    break;
                }
                // Nothing else can move: wake them.
                stopped.iter_mut().for_each(|s| *s = false);
                continue;
            }
            k += 1;
            c.deliver(ready[picks[k % picks.len()] % ready.len()]);
            delivered += 1;
        }
    };
    for step in 0..3 {
        if ids.is_empty() {
            break;
        }
        let inputs: Vec<_> = ids.iter().map(|&id| (id, 0u32, 1.0)).collect();
        c.begin(&inputs);
        pump(&mut c, &mut stopped, &mut may_fail, step, true);
        let got = match c.sched.finish_evolve() {
            Ok(r) => decoded(r),
            Err(Error::WorkerLost(_)) if may_fail => return Ok(()),
            Err(e) => panic!("{e}"),
        };
        let want = local
            .evolve_many(inputs.iter().map(|x| (x.0, x.1)).collect())
            .unwrap();
        prop_assert_eq!(&got, &want);
        ids = got.values().flatten().map(|x| x.0).collect();
        ids.sort_unstable();
    }
    let want = local.fetch_states(&ids).unwrap();
    c.sched.begin_fetch(&ids).unwrap();
    c.collect();
    stopped.iter_mut().for_each(|s| *s = false);
    pump(&mut c, &mut stopped, &mut may_fail, usize::MAX, false);
    prop_assert_eq!(c.fetched(), want);
    // No stale copy left anywhere.
    let held = c.held();
    for w in (0..n).filter(|&w| c.alive[w]) {
        let mut on: Vec<StateId> = c.cores[w].held_states().into_iter().map(|s| s.0).collect();
        on.sort_unstable();
        let mut books: Vec<StateId> = held.iter().filter(|e| *e.1 == w).map(|e| *e.0).collect();
        books.sort_unstable();
        prop_assert_eq!(on, books, "worker {}", w);
    }
    Ok(())
}

/// A case proptest found: worker 2 straggles and its batch starts again,
/// one state of it on worker 0; worker 0 then stops too, so that copy is
/// fenced and starts again on worker 1, which is lost. The copy on worker
/// 0 is fenced like worker 2's first evolve: the state is started again
/// (or its stragglers waited for) rather than the step ending quiet with
/// it never evolved.
#[test]
fn a_straggling_copy_does_not_count_when_the_running_copy_is_lost() {
    let mut picks = vec![0; 64];
    for (k, p) in [
        (8, 10983392719876081772),
        (9, 2304208785132632261),
        (10, 6629597324183067471),
        (11, 1295287092629758912),
        (12, 402941743616345000),
        (14, 12),
        (15, 767564471744464999),
        (17, 5452866015804150236),
        (18, 10559681384036778350),
        (20, 169770396),
        (34, 19512068),
        (35, 200614488143969581),
        (37, 241588),
        (39, 5216819303005),
        (44, 14989),
        (49, 1575530249),
    ] {
        picks[k] = p;
    }
    let stops = [(2, 9, 1), (0, 8, 1)];
    stragglers(4, 15, 3, false, &stops, 0, Some((1, 12, 1)), &picks).unwrap();
}

/// A case proptest found: worker 2 stops and its batches start again on
/// worker 3, where worker 0 steals two of the copies while they wait;
/// worker 2 answers first. The copies stay where they were started
/// (`steal_for`), so they are dropped there, and no parent evolved
/// already is booked on the thief.
#[test]
fn a_copy_started_again_is_not_stolen_from_where_it_waits() {
    let mut picks = vec![0; 64];
    for (k, p) in [
        (8, 4291),
        (10, 12925163659624642002),
        (11, 84729783456962883),
        (12, 5461583876295136849),
        (13, 5075032100855658733),
        (23, 210302715065604),
    ] {
        picks[k] = p;
    }
    stragglers(5, 14, 2, true, &[(2, 0, 1)], 8, Some((1, 0, 1)), &picks).unwrap();
}

/// `Recovery::Buddy` with heartbeats: a worker that stops in the
/// replication round after an evolve, owing its `Shipped`, is dropped
/// once silent for twice `quiet` (the silence deadline is set out of
/// reach, so that a slow test host cannot make it the one that fires);
/// its states are promoted on their buddies, the evolves it ran are run
/// again there, and the step ends with the single-process engine's bits.
#[test]
fn a_worker_stopped_in_the_round_after_an_evolve_is_dropped() {
    let cfg = heartbeats(super::chaos::buddy_cfg(2, 1, false, false));
    let (mut c, mut local, ids) = six_with_eighteen(cfg);
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    // Every worker beats once (as its heartbeat thread does), then the
    // step's evolves all come back.
    for w in 0..6 {
        c.sched.on_frame(w, Kind::Heartbeat, &[]).unwrap();
    }
    while let Some(w) = (0..6).find(|&w| !c.queues[w].is_empty()) {
        c.deliver(w);
    }
    assert!(c.sched.begin_replicate(), "a round starts after the evolve");
    c.collect();
    pump_but(&mut c, 2);
    assert!(!c.queues[2].is_empty(), "worker 2 owes its Shipped");
    assert!(
        c.sched
            .overdue(Instant::now(), &|_| Io::default())
            .0
            .is_empty(),
        "nobody is dropped at once"
    );
    // The others go on beating (their buddies 3 and 4 owe a `Held` for 2's
    // replica, which 2 never sent): checked every 10 ms, someone is
    // dropped once past twice `quiet` (longer if the test thread paused:
    // the bound follows the longest gap between heartbeats lately).
    let start = Instant::now();
    let late = loop {
        std::thread::sleep(Duration::from_millis(10));
        for w in (0..6).filter(|&w| w != 2) {
            c.sched.on_frame(w, Kind::Heartbeat, &[]).unwrap();
        }
        let late = c.sched.overdue(Instant::now(), &|_| Io::default()).0;
        if !late.is_empty() || start.elapsed() > Duration::from_secs(60) {
            break late;
        }
    };
    assert_eq!(
        late.iter().map(|l| l.0).collect::<Vec<_>>(),
        [2],
        "{late:?}"
    );
    assert!(late[0].1.contains("taken for stopped"), "{}", late[0].1);
    c.lose(2, &late[0].1);
    finish_step(&mut c, &mut local, 2, &ids);
}

/// `Recovery::Buddy` with heartbeats: a worker owing evolves whose frames
/// stopped coming is not taken for stopped while bytes still arrive from
/// it (a large frame on its way, its heartbeats queued behind), and is
/// once they stop too.
#[test]
fn bytes_arriving_from_a_buddy_worker_are_not_silence() {
    let cfg = heartbeats(super::chaos::buddy_cfg(2, 1, false, false));
    let quiet = cfg.deadlines.quiet().unwrap();
    let mut c = Cluster::new(6, cfg);
    let ids = c.reset(18);
    c.settle();
    // Calls taken as ten seconds each: the straggler bound (a multiple of
    // a batch's expected time) is out of reach, so only silence counts.
    c.sched.ns_per_cost = Some(1e10);
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    for w in 0..6 {
        c.sched.on_frame(w, Kind::Heartbeat, &[]).unwrap();
    }
    let beat = Instant::now();
    pump_but(&mut c, 2);
    assert!(!c.queues[2].is_empty(), "worker 2 owes evolves");
    // Past twice `quiet` since its last frame, with bytes read from it
    // just before, then with none since that frame.
    let now = beat + quiet * 2 + Duration::from_millis(50);
    let reading = |w: usize| Io {
        read: (w == 2).then_some(now - Duration::from_millis(10)),
        any: None,
        bulk: None,
    };
    assert!(c.sched.overdue(now, &reading).0.is_empty());
    let late = c.sched.overdue(now, &|_| Io::default()).0;
    assert_eq!(
        late.iter().map(|l| l.0).collect::<Vec<_>>(),
        [2],
        "{late:?}"
    );
    assert!(late[0].1.contains("taken for stopped"), "{}", late[0].1);
}

/// Six workers' config in `recovery` mode (buddy mode with two replicas).
pub(super) fn recovering(recovery: Recovery) -> SchedConfig {
    match recovery {
        Recovery::Buddy => super::chaos::buddy_cfg(2, 1, false, false),
        _ => SchedConfig {
            recovery,
            ..cfg(Placement::Spread, false, false)
        },
    }
}

/// A worker stopped while it owes a fetch, in either recovery mode with
/// heartbeats: once silent for twice `quiet` (the silence deadline set
/// out of reach, and the time passed to `overdue`, so that a slow test
/// host cannot make anything else fire), it is dropped as stopped, and
/// the fetch gives the single-process engine's states: from the master's
/// copies, or from the replicas promoted on its buddies.
fn a_worker_stopped_owing_a_fetch_is_dropped(recovery: Recovery) {
    let cfg = heartbeats(recovering(recovery));
    let quiet = cfg.deadlines.quiet().unwrap();
    let (mut c, mut local, ids) = six_with_eighteen(cfg);
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    finish_step(&mut c, &mut local, usize::MAX, &ids);
    c.settle();
    let mut ids: Vec<StateId> = c.held().into_keys().collect();
    ids.sort_unstable();
    let want = local.fetch_states(&ids).unwrap();
    c.sched.begin_fetch(&ids).unwrap();
    c.collect();
    for w in 0..6 {
        c.sched.on_frame(w, Kind::Heartbeat, &[]).unwrap();
    }
    let beat = Instant::now();
    pump_but(&mut c, 2);
    assert!(!c.queues[2].is_empty(), "worker 2 owes its Fetched");
    assert!(c.sched.overdue(beat, &|_| Io::default()).0.is_empty());
    let late = c
        .sched
        .overdue(beat + quiet * 2 + Duration::from_millis(50), &|_| {
            Io::default()
        })
        .0;
    assert_eq!(
        late.iter().map(|l| l.0).collect::<Vec<_>>(),
        [2],
        "{late:?}"
    );
    c.lose(2, &late[0].1);
    pump_but(&mut c, 2);
    assert_eq!(c.fetched(), want);
}

#[test]
fn a_worker_stopped_owing_a_fetch_is_dropped_with_master_copies() {
    a_worker_stopped_owing_a_fetch_is_dropped(Recovery::MasterCopy);
}

#[test]
fn a_worker_stopped_owing_a_fetch_is_dropped_in_buddy_mode() {
    a_worker_stopped_owing_a_fetch_is_dropped(Recovery::Buddy);
}

/// A worker stopped in a reset (owing its `Drop` and `Add`), or, in buddy
/// mode, in the replication round after one (owing its `Shipped`), with
/// heartbeats: once silent for twice `quiet` (the silence deadline out of
/// reach, the time passed to `overdue`), it is dropped as stopped, its
/// new states are placed again from the reset's bytes, and the next step
/// has the single-process engine's bits.
fn a_worker_stopped_in_a_reset_is_dropped(recovery: Recovery, in_round: bool) {
    let cfg = heartbeats(recovering(recovery));
    let quiet = cfg.deadlines.quiet().unwrap();
    let (mut c, mut local, _) = six_with_eighteen(cfg);
    let states = (100..112).map(|i| crate::registry::encode(&state(i)).unwrap());
    let ids = c.sched.begin_reset(states.collect()).unwrap();
    local.reset_states((100..112).map(state).collect()).unwrap();
    c.collect();
    if in_round {
        pump_but(&mut c, usize::MAX);
        c.sched.finish().unwrap();
        assert!(c.sched.begin_replicate(), "a round starts after the reset");
        c.collect();
    }
    for w in 0..6 {
        c.sched.on_frame(w, Kind::Heartbeat, &[]).unwrap();
    }
    let beat = Instant::now();
    pump_but(&mut c, 2);
    assert!(!c.queues[2].is_empty(), "worker 2 owes an answer");
    assert!(c.sched.overdue(beat, &|_| Io::default()).0.is_empty());
    // The others are heard from until then (their buddies owe a `Held`
    // for 2's replica in the round, which 2 never ships).
    let now = beat + quiet * 2 + Duration::from_millis(50);
    let others = |w: usize| Io {
        read: (w != 2).then_some(now),
        any: None,
        bulk: None,
    };
    let late = c.sched.overdue(now, &others).0;
    assert_eq!(
        late.iter().map(|l| l.0).collect::<Vec<_>>(),
        [2],
        "{late:?}"
    );
    let owed = if in_round {
        "replication round"
    } else {
        "a drop"
    };
    assert!(late[0].1.contains(owed), "{}", late[0].1);
    c.lose(2, &late[0].1);
    pump_but(&mut c, 2);
    assert!(c.sched.is_quiet());
    c.sched.finish().unwrap();
    c.settle();
    let held = c.held();
    assert!(ids.iter().all(|id| held.get(id).is_some_and(|&w| w != 2)));
    c.begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
    finish_step(&mut c, &mut local, usize::MAX, &ids);
}

#[test]
fn a_worker_stopped_in_a_reset_is_dropped_with_master_copies() {
    a_worker_stopped_in_a_reset_is_dropped(Recovery::MasterCopy, false);
}

#[test]
fn a_worker_stopped_in_a_reset_is_dropped_in_buddy_mode() {
    a_worker_stopped_in_a_reset_is_dropped(Recovery::Buddy, false);
}

#[test]
fn a_worker_stopped_in_the_round_after_a_reset_is_dropped() {
    a_worker_stopped_in_a_reset_is_dropped(Recovery::Buddy, true);
}
