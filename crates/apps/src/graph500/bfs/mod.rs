//! Kernel 2: direction-optimizing breadth-first search on pinned workers.
//!
//! Level-synchronous, after Beamer, Asanović and Patterson,
//! ["Direction-Optimizing Breadth-First Search"](https://parlab.eecs.berkeley.edu/sites/all/parlab/files/main.pdf)
//! (SC 2012). Each level runs in one of two directions:
//!
//! - **top-down**: workers take chunks of the frontier (a vertex list) from
//!   a shared counter (at most `CHUNKS_PER_WORKER` per worker, at least
//!   64 vertices each); a neighbour not yet in the visited bitmap is claimed
//!   by setting its bit there (`fetch_or`: whoever sets it owns the vertex
//!   and writes its parent); a worker keeps what it claimed in a local
//!   buffer and appends it to the queue in one `fetch_add`. A frontier
//!   vertex with more than `HEAVY_DEGREE` neighbours (a hub) is not scanned
//!   by whoever holds its vertex chunk: the level's heavy vertices' edges,
//!   end to end, are cut into chunks of their own, so a hub reached early
//!   (the second level of most searches holds one) is shared out too;
//! - **bottom-up**: workers take chunks of 64-vertex words (as many chunks
//!   as top-down, at least 16 words each); each vertex
//!   not in the visited bitmap (where vertices without neighbours start
//!   out, so they cost nothing) scans its neighbours (hubs first, as kernel
//!   1 orders them) for one in the frontier bitmap and stops at the first.
//!   A word of the visited and next bitmaps is written only by the worker
//!   that owns its chunk, so no claim is contended.
//!
//! Every level appends the vertices it finds to one queue (so the frontier
//! is always a contiguous stretch of it) and sets their bits in the next
//! frontier's bitmap, so either direction can follow. Levels are not
//! written during the search: [`Searcher::tree`] works them out afterwards
//! from the parents, in queue order. The switch is Beamer's heuristic with his
//! constants: go bottom-up when the frontier's edges `m_f` exceed the
//! unexplored edges `m_u` divided by [`ALPHA`] (15); come back top-down
//! when the frontier has fewer than `n / BETA` vertices ([`BETA`] = 18).
//!
//! A search starts with a level of its own, the reset: workers clear the
//! bitmaps of the previous search in chunks, in parallel, and whoever
//! finishes the last chunk plants the root. Parents are not cleared: a
//! vertex's parent is written when it is found, and [`Searcher::tree`]
//! reads only those of vertices in the queue.
//!
//! Workers stay up between searches ([`Searcher::with_workers`]): the
//! caller is worker 0, and the others park until the next search starts,
//! so a search pays no thread start or join.
//!
//! No lock is taken and no worker waits for another to arrive: a level is a
//! numbered set of chunks; workers claim chunks with a compare-and-swap on
//! one word holding `(level, next chunk)`, so a worker the OS has
//! descheduled holds nobody up (on a shared host, the others take its
//! share). Whoever finishes the level's last chunk swaps the buffers, picks
//! the next direction and publishes the next level.
//!
//! ## Memory ordering
//!
//! Within a level, parents, the queue and the bitmaps are written
//! with `Relaxed` atomics. A worker counts each finished chunk with an
//! `AcqRel` `fetch_add` on `finished`: the worker that finishes the last
//! chunk thereby acquires every write of the level. It then closes the
//! level (a `claim` word numbered one past it, with no chunk to take, then
//! a `Release` fence), describes the next level, and publishes it with a
//! `Release` store of `claim` numbered two past, which pairs with the
//! `Acquire` load of `claim` by which every worker learns of the new level
//! before touching it. A worker reading a level's description checks,
//! after an `Acquire` fence (pairing with the closing fence), that `claim`
//! still holds the same level; otherwise what it read may mix two levels,
//! and it reads again (a sequence lock). Level numbers run on from search
//! to search, so a worker still holding the last search's level never
//! takes the next search's for it. The end of a search is stored in
//! `done` (`Release`) after every other store of it, and a caller that
//! sees it (`Acquire`) sees the whole tree.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::csr::Csr;
use super::par;
use crate::mem::huge_vec;

mod levels;
mod workers;

/// Beamer's α: go bottom-up when `m_f > m_u / ALPHA`.
pub const ALPHA: u64 = 15;
/// Beamer's β: go top-down when the frontier has fewer than `n / BETA` vertices.
pub const BETA: usize = 18;

/// The parent of a vertex outside the tree.
pub const NONE: u32 = u32::MAX;

/// The fewest frontier vertices a top-down worker takes at once.
const TOP_DOWN_CHUNK: usize = 64;
/// The fewest bitmap words (64 vertices each) a bottom-up worker takes at once.
const BOTTOM_UP_CHUNK: usize = 16;
/// Chunks per worker a level is cut into, at most: enough for the workers
/// to even out their loads, few enough that claiming a chunk and counting
/// it finished (two atomic operations on lines every worker writes, which
/// cross cores) stay a small share of the level.
const CHUNKS_PER_WORKER: usize = 32;
/// Frontier vertices with more neighbours than this are heavy: a top-down
/// level hands their edges out in chunks of their own, so that one hub (a
/// Kronecker graph's hubs have tens of thousands of neighbours) does not
/// leave a single worker scanning it while the others wait.
const HEAVY_DEGREE: usize = 1024;
/// Vertices a worker gathers before appending them to the queue.
const LOCAL_BUFFER: usize = 1024;
/// Vertices whose bitmap bits a worker clears at once in the reset level
/// (a multiple of 64).
const RESET_CHUNK: usize = 64 * 1024;

/// The chunk number of a closed level's word: more than any level has.
const CLOSED: u64 = 0xffff_ffff;

/// What the chunks of the current level are.
const RESET: u32 = 0;
const TOP_DOWN: u32 = 1;
const BOTTOM_UP: u32 = 2;

/// A value on cache lines of its own (two: the adjacent-line prefetcher
/// fetches pairs), so that workers writing it do not take from others the
/// lines of what they only read.
#[repr(align(128))]
struct Line<T>(T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A BFS tree: the result of kernel 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BfsTree {
    /// The root.
    pub root: u32,
    /// The parent of every vertex ([`NONE`] outside the tree; the root's is itself).
    pub parent: Vec<u32>,
    /// The level of every vertex ([`NONE`] outside the tree; the root's is 0).
    pub level: Vec<u32>,
    /// How many levels ran bottom-up.
    pub bottom_up_levels: u32,
}

/// The arrays of a search over one graph, allocated once and reset by
/// each [`search`](Searcher::search), as the specification's reference
/// code allocates its tree and queue outside the timed kernel.
///
/// ```
/// use statepipe_apps::graph500::{bfs::Searcher, csr::Csr, generator};
///
/// let edges = generator::generate(8, 16, 1, 2);
/// let g = Csr::build(256, &edges, 2);
/// let mut searcher = Searcher::new(&g, 2);
/// searcher.search(edges[0][0]);
/// let tree = searcher.tree();
/// assert_eq!(tree.level[edges[0][0] as usize], 0);
///
/// // Many searches on the same workers:
/// let reached = searcher.with_workers(|searches| {
///     [edges[0][0], edges[1][1]].map(|root| {
///         searches.search(root);
///         searches.reached()
///     })
/// });
/// assert!(reached.iter().all(|&r| r > 1));
/// ```
pub struct Searcher<'g> {
    g: &'g Csr,
    workers: usize,
    root: AtomicU32,
    parent: Vec<AtomicU32>,
    /// Vertices in the tree so far, and those without neighbours (which
    /// no search reaches), one bit each.
    visited: Vec<AtomicU64>,
    /// The current and the next frontier, one bit per vertex.
    bitmaps: [Vec<AtomicU64>; 2],
    /// Every vertex found, in the order found: level by level, so the
    /// current frontier is `queue[level_start..level_end]`.
    queue: Vec<AtomicU32>,
    /// How many vertices `queue` holds.
    tail: Line<AtomicUsize>,
    /// The heavy vertices found so far in this level (the next frontier's).
    heavy_found: Vec<AtomicU32>,
    heavy_found_len: AtomicUsize,
    /// The current frontier's heavy vertices, and where each one's edges
    /// end in their concatenation.
    heavy: Vec<(AtomicU32, AtomicU64)>,
    heavy_len: AtomicUsize,
    /// Chunks of the current top-down level over frontier vertices; the
    /// rest are chunks of `heavy_chunk_len` heavy edges.
    vertex_chunks: AtomicUsize,
    heavy_chunk_len: AtomicU64,
    level_start: AtomicUsize,
    level_end: AtomicUsize,
    /// `(level number << 32) | next chunk to claim` of the current level.
    claim: Line<AtomicU64>,
    /// Chunks of the current level finished so far.
    finished: Line<AtomicUsize>,
    /// Chunks of the current level.
    chunks: AtomicUsize,
    /// Frontier vertices (top-down) or bitmap words (bottom-up) per chunk
    /// of the current level.
    chunk_len: AtomicUsize,
    /// Which bitmap holds the current frontier.
    current: AtomicUsize,
    /// Degrees summed over the next frontier (`m_f`).
    next_edges: Line<AtomicU64>,
    /// [`RESET`], [`TOP_DOWN`] or [`BOTTOM_UP`]: what the current level's
    /// chunks are.
    mode: AtomicU32,
    done: AtomicBool,
    /// Searches started: a helper that sees it change takes part.
    searches: AtomicU64,
    /// Set when the helpers are to return.
    stop: AtomicBool,
    /// Bookkeeping between levels: edges not yet explored (`m_u`), the
    /// current frontier's edges, levels run bottom-up.
    unexplored: AtomicU64,
    frontier_edges: AtomicU64,
    bottom_up_levels: AtomicU32,
}

/// A [`Searcher`] with its workers started ([`Searcher::with_workers`]).
pub struct Searches<'s, 'g> {
    searcher: &'s Searcher<'g>,
    helpers: Vec<std::thread::Thread>,
}

/// Searches `g` from `root` on `workers` pinned threads (a [`Searcher`]
/// used once).
///
/// # Panics
///
/// If `root` is not a vertex of `g`.
pub fn bfs(g: &Csr, root: u32, workers: usize) -> BfsTree {
    let mut s = Searcher::new(g, workers);
    s.search(root);
    s.tree()
}

impl<'g> Searcher<'g> {
    /// The arrays for searches of `g` on `workers` pinned threads.
    pub fn new(g: &'g Csr, workers: usize) -> Self {
        let n = g.vertices();
        let atomics = |v: u32| {
            let mut a = huge_vec(n);
            a.extend((0..n).map(|_| AtomicU32::new(v)));
            a
        };
        let bitmap = || {
            (0..n.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect::<Vec<_>>()
        };
        let heavy_max = g.adjacency.len() / (HEAVY_DEGREE + 1) + 1;
        Searcher {
            g,
            heavy_found: (0..heavy_max).map(|_| AtomicU32::new(0)).collect(),
            heavy_found_len: AtomicUsize::new(0),
            heavy: (0..heavy_max)
                .map(|_| (AtomicU32::new(0), AtomicU64::new(0)))
                .collect(),
            heavy_len: AtomicUsize::new(0),
            vertex_chunks: AtomicUsize::new(0),
            heavy_chunk_len: AtomicU64::new(0),
            workers: workers.max(1),
            root: AtomicU32::new(0),
            parent: atomics(NONE),
            visited: bitmap(),
            bitmaps: [bitmap(), bitmap()],
            queue: atomics(0),
            tail: Line(AtomicUsize::new(0)),
            level_start: AtomicUsize::new(0),
            level_end: AtomicUsize::new(0),
            claim: Line(AtomicU64::new(0)),
            finished: Line(AtomicUsize::new(0)),
            chunks: AtomicUsize::new(0),
            chunk_len: AtomicUsize::new(TOP_DOWN_CHUNK),
            current: AtomicUsize::new(0),
            next_edges: Line(AtomicU64::new(0)),
            mode: AtomicU32::new(RESET),
            done: AtomicBool::new(false),
            searches: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            unexplored: AtomicU64::new(0),
            frontier_edges: AtomicU64::new(0),
            bottom_up_levels: AtomicU32::new(0),
        }
    }

    /// Searches from `root` (as [`Searches::search`]), starting and
    /// stopping the workers for this one search.
    ///
    /// # Panics
    ///
    /// If `root` is not a vertex of the graph.
    pub fn search(&mut self, root: u32) {
        self.with_workers(|searches| searches.search(root));
    }

    /// How many vertices the last search reached (its root included).
    pub fn reached(&self) -> usize {
        self.tail.load(Ordering::Relaxed)
    }

    /// The tree of the last search, with every vertex's level (worked out
    /// from the parents in the order the search found the vertices).
    pub fn tree(&self) -> BfsTree {
        let n = self.parent.len();
        // A parent is only written when its vertex is found: the others
        // hold what an earlier search left.
        let mut parent = vec![NONE; n];
        let mut level = vec![NONE; n];
        let root = self.root.load(Ordering::Relaxed);
        parent[root as usize] = root;
        level[root as usize] = 0;
        let found = self.tail.load(Ordering::Relaxed);
        for v in &self.queue[1..found] {
            let v = v.load(Ordering::Relaxed) as usize;
            parent[v] = self.parent[v].load(Ordering::Relaxed);
            level[v] = level[parent[v] as usize].wrapping_add(1);
        }
        BfsTree {
            root,
            parent,
            level,
            bottom_up_levels: self.bottom_up_levels.load(Ordering::Relaxed),
        }
    }
}

/// A plain sequential queue BFS: the levels of every vertex from `root`
/// ([`NONE`] when unreachable). The oracle the tests compare against.
pub fn levels_sequential(g: &Csr, root: u32) -> Vec<u32> {
    let mut level = vec![NONE; g.vertices()];
    let mut queue = std::collections::VecDeque::new();
    level[root as usize] = 0;
    queue.push_back(root);
    while let Some(u) = queue.pop_front() {
        for &v in g.neighbours(u) {
            if level[v as usize] == NONE {
                level[v as usize] = level[u as usize] + 1;
                queue.push_back(v);
            }
        }
    }
    level
}
