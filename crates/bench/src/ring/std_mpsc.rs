//! Peer: `std::sync::mpsc::sync_channel` (1p1c and Np1c).
//!
//! No batch API: batch mode sends the 64 values one by one (labelled in `config`).

use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread;

use super::workload::{self, Mode, Publisher, Spec, Topology, BATCH, CAPACITY};
use crate::host::pin_current;
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "std-mpsc";

/// Whether we run `sync_channel` on `topology`.
pub fn supports(topology: Topology) -> bool {
    matches!(topology, Topology::OneToOne | Topology::ManyToOne(_))
}

/// The `config` of its rows.
pub fn config(mode: Mode) -> &'static str {
    match mode {
        Mode::Single => "sync_channel(65536); send/recv",
        Mode::Batch => "sync_channel(65536); 64 x send (no batch API)",
    }
}

/// One throughput sample on `spec`; Mev/s.
///
/// # Errors
///
/// A panicked consumer, a disconnected channel or a wrong sum.
pub(crate) fn throughput(spec: &Spec) -> Result<f64, BenchError> {
    assert!(
        supports(spec.topology),
        "std-mpsc does not run {}",
        spec.topology.name()
    );
    let who = format!("{NAME} {}", spec.topology.name());
    let (tx, rx) = sync_channel::<u64>(CAPACITY);
    let cpu = spec.pins.consumer(spec.topology, 0);
    let handle = thread::spawn(move || {
        pin_current(cpu);
        rx.iter().fold(0u64, u64::wrapping_add)
    });
    let producers: Vec<Std> = (0..spec.topology.producers())
        .map(|_| Std(tx.clone()))
        .collect();
    drop(tx);
    workload::throughput(&who, spec, producers, || {
        Ok(vec![workload::join_consumer(&who, "c", handle)?])
    })
}

struct Std(SyncSender<u64>);

impl Publisher for Std {
    #[inline]
    fn publish_one(&mut self, value: u64) -> Result<(), &'static str> {
        self.0.send(value).map_err(|_| "send: channel disconnected")
    }

    #[inline]
    fn publish_batch(&mut self, first: u64) -> Result<(), &'static str> {
        (first..first + BATCH as u64).try_for_each(|value| self.publish_one(value))
    }
}
