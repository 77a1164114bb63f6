//! The service's metrics, in a `prometheus-client` registry.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::admission::Refusal;

/// A request's route and status.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// `POST /item`, `GET /item/{id}`, …, or `other` for requests answered
    /// before routing (malformed, too large, unknown route).
    pub route: &'static str,
    /// The status code.
    pub status: u16,
}

/// A ring stage.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabels {
    /// `journal`, `decode`, `apply` or `reply`.
    pub stage: &'static str,
}

/// Why a request was refused.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// `queue_delay` (429: a write expected to wait too long), `ring_full`
    /// (429) or `connections` (503: too many open).
    pub cause: &'static str,
}

/// An I/O thread.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IoLabels {
    /// Its index, from 0.
    pub io: u16,
}

/// The ring's stages, in the order their counters sit in
/// [`Metrics::stage_events`].
pub const STAGES: [&str; 4] = ["journal", "decode", "apply", "reply"];

/// A (route, status) pair's count on one I/O thread.
type Count = (&'static str, u16, Arc<AtomicU64>);

/// One I/O thread's answered requests, by route and status: counted on that
/// thread alone, with no lock and on no cache line another thread writes
/// (a [`Family`] lookup takes a read lock and bumps a counter every I/O
/// thread shares), and summed into `requests_total` when `/metrics` is
/// read.
#[derive(Debug, Default)]
pub struct Tally {
    /// This thread's counts, for the hot path (the thread's own handles).
    local: RefCell<Vec<Count>>,
    /// The same counts, for the scrape; the owning thread adds one the
    /// first time it sees its pair.
    shared: Arc<Mutex<Vec<Count>>>,
}

impl Tally {
    /// Counts one answered request.
    pub fn answered(&self, route: &'static str, status: u16) {
        let mut local = self.local.borrow_mut();
        match local.iter().find(|(r, s, _)| *s == status && *r == route) {
            // Relaxed: a count read by the scrape; only this thread writes it.
            Some((_, _, n)) => {
                n.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                let n = Arc::new(AtomicU64::new(1));
                local.push((route, status, Arc::clone(&n)));
                let mut shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
                shared.push((route, status, n));
            }
        }
    }
}

/// Every metric `/metrics` shows.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route and status: the sums of the I/O
    /// threads' [`Tally`]s, brought up to date by [`Metrics::encode`].
    requests: Family<RequestLabels, Counter>,
    /// Every I/O thread's counts (and the lock that keeps two scrapes from
    /// adding the same counts twice).
    tallies: Mutex<Vec<Arc<Mutex<Vec<Count>>>>>,
    /// Requests refused, by cause, in [`Refusal::ALL`] order.
    pub refusals: [Counter; 3],
    /// Requests on the ring: published, not yet replied to.
    pub ring_depth: Gauge,
    /// Seconds per journal write + fsync.
    pub fsync_seconds: Histogram,
    /// Events per journal batch (group commit).
    pub batch_size: Histogram,
    /// 1 while the journal's last commit went over a zero-filled segment
    /// (its fsync flushed data alone), 0 while it appends.
    pub zero_filled: Gauge,
    /// Seconds per snapshot written (encode, write, fsync, rename); its
    /// count is the number of snapshots written.
    pub snapshot_seconds: Histogram,
    /// Requests published on the ring.
    pub published: Counter,
    /// Events each stage has handled, in [`STAGES`] order (added once per
    /// batch).
    pub stage_events: [Counter; 4],
    /// Events published that a stage has not handled yet (set when
    /// `/metrics` is read).
    stage_depth: Family<StageLabels, Gauge>,
    /// Open connections, per I/O thread.
    connections: Family<IoLabels, Gauge>,
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("statepipe_serve");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by route and status",
            requests.clone(),
        );
        let refused = Family::<RefusalLabels, Counter>::default();
        registry.register(
            "refusals",
            "Requests refused at once: 429 (queue_delay, ring_full) or 503 (connections)",
            refused.clone(),
        );
        let refusals = Refusal::ALL.map(|cause| {
            refused
                .get_or_create(&RefusalLabels {
                    cause: cause.label(),
                })
                .clone()
        });
        let ring_depth = Gauge::default();
        registry.register(
            "ring_depth",
            "Requests on the ring, not yet replied to",
            ring_depth.clone(),
        );
        let fsync_seconds = Histogram::new(exponential_buckets(1e-5, 2.0, 20));
        registry.register(
            "journal_fsync_seconds",
            "Journal write + fsync latency",
            fsync_seconds.clone(),
        );
        let batch_size = Histogram::new(exponential_buckets(1.0, 2.0, 12));
        registry.register(
            "journal_batch_events",
            "Events per journal batch",
            batch_size.clone(),
        );
        let zero_filled = Gauge::default();
        registry.register(
            "journal_zero_filled",
            "1 while the journal writes over a zero-filled segment, 0 while it appends",
            zero_filled.clone(),
        );
        let snapshot_seconds = Histogram::new(exponential_buckets(1e-3, 2.0, 16));
        registry.register(
            "snapshot_seconds",
            "Snapshots written, and how long each took to encode, write and fsync",
            snapshot_seconds.clone(),
        );
        let published = Counter::default();
        registry.register(
            "ring_published",
            "Requests published on the ring",
            published.clone(),
        );
        let events = Family::<StageLabels, Counter>::default();
        registry.register(
            "stage_events",
            "Events handled, by ring stage",
            events.clone(),
        );
        let stage_events = STAGES.map(|stage| events.get_or_create(&StageLabels { stage }).clone());
        let stage_depth = Family::<StageLabels, Gauge>::default();
        registry.register(
            "stage_depth",
            "Events published that the stage has not handled yet",
            stage_depth.clone(),
        );
        let connections = Family::<IoLabels, Gauge>::default();
        registry.register(
            "connections",
            "Open connections, per I/O thread",
            connections.clone(),
        );
        Metrics {
            registry,
            tallies: Mutex::default(),
            connections,
            published,
            stage_events,
            stage_depth,
            requests,
            refusals,
            ring_depth,
            fsync_seconds,
            batch_size,
            zero_filled,
            snapshot_seconds,
        }
    }

    /// The gauge of I/O thread `io`'s open connections (shared: every
    /// clone counts the same).
    pub fn connections(&self, io: usize) -> Gauge {
        let io = u16::try_from(io).unwrap_or(u16::MAX);
        self.connections.get_or_create(&IoLabels { io }).clone()
    }

    /// Counts one refusal.
    pub fn refused(&self, cause: Refusal) {
        let i = Refusal::ALL
            .iter()
            .position(|&c| c == cause)
            .expect("every cause is listed");
        self.refusals[i].inc();
    }

    /// A new I/O thread's counts of answered requests.
    pub fn tally(&self) -> Tally {
        let tally = Tally::default();
        let mut tallies = self.tallies.lock().unwrap_or_else(PoisonError::into_inner);
        tallies.push(Arc::clone(&tally.shared));
        tally
    }

    /// Adds to `requests` what the I/O threads counted since the last call
    /// (`requests` is incremented here alone, so it holds what was added
    /// before).
    fn sum_tallies(&self) {
        let tallies = self.tallies.lock().unwrap_or_else(PoisonError::into_inner);
        let mut sums: HashMap<(&'static str, u16), u64> = HashMap::new();
        for tally in tallies.iter() {
            for (route, status, n) in tally.lock().unwrap_or_else(PoisonError::into_inner).iter() {
                // Relaxed: counts only grow; one read late shows next time.
                *sums.entry((route, *status)).or_default() += n.load(Ordering::Relaxed);
            }
        }
        for ((route, status), sum) in sums {
            let counter = self
                .requests
                .get_or_create(&RequestLabels { route, status });
            let before = counter.get();
            if sum > before {
                counter.inc_by(sum - before);
            }
        }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        self.sum_tallies();
        let published = self.published.get();
        for (stage, events) in STAGES.iter().zip(&self.stage_events) {
            let depth = published.saturating_sub(events.get());
            self.stage_depth
                .get_or_create(&StageLabels { stage })
                .set(i64::try_from(depth).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
