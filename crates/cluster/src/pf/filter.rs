//! The filter itself: its model trait, its step and its run.

use rand::Rng as _;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::engine::{Children, Engine};
use crate::error::Error;
use crate::evolve::{Batch, Evolve, Offspring, StateId};
use crate::math::{exp_nonpos, widest};
use crate::rng::{call_rng, Rng};

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
    let (mut w, mut scratch) = (Weights::default(), Scratch::default());
    w.set(log_w, &mut scratch);
    let mut inputs = vec![PfInput { t: 0, children: 0 }; log_w.len()];
    systematic_into(&scratch.w, w.total, n, u, &mut inputs, 0);
    inputs.iter().map(|i| i.children).collect()
}

/// An island's weights exp(log_w − max), in a [`Scratch`]: their sum and
/// the max. One `exp` per particle serves the likelihood, the filtered
/// mean and the next resampling.
#[derive(Debug, Default)]
struct Weights {
    total: f64,
    max: f64,
}

/// The buffers of one island's work between steps, reused island after
/// island by the thread that does them (so they stay in its cache): the
/// weights, and the children's summaries gathered for [`weigh`].
#[derive(Debug, Default)]
struct Scratch {
    w: Vec<f64>,
    summary: Vec<f64>,
}

/// Lanes of the sums in [`weigh`].
const SUM_LANES: usize = 8;

/// `w[i] = e^(log_w[i] − max)` (a branch-free `exp` that vectorises,
/// within an ulp of libm's), and the sums of `w[i]` and of
/// `w[i] · summary[i]`, each as [`SUM_LANES`] running sums by position
/// added in a fixed order: the same bits whatever thread or engine made
/// the particles.
fn weigh(log_w: &[f64], summary: &[f64], max: f64, w: &mut Vec<f64>) -> (f64, f64) {
    assert_eq!(log_w.len(), summary.len());
    w.resize(log_w.len(), 0.0);
    weigh_widest(log_w, summary, max, w)
}

widest! {
    /// [`weigh_any`] on the widest vector unit.
    fn weigh_widest(log_w: &[f64], summary: &[f64], max: f64, w: &mut [f64]) -> (f64, f64) = weigh_any;
}

/// [`weigh`]'s loop.
#[inline(always)]
fn weigh_any(log_w: &[f64], summary: &[f64], max: f64, w: &mut [f64]) -> (f64, f64) {
    let (mut total, mut num) = ([0.0f64; SUM_LANES], [0.0f64; SUM_LANES]);
    let mut ws = w.chunks_exact_mut(SUM_LANES);
    let mut ls = log_w.chunks_exact(SUM_LANES);
    let mut ss = summary.chunks_exact(SUM_LANES);
    for ((w, l), s) in (&mut ws).zip(&mut ls).zip(&mut ss) {
        for k in 0..SUM_LANES {
            let e = exp_nonpos(l[k] - max);
            w[k] = e;
            total[k] += e;
            num[k] += e * s[k];
        }
    }
    let rest = ws.into_remainder().iter_mut().zip(ls.remainder());
    for (k, ((w, l), s)) in rest.zip(ss.remainder()).enumerate() {
        let e = exp_nonpos(l - max);
        *w = e;
        total[k] += e;
        num[k] += e * s;
    }
    let add =
        |a: [f64; SUM_LANES]| ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    (add(total), add(num))
}

/// The largest of `v` (−∞ if empty; NaNs ignored, as `f64::max` does), as
/// [`SUM_LANES`] running maxima: the same value as a fold, without its
/// chain of dependent comparisons.
fn max_of(v: &[f64]) -> f64 {
    let mut top = [f64::NEG_INFINITY; SUM_LANES];
    let mut chunks = v.chunks_exact(SUM_LANES);
    for c in &mut chunks {
        for k in 0..SUM_LANES {
            top[k] = top[k].max(c[k]);
        }
    }
    let rest = chunks.remainder().iter().copied();
    top.into_iter()
        .chain(rest)
        .fold(f64::NEG_INFINITY, f64::max)
}

impl Weights {
    /// The weights of `log_w`, into `scratch`.
    fn set(&mut self, log_w: &[f64], scratch: &mut Scratch) {
        let max = max_of(log_w);
        // The sum's bits do not depend on the summaries.
        let (total, _) = weigh(log_w, log_w, max, &mut scratch.w);
        self.total = total;
        self.max = max;
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

/// The particles a thread of the filter's own work needs before it spreads
/// the work over threads: below this, starting and joining one costs more
/// than it saves.
const PER_THREAD: usize = if cfg!(test) { 32 } else { 16_384 };

/// One island's share of the work between steps, and what it writes.
struct Island<'a> {
    /// The island's index.
    r: usize,
    /// The island's particles: the next step's parents.
    ids: &'a mut [StateId],
    log_w: &'a mut [f64],
    log_z: &'a mut f64,
    weights: &'a mut Weights,
    /// Their inputs.
    inputs: &'a mut [PfInput],
    /// Σ w·summary over the island's children (weights scaled by its max).
    num: f64,
}

impl Island<'_> {
    /// Takes in the island's children from the step just done: positions
    /// `r·m .. (r+1)·m` of `out` (every island has `m` particles, and its
    /// particles' children come together).
    fn absorb(&mut self, out: &Children<Bootstrap<impl SsModel>>, scratch: &mut Scratch) {
        let m = self.ids.len();
        let range = self.r * m..(self.r + 1) * m;
        let mut at = 0;
        let w = &mut *self.weights;
        scratch.summary.resize(m, 0.0);
        for (ids, outs) in out.slices(range) {
            let n = ids.len();
            self.ids[at..at + n].copy_from_slice(ids);
            let dst = self.log_w[at..at + n]
                .iter_mut()
                .zip(&mut scratch.summary[at..at + n]);
            crate::vectorised(|| {
                for ((l, s), o) in dst.zip(outs) {
                    *l = o.log_w;
                    *s = o.summary;
                }
            });
            at += n;
        }
        assert_eq!(at, m, "an island's particles had {at} children, not {m}");
        let max = max_of(self.log_w);
        // The weights, their sum (the bits of `Weights::set`, which a
        // resumed run uses) and the weighted sum of summaries.
        let (total, num) = weigh(self.log_w, &scratch.summary, max, &mut scratch.w);
        w.max = max;
        w.total = total;
        self.num = num;
        *self.log_z += w.log_sum() - (m as f64).ln();
    }

    /// The island's inputs for step `t`: systematic resampling of its
    /// weights (in `scratch`, from [`Island::absorb`] or [`Weights::set`]
    /// just before) with the run's uniform for (`t`, island).
    fn resample(&mut self, seed: u64, t: usize, scratch: &Scratch) {
        let m = self.inputs.len();
        let u = call_rng(seed, t as u64, StateId(self.r as u64)).random::<f64>();
        systematic_into(&scratch.w, self.weights.total, m, u, self.inputs, t);
    }
}

/// Systematic resampling of weights `w` (summing to `total`) into as many
/// particles with the uniform `u`: particle `i` gets the positions
/// `k + u` (k = 0, 1, …) that fall below its running sum of weights and
/// not below the one before, written as its input for step `t`.
///
/// The running sums are kept in fixed point, in units of 2^-F of a
/// position with F = 50 − (bits of `n`) (at least 2^-26 of a position for
/// any island under 16 M particles): each scaled weight is rounded to the
/// nearest unit once, and the sums of those integers are exact, so the
/// loop's chain of dependent additions is one integer add per particle,
/// not a floating-point one, and the result does not depend on any
/// rounding along the sum. A particle's count is the difference of two
/// ceilings, in integers.
fn systematic_into(w: &[f64], total: f64, n: usize, u: f64, inputs: &mut [PfInput], t: usize) {
    // 1.5 · 2^52: adding it to a number of magnitude below 2^51 rounds it
    // to an integer, held in the low bits of the sum.
    const SHIFT: f64 = 6_755_399_441_055_744.0;
    let frac = 50 - (usize::BITS - n.leading_zeros()).min(50);
    let unit = (1u64 << frac) as f64;
    let limit = (1u64 << 50) as f64;
    // round(v · 2^F), v in [0, n]; NaN (a degenerate island) as 0.
    let fixed = |v: f64| ((v * unit).max(0.0).min(limit) + SHIFT).to_bits() - SHIFT.to_bits();
    let scale = n as f64 / total;
    let (uu, one, n64) = (fixed(u), (1u64 << frac) - 1, n as u64);
    let (mut cum, mut k) = (0u64, 0u64);
    for (inp, wi) in inputs.iter_mut().zip(w) {
        cum += fixed(wi * scale);
        // Positions below `cum`: k + u < cum for k < ceil(cum − u).
        let below = ((cum.saturating_sub(uu) + one) >> frac).min(n64);
        *inp = PfInput {
            t: t as u32,
            children: (below - k) as u32,
        };
        k = below;
    }
    // Rounding may leave the last few positions unassigned.
    if let Some(last) = inputs.last_mut() {
        last.children += (n64 - k) as u32;
    }
}

/// Runs `f` on every island, on up to `threads` threads (contiguous runs
/// of islands), or on this thread when the islands are too small to share.
fn each_island(
    islands: &mut [Island<'_>],
    scratch: &mut Vec<Scratch>,
    threads: usize,
    particles: usize,
    f: impl Fn(&mut Island<'_>, &mut Scratch) + Sync,
) {
    let t = threads
        .min(islands.len())
        .min(particles / PER_THREAD)
        .max(1);
    if scratch.len() < t {
        scratch.resize_with(t, Scratch::default);
    }
    if t == 1 {
        let s = &mut scratch[0];
        islands.iter_mut().for_each(|i| f(i, s));
        return;
    }
    // `t` runs of islands, each a task on the pool's threads (started
    // once per process, not once per step) with a scratch of its own.
    use rayon::iter::{IndexedParallelIterator, IntoParallelRefMutIterator, ParallelIterator};
    use rayon::slice::ParallelSliceMut;
    let per = islands.len().div_ceil(t);
    islands
        .par_chunks_mut(per)
        .zip(scratch.par_iter_mut())
        .with_max_len(1)
        .for_each(|(run, s)| run.iter_mut().for_each(|i| f(i, s)));
}

/// Runs the filter on `engine` from the start, or from `start` (a state an
/// earlier run's `after_step` saw, with the engine resumed from a snapshot
/// taken at that moment), calling `after_step` after each step: the place
/// to record progress, or to take a snapshot for a later resume. A resumed
/// run gives the same result, bit for bit, as one that never stopped.
///
/// The particles travel as dense vectors ([`Engine::evolve_batch`]), and
/// the work between steps (weights, likelihood, resampling) is spread over
/// the engine's threads by island. When that work is spread, the whole
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
    assert!(
        cfg.islands > 0 && cfg.particles % cfg.islands == 0,
        "islands must divide particles"
    );
    let m = cfg.particles / cfg.islands;
    let mut st = match start {
        Some(s) => {
            assert!(
                s.ids.len() == cfg.particles
                    && s.log_w.len() == cfg.particles
                    && s.log_z.len() == cfg.islands,
                "the filter state has {} particles in {} islands, the run {} in {}",
                s.ids.len(),
                s.log_z.len(),
                cfg.particles,
                cfg.islands
            );
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
    let mut weights: Vec<Weights> = (0..cfg.islands).map(|_| Weights::default()).collect();
    let mut scratch = vec![Scratch::default()];
    let mut out = Children::new();
    let seed = cfg.seed;
    // On a resumed run, the islands' weights from the last step
    // (recomputed from `log_w`) and the first step's inputs. A run from
    // the start has neither: its first step draws from the prior, one
    // child each, and the step sets every island's weights.
    for (r, w) in weights.iter_mut().enumerate().filter(|_| st.t > 0) {
        w.set(&st.log_w[r * m..(r + 1) * m], &mut scratch[0]);
        if st.t < model.steps() {
            let mut isl = Island {
                r,
                ids: &mut st.ids[r * m..(r + 1) * m],
                log_w: &mut st.log_w[r * m..(r + 1) * m],
                log_z: &mut st.log_z[r],
                weights: w,
                inputs: &mut inputs[r * m..(r + 1) * m],
                num: 0.0,
            };
            isl.resample(seed, st.t, &scratch[0]);
        }
    }
    while st.t < model.steps() {
        let t = st.t;
        engine.evolve_batch(&st.ids, &inputs, &mut out)?;
        let threads = engine.threads();
        let mut islands: Vec<Island<'_>> = st
            .ids
            .chunks_mut(m)
            .zip(st.log_w.chunks_mut(m))
            .zip(st.log_z.iter_mut().zip(&mut weights))
            .zip(inputs.chunks_mut(m))
            .enumerate()
            .map(|(r, (((ids, log_w), (log_z, weights)), inputs))| Island {
                r,
                ids,
                log_w,
                log_z,
                weights,
                inputs,
                num: 0.0,
            })
            .collect();
        let last = t + 1 == model.steps();
        each_island(
            &mut islands,
            &mut scratch,
            threads,
            cfg.particles,
            |isl, s| {
                isl.absorb(&out, s);
                if !last {
                    isl.resample(seed, t + 1, s);
                }
            },
        );
        // The weighted mean over all islands: each island's weights are
        // scaled by its own max, so rescale them to the largest.
        let top = islands
            .iter()
            .map(|i| i.weights.max)
            .fold(f64::NEG_INFINITY, f64::max);
        let (mut num, mut den) = (0.0, 0.0);
        for i in &islands {
            let scale = (i.weights.max - top).exp();
            if scale > 0.0 {
                num += scale * i.num;
                den += scale * i.weights.total;
            }
        }
        drop(islands);
        st.means.push(num / den);
        st.t = t + 1;
        after_step(engine, &st)?;
    }
    engine.drop_states(&st.ids)?;
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
