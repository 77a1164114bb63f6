//! A master that stops mid-run, and a new one that resumes from its
//! snapshot (with another number of workers): the same result, bit for bit.

use std::time::Duration;

use rand::Rng as _;
use serde::{Deserialize, Serialize};

use crate::auth::Secret;
use crate::config::Recovery;
use crate::listen::{Joined, Listener};
use crate::pf::{self, Bootstrap, PfConfig, PfState, SsModel};
use crate::{worker, Error, Master, MasterConfig, Registry, Rng, Snapshot};

/// A Gaussian random walk seen with noise (also the in-process tests' model).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Walk {
    pub(super) y: Vec<f64>,
}

impl SsModel for Walk {
    const NAME: &'static str = "test-walk";
    type X = f64;
    fn steps(&self) -> usize {
        self.y.len()
    }
    fn prior(&self, rng: &mut Rng) -> f64 {
        rng.random::<f64>() * 10.0 - 5.0
    }
    fn transition(&self, x: &f64, _t: usize, rng: &mut Rng) -> f64 {
        x + rng.random::<f64>() - 0.5
    }
    fn log_obs(&self, x: &f64, t: usize) -> f64 {
        -0.5 * (self.y[t] - x).powi(2)
    }
    fn summary(&self, x: &f64) -> f64 {
        *x
    }
}

fn workers(n: usize) -> Vec<Joined> {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let registry = Registry::new().with::<Bootstrap<Walk>>();
    for _ in 0..n {
        let _ = worker::spawn_thread(addr, secret.clone(), registry.clone());
    }
    l.accept(n, Duration::from_secs(30)).unwrap()
}

#[test]
fn a_run_resumed_from_a_snapshot_ends_as_if_it_never_stopped() {
    let walk = Walk {
        y: (0..24).map(|t| (t as f64 * 0.3).sin() * 3.0).collect(),
    };
    let model = Bootstrap(walk.clone());
    let cfg = PfConfig {
        particles: 300,
        islands: 3,
        seed: 5,
    };
    let master_cfg = |recovery| {
        let mut c = MasterConfig {
            seed: 5,
            ..MasterConfig::default()
        };
        c.sched.recovery = recovery;
        c
    };
    let mut whole = Master::new(&model, workers(2), master_cfg(Recovery::MasterCopy)).unwrap();
    let want = pf::run(&mut whole, &walk, cfg, |_| {}).unwrap();

    // The snapshot is the master's copies, or fetched from the workers
    // (buddy replicas), or decided by state size.
    for (stop_at, recovery) in [
        (1, Recovery::MasterCopy),
        (9, Recovery::MasterCopy),
        (23, Recovery::MasterCopy),
        (1, Recovery::Buddy),
        (9, Recovery::Buddy),
        (9, Recovery::Auto),
    ] {
        let mut first = Master::new(&model, workers(2), master_cfg(recovery)).unwrap();
        let mut saved: Option<(Snapshot, PfState)> = None;
        let err = pf::run_from(&mut first, &walk, cfg, None, |m, st| {
            if st.t == stop_at {
                saved = Some((m.snapshot()?, st.clone()));
                return Err(Error::Config("stopped".into()));
            }
            Ok(())
        })
        .unwrap_err();
        assert!(err.to_string().contains("stopped"));
        drop(first); // the master is gone, its workers with it
        let (snap, st) = saved.unwrap();
        // Through bytes, as a file would carry it.
        let snap: Snapshot = postcard::from_bytes(&postcard::to_allocvec(&snap).unwrap()).unwrap();
        let mut second = Master::resume(&model, workers(3), master_cfg(recovery), snap).unwrap();
        let got = pf::run_from(&mut second, &walk, cfg, Some(st), |_, _| Ok(())).unwrap();
        assert_eq!(got, want, "resumed after step {stop_at} ({recovery:?})");
    }
}

#[test]
fn a_snapshot_needs_copies_and_the_same_seed() {
    let walk = Walk { y: vec![0.0; 3] };
    let model = Bootstrap(walk);
    let mut cfg = MasterConfig::default();
    cfg.sched.recovery = crate::config::Recovery::Off;
    let mut m = Master::new(&model, workers(1), cfg).unwrap();
    assert!(matches!(m.snapshot(), Err(Error::Config(_))));
    let snap = Snapshot {
        seed: 1,
        step: 0,
        epoch: 0,
        states: Vec::new(),
    };
    let other = MasterConfig {
        seed: 2,
        ..MasterConfig::default()
    };
    let err = Master::resume(&model, workers(1), other, snap)
        .err()
        .unwrap();
    assert!(err.to_string().contains("seed 1"), "{err}");
}
