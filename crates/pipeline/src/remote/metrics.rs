//! A distributed run's counters, per cut edge, for metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::edge::{EdgeMetrics, EdgeStats};

/// The counters of one process of a distributed run: its cut edges
/// (items, bytes, frames, credits, stalls) and its parts' progress. Cheap
/// to clone; [`edges`](Self::edges) reads them while the run goes on.
#[derive(Clone, Default)]
pub struct RemoteMetrics {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    edges: Mutex<Vec<(String, Arc<EdgeStats>)>>,
    parts_done: AtomicU64,
    checkpoints: AtomicU64,
    /// Nanoseconds from the last committed checkpoint's barrier to its
    /// commit.
    last_checkpoint_ns: AtomicU64,
    restores: AtomicU64,
    skipped: AtomicU64,
}

impl std::fmt::Debug for RemoteMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteMetrics")
            .field("edges", &self.edges())
            .finish()
    }
}

impl RemoteMetrics {
    /// The counters of an edge named `name`, made on first use.
    pub(crate) fn edge(&self, name: String) -> Arc<EdgeStats> {
        let mut e = self.inner.edges.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, s)) = e.iter().find(|(n, _)| *n == name) {
            return Arc::clone(s);
        }
        let s = Arc::new(EdgeStats::default());
        e.push((name, Arc::clone(&s)));
        s
    }

    /// The counters of `part`'s incoming and outgoing edges.
    pub(crate) fn part(&self, part: u32) -> (Arc<EdgeStats>, Arc<EdgeStats>) {
        (
            self.edge(format!("part {part} in")),
            self.edge(format!("part {part} out")),
        )
    }

    pub(crate) fn count_done(&self) {
        self.inner.parts_done.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_checkpoint(&self, took: std::time::Duration) {
        self.inner.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.inner
            .last_checkpoint_ns
            .store(took.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn count_skipped(&self) {
        self.inner.skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn count_restore(&self) {
        self.inner.restores.fetch_add(1, Ordering::Relaxed);
    }

    /// Every edge's counters now (counted over every attempt of the run).
    pub fn edges(&self) -> Vec<EdgeMetrics> {
        let e = self.inner.edges.lock().unwrap_or_else(|p| p.into_inner());
        e.iter().map(|(n, s)| s.snapshot(n.clone())).collect()
    }

    /// Parts this process finished.
    pub fn parts_done(&self) -> u64 {
        self.inner.parts_done.load(Ordering::Relaxed)
    }

    /// Checkpoints committed (the coordinator's count).
    pub fn checkpoints(&self) -> u64 {
        self.inner.checkpoints.load(Ordering::Relaxed)
    }

    /// How long the last committed checkpoint took, from its barrier to
    /// its commit, in seconds (the coordinator's).
    pub fn last_checkpoint_seconds(&self) -> f64 {
        self.inner.last_checkpoint_ns.load(Ordering::Relaxed) as f64 / 1e9
    }

    /// Checkpoints that could not be written, on some part or in the
    /// commit, and were skipped (the coordinator's count).
    pub fn skipped_checkpoints(&self) -> u64 {
        self.inner.skipped.load(Ordering::Relaxed)
    }

    /// Restores from a checkpoint after a loss (the coordinator's count).
    pub fn restores(&self) -> u64 {
        self.inner.restores.load(Ordering::Relaxed)
    }
}
