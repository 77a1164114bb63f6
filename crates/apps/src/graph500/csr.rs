//! Kernel 1: the undirected graph in compressed sparse rows.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::par;
use crate::mem::{huge_filled, huge_vec};

/// An undirected graph: the neighbours of `v` are
/// `adjacency[offsets[v]..offsets[v + 1]]`, without duplicates and
/// without `v` itself, hubs first: ordered by the number of bits of their
/// degree, descending, then by label. (A bottom-up BFS step scans a
/// vertex's neighbours until one is in the frontier; hubs are the likeliest
/// to be, so the scan stops sooner.)
///
/// Every input tuple `(u, v)` with `u != v` puts `v` among the neighbours
/// of `u` and `u` among those of `v`; self-loops and repeated tuples add
/// nothing to the search, so kernel 1 drops them (the specification lets
/// kernel 1 remove them; the edge list itself is kept for validation and
/// for counting traversed edges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Csr {
    /// Where each vertex's neighbours start; `vertices() + 1` entries.
    pub offsets: Vec<usize>,
    /// The neighbours of every vertex, one after another.
    pub adjacency: Vec<u32>,
    /// One bit per vertex with no neighbours (bit `v % 64` of word
    /// `v / 64`): a search never reaches them, so a bottom-up step skips
    /// them as if already visited.
    pub isolated: Vec<u64>,
}

impl Csr {
    /// The number of vertices.
    pub fn vertices(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The neighbours of `v`.
    pub fn neighbours(&self, v: u32) -> &[u32] {
        let v = v as usize;
        &self.adjacency[self.offsets[v]..self.offsets[v + 1]]
    }

    /// The degree of `v`.
    pub fn degree(&self, v: u32) -> usize {
        let v = v as usize;
        self.offsets[v + 1] - self.offsets[v]
    }

    /// Builds the graph of `vertices` vertices from an edge list on
    /// `workers` pinned threads.
    ///
    /// # Panics
    ///
    /// If a tuple names a vertex at or above `vertices`.
    pub fn build(vertices: usize, edges: &[[u32; 2]], workers: usize) -> Csr {
        let workers = workers.max(1);
        let buckets = vertices.div_ceil(BUCKET).max(1);
        // 1. Degrees: each worker counts the ends of its share of the tuples
        // in an array of its own (no atomic increments: on x86 each would
        // stall on its cache miss, where plain increments overlap theirs).
        let mut counts: Vec<Vec<u32>> = par::on_workers(workers, |w| {
            let mut degree = huge_filled(vertices, 0u32);
            for &[u, v] in &edges[par::split(edges.len(), workers, w)] {
                if u != v {
                    degree[u as usize] += 1;
                    degree[v as usize] += 1;
                }
            }
            degree
        });
        // 2. Offsets, and where each worker's share of each bucket starts:
        // a bucket's slots are those of its vertices, filled worker by worker.
        let mut offsets: Vec<usize> = huge_vec(vertices + 1);
        // `firsts[b * workers + w]`: the first slot of worker w in bucket b.
        let mut firsts = Vec::with_capacity(buckets * workers);
        let mut sum = 0usize;
        for b in 0..buckets {
            let range = b * BUCKET..((b + 1) * BUCKET).min(vertices);
            let mut at = sum;
            for v in range.clone() {
                offsets.push(sum);
                sum += counts.iter().map(|c| c[v] as usize).sum::<usize>();
            }
            for c in &counts {
                firsts.push(at);
                at += c[range.clone()].iter().map(|&d| d as usize).sum::<usize>();
            }
        }
        offsets.push(sum);
        drop(std::mem::take(&mut counts));
        // How many bits each vertex's degree takes (tuples counted before
        // deduplication): lists put the neighbours of higher rank first.
        let rank: Vec<u8> = (0..vertices)
            .map(|v| (usize::BITS - (offsets[v + 1] - offsets[v]).leading_zeros()) as u8)
            .collect();
        // 3. Each tuple, both ways, into its source's bucket: `(u << 32) | v`.
        // A worker writes `buckets` sequential streams, not `2 * tuples`
        // scattered slots.
        let mut pairs: Vec<AtomicU64> = huge_vec(sum);
        pairs.extend((0..sum).map(|_| AtomicU64::new(0)));
        let starts: Vec<Vec<usize>> = (0..workers)
            .map(|w| firsts.iter().skip(w).step_by(workers).copied().collect())
            .collect();
        par::on_each(starts, |w, mut cursor| {
            let mut put = |from: u32, to: u32| {
                let b = from as usize / BUCKET;
                pairs[cursor[b]].store(u64::from(from) << 32 | u64::from(to), Ordering::Relaxed);
                cursor[b] += 1;
            };
            for &[u, v] in &edges[par::split(edges.len(), workers, w)] {
                if u != v {
                    put(u, v);
                    put(v, u);
                }
            }
        });
        // 4. Bucket by bucket (claimed from a counter), while its slots are
        // in the cache: place each pair in its source's list, then sort and
        // deduplicate the lists.
        let next = AtomicUsize::new(0);
        let parts: Vec<Vec<Bucket>> = par::on_workers(workers, |_| {
            let mut done = Vec::new();
            // Sort keys: `(!rank << 32) | neighbour`.
            let mut slots: Vec<u64> = Vec::new();
            let mut cursor: Vec<u32> = Vec::new();
            loop {
                let b = next.fetch_add(1, Ordering::Relaxed);
                if b >= buckets {
                    return done;
                }
                let (lo, hi) = (b * BUCKET, ((b + 1) * BUCKET).min(vertices));
                let base = offsets[lo];
                slots.clear();
                slots.resize(offsets[hi] - base, 0);
                cursor.clear();
                cursor.extend((lo..hi).map(|v| (offsets[v] - base) as u32));
                for pair in &pairs[base..offsets[hi]] {
                    let pair = pair.load(Ordering::Relaxed);
                    let c = &mut cursor[(pair >> 32) as usize - lo];
                    let to = pair as u32;
                    slots[*c as usize] = u64::from(!rank[to as usize]) << 32 | u64::from(to);
                    *c += 1;
                }
                let mut adj = Vec::with_capacity(slots.len());
                let mut lens = Vec::with_capacity(hi - lo);
                for v in lo..hi {
                    let list = &mut slots[offsets[v] - base..offsets[v + 1] - base];
                    list.sort_unstable();
                    let start = adj.len();
                    for &key in list.iter() {
                        let x = key as u32;
                        if adj.len() == start || adj[adj.len() - 1] != x {
                            adj.push(x);
                        }
                    }
                    lens.push((adj.len() - start) as u32);
                }
                done.push((b, adj, lens));
            }
        });
        drop(pairs);
        let mut parts: Vec<_> = parts.into_iter().flatten().collect();
        parts.sort_unstable_by_key(|p| p.0);
        let mut offsets = huge_vec(vertices + 1);
        offsets.push(0);
        let total: usize = parts.iter().map(|(_, a, _)| a.len()).sum();
        let mut adjacency = huge_vec(total);
        for (_, adj, lens) in parts {
            for len in lens {
                offsets.push(offsets[offsets.len() - 1] + len as usize);
            }
            adjacency.extend_from_slice(&adj);
        }
        let isolated = (0..vertices.div_ceil(64))
            .map(|w| {
                (0..64)
                    .map(|i| w * 64 + i)
                    .take_while(|&v| v < vertices)
                    .filter(|&v| offsets[v + 1] == offsets[v])
                    .fold(0u64, |m, v| m | 1 << (v % 64))
            })
            .collect();
        Csr {
            offsets,
            adjacency,
            isolated,
        }
    }
}

/// One bucket of kernel 1's output: its number, its lists one after
/// another, and their lengths.
type Bucket = (usize, Vec<u32>, Vec<u32>);

/// Consecutive vertices per bucket of kernel 1: a bucket's lists (about
/// `2 * edgefactor` slots a vertex) fit in the core's cache.
const BUCKET: usize = 2048;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_loops_and_duplicates_symmetrically() {
        let edges = [[0, 1], [1, 0], [2, 2], [1, 3], [3, 1], [0, 1]];
        for workers in 1..4 {
            let g = Csr::build(4, &edges, workers);
            assert_eq!(g.neighbours(0), [1]);
            assert_eq!(g.neighbours(1), [0, 3]);
            assert!(g.neighbours(2).is_empty());
            assert_eq!(g.neighbours(3), [1]);
            assert_eq!(g.isolated, [0b0100]);
        }
    }
}
