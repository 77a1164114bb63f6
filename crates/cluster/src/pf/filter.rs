//! The filter itself: its model trait, its step and its run.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::between::{Between, Islands, PER_THREAD};
use super::particle::{PfInput, PfOutput};
use super::weights::{systematic_into, Weights};
use crate::engine::{Children, Engine};
use crate::error::Error;
use crate::evolve::{Batch, Evolve, Offspring, StateId};
use crate::rng::Rng;

/// A state-space model: a prior, a transition and an observation density.
pub trait SsModel: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The model's name for workers.
    const NAME: &'static str;
    /// A particle.
    type X: Serialize + DeserializeOwned + Send + Sync + Clone;
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

    /// The bootstrap step of a batch of particles (see
    /// [`Evolve::evolve_batch`]): each parent's children drawn from the
    /// prior (a parent that is `None`) or the transition, each weighed by
    /// its observation. It must give the bits the default gives, which
    /// calls [`SsModel::prior`] or [`SsModel::transition`], then
    /// [`SsModel::log_obs`] and [`SsModel::summary`], child after child,
    /// with parent `i`'s generator `batch.rng(i)`. A cheap model overrides
    /// it to hoist its constants out of the loop.
    fn evolve_batch(&self, batch: &Batch<'_, Bootstrap<Self>>, out: &mut Offspring<Bootstrap<Self>>)
    where
        Self: Sized,
    {
        for (i, (s, input)) in batch.states().iter().zip(batch.inputs()).enumerate() {
            let mut rng = batch.rng(i);
            for _ in 0..input.children {
                let (x, o) = child(self, s, input.t as usize, &mut rng);
                out.push(Some(x), o);
            }
            out.end_parent();
        }
    }
}

/// One child of `s` weighed by observation `t`: the per-particle step.
fn child<M: SsModel>(m: &M, s: &Option<M::X>, t: usize, rng: &mut Rng) -> (M::X, PfOutput) {
    let x = match s {
        None => m.prior(rng),
        Some(x) => m.transition(x, t - 1, rng),
    };
    let out = PfOutput {
        log_w: m.log_obs(&x, t),
        summary: m.summary(&x),
    };
    (x, out)
}

/// The bootstrap filter's evolve: `None` is a particle before the prior.
/// Register `Bootstrap<YourModel>` with the workers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Bootstrap<M>(pub M);

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
                let (x, o) = child(&self.0, s, t, rng);
                (Some(x), o)
            })
            .collect()
    }

    fn evolve_batch(&self, batch: &Batch<'_, Self>, out: &mut Offspring<Self>) {
        self.0.evolve_batch(batch, out);
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

impl PfConfig {
    /// Whether a filter can run with this configuration: at least one
    /// island, and the particles split evenly over the islands, at least
    /// one each.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] saying what does not hold.
    pub fn check(&self) -> Result<(), Error> {
        let bad = |what: String| Err(Error::Config(what));
        if self.islands == 0 {
            return bad("at least one island is needed".into());
        }
        if self.particles < self.islands {
            return bad(format!(
                "{} particles for {} islands: each island needs at least one",
                self.particles, self.islands
            ));
        }
        if self.particles % self.islands != 0 {
            return bad(format!(
                "{} islands do not divide {} particles",
                self.islands, self.particles
            ));
        }
        Ok(())
    }
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
    let mut w = vec![0.0; log_w.len()];
    let weights = Weights::set(log_w, &mut w);
    let mut inputs = vec![PfInput { t: 0, children: 0 }; log_w.len()];
    systematic_into(&w, weights.total, n, u, &mut inputs, 0);
    inputs.iter().map(|i| i.children).collect()
}

/// Where a filter run stands after a step: with a [`Master::snapshot`]
/// taken at the same moment, what a run resumes from ([`run_from`]).
///
/// [`Master::snapshot`]: crate::Master::snapshot
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PfState {
    /// Steps done.
    pub t: usize,
    /// Every island's particles in turn: island `r` is `ids[r·m ..
    /// (r+1)·m]`, `m` particles per island (the order the engine's
    /// steps take them in).
    pub ids: Vec<StateId>,
    /// Their last log-weights, in the same order.
    pub log_w: Vec<f64>,
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
pub fn run<M: SsModel, G: Engine<Bootstrap<M>> + Send>(
    engine: &mut G,
    model: &M,
    cfg: PfConfig,
    mut progress: impl FnMut(usize) + Send,
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
/// The particles travel as dense vectors ([`Engine::evolve_batch`]), and
/// the work between steps (weights, likelihood, resampling) is spread over
/// the engine's threads, by island or by block within the islands, with
/// the same bits either way. When that work is spread, the whole
/// run, `after_step` included, goes to a thread of rayon's pool, so that
/// each step's parallel parts start from a pool thread, not from the
/// calling thread.
///
/// # Errors
/// Whatever the engine or `after_step` returns.
///
/// # Panics
/// If `islands` is 0 or does not divide `particles`, or `start` does not
/// fit `cfg`.
pub fn run_from<M: SsModel, G: Engine<Bootstrap<M>> + Send>(
    engine: &mut G,
    model: &M,
    cfg: PfConfig,
    start: Option<PfState>,
    after_step: impl FnMut(&mut G, &PfState) -> Result<(), Error> + Send,
) -> Result<PfResult, Error> {
    if engine.threads() > 1
        && cfg.particles >= 2 * PER_THREAD
        && rayon::current_thread_index().is_none()
    {
        // Called from outside the pool, every parallel part of a step
        // (the engine's evolve, the islands' weights and resampling) is
        // a job sent to the pool and waited for: the pool's threads are
        // woken, the caller sleeps and is woken again, twice a step. From
        // a pool thread the caller's thread is one of the workers and
        // the others take their shares from it. `scope` runs its
        // closure on a pool thread when called from outside the pool.
        // Measured at 200,000 Nile particles on 2 threads: 1.6x one
        // thread from the calling thread, 1.9x from a pool thread
        // (bench/results/pf-run14).
        rayon::scope(|_| run_steps(engine, model, cfg, start, after_step))
    } else {
        run_steps(engine, model, cfg, start, after_step)
    }
}

/// [`run_from`] on this thread.
fn run_steps<M: SsModel, G: Engine<Bootstrap<M>>>(
    engine: &mut G,
    model: &M,
    cfg: PfConfig,
    start: Option<PfState>,
    mut after_step: impl FnMut(&mut G, &PfState) -> Result<(), Error>,
) -> Result<PfResult, Error> {
    cfg.check()?;
    let m = cfg.particles / cfg.islands;
    let mut st = match start {
        Some(s) => {
            if s.ids.len() != cfg.particles
                || s.log_w.len() != cfg.particles
                || s.log_z.len() != cfg.islands
            {
                return Err(Error::Config(format!(
                    "the filter state has {} particles in {} islands, the run {} in {}",
                    s.ids.len(),
                    s.log_z.len(),
                    cfg.particles,
                    cfg.islands
                )));
            }
            s
        }
        None => {
            let ids = engine.reset_states(vec![None; cfg.particles])?;
            PfState {
                t: 0,
                ids,
                log_w: vec![0.0; cfg.particles],
                log_z: vec![0.0f64; cfg.islands],
                means: Vec::with_capacity(model.steps()),
            }
        }
    };
    // The next step's inputs, every island's in turn.
    let mut inputs = vec![
        PfInput {
            t: st.t as u32,
            children: 1
        };
        cfg.particles
    ];
    let mut weights = vec![Weights::default(); cfg.islands];
    let mut between = Between::new(m);
    let mut out = Children::new();
    let seed = cfg.seed;
    // On a resumed run, the islands' weights from the last step
    // (recomputed from `log_w`) and the first step's inputs. A run from
    // the start has neither: its first step draws from the prior, one
    // child each, and the step sets every island's weights.
    if st.t > 0 {
        let next = (st.t < model.steps()).then_some((seed, st.t));
        between.resume(&st.log_w, &mut weights, &mut inputs, next);
    }
    let telemetry = engine.telemetry();
    if let Some(tel) = &telemetry {
        tel.set_total_steps(model.steps() as u64);
    }
    while st.t < model.steps() {
        let t = st.t;
        engine.evolve_batch(&st.ids, &inputs, &mut out)?;
        let islands = Islands {
            ids: &mut st.ids,
            log_w: &mut st.log_w,
            log_z: &mut st.log_z,
            weights: &mut weights,
            inputs: &mut inputs,
        };
        let next = (t + 1 < model.steps()).then_some((seed, t + 1));
        let nums = between.absorb(&out, islands, next, engine.threads());
        // The weighted mean over all islands: each island's weights are
        // scaled by its own max, so rescale them to the largest.
        let top = weights
            .iter()
            .map(|w| w.max)
            .fold(f64::NEG_INFINITY, f64::max);
        let (mut num, mut den, mut sq) = (0.0, 0.0, 0.0);
        for (w, n) in weights.iter().zip(nums) {
            let scale = (w.max - top).exp();
            if scale > 0.0 {
                num += scale * n;
                den += scale * w.total;
                sq += scale * scale * w.sq;
            }
        }
        st.means.push(num / den);
        st.t = t + 1;
        if let Some(tel) = &telemetry {
            // Over all islands: (Σ w)² / Σ w², the weights scaled alike.
            let ess = if sq > 0.0 { den * den / sq } else { 0.0 };
            let loglik = log_sum_exp(st.log_z.iter().copied()) - (cfg.islands as f64).ln();
            tel.record_pf_step(st.t as u64, loglik, ess, cfg.particles);
        }
        after_step(engine, &st)?;
    }
    engine.drop_states(&st.ids)?;
    if let Some(tel) = &telemetry {
        tel.finish();
    }
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

    /// The exact counts of systematic resampling, in rationals: particle
    /// `i` gets the positions k + u below its running sum S_i (scaled to
    /// `n`) and not below S_{i-1}.
    fn exact(w: &[u32], n: u32, u_num: u64, u_den: u64) -> Vec<u32> {
        let total: u64 = w.iter().map(|&x| u64::from(x)).sum();
        let mut prev = 0u64;
        let mut cum = 0u64;
        w.iter()
            .map(|&x| {
                cum += u64::from(x);
                // #{k ≥ 0 : k + u < n·cum/total} = ceil(n·cum/total − u), as
                // ceil((n·cum·u_den − u_num·total) / (total·u_den)).
                let num = (u64::from(n) * cum * u_den).saturating_sub(u_num * total);
                let below = num.div_ceil(total * u_den).min(u64::from(n));
                let c = below - prev;
                prev = below;
                c as u32
            })
            .collect()
    }

    proptest::proptest! {
        /// Against exact rational arithmetic on integer weights: the counts
        /// are the same except where a position falls within a rounding of
        /// a running sum, where one child may go to the neighbour; they
        /// always add up to `n`, and each is within one of its share.
        #[test]
        fn systematic_is_the_exact_rule_up_to_rounding(
            w in proptest::collection::vec(0u32..1000, 1..300),
            u_num in 0u64..1000,
        ) {
            proptest::prop_assume!(w.iter().any(|&x| x > 0));
            let n = w.len() as u32;
            let u = u_num as f64 / 1000.0;
            let log_w: Vec<f64> = w
                .iter()
                .map(|&x| if x == 0 { f64::NEG_INFINITY } else { f64::from(x).ln() })
                .collect();
            let got = systematic(&log_w, n as usize, u);
            let want = exact(&w, n, u_num, 1000);
            proptest::prop_assert_eq!(got.iter().sum::<u32>(), n);
            let total: f64 = w.iter().map(|&x| f64::from(x)).sum();
            for (i, (&g, &x)) in got.iter().zip(&w).enumerate() {
                let share = f64::from(n) * f64::from(x) / total;
                proptest::prop_assert!((f64::from(g) - share).abs() < 1.0 + 1e-9, "particle {i}: {g} children for a share of {share}");
                if x == 0 {
                    proptest::prop_assert_eq!(g, 0);
                }
            }
            let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            // A difference is a child moved across one boundary: two counts.
            proptest::prop_assert!(differ <= 2 * w.len() / 50 + 2, "{got:?} against {want:?}");
        }
    }
}
