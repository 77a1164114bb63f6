//! A bootstrap particle filter on any [`Engine`]: the flagship job.
//!
//! Particles are states on workers. Each step the master draws every
//! particle's number of children by systematic resampling from the last
//! weights and sends it as the input; the evolve propagates each child
//! through the transition and returns its log-weight and a summary. A
//! particle with no children dies.
//!
//! The particles are split into `islands` independent filters run in the
//! same `evolve_many` calls; each gives an unbiased likelihood estimate
//! Ẑ_r, the estimate is log(mean Ẑ_r), and its Monte-Carlo standard error
//! comes from the spread of the Ẑ_r (delta method):
//! se ≈ sd(Ẑ_r) / (√R · mean Ẑ_r).

use rand::Rng as _;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, Inputs};
use crate::error::Error;
use crate::evolve::{call_rng, Evolve, IdHash, Rng, StateId};

/// A state-space model: a prior, a transition and an observation density.
pub trait SsModel: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The model's name for workers.
    const NAME: &'static str;
    /// A particle.
    type X: Serialize + DeserializeOwned + Send + Clone;
    /// Number of observations.
    fn steps(&self) -> usize;
    /// A draw from the prior of the first latent value.
    fn prior(&self, rng: &mut Rng) -> Self::X;
    /// A draw of the latent value at `t + 1` given `x` at `t`.
    fn transition(&self, x: &Self::X, t: usize, rng: &mut Rng) -> Self::X;
    /// Log density of observation `t` given latent `x`.
    fn log_obs(&self, x: &Self::X, t: usize) -> f64;
    /// The number whose filtered mean is reported.
    fn summary(&self, x: &Self::X) -> f64;
}

/// The bootstrap filter's evolve: `None` is a particle before the prior.
/// Register `Bootstrap<YourModel>` with the workers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bootstrap<M>(pub M);

/// One particle's step: which observation, and how many children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfInput {
    /// The observation the children are weighed by.
    pub t: u32,
    /// How many children resampling gave the particle.
    pub children: u32,
}

/// A child's log-weight and summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PfOutput {
    /// Log density of observation `t` given the child.
    pub log_w: f64,
    /// [`SsModel::summary`] of the child.
    pub summary: f64,
}

impl<M: SsModel> Evolve for Bootstrap<M> {
    const NAME: &'static str = M::NAME;
    type State = Option<M::X>;
    type Input = PfInput;
    type Output = PfOutput;

    /// One propagation per child, plus the call.
    fn expected_cost(&self, i: &PfInput) -> f64 {
        f64::from(i.children) + 0.25
    }

    fn evolve(
        &self,
        s: &Option<M::X>,
        i: &PfInput,
        rng: &mut Rng,
    ) -> Vec<(Option<M::X>, PfOutput)> {
        let t = i.t as usize;
        (0..i.children)
            .map(|_| {
                let x = match s {
                    None => self.0.prior(rng),
                    Some(x) => self.0.transition(x, t - 1, rng),
                };
                let out = PfOutput {
                    log_w: self.0.log_obs(&x, t),
                    summary: self.0.summary(&x),
                };
                (Some(x), out)
            })
            .collect()
    }
}

/// How to run the filter.
#[derive(Debug, Clone, Copy)]
pub struct PfConfig {
    /// Particles in all, split evenly over the islands.
    pub particles: usize,
    /// Independent filters (≥ 2 for a standard error).
    pub islands: usize,
    /// Seed of the master's resampling draws.
    pub seed: u64,
}

/// What the filter estimated.
#[derive(Debug, Clone, PartialEq)]
pub struct PfResult {
    /// Estimate of the log-likelihood, log(mean over islands of Ẑ_r).
    pub loglik: f64,
    /// Its Monte-Carlo standard error; NaN with one island (the spread of
    /// the islands' estimates is what measures it).
    pub loglik_se: f64,
    /// Weighted mean of the summary at each step, over all particles.
    pub filtered_means: Vec<f64>,
    /// log Ẑ_r per island.
    pub island_logliks: Vec<f64>,
    /// Particles in all.
    pub particles: usize,
}

fn log_sum_exp(v: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = v.clone().fold(f64::NEG_INFINITY, f64::max);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + v.map(|x| (x - m).exp()).sum::<f64>().ln()
}

/// Numbers of children of each particle: systematic resampling of `log_w`
/// into `n` particles with the single uniform `u` in [0, 1).
pub fn systematic(log_w: &[f64], n: usize, u: f64) -> Vec<u32> {
    let w = Weights::new(log_w);
    systematic_w(&w.w, w.total, n, u)
}

/// [`systematic`] on weights already scaled by the largest (`w`, summing
/// to `total`).
fn systematic_w(w: &[f64], total: f64, n: usize, u: f64) -> Vec<u32> {
    let mut counts = vec![0u32; w.len()];
    let mut cum = 0.0;
    let mut k = 0usize;
    for (i, wi) in w.iter().enumerate() {
        cum += wi / total * n as f64;
        while k < n && (k as f64 + u) < cum {
            counts[i] += 1;
            k += 1;
        }
    }
    // Rounding may leave the last few positions unassigned.
    if let Some(last) = counts.iter().rposition(|_| true) {
        counts[last] += (n - k) as u32;
    }
    counts
}

/// An island's weights exp(log_w − max), their sum and the max: one `exp`
/// per particle serves the likelihood, the filtered mean and the next
/// resampling.
struct Weights {
    w: Vec<f64>,
    total: f64,
    max: f64,
}

impl Weights {
    fn new(log_w: &[f64]) -> Self {
        let max = log_w.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let w: Vec<f64> = log_w.iter().map(|l| (l - max).exp()).collect();
        let total = w.iter().sum();
        Weights { w, total, max }
    }

    /// log Σ exp(log_w).
    fn log_sum(&self) -> f64 {
        if self.max == f64::NEG_INFINITY {
            self.max
        } else {
            self.max + self.total.ln()
        }
    }
}

/// Where a filter run stands after a step: with a [`Master::snapshot`]
/// taken at the same moment, what a run resumes from ([`run_from`]).
///
/// [`Master::snapshot`]: crate::Master::snapshot
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PfState {
    /// Steps done.
    pub t: usize,
    /// Each island's particles, in order.
    pub islands: Vec<Vec<StateId>>,
    /// Each island's particles' last log-weights.
    pub log_w: Vec<Vec<f64>>,
    /// log Ẑ_r so far, per island.
    pub log_z: Vec<f64>,
    /// Filtered means so far.
    pub means: Vec<f64>,
}

/// Runs the filter on `engine`, calling `progress` after each step.
///
/// # Errors
/// Whatever the engine returns.
///
/// # Panics
/// If `islands` is 0 or does not divide `particles`.
pub fn run<M: SsModel, G: Engine<Bootstrap<M>>>(
    engine: &mut G,
    model: &M,
    cfg: PfConfig,
    mut progress: impl FnMut(usize),
) -> Result<PfResult, Error> {
    run_from(engine, model, cfg, None, |_, s| {
        progress(s.t);
        Ok(())
    })
}

/// Runs the filter on `engine` from the start, or from `start` (a state an
/// earlier run's `after_step` saw, with the engine resumed from a snapshot
/// taken at that moment), calling `after_step` after each step: the place
/// to record progress, or to take a snapshot for a later resume. A resumed
/// run gives the same result, bit for bit, as one that never stopped.
///
/// # Errors
/// Whatever the engine or `after_step` returns.
///
/// # Panics
/// If `islands` is 0 or does not divide `particles`, or `start` does not
/// fit `cfg`.
pub fn run_from<M: SsModel, G: Engine<Bootstrap<M>>>(
    engine: &mut G,
    model: &M,
    cfg: PfConfig,
    start: Option<PfState>,
    mut after_step: impl FnMut(&mut G, &PfState) -> Result<(), Error>,
) -> Result<PfResult, Error> {
    assert!(
        cfg.islands > 0 && cfg.particles % cfg.islands == 0,
        "islands must divide particles"
    );
    let m = cfg.particles / cfg.islands;
    let mut st = match start {
        Some(s) => {
            assert!(
                s.islands.len() == cfg.islands && s.log_z.len() == cfg.islands,
                "the filter state has {} islands, the run {}",
                s.islands.len(),
                cfg.islands
            );
            s
        }
        None => {
            let ids = engine.reset_states(vec![None; cfg.particles])?;
            PfState {
                t: 0,
                islands: ids.chunks(m).map(<[StateId]>::to_vec).collect(),
                log_w: vec![vec![0.0; m]; cfg.islands],
                log_z: vec![0.0f64; cfg.islands],
                means: Vec::with_capacity(model.steps()),
            }
        }
    };
    // The islands' weights from the last step (recomputed from `log_w`
    // on a resumed run).
    let mut weights: Vec<Weights> = st.log_w.iter().map(|lw| Weights::new(lw)).collect();
    while st.t < model.steps() {
        let t = st.t;
        let mut inputs = Inputs::<Bootstrap<M>>::with_capacity_and_hasher(cfg.particles, IdHash);
        for (r, (ids, w)) in st.islands.iter().zip(&weights).enumerate() {
            let counts = if t == 0 {
                vec![1; m]
            } else {
                let u = call_rng(cfg.seed, t as u64, StateId(r as u64)).random::<f64>();
                systematic_w(&w.w, w.total, m, u)
            };
            for (&id, c) in ids.iter().zip(counts) {
                inputs.insert(
                    id,
                    PfInput {
                        t: t as u32,
                        children: c,
                    },
                );
            }
        }
        let out = engine.evolve_many(inputs)?;
        let mut summaries = Vec::with_capacity(cfg.islands);
        let islands = st.islands.iter_mut().zip(&mut st.log_w);
        for ((ids, log_w), (log_z, weights)) in islands.zip(st.log_z.iter_mut().zip(&mut weights)) {
            let (mut next, mut lw, mut summary) = (
                Vec::with_capacity(m),
                Vec::with_capacity(m),
                Vec::with_capacity(m),
            );
            for parent in ids.iter() {
                for (c, o) in &out[parent] {
                    next.push(*c);
                    lw.push(o.log_w);
                    summary.push(o.summary);
                }
            }
            let w = Weights::new(&lw);
            *log_z += w.log_sum() - (m as f64).ln();
            *ids = next;
            *log_w = lw;
            *weights = w;
            summaries.push(summary);
        }
        drop(out);
        // The weighted mean over all islands: each island's weights are
        // scaled by its own max, so rescale them to the largest.
        let top = weights
            .iter()
            .map(|w| w.max)
            .fold(f64::NEG_INFINITY, f64::max);
        let (mut num, mut den) = (0.0, 0.0);
        for (w, s) in weights.iter().zip(&summaries) {
            let scale = (w.max - top).exp();
            if scale > 0.0 {
                num += scale * w.w.iter().zip(s).map(|(wi, si)| wi * si).sum::<f64>();
                den += scale * w.total;
            }
        }
        st.means.push(num / den);
        st.t = t + 1;
        after_step(engine, &st)?;
    }
    let all_ids: Vec<StateId> = st.islands.concat();
    engine.drop_states(&all_ids)?;
    let r = cfg.islands as f64;
    let log_z = st.log_z;
    let loglik = log_sum_exp(log_z.iter().copied()) - r.ln();
    // Ẑ_r / mean(Ẑ), in a stable scale.
    let rel: Vec<f64> = log_z.iter().map(|l| (l - loglik).exp()).collect();
    let var = if cfg.islands > 1 {
        rel.iter().map(|x| (x - 1.0).powi(2)).sum::<f64>() / (r - 1.0)
    } else {
        f64::NAN
    };
    Ok(PfResult {
        loglik,
        loglik_se: (var / r).sqrt(),
        filtered_means: st.means,
        island_logliks: log_z,
        particles: cfg.particles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systematic_conserves_count_and_follows_weights() {
        let lw = [0.0f64, f64::NEG_INFINITY, 2.0f64.ln(), 0.0];
        let c = systematic(&lw, 8, 0.5);
        assert_eq!(c.iter().sum::<u32>(), 8);
        assert_eq!(c, vec![2, 0, 4, 2]);
        let c = systematic(&[0.0; 3], 3, 0.999);
        assert_eq!(c, vec![1, 1, 1]);
    }
}
