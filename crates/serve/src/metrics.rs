//! The service's metrics, in a `prometheus-client` registry.

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

/// Every metric `/metrics` shows.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route and status.
    pub requests: Family<RequestLabels, Counter>,
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

    /// Counts one answered request.
    pub fn answered(&self, route: &'static str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels { route, status })
            .inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
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
