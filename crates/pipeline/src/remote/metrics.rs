//! A distributed run's counters, per cut edge, for metrics; and, at the
//! coordinator, its members and the restores, for a live view.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::edge::{EdgeMetrics, EdgeStats};
use super::run::{Restore, RestoreKind};
use crate::checkpoint::History;

/// How many restores [`RemoteMetrics::restore_history`] keeps (the last
/// ones).
pub const RESTORES_KEPT: usize = 1000;

/// A member as the coordinator sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberInfo {
    /// Its number, given when it joined.
    pub id: u32,
    /// The address it joined from.
    pub addr: String,
    /// Whether it is still connected (not lost, and the run not over).
    pub alive: bool,
    /// Whether it asked to leave and was let go (not lost).
    pub left: bool,
    /// The parts placed on it by the latest attempt, in order (empty for a
    /// member lost before it, or that joined after it).
    pub parts: Vec<u32>,
}

/// A restore after a loss or a failure, or a rescale after a member left
/// or joined, as the coordinator made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreInfo {
    /// When the restore was decided (the failed attempt had stopped).
    pub at: Instant,
    /// The members alive to run the next attempt.
    pub members_left: usize,
    /// What was lost and where the run goes on from (`restore.from`: the
    /// checkpoint restored, `None` for the start).
    pub restore: Restore,
}

/// The counters of one process of a distributed run: its cut edges
/// (items, bytes, frames, credits, stalls) and its parts' progress; at
/// the coordinator also its members, the number of parts and the last
/// restores. Cheap to clone; [`edges`](Self::edges) and the others read
/// them while the run goes on, and after it.
#[derive(Clone, Default)]
pub struct RemoteMetrics {
    inner: Arc<Inner>,
}

/// The members the coordinator knows, and where the latest attempt put
/// the parts.
#[derive(Default)]
struct Members {
    /// By number: address and whether alive.
    known: BTreeMap<u32, (String, bool)>,
    /// Those let go after they asked to leave.
    left: BTreeSet<u32>,
    /// Part `k`'s member, for the latest attempt.
    placement: Vec<u32>,
}

struct Inner {
    created: Instant,
    edges: Mutex<Vec<(String, Arc<EdgeStats>)>>,
    parts_done: AtomicU64,
    checkpoints: AtomicU64,
    /// Nanoseconds from the last committed checkpoint's barrier to its
    /// commit.
    last_checkpoint_ns: AtomicU64,
    restores: AtomicU64,
    /// Restores of kind [`RestoreKind::Left`] or [`RestoreKind::Joined`].
    rescales: AtomicU64,
    skipped: AtomicU64,
    members: Mutex<Members>,
    restore_history: History<RestoreInfo>,
    /// When the coordinator's run returned.
    finished: OnceLock<Instant>,
}

impl Default for Inner {
    fn default() -> Self {
        Inner {
            created: Instant::now(),
            edges: Mutex::default(),
            parts_done: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            last_checkpoint_ns: AtomicU64::new(0),
            restores: AtomicU64::new(0),
            rescales: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            members: Mutex::default(),
            restore_history: History::new(RESTORES_KEPT),
            finished: OnceLock::new(),
        }
    }
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

    /// Counts a restore, and keeps it for [`restore_history`](Self::restore_history).
    pub(crate) fn count_restore(&self, restore: Restore, members_left: usize) {
        self.inner.restores.fetch_add(1, Ordering::Relaxed);
        if matches!(restore.kind, RestoreKind::Left | RestoreKind::Joined) {
            self.inner.rescales.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.restore_history.push(RestoreInfo {
            at: Instant::now(),
            members_left,
            restore,
        });
    }

    fn members_lock(&self) -> std::sync::MutexGuard<'_, Members> {
        self.inner.members.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Member `id` joined from `addr`.
    pub(crate) fn member_joined(&self, id: u32, addr: &str) {
        self.members_lock()
            .known
            .insert(id, (addr.to_string(), true));
    }

    /// Member `id` is lost (or its connection was closed).
    pub(crate) fn member_gone(&self, id: u32) {
        if let Some(m) = self.members_lock().known.get_mut(&id) {
            m.1 = false;
        }
    }

    /// Member `id` asked to leave and was let go.
    pub(crate) fn member_left(&self, id: u32) {
        let mut m = self.members_lock();
        m.left.insert(id);
        if let Some(k) = m.known.get_mut(&id) {
            k.1 = false;
        }
    }

    /// An attempt placed part `k` on member `placement[k]`.
    pub(crate) fn placed(&self, placement: &[u32]) {
        self.members_lock().placement = placement.to_vec();
    }

    /// The run is over (the coordinator's `run` returned).
    pub(crate) fn finish(&self) {
        let _ = self.inner.finished.set(Instant::now());
        let mut m = self.members_lock();
        for (_, alive) in m.known.values_mut() {
            *alive = false;
        }
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

    /// Restores from a checkpoint: after a loss or a failure, and the
    /// rescales (the coordinator's count).
    pub fn restores(&self) -> u64 {
        self.inner.restores.load(Ordering::Relaxed)
    }

    /// Of the [`restores`](Self::restores), the rescales: a member left
    /// ([`RestoreKind::Left`]) or joined ([`RestoreKind::Joined`]).
    pub fn rescales(&self) -> u64 {
        self.inner.rescales.load(Ordering::Relaxed)
    }

    /// The last restores (at most [`RESTORES_KEPT`]), oldest first: when,
    /// from which checkpoint, with how many members left (the
    /// coordinator's).
    pub fn restore_history(&self) -> Vec<RestoreInfo> {
        self.inner.restore_history.all()
    }

    /// Every member that joined, by number, with the parts the latest
    /// attempt placed on it (the coordinator's; empty elsewhere).
    pub fn members(&self) -> Vec<MemberInfo> {
        let m = self.members_lock();
        m.known
            .iter()
            .map(|(&id, (addr, alive))| MemberInfo {
                id,
                addr: addr.clone(),
                alive: *alive,
                left: m.left.contains(&id),
                parts: (0u32..)
                    .zip(&m.placement)
                    .filter(|&(_, &on)| on == id)
                    .map(|(k, _)| k)
                    .collect(),
            })
            .collect()
    }

    /// The number of parts the run is cut into (the coordinator's; 0
    /// before its first attempt, and elsewhere).
    pub fn parts(&self) -> usize {
        self.members_lock().placement.len()
    }

    /// When these metrics were made: the coordinator's bind, or the
    /// member's join. Times in [`RestoreInfo::at`] are on this clock.
    pub fn created(&self) -> Instant {
        self.inner.created
    }

    /// Whether the coordinator's run has returned (its members are then
    /// reported not alive).
    pub fn is_finished(&self) -> bool {
        self.inner.finished.get().is_some()
    }

    /// From [`created`](Self::created) to now, or to the end of the
    /// coordinator's run once it returned.
    pub fn elapsed(&self) -> Duration {
        let end = self
            .inner
            .finished
            .get()
            .copied()
            .unwrap_or_else(Instant::now);
        end.saturating_duration_since(self.inner.created)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn restore(kind: RestoreKind) -> Restore {
        Restore {
            kind,
            lost: None,
            why: String::new(),
            from: None,
            position: 0,
            detected_after: Duration::ZERO,
        }
    }

    #[test]
    fn rescales_are_counted_among_the_restores_and_apart() {
        let m = RemoteMetrics::default();
        for kind in [
            RestoreKind::Lost,
            RestoreKind::Left,
            RestoreKind::Failed,
            RestoreKind::Joined,
        ] {
            m.count_restore(restore(kind), 1);
        }
        assert_eq!(m.restores(), 4);
        assert_eq!(m.rescales(), 2);
        let kinds: Vec<RestoreKind> = m.restore_history().iter().map(|r| r.restore.kind).collect();
        assert_eq!(
            kinds,
            [
                RestoreKind::Lost,
                RestoreKind::Left,
                RestoreKind::Failed,
                RestoreKind::Joined
            ]
        );
    }
}
