//! The Graph500 breadth-first search benchmark.
//!
//! After the [Graph500 specification](https://graph500.org/?page_id=12)
//! (version 3.0, the BFS kernel): generate a Kronecker graph of `2^scale`
//! vertices and `edgefactor * 2^scale` edge tuples ([`generator`]); build
//! the undirected graph in compressed sparse rows, timed (kernel 1,
//! [`csr`]); search it from `roots` sampled vertices of non-zero degree,
//! each search timed (kernel 2, [`bfs`]); validate every tree with the
//! specification's five checks ([`validate`](mod@validate)); report the
//! specification's statistics ([`Report`]), where TEPS is the number of
//! input tuples within the traversed component over the search's time.
//!
//! ```
//! use statepipe_apps::graph500::{run, Config};
//!
//! let report = run(&Config { scale: 8, roots: 4, workers: 2, ..Config::default() }, &mut |_| {}).unwrap();
//! assert_eq!(report.searches.len(), 4);
//! assert!(report.to_string().contains("SCALE:                          8"));
//! ```

pub mod bfs;
pub mod csr;
pub mod edges;
mod error;
pub mod generator;
mod par;
mod stats;
pub mod validate;

use std::fmt;
use std::time::Instant;

pub use edges::{EdgeList, Storage};
pub use error::{Graph500Error, ValidationError};
pub use stats::Stats;

/// The parameters of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `log2` of the number of vertices.
    pub scale: u32,
    /// Edge tuples per vertex.
    pub edgefactor: u32,
    /// Searches to run, from distinct roots of non-zero degree.
    pub roots: usize,
    /// The seed of the generator and of the root sample.
    pub seed: u64,
    /// Worker threads.
    pub workers: usize,
    /// Where the edge list is kept between kernel 1 and the validations.
    pub storage: Storage,
}

impl Default for Config {
    /// The specification's parameters at scale 16: edgefactor 16, 64 roots.
    fn default() -> Self {
        Config {
            scale: 16,
            edgefactor: 16,
            roots: 64,
            seed: 1,
            workers: crate::default_workers(),
            storage: Storage::default(),
        }
    }
}

impl Config {
    /// About how many bytes of its own memory a run needs at its peak: the
    /// graph (4 bytes a tuple each way before deduplication, 8 a vertex of
    /// offsets), then the larger of kernel 1's per-vertex arrays (degrees
    /// and ranks) and those
    /// of a search and its validation (parents, queue, bitmaps, the tree
    /// handed back with its levels, validation's marks), and the edge list
    /// where it is kept in memory or in a file on a tmpfs (else a chunk a
    /// worker).
    pub fn bytes_needed(&self) -> u64 {
        let n = 1u64 << self.scale;
        let m = u64::from(self.edgefactor) << self.scale;
        let graph = 4 * (2 * m) + 8 * (n + 1) + n / 8;
        let kernel1 = n * (4 + 1);
        let search = n * (4 + 4 + 4 + 4 + 2) + 3 * n / 8;
        let list = if self.storage.file_in_memory() {
            8 * m
        } else {
            self.storage.resident_bytes(m, self.workers)
        };
        list + graph + kernel1.max(search)
    }

    /// Checks the parameters, and that the run fits in the memory available.
    ///
    /// # Errors
    ///
    /// [`Graph500Error::BadConfig`] or [`Graph500Error::TooLarge`].
    pub fn check(&self) -> Result<(), Graph500Error> {
        if !(1..=31).contains(&self.scale) {
            return Err(Graph500Error::BadConfig(format!(
                "scale {} outside 1..=31",
                self.scale
            )));
        }
        if self.edgefactor == 0 || self.roots == 0 || self.workers == 0 {
            return Err(Graph500Error::BadConfig(
                "edgefactor, roots and workers must be at least 1".into(),
            ));
        }
        let needed = self.bytes_needed();
        if let Some(available) = mem_available() {
            if needed > available {
                return Err(Graph500Error::TooLarge {
                    scale: self.scale,
                    needed,
                    available,
                });
            }
        }
        if let Storage::File(dir) = &self.storage {
            let needed = 8 * (u64::from(self.edgefactor) << self.scale);
            if let Some(available) = disk_available(dir) {
                if needed > available {
                    return Err(Graph500Error::NoRoomForEdges {
                        dir: dir.clone(),
                        needed,
                        available,
                    });
                }
            }
        }
        Ok(())
    }
}

/// Bytes free for an unprivileged user in the folder `dir`, where that
/// can be told.
pub fn disk_available(dir: &std::path::Path) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let stat = nix::sys::statvfs::statvfs(dir).ok()?;
        Some(stat.blocks_available() as u64 * stat.fragment_size() as u64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        None
    }
}

/// `MemAvailable` from `/proc/meminfo`, in bytes, where it can be read.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_available(&text)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One timed and validated search.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// Its root.
    pub root: u32,
    /// Seconds the search took.
    pub seconds: f64,
    /// Input tuples within the traversed component.
    pub nedge: u64,
    /// Levels run bottom-up.
    pub bottom_up_levels: u32,
}

impl Search {
    /// Traversed edges per second.
    pub fn teps(&self) -> f64 {
        self.nedge as f64 / self.seconds
    }
}

/// The result of a run: what the specification's output block reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The parameters.
    pub config: Config,
    /// Seconds to generate the edge list.
    pub generation_seconds: f64,
    /// Seconds of kernel 1.
    pub construction_seconds: f64,
    /// Every search, in order.
    pub searches: Vec<Search>,
    /// The peak resident memory of each phase.
    pub memory: MemoryAccount,
}

/// The peak resident memory (RSS) of each phase of a run, in bytes, as the
/// kernel counts it (`VmHWM`, reset at the start of each phase through
/// `/proc/self/clear_refs`); `None` where it cannot be measured. Pages of
/// the edge list's file in the page cache are not the process's and do
/// not count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryAccount {
    /// Generating the edge list (and writing it to its file).
    pub generation: Option<u64>,
    /// Kernel 1.
    pub construction: Option<u64>,
    /// The largest of the searches.
    pub search: Option<u64>,
    /// The largest of the validations (the tree with its levels, and the
    /// pass over the edges).
    pub validation: Option<u64>,
}

impl MemoryAccount {
    /// The peak of the whole run.
    pub fn peak(&self) -> Option<u64> {
        [
            self.generation,
            self.construction,
            self.search,
            self.validation,
        ]
        .into_iter()
        .flatten()
        .max()
    }
}

/// Measures one phase's peak: resets the high-water mark when made, reads
/// it when ended.
struct PhasePeak;

impl PhasePeak {
    fn start() -> Self {
        statepipe_sys::rss::reset_peak();
        PhasePeak
    }

    fn end(self, into: &mut Option<u64>) {
        if let Some(peak) = statepipe_sys::rss::peak() {
            *into = Some(into.map_or(peak, |p: u64| p.max(peak)));
        }
    }
}

/// Progress of a run, for the caller to print.
#[derive(Debug)]
pub enum Progress<'a> {
    /// The edge list is made.
    Generated {
        /// Seconds it took.
        seconds: f64,
    },
    /// Kernel 1 is done.
    Built {
        /// Seconds it took.
        seconds: f64,
    },
    /// One search is done and valid.
    Searched(&'a Search),
}

/// Samples up to `count` distinct roots of non-zero degree, from the seed.
pub fn sample_roots(g: &csr::Csr, count: usize, seed: u64) -> Vec<u32> {
    let n = g.vertices() as u64;
    let mut roots = Vec::with_capacity(count);
    let mut taken = std::collections::HashSet::new();
    // Bounded: past 64 draws per root, the graph has too few such vertices.
    for k in 0..(64 * count as u64 + n) {
        if roots.len() == count {
            break;
        }
        let v = (generator::random(seed, 4, k) % n) as u32;
        if g.degree(v) > 0 && taken.insert(v) {
            roots.push(v);
        }
    }
    roots
}

/// Runs the benchmark: generation, kernel 1, and `roots` validated searches.
///
/// # Errors
///
/// A bad or too large configuration, or the first search failing validation.
pub fn run(
    config: &Config,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<Report, Graph500Error> {
    config.check()?;
    let n = 1usize << config.scale;
    let mut memory = MemoryAccount::default();
    let edges_failed = |error: edges::ScanError<std::convert::Infallible>| match error {
        edges::ScanError::Io { dir, error } => Graph500Error::EdgeFile {
            dir,
            error: error.to_string(),
        },
        edges::ScanError::Stopped(never) => match never {},
    };
    let phase = PhasePeak::start();
    let started = Instant::now();
    let edges = EdgeList::generate(
        config.scale,
        config.edgefactor,
        config.seed,
        config.workers,
        &config.storage,
    )
    .map_err(edges_failed)?;
    let generation_seconds = started.elapsed().as_secs_f64();
    phase.end(&mut memory.generation);
    progress(Progress::Generated {
        seconds: generation_seconds,
    });
    let phase = PhasePeak::start();
    let started = Instant::now();
    let g = csr::Csr::from_edges(n, &edges, config.workers).map_err(edges_failed)?;
    let construction_seconds = started.elapsed().as_secs_f64();
    phase.end(&mut memory.construction);
    progress(Progress::Built {
        seconds: construction_seconds,
    });
    let mut searches = Vec::with_capacity(config.roots);
    let mut searcher = bfs::Searcher::new(&g, config.workers);
    searcher.with_workers(|searcher| {
        for root in sample_roots(&g, config.roots, config.seed) {
            let phase = PhasePeak::start();
            let started = Instant::now();
            searcher.search(root);
            let seconds = started.elapsed().as_secs_f64();
            phase.end(&mut memory.search);
            let phase = PhasePeak::start();
            let tree = searcher.tree();
            let nedge = validate::validate_list(&edges, &tree, config.workers).map_err(
                |error| match error {
                    edges::ScanError::Stopped(error) => Graph500Error::Invalid { root, error },
                    edges::ScanError::Io { dir, error } => Graph500Error::EdgeFile {
                        dir,
                        error: error.to_string(),
                    },
                },
            )?;
            let bottom_up_levels = tree.bottom_up_levels;
            drop(tree);
            phase.end(&mut memory.validation);
            let search = Search {
                root,
                seconds,
                nedge,
                bottom_up_levels,
            };
            progress(Progress::Searched(&search));
            searches.push(search);
        }
        Ok::<_, Graph500Error>(())
    })?;
    Ok(Report {
        config: config.clone(),
        generation_seconds,
        construction_seconds,
        searches,
        memory,
    })
}

impl Report {
    /// Statistics of the search times.
    pub fn time_stats(&self) -> Stats {
        Stats::of(&self.searches.iter().map(|s| s.seconds).collect::<Vec<_>>())
    }

    /// Statistics of the traversed edge counts.
    pub fn nedge_stats(&self) -> Stats {
        Stats::of(
            &self
                .searches
                .iter()
                .map(|s| s.nedge as f64)
                .collect::<Vec<_>>(),
        )
    }

    /// Statistics of the TEPS, with the harmonic mean.
    pub fn teps_stats(&self) -> Stats {
        Stats::of(&self.searches.iter().map(Search::teps).collect::<Vec<_>>())
    }
}

impl fmt::Display for Report {
    /// The specification's output block.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let line = |f: &mut fmt::Formatter<'_>, key: &str, value: String| {
            writeln!(f, "{:<32}{value}", format!("{key}:"))
        };
        let c = &self.config;
        line(f, "SCALE", c.scale.to_string())?;
        line(f, "edgefactor", c.edgefactor.to_string())?;
        line(f, "NBFS", self.searches.len().to_string())?;
        line(f, "graph_generation", g(self.generation_seconds))?;
        line(f, "num_mpi_processes", "1".into())?;
        line(f, "construction_time", g(self.construction_seconds))?;
        let t = self.time_stats();
        for (key, v) in t.quantiles("time") {
            line(f, &format!("bfs  {key}"), g(v))?;
        }
        line(f, "bfs  mean_time", g(t.mean))?;
        line(f, "bfs  stddev_time", g(t.stddev))?;
        let e = self.nedge_stats();
        for (key, v) in e.quantiles("nedge") {
            line(f, &key, g_digits(v, 11))?;
        }
        line(f, "mean_nedge", g_digits(e.mean, 11))?;
        line(f, "stddev_nedge", g_digits(e.stddev, 11))?;
        let p = self.teps_stats();
        for (key, v) in p.quantiles("TEPS") {
            line(f, &format!("bfs  {key}"), g(v))?;
        }
        line(f, "bfs  harmonic_mean_TEPS", g(p.harmonic_mean))?;
        line(f, "bfs  harmonic_stddev_TEPS", g(p.harmonic_stddev))
    }
}

/// A number as C's `%g` prints it (six significant digits).
fn g(x: f64) -> String {
    g_digits(x, 6)
}

/// A number as C's `%.{digits}g` prints it.
fn g_digits(x: f64, digits: i32) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let exp = x.abs().log10().floor() as i32;
    if (-4..digits).contains(&exp) {
        let s = format!("{:.*}", (digits - 1 - exp).max(0) as usize, x);
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        s
    } else {
        let s = format!("{:.*e}", (digits - 1) as usize, x);
        let (mantissa, e) = s.split_once('e').expect("exponent form");
        let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().expect("an exponent");
        format!("{mantissa}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_percent_g() {
        assert_eq!(g(0.5), "0.5");
        assert_eq!(g(123456.0), "123456");
        assert_eq!(g(1234567.0), "1.23457e+06");
        assert_eq!(g(7.5e8), "7.5e+08");
        assert_eq!(g(0.000012345), "1.2345e-05");
        assert_eq!(g(0.0123), "0.0123");
        assert_eq!(g_digits(16_777_216.0, 11), "16777216");
    }

    #[test]
    fn reads_mem_available() {
        let text = "MemTotal:  100 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(parse_mem_available(text), Some(2048 * 1024));
    }

    #[test]
    fn refuses_a_scale_too_large_up_front() {
        let config = Config {
            scale: 31,
            edgefactor: 1 << 10,
            ..Config::default()
        };
        match config.check() {
            Err(Graph500Error::TooLarge { needed, .. }) => {
                assert_eq!(needed, config.bytes_needed())
            }
            other => assert!(mem_available().is_none(), "{other:?}"),
        }
    }
}
