//! The Kronecker graph generator of the Graph500 specification.
//!
//! Each edge picks, for each of `scale` bit levels, one quadrant of the
//! adjacency matrix with the initiator probabilities `A = 0.57`,
//! `B = C = 0.19`, `D = 0.05`, as the specification's reference
//! `kronecker_generator.m` does (`ii_bit = rand > A + B`,
//! `jj_bit = rand > (ii_bit ? C / (1 - A - B) : A / (A + B))`). Then the
//! vertex labels are permuted and the edge list is shuffled, both by a
//! random permutation.
//!
//! Every random number is a function of `(seed, stream, counter)` (a
//! SplitMix64 finalizer over the three), and both permutations are keyed
//! Feistel networks over the index domain with cycle-walking: a
//! pseudo-random bijection any worker can evaluate at any index. So each
//! worker fills its own range of the output, and the edge list does not
//! depend on how many workers made it.

use super::par;

/// The initiator probability of the top-left quadrant.
pub const A: f64 = 0.57;
/// The initiator probability of the top-right quadrant.
pub const B: f64 = 0.19;
/// The initiator probability of the bottom-left quadrant.
pub const C: f64 = 0.19;

/// The SplitMix64 finalizer: a bijective 64-bit mixer.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A random 64-bit word for `(seed, stream, counter)`.
pub(crate) fn random(seed: u64, stream: u64, counter: u64) -> u64 {
    mix(mix(seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(counter))
}

fn unit(seed: u64, stream: u64, counter: u64) -> f64 {
    (random(seed, stream, counter) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A keyed pseudo-random permutation of `0..n`.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    half: u32,
    keys: [u64; 4],
}

impl Permutation {
    /// The permutation of `0..n` for a seed and stream.
    pub fn new(n: u64, seed: u64, stream: u64) -> Self {
        let bits = 64 - n.saturating_sub(1).leading_zeros();
        let half = bits.div_ceil(2).max(1);
        let keys = std::array::from_fn(|i| random(seed, stream, i as u64));
        Permutation { n, half, keys }
    }

    /// The image of `x` (which must be below `n`).
    pub fn apply(&self, mut x: u64) -> u64 {
        debug_assert!(x < self.n);
        let mask = (1u64 << self.half) - 1;
        // Cycle-walking: the network permutes 0..2^(2 half), at most four
        // times larger than 0..n, so the walk ends after four steps on average.
        loop {
            let (mut l, mut r) = (x >> self.half, x & mask);
            for key in self.keys {
                let f = mix(r ^ key) & mask;
                (l, r) = (r, l ^ f);
            }
            x = (l << self.half) | r;
            if x < self.n {
                return x;
            }
        }
    }
}

/// The edge `index` of the unpermuted Kronecker graph.
fn kronecker_edge(scale: u32, seed: u64, index: u64) -> (u64, u64) {
    let ab = A + B;
    let c_norm = C / (1.0 - ab);
    let a_norm = A / ab;
    let (mut i, mut j) = (0u64, 0u64);
    for bit in 0..u64::from(scale) {
        let counter = (index << 7) | (bit << 1);
        let ii = unit(seed, 1, counter) > ab;
        let jj = unit(seed, 1, counter | 1) > if ii { c_norm } else { a_norm };
        i |= u64::from(ii) << bit;
        j |= u64::from(jj) << bit;
    }
    (i, j)
}

/// The Graph500 edge list of `edgefactor * 2^scale` tuples over `2^scale`
/// vertices, made on `workers` pinned threads.
///
/// # Panics
///
/// If `scale` is above 31 (vertex labels are `u32`).
pub fn generate(scale: u32, edgefactor: u32, seed: u64, workers: usize) -> Vec<[u32; 2]> {
    let kronecker = Kronecker::new(scale, edgefactor, seed);
    let m = kronecker.tuples() as usize;
    let workers = workers.max(1);
    let parts = par::on_workers(workers, |w| {
        let range = par::split(m, workers, w);
        let mut part = Vec::with_capacity(range.len());
        kronecker.fill(range.start as u64, range.len(), &mut part);
        part
    });
    let mut edges = crate::mem::huge_vec(m);
    for part in parts {
        edges.extend(part);
    }
    edges
}

/// The generator of one edge list: tuple `p` of the list is a function of
/// `p` alone ([`Kronecker::edge`]), so any part of the list can be made
/// again, in any order, on any worker.
#[derive(Debug, Clone)]
pub struct Kronecker {
    scale: u32,
    seed: u64,
    tuples: u64,
    vertex_perm: Permutation,
    edge_perm: Permutation,
}

impl Kronecker {
    /// The generator of `edgefactor * 2^scale` tuples over `2^scale`
    /// vertices for `seed`.
    ///
    /// # Panics
    ///
    /// If `scale` is above 31 (vertex labels are `u32`).
    pub fn new(scale: u32, edgefactor: u32, seed: u64) -> Self {
        assert!(scale <= 31, "scale {scale} above 31");
        let tuples = u64::from(edgefactor) << scale;
        Kronecker {
            scale,
            seed,
            tuples,
            vertex_perm: Permutation::new(1u64 << scale, seed, 2),
            edge_perm: Permutation::new(tuples, seed, 3),
        }
    }

    /// How many tuples the list has.
    pub fn tuples(&self) -> u64 {
        self.tuples
    }

    /// Tuple `p` of the list (`p` below [`tuples`](Self::tuples)).
    pub fn edge(&self, p: u64) -> [u32; 2] {
        let (i, j) = kronecker_edge(self.scale, self.seed, self.edge_perm.apply(p));
        [
            self.vertex_perm.apply(i) as u32,
            self.vertex_perm.apply(j) as u32,
        ]
    }

    /// Appends the `len` tuples from `first` on to `out`.
    pub fn fill(&self, first: u64, len: usize, out: &mut Vec<[u32; 2]>) {
        out.extend((first..first + len as u64).map(|p| self.edge(p)));
    }
}

/// A 64-bit FNV-1a hash of an edge list, to compare lists cheaply.
pub fn edge_hash(edges: &[[u32; 2]]) -> u64 {
    edges
        .iter()
        .flat_map(|e| e.iter().flat_map(|x| x.to_le_bytes()))
        .fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutations_are_bijections() {
        for n in [1u64, 2, 5, 16, 17, 1000] {
            let p = Permutation::new(n, 7, 2);
            let mut seen: Vec<u64> = (0..n).map(|x| p.apply(x)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn quadrant_frequencies_follow_the_initiator() {
        // At one bit level, the share of (1, 1) picks is D = 0.05.
        let d = (0..20_000)
            .filter(|&e| kronecker_edge(1, 3, e) == (1, 1))
            .count() as f64
            / 20_000.0;
        assert!((d - 0.05).abs() < 0.01, "{d}");
    }
}
