//! `statepipe bench apps`: Graph500 BFS and k-nucleotide against rayon and
//! plain-threads peers, on the same input in the same run.
//!
//! - `graph500/scale{S}`: harmonic-mean TEPS over the sampled roots (the
//!   same roots, the same graph, traversed edges counted once by validating
//!   statepipe's tree) for statepipe (all workers, and one worker), a rayon
//!   top-down BFS and a rayon direction-optimizing BFS (Beamer's α = 15,
//!   β = 18, as statepipe). A peer must reach as many vertices as statepipe.
//!   statepipe's search arrays are allocated once per contender (a
//!   [`bfs::Searcher`], as Graph500's reference code allocates its tree
//!   outside the timed kernel) and reset in each timed search, and its
//!   workers stay up through a sample's searches, as rayon's pool does; the
//!   peers' arrays (the atomic parent array, the bottom-up bitmap) are
//!   allocated once per contender in the same way and reset, in parallel,
//!   inside each timed search: setup is charged alike.
//! - `knucleotide/{N}`: seconds from the FASTA text to the report, for
//!   statepipe (all workers, one worker), `std` `HashMap` with one rayon
//!   task per k, and `hashbrown` + Fx hash with one std thread per k. Every
//!   contender parses with [`kmer::three_codes`] and prints with
//!   [`kmer::report`]'s format; each output must equal statepipe's.
//! - `host/random-reads`: random 4-byte reads per second over 128 MiB (the
//!   size of the scale-20 graph's lists), independent addresses as a BFS's
//!   neighbour checks are, on all workers and on one: how far this host's
//!   memory lets a memory-bound kernel scale ([`scaling`] sets the BFS's
//!   and k-nucleotide's workers-over-one ratios beside it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use rustc_hash::FxBuildHasher;
use statepipe_apps::graph500::bfs::{self, NONE};
use statepipe_apps::graph500::csr::Csr;
use statepipe_apps::graph500::{generator, sample_roots, validate};
use statepipe_apps::{fasta, kmer};

use crate::harness::{self, Contender, Group, Metric, SampleDone};
use crate::host::Host;
use crate::report::Report;
use crate::BenchError;

/// What `statepipe bench apps` runs.
#[derive(Debug, Clone)]
pub struct AppsOptions {
    /// Graph500 scale.
    pub scale: u32,
    /// Graph500 roots per sample.
    pub roots: usize,
    /// The fasta N of the k-nucleotide input.
    pub fasta_n: usize,
    /// Samples per contender.
    pub samples: usize,
}

impl AppsOptions {
    /// The defaults: scale 20, 16 roots, fasta 25,000,000; `quick`: scale 16, 2,500,000.
    pub fn new(quick: bool, samples: usize) -> Self {
        AppsOptions {
            scale: if quick { 16 } else { 20 },
            roots: if quick { 8 } else { 16 },
            fasta_n: if quick { 2_500_000 } else { 25_000_000 },
            samples,
        }
    }
}

/// Runs both groups and returns the report.
///
/// # Errors
///
/// A peer that disagrees with statepipe, or a failed validation.
pub fn run(
    options: &AppsOptions,
    host: &Host,
    progress: &mut dyn FnMut(&SampleDone<'_>),
) -> Result<Report, BenchError> {
    let workers = statepipe_apps::default_workers();
    let n = 1usize << options.scale;
    let edges = generator::generate(options.scale, 16, 1, workers);
    let g = Csr::build(n, &edges, workers);
    let roots = sample_roots(&g, options.roots, 1);
    let mut expected = Vec::new();
    for &root in &roots {
        let tree = bfs::bfs(&g, root, workers);
        let nedge = validate::validate(&edges, &tree, workers)
            .map_err(|e| BenchError::failed("graph500 statepipe", e))?;
        let reached = tree.parent.iter().filter(|&&p| p != NONE).count();
        expected.push((root, nedge, reached));
    }
    drop(edges);
    let input = fasta::generate(options.fasta_n);
    let report_expected =
        kmer::knucleotide(&input, workers).map_err(|e| BenchError::failed("knucleotide", e))?;

    // Every contender's arrays are allocated once, as Graph500's reference
    // code allocates its tree outside the timed kernel, and reset inside
    // each timed search. statepipe's workers stay up through a sample's
    // searches, as rayon's pool does through the peers'.
    let statepipe_bfs = |w: usize| -> Searches<'_> {
        let mut searcher = bfs::Searcher::new(&g, w);
        Box::new(move |roots| {
            searcher.with_workers(|searches| {
                roots
                    .iter()
                    .map(|&root| {
                        let started = Instant::now();
                        searches.search(root);
                        (started.elapsed().as_secs_f64(), searches.reached())
                    })
                    .collect()
            })
        })
    };
    let peer_bfs = |f: fn(&Csr, &RayonArrays, u32)| -> Searches<'_> {
        let g = &g;
        let arrays = RayonArrays::new(n);
        Box::new(move |roots| {
            roots
                .iter()
                .map(|&root| {
                    let started = Instant::now();
                    f(g, &arrays, root);
                    let seconds = started.elapsed().as_secs_f64();
                    (seconds, arrays.reached())
                })
                .collect()
        })
    };
    let kn_contender = |imp: &str, config: String, f: fn(&[u8], usize) -> String, w| {
        let (input, expected) = (&input, &report_expected);
        Contender::new(imp, config, move || {
            let started = Instant::now();
            let out = f(input, w);
            let seconds = started.elapsed().as_secs_f64();
            if out != *expected {
                return Err(BenchError::failed("knucleotide", "a different report"));
            }
            Ok(vec![seconds])
        })
    };
    let statepipe_kn: fn(&[u8], usize) -> String =
        |input, w| kmer::knucleotide(input, w).expect("valid input");
    let memory = vec![1u32; RANDOM_READ_WORDS];
    let reads_contender = |threads: usize| {
        let memory = &memory;
        Contender::new("memory", format!("threads={threads}"), move || {
            Ok(vec![random_reads(memory, threads, RANDOM_READS)])
        })
    };
    let groups = vec![
        Group {
            name: format!("graph500/scale{}", options.scale),
            metrics: vec![Metric {
                case: format!("graph500/scale{} hmean", options.scale),
                unit: "GTEPS".into(),
                higher_is_better: true,
            }],
            contenders: vec![
                bfs_contender(
                    "statepipe",
                    format!("workers={workers}"),
                    &expected,
                    statepipe_bfs(workers),
                ),
                bfs_contender("statepipe", "workers=1".into(), &expected, statepipe_bfs(1)),
                bfs_contender(
                    "rayon-top-down",
                    String::new(),
                    &expected,
                    peer_bfs(rayon_top_down),
                ),
                bfs_contender(
                    "rayon-dir-opt",
                    String::new(),
                    &expected,
                    peer_bfs(rayon_direction_optimizing),
                ),
            ],
        },
        Group {
            name: format!("knucleotide/{}", options.fasta_n),
            metrics: vec![Metric {
                case: format!("knucleotide/{}", options.fasta_n),
                unit: "s".into(),
                higher_is_better: false,
            }],
            contenders: vec![
                kn_contender(
                    "statepipe",
                    format!("workers={workers}"),
                    statepipe_kn,
                    workers,
                ),
                kn_contender("statepipe", "workers=1".into(), statepipe_kn, 1),
                kn_contender("hashmap-rayon", String::new(), hashmap_rayon, workers),
                kn_contender(
                    "hashbrown-fx-threads",
                    String::new(),
                    hashbrown_threads,
                    workers,
                ),
            ],
        },
        Group {
            name: "host/random-reads".into(),
            metrics: vec![Metric {
                case: "host/random-reads 128MiB".into(),
                unit: "G reads/s".into(),
                higher_is_better: true,
            }],
            contenders: vec![reads_contender(workers), reads_contender(1)],
        },
    ];
    let rows = harness::run(groups, options.samples, progress)?;
    Ok(Report::new("apps", host, rows))
}

/// Words of the random-read array: 128 MiB.
const RANDOM_READ_WORDS: usize = 1 << 25;
/// Reads per random-read sample.
const RANDOM_READS: usize = 1 << 26;

/// Billions of random 4-byte reads per second over `data` (a power of two
/// long) on `threads` pinned threads: independent addresses from a
/// xorshift generator, so each core keeps as many misses in flight as it
/// can, as a BFS's neighbour checks do.
fn random_reads(data: &[u32], threads: usize, reads: usize) -> f64 {
    let cpus = statepipe_sys::cpus::usable_cpus();
    let mask = data.len() - 1;
    let started = Instant::now();
    let sums: Vec<u64> = std::thread::scope(|s| {
        let cpus = &cpus;
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    if threads <= cpus.count && !cpus.ids.is_empty() {
                        statepipe_sys::pin::pin_current_thread(cpus.ids[t % cpus.ids.len()]);
                    }
                    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1);
                    let mut sum = 0u64;
                    for _ in 0..reads / threads {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        sum = sum.wrapping_add(u64::from(data[x as usize & mask]));
                    }
                    sum
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a reader panicked"))
            .collect()
    });
    std::hint::black_box(sums);
    reads as f64 / started.elapsed().as_secs_f64() / 1e9
}

/// One line per ratio of all workers over one: random reads, Graph500,
/// k-nucleotide (medians of `report`'s rows; absent rows are skipped).
pub fn scaling(report: &Report) -> String {
    let median = |imp: &str, config: &str, case: &str| {
        report
            .results
            .iter()
            .find(|r| r.imp == imp && r.config == config && r.case.starts_with(case))
            .map(|r| r.median)
    };
    let workers = statepipe_apps::default_workers();
    let all = format!("workers={workers}");
    let mut out = String::new();
    let rows = [
        (
            "random reads (the memory's ceiling)",
            "memory",
            format!("threads={workers}"),
            "threads=1",
            "host/random-reads",
            true,
        ),
        (
            "Graph500 BFS, statepipe",
            "statepipe",
            all.clone(),
            "workers=1",
            "graph500/",
            true,
        ),
        (
            "k-nucleotide, statepipe",
            "statepipe",
            all.clone(),
            "workers=1",
            "knucleotide/",
            false,
        ),
    ];
    for (what, imp, many, one, case, higher) in rows {
        if let (Some(m), Some(o)) = (median(imp, &many, case), median(imp, one, case)) {
            let ratio = if higher { m / o } else { o / m };
            out.push_str(&format!(
                "scaling, {workers} workers over 1: {what} {ratio:.2}x\n"
            ));
        }
    }
    out
}

/// Searches from each root: the seconds each took and how many vertices
/// it reached.
type Searches<'a> = Box<dyn FnMut(&[u32]) -> Vec<(f64, usize)> + 'a>;

/// A BFS contender: harmonic-mean GTEPS over the roots of `expected`
/// (`(root, nedge, reached)`), failing if a search reaches a different
/// number of vertices.
fn bfs_contender<'a>(
    imp: &str,
    config: String,
    expected: &'a [(u32, u64, usize)],
    mut search: Searches<'a>,
) -> Contender<'a> {
    let roots: Vec<u32> = expected.iter().map(|e| e.0).collect();
    Contender::new(imp, config, move || {
        let mut inverse = 0.0;
        for (&(root, nedge, reached), (seconds, got)) in expected.iter().zip(search(&roots)) {
            if got != reached {
                return Err(BenchError::failed(
                    "graph500",
                    format!("from root {root}: reached {got} vertices, not {reached}"),
                ));
            }
            inverse += seconds / nedge as f64;
        }
        Ok(vec![expected.len() as f64 / inverse / 1e9])
    })
}

/// What the run measures, in one paragraph.
pub fn describe(options: &AppsOptions) -> String {
    format!(
        "apps: Graph500 scale {} (edgefactor 16, {} roots, seed 1) and k-nucleotide on fasta {}; \
         {} samples per contender, interleaved",
        options.scale, options.roots, options.fasta_n, options.samples
    )
}

/// A rayon BFS's arrays: allocated once per contender, outside the timer,
/// and reset by each search (as statepipe's [`bfs::Searcher`] is).
struct RayonArrays {
    /// Each vertex's parent, [`NONE`] until claimed.
    parent: Vec<AtomicU32>,
    /// The frontier of a bottom-up level, one bit per vertex.
    bitmap: Vec<AtomicU64>,
}

impl RayonArrays {
    fn new(n: usize) -> Self {
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
    fn reached(&self) -> usize {
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
fn rayon_top_down(g: &Csr, arrays: &RayonArrays, root: u32) {
    arrays.reset(root);
    let parent = &arrays.parent;
    let mut frontier = vec![root];
    while !frontier.is_empty() {
        frontier = rayon_step(g, parent, &frontier);
    }
}

/// A direction-optimizing BFS with rayon (Beamer's heuristic, α = 15, β = 18).
fn rayon_direction_optimizing(g: &Csr, arrays: &RayonArrays, root: u32) {
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
fn hashmap_rayon(input: &[u8], _workers: usize) -> String {
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
fn hashbrown_threads(input: &[u8], _workers: usize) -> String {
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

    #[test]
    fn random_reads_reads() {
        let data = vec![1u32; 1 << 10];
        assert!(random_reads(&data, 2, 1 << 12) > 0.0);
    }

    #[test]
    fn peers_agree_with_statepipe() {
        let input = fasta::generate(2_000);
        let ours = kmer::knucleotide(&input, 2).unwrap();
        assert_eq!(hashmap_rayon(&input, 2), ours);
        assert_eq!(hashbrown_threads(&input, 2), ours);
        let edges = generator::generate(10, 16, 2, 2);
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
