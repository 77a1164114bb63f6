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

impl<T> std::ops::DerefMut for Line<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
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

    /// Starts the workers, runs `f`, whose [`Searches::search`] calls
    /// reuse them, and stops them: the calling thread is worker 0 (pinned
    /// for the while, as the others are, where the process may use a CPU
    /// per worker), and the others wait, parked, between searches.
    pub fn with_workers<R>(&mut self, f: impl FnOnce(&mut Searches<'_, 'g>) -> R) -> R {
        *self.stop.get_mut() = false;
        let cpus = par::cpus_for(self.workers);
        let this = &*self;
        std::thread::scope(|scope| {
            let cpus = &cpus;
            let helpers: Vec<std::thread::Thread> = (1..this.workers)
                .map(|w| {
                    scope
                        .spawn(move || {
                            par::pin(cpus.as_deref(), w);
                            this.help();
                        })
                        .thread()
                        .clone()
                })
                .collect();
            // Stops the helpers however `f` ends, so the scope can join them.
            struct Stop<'s, 'g>(&'s Searcher<'g>, Vec<std::thread::Thread>);
            impl Drop for Stop<'_, '_> {
                fn drop(&mut self) {
                    // Release: pairs with the Acquire load in `help`.
                    self.0.stop.store(true, Ordering::Release);
                    self.1.iter().for_each(std::thread::Thread::unpark);
                }
            }
            let _stop = Stop(this, helpers.clone());
            let _pinned = cpus
                .as_ref()
                .and_then(|cpus| statepipe_sys::pin::pin_current_thread_for_now(cpus[0]));
            f(&mut Searches {
                searcher: this,
                helpers,
            })
        })
    }

    /// A helper worker: takes part in every search started until stopped.
    fn help(&self) {
        let mut seen = 0;
        loop {
            // Acquire: pairs with the Release store in `Stop::drop`.
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            // Acquire: pairs with the Release `fetch_add` in `Searches::search`.
            let started = self.searches.load(Ordering::Acquire);
            if started != seen {
                seen = started;
                self.work();
            } else {
                // `unpark` after the load above makes this return at once.
                std::thread::park();
            }
        }
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

    /// Appends a worker's gathered vertices (and their degrees, `edges`)
    /// to the queue.
    fn flush(&self, local: &mut Vec<u32>, edges: &mut u64) {
        if local.is_empty() {
            return;
        }
        let at = self.tail.fetch_add(local.len(), Ordering::Relaxed);
        for (slot, &v) in self.queue[at..at + local.len()].iter().zip(local.iter()) {
            slot.store(v, Ordering::Relaxed);
        }
        self.next_edges.fetch_add(*edges, Ordering::Relaxed);
        local.clear();
        *edges = 0;
    }

    /// Puts `v` (with `degree` neighbours) in the next frontier's queue
    /// buffer, and among its heavy vertices if it is one.
    fn found(&self, v: u32, degree: usize, local: &mut Vec<u32>, edges: &mut u64) {
        *edges += degree as u64;
        if degree > HEAVY_DEGREE {
            let at = self.heavy_found_len.fetch_add(1, Ordering::Relaxed);
            self.heavy_found[at].store(v, Ordering::Relaxed);
        }
        local.push(v);
        if local.len() == LOCAL_BUFFER {
            self.flush(local, edges);
        }
    }

    /// One worker: claim chunks of the current level until the search ends.
    fn work(&self) {
        let mut local = Vec::with_capacity(LOCAL_BUFFER);
        let mut seen = u32::MAX;
        let (mut cur, mut mode, mut chunks, mut frontier) = (0, RESET, 0, 0..0);
        let mut chunk_len = 0;
        let (mut vertex_chunks, mut heavy_len, mut heavy_chunk_len) = (0, 0, 0);
        let mut idle = 0u32;
        loop {
            // Acquire: pairs with the Release store of `claim` in `next_level`.
            let word = self.claim.load(Ordering::Acquire);
            // Acquire: pairs with the Release store in `next_level`, so the
            // caller sees the whole search once it sees it done.
            if self.done.load(Ordering::Acquire) {
                return;
            }
            let generation = (word >> 32) as u32;
            if generation != seen {
                cur = self.current.load(Ordering::Relaxed);
                mode = self.mode.load(Ordering::Relaxed);
                chunks = self.chunks.load(Ordering::Relaxed);
                chunk_len = self.chunk_len.load(Ordering::Relaxed);
                vertex_chunks = self.vertex_chunks.load(Ordering::Relaxed);
                heavy_len = self.heavy_len.load(Ordering::Relaxed);
                heavy_chunk_len = self.heavy_chunk_len.load(Ordering::Relaxed);
                frontier = self.level_start.load(Ordering::Relaxed)
                    ..self.level_end.load(Ordering::Relaxed);
                // Acquire: pairs with the Release fence in `close`. Had any
                // load above read a store of a later publication, this load
                // would see that publication's closed word: what was read
                // is then a mix, and is read again.
                std::sync::atomic::fence(Ordering::Acquire);
                if self.claim.load(Ordering::Relaxed) >> 32 != word >> 32 {
                    continue;
                }
                seen = generation;
            }
            let chunk = (word & 0xffff_ffff) as usize;
            if chunk >= chunks {
                // Nothing left to claim: the level ends when the chunks
                // others hold are finished.
                idle += 1;
                if idle < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
                continue;
            }
            idle = 0;
            if self
                .claim
                .compare_exchange_weak(word, word + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                continue;
            }
            let mut edges = 0;
            match mode {
                RESET => self.reset_chunk(chunk),
                BOTTOM_UP => {
                    let words = chunk * chunk_len..(chunk + 1) * chunk_len;
                    self.bottom_up_chunk(cur, words, &mut local, &mut edges);
                }
                _ if chunk < vertex_chunks => {
                    let start = frontier.start + chunk * chunk_len;
                    let end = (start + chunk_len).min(frontier.end);
                    self.top_down_chunk(1 - cur, start..end, &mut local, &mut edges);
                }
                _ => {
                    let first = (chunk - vertex_chunks) as u64 * heavy_chunk_len;
                    let edges_range = first..first + heavy_chunk_len;
                    self.heavy_chunk(1 - cur, heavy_len, edges_range, &mut local, &mut edges);
                }
            }
            self.flush(&mut local, &mut edges);
            // AcqRel: releases this chunk's writes; the last one acquires all.
            if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == chunks {
                if mode == RESET {
                    self.plant_root(generation);
                } else {
                    self.next_level(cur, mode == BOTTOM_UP, generation);
                }
            }
        }
    }

    /// Clears the parents and bitmap words of the reset level's `chunk`
    /// (the visited bitmap to the graph's isolated vertices).
    fn reset_chunk(&self, chunk: usize) {
        let start = chunk * RESET_CHUNK;
        let words = start / 64..((start + RESET_CHUNK) / 64).min(self.visited.len());
        for map in [&self.bitmaps[0], &self.bitmaps[1]] {
            for word in &map[words.clone()] {
                word.store(0, Ordering::Relaxed);
            }
        }
        // Vertices without neighbours start out visited: no search reaches
        // them, and bottom-up steps then skip them.
        for (word, &isolated) in self.visited[words.clone()]
            .iter()
            .zip(&self.g.isolated[words])
        {
            word.store(isolated, Ordering::Relaxed);
        }
    }

    /// Run by whoever finished the reset level's last chunk: puts the root
    /// in the tree and the frontier, and publishes the first level.
    fn plant_root(&self, generation: u32) {
        let generation = self.close(generation);
        let (g, root) = (self.g, self.root.load(Ordering::Relaxed));
        let r = root as usize;
        self.parent[r].store(root, Ordering::Relaxed);
        self.visited[r / 64].fetch_or(1 << (r % 64), Ordering::Relaxed);
        self.bitmaps[0][r / 64].store(1 << (r % 64), Ordering::Relaxed);
        self.queue[0].store(root, Ordering::Relaxed);
        self.tail.store(1, Ordering::Relaxed);
        self.heavy_found_len.store(0, Ordering::Relaxed);
        let heavy = g.degree(root) > HEAVY_DEGREE;
        self.heavy[0].0.store(root, Ordering::Relaxed);
        self.heavy[0]
            .1
            .store(g.degree(root) as u64, Ordering::Relaxed);
        self.heavy_len.store(usize::from(heavy), Ordering::Relaxed);
        self.heavy_chunk_len.store(
            g.degree(root)
                .div_ceil(self.workers * CHUNKS_PER_WORKER)
                .max(HEAVY_DEGREE) as u64,
            Ordering::Relaxed,
        );
        self.vertex_chunks
            .store(usize::from(!heavy), Ordering::Relaxed);
        self.level_start.store(0, Ordering::Relaxed);
        self.level_end.store(1, Ordering::Relaxed);
        self.current.store(0, Ordering::Relaxed);
        self.next_edges.store(0, Ordering::Relaxed);
        self.unexplored.store(
            (g.adjacency.len() - g.degree(root)) as u64,
            Ordering::Relaxed,
        );
        self.frontier_edges
            .store(g.degree(root) as u64, Ordering::Relaxed);
        self.bottom_up_levels.store(0, Ordering::Relaxed);
        self.mode.store(TOP_DOWN, Ordering::Relaxed);
        let heavy_chunks = if heavy {
            g.degree(root)
                .div_ceil(self.heavy_chunk_len.load(Ordering::Relaxed) as usize)
        } else {
            0
        };
        self.chunks
            .store(usize::from(!heavy) + heavy_chunks, Ordering::Relaxed);
        self.chunk_len.store(TOP_DOWN_CHUNK, Ordering::Relaxed);
        self.finished.store(0, Ordering::Relaxed);
        self.open(generation);
    }

    /// Closes level `generation` before the next one is written: a worker
    /// that reads the level's word afterwards finds nothing to claim, and
    /// one that reads the next level's description while it is written
    /// notices (see `work`). Returns the next level's number.
    fn close(&self, generation: u32) -> u32 {
        self.claim.store(
            u64::from(generation.wrapping_add(1)) << 32 | CLOSED,
            Ordering::Relaxed,
        );
        // Release: pairs with the Acquire fence in `work`.
        std::sync::atomic::fence(Ordering::Release);
        generation.wrapping_add(2)
    }

    /// Publishes the level `generation` that has just been described.
    fn open(&self, generation: u32) {
        // Release: pairs with the Acquire load of `claim` in `work`.
        self.claim
            .store(u64::from(generation) << 32, Ordering::Release);
    }

    /// Run by whoever finished the level's last chunk: every other worker
    /// is idle or about to find the level's chunks all claimed.
    fn next_level(&self, cur: usize, was_bottom_up: bool, generation: u32) {
        let generation = self.close(generation);
        let n = self.parent.len();
        let start = self.level_end.load(Ordering::Relaxed);
        let end = self.tail.load(Ordering::Relaxed);
        let found = end - start;
        let m_f = self.next_edges.swap(0, Ordering::Relaxed);
        for word in &self.bitmaps[cur] {
            word.store(0, Ordering::Relaxed);
        }
        self.current.store(1 - cur, Ordering::Relaxed);
        self.level_start.store(start, Ordering::Relaxed);
        self.level_end.store(end, Ordering::Relaxed);
        self.bottom_up_levels
            .fetch_add(u32::from(was_bottom_up), Ordering::Relaxed);
        let unexplored = self.unexplored.load(Ordering::Relaxed).saturating_sub(m_f);
        self.unexplored.store(unexplored, Ordering::Relaxed);
        let growing = m_f > self.frontier_edges.swap(m_f, Ordering::Relaxed);
        let go_bottom_up = if was_bottom_up {
            found >= n / BETA
        } else {
            growing && m_f > unexplored / ALPHA
        };
        self.mode.store(
            if go_bottom_up { BOTTOM_UP } else { TOP_DOWN },
            Ordering::Relaxed,
        );
        let (items, least) = if go_bottom_up {
            (self.visited.len(), BOTTOM_UP_CHUNK)
        } else {
            (found, TOP_DOWN_CHUNK)
        };
        let per_level = self.workers * CHUNKS_PER_WORKER;
        let chunk_len = (items / per_level).max(least);
        let vertex_chunks = items.div_ceil(chunk_len);
        self.chunk_len.store(chunk_len, Ordering::Relaxed);
        self.vertex_chunks.store(vertex_chunks, Ordering::Relaxed);
        // The heavy vertices' edges, end to end, in chunks of their own.
        let heavy_found = self.heavy_found_len.swap(0, Ordering::Relaxed);
        let heavy_chunks = if go_bottom_up {
            self.heavy_len.store(0, Ordering::Relaxed);
            0
        } else {
            let mut end = 0u64;
            for (slot, found) in self.heavy.iter().zip(&self.heavy_found[..heavy_found]) {
                let v = found.load(Ordering::Relaxed);
                end += self.g.degree(v) as u64;
                slot.0.store(v, Ordering::Relaxed);
                slot.1.store(end, Ordering::Relaxed);
            }
            self.heavy_len.store(heavy_found, Ordering::Relaxed);
            let len = end.div_ceil(per_level as u64).max(HEAVY_DEGREE as u64);
            self.heavy_chunk_len.store(len, Ordering::Relaxed);
            end.div_ceil(len) as usize
        };
        self.chunks
            .store(vertex_chunks + heavy_chunks, Ordering::Relaxed);
        self.finished.store(0, Ordering::Relaxed);
        self.open(generation);
        if found == 0 {
            // Last, so a caller that starts the next search on seeing it
            // done finds no store of this one still to come. Release:
            // pairs with the Acquire load of `done` in `work`.
            self.done.store(true, Ordering::Release);
        }
    }

    fn top_down_chunk(
        &self,
        next: usize,
        frontier: std::ops::Range<usize>,
        local: &mut Vec<u32>,
        edges: &mut u64,
    ) {
        for slot in &self.queue[frontier] {
            let u = slot.load(Ordering::Relaxed);
            let neighbours = self.g.neighbours(u);
            // A heavy vertex's edges are chunks of their own.
            if neighbours.len() <= HEAVY_DEGREE {
                self.top_down_edges(next, u, neighbours, local, edges);
            }
        }
    }

    /// The heavy edges `range` (of the current frontier's heavy vertices'
    /// edges, end to end), top-down.
    fn heavy_chunk(
        &self,
        next: usize,
        heavy_len: usize,
        range: std::ops::Range<u64>,
        local: &mut Vec<u32>,
        edges: &mut u64,
    ) {
        let heavy = &self.heavy[..heavy_len];
        // The first heavy vertex whose edges end after the range starts.
        let mut i = heavy.partition_point(|h| h.1.load(Ordering::Relaxed) <= range.start);
        while let Some((u, end)) = heavy.get(i) {
            let (u, end) = (u.load(Ordering::Relaxed), end.load(Ordering::Relaxed));
            let neighbours = self.g.neighbours(u);
            let start = end - neighbours.len() as u64;
            if start >= range.end {
                break;
            }
            let from = (range.start.max(start) - start) as usize;
            let to = (range.end.min(end) - start) as usize;
            self.top_down_edges(next, u, &neighbours[from..to], local, edges);
            i += 1;
        }
    }

    /// Claims every neighbour in `neighbours` of frontier vertex `u` that
    /// is not in the tree yet.
    fn top_down_edges(
        &self,
        next: usize,
        u: u32,
        neighbours: &[u32],
        local: &mut Vec<u32>,
        edges: &mut u64,
    ) {
        for &v in neighbours {
            let (word, bit) = (v as usize / 64, 1u64 << (v % 64));
            // The bitmap first: most neighbours are already in the tree.
            if self.visited[word].load(Ordering::Relaxed) & bit != 0 {
                continue;
            }
            // Whoever sets the bit has claimed `v`.
            if self.visited[word].fetch_or(bit, Ordering::Relaxed) & bit == 0 {
                self.parent[v as usize].store(u, Ordering::Relaxed);
                self.bitmaps[next][word].fetch_or(bit, Ordering::Relaxed);
                self.found(v, self.g.degree(v), local, edges);
            }
        }
    }

    fn bottom_up_chunk(
        &self,
        cur: usize,
        chunk: std::ops::Range<usize>,
        local: &mut Vec<u32>,
        edges: &mut u64,
    ) {
        let next = 1 - cur;
        let words = self.visited.len();
        let n = self.parent.len();
        let frontier = &self.bitmaps[cur];
        for word in chunk.start..chunk.end.min(words) {
            // Only the holder of this chunk writes these 64 vertices in this level.
            let seen = self.visited[word].load(Ordering::Relaxed);
            let mut todo = !seen;
            if word == words - 1 && n % 64 != 0 {
                todo &= (1 << (n % 64)) - 1;
            }
            let mut bits = 0u64;
            while todo != 0 {
                let i = todo.trailing_zeros();
                todo &= todo - 1;
                let v = word * 64 + i as usize;
                let neighbours = self.g.neighbours(v as u32);
                for &u in neighbours {
                    if frontier[u as usize / 64].load(Ordering::Relaxed) & (1 << (u % 64)) != 0 {
                        self.parent[v].store(u, Ordering::Relaxed);
                        bits |= 1 << i;
                        self.found(v as u32, neighbours.len(), local, edges);
                        break;
                    }
                }
            }
            if bits != 0 {
                self.visited[word].store(seen | bits, Ordering::Relaxed);
                self.bitmaps[next][word].store(bits, Ordering::Relaxed);
            }
        }
    }
}

/// A [`Searcher`] with its workers started ([`Searcher::with_workers`]).
pub struct Searches<'s, 'g> {
    searcher: &'s Searcher<'g>,
    helpers: Vec<std::thread::Thread>,
}

impl Searches<'_, '_> {
    /// Searches from `root`: afterwards the parent of every vertex found
    /// is set. Everything kernel 2 must compute happens here (time this);
    /// [`tree`](Searches::tree) then copies the result out.
    ///
    /// # Panics
    ///
    /// If `root` is not a vertex of the graph.
    pub fn search(&mut self, root: u32) {
        let s = self.searcher;
        let n = s.g.vertices();
        assert!((root as usize) < n, "root {root} outside 0..{n}");
        // The first level clears the bitmaps (`reset_chunk`), then plants
        // the root (`plant_root`). No worker holds a chunk of the last
        // search: its last level had none, and `done` was stored after
        // every other store of it.
        let generation = s.close((s.claim.load(Ordering::Relaxed) >> 32) as u32);
        s.root.store(root, Ordering::Relaxed);
        s.mode.store(RESET, Ordering::Relaxed);
        s.chunks.store(n.div_ceil(RESET_CHUNK), Ordering::Relaxed);
        s.finished.store(0, Ordering::Relaxed);
        s.done.store(false, Ordering::Relaxed);
        // Level numbers go on from the last search's, so a helper still
        // holding that search's last level never takes this one's for it.
        s.open(generation);
        // Release: pairs with the Acquire load of `searches` in `help`.
        s.searches.fetch_add(1, Ordering::Release);
        self.helpers.iter().for_each(std::thread::Thread::unpark);
        s.work();
    }

    /// How many vertices the last search reached (its root included).
    pub fn reached(&self) -> usize {
        self.searcher.reached()
    }

    /// The tree of the last search (as [`Searcher::tree`]).
    pub fn tree(&self) -> BfsTree {
        self.searcher.tree()
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
