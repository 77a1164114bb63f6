//! The in-process rule: a run that stays in process, one that moves to
//! workers after its first step, and one on threads give the same bits as
//! the single-threaded reference.

use std::time::Duration;

use super::resume::Walk;
use crate::auth::Secret;
use crate::auto::Decision;
use crate::listen::{Joined, Listener};
use crate::pf::{self, Bootstrap, PfConfig, PfResult};
use crate::{worker, Auto, AutoConfig, Error, Local, MasterConfig, Registry, ShipCost};

fn workers(n: usize) -> Result<Vec<Joined>, Error> {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone())?;
    let addr = l.local_addr()?;
    let registry = Registry::new().with::<Bootstrap<Walk>>();
    for _ in 0..n {
        let _ = worker::spawn_thread(addr, secret.clone(), registry.clone());
    }
    l.accept(n, Duration::from_secs(30))
}

fn walk() -> Walk {
    Walk {
        y: (0..16).map(|t| (t as f64 * 0.4).cos() * 2.0).collect(),
    }
}

const CFG: PfConfig = PfConfig {
    particles: 240,
    islands: 4,
    seed: 11,
};

fn reference() -> pf::PfResult {
    let mut local = Local::new(Bootstrap(walk()), 3);
    pf::run(&mut local, &walk(), CFG, |_| {}).unwrap()
}

fn auto_cfg(ship: ShipCost, threads: usize) -> AutoConfig {
    AutoConfig {
        master: MasterConfig {
            seed: 3,
            ..MasterConfig::default()
        },
        threads,
        workers: 3,
        steps: Some(16),
        ship,
    }
}

/// Shipping that costs nothing: any run with more workers than threads moves.
fn free() -> ShipCost {
    ShipCost {
        per_state: Duration::ZERO,
        per_byte: Duration::ZERO,
        per_step: Duration::ZERO,
        start_per_worker: Duration::ZERO,
        start: Duration::ZERO,
    }
}

#[test]
fn threads_do_not_change_the_bits() {
    // Forced: more threads than the host has, and every step shared, the
    // filter's own work too (its threshold is low in tests).
    for threads in [1, 2, 3, 4, 7] {
        let mut local = Local::new(Bootstrap(walk()), 3).force_threads(threads);
        assert_eq!(
            pf::run(&mut local, &walk(), CFG, |_| {}).unwrap(),
            reference()
        );
    }
}

/// A run of the test filter on `threads` forced threads: its result, and
/// the pool thread (if any) each `after_step` ran on.
fn run_recording_threads(threads: usize) -> (PfResult, Vec<Option<usize>>) {
    let mut local = Local::new(Bootstrap(walk()), 3).force_threads(threads);
    let mut on = Vec::new();
    let r = pf::run_from(&mut local, &walk(), CFG, None, |_, _| {
        on.push(rayon::current_thread_index());
        Ok(())
    })
    .unwrap();
    (r, on)
}

#[test]
fn a_run_goes_to_the_pool_once_and_runs_in_place_from_inside_it() {
    // From outside rayon's pool, a run on several threads moves to a pool
    // thread (its `after_step` sees one); from a pool thread it stays
    // there; on one thread it stays on the caller's. The same bits.
    let (r, on) = run_recording_threads(2);
    assert_eq!(r, reference());
    assert!(on.iter().all(Option::is_some), "{on:?}");
    let (here, (r, on)) =
        rayon::scope(|_| (rayon::current_thread_index(), run_recording_threads(2)));
    assert_eq!(r, reference());
    assert!(
        on.iter().all(|t| *t == here),
        "a run from pool thread {here:?} moved: {on:?}"
    );
    let (r, on) = run_recording_threads(1);
    assert_eq!(r, reference());
    assert!(on.iter().all(Option::is_none), "{on:?}");
}

#[test]
fn a_first_step_probes_on_one_thread_with_the_same_bits() {
    // Not forced: the first step evolves a probe of its parents on this
    // thread, timed, then the rest on as many threads as that says (one,
    // for a model this cheap); later steps by the last step's timing.
    for threads in [2, 3, 7] {
        let mut local = Local::new(Bootstrap(walk()), 3).uncapped_threads(threads);
        let mut segments = Vec::new();
        let r = pf::run_from(&mut local, &walk(), CFG, None, |l, _| {
            segments.push(l.segments());
            Ok(())
        })
        .unwrap();
        assert_eq!(r, reference());
        // The probe's children and the rest's are runs of their own.
        assert!(segments[0] >= 2, "{segments:?}");
    }
}

#[test]
fn a_cheap_model_stays_in_process_and_never_starts_workers() {
    let mut auto = Auto::new(Bootstrap(walk()), auto_cfg(ShipCost::default(), 2), || {
        panic!("a model this cheap must not start workers")
    });
    assert_eq!(
        pf::run(&mut auto, &walk(), CFG, |_| {}).unwrap(),
        reference()
    );
    let d = auto.decision().expect("decided after the first step");
    assert!(!d.on_workers, "{d}");
    assert_eq!(d.states, CFG.particles);
    // One thread or two, by what the first step's calls cost here.
    assert!((1..=2).contains(&d.threads), "{d}");
    assert!(d.to_string().starts_with("in process on "), "{d}");
    assert!(auto.master().is_none());
}

#[test]
fn a_step_gets_a_thread_per_tenth_of_a_millisecond_of_calls() {
    use crate::threads::threads_for;
    let us = Duration::from_micros;
    assert_eq!(threads_for(Duration::ZERO, 4), 1);
    assert_eq!(threads_for(us(80), 2), 1);
    assert_eq!(threads_for(us(199), 2), 1);
    assert_eq!(threads_for(us(200), 2), 2);
    assert_eq!(threads_for(us(320), 8), 3);
    assert_eq!(threads_for(us(1400), 16), 14);
    // Timed by a first step alone (cold): one per half millisecond.
    use crate::threads::threads_for_first;
    assert_eq!(threads_for_first(us(400), 2), 1);
    assert_eq!(threads_for_first(us(999), 2), 1);
    assert_eq!(threads_for_first(us(1000), 2), 2);
    assert_eq!(threads_for_first(us(1600), 8), 3);
    assert_eq!(threads_for(Duration::from_secs(1), 8), 8);
    assert_eq!(threads_for(Duration::MAX, 0), 1);
}

#[test]
fn free_shipping_moves_the_run_to_workers_with_the_same_bits() {
    let mut started = 0;
    let mut auto = Auto::new(Bootstrap(walk()), auto_cfg(free(), 1), || {
        started += 1;
        workers(3)
    });
    let got = pf::run(&mut auto, &walk(), CFG, |_| {}).unwrap();
    let d = auto.decision().expect("decided").clone();
    assert!(d.on_workers, "{d}");
    assert_eq!(auto.master().expect("on workers").stats().workers.len(), 3);
    drop(auto);
    assert_eq!(started, 1);
    assert_eq!(got, reference());
}

#[test]
fn workers_that_cannot_start_fail_the_step_with_their_error() {
    let mut auto = Auto::new(Bootstrap(walk()), auto_cfg(free(), 1), || {
        Err(Error::NoWorkers)
    });
    let e = pf::run(&mut auto, &walk(), CFG, |_| {}).unwrap_err();
    assert!(matches!(e, Error::NoWorkers), "{e}");
}

#[test]
fn workers_lost_during_the_move_roll_back_and_the_run_goes_on_in_process() {
    // The move fails as if every worker was lost while the states were
    // placed: the states are still here, so a run with checkpoints rolls
    // back to its start and ends in process with the same bits.
    let lost = || {
        Err(Error::WorkerLost(Box::new(crate::WorkerLost {
            worker: 0,
            addr: "127.0.0.1:1".parse().unwrap(),
            reason: "lost while the states were placed".into(),
            lost: Vec::new(),
            unfinished: Vec::new(),
            completed: Default::default(),
            others: Vec::new(),
        })))
    };
    let mut auto = Auto::new(Bootstrap(walk()), auto_cfg(free(), 1), lost);
    let mut rolled = Vec::new();
    let got = pf::run_checkpointed(
        &mut auto,
        &walk(),
        CFG,
        None,
        pf::Checkpoints::default(),
        |_, p| {
            if let pf::Progress::RolledBack { to, .. } = p {
                rolled.push(to);
            }
            Ok(())
        },
    )
    .unwrap();
    assert_eq!(got, reference());
    assert_eq!(rolled, vec![0]);
    assert!(auto.master().is_none());
}

fn decision(start: Duration) -> Decision {
    Decision {
        on_workers: false,
        states: 2000,
        per_call: Duration::from_nanos(310),
        bytes_per_state: 24,
        ship_per_state: Duration::from_nanos(1550),
        step_in_process: Duration::from_micros(620),
        step_on_workers: Duration::from_micros(3700),
        start,
        threads: 1,
        workers: 2,
    }
}

#[test]
fn a_decision_says_what_starting_workers_would_cost_unless_the_run_stays() {
    let said = decision(Duration::from_millis(70)).to_string();
    assert!(
        said.ends_with("on 2 workers (+70 ms to start them)"),
        "{said}"
    );
    // A run told to stay in process weighs the move at an unreachable
    // cost: it is not printed.
    let said = decision(Duration::MAX / 4).to_string();
    assert!(said.ends_with("on 2 workers"), "{said}");
    assert!(said.starts_with("in process on 1 thread: "), "{said}");
}

#[test]
fn a_filter_that_cannot_split_its_particles_is_refused_not_run() {
    for (particles, islands, says) in [
        (
            0,
            4,
            "0 particles for 4 islands: each island needs at least one",
        ),
        (3, 4, "3 particles for 4 islands"),
        (10, 0, "at least one island"),
        (10, 4, "4 islands do not divide 10 particles"),
    ] {
        let cfg = PfConfig {
            particles,
            islands,
            seed: 1,
        };
        let mut local = Local::new(Bootstrap(walk()), 3);
        match pf::run(&mut local, &walk(), cfg, |_| {}) {
            Err(Error::Config(e)) => assert!(e.contains(says), "{e}"),
            other => panic!("{particles} in {islands}: {other:?}"),
        }
    }
}
