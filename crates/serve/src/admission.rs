//! Admission of writes by queueing delay: a write that would wait longer
//! than the bound is refused (429) before it touches the ring.
//!
//! A write's expected wait is the age of the oldest write not yet
//! answered: each I/O thread keeps the publish times of its writes on the
//! ring in order (answers come back to it in the order it published) and
//! shows the oldest in a cell of its own. It grows with a backlog and with
//! a pipeline that slowed down (a slow disk, a CPU quota) alike, and needs
//! no model of the pipeline: an estimate of the writes on the ring times a
//! time per write, measured from the gaps between batches, would count a
//! CPU quota's throttled time as work.
//!
//! As in CoDel, a write is refused only once the expected wait has stayed
//! over the bound for as long as the bound itself: a spike shorter than
//! that (one slow fsync, a thread preempted) is absorbed instead of
//! answered with a burst of 429s, and accepted writes wait at most about
//! twice the bound. Reads never go through here.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its expected wait was over the bound (429).
    QueueDelay,
    /// The ring was full (429).
    RingFull,
    /// Too many connections were open (503).
    Connections,
}

impl Refusal {
    /// Every cause, in the order of [`Refusal::label`]'s counters.
    pub const ALL: [Refusal; 3] = [Refusal::QueueDelay, Refusal::RingFull, Refusal::Connections];

    /// The `cause` label in the metrics.
    pub fn label(self) -> &'static str {
        match self {
            Refusal::QueueDelay => "queue_delay",
            Refusal::RingFull => "ring_full",
            Refusal::Connections => "connections",
        }
    }
}

/// The estimate, shared by the I/O threads (each writes its own cell and
/// reads all).
#[derive(Debug)]
pub struct Admission {
    /// The bound on a write's expected wait, in ns.
    max_delay_ns: u64,
    /// The time base of the cells.
    epoch: Instant,
    /// Per I/O thread: 1 + ns since `epoch` of its oldest unanswered
    /// write's publish, or 0 for none.
    ///
    /// Relaxed throughout (here and in `over_since`): the cells are
    /// estimates, read to decide whether to admit; nothing else is handed
    /// over through them.
    oldest: Box<[CachePadded<AtomicU64>]>,
    /// 1 + ns since `epoch` when the expected wait was first seen over the
    /// bound, or 0 while it is not (Relaxed, as above: two I/O threads
    /// racing here move the start by a few µs).
    over_since: AtomicU64,
}

impl Admission {
    /// For `io_threads` I/O threads, refusing writes expected to wait over
    /// `max_delay`.
    pub fn new(io_threads: usize, max_delay: Duration) -> Self {
        Admission {
            max_delay_ns: u64::try_from(max_delay.as_nanos()).unwrap_or(u64::MAX),
            epoch: Instant::now(),
            oldest: (0..io_threads)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            over_since: AtomicU64::new(0),
        }
    }

    fn ns(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// How long a write arriving at `now` is expected to wait: the age of
    /// the oldest unanswered write.
    pub fn expected_wait(&self, now: Instant) -> Duration {
        let now_ns = self.ns(now);
        let oldest = self
            .oldest
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .filter(|&t| t != 0)
            .min()
            .map_or(0, |t| now_ns.saturating_sub(t - 1));
        Duration::from_nanos(oldest)
    }

    /// Whether a write arriving at `now` may go on the ring: yes while its
    /// expected wait is within the bound, or has been over it for less than
    /// the bound.
    pub fn admits(&self, now: Instant) -> bool {
        let wait = self.expected_wait(now).as_nanos();
        if wait <= u128::from(self.max_delay_ns) {
            if self.over_since.load(Ordering::Relaxed) != 0 {
                self.over_since.store(0, Ordering::Relaxed);
            }
            return true;
        }
        let now_ns = self.ns(now);
        let mut since = self.over_since.load(Ordering::Relaxed);
        if since == 0 {
            since = now_ns.saturating_add(1);
            self.over_since.store(since, Ordering::Relaxed);
        }
        now_ns.saturating_sub(since - 1) < self.max_delay_ns
    }
}

/// One I/O thread's writes on the ring, oldest first.
#[derive(Debug)]
pub struct InFlight {
    index: usize,
    published: VecDeque<u64>,
}

impl InFlight {
    /// For I/O thread `index`.
    pub fn new(index: usize) -> Self {
        InFlight {
            index,
            published: VecDeque::new(),
        }
    }

    /// A write of this thread went on the ring at `at`.
    pub fn published(&mut self, admission: &Admission, at: Instant) {
        let t = admission.ns(at).saturating_add(1);
        self.published.push_back(t);
        if self.published.len() == 1 {
            admission.oldest[self.index].store(t, Ordering::Relaxed);
        }
    }

    /// The oldest write of this thread was answered.
    pub fn answered(&mut self, admission: &Admission) {
        self.published.pop_front();
        let next = self.published.front().copied().unwrap_or(0);
        admission.oldest[self.index].store(next, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_unanswered_write_bounds_the_wait() {
        let a = Admission::new(2, Duration::from_millis(10));
        let t0 = Instant::now();
        assert!(a.admits(t0));
        let mut io = [InFlight::new(0), InFlight::new(1)];
        io[0].published(&a, t0);
        io[1].published(&a, t0 + Duration::from_millis(5));
        io[1].published(&a, t0 + Duration::from_millis(6));
        // The oldest is io 0's, 12 ms old at t0 + 12 ms.
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(a.expected_wait(ms(12)), Duration::from_millis(12));
        // Over the bound: admitted for as long as the bound, then refused.
        assert!(a.admits(ms(12)));
        assert!(a.admits(ms(21)));
        assert!(!a.admits(ms(22)));
        io[0].answered(&a);
        assert_eq!(a.expected_wait(ms(22)), Duration::from_millis(17));
        assert!(!a.admits(ms(23)), "still over the bound");
        io[1].answered(&a);
        assert_eq!(a.expected_wait(ms(14)), Duration::from_millis(8));
        assert!(a.admits(ms(14)), "within the bound: the spell over it ends");
        assert!(a.admits(ms(20)), "a new spell over it starts");
        assert!(!a.admits(ms(30)));
        io[1].answered(&a);
        assert!(a.admits(ms(60_000)));
    }
}
