//! The filter's work between two evolves: taking in the children, their
//! weights, the likelihood, the filtered mean's sums and the next
//! resampling, spread over the engine's threads.
//!
//! Where the islands split evenly over the threads, each task takes whole
//! islands, one after the other, each start to finish in a scratch of its
//! own (so an island's arrays stay in the core's cache through every
//! pass). Where they do not (20 islands on 16 threads would be 10 tasks of
//! two), every pass is spread over all the islands' blocks instead, with a
//! join between passes. Both give the same bits: every sum is taken by
//! blocks (`super::weights`).

use std::ops::Range;

use super::particle::{PfInput, PfOutput};
use super::weights::{
    blocks, max_of, systematic_into, uniform, weigh, weigh_island, Systematic, Weights,
};
use crate::engine::Children;
use crate::evolve::{Evolve, StateId};

/// The particles the work between steps needs before it spreads over
/// threads: below this, starting and joining tasks costs more than it
/// saves.
pub(super) const PER_THREAD: usize = if cfg!(test) { 32 } else { 16_384 };

/// What a block gives its island's sums.
#[derive(Debug, Default, Clone, Copy)]
struct Part {
    max: f64,
    total: f64,
    num: f64,
    sq: f64,
    /// The fixed-point sum of its scaled weights, then the island's
    /// running sum where the block starts.
    cum: u64,
}

/// The buffers of one task's islands, reused island after island: the
/// weights, and the children's summaries gathered for [`weigh`].
#[derive(Debug, Default)]
struct Scratch {
    w: Vec<f64>,
    summary: Vec<f64>,
}

/// Every island's arrays, which [`Between::absorb`] changes.
pub(super) struct Islands<'a> {
    /// Every island's particles in turn: the next step's parents.
    pub(super) ids: &'a mut [StateId],
    /// Their log-weights.
    pub(super) log_w: &'a mut [f64],
    /// log Ẑ_r so far, per island.
    pub(super) log_z: &'a mut [f64],
    /// Each island's weights.
    pub(super) weights: &'a mut [Weights],
    /// Every particle's next input.
    pub(super) inputs: &'a mut [PfInput],
}

/// The work between steps of a run with islands of `m` particles, and its
/// buffers, kept from step to step.
#[derive(Debug)]
pub(super) struct Between {
    m: usize,
    /// The blocks of an island.
    bounds: Vec<Range<usize>>,
    /// One per task of the island by island way.
    scratch: Vec<Scratch>,
    /// The block by block way's: every particle's weight and summary,
    /// every island's blocks in turn.
    w: Vec<f64>,
    summary: Vec<f64>,
    parts: Vec<Part>,
}

impl Between {
    /// For islands of `m` particles.
    pub(super) fn new(m: usize) -> Between {
        Between {
            m,
            bounds: blocks(m),
            scratch: vec![Scratch::default()],
            w: Vec::new(),
            summary: Vec::new(),
            parts: Vec::new(),
        }
    }

    /// A resumed run's weights (from every island's `log_w`) and, with
    /// `next = Some((seed, t))`, every island's inputs for step `t`.
    pub(super) fn resume(
        &mut self,
        log_w: &[f64],
        weights: &mut [Weights],
        inputs: &mut [PfInput],
        next: Option<(u64, usize)>,
    ) {
        let m = self.m;
        let w = &mut self.scratch[0].w;
        w.resize(m, 0.0);
        for (r, wt) in weights.iter_mut().enumerate() {
            *wt = Weights::set(&log_w[r * m..(r + 1) * m], w);
            if let Some((seed, t)) = next {
                let (u, inp) = (uniform(seed, t, r), &mut inputs[r * m..(r + 1) * m]);
                systematic_into(w, wt.total, m, u, inp, t);
            }
        }
    }

    /// Takes in, on up to `threads` threads, the children of the step
    /// just done from `out` (island `r`'s at positions `r·m .. (r+1)·m`:
    /// every island has `m` particles, and its particles' children come
    /// together), sets each island's weights and adds its step's
    /// likelihood to `log_z`, and with `next = Some((seed, t))` resamples
    /// every island for step `t`. Returns each island's Σ w·summary
    /// (weights scaled by its max).
    pub(super) fn absorb<E: Evolve<Output = PfOutput>>(
        &mut self,
        out: &Children<E>,
        isl: Islands<'_>,
        next: Option<(u64, usize)>,
        threads: usize,
    ) -> Vec<f64> {
        let islands = isl.log_z.len();
        let units = islands * self.bounds.len();
        let tasks = if threads > 1 && islands * self.m >= 2 * PER_THREAD {
            threads.min(units)
        } else {
            1
        };
        // Whole islands where they split evenly over the tasks, or are
        // many enough that the last round of them is a small share.
        if tasks == 1 || islands % tasks == 0 || islands >= 4 * tasks {
            self.by_island(out, isl, next, tasks.min(islands))
        } else {
            self.by_block(out, isl, next, tasks)
        }
    }

    /// [`Between::absorb`] as `tasks` runs of whole islands.
    fn by_island<E: Evolve<Output = PfOutput>>(
        &mut self,
        out: &Children<E>,
        isl: Islands<'_>,
        next: Option<(u64, usize)>,
        tasks: usize,
    ) -> Vec<f64> {
        let (m, bounds) = (self.m, &self.bounds);
        let mut nums = vec![0.0; isl.log_z.len()];
        let mut units: Vec<(usize, Island<'_>, &mut f64)> = isl
            .ids
            .chunks_mut(m)
            .zip(isl.log_w.chunks_mut(m))
            .zip(isl.log_z.iter_mut().zip(isl.weights.iter_mut()))
            .zip(isl.inputs.chunks_mut(m).zip(nums.iter_mut()))
            .enumerate()
            .map(|(r, (((ids, log_w), (log_z, weights)), (inputs, num)))| {
                let island = Island {
                    ids,
                    log_w,
                    log_z,
                    weights,
                    inputs,
                };
                (r, island, num)
            })
            .collect();
        if self.scratch.len() < tasks {
            self.scratch.resize_with(tasks, Scratch::default);
        }
        let one = |(r, island, num): &mut (usize, Island<'_>, &mut f64), sc: &mut Scratch| {
            **num = island.step(out, *r * m, bounds, sc, next.map(|(s, t)| (s, t, *r)));
        };
        if tasks <= 1 {
            let sc = &mut self.scratch[0];
            units.iter_mut().for_each(|u| one(u, sc));
            return nums;
        }
        use rayon::iter::{IndexedParallelIterator, IntoParallelRefMutIterator, ParallelIterator};
        use rayon::slice::ParallelSliceMut;
        let per = units.len().div_ceil(tasks);
        units
            .par_chunks_mut(per)
            .zip(self.scratch.par_iter_mut())
            .with_max_len(1)
            .for_each(|(run, sc)| run.iter_mut().for_each(|u| one(u, sc)));
        drop(units);
        nums
    }

    /// [`Between::absorb`] as passes over every island's blocks, each
    /// spread over `tasks` tasks.
    fn by_block<E: Evolve<Output = PfOutput>>(
        &mut self,
        out: &Children<E>,
        isl: Islands<'_>,
        next: Option<(u64, usize)>,
        tasks: usize,
    ) -> Vec<f64> {
        let Islands {
            ids,
            log_w,
            log_z,
            weights,
            inputs,
        } = isl;
        let (m, nb) = (self.m, self.bounds.len());
        let k = log_z.len();
        self.w.resize(k * m, 0.0);
        self.summary.resize(k * m, 0.0);
        self.parts.resize(k * nb, Part::default());
        let (summary, w, parts) = (&mut self.summary, &mut self.w, &mut self.parts);
        let bounds = &self.bounds;
        // The children, and each block's max.
        let units = split(ids, m, bounds)
            .into_iter()
            .zip(split(log_w, m, bounds))
            .zip(split(summary, m, bounds))
            .zip(parts.iter_mut())
            .enumerate()
            .collect();
        each(units, tasks, |(u, (((ids, lw), sm), part))| {
            take(out, (u / nb) * m + bounds[u % nb].start, ids, lw, sm);
            part.max = max_of(lw);
        });
        for (wt, ps) in weights.iter_mut().zip(parts.chunks(nb)) {
            wt.max = ps.iter().map(|p| p.max).fold(f64::NEG_INFINITY, f64::max);
        }
        // The weights and each block's sums.
        let units = split(log_w, m, bounds)
            .into_iter()
            .zip(split(summary, m, bounds))
            .zip(split(w, m, bounds))
            .zip(parts.iter_mut())
            .enumerate()
            .collect();
        let maxima: Vec<f64> = weights.iter().map(|wt| wt.max).collect();
        each(units, tasks, |(u, (((lw, sm), w), part))| {
            (part.total, part.num, part.sq) = weigh(lw, sm, maxima[u / nb], w);
        });
        let mut nums = Vec::with_capacity(k);
        for ((wt, z), ps) in weights.iter_mut().zip(log_z).zip(parts.chunks(nb)) {
            wt.total = ps.iter().fold(0.0, |a, p| a + p.total);
            wt.sq = ps.iter().fold(0.0, |a, p| a + p.sq);
            nums.push(ps.iter().fold(0.0, |a, p| a + p.num));
            *z += wt.log_sum() - (m as f64).ln();
        }
        let Some((seed, t)) = next else {
            return nums;
        };
        let rules: Vec<Systematic> = weights
            .iter()
            .enumerate()
            .map(|(r, wt)| Systematic::new(wt.total, m, uniform(seed, t, r)))
            .collect();
        // Each block's sum, then where each block's running sum starts,
        // then each block's counts: those of one pass, the sums being
        // exact.
        let units = split(w, m, bounds)
            .into_iter()
            .zip(parts.iter_mut())
            .enumerate()
            .collect();
        each(units, tasks, |(u, (w, part))| {
            part.cum = rules[u / nb].sum(w)
        });
        for ps in parts.chunks_mut(nb) {
            let mut cum = 0;
            for p in ps {
                (p.cum, cum) = (cum, cum + p.cum);
            }
        }
        let units = split(w, m, bounds)
            .into_iter()
            .zip(split(inputs, m, bounds))
            .zip(parts.iter())
            .enumerate()
            .collect();
        each(units, tasks, |(u, ((w, inp), part))| {
            rules[u / nb].write(w, part.cum, inp, t, u % nb == nb - 1);
        });
        nums
    }
}

/// One island's arrays.
struct Island<'a> {
    ids: &'a mut [StateId],
    log_w: &'a mut [f64],
    log_z: &'a mut f64,
    weights: &'a mut Weights,
    inputs: &'a mut [PfInput],
}

impl Island<'_> {
    /// The island's step start to finish, its children at `start` in
    /// `out`, in `sc`, block after block; with `next = Some((seed, t,
    /// r))`, resampled for step `t` as island `r`. Returns its Σ
    /// w·summary.
    fn step<E: Evolve<Output = PfOutput>>(
        &mut self,
        out: &Children<E>,
        start: usize,
        bounds: &[Range<usize>],
        sc: &mut Scratch,
        next: Option<(u64, usize, usize)>,
    ) -> f64 {
        let m = self.ids.len();
        sc.summary.resize(m, 0.0);
        sc.w.resize(m, 0.0);
        take(out, start, self.ids, self.log_w, &mut sc.summary);
        let (weights, num) = weigh_island(self.log_w, &sc.summary, bounds, &mut sc.w);
        *self.weights = weights;
        *self.log_z += weights.log_sum() - (m as f64).ln();
        if let Some((seed, t, r)) = next {
            systematic_into(&sc.w, weights.total, m, uniform(seed, t, r), self.inputs, t);
        }
        num
    }
}

/// The children at `start .. start + ids.len()` of `out`: their ids,
/// log-weights and summaries.
fn take<E: Evolve<Output = PfOutput>>(
    out: &Children<E>,
    start: usize,
    ids: &mut [StateId],
    log_w: &mut [f64],
    summary: &mut [f64],
) {
    let mut at = 0;
    for (i, o) in out.slices(start..start + ids.len()) {
        let n = i.len();
        ids[at..at + n].copy_from_slice(i);
        let dst = log_w[at..at + n].iter_mut().zip(&mut summary[at..at + n]);
        crate::vectorised(|| {
            for ((l, s), o) in dst.zip(o) {
                *l = o.log_w;
                *s = o.summary;
            }
        });
        at += n;
    }
    assert_eq!(at, ids.len(), "{} particles had {at} children", ids.len());
}

/// `v` (islands of `m` in turn) cut into every island's `bounds` in turn.
fn split<'a, T>(v: &'a mut [T], m: usize, bounds: &[Range<usize>]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(v.len() / m.max(1) * bounds.len());
    for island in v.chunks_mut(m.max(1)) {
        let mut rest = island;
        for b in bounds {
            let (block, tail) = rest.split_at_mut(b.len());
            out.push(block);
            rest = tail;
        }
    }
    out
}

/// Runs `f` on every unit as `tasks` runs of contiguous units, each a task
/// on rayon's pool (started once per process, not once per step).
fn each<U: Send>(units: Vec<U>, tasks: usize, f: impl Fn(U) + Sync) {
    use rayon::iter::{IndexedParallelIterator, ParallelIterator};
    use rayon::slice::ParallelSliceMut;
    let per = units.len().div_ceil(tasks.max(1)).max(1);
    // Each run moves its units out of their slots, so that `f` takes them
    // by value.
    let mut slots: Vec<Option<U>> = units.into_iter().map(Some).collect();
    slots
        .par_chunks_mut(per)
        .with_max_len(1)
        .for_each(|run| run.iter_mut().filter_map(Option::take).for_each(&f));
}
