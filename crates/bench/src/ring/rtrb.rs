//! Peer: rtrb, a wait-free single-producer single-consumer ring (1p1c only).
//!
//! rtrb never blocks, so both sides poll with crossbeam's `Backoff` (spin, then yield)
//! when the ring is full or empty. Single mode pushes one value per call; batch mode
//! writes a chunk of [`BATCH`] slots and commits it at once. The consumer always reads
//! every available slot as one chunk, rtrb's fastest read.

use std::thread;

use crossbeam_utils::Backoff;
use rtrb::{PushError, RingBuffer};

use super::workload::{self, Publisher, Spec, Topology, BATCH, CAPACITY};
use crate::host::pin_current;
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "rtrb";

/// Whether rtrb can run `topology`.
pub fn supports(topology: Topology) -> bool {
    topology == Topology::OneToOne
}

/// The `config` of its rows.
pub fn config(mode: workload::Mode) -> &'static str {
    match mode {
        workload::Mode::Single => "push; read_chunk consumer",
        workload::Mode::Batch => "write_chunk_uninit(64); read_chunk consumer",
    }
}

/// One throughput sample on `spec` (1p1c); Mev/s.
///
/// # Errors
///
/// A panicked consumer or a wrong sum.
pub(crate) fn throughput(spec: &Spec) -> Result<f64, BenchError> {
    assert!(supports(spec.topology), "rtrb runs 1p1c only");
    let who = format!("{NAME} {}", spec.topology.name());
    let (producer, mut consumer) = RingBuffer::<u64>::new(CAPACITY);
    let cpu = spec.pins.consumer(spec.topology, 0);
    let handle = thread::spawn(move || {
        pin_current(cpu);
        let backoff = Backoff::new();
        let mut sum = 0u64;
        loop {
            let available = consumer.slots();
            if available > 0 {
                let chunk = consumer
                    .read_chunk(available)
                    .expect("slots() were available");
                let (first, second) = chunk.as_slices();
                for value in first.iter().chain(second) {
                    sum = sum.wrapping_add(*value);
                }
                chunk.commit_all();
                backoff.reset();
            } else if consumer.is_abandoned() {
                // The producer is gone; whatever it pushed before is visible now.
                if consumer.slots() == 0 {
                    return sum;
                }
            } else {
                backoff.snooze();
            }
        }
    });
    workload::throughput(&who, spec, vec![Rtrb(producer)], || {
        Ok(vec![workload::join_consumer(&who, "c", handle)?])
    })
}

struct Rtrb(rtrb::Producer<u64>);

impl Publisher for Rtrb {
    #[inline]
    fn publish_one(&mut self, value: u64) -> Result<(), &'static str> {
        let mut value = value;
        let backoff = Backoff::new();
        loop {
            match self.0.push(value) {
                Ok(()) => return Ok(()),
                Err(PushError::Full(back)) => {
                    value = back;
                    backoff.snooze();
                }
            }
        }
    }

    #[inline]
    fn publish_batch(&mut self, first: u64) -> Result<(), &'static str> {
        let backoff = Backoff::new();
        loop {
            if let Ok(chunk) = self.0.write_chunk_uninit(BATCH) {
                chunk.fill_from_iter(first..first + BATCH as u64);
                return Ok(());
            }
            backoff.snooze();
        }
    }
}
