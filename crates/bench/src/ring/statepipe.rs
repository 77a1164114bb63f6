//! Ours: the statepipe ring, under each of its wait strategies, with the single
//! producer (`build_single`, the default) or the stamped one (`build_stamped`,
//! made for latency).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use core_affinity::CoreId;
use statepipe_ring::wait::WaitStrategy;
use statepipe_ring::{EventHandler, Producer, ProducerKind, Ring, RingBuilder};

use super::workload::{self, Publisher, Spec, SumCells, Topology, BATCH, CAPACITY};
use crate::host::pin_current;
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "statepipe";

/// The ring's wait strategies, for consumers waiting on events and producers on space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Spin briefly, then yield, then park: the default.
    Adaptive,
    /// Spin forever.
    BusySpin,
    /// Spin, then yield the CPU.
    SpinYield,
    /// Park until woken.
    Blocking,
}

impl Wait {
    /// Every strategy, the default first.
    pub const ALL: [Wait; 4] = [
        Wait::Adaptive,
        Wait::BusySpin,
        Wait::SpinYield,
        Wait::Blocking,
    ];

    /// `adaptive`, `busy-spin`, `spin-yield` or `blocking`.
    pub fn name(self) -> &'static str {
        match self {
            Wait::Adaptive => "adaptive",
            Wait::BusySpin => "busy-spin",
            Wait::SpinYield => "spin-yield",
            Wait::Blocking => "blocking",
        }
    }

    /// The `config` of a report row: `wait=adaptive`.
    pub fn config(self) -> String {
        format!("wait={}", self.name())
    }
}

/// Which single-producer ring: both have one producer handle and no atomic
/// read-modify-write; they differ in how consumers see what is published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `build_single`: consumers poll range ends or the cursor (the default).
    Single,
    /// `build_stamped`: slots carry their sequence; consumers poll the slot.
    Stamped,
}

impl Kind {
    /// The `config` of a report row: `wait=adaptive` for the default kind (as in
    /// every earlier run), `stamped; wait=adaptive` for the stamped one.
    pub fn config(self, wait: Wait) -> String {
        match self {
            Kind::Single => wait.config(),
            Kind::Stamped => format!("stamped; {}", wait.config()),
        }
    }
}

/// Calls `$body` with `$w` bound to a fresh value of the strategy `$wait` names
/// (each strategy is its own type, the ring is generic over it).
macro_rules! with_wait {
    ($wait:expr, |$w:ident| $body:expr) => {
        match $wait {
            $crate::ring::statepipe::Wait::Adaptive => {
                let $w = ::statepipe_ring::wait::Adaptive::default();
                $body
            }
            $crate::ring::statepipe::Wait::BusySpin => {
                let $w = ::statepipe_ring::wait::BusySpin::default();
                $body
            }
            $crate::ring::statepipe::Wait::SpinYield => {
                let $w = ::statepipe_ring::wait::SpinYield::default();
                $body
            }
            $crate::ring::statepipe::Wait::Blocking => {
                let $w = ::statepipe_ring::wait::Blocking::default();
                $body
            }
        }
    };
}
pub(crate) use with_wait;

/// One throughput sample of the ring with `wait` on `spec`; Mev/s. `kind` matters
/// only with one producer (many producers always use `build_multi`).
///
/// # Errors
///
/// A halted ring, a failed join, or a wrong sum.
pub(crate) fn throughput(kind: Kind, wait: Wait, spec: &Spec) -> Result<f64, BenchError> {
    with_wait!(wait, |w| throughput_with(kind, w, spec))
}

fn throughput_with<W>(kind: Kind, wait: W, spec: &Spec) -> Result<f64, BenchError>
where
    W: WaitStrategy,
{
    let who = format!("{NAME} {}", spec.topology.name());
    let cells = SumCells::new(spec.topology);
    let summer = |j: usize| Summer {
        sum: 0,
        out: cells.cell(j),
        pin: spec.pins.consumer(spec.topology, j),
    };
    let builder = RingBuilder::new(CAPACITY, || 0u64).wait_strategy(wait);
    let builder = match spec.topology {
        Topology::OneToOne | Topology::ManyToOne(_) => builder.handler("c", summer(0)),
        Topology::OneToThree => builder
            .handler("a", summer(0))
            .handler("b", summer(1))
            .handler("c", summer(2)),
        Topology::Pipeline3 => builder
            .handler("a", summer(0))
            .then()
            .handler("b", summer(1))
            .then()
            .handler("c", summer(2)),
        Topology::Diamond => builder
            .handler("a", summer(0))
            .handler("b", summer(1))
            .then()
            .handler("c", summer(2)),
    };
    let producers = spec.topology.producers();
    match (producers, kind) {
        (1, Kind::Stamped) => {
            let (producer, ring) = builder.build_stamped();
            run(&who, spec, vec![producer], ring, &cells)
        }
        (1, Kind::Single) => {
            let (producer, ring) = builder.build_single();
            run(&who, spec, vec![producer], ring, &cells)
        }
        _ => {
            let (producer, ring) = builder.build_multi();
            let clones: Vec<_> = (0..producers).map(|_| producer.clone()).collect();
            drop(producer);
            run(&who, spec, clones, ring, &cells)
        }
    }
}

/// Drives `producers` through `spec`, then joins `ring` and reads the sums.
fn run<W: WaitStrategy, K: ProducerKind>(
    who: &str,
    spec: &Spec,
    producers: Vec<Producer<u64, W, K>>,
    ring: Ring<u64, W, K>,
    cells: &SumCells,
) -> Result<f64, BenchError> {
    workload::throughput(who, spec, producers, || {
        ring.join()
            .map_err(|e| BenchError::failed(who, format!("join: {e:?}")))?;
        Ok(cells.tallies())
    })
}

/// A consumer that sums the counter and hands the sum over at shutdown.
struct Summer {
    sum: u64,
    out: Arc<AtomicU64>,
    pin: Option<CoreId>,
}

impl EventHandler<u64> for Summer {
    fn on_start(&mut self) {
        pin_current(self.pin);
    }

    #[inline]
    fn on_event(&mut self, event: &u64, _sequence: u64, _end_of_batch: bool) {
        self.sum = self.sum.wrapping_add(*event);
    }

    fn on_shutdown(&mut self) {
        // Release: pairs with the Acquire load in `SumCells::tallies`.
        self.out.store(self.sum, Ordering::Release);
    }
}

/// Every kind: each producer handle is a `Producer<_, _, Single|Stamped|Multi>`.
impl<W: WaitStrategy, K: ProducerKind> Publisher for Producer<u64, W, K> {
    #[inline]
    fn publish_one(&mut self, value: u64) -> Result<(), &'static str> {
        self.publish(value)
            .map(drop)
            .map_err(|_| "publish: ring halted")
    }

    #[inline]
    fn publish_batch(&mut self, first: u64) -> Result<(), &'static str> {
        Producer::publish_batch(self, BATCH, |i, slot| *slot = first + i as u64)
            .map(drop)
            .map_err(|_| "publish_batch: ring halted")
    }
}
