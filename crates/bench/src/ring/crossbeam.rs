//! Peer: crossbeam-channel's bounded channel (1p1c, Np1c, and pipeline3 as a chain of
//! channels where each stage forwards what it received).
//!
//! Channels have no batch API: batch mode sends the 64 values one by one, so batch and
//! single differ only in the stop-flag checks (labelled in `config`). Consumers use the
//! blocking `recv` (crossbeam spins, then parks).

use std::thread;

use core_affinity::CoreId;
use crossbeam_channel::{bounded, Receiver, Sender};

use super::workload::{self, Mode, Publisher, Spec, Tally, Topology, BATCH, CAPACITY};
use crate::host::pin_current;
use crate::BenchError;

/// The implementation name in reports.
pub const NAME: &str = "crossbeam";

/// Whether we run crossbeam on `topology` (multicast and diamonds are not channels).
pub fn supports(topology: Topology) -> bool {
    matches!(
        topology,
        Topology::OneToOne | Topology::ManyToOne(_) | Topology::Pipeline3
    )
}

/// The `config` of its rows.
pub fn config(topology: Topology, mode: Mode) -> String {
    let shape = if topology == Topology::Pipeline3 {
        "3 chained bounded(65536)"
    } else {
        "bounded(65536)"
    };
    match mode {
        Mode::Single => format!("{shape}; send/recv"),
        Mode::Batch => format!("{shape}; 64 x send (no batch API)"),
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
        "crossbeam does not run {}",
        spec.topology.name()
    );
    let who = format!("{NAME} {}", spec.topology.name());
    let pin = |j: usize| spec.pins.consumer(spec.topology, j);
    let (tx, rx) = bounded::<u64>(CAPACITY);
    let mut stages = Vec::new();
    if spec.topology == Topology::Pipeline3 {
        let (tx_b, rx_b) = bounded::<u64>(CAPACITY);
        let (tx_c, rx_c) = bounded::<u64>(CAPACITY);
        stages.push(("a", forward(rx, tx_b, pin(0))));
        stages.push(("b", forward(rx_b, tx_c, pin(1))));
        stages.push(("c", sink(rx_c, pin(2))));
    } else {
        stages.push(("c", sink(rx, pin(0))));
    }
    let producers: Vec<Sender<u64>> = (0..spec.topology.producers()).map(|_| tx.clone()).collect();
    drop(tx);
    workload::throughput(&who, spec, producers, || {
        stages
            .into_iter()
            .map(|(name, handle)| workload::join_consumer(&who, name, handle))
            .collect::<Result<Vec<Tally>, _>>()
    })
}

/// A last stage: sums until every sender is gone.
fn sink(rx: Receiver<u64>, cpu: Option<CoreId>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        pin_current(cpu);
        rx.iter().fold(0u64, u64::wrapping_add)
    })
}

/// A middle stage: sums and forwards; closing its sender closes the next stage.
fn forward(rx: Receiver<u64>, tx: Sender<u64>, cpu: Option<CoreId>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        pin_current(cpu);
        let mut sum = 0u64;
        for value in rx.iter() {
            sum = sum.wrapping_add(value);
            if tx.send(value).is_err() {
                break;
            }
        }
        sum
    })
}

impl Publisher for Sender<u64> {
    #[inline]
    fn publish_one(&mut self, value: u64) -> Result<(), &'static str> {
        self.send(value).map_err(|_| "send: channel disconnected")
    }

    #[inline]
    fn publish_batch(&mut self, first: u64) -> Result<(), &'static str> {
        (first..first + BATCH as u64).try_for_each(|value| self.publish_one(value))
    }
}
