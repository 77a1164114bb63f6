//! The module's functions: the engine's random numbers for drivers, the
//! per-call overhead baseline, secrets.

use pyo3::prelude::*;
use serde_bytes::ByteBuf;
use statepipe_cluster::{call_rng, Engine as _, Local, Secret, StateId};

use crate::model::StateRng;
use crate::to_py;

/// The generator `statepipe_cluster::call_rng(seed, step, parent)` gives a
/// call, as the `Rng` an evolve receives (for drivers and for `reset`).
#[pyfunction]
pub(crate) fn call_rng_for(seed: u64, step: u64, parent: u64) -> StateRng {
    StateRng::new(&mut call_rng(seed, step, StateId(parent)))
}

/// A uniform draw in [0, 1) from `call_rng(seed, step, parent)`: the
/// resampling draw of the particle filter (the same as the Rust filter's).
#[pyfunction]
pub(crate) fn call_uniform(seed: u64, step: u64, parent: u64) -> f64 {
    use rand::Rng as _;
    call_rng(seed, step, StateId(parent)).random::<f64>()
}

/// The Rust reference for the per-call overhead benchmark: a model whose
/// states, inputs and outputs are bytes, as a Python model's are, and whose
/// evolve returns its state unchanged with an empty output.
#[derive(serde::Serialize, serde::Deserialize)]
struct NoopBytes;

impl statepipe_cluster::Evolve for NoopBytes {
    const NAME: &'static str = "statepipe-python-noop";
    type State = ByteBuf;
    type Input = ByteBuf;
    type Output = ByteBuf;
    fn evolve(
        &self,
        s: &ByteBuf,
        _: &ByteBuf,
        _: &mut statepipe_cluster::Rng,
    ) -> Vec<(ByteBuf, ByteBuf)> {
        vec![(s.clone(), ByteBuf::new())]
    }
}

/// Seconds `Local` takes for `steps` evolve_many calls over `n` states of
/// the Rust no-op model (states and inputs: the given pickled bytes): the
/// baseline of the Python model's per-call overhead.
#[pyfunction]
pub(crate) fn bench_rust_noop(
    py: Python<'_>,
    n: usize,
    steps: usize,
    state: Vec<u8>,
    input: Vec<u8>,
) -> PyResult<f64> {
    py.detach(|| {
        let mut e = Local::new(NoopBytes, 1);
        let mut ids = e.reset_states(vec![ByteBuf::from(state); n])?;
        let t0 = std::time::Instant::now();
        for _ in 0..steps {
            let inputs = ids
                .iter()
                .map(|&i| (i, ByteBuf::from(input.clone())))
                .collect();
            let out = e.evolve_many(inputs)?;
            ids = ids.iter().map(|p| out[p][0].0).collect();
        }
        Ok(t0.elapsed().as_secs_f64())
    })
    .map_err(to_py)
}

/// A fresh random secret, as text.
#[pyfunction]
pub(crate) fn random_secret() -> String {
    Secret::random().as_text()
}
