//! Models and helpers shared by the integration tests.
#![allow(dead_code)]

use rand::Rng as _;
use serde::{Deserialize, Serialize};
use statepipe_cluster::evolve::{Evolve, Rng};
use statepipe_cluster::master::sched::{Batch, Placement, SchedConfig};
use statepipe_cluster::master::{Master, MasterConfig, MasterImpl};
use statepipe_cluster::registry::Registry;

/// Random children (0..=max) with random outputs; panics on input `u32::MAX`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Branchy {
    pub max: u32,
}

impl Evolve for Branchy {
    const NAME: &'static str = "test-branchy";
    type State = (u64, Vec<u8>);
    type Input = u32;
    type Output = (u64, f64);

    fn evolve(
        &self,
        s: &(u64, Vec<u8>),
        i: &u32,
        rng: &mut Rng,
    ) -> Vec<((u64, Vec<u8>), (u64, f64))> {
        assert!(*i != u32::MAX, "asked to panic");
        let n = if *i > 0 {
            *i
        } else {
            rng.random_range(0..=self.max)
        };
        (0..n)
            .map(|k| {
                let v = s.0 ^ rng.random::<u64>() ^ u64::from(k);
                ((v, vec![k as u8; (v % 7) as usize]), (v, rng.random()))
            })
            .collect()
    }
}

pub fn registry() -> Registry {
    Registry::builtin().with::<Branchy>()
}

/// A config that forces steals: every state starts on worker 0, batches of 1.
pub fn stealing(imp: MasterImpl, seed: u64) -> MasterConfig {
    MasterConfig {
        imp,
        seed,
        sched: SchedConfig {
            batch: Batch::Fixed(1),
            pipeline: 1,
            steal: true,
            placement: Placement::First,
            // Dynamic steals only: a start-of-step rebalance would spread
            // the states before any worker ran dry.
            rebalance: false,
            ..SchedConfig::default()
        },
        ..MasterConfig::default()
    }
}

pub fn threads<E: Evolve>(model: &E, n: usize, cfg: MasterConfig) -> Master<E> {
    statepipe_cluster::spawn::in_process(model, n, registry(), cfg).expect("in-process cluster")
}
