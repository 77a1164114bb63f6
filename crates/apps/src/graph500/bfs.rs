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
//! No lock is taken: workers meet at a spin barrier between levels (whose
//! `Release`/`Acquire` pair orders every `Relaxed` access of one level
//! before the next, see `par::SpinBarrier`), and worker 0 alone, between two
//! barriers, swaps the buffers and picks the next direction.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::csr::Csr;
use super::par::{self, SpinBarrier};

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

/// Which way a level runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    TopDown = 0,
    BottomUp = 1,
}

struct Search<'g> {
    g: &'g Csr,
    parent: Vec<AtomicU32>,
    level: Vec<AtomicU32>,
    lists: [Vec<AtomicU32>; 2],
    lengths: [AtomicUsize; 2],
    bitmaps: [Vec<AtomicU64>; 2],
    /// Which of the two buffers holds the current frontier.
    current: AtomicUsize,
    /// The next chunk of work of the current level.
    next_chunk: AtomicUsize,
    /// Degrees summed over the next frontier (`m_f`).
    next_edges: AtomicU64,
    bottom_up: AtomicBool,
    done: AtomicBool,
    barrier: SpinBarrier,
    /// Worker 0's bookkeeping between levels: edges not yet explored
    /// (`m_u`), the current frontier's edges, levels run bottom-up.
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
    let workers = workers.max(1);
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
        current: AtomicUsize::new(0),
        next_chunk: AtomicUsize::new(0),
        next_edges: AtomicU64::new(0),
        bottom_up: AtomicBool::new(false),
        done: AtomicBool::new(false),
        barrier: SpinBarrier::new(workers),
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
    par::on_workers(workers, |w| {
        let mut depth = 0u32;
        let mut local = Vec::with_capacity(LOCAL_BUFFER);
        loop {
            let direction = if s.bottom_up.load(Ordering::Relaxed) {
                Direction::BottomUp
            } else {
                Direction::TopDown
            };
            let cur = s.current.load(Ordering::Relaxed);
            match direction {
                Direction::TopDown => s.top_down(cur, depth + 1, &mut local),
                Direction::BottomUp => s.bottom_up(cur, depth + 1, &mut local),
            }
            s.barrier.wait();
            if w == 0 {
                // Every other worker now waits at the next barrier: worker 0
                // alone resets the level's shared state and picks the direction.
                let found = s.lengths[1 - cur].load(Ordering::Relaxed);
                let m_f = s.next_edges.swap(0, Ordering::Relaxed);
                s.lengths[cur].store(0, Ordering::Relaxed);
                for word in &s.bitmaps[cur] {
                    word.store(0, Ordering::Relaxed);
                }
                s.current.store(1 - cur, Ordering::Relaxed);
                s.next_chunk.store(0, Ordering::Relaxed);
                let was_bottom_up = direction == Direction::BottomUp;
                s.bottom_up_levels
                    .fetch_add(u32::from(was_bottom_up), Ordering::Relaxed);
                let unexplored = s.unexplored.load(Ordering::Relaxed).saturating_sub(m_f);
                s.unexplored.store(unexplored, Ordering::Relaxed);
                let growing = m_f > s.frontier_edges.swap(m_f, Ordering::Relaxed);
                let go_bottom_up = if was_bottom_up {
                    found >= n / BETA
                } else {
                    growing && m_f > unexplored / ALPHA
                };
                s.bottom_up.store(go_bottom_up, Ordering::Relaxed);
                s.done.store(found == 0, Ordering::Relaxed);
            }
            s.barrier.wait();
            if s.done.load(Ordering::Relaxed) {
                break;
            }
            depth += 1;
        }
    });
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

    fn top_down(&self, cur: usize, depth: u32, local: &mut Vec<u32>) {
        let next = 1 - cur;
        let len = self.lengths[cur].load(Ordering::Relaxed);
        loop {
            let start = self.next_chunk.fetch_add(TOP_DOWN_CHUNK, Ordering::Relaxed);
            if start >= len {
                break;
            }
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
        self.flush(next, local);
    }

    fn bottom_up(&self, cur: usize, depth: u32, local: &mut Vec<u32>) {
        let next = 1 - cur;
        let words = self.bitmaps[cur].len();
        let n = self.parent.len();
        let frontier = &self.bitmaps[cur];
        loop {
            let start = self
                .next_chunk
                .fetch_add(BOTTOM_UP_CHUNK, Ordering::Relaxed);
            if start >= words {
                break;
            }
            for word in start..(start + BOTTOM_UP_CHUNK).min(words) {
                let mut bits = 0u64;
                for v in word * 64..(word * 64 + 64).min(n) {
                    if self.parent[v].load(Ordering::Relaxed) != NONE {
                        continue;
                    }
                    for &u in self.g.neighbours(v as u32) {
                        let in_frontier = frontier[u as usize / 64].load(Ordering::Relaxed)
                            & (1 << (u % 64))
                            != 0;
                        if in_frontier {
                            // Only this worker writes vertex v in this level.
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
        self.flush(next, local);
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
