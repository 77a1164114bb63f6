//! Kernel 1: the undirected graph in compressed sparse rows.

use std::sync::atomic::{AtomicU32, Ordering};

use super::par;

/// An undirected graph: the neighbours of `v` are
/// `adjacency[offsets[v]..offsets[v + 1]]`, sorted, without duplicates and
/// without `v` itself.
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
        // 1. Degrees, counted with relaxed atomic increments (the counts are
        // read only after the workers are joined).
        let degree: Vec<AtomicU32> = (0..vertices).map(|_| AtomicU32::new(0)).collect();
        par::on_workers(workers, |w| {
            for &[u, v] in &edges[par::split(edges.len(), workers, w)] {
                if u != v {
                    degree[u as usize].fetch_add(1, Ordering::Relaxed);
                    degree[v as usize].fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let mut offsets = Vec::with_capacity(vertices + 1);
        let mut sum = 0usize;
        offsets.push(0);
        for d in &degree {
            sum += d.swap(0, Ordering::Relaxed) as usize;
            offsets.push(sum);
        }
        // 2. Scatter: `degree` now counts the slots filled so far.
        let scattered: Vec<AtomicU32> = (0..sum).map(|_| AtomicU32::new(0)).collect();
        par::on_workers(workers, |w| {
            for &[u, v] in &edges[par::split(edges.len(), workers, w)] {
                if u != v {
                    let at = degree[u as usize].fetch_add(1, Ordering::Relaxed) as usize;
                    scattered[offsets[u as usize] + at].store(v, Ordering::Relaxed);
                    let at = degree[v as usize].fetch_add(1, Ordering::Relaxed) as usize;
                    scattered[offsets[v as usize] + at].store(u, Ordering::Relaxed);
                }
            }
        });
        drop(degree);
        // 3. Sort and deduplicate each list, each worker a range of vertices
        // holding about the same number of slots.
        let bounds = balanced_bounds(&offsets, workers);
        let lists: Vec<(Vec<u32>, Vec<usize>)> = par::on_workers(workers, |w| {
            let (lo, hi) = (bounds[w], bounds[w + 1]);
            let mut adj = Vec::with_capacity(offsets[hi] - offsets[lo]);
            let mut lens = Vec::with_capacity(hi - lo);
            for v in lo..hi {
                let start = adj.len();
                adj.extend(
                    scattered[offsets[v]..offsets[v + 1]]
                        .iter()
                        .map(|x| x.load(Ordering::Relaxed)),
                );
                adj[start..].sort_unstable();
                let mut kept = start;
                for i in start..adj.len() {
                    if i == start || adj[i] != adj[kept - 1] {
                        adj[kept] = adj[i];
                        kept += 1;
                    }
                }
                adj.truncate(kept);
                lens.push(kept - start);
            }
            (adj, lens)
        });
        drop(scattered);
        let mut offsets = Vec::with_capacity(vertices + 1);
        offsets.push(0);
        let total: usize = lists.iter().map(|(a, _)| a.len()).sum();
        let mut adjacency = Vec::with_capacity(total);
        for (adj, lens) in lists {
            for len in lens {
                offsets.push(offsets[offsets.len() - 1] + len);
            }
            adjacency.extend_from_slice(&adj);
        }
        Csr { offsets, adjacency }
    }
}

/// Vertex boundaries splitting the slots of `offsets` into `parts` nearly
/// equal ranges.
fn balanced_bounds(offsets: &[usize], parts: usize) -> Vec<usize> {
    let n = offsets.len() - 1;
    let total = offsets[n];
    let mut bounds = vec![0];
    for p in 1..parts {
        let target = total / parts * p;
        let v = offsets.partition_point(|&o| o < target).min(n);
        bounds.push(v.max(bounds[p - 1]));
    }
    bounds.push(n);
    bounds
}

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
        }
    }
}
