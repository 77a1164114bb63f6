//! Chaos schedules for `Recovery::Buddy`, without sockets: several workers
//! lost at chosen deliveries of a whole run (the reset and its round, each
//! step's evolves, moves, promotions, replication rounds and commits, the
//! final fetch), each run checked against the single-process engine bit
//! for bit. A run that loses at most `replicas` workers always leaves a
//! copy of every state and must end identical; one that loses more either
//! ends identical (the losses spared a copy) or fails with
//! `WorkerLost`, never with anything else and never with other bits.

use std::collections::HashMap;

use proptest::prelude::*;

use super::{cfg, decoded, model, state, Cluster, SEED};
use crate::engine::{Engine, Local};
use crate::error::Error;
use crate::evolve::{Evolve, StateId};
use crate::master::sched::{Batch, Placement, Recovery, SchedConfig};
use crate::registry::decode;

/// Runs a reset, `steps` steps and a fetch on `c`, losing `kills[k].0`
/// just before the `kills[k].1`-th delivery of the run (counted over every
/// operation and round). Returns the first error, or `Ok` once every
/// step and the fetch matched `local`.
fn run(
    c: &mut Cluster,
    local: &mut Local<super::Branchy>,
    n_states: u64,
    steps: usize,
    kills: &[(usize, usize)],
    picks: &[usize],
) -> Result<(), Error> {
    let mut delivered = 0usize;
    let mut k = 0usize;
    // Delivers until nothing waits, losing workers on schedule; then the
    // replication rounds the way `Master::settle` runs them.
    let mut settle = |c: &mut Cluster| {
        loop {
            loop {
                for &(w, at) in kills {
                    if at <= delivered && c.alive[w] {
                        c.alive[w] = false;
                        c.queues[w].clear();
                        c.sched.on_disconnect(w, "chaos: killed");
                        c.collect();
                    }
                }
                let ready: Vec<usize> = (0..c.queues.len())
                    .filter(|&w| !c.queues[w].is_empty())
                    .collect();
                if ready.is_empty() {
                    break;
                }
                k += 1;
                c.deliver(ready[picks[k % picks.len()] % ready.len()]);
                delivered += 1;
            }
            if !c.sched.begin_replicate() {
                break;
            }
            c.collect();
        }
        if c.sched.failed_at().is_some() {
            c.sched.abandon();
        }
    };
    let states: Vec<Vec<u8>> = (0..n_states)
        .map(|i| crate::registry::encode(&state(i)).unwrap())
        .collect();
    let mut ids = c.sched.begin_reset(states).unwrap();
    c.collect();
    settle(c);
    c.sched.finish()?;
    assert_eq!(
        local
            .reset_states((0..n_states).map(state).collect())
            .unwrap(),
        ids
    );
    for _ in 0..steps {
        if ids.is_empty() {
            break;
        }
        let inputs: Vec<_> = ids.iter().map(|&id| (id, 0u32, 1.0)).collect();
        c.begin(&inputs);
        settle(c);
        let got = decoded(c.sched.finish_evolve()?);
        let want = local
            .evolve_many(inputs.iter().map(|x| (x.0, x.1)).collect())
            .unwrap();
        assert_eq!(got, want, "other bits than the single-process engine");
        ids = got.values().flatten().map(|x| x.0).collect();
        ids.sort_unstable();
        let held = c.held();
        assert!(
            held.values().all(|&w| c.alive[w]),
            "a state on a lost worker"
        );
    }
    let want = local.fetch_states(&ids).unwrap();
    c.sched.begin_fetch(&ids).unwrap();
    c.collect();
    settle(c);
    let got: HashMap<StateId, <super::Branchy as Evolve>::State> = c
        .sched
        .finish_fetch()?
        .into_iter()
        .map(|(id, b)| (id, decode(&b).unwrap()))
        .collect();
    assert_eq!(
        got, want,
        "fetched other bytes than the single-process engine"
    );
    Ok(())
}

fn buddy_cfg(replicas: usize, batch: usize, steal: bool, rebalance: bool) -> SchedConfig {
    SchedConfig {
        batch: Batch::Fixed(batch),
        pipeline: 2,
        recovery: Recovery::Buddy,
        replicas,
        ..cfg(Placement::Spread, rebalance, steal)
    }
}

/// A schedule: which workers are lost, and at which delivery. `together`
/// workers next to each other in index order (a worker and its buddies)
/// are lost at one moment; `scattered` more each at a moment of its own.
fn schedule(
    n: usize,
    first: usize,
    together: usize,
    at: usize,
    scattered: &[(usize, usize)],
) -> Vec<(usize, usize)> {
    let mut kills: Vec<(usize, usize)> = (0..together).map(|j| ((first + j) % n, at)).collect();
    for &(w, t) in scattered {
        let w = w % n;
        if !kills.iter().any(|k| k.0 == w) {
            kills.push((w, t));
        }
    }
    // One worker always lives.
    kills.truncate(n - 1);
    kills
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Several losses per run, clustered (a worker with its buddies) or
    /// not, at any delivery of any phase: at most `replicas` of them
    /// always end with the single-process engine's bits; more end either
    /// so or with `WorkerLost`.
    #[test]
    fn clustered_losses_in_any_phase_end_identical_or_say_what_was_lost(
        n in 3usize..7,
        replicas in 1usize..4,
        states in 1u64..20,
        batch in 1usize..4,
        steal in any::<bool>(),
        rebalance in any::<bool>(),
        first in 0usize..6,
        together in 0usize..4,
        at in 0usize..120,
        scattered in prop::collection::vec((0usize..6, 0usize..200), 0..3),
        picks in prop::collection::vec(any::<usize>(), 64),
    ) {
        let kills = schedule(n, first, together, at, &scattered);
        let mut c = Cluster::new(n, buddy_cfg(replicas, batch, steal, rebalance));
        let mut local = Local::new(model(), SEED);
        let r = run(&mut c, &mut local, states, 3, &kills, &picks);
        let effective = replicas.min(n - 2).max(1);
        match r {
            Ok(()) => {}
            Err(Error::WorkerLost(l)) => {
                prop_assert!(
                    kills.len() > effective,
                    "{} losses with {} replicas: {l:?}", kills.len(), effective
                );
            }
            Err(e) => prop_assert!(false, "unexpected error: {e}"),
        }
    }
}

/// A worker lost together with both its buddies (three neighbours of
/// five, in the middle of the second step) leaves no copy of its states
/// when they held any: the step fails saying so, never with other bits.
#[test]
fn a_worker_lost_with_all_its_buddies_fails_saying_so() {
    let mut c = Cluster::new(5, buddy_cfg(2, 1, true, true));
    let mut local = Local::new(model(), SEED);
    let picks: Vec<usize> = (0..64).collect();
    // The reset and its round take well under 60 deliveries.
    let kills = [(1, 60), (2, 60), (3, 60)];
    match run(&mut c, &mut local, 15, 3, &kills, &picks) {
        Err(Error::WorkerLost(l)) => assert!(!l.lost.is_empty() || !l.unfinished.is_empty()),
        other => panic!("expected WorkerLost, got {other:?}"),
    }
}

/// With two replicas, a worker lost with one of its buddies in the same
/// moment, at every delivery of a run in turn (a run is 130 to 180
/// deliveries: the reset, three steps, their rounds, the fetch), is
/// recovered every time.
#[test]
fn a_worker_lost_with_one_buddy_is_recovered_in_every_phase() {
    for at in 0..200 {
        let mut c = Cluster::new(5, buddy_cfg(2, 1, true, true));
        let mut local = Local::new(model(), SEED);
        let picks: Vec<usize> = (0..64).map(|k| k * 7 + at).collect();
        let kills = [(2, at), (3, at)];
        run(&mut c, &mut local, 15, 3, &kills, &picks)
            .unwrap_or_else(|e| panic!("lost at delivery {at}: {e}"));
    }
}
