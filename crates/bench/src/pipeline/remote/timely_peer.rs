//! timely dataflow's exchange between two processes: `timely::execute` with a cluster
//! `Config` of 2 processes × 1 worker (as `-n 2 -p 0|1` with the addresses of a
//! hostfile), one dataflow `input -> exchange(to worker 1) -> inspect -> probe`.
//! Worker 0 (the sender process) feeds the input; the exchange routes every item to
//! worker 1 (the receiver process), where `inspect` counts it.
//!
//! - Flood: as timely's `examples/exchange.rs`, rounds of [`ROUND_ITEMS`] items, each
//!   closed with `advance_to(round)`; the input may run [`ROUNDS_IN_FLIGHT`] rounds
//!   ahead of the probe (the example waits for every round: one round in flight) and
//!   the worker steps while it is further ahead.
//! - Paced: as timely's `examples/openloop.rs` (its "technique 3"), the worker loops:
//!   read the probe, round the elapsed ns down to a power of two that grows with the
//!   time not yet acknowledged, send the items due before it (each stamped when sent)
//!   and `advance_to` it, `step()`.
//!
//! Items are `Item`, eight `u64` (bincode: 64 bytes).

use std::cell::RefCell;
use std::rc::Rc;

use timely::dataflow::operators::{Exchange, Input, Inspect, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};
use timely::worker::Worker;
use timely::{CommunicationConfig, Config, WorkerConfig};

use super::child::{ChildReport, ChildRequest, Role};
use super::wire::{now_ns, Item, Load, Pacer, Tally};
use super::Peer;
use crate::BenchError;

/// The `impl` of its rows.
pub const NAME: &str = "timely";

/// Items per round (epoch) in a flood. With [`ROUNDS_IN_FLIGHT`], the best of a small
/// sweep on the 2-vCPU host (1 000 x 64, 10 000 x 1, 4, 16, 100 000 x 1, 4, 16): waiting
/// for every round, as the example does, ran at a third of this.
pub const ROUND_ITEMS: u64 = 10_000;
/// Rounds the input may be ahead of the probe in a flood.
pub const ROUNDS_IN_FLIGHT: u64 = 16;

/// The worker every item is exchanged to: the receiver process's only worker.
const RECEIVER: u64 = 1;

/// timely's exchange between two processes over TCP loopback.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimelyExchange;

impl Peer for TimelyExchange {
    fn name(&self) -> &'static str {
        NAME
    }

    fn config(&self) -> String {
        format!("2 processes x 1 worker, exchange; rounds of {ROUND_ITEMS}, {ROUNDS_IN_FLIGHT} in flight")
    }

    fn child(
        &self,
        req: &ChildRequest,
        ready: &mut dyn FnMut(),
    ) -> Result<ChildReport, BenchError> {
        let who = format!("{NAME} {:?}", req.role);
        let process = match req.role {
            Role::Send => 0,
            Role::Recv => {
                // timely connects its processes itself: the sender may start at once.
                ready();
                1
            }
        };
        let config = Config {
            communication: CommunicationConfig::Cluster {
                threads: 1,
                process,
                addresses: req.addresses.to_vec(),
                report: false,
                zerocopy: false,
            },
            worker: WorkerConfig::default(),
        };
        let load = req.load;
        let guards = timely::execute(config, move |worker| run_worker(worker, load))
            .map_err(|e| BenchError::failed(&who, e))?;
        let mut reports = guards.join().into_iter();
        match (reports.next(), reports.next()) {
            (Some(Ok(report)), None) => Ok(report),
            (Some(Err(e)), None) => Err(BenchError::failed(&who, e)),
            _ => Err(BenchError::failed(
                &who,
                "expected one worker in this process",
            )),
        }
    }
}

/// One worker: builds the dataflow, then sends (worker 0) or waits until the input is
/// closed and everything arrived (worker 1).
fn run_worker(worker: &mut Worker, load: Load) -> ChildReport {
    let mut input = InputHandle::new();
    let probe = ProbeHandle::new();
    let tally = Rc::new(RefCell::new(Tally::new(load)));
    let seen = Rc::clone(&tally);
    worker.dataflow::<u64, _, _>(|scope| {
        scope
            .input_from(&mut input)
            .container::<Vec<Item>>()
            .exchange(|_item: &Item| RECEIVER)
            .inspect(move |item: &Item| seen.borrow_mut().add(item))
            .probe_with(&probe);
    });
    if worker.index() as u64 != RECEIVER {
        let items = load.items();
        match load {
            Load::Flood { .. } => flood(worker, &mut input, &probe, items),
            Load::Paced { rate, .. } => paced(worker, &mut input, &probe, items, rate),
        }
        input.close();
        while !probe.done() {
            worker.step();
        }
        return ChildReport::Sent { items };
    }
    input.close();
    while !probe.done() {
        worker.step_or_park(None);
    }
    let report = tally.borrow().report();
    ChildReport::Received(report)
}

fn flood(
    worker: &mut Worker,
    input: &mut InputHandle<u64, timely::container::CapacityContainerBuilder<Vec<Item>>>,
    probe: &ProbeHandle<u64>,
    items: u64,
) {
    let mut seq = 0;
    let mut round = 0u64;
    while seq < items {
        let end = (seq + ROUND_ITEMS).min(items);
        for s in seq..end {
            input.send(Item::new(s, 0));
        }
        seq = end;
        round += 1;
        input.advance_to(round);
        worker.step();
        while probe.less_than(&round.saturating_sub(ROUNDS_IN_FLIGHT - 1)) {
            worker.step();
        }
    }
}

fn paced(
    worker: &mut Worker,
    input: &mut InputHandle<u64, timely::container::CapacityContainerBuilder<Vec<Item>>>,
    probe: &ProbeHandle<u64>,
    items: u64,
    rate: f64,
) {
    let pacer = Pacer::start(rate);
    let (mut seq, mut inserted_ns) = (0, 0u64);
    while seq < items {
        let elapsed = pacer.elapsed_ns(now_ns());
        // openloop's "technique 3": times rounded down to a power of two that grows
        // with the time inserted but not yet acknowledged (at least 1024 ns).
        let acknowledged = probe.with_frontier(|f| f.first().copied().unwrap_or(u64::MAX));
        let behind = inserted_ns.saturating_sub(acknowledged);
        let bits = u64::BITS - behind.leading_zeros();
        let scale = ((1u64 << bits) / 4).max(1024);
        let target_ns = elapsed & !(scale - 1);
        if inserted_ns < target_ns {
            while seq < items && pacer.due_ns(seq) - pacer.due_ns(0) < target_ns {
                input.send(Item::new(seq, now_ns()));
                seq += 1;
            }
            input.advance_to(target_ns);
            inserted_ns = target_ns;
        }
        worker.step();
    }
}
