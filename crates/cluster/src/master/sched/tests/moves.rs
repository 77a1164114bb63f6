//! Losses spread over a whole run while states move (steals,
//! rebalancing) in `Recovery::Buddy`: with no `r + 1` workers lost side by
//! side, every run ends with the single-process engine's bits. A state
//! that is its own only copy does not move, and a worker that gives states
//! away keeps them as replicas until the next commit, so a state's copies
//! stay among neighbours.

use proptest::prelude::*;

use super::chaos::{buddy_cfg, run};
use super::{model, Cluster, SEED};
use crate::local::Local;

/// Workers 2 and 3 (a worker and its first buddy) lost a few deliveries
/// apart, then worker 0: some of 2's states, promoted on 3 and then on 4
/// (their last replica), had no copy but the one on 4 until a round
/// replicated them again. Stolen by 0 meanwhile, that one copy died with
/// 0, three losses no two of them 2's buddies. A state that is its own
/// only copy now stays where it is.
#[test]
fn a_state_promoted_from_its_last_replica_does_not_move() {
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
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Losses spread over a whole run, none three side by side (so never a
    /// worker with both its buddies), at any delivery, with states moving
    /// by steals and rebalancing: every run ends with the single-process
    /// engine's bits. A moved state keeps a copy on the worker it left
    /// (`gave_away`), so its copies stay among neighbours.
    #[test]
    fn losses_never_three_side_by_side_end_identical(
        n in 8usize..16,
        states in 8u64..40,
        batch in 1usize..4,
        steal in any::<bool>(),
        rebalance in any::<bool>(),
        raw in prop::collection::vec((0usize..16, 0usize..400), 1..7),
        picks in prop::collection::vec(any::<usize>(), 64),
    ) {
        let mut kills: Vec<(usize, usize)> = Vec::new();
        for (w, t) in raw {
            let w = w % n;
            let dead = |x: usize| x == w || kills.iter().any(|k| k.0 == x);
            let three = (0..n).any(|s| dead(s) && dead((s + 1) % n) && dead((s + 2) % n));
            if !kills.iter().any(|k| k.0 == w) && !three {
                kills.push((w, t));
            }
        }
        let mut c = Cluster::new(n, buddy_cfg(2, batch, steal, rebalance));
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
