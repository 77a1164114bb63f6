//! An evolve that never returns: its worker keeps beating, so only the
//! evolve's deadline catches it. The worker is dropped, its states run
//! elsewhere (the batch's states alone), and a state that hangs on every
//! worker fails the step naming it and the step, both masters.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rand::Rng as _;
use serde::{Deserialize, Serialize};

use super::threads_with;
use crate::config::{Deadlines, Recovery};
use crate::engine::Engine;
use crate::evolve::Evolve;
use crate::local::Local;
use crate::master::{MasterConfig, MasterImpl};
use crate::registry::Registry;
use crate::rng::Rng;
use crate::Error;

/// Hangs (sleeps for an hour) on input 1 while `HANGS_LEFT` is above 0,
/// counting it down; otherwise one child.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stuck;

/// How many more calls with input 1 hang (shared by the workers on this
/// process's threads; every test sets it under `LOCK`).
static HANGS_LEFT: AtomicU32 = AtomicU32::new(0);
static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Evolve for Stuck {
    const NAME: &'static str = "test-stuck";
    type State = u64;
    type Input = u32;
    type Output = u64;

    fn evolve(&self, s: &u64, i: &u32, rng: &mut Rng) -> Vec<(u64, u64)> {
        // Relaxed: a counter; nothing else is published through it.
        if *i == 1
            && HANGS_LEFT
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
        {
            std::thread::sleep(Duration::from_secs(3600));
        }
        let c = s ^ rng.random::<u64>();
        vec![(c, c >> 7)]
    }
}

/// Heartbeats every 50 ms; an evolve may run 400 ms.
fn cfg(imp: MasterImpl) -> MasterConfig {
    let mut cfg = MasterConfig {
        imp,
        seed: 5,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = Recovery::MasterCopy;
    cfg.sched.deadlines = Deadlines {
        heartbeat: Some(Duration::from_millis(50)),
        fixed: Some(Duration::from_millis(400)),
        ..Deadlines::default()
    };
    cfg
}

fn run(imp: MasterImpl, hangs: u32) -> Result<(), Error> {
    let states: Vec<u64> = (0..12).collect();
    // Input 1 for the fifth state only.
    let inputs = |ids: &[crate::StateId]| -> crate::IdMap<u32> {
        ids.iter()
            .enumerate()
            .map(|(k, &id)| (id, u32::from(k == 4)))
            .collect()
    };
    HANGS_LEFT.store(0, Ordering::Relaxed);
    let mut local = Local::new(Stuck, 5);
    let ids = local.reset_states(states.clone()).unwrap();
    let want = local.evolve_many(inputs(&ids)).unwrap();
    let mut m = threads_with(&Stuck, 4, Registry::new().with::<Stuck>(), cfg(imp));
    assert_eq!(m.reset_states(states).unwrap(), ids);
    HANGS_LEFT.store(hangs, Ordering::Relaxed);
    let got = m.evolve_many(inputs(&ids))?;
    assert_eq!(got, want);
    Ok(())
}

#[test]
fn an_evolve_that_hangs_once_runs_again_elsewhere_with_the_same_bits() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        run(imp, 1).unwrap_or_else(|e| panic!("{imp:?}: {e}"));
    }
}

#[test]
fn an_evolve_that_hangs_everywhere_fails_naming_the_state_and_step() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        match run(imp, u32::MAX) {
            Err(Error::EvolveHung { step, workers, .. }) => {
                assert_eq!(step, 1, "{imp:?}");
                assert_eq!(workers, 3, "{imp:?}");
            }
            other => panic!("{imp:?}: expected EvolveHung, got {other:?}"),
        }
    }
}
