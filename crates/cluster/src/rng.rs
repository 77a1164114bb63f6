//! The generator every call gets ([`Rng`], [`call_rng`]), and a batch's
//! generators made sixteen first blocks at a time ([`Rngs`]).

use crate::ids::{step_key, StateId};
use crate::math::normal_of_words;
use crate::philox::{philox, philox_lanes, LANES};

/// The random number generator handed to [`Evolve::evolve`](crate::Evolve::evolve): Philox4x32-10,
/// the counter-based generator of Salmon, Moraes, Dror and Shaw ("Parallel
/// Random Numbers: As Easy as 1, 2, 3", SC'11, the Random123 library; the
/// same generator as numpy's `Philox` and JAX's default), through the
/// [`rand_philox`](https://crates.io/crates/rand_philox) crate.
///
/// Every 32-bit word is a pure function of a 64-bit key and a 128-bit
/// counter. [`call_rng`] keys a call by (run seed, step) and puts the
/// parent's id in the counter's top 64 bits; the low 64 bits count the
/// call's 128-bit blocks. So a call's numbers depend on (seed, step,
/// parent) only, and setting a call up costs nothing: no state is filled
/// until the first draw, and a draw costs one ten-round block per four
/// words (a few nanoseconds), the same on any thread, process or host.
/// Calls with different parents or steps read disjoint counters or keys:
/// there is no sequence to overlap, which is what makes counter-based
/// generators the standard choice for parallel simulation. It passes
/// BigCrush; it is not a cryptographic generator and nothing here needs one.
///
/// Words are served in counter order, a `u64` being two words, low first
/// (the crate's frozen convention). Earlier builds gave calls PCG64 (and
/// ChaCha8 before that): a run's results differ from theirs bit for bit,
/// not in distribution. [`Rng::normal`] takes a whole block per draw; the
/// Nile model drew its normals with `rand_distr`'s Ziggurat before it
/// (same remark).
#[derive(Debug, Clone)]
pub struct Rng {
    key: [u32; 2],
    /// Counter words 2 and 3 (the stream).
    stream: u64,
    /// The next block to make (counter words 0 and 1).
    block: u64,
    /// The current block's words, and how many are used.
    buf: [u32; 4],
    used: usize,
}

impl Rng {
    /// The generator keyed `key`, at block 0 of stream `stream`.
    #[inline]
    pub(crate) fn keyed(key: [u32; 2], stream: u64) -> Self {
        Rng {
            key,
            stream,
            block: 0,
            buf: [0; 4],
            used: 4,
        }
    }

    /// As [`Rng::keyed`], with block 0 already made (`first`).
    #[inline]
    pub(crate) fn with_first(key: [u32; 2], stream: u64, first: [u32; 4]) -> Self {
        Rng {
            key,
            stream,
            block: 1,
            buf: first,
            used: 0,
        }
    }

    /// A standard normal draw: the Box–Muller transform of the next whole
    /// block (radius from words 0 and 1, angle from word 2; the rest of a
    /// block already partly read is skipped). So the `k`-th draw of a
    /// generator that draws nothing else is block `k`, which is what lets
    /// [`Batch::child_normals`](crate::Batch::child_normals) make a batch's draws in bulk, with the
    /// same bits. Branch free (no rejection), fdlibm's polynomials for the
    /// logarithm and the cosine: the same bits on every x86-64.
    #[inline]
    pub fn normal(&mut self) -> f64 {
        if self.used != 0 {
            self.refill();
        }
        self.used = 4;
        normal_of_words(self.buf[0], self.buf[1], self.buf[2])
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) {
        self.buf = philox(self.key, self.stream, self.block);
        self.block = self.block.wrapping_add(1);
        self.used = 0;
    }
}

impl rand::RngCore for Rng {
    #[inline]
    fn next_u32(&mut self) -> u32 {
        if self.used >= 4 {
            self.refill();
        }
        let w = self.buf[self.used];
        self.used += 1;
        w
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        // Two words, low first.
        if self.used <= 2 {
            let (lo, hi) = (self.buf[self.used], self.buf[self.used + 1]);
            self.used += 2;
            return u64::from(lo) | (u64::from(hi) << 32);
        }
        let lo = u64::from(self.next_u32());
        let hi = u64::from(self.next_u32());
        lo | (hi << 32)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(4) {
            let w = self.next_u32().to_le_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }
}

impl rand::SeedableRng for Rng {
    /// The key's two words, little-endian.
    type Seed = [u8; 8];

    /// The generator keyed by `seed`, at block 0 of stream 0.
    fn from_seed(seed: [u8; 8]) -> Self {
        let k = u64::from_le_bytes(seed);
        Rng::keyed([k as u32, (k >> 32) as u32], 0)
    }
}

/// The generators of a batch's parents in order: [`Batch::rngs`](crate::Batch::rngs).
#[derive(Debug, Clone)]
pub struct Rngs<'a> {
    key: [u32; 2],
    ids: &'a [StateId],
    /// The next parent.
    at: usize,
    /// First blocks made for parents `at - at % LANES ..`, `made` of them.
    first: [[u32; 4]; LANES],
    streams: [u64; LANES],
    made: usize,
}

impl<'a> Rngs<'a> {
    /// The generators of `ids`' calls under `key`, from the first.
    #[inline]
    pub(crate) fn new(key: [u32; 2], ids: &'a [StateId]) -> Self {
        Rngs {
            key,
            ids,
            at: 0,
            first: [[0; 4]; LANES],
            streams: [0; LANES],
            made: 0,
        }
    }

    #[inline(never)]
    fn make(&mut self) {
        let rest = &self.ids[self.at..];
        if rest.len() >= LANES {
            for (s, id) in self.streams.iter_mut().zip(rest) {
                *s = id.0;
            }
            self.first = philox_lanes(self.key, &self.streams);
            self.made = LANES;
        } else {
            self.made = 0;
        }
    }
}

impl Iterator for Rngs<'_> {
    type Item = Rng;

    #[inline]
    fn next(&mut self) -> Option<Rng> {
        let id = *self.ids.get(self.at)?;
        let l = self.at % LANES;
        if l == 0 {
            self.make();
        }
        self.at += 1;
        Some(if l < self.made {
            Rng::with_first(self.key, id.0, self.first[l])
        } else {
            Rng::keyed(self.key, id.0)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.ids.len() - self.at;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Rngs<'_> {}

/// The generator for the call that evolves `parent` at `step` of a run
/// seeded `seed`: what [`Evolve::evolve`](crate::Evolve::evolve) receives (see [`Rng`]). A driver
/// that draws its own numbers between steps (resampling) derives them the
/// same way, so that they too are independent of placement.
pub fn call_rng(seed: u64, step: u64, parent: StateId) -> Rng {
    Rng::keyed(step_key(seed, step), parent.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore as _;

    #[test]
    fn a_generator_reads_its_stream_in_order_however_it_starts() {
        let key = step_key(1, 2);
        let mut a = Rng::keyed(key, 99);
        let words: Vec<u32> = (0..12).map(|_| a.next_u32()).collect();
        let want: Vec<u32> = (0..3).flat_map(|b| philox(key, 99, b)).collect();
        assert_eq!(words, want);
        let mut b = Rng::with_first(key, 99, philox(key, 99, 0));
        let mut c = Rng::keyed(key, 99);
        // u64s are two words, low first, across block boundaries too.
        assert_eq!(b.next_u32(), want[0]);
        assert_eq!(c.next_u32(), want[0]);
        for _ in 0..7 {
            let (x, y) = (b.next_u64(), c.next_u64());
            assert_eq!(x, y);
        }
        let mut d = Rng::keyed(key, 99);
        assert_eq!(
            d.next_u64(),
            u64::from(want[0]) | (u64::from(want[1]) << 32)
        );
        let mut bytes = [0u8; 6];
        Rng::keyed(key, 99).fill_bytes(&mut bytes);
        assert_eq!(bytes[..4], want[0].to_le_bytes());
        assert_eq!(bytes[4..], want[1].to_le_bytes()[..2]);
    }

    /// Φ(x) by Abramowitz and Stegun's 26.2.17 (error below 7.5e-8, far
    /// under the bound of the test below).
    fn phi(x: f64) -> f64 {
        let z = x.abs();
        let t = 1.0 / (1.0 + 0.231_641_9 * z);
        let poly = t
            * (0.319_381_530
                + t * (-0.356_563_782
                    + t * (1.781_477_937 + t * (-1.821_255_978 + t * 1.330_274_429))));
        let tail = (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt() * poly;
        if x >= 0.0 {
            1.0 - tail
        } else {
            tail
        }
    }

    /// The normals of many calls' generators, as a run draws them (each
    /// call's first few blocks, parents' ids as streams), against the
    /// standard normal's distribution function: the Kolmogorov–Smirnov
    /// distance stays under its 1-in-a-million critical value, and each
    /// sign gets half the draws.
    #[test]
    fn normals_have_the_standard_normal_distribution() {
        let n = 1_000_000usize;
        let mut z: Vec<f64> = (0..n / 4)
            .flat_map(|p| {
                let mut rng = call_rng(7, 3, StateId(crate::ids::mix64(p as u64)));
                [rng.normal(), rng.normal(), rng.normal(), rng.normal()]
            })
            .collect();
        let nf = n as f64;
        let negative = z.iter().filter(|&&x| x < 0.0).count() as f64 / nf;
        assert!((negative - 0.5).abs() < 0.0025, "P(z < 0) = {negative}");
        z.sort_by(f64::total_cmp);
        let d = z
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                let p = phi(x);
                (p - i as f64 / nf)
                    .abs()
                    .max((p - (i + 1) as f64 / nf).abs())
            })
            .fold(0.0, f64::max);
        assert!(d < 2.6 / nf.sqrt(), "Kolmogorov–Smirnov distance {d}");
    }
}
