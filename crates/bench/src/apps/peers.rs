//! The peers of `statepipe bench apps`: BFS with rayon (top-down and
//! direction-optimizing) and k-nucleotide with `std` `HashMap` on rayon and
//! with `hashbrown` + Fx hash on std threads, each written as its crate's
//! documentation suggests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use rayon::prelude::*;
use rustc_hash::FxBuildHasher;
use statepipe_apps::graph500::bfs::{self, NONE};
use statepipe_apps::graph500::csr::Csr;
use statepipe_apps::kmer;

/// A rayon BFS's arrays: allocated once per sample, outside the timer,
/// and reset by each search (as statepipe's [`bfs::Searcher`] is).
pub(super) struct RayonArrays {
    /// Each vertex's parent, [`NONE`] until claimed.
    parent: Vec<AtomicU32>,
    /// The frontier of a bottom-up level, one bit per vertex.
    bitmap: Vec<AtomicU64>,
}

impl RayonArrays {
    pub(super) fn new(n: usize) -> Self {
        RayonArrays {
            parent: (0..n).map(|_| AtomicU32::new(NONE)).collect(),
            bitmap: (0..n.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Clears the parents (in parallel) and plants `root`.
    fn reset(&self, root: u32) {
        self.parent
            .par_iter()
            .for_each(|p| p.store(NONE, Ordering::Relaxed));
        self.parent[root as usize].store(root, Ordering::Relaxed);
    }

    /// Vertices the last search reached.
    pub(super) fn reached(&self) -> usize {
        self.parent
            .iter()
            .filter(|p| p.load(Ordering::Relaxed) != NONE)
            .count()
    }

    #[cfg(test)]
    fn parents(&self) -> Vec<u32> {
        self.parent
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .collect()
    }
}

/// One top-down level: claim every unvisited neighbour of the frontier.
fn rayon_step(g: &Csr, parent: &[AtomicU32], frontier: &[u32]) -> Vec<u32> {
    frontier
        .par_iter()
        .flat_map_iter(|&u| {
            g.neighbours(u).iter().filter_map(move |&v| {
                parent[v as usize]
                    .compare_exchange(NONE, u, Ordering::Relaxed, Ordering::Relaxed)
                    .ok()
                    .map(|_| v)
            })
        })
        .collect()
}

/// A level-synchronous top-down BFS with rayon.
pub(super) fn rayon_top_down(g: &Csr, arrays: &RayonArrays, root: u32) {
    arrays.reset(root);
    let parent = &arrays.parent;
    let mut frontier = vec![root];
    while !frontier.is_empty() {
        frontier = rayon_step(g, parent, &frontier);
    }
}

/// A direction-optimizing BFS with rayon (Beamer's heuristic, α = 15, β = 18).
pub(super) fn rayon_direction_optimizing(g: &Csr, arrays: &RayonArrays, root: u32) {
    let n = g.vertices();
    arrays.reset(root);
    let (parent, bitmap) = (&arrays.parent, &arrays.bitmap);
    let mut frontier = vec![root];
    let mut unexplored = g.adjacency.len() as u64;
    let mut previous_edges = 0;
    let mut bottom_up = false;
    while !frontier.is_empty() {
        let m_f: u64 = frontier.par_iter().map(|&v| g.degree(v) as u64).sum();
        unexplored = unexplored.saturating_sub(m_f);
        bottom_up = if bottom_up {
            frontier.len() >= n / bfs::BETA
        } else {
            m_f > previous_edges && m_f > unexplored / bfs::ALPHA
        };
        previous_edges = m_f;
        frontier = if bottom_up {
            bitmap
                .par_iter()
                .for_each(|w| w.store(0, Ordering::Relaxed));
            frontier.par_iter().for_each(|&v| {
                bitmap[v as usize / 64].fetch_or(1 << (v % 64), Ordering::Relaxed);
            });
            (0..n as u32)
                .into_par_iter()
                .filter(|&v| parent[v as usize].load(Ordering::Relaxed) == NONE)
                .filter_map(|v| {
                    let u = g.neighbours(v).iter().copied().find(|&u| {
                        bitmap[u as usize / 64].load(Ordering::Relaxed) & (1 << (u % 64)) != 0
                    })?;
                    parent[v as usize].store(u, Ordering::Relaxed);
                    Some(v)
                })
                .collect()
        } else {
            rayon_step(g, parent, &frontier)
        };
    }
}

/// k-nucleotide with `std` `HashMap`s, one rayon task per k.
pub(super) fn hashmap_rayon(input: &[u8], _workers: usize) -> String {
    let codes = kmer::three_codes(input).expect("valid input");
    let tables: Vec<HashMap<u64, u64>> = kmer::REPORT_K
        .par_iter()
        .map(|&k| {
            let mut m = HashMap::new();
            let mask = (1u64 << (2 * k)) - 1;
            let mut code = 0u64;
            for (i, &c) in codes.iter().enumerate() {
                code = ((code << 2) | u64::from(c)) & mask;
                if i + 1 >= k {
                    *m.entry(code).or_insert(0) += 1;
                }
            }
            m
        })
        .collect();
    print_report(
        codes.len(),
        |k, code| {
            let i = kmer::REPORT_K
                .iter()
                .position(|&x| x == k)
                .expect("a report k");
            tables[i].get(&code).copied().unwrap_or(0)
        },
        |k| {
            let i = kmer::REPORT_K
                .iter()
                .position(|&x| x == k)
                .expect("a report k");
            tables[i].iter().map(|(&c, &n)| (c, n)).collect()
        },
    )
}

/// k-nucleotide with `hashbrown` and the Fx hash, one std thread per k.
pub(super) fn hashbrown_threads(input: &[u8], _workers: usize) -> String {
    let codes = kmer::three_codes(input).expect("valid input");
    let codes = &codes;
    let tables: Vec<hashbrown::HashMap<u64, u64, FxBuildHasher>> = std::thread::scope(|s| {
        let handles: Vec<_> = kmer::REPORT_K
            .iter()
            .map(|&k| {
                s.spawn(move || {
                    let mut m = hashbrown::HashMap::with_hasher(FxBuildHasher);
                    let mask = (1u64 << (2 * k)) - 1;
                    let mut code = 0u64;
                    for (i, &c) in codes.iter().enumerate() {
                        code = ((code << 2) | u64::from(c)) & mask;
                        if i + 1 >= k {
                            *m.entry(code).or_insert(0) += 1;
                        }
                    }
                    m
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a counting thread"))
            .collect()
    });
    print_report(
        codes.len(),
        |k, code| {
            let i = kmer::REPORT_K
                .iter()
                .position(|&x| x == k)
                .expect("a report k");
            tables[i].get(&code).copied().unwrap_or(0)
        },
        |k| {
            let i = kmer::REPORT_K
                .iter()
                .position(|&x| x == k)
                .expect("a report k");
            tables[i].iter().map(|(&c, &n)| (c, n)).collect()
        },
    )
}

/// The k-nucleotide report from any table, in the same format as [`kmer::report`].
fn print_report(
    len: usize,
    count: impl Fn(usize, u64) -> u64,
    entries: impl Fn(usize) -> Vec<(u64, u64)>,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for k in [1, 2] {
        let total = (len + 1 - k) as f64;
        let mut e = entries(k);
        e.sort_by(|a, b| {
            b.1.cmp(&a.1)
                .then(kmer::decode(a.0, k).cmp(&kmer::decode(b.0, k)))
        });
        for (code, n) in e {
            let _ = writeln!(
                out,
                "{} {:.3}",
                kmer::decode(code, k),
                100.0 * n as f64 / total
            );
        }
        out.push('\n');
    }
    for s in kmer::REPORT_KMERS {
        let code = kmer::encode(s).expect("a valid k-mer");
        let _ = writeln!(out, "{}\t{s}", count(s.len(), code));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use statepipe_apps::fasta;
    use statepipe_apps::graph500::sample_roots;

    #[test]
    fn peers_agree_with_statepipe() {
        let input = fasta::generate(2_000);
        let ours = kmer::knucleotide(&input, 2).unwrap();
        assert_eq!(hashmap_rayon(&input, 2), ours);
        assert_eq!(hashbrown_threads(&input, 2), ours);
        let edges = statepipe_apps::graph500::generator::generate(10, 16, 2, 2);
        let g = Csr::build(1024, &edges, 2);
        for root in sample_roots(&g, 4, 2) {
            let levels = bfs::levels_sequential(&g, root);
            let arrays = RayonArrays::new(1024);
            for f in [rayon_top_down, rayon_direction_optimizing] {
                // Twice: the second search reuses the first's arrays.
                f(&g, &arrays, sample_roots(&g, 1, 3)[0]);
                f(&g, &arrays, root);
                let parent = arrays.parents();
                let reached: Vec<bool> = parent.iter().map(|&p| p != NONE).collect();
                let expected: Vec<bool> = levels.iter().map(|&l| l != NONE).collect();
                assert_eq!(reached, expected);
            }
        }
    }
}
