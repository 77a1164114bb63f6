//! One-hop latency, 1p1c: the producer stamps each event with the time it publishes it,
//! the consumer records `now - stamp` in an HDR histogram.
//!
//! One event is in flight at a time: after publishing, the producer waits until the
//! consumer has acknowledged the event *and* [`PACE`] has passed since the stamp. The
//! ring is therefore empty at every publish and each figure is a hand-over, never time
//! spent queued behind earlier events (on a busy host a descheduled consumer delays one
//! event, not the thousands published meanwhile). The acknowledgement is written after
//! the latency is taken, so it is not part of it. Both stamps read the same monotonic
//! clock (`Instant`, no TSC tricks); each figure includes one clock read. The first
//! [`WARMUP`] events of a sample (page faults, first wake-ups) are recorded apart and
//! only used when a sample has no others.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use core_affinity::CoreId;
use crossbeam_channel::{bounded, Sender};
use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use statepipe_ring::wait::WaitStrategy;
use statepipe_ring::{EventHandler, Producer, ProducerKind, Ring, RingBuilder};

use super::disruptor::Disruptor;
use super::statepipe::{with_wait, Kind, Wait};
use super::workload::{self, Pins, Publisher, Topology, CAPACITY};
use crate::host::pin_current;
use crate::BenchError;

/// Least time between the stamps of two consecutive events.
pub const PACE: Duration = Duration::from_micros(4);
/// Events per sample recorded apart, as warm-up.
pub const WARMUP: u64 = 100;
/// The quantiles reported, with their case names.
pub const QUANTILES: [(f64, &str); 3] = [
    (0.5, "latency/p50"),
    (0.99, "latency/p99"),
    (0.999, "latency/p99.9"),
];
/// The largest latency a histogram holds (60 s); larger ones saturate.
const MAX_NS: u64 = 60_000_000_000;
/// Per sample, far beyond what a paced sample publishes.
const MAX_EVENTS: u64 = 1 << 32;

/// What a latency sample needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// How long the producer publishes.
    pub duration: Duration,
    /// Producer and consumer placement (topology 1p1c).
    pub pins: Pins,
}

/// What both sides of a sample share: the clock's epoch and the acknowledgements.
#[derive(Debug)]
struct Probe {
    epoch: Instant,
    /// Events the consumer has recorded. Relaxed on both sides: it carries no data,
    /// it only lets the producer go on.
    acked: CachePadded<AtomicU64>,
}

impl Probe {
    fn new() -> Arc<Probe> {
        Arc::new(Probe {
            epoch: Instant::now(),
            acked: CachePadded::new(AtomicU64::new(0)),
        })
    }

    #[inline]
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
}

/// What a consumer hands back: its histograms and how many events it saw.
struct Recorded {
    histogram: Histogram<u64>,
    warmup: Histogram<u64>,
    seen: u64,
}

type Slot = Arc<Mutex<Option<Recorded>>>;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_NS, 3).expect("valid histogram bounds")
}

/// The consumer side: records latencies, acknowledges, hands the histograms over once
/// (at shutdown or drop).
struct Recorder {
    probe: Arc<Probe>,
    recorded: Option<Recorded>,
    out: Slot,
    pin: Option<CoreId>,
}

impl Recorder {
    fn new(probe: &Arc<Probe>, out: &Slot, pin: Option<CoreId>) -> Recorder {
        let recorded = Recorded {
            histogram: histogram(),
            warmup: histogram(),
            seen: 0,
        };
        Recorder {
            probe: Arc::clone(probe),
            recorded: Some(recorded),
            out: Arc::clone(out),
            pin,
        }
    }

    #[inline]
    fn record(&mut self, stamp: u64) {
        let latency = self.probe.now_ns().saturating_sub(stamp).max(1);
        if let Some(r) = &mut self.recorded {
            r.seen += 1;
            let into = if r.seen > WARMUP {
                &mut r.histogram
            } else {
                &mut r.warmup
            };
            into.saturating_record(latency);
            self.probe.acked.store(r.seen, Ordering::Relaxed);
        }
    }

    fn hand_over(&mut self) {
        if let Some(recorded) = self.recorded.take() {
            *self.out.lock().unwrap_or_else(|p| p.into_inner()) = Some(recorded);
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.hand_over();
    }
}

impl EventHandler<u64> for Recorder {
    fn on_start(&mut self) {
        pin_current(self.pin);
    }

    #[inline]
    fn on_event(&mut self, event: &u64, _sequence: u64, _end_of_batch: bool) {
        self.record(*event);
    }

    fn on_shutdown(&mut self) {
        self.hand_over();
    }
}

/// Publishes stamps, one in flight at a time and one per [`PACE`] at most, until
/// `stop`. A wait for an acknowledgement also ends at `stop`, so a lost event shows
/// as a wrong count, not a hang.
fn paced<P: Publisher>(
    producer: &mut P,
    probe: &Probe,
    stop: &AtomicBool,
) -> Result<u64, &'static str> {
    let pace = PACE.as_nanos() as u64;
    let mut count = 0;
    while count < MAX_EVENTS && !stop.load(Ordering::Relaxed) {
        let stamp = probe.now_ns();
        producer.publish_one(stamp)?;
        count += 1;
        while probe.acked.load(Ordering::Relaxed) < count || probe.now_ns() < stamp + pace {
            if stop.load(Ordering::Relaxed) {
                return Ok(count);
            }
            std::hint::spin_loop();
        }
    }
    Ok(count)
}

/// Drives `producer`, waits with `finish`, checks the count, returns the quantiles.
fn measure<P: Publisher>(
    who: &str,
    spec: &Spec,
    probe: &Probe,
    producer: P,
    slot: &Slot,
    finish: impl FnOnce() -> Result<(), BenchError>,
) -> Result<Vec<f64>, BenchError> {
    let driven = workload::drive(
        who,
        spec.duration,
        &spec.pins,
        vec![producer],
        |p, stop| paced(p, probe, stop),
        finish,
    )?;
    let recorded = slot
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or_else(|| BenchError::failed(who, "the consumer handed no histogram over"))?;
    let published = driven.published[0];
    if recorded.seen != published {
        return Err(BenchError::WrongCount {
            who: who.to_string(),
            expected: published,
            got: recorded.seen,
        });
    }
    let histogram = if recorded.histogram.is_empty() {
        &recorded.warmup
    } else {
        &recorded.histogram
    };
    if histogram.is_empty() {
        return Err(BenchError::failed(who, "no event was published"));
    }
    Ok(QUANTILES
        .iter()
        .map(|(q, _)| histogram.value_at_quantile(*q) as f64)
        .collect())
}

/// One latency sample of the statepipe ring of `kind` with `wait`: `[p50, p99, p99.9]`
/// in ns.
///
/// # Errors
///
/// A halted ring, a failed join, or a lost event.
pub(crate) fn statepipe(kind: Kind, wait: Wait, spec: &Spec) -> Result<Vec<f64>, BenchError> {
    with_wait!(wait, |w| statepipe_with(kind, w, spec))
}

fn statepipe_with<W: WaitStrategy>(
    kind: Kind,
    wait: W,
    spec: &Spec,
) -> Result<Vec<f64>, BenchError> {
    let who = "statepipe latency";
    let (probe, slot) = (Probe::new(), Slot::default());
    let recorder = Recorder::new(&probe, &slot, spec.pins.consumer(Topology::OneToOne, 0));
    let builder = RingBuilder::new(CAPACITY, || 0u64)
        .wait_strategy(wait)
        .handler("c", recorder);
    match kind {
        Kind::Single => {
            let (producer, ring) = builder.build_single();
            measure_ring(who, spec, &probe, producer, ring, &slot)
        }
        Kind::Stamped => {
            let (producer, ring) = builder.build_stamped();
            measure_ring(who, spec, &probe, producer, ring, &slot)
        }
    }
}

/// [`measure`] for one of our rings: joining it is the finish.
fn measure_ring<W: WaitStrategy, K: ProducerKind>(
    who: &str,
    spec: &Spec,
    probe: &Probe,
    producer: Producer<u64, W, K>,
    ring: Ring<u64, W, K>,
    slot: &Slot,
) -> Result<Vec<f64>, BenchError> {
    measure(who, spec, probe, producer, slot, || {
        ring.join()
            .map(drop)
            .map_err(|e| BenchError::failed(who, format!("join: {e:?}")))
    })
}

/// One latency sample of the `disruptor` crate (BusySpin): `[p50, p99, p99.9]` in ns.
///
/// # Errors
///
/// A lost event.
pub(crate) fn disruptor(spec: &Spec) -> Result<Vec<f64>, BenchError> {
    use disruptor::{BusySpin, ProcessorSettings};
    let (probe, slot) = (Probe::new(), Slot::default());
    let mut recorder = Recorder::new(&probe, &slot, None);
    let handler = move |event: &u64, _sequence: i64, _end_of_batch: bool| recorder.record(*event);
    let builder = disruptor::build_single_producer(CAPACITY, || 0u64, BusySpin);
    let builder = match spec.pins.consumer(Topology::OneToOne, 0) {
        Some(cpu) => builder.pin_at_core(cpu.id),
        None => builder,
    };
    let producer = builder.handle_events_with(handler).build();
    // Dropping the producer joins the processor thread, which drops the recorder.
    measure(
        "disruptor latency",
        spec,
        &probe,
        Disruptor(producer),
        &slot,
        || Ok(()),
    )
}

/// One latency sample of a crossbeam bounded channel (blocking `recv`):
/// `[p50, p99, p99.9]` in ns.
///
/// # Errors
///
/// A panicked consumer or a lost event.
pub(crate) fn crossbeam(spec: &Spec) -> Result<Vec<f64>, BenchError> {
    let who = "crossbeam latency";
    let (probe, slot) = (Probe::new(), Slot::default());
    let mut recorder = Recorder::new(&probe, &slot, spec.pins.consumer(Topology::OneToOne, 0));
    let (tx, rx) = bounded::<u64>(CAPACITY);
    let handle = std::thread::spawn(move || {
        pin_current(recorder.pin);
        for stamp in rx.iter() {
            recorder.record(stamp);
        }
        recorder.hand_over();
    });
    let producer: Sender<u64> = tx;
    measure(who, spec, &probe, producer, &slot, || {
        handle
            .join()
            .map_err(|_| BenchError::failed(who, "consumer panicked"))
    })
}
