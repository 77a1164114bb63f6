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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;
use rustc_hash::FxBuildHasher;
use statepipe_apps::graph500::bfs::{self, NONE};
use statepipe_apps::graph500::csr::Csr;
use statepipe_apps::graph500::{sample_roots, validate, EdgeList, Storage};
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
            Metric {
                case: format!("{case} peak RSS"),
                unit: "GB".into(),
                higher_is_better: false,
            },
            Metric {
                case: format!("{case} bytes/edge"),
                unit: "B".into(),
                higher_is_better: false,
            },
        ]
    };
    let mut groups = Vec::new();
    if g.is_some() {
        let mut metrics = vec![Metric {
            case: format!("{bfs_group} hmean"),
            unit: "GTEPS".into(),
            higher_is_better: true,
        }];
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
            Metric {
                case: format!("{run_group} seconds"),
                unit: "s".into(),
                higher_is_better: false,
            },
            Metric {
                case: format!("{run_group} hmean"),
                unit: "GTEPS".into(),
                higher_is_better: true,
            },
            Metric {
                case: format!("{run_group} median search"),
                unit: "ms".into(),
                higher_is_better: false,
            },
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
            metrics: vec![Metric {
                case: kn_group.clone(),
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
        });
    }
    if wanted("host/random-reads") {
        groups.push(Group {
            name: "host/random-reads".into(),
            metrics: vec![Metric {
                case: "host/random-reads 128MiB".into(),
                unit: "G reads/s".into(),
                higher_is_better: true,
            }],
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

/// What one whole `graph500` run measured.
struct RunFigures {
    /// Seconds from start to exit.
    seconds: f64,
    /// The harmonic-mean TEPS of its output block.
    teps: f64,
    /// The median search time of its output block, in seconds.
    median: f64,
    /// Its peak resident memory, in bytes.
    peak: f64,
}

/// One whole `graph500` run of `exe` as a child process (`edges`: its
/// `--edges` value, `None` for an executable that predates the flag): its
/// seconds start to exit, the harmonic-mean TEPS of its output block, and
/// its peak resident memory in bytes, sampled from outside every 10 ms
/// (`VmRSS` in `/proc/PID/status`; the child's own high-water mark is no
/// use here, as `statepipe graph500` resets it phase by phase).
fn graph500_command(
    exe: &std::path::Path,
    scale: u32,
    roots: usize,
    edges: Option<&str>,
) -> Result<RunFigures, BenchError> {
    use std::sync::atomic::AtomicBool;
    let started = Instant::now();
    let mut command = std::process::Command::new(exe);
    command.args([
        "graph500",
        "--scale",
        &scale.to_string(),
        "--roots",
        &roots.to_string(),
    ]);
    if let Some(edges) = edges {
        command.args(["--edges", edges]);
    }
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::failed("statepipe graph500", e))?;
    let status = format!("/proc/{}/status", child.id());
    let done = AtomicBool::new(false);
    let (out, peak) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0u64;
            while !done.load(Ordering::Relaxed) {
                let rss = std::fs::read_to_string(&status).ok().and_then(|text| {
                    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
                    line[6..].split_whitespace().next()?.parse::<u64>().ok()
                });
                peak = peak.max(rss.unwrap_or(0) * 1024);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            peak
        });
        let out = child.wait_with_output();
        done.store(true, Ordering::Relaxed);
        (out, sampler.join().expect("the RSS sampler panicked"))
    });
    let out = out.map_err(|e| BenchError::failed("statepipe graph500", e))?;
    let seconds = started.elapsed().as_secs_f64();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !out.status.success() {
        return Err(BenchError::failed(
            "statepipe graph500",
            format!("{}: {}", out.status, stderr.trim()),
        ));
    }
    let teps = parse_value(&stdout, "bfs  harmonic_mean_TEPS:").ok_or_else(|| {
        BenchError::failed(
            "statepipe graph500",
            format!("no harmonic_mean_TEPS line in its output:\n{stdout}\n{stderr}"),
        )
    })?;
    let median = parse_value(&stdout, "bfs  median_time:").unwrap_or(f64::NAN);
    Ok(RunFigures {
        seconds,
        teps,
        median,
        peak: peak as f64,
    })
}

/// The number after `key` on its line of `text`.
fn parse_value(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
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
    fn reads_the_output_block() {
        let block = "SCALE:                          8\nbfs  harmonic_mean_TEPS:        1.5e+09\n";
        assert_eq!(parse_value(block, "bfs  harmonic_mean_TEPS:"), Some(1.5e9));
        assert_eq!(parse_value(block, "bfs  mean_time:"), None);
    }

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
