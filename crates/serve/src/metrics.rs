//! The service's metrics, in a `prometheus-client` registry, and a
//! [`ServiceSummary`] of them for a live view.
//!
//! The I/O threads count and time their answers each on its own
//! ([`Tally`]): no cache line or lock that another I/O thread writes. A
//! request's latency costs one `Instant::now()` when it is parsed (a
//! write's is the one admission takes anyway; the answer's already reads
//! the clock), one record into the thread's `hdrhistogram` (an uncontended
//! lock: only the reader of [`Metrics::summary`] takes it besides) and one
//! into the thread's Prometheus histogram (another lock no other I/O thread
//! takes): tens of nanoseconds against the microseconds of a request's
//! system calls.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

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

/// The ring's stages, in the order of their event counters (the `stage`
/// label of `statepipe_serve_stage_events_total`).
pub const STAGES: [&str; 4] = ["journal", "decode", "apply", "reply"];

/// A (route, status) pair's count on one I/O thread.
type Count = (&'static str, u16, Arc<AtomicU64>);

/// Request latencies, in nanoseconds.
type Latencies = hdrhistogram::Histogram<u64>;

/// The longest latency told apart (longer ones count as this): an hour.
const MAX_LATENCY_NS: u64 = 3_600 * 1_000_000_000;

/// Latencies with two significant digits (a 1% error), from 1 ns to
/// [`MAX_LATENCY_NS`]: about 37 KiB.
fn latencies() -> Latencies {
    Latencies::new_with_bounds(1, MAX_LATENCY_NS, 2).expect("valid histogram bounds")
}

/// The buckets of `statepipe_serve_request_seconds`: 1 µs to about 8 s.
fn request_seconds() -> Histogram {
    Histogram::new(exponential_buckets(1e-6, 2.0, 24))
}

/// One I/O thread's answered requests, by route and status: counted on that
/// thread alone, with no lock and on no cache line another thread writes
/// (a [`Family`] lookup takes a read lock and bumps a counter every I/O
/// thread shares), and summed into `requests_total` when `/metrics` is
/// read. Their latencies go into this thread's histograms.
pub(crate) struct Tally {
    /// This thread's counts, for the hot path (the thread's own handles).
    local: RefCell<Vec<Count>>,
    /// The same counts, for the scrape; the owning thread adds one the
    /// first time it sees its pair.
    shared: Arc<Mutex<Vec<Count>>>,
    /// Latencies since the last [`Metrics::summary`], which swaps them out.
    latency: Arc<Mutex<Latencies>>,
    /// This thread's `statepipe_serve_request_seconds{io}`.
    seconds: Histogram,
}

/// What the reader keeps of one I/O thread's [`Tally`].
struct TallyShared {
    counts: Arc<Mutex<Vec<Count>>>,
    latency: Arc<Mutex<Latencies>>,
    /// An empty histogram, swapped with `latency` by the summary: the
    /// thread's lock is held for the swap alone, not for reading it.
    spare: Latencies,
}

// By hand: a histogram's `Debug` prints every one of its counts.
impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tally")
            .field("local", &self.local)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TallyShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TallyShared")
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Interval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interval")
            .field("since", &self.since)
            .field("requests", &self.sum.len())
            .finish_non_exhaustive()
    }
}

impl Tally {
    /// Records how long an answered request took, from its parse to its
    /// answer being queued.
    pub(crate) fn took(&self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .saturating_record(ns.max(1));
        self.seconds.observe(latency.as_secs_f64());
    }

    /// Counts one answered request.
    pub(crate) fn answered(&self, route: &'static str, status: u16) {
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

/// Answers by route and status, counted since the service started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCount {
    /// `POST /item`, `GET /item/{id}`, …, or `other` (see [`RequestLabels`]).
    pub route: &'static str,
    /// The status code.
    pub status: u16,
    /// Requests answered so.
    pub count: u64,
}

/// The latency of the requests answered in an interval: from each
/// request's parse to its answer being queued on its connection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    /// The interval: since the previous [`Metrics::summary`] (or since the
    /// metrics were made).
    pub window: Duration,
    /// Requests answered in it (those parsed; not the connections refused
    /// 503 before any request was read).
    pub count: u64,
    /// The median latency (zero when `count` is 0).
    pub p50: Duration,
    /// The 99th percentile (zero when `count` is 0).
    pub p99: Duration,
}

/// What the service did: the counters for a live view, read by
/// [`Metrics::summary`]. Counts are totals since the start, except
/// `latency`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceSummary {
    /// Requests answered, by route and status, ordered by both.
    pub requests: Vec<RequestCount>,
    /// Requests refused at once, by cause: `queue_delay` and `ring_full`
    /// (429), `connections` (503), in that order.
    pub refusals: Vec<(&'static str, u64)>,
    /// The latency of the requests answered since the previous summary.
    pub latency: LatencySummary,
    /// Journal commits (write + fsync) that reached the disk.
    pub journal_fsyncs: u64,
    /// Writes (creates and deletes) those commits made durable: writes per
    /// fsync is `journal_events / journal_fsyncs`.
    pub journal_events: u64,
    /// Connections open now, over every I/O thread.
    pub connections: i64,
    /// Requests on the ring now: published, not yet replied to.
    pub ring_depth: i64,
    /// Requests published on the ring.
    pub published: u64,
}

/// What [`Metrics::summary`] keeps between two calls.
struct Interval {
    since: Instant,
    /// The I/O threads' latencies, added up.
    sum: Latencies,
}

/// Every metric `/metrics` shows, and what [`Metrics::summary`] reads.
///
/// A [`Server`](crate::Server) makes its own; [`Server::metrics`](crate::Server::metrics)
/// hands it out, to read while it serves.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests answered, by route and status: the sums of the I/O
    /// threads' [`Tally`]s, brought up to date by [`Metrics::encode`].
    requests: Family<RequestLabels, Counter>,
    /// Every I/O thread's counts and latencies (and the lock that keeps
    /// two scrapes from adding the same counts twice).
    tallies: Mutex<Vec<TallyShared>>,
    /// Latency per I/O thread, for `/metrics`.
    request_seconds: Family<IoLabels, Histogram, fn() -> Histogram>,
    /// The summary's interval.
    interval: Mutex<Interval>,
    /// Requests refused, by cause, in [`Refusal::ALL`] order.
    pub(crate) refusals: [Counter; 3],
    /// Requests on the ring: published, not yet replied to.
    pub(crate) ring_depth: Gauge,
    /// Seconds per journal write + fsync.
    pub(crate) fsync_seconds: Histogram,
    /// Events per journal batch (group commit).
    pub(crate) batch_size: Histogram,
    /// Journal commits that reached the disk.
    pub(crate) journal_fsyncs: Counter,
    /// Writes those commits made durable.
    pub(crate) journal_events: Counter,
    /// 1 while the journal's last commit went over a zero-filled segment
    /// (its fsync flushed data alone), 0 while it appends.
    pub(crate) zero_filled: Gauge,
    /// Seconds per snapshot written (encode, write, fsync, rename); its
    /// count is the number of snapshots written.
    pub(crate) snapshot_seconds: Histogram,
    /// Requests published on the ring.
    pub(crate) published: Counter,
    /// Events each stage has handled, in [`STAGES`] order (added once per
    /// batch).
    pub(crate) stage_events: [Counter; 4],
    /// Events published that a stage has not handled yet (set when
    /// `/metrics` is read).
    stage_depth: Family<StageLabels, Gauge>,
    /// Open connections, per I/O thread.
    connections: Family<IoLabels, Gauge>,
    /// The same gauges, to sum.
    connection_gauges: Mutex<Vec<(u16, Gauge)>>,
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
        let journal_fsyncs = Counter::default();
        registry.register(
            "journal_fsyncs",
            "Journal commits (write + fsync) that reached the disk",
            journal_fsyncs.clone(),
        );
        let journal_events = Counter::default();
        registry.register(
            "journal_events",
            "Writes made durable by the journal's commits",
            journal_events.clone(),
        );
        let request_seconds =
            Family::<IoLabels, Histogram, fn() -> Histogram>::new_with_constructor(request_seconds);
        registry.register(
            "request_seconds",
            "From a request's parse to its answer being queued, per I/O thread",
            request_seconds.clone(),
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
            request_seconds,
            interval: Mutex::new(Interval {
                since: Instant::now(),
                sum: latencies(),
            }),
            journal_fsyncs,
            journal_events,
            connection_gauges: Mutex::default(),
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
    pub(crate) fn connections(&self, io: usize) -> Gauge {
        let io = u16::try_from(io).unwrap_or(u16::MAX);
        let gauge = self.connections.get_or_create(&IoLabels { io }).clone();
        let mut all = self
            .connection_gauges
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !all.iter().any(|(i, _)| *i == io) {
            all.push((io, gauge.clone()));
        }
        gauge
    }

    /// Counts one refusal.
    pub(crate) fn refused(&self, cause: Refusal) {
        let i = Refusal::ALL
            .iter()
            .position(|&c| c == cause)
            .expect("every cause is listed");
        self.refusals[i].inc();
    }

    /// I/O thread `io`'s counts and latencies of answered requests.
    pub(crate) fn tally(&self, io: usize) -> Tally {
        let io = u16::try_from(io).unwrap_or(u16::MAX);
        let tally = Tally {
            local: RefCell::default(),
            shared: Arc::default(),
            latency: Arc::new(Mutex::new(latencies())),
            seconds: self.request_seconds.get_or_create(&IoLabels { io }).clone(),
        };
        let mut tallies = self.tallies.lock().unwrap_or_else(PoisonError::into_inner);
        tallies.push(TallyShared {
            counts: Arc::clone(&tally.shared),
            latency: Arc::clone(&tally.latency),
            spare: latencies(),
        });
        tally
    }

    /// Counts a journal commit that made `events` writes durable.
    pub(crate) fn committed(&self, events: u64) {
        self.journal_fsyncs.inc();
        self.journal_events.inc_by(events);
    }

    /// Adds to `requests` what the I/O threads counted since the last call
    /// (`requests` is incremented here alone, so it holds what was added
    /// before).
    fn sum_tallies(&self) {
        let tallies = self.tallies.lock().unwrap_or_else(PoisonError::into_inner);
        let mut sums: HashMap<(&'static str, u16), u64> = HashMap::new();
        for tally in tallies.iter() {
            let counts = tally.counts.lock().unwrap_or_else(PoisonError::into_inner);
            for (route, status, n) in counts.iter() {
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

    /// What the service did, for a live view: requests by route and
    /// status, refusals by cause, journal commits and the writes they
    /// made durable, open connections, the ring's depth, and the latency
    /// of the requests answered **since the previous call**.
    ///
    /// The latency histograms are interval histograms, emptied by each
    /// call: let one reader (a dashboard's publisher) call it, or each
    /// reader sees only part of the requests. `/metrics`
    /// ([`encode`](Self::encode)) is unaffected: its
    /// `statepipe_serve_request_seconds` counts from the start.
    ///
    /// # Examples
    ///
    /// ```
    /// let metrics = statepipe_serve::Metrics::new();
    /// let s = metrics.summary();
    /// assert_eq!(s.latency.count, 0);
    /// assert!(s.requests.is_empty());
    /// assert_eq!(s.refusals[0], ("queue_delay", 0));
    /// ```
    pub fn summary(&self) -> ServiceSummary {
        let mut interval = self.interval.lock().unwrap_or_else(PoisonError::into_inner);
        let mut counts: HashMap<(&'static str, u16), u64> = HashMap::new();
        {
            let mut tallies = self.tallies.lock().unwrap_or_else(PoisonError::into_inner);
            for tally in tallies.iter_mut() {
                for (route, status, n) in tally
                    .counts
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                {
                    // Relaxed: counts only grow; one read late shows next time.
                    *counts.entry((route, *status)).or_default() += n.load(Ordering::Relaxed);
                }
                // The I/O thread waits, if at all, for the swap alone.
                std::mem::swap(
                    &mut *tally.latency.lock().unwrap_or_else(PoisonError::into_inner),
                    &mut tally.spare,
                );
                // Same bounds: adding cannot fail.
                let _ = interval.sum.add(&tally.spare);
                tally.spare.reset();
            }
        }
        let now = Instant::now();
        let h = &interval.sum;
        let quantile = |q: f64| match h.len() {
            0 => Duration::ZERO,
            _ => Duration::from_nanos(h.value_at_quantile(q)),
        };
        let latency = LatencySummary {
            window: now.saturating_duration_since(interval.since),
            count: h.len(),
            p50: quantile(0.5),
            p99: quantile(0.99),
        };
        interval.sum.reset();
        interval.since = now;
        drop(interval);
        let mut requests: Vec<RequestCount> = counts
            .into_iter()
            .map(|((route, status), count)| RequestCount {
                route,
                status,
                count,
            })
            .collect();
        requests.sort_by(|a, b| (a.route, a.status).cmp(&(b.route, b.status)));
        let connections = self
            .connection_gauges
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(_, g)| g.get())
            .sum();
        ServiceSummary {
            requests,
            refusals: Refusal::ALL
                .iter()
                .zip(&self.refusals)
                .map(|(cause, n)| (cause.label(), n.get()))
                .collect(),
            latency,
            journal_fsyncs: self.journal_fsyncs.get(),
            journal_events: self.journal_events.get(),
            connections,
            ring_depth: self.ring_depth.get(),
            published: self.published.get(),
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
