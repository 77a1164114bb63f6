//! Models and helpers shared by the integration tests and the crate's own
//! tests (`src/tests`), written against the public API.
#![allow(dead_code)]

use rand::Rng as _;
use serde::{Deserialize, Serialize};
use statepipe_cluster::config::{Batch, Placement, SchedConfig};
use statepipe_cluster::{Evolve, Master, MasterConfig, MasterImpl, Registry, Rng};

/// Random children (0..=max) with random outputs; panics on input `u32::MAX`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Branchy {
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

/// Sleeps for its input's cost, then has its input's number of children.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Nap;

/// What one call of [`Nap`] does.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct NapInput {
    pub cost_us: u32,
    pub children: u32,
}

impl Evolve for Nap {
    const NAME: &'static str = "test-nap";
    type State = u64;
    type Input = NapInput;
    type Output = u64;

    fn expected_cost(&self, i: &NapInput) -> f64 {
        f64::from(i.cost_us) + 10.0
    }

    fn evolve(&self, s: &u64, i: &NapInput, rng: &mut Rng) -> Vec<(u64, u64)> {
        std::thread::sleep(std::time::Duration::from_micros(u64::from(i.cost_us)));
        (0..i.children)
            .map(|_| {
                let c = s.wrapping_add(rng.random::<u64>());
                (c, c >> 32)
            })
            .collect()
    }
}

/// One child the size of its parent, a random byte of it changed: states
/// that stay large from step to step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Big;

/// Bytes serialised as one byte string (a `Vec<u8>` goes byte by byte,
/// which takes seconds for a large state in a debug build).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blob(pub Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Bytes;
        impl serde::de::Visitor<'_> for Bytes {
            type Value = Blob;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a byte string")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Blob, E> {
                Ok(Blob(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Blob, E> {
                Ok(Blob(v))
            }
        }
        d.deserialize_byte_buf(Bytes)
    }
}

impl Evolve for Big {
    const NAME: &'static str = "test-big";
    type State = Blob;
    type Input = u32;
    type Output = u8;

    fn evolve(&self, s: &Blob, _: &u32, rng: &mut Rng) -> Vec<(Blob, u8)> {
        let mut c = s.0.clone();
        if !c.is_empty() {
            let at = rng.random_range(0..c.len());
            c[at] = rng.random();
        }
        let first = c.first().copied().unwrap_or(0);
        vec![(Blob(c), first)]
    }
}

pub(crate) fn registry() -> Registry {
    Registry::new()
        .with::<Branchy>()
        .with::<Nap>()
        .with::<Big>()
}

/// A config that forces steals: every state starts on worker 0, batches of 1.
pub(crate) fn stealing(imp: MasterImpl, seed: u64) -> MasterConfig {
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

pub(crate) fn threads<E: Evolve>(model: &E, n: usize, cfg: MasterConfig) -> Master<E> {
    threads_with(model, n, registry(), cfg)
}

pub(crate) fn threads_with<E: Evolve>(
    model: &E,
    n: usize,
    registry: Registry,
    cfg: MasterConfig,
) -> Master<E> {
    Master::on_threads(model, n, registry, cfg).expect("in-process cluster")
}
