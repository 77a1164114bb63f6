//! An island's weights and its systematic resampling, by blocks.
//!
//! An island of `m` particles is cut into blocks of at most [`BLOCK`],
//! a function of `m` alone, and every sum over an island is its blocks'
//! sums added in block order: the bits depend on nothing else (threads,
//! engine, schedule). Resampling's running sums are integers (fixed
//! point), so a block can start from the exact sum of the blocks before
//! it and its counts are those of one pass over the island.

use std::ops::Range;

use rand::Rng as _;

use super::particle::PfInput;
use crate::evolve::StateId;
use crate::math::{exp_nonpos, widest};
use crate::rng::call_rng;

/// Particles a block has at most: an island of `m` is cut into
/// `ceil(m / BLOCK)` blocks of nearly equal size (each block's three
/// arrays of `f64` fit a core's L2 cache).
const BLOCK: usize = if cfg!(test) { 24 } else { 4_096 };

/// Lanes of the sums in [`weigh`].
const SUM_LANES: usize = 8;

/// The blocks of an island of `m` particles, as ranges within it: the
/// first `m mod b` of the `b = ceil(m / BLOCK)` blocks one longer.
pub(super) fn blocks(m: usize) -> Vec<Range<usize>> {
    let b = m.div_ceil(BLOCK).max(1);
    let (size, longer) = (m / b, m % b);
    let mut at = 0;
    (0..b)
        .map(|i| {
            let len = size + usize::from(i < longer);
            at += len;
            at - len..at
        })
        .collect()
}

/// An island's weights `exp(log_w − max)`: their sum, the sum of their
/// squares (the effective sample size, `total² / sq`) and the max. One
/// `exp` per particle serves the likelihood, the filtered mean and the
/// next resampling.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Weights {
    pub(super) total: f64,
    pub(super) sq: f64,
    pub(super) max: f64,
}

impl Weights {
    /// The weights of an island's `log_w` (one of a resumed run), into
    /// `w` (as long): the bits of the filter's steps.
    pub(super) fn set(log_w: &[f64], w: &mut [f64]) -> Weights {
        // The sum's bits do not depend on the summaries.
        weigh_island(log_w, log_w, &blocks(log_w.len()), w).0
    }

    /// log Σ exp(log_w).
    pub(super) fn log_sum(&self) -> f64 {
        if self.max == f64::NEG_INFINITY {
            self.max
        } else {
            self.max + self.total.ln()
        }
    }
}

/// An island's weights into `w` (as long as `log_w`), block by block of
/// `bounds` (its [`blocks`]), and Σ w·summary: its max, then each block's
/// sums added in block order.
pub(super) fn weigh_island(
    log_w: &[f64],
    summary: &[f64],
    bounds: &[Range<usize>],
    w: &mut [f64],
) -> (Weights, f64) {
    let max = bounds
        .iter()
        .map(|b| max_of(&log_w[b.clone()]))
        .fold(f64::NEG_INFINITY, f64::max);
    let (mut total, mut num, mut sq) = (0.0, 0.0, 0.0);
    for b in bounds {
        let (t, n, q) = weigh(
            &log_w[b.clone()],
            &summary[b.clone()],
            max,
            &mut w[b.clone()],
        );
        (total, num, sq) = (total + t, num + n, sq + q);
    }
    (Weights { total, sq, max }, num)
}

widest! {
    /// `w[i] = e^(log_w[i] − max)` (a branch-free `exp` that vectorises,
    /// within an ulp of libm's), and the sums of `w[i]`, of
    /// `w[i] · summary[i]` and of `w[i]²`, each as [`SUM_LANES`] running
    /// sums by position added in a fixed order, on the widest vector unit.
    pub(super) fn weigh(log_w: &[f64], summary: &[f64], max: f64, w: &mut [f64]) -> (f64, f64, f64) = weigh_any;
}

/// [`weigh`]'s loop.
#[inline(always)]
fn weigh_any(log_w: &[f64], summary: &[f64], max: f64, w: &mut [f64]) -> (f64, f64, f64) {
    assert!(log_w.len() == summary.len() && w.len() == log_w.len());
    let (mut total, mut num) = ([0.0f64; SUM_LANES], [0.0f64; SUM_LANES]);
    let mut sq = [0.0f64; SUM_LANES];
    let mut ws = w.chunks_exact_mut(SUM_LANES);
    let mut ls = log_w.chunks_exact(SUM_LANES);
    let mut ss = summary.chunks_exact(SUM_LANES);
    for ((w, l), s) in (&mut ws).zip(&mut ls).zip(&mut ss) {
        for k in 0..SUM_LANES {
            let e = exp_nonpos(l[k] - max);
            w[k] = e;
            total[k] += e;
            num[k] += e * s[k];
            sq[k] += e * e;
        }
    }
    let rest = ws.into_remainder().iter_mut().zip(ls.remainder());
    for (k, ((w, l), s)) in rest.zip(ss.remainder()).enumerate() {
        let e = exp_nonpos(l - max);
        *w = e;
        total[k] += e;
        num[k] += e * s;
        sq[k] += e * e;
    }
    let add =
        |a: [f64; SUM_LANES]| ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
    (add(total), add(num), add(sq))
}

/// The largest of `v` (−∞ if empty; NaNs ignored, as `f64::max` does), as
/// [`SUM_LANES`] running maxima: the same value as a fold, without its
/// chain of dependent comparisons.
pub(super) fn max_of(v: &[f64]) -> f64 {
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

/// Systematic resampling of an island's weights `w` (summing to `total`)
/// into as many particles with the uniform `u`: particle `i` gets the
/// positions `k + u` (k = 0, 1, …) that fall below its running sum of
/// weights and not below the one before.
///
/// The running sums are kept in fixed point, in units of 2^-F of a
/// position with F = 50 − (bits of `n`) (at least 2^-26 of a position for
/// any island under 16 M particles): each scaled weight is rounded to the
/// nearest unit once, and the sums of those integers are exact, so the
/// loop's chain of dependent additions is one integer add per particle,
/// not a floating-point one, the result does not depend on any rounding
/// along the sum, and a block of the island can start from the sum of
/// the blocks before it. A particle's count is the difference of two
/// ceilings, in integers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Systematic {
    frac: u32,
    unit: f64,
    limit: f64,
    scale: f64,
    /// `u` in fixed point.
    u: u64,
    n: u64,
}

impl Systematic {
    pub(super) fn new(total: f64, n: usize, u: f64) -> Systematic {
        let frac = 50 - (usize::BITS - n.leading_zeros()).min(50);
        let mut s = Systematic {
            frac,
            unit: (1u64 << frac) as f64,
            limit: (1u64 << 50) as f64,
            scale: n as f64 / total,
            u: 0,
            n: n as u64,
        };
        s.u = s.fixed(u);
        s
    }

    /// round(v · 2^F), v in [0, n]; NaN (a degenerate island) as 0.
    #[inline(always)]
    fn fixed(&self, v: f64) -> u64 {
        // 1.5 · 2^52: adding it to a number of magnitude below 2^51 rounds
        // it to an integer, held in the low bits of the sum.
        const SHIFT: f64 = 6_755_399_441_055_744.0;
        ((v * self.unit).max(0.0).min(self.limit) + SHIFT).to_bits() - SHIFT.to_bits()
    }

    /// Positions below the running sum `cum`: k + u < cum for k <
    /// ceil(cum − u).
    #[inline(always)]
    fn below(&self, cum: u64) -> u64 {
        let one = (1u64 << self.frac) - 1;
        ((cum.saturating_sub(self.u) + one) >> self.frac).min(self.n)
    }

    /// The fixed-point sum of a block's scaled weights.
    pub(super) fn sum(&self, w: &[f64]) -> u64 {
        w.iter().map(|&wi| self.fixed(wi * self.scale)).sum()
    }

    /// The counts of a block whose running sum starts at `cum`, written
    /// as its particles' inputs for step `t`; the island's `last` block
    /// gives the positions rounding left unassigned to its last particle.
    pub(super) fn write(
        &self,
        w: &[f64],
        mut cum: u64,
        inputs: &mut [PfInput],
        t: usize,
        last: bool,
    ) {
        // A copy on the stack: its fields stay in registers through the
        // loop, whatever the writes to `inputs` might alias.
        let rule = *self;
        let mut k = rule.below(cum);
        for (inp, &wi) in inputs.iter_mut().zip(w) {
            cum += rule.fixed(wi * rule.scale);
            let below = rule.below(cum);
            *inp = PfInput {
                t: t as u32,
                children: (below - k) as u32,
            };
            k = below;
        }
        if let Some(p) = inputs.last_mut().filter(|_| last) {
            p.children += (self.n - k) as u32;
        }
    }
}

/// Systematic resampling of a whole island's weights `w` (see
/// [`Systematic`]) into `n` particles, written as `inputs` (one per
/// weight) for step `t`.
pub(super) fn systematic_into(
    w: &[f64],
    total: f64,
    n: usize,
    u: f64,
    inputs: &mut [PfInput],
    t: usize,
) {
    Systematic::new(total, n, u).write(w, 0, inputs, t, true);
}

/// The uniform of island `r`'s resampling for step `t`.
pub(super) fn uniform(seed: u64, t: usize, r: usize) -> f64 {
    call_rng(seed, t as u64, StateId(r as u64)).random::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_an_island_in_order() {
        for m in [0, 1, 7, BLOCK, BLOCK + 1, 3 * BLOCK - 1, 10 * BLOCK + 5] {
            let b = blocks(m);
            assert_eq!(b.len(), m.div_ceil(BLOCK).max(1));
            assert_eq!(b.first().unwrap().start, 0);
            assert_eq!(b.last().unwrap().end, m);
            assert!(b.windows(2).all(|p| p[0].end == p[1].start));
            assert!(b
                .iter()
                .all(|r| r.len() <= BLOCK && r.len() + 1 >= m / b.len()));
        }
    }

    proptest::proptest! {
        /// A block that starts from the exact sum of the blocks before it
        /// gives the counts of one pass over the island.
        #[test]
        fn blocks_resample_as_one_pass(
            w in proptest::collection::vec(0.0f64..1.0, 1..200),
            u in 0.0f64..1.0,
            cuts in proptest::collection::vec(0usize..200, 0..6),
        ) {
            let n = w.len();
            let total: f64 = w.iter().sum();
            proptest::prop_assume!(total > 0.0);
            let rule = Systematic::new(total, n, u);
            let blank = PfInput { t: 0, children: 0 };
            let mut whole = vec![blank; n];
            rule.write(&w, 0, &mut whole, 3, true);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % n).chain([0, n]).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let mut pieces = vec![blank; n];
            let mut cum = 0;
            for p in cuts.windows(2) {
                let r = p[0]..p[1];
                rule.write(&w[r.clone()], cum, &mut pieces[r.clone()], 3, p[1] == n);
                cum += rule.sum(&w[r]);
            }
            proptest::prop_assert_eq!(&pieces, &whole);
            proptest::prop_assert_eq!(whole.iter().map(|i| u64::from(i.children)).sum::<u64>(), n as u64);
        }
    }
}
