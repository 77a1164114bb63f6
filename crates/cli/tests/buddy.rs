//! Recovery from buddy replicas (`Recovery::Buddy`) with real `statepipe
//! worker` processes killed by SIGKILL: the result is the single-process
//! engine's, bit for bit, whichever step the kill lands in, and after a
//! second loss in a later step, and after two lost at one moment (two
//! replicas each); losing a worker together with both its buddies is a
//! clear error, never a hang.

use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use rand::{Rng as _, SeedableRng as _};
use statepipe_bench::cluster::{Sleep, SleepInput};
use statepipe_cluster::config::Recovery;
use statepipe_cluster::{
    Engine, Error, IdMap, Local, LocalCluster, Master, MasterConfig, StateId, WorkerCommand,
};

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

/// Four worker processes under a master replicating to buddies.
fn cluster(seed: u64) -> (Master<Sleep>, LocalCluster) {
    let worker = WorkerCommand::new(EXE).arg("worker");
    let c = LocalCluster::spawn(&worker, 4, &[]).unwrap();
    let joined = c.accept(Duration::from_secs(30)).unwrap();
    let mut cfg = MasterConfig {
        seed,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = Recovery::Buddy;
    (Master::new(&Sleep, joined, cfg).unwrap(), c)
}

/// Each state sleeps `cost_us` and has 0, 1 or 2 children by its place.
fn inputs(ids: &[StateId], cost_us: u32) -> IdMap<SleepInput> {
    ids.iter()
        .enumerate()
        .map(|(k, &i)| {
            let children = [1, 2, 1, 0][k % 4];
            (i, SleepInput { cost_us, children })
        })
        .collect()
}

/// Runs `steps` steps on `m` and on a `Local` engine, sending `signal`,
/// for each `(step, victims)` of `kills`, to those workers 40 ms into that
/// step (a stopped worker is woken with `SIGCONT` 3 s later, long after
/// the master declared it lost); asserts every step's outputs and the last
/// states are the same. Returns how many workers the master lost.
fn run_signalling(
    m: &mut Master<Sleep>,
    pids: &[u32],
    seed: u64,
    steps: usize,
    kills: &[(usize, &[usize])],
    signal: Signal,
) -> Result<usize, Error> {
    let mut local = Local::new(Sleep, seed);
    let states: Vec<u64> = (0..24).collect();
    let mut ids = m.reset_states(states.clone())?;
    assert_eq!(local.reset_states(states).unwrap(), ids);
    for step in 0..steps {
        let inp = inputs(&ids, 20_000);
        for (_, victims) in kills.iter().filter(|k| k.0 == step) {
            let pids: Vec<u32> = victims.iter().map(|&v| pids[v]).collect();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(40));
                for &p in &pids {
                    let _ = kill(Pid::from_raw(p as i32), signal);
                }
                if signal == Signal::SIGSTOP {
                    std::thread::sleep(Duration::from_secs(3));
                    for &p in &pids {
                        let _ = kill(Pid::from_raw(p as i32), Signal::SIGCONT);
                    }
                }
            });
        }
        let got = m.evolve_many(inp.clone())?;
        let want = local.evolve_many(inp).unwrap();
        assert_eq!(got, want, "step {step}");
        ids = got.values().flatten().map(|c| c.0).collect();
        ids.sort_unstable();
        if ids.is_empty() {
            break;
        }
    }
    let held = m.fetch_states(&ids)?;
    assert_eq!(held, local.fetch_states(&ids).unwrap());
    Ok(m.stats().lost_workers())
}

/// [`run_signalling`] on a fresh cluster of four, torn down afterwards.
fn lost_in(
    seed: u64,
    steps: usize,
    kills: &[(usize, &[usize])],
    signal: Signal,
) -> Result<usize, Error> {
    let (mut m, mut c) = cluster(seed);
    let pids = c.pids();
    let r = run_signalling(&mut m, &pids, seed, steps, kills, signal);
    drop(m);
    c.kill_all();
    r
}

#[test]
fn a_worker_killed_at_a_random_step_is_recovered_from_its_buddy() {
    for seed in 0..6u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let kill_at = rng.random_range(0..4);
        let victim = rng.random_range(0..4);
        let lost = lost_in(seed, 4, &[(kill_at, &[victim])], Signal::SIGKILL)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(lost, 1, "seed {seed}: the kill landed after the run");
    }
}

#[test]
fn two_of_four_killed_in_different_steps_are_recovered() {
    // Each loss is followed by a committed round, which replicates the
    // promoted states again: the second loss finds a copy of everything.
    let lost = lost_in(7, 5, &[(1, &[0]), (3, &[2])], Signal::SIGKILL).unwrap();
    assert_eq!(lost, 2);
}

#[test]
fn a_stopped_worker_is_lost_and_its_late_replicas_never_count() {
    // SIGSTOP: no reset, only silence (150 ms while it owes an answer in an
    // evolve, 1.5 s otherwise, by default). The master
    // promotes its states' replicas and closes its connection; woken
    // later, the worker's late frames (answers to the master, replicas to
    // its buddy, of a round that never commits) change nothing.
    let lost = lost_in(9, 6, &[(1, &[2])], Signal::SIGSTOP).unwrap();
    assert_eq!(lost, 1);
}

#[test]
fn a_worker_lost_with_its_buddies_fails_the_step_saying_so() {
    // The master numbers workers in the order they joined, not the order
    // they were spawned, so which process is whose buddy is not known
    // here; three of four lost together always include a worker and both
    // its buddies (on a ring of four with two replicas, the worker after
    // the survivor and the two after it).
    let t0 = Instant::now();
    let err = lost_in(8, 4, &[(1, &[0, 1, 2])], Signal::SIGKILL).unwrap_err();
    let Error::WorkerLost(l) = &err else {
        panic!("expected a lost worker, got {err}")
    };
    assert!(!l.lost.is_empty() || !l.unfinished.is_empty(), "{l:?}");
    eprintln!("failed after {:?}: {err}", t0.elapsed());
}

#[test]
fn two_of_four_lost_at_one_moment_are_recovered_from_the_second_replica() {
    // Two replicas per worker: any two losses in one round leave a copy of
    // every state, whichever two (a worker with one of its buddies among
    // them, on a ring of four), killed or stopped together.
    let lost = lost_in(11, 4, &[(1, &[1, 2])], Signal::SIGKILL).unwrap();
    assert_eq!(lost, 2);
    let lost = lost_in(12, 4, &[(2, &[0, 3])], Signal::SIGSTOP).unwrap();
    assert_eq!(lost, 2);
}

#[test]
fn a_worker_told_to_leave_at_a_random_step_hands_over_with_its_replicas_rehomed() {
    // SIGTERM: the worker says it is leaving, finishes its step's work,
    // and when the step ends its states move to the others, a round
    // without it replicates them, and it is let go. Every step's outputs
    // and the final states are `Local`'s; nothing is lost or promoted.
    for seed in 0..4u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(100 + seed);
        let at = rng.random_range(0..3);
        let victim = rng.random_range(0..4);
        let (mut m, mut c) = cluster(seed);
        let pids = c.pids();
        let lost = run_signalling(&mut m, &pids, seed, 5, &[(at, &[victim])], Signal::SIGTERM)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let left = m.stats().left_workers();
        drop(m);
        c.kill_all();
        assert_eq!(
            (lost, left),
            (0, 1),
            "seed {seed}: SIGTERM at step {at} to worker {victim}"
        );
    }
}
