//! The distributed engine against the single-process reference, bit for bit.

mod common;

use common::{stealing, threads, Branchy, Nap, NapInput};
use statepipe_cluster::config::{Recovery, StealVia};
use statepipe_cluster::{Engine, Error, IdMap, Local, MasterConfig, MasterImpl, Outputs, StateId};

const STEPS: usize = if cfg!(debug_assertions) { 6 } else { 12 };

/// Runs `STEPS` steps, every state with input 0 (random children), and
/// returns every step's outputs with children in a canonical order.
/// One step's outputs, sorted by parent.
type Step = Vec<(StateId, Vec<(StateId, (u64, f64))>)>;

fn drive(e: &mut impl Engine<Branchy>) -> Vec<Step> {
    let mut ids = e
        .reset_states((0..40).map(|i| (i, vec![])).collect())
        .unwrap();
    let mut trace = Vec::new();
    for _ in 0..STEPS {
        let out: Outputs<Branchy> = e
            .evolve_many(ids.iter().map(|&i| (i, 0)).collect())
            .unwrap();
        let mut step: Vec<_> = out.into_iter().collect();
        step.sort_by_key(|p| p.0);
        ids = step.iter().flat_map(|p| p.1.iter().map(|c| c.0)).collect();
        ids.truncate(60);
        let keep: std::collections::HashSet<_> = ids.iter().copied().collect();
        let extra: Vec<_> = step
            .iter()
            .flat_map(|p| p.1.iter().map(|c| c.0))
            .filter(|c| !keep.contains(c))
            .collect();
        e.drop_states(&extra).unwrap();
        trace.push(step);
    }
    let fetched = e.fetch_states(&ids).unwrap();
    assert_eq!(fetched.len(), ids.len());
    trace
}

#[test]
fn distributed_equals_local_bit_for_bit_with_stealing_forced() {
    let model = Branchy { max: 3 };
    let reference = drive(&mut Local::new(model.clone(), 11));
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        for n in [1, 2, 7] {
            let mut m = threads(&model, n, stealing(imp, 11));
            assert_eq!(drive(&mut m), reference, "{imp:?} with {n} workers");
            let st = m.stats();
            if n > 1 {
                assert!(
                    st.workers.iter().map(|w| w.steals_in).sum::<u64>() > 0,
                    "no steal happened"
                );
            }
        }
    }
}

#[test]
fn worker_to_worker_steals_and_rebalancing_equal_local_too() {
    let model = Branchy { max: 3 };
    let reference = drive(&mut Local::new(model.clone(), 11));
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        // Dynamic steals, victim to thief directly.
        let mut cfg = stealing(imp, 11);
        cfg.sched.steal_via = StealVia::Peer;
        cfg.sched.recovery = Recovery::Off; // recovery moves states through the master
        let mut m = threads(&model, 3, cfg);
        assert_eq!(drive(&mut m), reference, "{imp:?}, peer steals");
        let st = m.stats();
        let direct: u64 = st.workers.iter().map(|w| w.direct_transfers).sum();
        let all: u64 = st.workers.iter().map(|w| w.transfers).sum();
        assert!(
            all > 0 && direct == all,
            "{direct} of {all} moves went direct"
        );
        // Everything starts on worker 0; the start-of-step rebalance
        // spreads it, through the master and then directly.
        for via in [StealVia::Master, StealVia::Peer] {
            let mut cfg = stealing(imp, 11);
            cfg.sched.rebalance = true;
            cfg.sched.steal_via = via;
            cfg.sched.recovery = Recovery::Off;
            let mut m = threads(&model, 4, cfg);
            assert_eq!(drive(&mut m), reference, "{imp:?}, rebalance via {via:?}");
            let st = m.stats();
            let moved: u64 = st.workers.iter().map(|w| w.rebalanced_states).sum();
            assert!(moved > 0, "{imp:?} {via:?}: the rebalance moved nothing");
            let direct: u64 = st.workers.iter().map(|w| w.direct_transfers).sum();
            assert_eq!(direct > 0, via == StealVia::Peer);
        }
    }
}

#[test]
fn longest_calls_are_spread_first() {
    // Two workers, one state in 20 expensive: the rebalance deals the
    // expensive ones out first, so each worker gets half of them.
    let mut cfg = stealing(MasterImpl::EventLoop, 2);
    cfg.sched.rebalance = true;
    cfg.sched.steal = false;
    let model = Nap;
    let mut m = threads(&model, 2, cfg);
    let ids = m.reset_states((0..40).collect()).unwrap();
    let inputs: IdMap<_> = ids
        .iter()
        .enumerate()
        .map(|(k, &id)| {
            let cost_us = if k % 20 == 0 { 2000 } else { 10 };
            (
                id,
                NapInput {
                    cost_us,
                    children: 1,
                },
            )
        })
        .collect();
    m.evolve_many(inputs).unwrap();
    let st = m.stats();
    // 40 states all on worker 0; the plan moves half the cost to worker 1.
    assert_eq!(st.workers[1].evolved, st.workers[1].rebalanced_states);
    assert!(st.workers[1].rebalanced_states > 0);
    assert_eq!((st.workers[0].evolved, st.workers[1].evolved), (20, 20));
    // A sleep never ends early: each worker slept through one long call.
    let busy: Vec<u64> = st.workers.iter().map(|w| w.busy_ns).collect();
    assert!(busy.iter().all(|&b| b >= 2_000_000), "{busy:?}");
}

#[test]
fn default_config_equals_local_too() {
    let model = Branchy { max: 3 };
    let reference = drive(&mut Local::new(model.clone(), 5));
    let cfg = MasterConfig {
        seed: 5,
        ..Default::default()
    };
    assert_eq!(drive(&mut threads(&model, 3, cfg)), reference);
}

#[test]
fn one_state_with_no_children_and_one_with_fifty() {
    let model = Branchy { max: 0 };
    let mut m = threads(&model, 2, stealing(MasterImpl::EventLoop, 3));
    let ids = m.reset_states(vec![(1, vec![]), (2, vec![])]).unwrap();
    // Input 0 with max 0 draws 0 children; input 50 makes 50.
    let out = m
        .evolve_many(IdMap::from_iter([(ids[0], 0), (ids[1], 50)]))
        .unwrap();
    assert!(out[&ids[0]].is_empty());
    assert_eq!(out[&ids[1]].len(), 50);
    let kids: Vec<StateId> = out[&ids[1]].iter().map(|c| c.0).collect();
    // The parents are gone, the 50 children live and evolve on.
    assert!(matches!(m.fetch_states(&ids[..1]), Err(Error::UnknownStates(v)) if v == ids[..1]));
    let next = m
        .evolve_many(kids.iter().map(|&k| (k, 1)).collect())
        .unwrap();
    assert_eq!(next.values().map(Vec::len).sum::<usize>(), 50);
    let mut local = Local::new(model, 3);
    let lids = local.reset_states(vec![(1, vec![]), (2, vec![])]).unwrap();
    let lout = local
        .evolve_many(IdMap::from_iter([(lids[0], 0), (lids[1], 50)]))
        .unwrap();
    assert_eq!(lout[&lids[1]], out[&ids[1]]);
}

#[test]
fn unknown_ids_are_rejected_before_anything_runs() {
    let mut m = threads(&Branchy { max: 1 }, 2, Default::default());
    let ids = m.reset_states(vec![(1, vec![])]).unwrap();
    let err = m
        .evolve_many(IdMap::from_iter([(ids[0], 1), (StateId(42), 1)]))
        .unwrap_err();
    assert!(
        matches!(err, Error::UnknownStates(ref v) if v == &[StateId(42)]),
        "{err}"
    );
    assert_eq!(
        m.evolve_many(IdMap::from_iter([(ids[0], 1)])).unwrap()[&ids[0]].len(),
        1
    );
}

/// One `evolve_batch` step's record: each parent's count, every child.
type BatchStep = (Vec<u32>, Vec<(StateId, (u64, f64))>);

/// Steps through `evolve_batch`: every state in the order the last step
/// gave them (the in-place path), then a reversed half of them (looked
/// up), then every state left; and the refusals.
fn drive_batch(e: &mut impl Engine<Branchy>) -> Vec<BatchStep> {
    use statepipe_cluster::Children;
    let mut ids = e
        .reset_states((0..40).map(|i| (i, vec![])).collect())
        .unwrap();
    let mut out = Children::new();
    let mut trace = Vec::new();
    let mut record = |out: &Children<Branchy>| -> Vec<StateId> {
        let kids: Vec<_> = out.iter().map(|(id, o)| (id, *o)).collect();
        let ids = kids.iter().map(|k| k.0).collect();
        assert_eq!(out.parents(), out.counts().count());
        assert_eq!(out.len(), kids.len());
        trace.push((out.counts().collect(), kids));
        ids
    };
    for _ in 0..3 {
        let inputs = vec![0u32; ids.len()];
        e.evolve_batch(&ids, &inputs, &mut out).unwrap();
        ids = record(&out);
        ids.truncate(80);
        let all: Vec<_> = out.iter().map(|(id, _)| id).skip(80).collect();
        e.drop_states(&all).unwrap();
    }
    // A reversed half, looked up; the other half waits.
    let (half, rest) = ids.split_at(ids.len() / 2);
    let half: Vec<_> = half.iter().rev().copied().collect();
    e.evolve_batch(&half, &vec![1u32; half.len()], &mut out)
        .unwrap();
    let mut next = record(&out);
    // Refusals change nothing.
    let twice = [rest[0], rest[0]];
    assert!(matches!(
        e.evolve_batch(&twice, &[0, 0], &mut out),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        e.evolve_batch(&[StateId(12345)], &[0], &mut out),
        Err(Error::UnknownStates(u)) if u == vec![StateId(12345)]
    ));
    assert!(matches!(
        e.evolve_batch(&[rest[0]], &[0, 0], &mut out),
        Err(Error::Config(_))
    ));
    next.extend_from_slice(rest);
    e.evolve_batch(&next, &vec![0u32; next.len()], &mut out)
        .unwrap();
    let last = record(&out);
    assert_eq!(e.fetch_states(&last).unwrap().len(), last.len());
    trace
}

#[test]
fn evolve_batch_gives_the_same_children_in_place_looked_up_and_on_workers() {
    let model = Branchy { max: 3 };
    let reference = drive_batch(&mut Local::new(model.clone(), 11));
    // The same steps through `evolve_many`, parent by parent.
    let mut via_many = Local::new(model.clone(), 11);
    let ids = via_many
        .reset_states((0..40).map(|i| (i, vec![])).collect())
        .unwrap();
    let out = via_many
        .evolve_many(ids.iter().map(|&i| (i, 0)).collect())
        .unwrap();
    let first: Vec<_> = ids.iter().flat_map(|p| out[p].clone()).collect();
    assert_eq!(first, reference[0].1);
    for threads_n in [2, 3] {
        let local = Local::new(model.clone(), 11).with_threads(threads_n);
        let mut local = local;
        assert_eq!(drive_batch(&mut local), reference, "{threads_n} threads");
    }
    let mut m = threads(&model, 2, stealing(MasterImpl::EventLoop, 11));
    assert_eq!(drive_batch(&mut m), reference, "on workers");
}
