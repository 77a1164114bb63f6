//! Peer: the `disruptor` crate (4.x), with its `BusySpin` wait strategy (the one its
//! documentation and benchmarks use). Every topology.
//!
//! Its processor threads are owned by the crate; dropping the last producer joins
//! them, so a sample's clock stops after the drain. Consumers hand their sums over when
//! the crate drops their closures, at the end of the processor thread.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use disruptor::{BusySpin, ProcessorSettings, Producer};

use super::workload::{self, Publisher, Spec, SumCells, Topology, BATCH, CAPACITY};
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "disruptor";
/// The `config` of its rows.
pub const CONFIG: &str = "wait=BusySpin";

/// One throughput sample on `spec`; Mev/s.
///
/// # Errors
///
/// A wrong sum (the crate itself reports no errors).
pub(crate) fn throughput(spec: &Spec) -> Result<f64, BenchError> {
    let who = format!("{NAME} {}", spec.topology.name());
    let cells = SumCells::new(spec.topology);
    let tally = |j: usize| summer(cells.cell(j));
    // `pin_at_core` is a builder setting for the next handler; the same type either way.
    let pin = |j: usize| spec.pins.consumer(spec.topology, j).map(|c| c.id);
    macro_rules! pinned {
        ($builder:expr, $j:expr) => {
            match pin($j) {
                Some(core) => $builder.pin_at_core(core),
                None => $builder,
            }
        };
    }
    let finish = || Ok(cells.tallies());
    match spec.topology {
        Topology::OneToOne => {
            let b = disruptor::build_single_producer(CAPACITY, || 0u64, BusySpin);
            let producer = pinned!(b, 0).handle_events_with(tally(0)).build();
            workload::throughput(&who, spec, vec![Disruptor(producer)], finish)
        }
        Topology::ManyToOne(n) => {
            let b = disruptor::build_multi_producer(CAPACITY, || 0u64, BusySpin);
            let producer = pinned!(b, 0).handle_events_with(tally(0)).build();
            let producers: Vec<_> = (0..n).map(|_| Disruptor(producer.clone())).collect();
            drop(producer);
            workload::throughput(&who, spec, producers, finish)
        }
        Topology::OneToThree => {
            let b = disruptor::build_single_producer(CAPACITY, || 0u64, BusySpin);
            let b = pinned!(b, 0).handle_events_with(tally(0));
            let b = pinned!(b, 1).handle_events_with(tally(1));
            let producer = pinned!(b, 2).handle_events_with(tally(2)).build();
            workload::throughput(&who, spec, vec![Disruptor(producer)], finish)
        }
        Topology::Pipeline3 => {
            let b = disruptor::build_single_producer(CAPACITY, || 0u64, BusySpin);
            let b = pinned!(b, 0).handle_events_with(tally(0)).and_then();
            let b = pinned!(b, 1).handle_events_with(tally(1)).and_then();
            let producer = pinned!(b, 2).handle_events_with(tally(2)).build();
            workload::throughput(&who, spec, vec![Disruptor(producer)], finish)
        }
        Topology::Diamond => {
            let b = disruptor::build_single_producer(CAPACITY, || 0u64, BusySpin);
            let b = pinned!(b, 0).handle_events_with(tally(0));
            let b = pinned!(b, 1).handle_events_with(tally(1)).and_then();
            let producer = pinned!(b, 2).handle_events_with(tally(2)).build();
            workload::throughput(&who, spec, vec![Disruptor(producer)], finish)
        }
    }
}

/// A handler closure that sums the counter; the sum reaches `out` when the crate drops
/// the closure at the end of its processor thread.
fn summer(out: Arc<AtomicU64>) -> impl FnMut(&u64, i64, bool) + Send + 'static {
    let mut sum = SumOnDrop { sum: 0, out };
    move |event: &u64, _sequence, _end_of_batch| sum.add(*event)
}

struct SumOnDrop {
    sum: u64,
    out: Arc<AtomicU64>,
}

impl SumOnDrop {
    #[inline]
    fn add(&mut self, value: u64) {
        self.sum = self.sum.wrapping_add(value);
    }
}

impl Drop for SumOnDrop {
    fn drop(&mut self) {
        // Release: pairs with the Acquire load in `SumCells::tallies`.
        self.out.store(self.sum, Ordering::Release);
    }
}

/// Any producer of the crate (single or multi, any consumer barrier).
pub(crate) struct Disruptor<P>(pub P);

impl<P: Producer<u64> + Send> Publisher for Disruptor<P> {
    #[inline]
    fn publish_one(&mut self, value: u64) -> Result<(), &'static str> {
        self.0.publish(|slot| *slot = value);
        Ok(())
    }

    #[inline]
    fn publish_batch(&mut self, first: u64) -> Result<(), &'static str> {
        self.0.batch_publish(BATCH, |slots| {
            for (i, slot) in slots.enumerate() {
                *slot = first + i as u64;
            }
        });
        Ok(())
    }
}
