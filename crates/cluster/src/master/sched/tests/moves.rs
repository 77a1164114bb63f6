//! Losses spread over a whole run while states move (steals,
//! rebalancing) in `Recovery::Buddy`: with no `r + 1` workers lost side by
//! side, every run ends with the single-process engine's bits. A worker
//! that gives states away keeps them as replicas until the next commit,
//! so a state's copies stay among neighbours, and a state that is its own
//! only copy may move too. And where long calls go when the rebalance or a
//! recovery has to keep them off a worker's buddies or out of a queue.

use proptest::prelude::*;

use super::chaos::{buddy_cfg, run};
use super::{model, Branchy, Cluster, Heavy, SEED};
use crate::engine::Engine;
use crate::evolve::StateId;
use crate::local::Local;

/// Workers 2 and 3 (a worker and its first buddy) lost a few deliveries
/// apart, then worker 0: some of 2's states, promoted on 3 and then on 4
/// (their last replica), had no copy but the one on 4 until a round
/// replicated them again. Stolen by 0 meanwhile, that one copy died with
/// 0, three losses no two of them 2's buddies. Now 4 keeps a copy of a
/// state it gives away (`gave_away`), and that copy is promoted.
#[test]
fn a_state_promoted_from_its_last_replica_outlives_its_thief() {
    let picks: Vec<usize> = vec![
        5245228108310619217,
        3767530838676458,
        12962703391472794404,
        1838477262364784683,
        1300194450319488334,
        711131026042551063,
        3376753652505360,
        97077736,
        4847249665509260074,
        12455099534726243354,
        275503454246772377,
        271543216294640875,
        5667598626692964262,
        1093751882699070874,
        705500521067853948,
        176758889216091408,
        12761595511611204325,
        316828569432950826,
        8066281770347206284,
        2905995877070523698,
        25420863260479723,
        3467468079405358604,
        2940059648692039563,
        9600572738814784753,
        130466749845688898,
        5252454035584163590,
        4392436762692894650,
        4987257591546091900,
        2045983033151207761,
        1492014007741064736,
        3209220674744080384,
        96015538618019317,
        71592307485748586,
        5650244663807939647,
        819119075679382,
        5689281957848021842,
        9703213112018547558,
        2621319145959649166,
        4982159177222980912,
        4304071924476466632,
        2188299068901553667,
        2688629440314064154,
        105292523067755114,
        4130297759734881,
        2662244277250866919,
        0,
        117164640604209822,
    ];
    let kills = [(3, 233), (0, 286), (2, 230)];
    let mut c = Cluster::new(8, buddy_cfg(2, 1, true, false));
    let mut local = Local::new(model(), SEED);
    let r = run(&mut c, &mut local, 17, 4, &kills, &picks);
    assert!(r.is_ok(), "{:?}", r.err().map(|e| e.to_string()));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// Losses spread over a whole run, none three side by side (so never a
    /// worker with both its buddies), at any delivery, with states moving
    /// by steals and rebalancing: every run ends with the single-process
    /// engine's bits. A moved state keeps a copy on the worker it left
    /// (`gave_away`), so its copies stay among neighbours. With `heavy`,
    /// one state in eight is twenty times as long and calls are taken as a
    /// millisecond per unit of cost: a lost worker's long calls move on
    /// from their holders to where they start sooner (`sooner_elsewhere`)
    /// while losses go on around them.
    #[test]
    fn losses_never_three_side_by_side_end_identical(
        n in 8usize..16,
        states in 8u64..40,
        batch in 1usize..4,
        steal in any::<bool>(),
        rebalance in any::<bool>(),
        heavy in any::<bool>(),
        raw in prop::collection::vec((0usize..16, 0usize..400), 1..7),
        picks in prop::collection::vec(any::<usize>(), 64),
    ) {
        let kills = never_three_side_by_side(n, raw);
        let mut c = Cluster::new(n, buddy_cfg(2, batch, steal, rebalance));
        if heavy {
            c.heavy = Some(Heavy {
                cost: |id| if id.0 % 8 == 0 { 20.0 } else { 1.0 },
                ns_per_cost: 1e6,
                move_ns: 1e4,
            });
        }
        let mut local = Local::new(model(), SEED);
        let r = run(&mut c, &mut local, states, 4, &kills, &picks);
        prop_assert!(r.is_ok(), "{kills:?}: {:?}", r.err().map(|e| e.to_string()));
    }
}

/// A state moved by a steal from worker 8 to worker 4 (its replicas on 9
/// and 10, 8's buddies), then 9, 10 and 4 lost in one round: the copy 8
/// kept when it gave the state away is promoted.
#[test]
fn a_moved_state_outlives_its_new_holder_and_its_old_buddies() {
    let mut picks: Vec<usize> = vec![402378552129011582];
    picks.resize(34, 0);
    picks.push(895202429349950);
    picks.resize(43, 0);
    picks.extend([
        2427080386864084106,
        5445436044487626601,
        2405944082057948557,
        1777550374651894354,
        2800542273279969005,
        2150558477983671028,
        8544088174062593337,
        184267692413544760,
        987927879490395066,
        2423240661122546549,
        7530894998660455141,
        3493037773855692340,
        1790442327646835933,
        8484367996752465766,
        8962364916618700993,
        11410281729678890402,
        1792553145900802125,
        101185965578294739,
        198905667389785068,
        1572110132414940394,
        128626796266996168,
    ]);
    assert_eq!(picks.len(), 64);
    let kills = [(7, 60), (9, 167), (10, 173), (4, 178)];
    let mut c = Cluster::new(14, buddy_cfg(2, 1, true, false));
    let mut local = Local::new(model(), SEED);
    let r = run(&mut c, &mut local, 36, 4, &kills, &picks);
    assert!(r.is_ok(), "{:?}", r.err().map(|e| e.to_string()));
}

/// The rebalance deals around a worker's buddies instead of dropping the
/// move afterwards. Six workers, two states each, replicas on the next
/// two: worker 0 has two long calls (10 each), the rest short ones (1).
/// The even share is 10, so one long call goes, longest first, to the
/// least-loaded worker: by index that would be 1, which holds 0's
/// replicas. It goes to the least-loaded worker that holds none, and no
/// worker runs both long calls in a row.
#[test]
fn the_rebalance_deals_a_long_call_past_the_buddies() {
    let mut c = Cluster::new(6, buddy_cfg(2, 1, false, true));
    let ids = c.reset(12);
    c.settle();
    let on_0: Vec<StateId> = ids.iter().copied().filter(|id| c.held()[id] == 0).collect();
    assert_eq!(on_0.len(), 2, "{:?}", c.held());
    let inputs: Vec<_> = ids
        .iter()
        .map(|&id| (id, 1, if on_0.contains(&id) { 10.0 } else { 1.0 }))
        .collect();
    c.begin(&inputs);
    c.settle();
    c.sched.finish_evolve().unwrap();
    let long_at: Vec<usize> = (0..6)
        .flat_map(|w| {
            c.evolved_by(w)
                .into_iter()
                .filter(|id| on_0.contains(id))
                .map(move |_| w)
        })
        .collect();
    assert_eq!(long_at.len(), 2, "{long_at:?}");
    assert!(long_at.contains(&0), "{long_at:?}");
    assert!(long_at.contains(&3), "{long_at:?}");
}

/// A lost worker's long call is promoted on the holder where it starts
/// soonest, not behind another long call. Six workers, sixteen states
/// each, replicas on the next two. Worker 0 (lost before anything
/// returns) and worker 2 each have one long call (10) among short ones
/// (1); worker 1 has sixteen calls of 3. Worker 1 has more work in all
/// (48 against 25), but only two calls of 3 ahead of a long one (its
/// pending calls are all cheaper), where worker 2 runs its own long call:
/// the promoted long call goes to worker 1.
#[test]
fn a_lost_long_call_starts_again_where_it_starts_soonest() {
    let mut c = Cluster::new(6, buddy_cfg(2, 1, false, false));
    let ids = c.reset(96);
    c.settle();
    let held = c.held();
    let on = |w: usize| -> Vec<StateId> {
        let mut v: Vec<StateId> = ids.iter().copied().filter(|id| held[id] == w).collect();
        v.sort_unstable();
        v
    };
    let (long0, long2) = (on(0)[0], on(2)[0]);
    let inputs: Vec<_> = ids
        .iter()
        .map(|&id| {
            let cost = match held[&id] {
                _ if id == long0 || id == long2 => 10.0,
                1 => 3.0,
                _ => 1.0,
            };
            (id, 1, cost)
        })
        .collect();
    c.begin(&inputs);
    c.lose(0, "test: killed");
    c.settle();
    c.sched.finish_evolve().unwrap();
    assert!(c.evolved_by(1).contains(&long0), "{:?}", c.evolved_by(2));
}

/// When both holders of a lost worker's long call run long calls of their
/// own, the promoted call moves on to the worker where it starts soonest.
/// Six workers, sixteen states each, replicas on the next two: workers 0
/// (lost before anything returns), 1 and 2 each have one long call (10)
/// among short ones (1), the rest only short ones. Promoted on 1 or 2,
/// 0's long call would wait for that holder's own; it goes on to one of
/// the workers without a long call (3, 4 or 5, other than the holder's
/// buddies), and the step gives the single-process engine's bits.
#[test]
fn a_lost_long_call_moves_on_when_both_holders_run_long_calls() {
    let (mut c, mut local, ids) = placed(6, 96, false);
    let held = c.held();
    let first = |w: usize| {
        ids.iter()
            .copied()
            .filter(|id| held[id] == w)
            .min()
            .unwrap()
    };
    let long = [first(0), first(1), first(2)];
    let inputs: Vec<_> = ids
        .iter()
        .map(|&id| (id, 1, if long.contains(&id) { 10.0 } else { 1.0 }))
        .collect();
    // As if measured on real workers: a second per unit of cost (so the
    // test's own time, which counts as calls running, is no part of what
    // is ahead of anyone), 10 µs a move.
    c.sched.ns_per_cost = Some(1e9);
    c.sched.move_ns = Some(1e4);
    c.begin(&inputs);
    c.lose(0, "test: killed");
    c.settle();
    ends_as_local(&mut c, &mut local, &inputs);
    let at: Vec<usize> = (1..6)
        .filter(|&w| c.evolved_by(w).contains(&long[0]))
        .collect();
    assert!(at.len() == 1 && at[0] >= 3, "{at:?}");
}

/// A worker and one of its buddies lost together (0 and 2 of eight,
/// replicas on the next two): 0's states are promoted on 1, their last
/// replica, where each is its only copy. Worker 1 keeps a copy of what it
/// gives away, so idle workers still take them from it instead of
/// leaving it 0's work on top of its own; and when the worker that took
/// one is lost in turn before it answers, the copy 1 kept is promoted.
/// The step gives the single-process engine's bits.
#[test]
fn a_lost_workers_states_left_on_one_holder_go_to_thieves() {
    let (mut c, mut local, ids) = placed(8, 64, true);
    let held = c.held();
    let of_0: Vec<StateId> = ids.iter().copied().filter(|id| held[id] == 0).collect();
    let inputs: Vec<_> = ids.iter().map(|&id| (id, 1, 1.0)).collect();
    c.begin(&inputs);
    c.lose(0, "test: killed");
    c.lose(2, "test: killed");
    // Deliveries in turn until a worker other than 1 is sent one of 0's
    // states; that worker is lost before it answers.
    let (mut thief, mut turn) = (None, 0);
    while thief.is_none() {
        let ready: Vec<usize> = (0..8).filter(|&w| !c.queues[w].is_empty()).collect();
        assert!(!ready.is_empty(), "worker 1 ran all of 0's states itself");
        turn += 1;
        c.deliver(ready[turn % ready.len()]);
        thief = (3..8).find(|&w| c.evolved_by(w).iter().any(|id| of_0.contains(id)));
    }
    c.lose(thief.unwrap(), "test: killed");
    c.settle();
    ends_as_local(&mut c, &mut local, &inputs);
}

/// A buddy-mode cluster of `workers` (two replicas, batches of one,
/// stealing as `steal` says, no rebalance) with `states` states placed and
/// replicated, the single-process engine with the same states, and their
/// ids.
fn placed(workers: usize, states: u64, steal: bool) -> (Cluster, Local<Branchy>, Vec<StateId>) {
    let mut c = Cluster::new(workers, buddy_cfg(2, 1, steal, false));
    let mut local = Local::new(model(), SEED);
    let ids = c.reset(states);
    let all: Vec<_> = (0..states).map(super::state).collect();
    assert_eq!(local.reset_states(all).unwrap(), ids);
    c.settle();
    (c, local, ids)
}

/// Ends the step begun with `inputs` and checks that it gives the
/// single-process engine's bits.
fn ends_as_local(c: &mut Cluster, local: &mut Local<Branchy>, inputs: &[(StateId, u32, f64)]) {
    let got = super::decoded(c.sched.finish_evolve().unwrap());
    let want = local
        .evolve_many(inputs.iter().map(|x| (x.0, x.1)).collect())
        .unwrap();
    assert_eq!(got, want);
}

/// The workers of `raw` (modulo `n`) with their moments, each once,
/// leaving out any whose loss would make three lost side by side (a
/// worker with both its buddies).
fn never_three_side_by_side(n: usize, raw: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    let mut kills: Vec<(usize, usize)> = Vec::new();
    for (w, t) in raw {
        let w = w % n;
        let dead = |x: usize| x == w || kills.iter().any(|k| k.0 == x);
        let three = (0..n).any(|s| dead(s) && dead((s + 1) % n) && dead((s + 2) % n));
        if !kills.iter().any(|k| k.0 == w) && !three {
            kills.push((w, t));
        }
    }
    kills
}
