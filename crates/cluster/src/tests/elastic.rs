//! Workers that join mid-run are admitted at the next step and get work,
//! and workers the master retires hand their states over and exit cleanly;
//! the results are the single-process engine's all the same.

use std::time::Duration;

use super::{registry, Branchy};
use crate::auth::Secret;
use crate::config::Recovery;
use crate::listen::Listener;
use crate::{worker, Engine, IdMap, Local, Master, MasterConfig, MasterImpl};

#[test]
fn workers_joining_mid_run_are_admitted_and_change_nothing() {
    joiners_change_nothing(Recovery::MasterCopy);
}

#[test]
fn joiners_take_part_in_buddy_replication_and_change_nothing() {
    // One worker alone has no buddy; the joiners make a ring of three.
    joiners_change_nothing(Recovery::Buddy);
}

fn joiners_change_nothing(recovery: Recovery) {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let _ = worker::spawn_thread(addr, secret.clone(), registry());
    let joined = l.accept(1, Duration::from_secs(30)).unwrap();
    let mut cfg = MasterConfig {
        seed: 3,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = recovery;
    let model = Branchy { max: 2 };
    let mut m = Master::new(&model, joined, cfg).unwrap();
    m.admit_from(l);
    let mut local = Local::new(model, 3);
    let init: Vec<(u64, Vec<u8>)> = (0..60).map(|i| (i, vec![i as u8])).collect();
    let mut ids = m.reset_states(init.clone()).unwrap();
    assert_eq!(local.reset_states(init).unwrap(), ids);
    for step in 0..12 {
        if step == 2 {
            for _ in 0..2 {
                let _ = worker::spawn_thread(addr, secret.clone(), registry());
            }
        }
        if ids.is_empty() {
            break;
        }
        // Steady inputs (one child each) keep the population alive.
        let inputs: IdMap<u32> = ids.iter().map(|&i| (i, 1)).collect();
        let got = m.evolve_many(inputs.clone()).unwrap();
        assert_eq!(got, local.evolve_many(inputs).unwrap(), "step {step}");
        ids = got.values().flatten().map(|c| c.0).collect();
        ids.sort_unstable();
        if m.stats().workers.len() < 3 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let st = m.stats();
    assert_eq!(st.workers.len(), 3, "the joiners were not admitted");
    assert!(
        st.workers[1..].iter().any(|w| w.evolved > 0),
        "the joiners got no work: {:?}",
        st.workers
    );
}

#[test]
fn a_joiner_that_cannot_run_the_model_is_left_out_and_the_run_goes_on() {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let _ = worker::spawn_thread(addr, secret.clone(), registry());
    let joined = l.accept(1, Duration::from_secs(30)).unwrap();
    let cfg = MasterConfig {
        seed: 3,
        ..MasterConfig::default()
    };
    let model = Branchy { max: 2 };
    let mut m = Master::new(&model, joined, cfg).unwrap();
    m.admit_from(l);
    let mut local = Local::new(model, 3);
    let init: Vec<(u64, Vec<u8>)> = (0..20).map(|i| (i, vec![i as u8])).collect();
    let mut ids = m.reset_states(init.clone()).unwrap();
    assert_eq!(local.reset_states(init).unwrap(), ids);
    // A worker of a build without the model joins.
    let _ = worker::spawn_thread(addr, secret.clone(), crate::Registry::new());
    for step in 0..8 {
        let inputs: IdMap<u32> = ids.iter().map(|&i| (i, 1)).collect();
        let got = m.evolve_many(inputs.clone()).unwrap();
        assert_eq!(got, local.evolve_many(inputs).unwrap(), "step {step}");
        ids = got.values().flatten().map(|c| c.0).collect();
        ids.sort_unstable();
        if m.stats().workers.len() < 2 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_eq!(m.stats().workers.len(), 2, "the joiner never joined");
}

#[test]
fn a_worker_joining_during_a_long_step_is_challenged_at_once_and_admitted_after_it() {
    use super::{Nap, NapInput};
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let _ = worker::spawn_thread(addr, secret.clone(), registry());
    let joined = l.accept(1, Duration::from_secs(30)).unwrap();
    let mut m = Master::new(&Nap, joined, MasterConfig::default()).unwrap();
    m.admit_from(l);
    let ids = m.reset_states(vec![1, 2]).unwrap();
    // A worker that gives up on a connection nobody challenges within
    // 200 ms, and on joining after 1 s, joins 300 ms into a 2 s step.
    let joiner = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let opts = worker::WorkerOptions {
            connect_timeout: Duration::from_secs(1),
            challenge_timeout: Duration::from_millis(200),
            ..worker::WorkerOptions::default()
        };
        worker::run(&addr.to_string(), &secret, registry(), &opts)
    });
    let long = NapInput {
        cost_us: 1_000_000,
        children: 1,
    };
    let out = m
        .evolve_many(ids.iter().map(|&i| (i, long)).collect())
        .unwrap();
    let ids: Vec<_> = out.values().flatten().map(|c| c.0).collect();
    let short = NapInput {
        cost_us: 10,
        children: 1,
    };
    m.evolve_many(ids.iter().map(|&i| (i, short)).collect())
        .unwrap();
    assert_eq!(m.stats().workers.len(), 2, "the joiner was not admitted");
    m.shutdown();
    assert!(joiner.join().unwrap().is_ok(), "the joiner gave up");
}

#[test]
fn the_threaded_master_refuses_workers_mid_run_with_an_error() {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    for _ in 0..2 {
        let _ = worker::spawn_thread(addr, secret.clone(), registry());
    }
    let mut joined = l.accept(2, Duration::from_secs(30)).unwrap();
    let late = joined.split_off(1);
    let cfg = MasterConfig {
        imp: MasterImpl::Threaded,
        ..MasterConfig::default()
    };
    let mut m = Master::new(&Branchy { max: 1 }, joined, cfg).unwrap();
    let err = m.admit(late).unwrap_err();
    assert!(err.to_string().contains("event-loop"), "{err}");
}

/// A master over `n` thread workers with their handles, worker `k` of the
/// master the `k`-th handle (each joins before the next starts).
fn ordered_workers(
    n: usize,
    cfg: MasterConfig,
) -> (
    Master<Branchy>,
    Vec<std::thread::JoinHandle<Result<(), crate::Error>>>,
) {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let mut handles = Vec::new();
    let mut joined = Vec::new();
    for _ in 0..n {
        handles.push(worker::spawn_thread(addr, secret.clone(), registry()));
        joined.extend(l.accept(1, Duration::from_secs(30)).unwrap());
    }
    (
        Master::new(&Branchy { max: 2 }, joined, cfg).unwrap(),
        handles,
    )
}

/// Waits (60 s at most) for a worker thread to end; its `serve`'s result.
fn ended(h: std::thread::JoinHandle<Result<(), crate::Error>>) -> Result<(), crate::Error> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !h.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "a retired worker did not exit within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    h.join().expect("the worker thread panicked")
}

#[test]
fn retired_workers_hand_their_states_over_exit_cleanly_and_change_nothing() {
    retire_changes_nothing(Recovery::MasterCopy);
}

#[test]
fn retiring_in_buddy_mode_rehomes_the_replicas_and_changes_nothing() {
    retire_changes_nothing(Recovery::Buddy);
}

fn retire_changes_nothing(recovery: Recovery) {
    let mut cfg = MasterConfig {
        seed: 5,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = recovery;
    let (mut m, mut handles) = ordered_workers(4, cfg);
    let mut local = Local::new(Branchy { max: 2 }, 5);
    let init: Vec<(u64, Vec<u8>)> = (0..80).map(|i| (i, vec![i as u8])).collect();
    let mut ids = m.reset_states(init.clone()).unwrap();
    assert_eq!(local.reset_states(init).unwrap(), ids);
    for step in 0..10 {
        if step == 3 {
            m.retire_workers(&[1, 3]).unwrap();
            assert_eq!(m.staying_workers(), vec![0, 2]);
            let retired = [handles.remove(3), handles.remove(1)];
            for h in retired {
                assert!(ended(h).is_ok(), "a retired worker did not end cleanly");
            }
        }
        if step == 6 {
            m.retire_workers(&[0]).unwrap();
            assert!(ended(handles.remove(0)).is_ok());
        }
        let inputs: IdMap<u32> = ids.iter().map(|&i| (i, 1)).collect();
        let got = m.evolve_many(inputs.clone()).unwrap();
        assert_eq!(got, local.evolve_many(inputs).unwrap(), "step {step}");
        ids = got.values().flatten().map(|c| c.0).collect();
        ids.sort_unstable();
    }
    let mut fetched: Vec<_> = m.fetch_states(&ids).unwrap().into_iter().collect();
    let mut want: Vec<_> = local.fetch_states(&ids).unwrap().into_iter().collect();
    fetched.sort_unstable();
    want.sort_unstable();
    assert_eq!(fetched, want, "the states after the run");
    let st = m.stats();
    assert_eq!(st.left_workers(), 3, "{:?}", st.workers);
    assert_eq!(st.lost_workers(), 0, "a retirement counted as a loss");
    assert!(st.workers[2].evolved > 0);
    assert_eq!(m.staying_workers(), vec![2]);
}

#[test]
fn retiring_refuses_unknown_workers_and_the_last_one_and_retires_nothing() {
    let (mut m, _handles) = ordered_workers(2, MasterConfig::default());
    let ids = m.reset_states(vec![(1, vec![1]), (2, vec![2])]).unwrap();
    let e = m.retire_workers(&[7]).unwrap_err();
    assert!(e.to_string().contains("no worker 7"), "{e}");
    let e = m.retire_workers(&[0, 1]).unwrap_err();
    assert!(e.to_string().contains("keep at least one"), "{e}");
    assert_eq!(
        m.staying_workers(),
        vec![0, 1],
        "a refused call retired a worker"
    );
    m.retire_workers(&[0]).unwrap();
    let e = m.retire_workers(&[0]).unwrap_err();
    assert!(e.to_string().contains("cannot be retired"), "{e}");
    let e = m.retire_workers(&[1]).unwrap_err();
    assert!(e.to_string().contains("keep at least one"), "{e}");
    // The states are all on worker 1 now, and still evolve.
    let out = m
        .evolve_many(ids.iter().map(|&i| (i, 1)).collect())
        .unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(m.stats().workers[0].evolved, 0);
}

#[test]
fn a_worker_admitted_between_steps_evolves_states_in_the_very_next_step() {
    use super::{Nap, NapInput};
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let _ = worker::spawn_thread(addr, secret.clone(), registry());
    let joined = l.accept(1, Duration::from_secs(30)).unwrap();
    let mut m = Master::new(&Nap, joined, MasterConfig::default()).unwrap();
    let mut local = Local::new(Nap, 0);
    let init: Vec<u64> = (0..40).collect();
    let mut ids = m.reset_states(init.clone()).unwrap();
    assert_eq!(local.reset_states(init).unwrap(), ids);
    // Calls of 2 ms: worth moving to a newcomer (moves cost far less).
    let input = NapInput {
        cost_us: 2_000,
        children: 1,
    };
    let mut before = Vec::new();
    for step in 0..5 {
        if step == 2 {
            for _ in 0..2 {
                let _ = worker::spawn_thread(addr, secret.clone(), registry());
            }
            m.admit(l.accept(2, Duration::from_secs(30)).unwrap())
                .unwrap();
            before = m.stats().workers;
            assert_eq!(before.len(), 3);
            assert!(before[1..].iter().all(|w| w.evolved == 0));
        }
        let inputs: IdMap<NapInput> = ids.iter().map(|&i| (i, input)).collect();
        let got = m.evolve_many(inputs.clone()).unwrap();
        assert_eq!(got, local.evolve_many(inputs).unwrap(), "step {step}");
        ids = got.values().flatten().map(|c| c.0).collect();
        ids.sort_unstable();
        if step == 2 {
            // The step right after the admission: each newcomer got states
            // (by the start-of-step rebalance or by stealing) and evolved them.
            let after = m.stats().workers;
            for w in 1..3 {
                let (a, b) = (&after[w], &before[w]);
                assert!(
                    a.evolved > b.evolved && a.rebalanced_states + a.stolen_states > 0,
                    "worker {w}, admitted before step {step}, got no work in it: {after:?}"
                );
            }
        }
    }
}
