//! Kernel 2: direction-optimizing breadth-first search on pinned workers.
//!
//! Level-synchronous, after Beamer, Asanović and Patterson,
//! ["Direction-Optimizing Breadth-First Search"](https://parlab.eecs.berkeley.edu/sites/all/parlab/files/main.pdf)
//! (SC 2012). Each level runs in one of two directions:
//!
//! - **top-down**: workers take chunks of the frontier (a vertex list) from
//!   a shared counter, and claim each unvisited neighbour with a
//!   compare-and-swap on its parent; a worker keeps what it claimed in a
//!   local buffer and appends it to the next frontier in one `fetch_add`
//!   on the list's length;
//! - **bottom-up**: workers take chunks of 64-vertex words; each unvisited
//!   vertex scans its neighbours for one in the frontier (a bitmap) and
//!   stops at the first. A word of the next bitmap is written only by the
//!   worker that owns its chunk, so no claim is contended.
//!
//! Every level writes the next frontier both as a list and as a bitmap, so
//! either direction can follow. The switch is Beamer's heuristic with his
//! constants: go bottom-up when the frontier's edges `m_f` exceed the
//! unexplored edges `m_u` divided by [`ALPHA`] (15); come back top-down
//! when the frontier has fewer than `n / BETA` vertices ([`BETA`] = 18).
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
//! Within a level, parents, levels, frontier lists and bitmaps are written
//! with `Relaxed` atomics. A worker counts each finished chunk with an
//! `AcqRel` `fetch_add` on `finished`: the worker that finishes the last
//! chunk thereby acquires every write of the level. It then prepares the
//! next level and publishes it with a `Release` store of `claim`, which
//! pairs with the `Acquire` load of `claim` by which every worker learns of
//! the new level before touching it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::csr::Csr;
use super::par;

/// Beamer's α: go bottom-up when `m_f > m_u / ALPHA`.
pub const ALPHA: u64 = 15;
/// Beamer's β: go top-down when the frontier has fewer than `n / BETA` vertices.
pub const BETA: usize = 18;

/// The parent of a vertex outside the tree.
pub const NONE: u32 = u32::MAX;

/// Frontier vertices a top-down worker takes at once.
const TOP_DOWN_CHUNK: usize = 64;
/// Bitmap words (64 vertices each) a bottom-up worker takes at once.
const BOTTOM_UP_CHUNK: usize = 16;
/// Vertices a worker gathers before appending them to the next frontier.
const LOCAL_BUFFER: usize = 1024;

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

struct Search<'g> {
    g: &'g Csr,
    parent: Vec<AtomicU32>,
    level: Vec<AtomicU32>,
    lists: [Vec<AtomicU32>; 2],
    lengths: [AtomicUsize; 2],
    bitmaps: [Vec<AtomicU64>; 2],
    /// `(level number << 32) | next chunk to claim` of the current level.
    claim: AtomicU64,
    /// Chunks of the current level finished so far.
    finished: AtomicUsize,
    /// Chunks of the current level.
    chunks: AtomicUsize,
    /// Which of the two buffers holds the current frontier.
    current: AtomicUsize,
    /// The depth the current level assigns to the vertices it finds.
    depth: AtomicU32,
    /// Degrees summed over the next frontier (`m_f`).
    next_edges: AtomicU64,
    bottom_up: AtomicBool,
    done: AtomicBool,
    /// Bookkeeping between levels: edges not yet explored (`m_u`), the
    /// current frontier's edges, levels run bottom-up.
    unexplored: AtomicU64,
    frontier_edges: AtomicU64,
    bottom_up_levels: AtomicU32,
}

/// Searches `g` from `root` on `workers` pinned threads.
///
/// # Panics
///
/// If `root` is not a vertex of `g`.
pub fn bfs(g: &Csr, root: u32, workers: usize) -> BfsTree {
    let n = g.vertices();
    assert!((root as usize) < n, "root {root} outside 0..{n}");
    let atomics = |len: usize, v: u32| (0..len).map(|_| AtomicU32::new(v)).collect::<Vec<_>>();
    let words = n.div_ceil(64);
    let bitmap = || (0..words).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
    let s = Search {
        g,
        parent: atomics(n, NONE),
        level: atomics(n, NONE),
        lists: [atomics(n, 0), atomics(n, 0)],
        lengths: [AtomicUsize::new(1), AtomicUsize::new(0)],
        bitmaps: [bitmap(), bitmap()],
        claim: AtomicU64::new(0),
        finished: AtomicUsize::new(0),
        chunks: AtomicUsize::new(1),
        current: AtomicUsize::new(0),
        depth: AtomicU32::new(1),
        next_edges: AtomicU64::new(0),
        bottom_up: AtomicBool::new(false),
        done: AtomicBool::new(false),
        unexplored: AtomicU64::new((g.adjacency.len() - g.degree(root)) as u64),
        frontier_edges: AtomicU64::new(g.degree(root) as u64),
        bottom_up_levels: AtomicU32::new(0),
    };
    let r = root as usize;
    s.parent[r].store(root, Ordering::Relaxed);
    s.level[r].store(0, Ordering::Relaxed);
    s.lists[0][0].store(root, Ordering::Relaxed);
    s.bitmaps[0][r / 64].store(1 << (r % 64), Ordering::Relaxed);
    // The thread spawn's happens-before makes the stores above visible.
    par::on_workers(workers.max(1), |_| s.work());
    BfsTree {
        root,
        parent: s.parent.into_iter().map(AtomicU32::into_inner).collect(),
        level: s.level.into_iter().map(AtomicU32::into_inner).collect(),
        bottom_up_levels: s.bottom_up_levels.into_inner(),
    }
}

impl Search<'_> {
    /// Marks `v` found at `depth` in the next frontier's bitmap and list.
    fn found(&self, v: u32, next: usize, local: &mut Vec<u32>) {
        self.bitmaps[next][v as usize / 64].fetch_or(1 << (v % 64), Ordering::Relaxed);
        local.push(v);
        if local.len() == LOCAL_BUFFER {
            self.flush(next, local);
        }
    }

    /// Appends a worker's gathered vertices to the next frontier list.
    fn flush(&self, next: usize, local: &mut Vec<u32>) {
        if local.is_empty() {
            return;
        }
        let at = self.lengths[next].fetch_add(local.len(), Ordering::Relaxed);
        let mut edges = 0;
        for (slot, &v) in self.lists[next][at..at + local.len()]
            .iter()
            .zip(local.iter())
        {
            slot.store(v, Ordering::Relaxed);
            edges += self.g.degree(v) as u64;
        }
        self.next_edges.fetch_add(edges, Ordering::Relaxed);
        local.clear();
    }

    /// One worker: claim chunks of the current level until the search ends.
    fn work(&self) {
        let mut local = Vec::with_capacity(LOCAL_BUFFER);
        let mut seen = u32::MAX;
        let (mut cur, mut bottom_up, mut depth, mut chunks) = (0, false, 0, 0);
        let mut idle = 0u32;
        loop {
            // Acquire: pairs with the Release store of `claim` in `next_level`.
            let word = self.claim.load(Ordering::Acquire);
            if self.done.load(Ordering::Relaxed) {
                return;
            }
            let generation = (word >> 32) as u32;
            if generation != seen {
                seen = generation;
                cur = self.current.load(Ordering::Relaxed);
                bottom_up = self.bottom_up.load(Ordering::Relaxed);
                depth = self.depth.load(Ordering::Relaxed);
                chunks = self.chunks.load(Ordering::Relaxed);
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
            if bottom_up {
                self.bottom_up_chunk(cur, depth, chunk, &mut local);
            } else {
                self.top_down_chunk(cur, depth, chunk, &mut local);
            }
            self.flush(1 - cur, &mut local);
            // AcqRel: releases this chunk's writes; the last one acquires all.
            if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == chunks {
                self.next_level(cur, bottom_up, depth, generation);
            }
        }
    }

    /// Run by whoever finished the level's last chunk: every other worker
    /// is idle or about to find the level's chunks all claimed.
    fn next_level(&self, cur: usize, was_bottom_up: bool, depth: u32, generation: u32) {
        let n = self.parent.len();
        let found = self.lengths[1 - cur].load(Ordering::Relaxed);
        let m_f = self.next_edges.swap(0, Ordering::Relaxed);
        self.lengths[cur].store(0, Ordering::Relaxed);
        for word in &self.bitmaps[cur] {
            word.store(0, Ordering::Relaxed);
        }
        self.current.store(1 - cur, Ordering::Relaxed);
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
        self.bottom_up.store(go_bottom_up, Ordering::Relaxed);
        let chunks = if go_bottom_up {
            self.bitmaps[0].len().div_ceil(BOTTOM_UP_CHUNK)
        } else {
            found.div_ceil(TOP_DOWN_CHUNK)
        };
        self.chunks.store(chunks, Ordering::Relaxed);
        self.depth.store(depth + 1, Ordering::Relaxed);
        self.finished.store(0, Ordering::Relaxed);
        self.done.store(found == 0, Ordering::Relaxed);
        // Release: pairs with the Acquire load of `claim` in `work`.
        self.claim
            .store(u64::from(generation + 1) << 32, Ordering::Release);
    }

    fn top_down_chunk(&self, cur: usize, depth: u32, chunk: usize, local: &mut Vec<u32>) {
        let next = 1 - cur;
        let len = self.lengths[cur].load(Ordering::Relaxed);
        let start = chunk * TOP_DOWN_CHUNK;
        for slot in &self.lists[cur][start..(start + TOP_DOWN_CHUNK).min(len)] {
            let u = slot.load(Ordering::Relaxed);
            for &v in self.g.neighbours(u) {
                let p = &self.parent[v as usize];
                // A plain load first: most neighbours are already claimed.
                if p.load(Ordering::Relaxed) == NONE
                    && p.compare_exchange(NONE, u, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    self.level[v as usize].store(depth, Ordering::Relaxed);
                    self.found(v, next, local);
                }
            }
        }
    }

    fn bottom_up_chunk(&self, cur: usize, depth: u32, chunk: usize, local: &mut Vec<u32>) {
        let next = 1 - cur;
        let words = self.bitmaps[cur].len();
        let n = self.parent.len();
        let frontier = &self.bitmaps[cur];
        let start = chunk * BOTTOM_UP_CHUNK;
        for word in start..(start + BOTTOM_UP_CHUNK).min(words) {
            let mut bits = 0u64;
            for v in word * 64..(word * 64 + 64).min(n) {
                if self.parent[v].load(Ordering::Relaxed) != NONE {
                    continue;
                }
                for &u in self.g.neighbours(v as u32) {
                    let in_frontier =
                        frontier[u as usize / 64].load(Ordering::Relaxed) & (1 << (u % 64)) != 0;
                    if in_frontier {
                        // Only the holder of this chunk writes vertex v in this level.
                        self.parent[v].store(u, Ordering::Relaxed);
                        self.level[v].store(depth, Ordering::Relaxed);
                        bits |= 1 << (v % 64);
                        local.push(v as u32);
                        if local.len() == LOCAL_BUFFER {
                            self.flush(next, local);
                        }
                        break;
                    }
                }
            }
            if bits != 0 {
                self.bitmaps[next][word].store(bits, Ordering::Relaxed);
            }
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
