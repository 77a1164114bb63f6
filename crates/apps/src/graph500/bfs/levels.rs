//! One level of a search: claiming chunks, the two directions, and the
//! hand-over from one level to the next (see the parent module on memory
//! ordering).

use std::sync::atomic::Ordering;

use super::{
    Searcher, ALPHA, BETA, BOTTOM_UP, BOTTOM_UP_CHUNK, CHUNKS_PER_WORKER, CLOSED, HEAVY_DEGREE,
    LOCAL_BUFFER, RESET, RESET_CHUNK, TOP_DOWN, TOP_DOWN_CHUNK,
};

impl Searcher<'_> {
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
    pub(super) fn work(&self) {
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
        let heavy = g.degree(root) > HEAVY_DEGREE;
        self.heavy_found[0].store(root, Ordering::Relaxed);
        self.heavy_found_len
            .store(usize::from(heavy), Ordering::Relaxed);
        let heavy_chunks = self.plan_heavy(self.workers * CHUNKS_PER_WORKER);
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
    pub(super) fn close(&self, generation: u32) -> u32 {
        self.claim.store(
            u64::from(generation.wrapping_add(1)) << 32 | CLOSED,
            Ordering::Relaxed,
        );
        // Release: pairs with the Acquire fence in `work`.
        std::sync::atomic::fence(Ordering::Release);
        generation.wrapping_add(2)
    }

    /// Publishes the level `generation` that has just been described.
    pub(super) fn open(&self, generation: u32) {
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
        let heavy_chunks = if go_bottom_up {
            self.heavy_found_len.store(0, Ordering::Relaxed);
            self.heavy_len.store(0, Ordering::Relaxed);
            0
        } else {
            self.plan_heavy(per_level)
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

    /// Makes the heavy vertices found so far the level's heavy list (their
    /// edges, end to end, in chunks of their own: about `per_level` of
    /// them, each at least `HEAVY_DEGREE` edges), starts the next list,
    /// and returns how many chunks they make.
    fn plan_heavy(&self, per_level: usize) -> usize {
        let found = self.heavy_found_len.swap(0, Ordering::Relaxed);
        let mut end = 0u64;
        for (slot, v) in self.heavy.iter().zip(&self.heavy_found[..found]) {
            let v = v.load(Ordering::Relaxed);
            end += self.g.degree(v) as u64;
            slot.0.store(v, Ordering::Relaxed);
            slot.1.store(end, Ordering::Relaxed);
        }
        self.heavy_len.store(found, Ordering::Relaxed);
        let len = end.div_ceil(per_level as u64).max(HEAVY_DEGREE as u64);
        self.heavy_chunk_len.store(len, Ordering::Relaxed);
        end.div_ceil(len) as usize
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
