//! States larger than a frame of states: placed, evolved, replicated and
//! fetched whole; and children too large for a cluster, refused with the
//! state named (a state too large to place: `master/sched/tests.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use super::{registry, Big, Blob, Branchy};
use crate::auth::Secret;
use crate::config::Recovery;
use crate::evolve::StateId;
use crate::listen::Listener;
use crate::protocol::msg;
use crate::registry::encode;
use crate::worker::{self, evolve_batch_within, Limits};
use crate::{Engine, Evolve, IdMap, Local, Master, MasterConfig};

fn big_cluster(workers: usize, recovery: Recovery) -> Master<Big> {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    for _ in 0..workers {
        let _ = worker::spawn_thread(addr, secret.clone(), registry());
    }
    let joined = l.accept(workers, Duration::from_secs(30)).unwrap();
    let mut cfg = MasterConfig {
        seed: 5,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = recovery;
    // The large state's evolve takes far longer than the small ones', which
    // a deadline learned from theirs could take for a hang on a busy host.
    cfg.sched.deadlines.fixed = Some(Duration::from_secs(300));
    Master::new(&Big, joined, cfg).unwrap()
}

#[test]
fn a_state_over_64_mib_is_placed_evolved_replicated_and_fetched_in_both_modes() {
    // 80 MiB: more than the 64 MiB one frame carried before, so the state,
    // its child (with master copies, in `Evolved`; with buddies, in a
    // `Replica`) and the fetch each take a frame of their own.
    for recovery in [Recovery::MasterCopy, Recovery::Buddy] {
        let mut m = big_cluster(3, recovery);
        let mut local = Local::new(Big, 5);
        let init = vec![
            Blob(vec![7u8; 80 << 20]),
            Blob(vec![1, 2, 3]),
            Blob(vec![9u8; 1 << 20]),
        ];
        let mut ids = m.reset_states(init.clone()).unwrap();
        assert_eq!(local.reset_states(init).unwrap(), ids);
        for step in 0..2 {
            let inputs: IdMap<u32> = ids.iter().map(|&i| (i, 0)).collect();
            let got = m.evolve_many(inputs.clone()).unwrap();
            assert_eq!(
                got,
                local.evolve_many(inputs).unwrap(),
                "{recovery:?} step {step}"
            );
            ids = got.values().flatten().map(|c| c.0).collect();
        }
        let held = m.fetch_states(&ids).unwrap();
        let want = local.fetch_states(&ids).unwrap();
        assert!(held == want, "{recovery:?}: the states came back otherwise");
        assert_eq!(held.values().map(|b| b.0.len()).max(), Some(80 << 20));
    }
}

/// An `Evolve` payload: `ids`, each with input `1u32`.
fn evolve_request(ids: &[StateId], copies: bool) -> Vec<u8> {
    let mut p = Vec::new();
    msg::put_evolve_head(&mut p, 1, copies, ids.len());
    for id in ids {
        msg::put_u64(&mut p, id.0);
        msg::put_bytes(&mut p, &encode(&1u32).unwrap());
    }
    p
}

/// The error of evolving states 5 and 6 (Branchy, one child each, with
/// copies) within `limits`.
fn failed_batch(limits: Limits) -> (String, [StateId; 2]) {
    let model = registry()
        .build(Branchy::NAME, &encode(&Branchy { max: 2 }).unwrap())
        .unwrap();
    let ids = [StateId(5), StateId(6)];
    let store = Mutex::new(
        ids.iter()
            .map(|&id| (id, encode(&(id.0, vec![3u8; 100])).unwrap()))
            .collect::<HashMap<_, _>>(),
    );
    let mut out = Vec::new();
    let p = evolve_request(&ids, true);
    let err = evolve_batch_within(&*model, 7, &store, &p, &mut out, limits).unwrap_err();
    (err, ids)
}

#[test]
fn a_child_over_the_state_limit_fails_its_batch_naming_the_state() {
    let (err, ids) = failed_batch(Limits {
        state: 1,
        frame: usize::MAX,
    });
    let named = |id: StateId| err.contains(&format!("evolving state {id} made a child"));
    assert!(named(ids[0]) || named(ids[1]), "{err}");
    assert!(
        err.contains("more than a cluster can hold in one state (1 bytes)"),
        "{err}"
    );
}

#[test]
fn an_answer_over_the_frame_limit_fails_its_batch_naming_the_state() {
    let (err, ids) = failed_batch(Limits {
        state: usize::MAX,
        frame: 16,
    });
    assert!(
        err.contains(&format!("the batch from state {}", ids[0])),
        "{err}"
    );
    assert!(
        err.contains("more than one answer carries (16 bytes"),
        "{err}"
    );
}
