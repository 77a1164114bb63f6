//! Kernel 1: the undirected graph in compressed sparse rows.

use std::convert::Infallible;
use std::sync::atomic::Ordering;

use super::edges::{EdgeList, ScanError, Source};
use super::par;
use crate::mem::{as_atomic, huge_filled, huge_vec, release_spare};

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
/// kernel 1 remove them; validation and the count of traversed edges read
/// the edge list itself).
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

    /// Builds the graph of `vertices` vertices from an edge list in memory
    /// on `workers` pinned threads ([`Csr::from_edges`]).
    ///
    /// # Panics
    ///
    /// If a tuple names a vertex at or above `vertices`.
    pub fn build(vertices: usize, edges: &[[u32; 2]], workers: usize) -> Csr {
        match build(vertices, Source::Slice(edges), workers) {
            Ok(g) => g,
            Err(ScanError::Stopped(never)) => match never {},
            Err(ScanError::Io { .. }) => unreachable!("a slice is not read from a file"),
        }
    }

    /// Kernel 1: builds the graph of `vertices` vertices from an edge list
    /// on `workers` pinned threads, in two passes over the list and with
    /// nothing of its size held beside the graph:
    ///
    /// 1. the workers count the ends of their shares of the tuples
    ///    (self-loops left out) into one array of atomic counters; the
    ///    sums give each list its slots;
    /// 2. each tuple, both ways, is put in the next free slot of its
    ///    source's list (a per-vertex atomic cursor);
    /// 3. each list is sorted (hubs first: by the bit length of the
    ///    neighbour's degree, descending, then by label) and deduplicated,
    ///    in parallel; then the lists are moved down over the slots
    ///    duplicates left, in one sequential pass that also rewrites the
    ///    offsets, and the pages left over are given back.
    ///
    /// The graph is the same whatever the storage of the list and the
    /// number of workers.
    ///
    /// # Errors
    ///
    /// Reading the list's file failed.
    ///
    /// # Panics
    ///
    /// If a tuple names a vertex at or above `vertices`.
    pub fn from_edges(
        vertices: usize,
        edges: &EdgeList,
        workers: usize,
    ) -> Result<Csr, ScanError<Infallible>> {
        build(vertices, edges.source(), workers)
    }
}

/// Vertices whose lists a worker sorts at once in step 3.
const SORT_CHUNK: usize = 4096;

/// Calls `f(from, to)` for every tuple of the list both ways (self-loops
/// left out), on `workers` pinned threads.
fn for_each_end(
    edges: Source<'_>,
    workers: usize,
    f: impl Fn(u32, u32) + Sync,
) -> Result<(), ScanError<Infallible>> {
    edges.scan(
        workers,
        |_| (),
        |(), chunk| {
            for &[u, v] in chunk {
                if u != v {
                    f(u, v);
                    f(v, u);
                }
            }
            Ok(())
        },
    )?;
    Ok(())
}

fn build(vertices: usize, edges: Source<'_>, workers: usize) -> Result<Csr, ScanError<Infallible>> {
    let workers = workers.max(1);
    // 1. Degrees (tuples before deduplication, self-loops left out), in
    // one array of atomic counters. Per-worker arrays of plain counters
    // cost 4 bytes a vertex a worker, and kernel 1 with them measured
    // within the noise of this (2 workers, scale 22: 3.6-4.9 s against
    // 3.8-4.1 s in process, 4.5-5.4 s against 4.8-5.5 s as whole runs).
    let mut degree = huge_filled(vertices, 0u32);
    {
        let shared = as_atomic(&mut degree);
        for_each_end(edges, workers, |from, _| {
            shared[from as usize].fetch_add(1, Ordering::Relaxed);
        })?;
    }
    // The offsets of the lists before deduplication, and how many bits each
    // vertex's degree takes (tuples counted before deduplication): lists put
    // the neighbours of higher rank first.
    let mut offsets: Vec<usize> = huge_vec(vertices + 1);
    let mut sum = 0usize;
    for &d in &degree {
        offsets.push(sum);
        sum += d as usize;
    }
    offsets.push(sum);
    let rank: Vec<u8> = degree
        .iter()
        .map(|&d| (u32::BITS - d.leading_zeros()) as u8)
        .collect();
    // 2. Each tuple, both ways, into the next free slot of its source's list.
    let mut adjacency: Vec<u32> = huge_filled(sum, 0);
    degree.fill(0);
    {
        let cursor = as_atomic(&mut degree);
        let slots = as_atomic(&mut adjacency);
        let offsets = &offsets;
        let put = |from: u32, to: u32| {
            let at = offsets[from as usize]
                + cursor[from as usize].fetch_add(1, Ordering::Relaxed) as usize;
            slots[at].store(to, Ordering::Relaxed);
        };
        for_each_end(edges, workers, put)?;
    }
    // 3. Sort and deduplicate each list in place, `degree` becoming the
    // deduplicated lengths. Work items: runs of SORT_CHUNK vertices with
    // their slots, taken from a shared iterator.
    {
        let mut items = Vec::with_capacity(vertices.div_ceil(SORT_CHUNK));
        let (mut slots, mut lens) = (&mut adjacency[..], &mut degree[..]);
        let mut lo = 0;
        while lo < vertices {
            let hi = (lo + SORT_CHUNK).min(vertices);
            let (these, rest) = std::mem::take(&mut slots).split_at_mut(offsets[hi] - offsets[lo]);
            let (these_lens, rest_lens) = std::mem::take(&mut lens).split_at_mut(hi - lo);
            items.push((lo, these, these_lens));
            (slots, lens, lo) = (rest, rest_lens, hi);
        }
        let items = std::sync::Mutex::new(items.into_iter());
        let (offsets, rank) = (&offsets, &rank);
        par::on_workers(workers, |_| {
            // Sort keys: `(!rank << 32) | neighbour`.
            let mut keys: Vec<u64> = Vec::new();
            loop {
                let item = items
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .next();
                let Some((lo, slots, lens)) = item else {
                    return;
                };
                let base = offsets[lo];
                for (i, len) in lens.iter_mut().enumerate() {
                    let v = lo + i;
                    let list = &mut slots[offsets[v] - base..offsets[v + 1] - base];
                    keys.clear();
                    keys.extend(
                        list.iter()
                            .map(|&x| u64::from(!rank[x as usize]) << 32 | u64::from(x)),
                    );
                    keys.sort_unstable();
                    keys.dedup();
                    for (slot, &key) in list.iter_mut().zip(&keys) {
                        *slot = key as u32;
                    }
                    *len = keys.len() as u32;
                }
            }
        });
    }
    drop(rank);
    // Move the lists down over the slots duplicates left, and rewrite the
    // offsets (each list moves to or below where it was: in vertex order,
    // no list is overwritten before it has moved).
    let mut at = 0;
    for v in 0..vertices {
        let (from, len) = (offsets[v], degree[v] as usize);
        adjacency.copy_within(from..from + len, at);
        offsets[v] = at;
        at += len;
    }
    offsets[vertices] = at;
    drop(degree);
    adjacency.truncate(at);
    release_spare(&mut adjacency);
    let isolated = (0..vertices.div_ceil(64))
        .map(|w| {
            (0..64)
                .map(|i| w * 64 + i)
                .take_while(|&v| v < vertices)
                .filter(|&v| offsets[v + 1] == offsets[v])
                .fold(0u64, |m, v| m | 1 << (v % 64))
        })
        .collect();
    Ok(Csr {
        offsets,
        adjacency,
        isolated,
    })
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
            assert_eq!(g.isolated, [0b0100]);
        }
    }
}
