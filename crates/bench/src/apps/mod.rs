//! `statepipe bench apps`: Graph500 BFS and k-nucleotide against rayon and
//! plain-threads peers, on the same input in the same run.
//!
//! - `graph500/scale{S}`: harmonic-mean TEPS over the sampled roots (the
//!   same roots, the same graph, traversed edges counted once by validating
//!   statepipe's tree) for statepipe (all workers, and one worker), a rayon
//!   top-down BFS and a rayon direction-optimizing BFS (Beamer's α = 15,
//!   β = 18, as statepipe). A peer must reach as many vertices as statepipe.
//!   statepipe's search arrays are allocated once per sample (a
//!   [`bfs::Searcher`], as Graph500's reference code allocates its tree
//!   outside the timed kernel) and reset in each timed search, and its
//!   workers stay up through a sample's searches, as rayon's pool does; the
//!   peers' arrays (the atomic parent array, the bottom-up bitmap) are
//!   allocated once per sample in the same way and reset, in parallel,
//!   inside each timed search: setup is charged alike. Beside the TEPS,
//!   each contender's peak resident memory over its sample (the graph, its
//!   own arrays and the bench process itself; the peak is reset before the
//!   sample) and that peak over the generated tuples. The edge list is kept
//!   in a temporary file, as `statepipe graph500` keeps it, and the
//!   k-nucleotide input and the random-read array are made only when their
//!   groups run, so that nothing else of size is resident then.
//! - `graph500-run/scale{S}`: whole `statepipe graph500` runs (generation,
//!   kernel 1, the searches and their validations), one child process a
//!   sample, with the edge list in a file, regenerated, and in memory: the
//!   seconds start to exit, the harmonic-mean TEPS and median search time
//!   of its output block, and its peak resident memory (sampled from
//!   outside every 10 ms) with that over the generated tuples; with
//!   [`AppsOptions::baseline`], another build's executable beside them
//!   (an A/B comparison in one interleaved run).
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

use std::time::Instant;

use statepipe_apps::graph500::bfs::{self, NONE};
use statepipe_apps::graph500::csr::Csr;
use statepipe_apps::graph500::{sample_roots, validate, EdgeList, Storage};
use statepipe_apps::{fasta, kmer};

use crate::harness::{self, Contender, Group, Metric, SampleDone};
use crate::host::Host;
use crate::report::Report;
use crate::BenchError;

mod peers;
mod whole_run;

use peers::{
    hashbrown_threads, hashmap_rayon, rayon_direction_optimizing, rayon_top_down, RayonArrays,
};
use whole_run::graph500_command;

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
    /// Run only what these comma-separated filters name: a group whose
    /// name contains one (all its contenders), or a contender whose
    /// `group imp config` contains one (e.g. `graph500-run/scale24
    /// statepipe edges=file`).
    pub filter: Option<String>,
    /// The `statepipe` executable whose `graph500` command the
    /// `graph500-run` group runs; without it that group is left out.
    pub statepipe: Option<std::path::PathBuf>,
    /// Another build's executable, run in the `graph500-run` group as
    /// `baseline` (as it was before a change, for an A/B comparison).
    pub baseline: Option<std::path::PathBuf>,
}

impl AppsOptions {
    /// The defaults: scale 20, 16 roots, fasta 25,000,000; `quick`: scale 16, 2,500,000.
    pub fn new(quick: bool, samples: usize) -> Self {
        AppsOptions {
            scale: if quick { 16 } else { 20 },
            roots: if quick { 8 } else { 16 },
            fasta_n: if quick { 2_500_000 } else { 25_000_000 },
            samples,
            filter: None,
            statepipe: None,
            baseline: None,
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
    let tuples = (16u64 << options.scale) as f64;
    // A group runs where a filter names it, part of it, or one of its
    // contenders (`group imp config`); a contender where a filter is part
    // of its group's name or of its own.
    let filters: Vec<&str> = options
        .filter
        .as_deref()
        .map_or(Vec::new(), |f| f.split(',').map(str::trim).collect());
    let wanted = |group: &str| {
        filters.is_empty()
            || filters
                .iter()
                .any(|f| group.contains(f) || f.starts_with(group))
    };
    let bfs_group = format!("graph500/scale{}", options.scale);
    let run_group = format!("graph500-run/scale{}", options.scale);
    let kn_group = format!("knucleotide/{}", options.fasta_n);
    let file = |e| BenchError::failed("graph500 edge list", e);
    // The graph, and each root's traversed edges and reached vertices, for
    // the BFS group only.
    let (g, expected) = if wanted(&bfs_group) {
        let edges = EdgeList::generate(options.scale, 16, 1, workers, &Storage::temp_file())
            .map_err(file)?;
        let g = Csr::from_edges(n, &edges, workers).map_err(file)?;
        let roots = sample_roots(&g, options.roots, 1);
        let mut expected = Vec::new();
        for &root in &roots {
            let tree = bfs::bfs(&g, root, workers);
            let nedge = validate::validate_list(&edges, &tree, workers)
                .map_err(|e| BenchError::failed("graph500 statepipe", e))?;
            let reached = tree.parent.iter().filter(|&&p| p != NONE).count();
            expected.push((root, nedge, reached));
        }
        (Some(g), expected)
    } else {
        (None, Vec::new())
    };
    // Made when their groups first run, so that they are not resident
    // during the Graph500 groups.
    let input = std::cell::OnceCell::new();
    let input = || input.get_or_init(|| fasta::generate(options.fasta_n));
    let report_expected = std::cell::OnceCell::new();
    let report_expected = || {
        report_expected
            .get_or_init(|| kmer::knucleotide(input(), workers).map_err(|e| e.to_string()))
            .clone()
            .map_err(|e| BenchError::failed("knucleotide", e))
    };

    // Every contender's arrays are allocated in each sample, outside the
    // timer, as Graph500's reference code allocates its tree outside the
    // timed kernel, and reset inside each timed search. statepipe's workers
    // stay up through a sample's searches, as rayon's pool does through the
    // peers'.
    let statepipe_bfs = |w: usize| -> Searches<'_> {
        let g = g.as_ref().expect("the graph of the BFS group");
        Box::new(move |roots| {
            let mut searcher = bfs::Searcher::new(g, w);
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
        let g = g.as_ref().expect("the graph of the BFS group");
        Box::new(move |roots| {
            let arrays = RayonArrays::new(n);
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
        Contender::new(imp, config, move || {
            let (input, expected) = (input(), report_expected()?);
            let started = Instant::now();
            let out = f(input, w);
            let seconds = started.elapsed().as_secs_f64();
            if out != expected {
                return Err(BenchError::failed("knucleotide", "a different report"));
            }
            Ok(vec![seconds])
        })
    };
    let statepipe_kn: fn(&[u8], usize) -> String =
        |input, w| kmer::knucleotide(input, w).expect("valid input");
    let memory = std::cell::OnceCell::new();
    let reads_contender = |threads: usize| {
        let memory = &memory;
        Contender::new("memory", format!("threads={threads}"), move || {
            let memory = memory.get_or_init(|| vec![1u32; RANDOM_READ_WORDS]);
            Ok(vec![random_reads(memory, threads, RANDOM_READS)])
        })
    };
    let whole_run = |imp: &str, exe: &std::path::Path, edges: Option<&'static str>| {
        let exe = exe.to_path_buf();
        let (scale, roots) = (options.scale, options.roots);
        let config = edges.map_or(String::new(), |e| format!("edges={e}"));
        Contender::new(imp, config, move || {
            let run = graph500_command(&exe, scale, roots, edges)?;
            Ok(vec![
                run.seconds,
                run.teps / 1e9,
                run.median * 1e3,
                run.peak / 1e9,
                run.peak / tuples,
            ])
        })
    };
    let memory_metrics = |case: &str| {
        [
            Metric::new(format!("{case} peak RSS"), "GB", false),
            Metric::new(format!("{case} bytes/edge"), "B", false),
        ]
    };
    let mut groups = Vec::new();
    if g.is_some() {
        let mut metrics = vec![Metric::new(format!("{bfs_group} hmean"), "GTEPS", true)];
        metrics.extend(memory_metrics(&bfs_group));
        let contender = |imp: &str, config: String, search| {
            with_peak_rss(tuples, bfs_contender(imp, config, &expected, search))
        };
        groups.push(Group {
            name: bfs_group.clone(),
            metrics,
            contenders: vec![
                contender(
                    "statepipe",
                    format!("workers={workers}"),
                    statepipe_bfs(workers),
                ),
                contender("statepipe", "workers=1".into(), statepipe_bfs(1)),
                contender("rayon-top-down", String::new(), peer_bfs(rayon_top_down)),
                contender(
                    "rayon-dir-opt",
                    String::new(),
                    peer_bfs(rayon_direction_optimizing),
                ),
            ],
        });
    }
    if let (true, Some(exe)) = (wanted(&run_group), &options.statepipe) {
        let mut metrics = vec![
            Metric::new(format!("{run_group} seconds"), "s", false),
            Metric::new(format!("{run_group} hmean"), "GTEPS", true),
            Metric::new(format!("{run_group} median search"), "ms", false),
        ];
        metrics.extend(memory_metrics(&run_group));
        let mut contenders = vec![
            whole_run("statepipe", exe, Some("file")),
            whole_run("statepipe", exe, Some("regenerate")),
            whole_run("statepipe", exe, Some("memory")),
        ];
        if let Some(baseline) = &options.baseline {
            contenders.push(whole_run("baseline", baseline, None));
        }
        groups.push(Group {
            name: run_group.clone(),
            metrics,
            contenders,
        });
    }
    if wanted(&kn_group) {
        groups.push(Group {
            name: kn_group.clone(),
            metrics: vec![Metric::new(kn_group.clone(), "s", false)],
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
        });
    }
    if wanted("host/random-reads") {
        groups.push(Group {
            name: "host/random-reads".into(),
            metrics: vec![Metric::new("host/random-reads 128MiB", "G reads/s", true)],
            contenders: vec![reads_contender(workers), reads_contender(1)],
        });
    }
    for group in &mut groups {
        let name = group.name.clone();
        group.contenders.retain(|c| {
            let label = format!("{name} {} {}", c.imp, c.config);
            filters.is_empty()
                || filters
                    .iter()
                    .any(|f| name.contains(f) || label.trim_end().contains(f))
        });
    }
    groups.retain(|g| !g.contenders.is_empty());
    if groups.is_empty() {
        return Err(BenchError::failed(
            "bench apps",
            format!(
                "nothing matches {:?} (groups: {bfs_group}, {run_group}, {kn_group}, \
                 host/random-reads)",
                options.filter.as_deref().unwrap_or("")
            ),
        ));
    }
    let rows = harness::run(groups, options.samples, progress)?;
    Ok(Report::new("apps", host, rows))
}

/// `contender` with two more values per sample: the peak resident memory
/// of the process over the sample (reset just before it), in GB, and that
/// over `tuples`.
fn with_peak_rss(tuples: f64, contender: Contender<'_>) -> Contender<'_> {
    contender.map_sample(|mut sample| {
        Box::new(move || {
            statepipe_sys::rss::reset_peak();
            let mut values = sample()?;
            let peak = statepipe_sys::rss::peak().map_or(f64::NAN, |p| p as f64);
            values.extend([peak / 1e9, peak / tuples]);
            Ok(values)
        })
    })
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
        "apps: Graph500 scale {} (edgefactor 16, {} roots, seed 1; the BFS kernels on one graph, \
         and whole runs as child processes) and k-nucleotide on fasta {}; {} samples per \
         contender, interleaved{}",
        options.scale,
        options.roots,
        options.fasta_n,
        options.samples,
        options.filter.as_ref().map_or(String::new(), |f| format!(
            "; only the groups matching {f:?}"
        ))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_reads_reads() {
        let data = vec![1u32; 1 << 10];
        assert!(random_reads(&data, 2, 1 << 12) > 0.0);
    }
}
