//! The `remote/*` cases of `statepipe bench pipeline`: one edge between two processes
//! on one host, 64-byte items over TCP loopback.
//!
//! | case | unit | what |
//! |---|---|---|
//! | `remote/edge` | M items/s | a flood of [`RemoteSizes::flood_items`] items: items over the time from the first arrival to the last, at the receiver |
//! | `remote/edge/p50`, `remote/edge/p99` | µs | one-way latency (send stamp in the item to arrival, one monotonic clock) of items paced at [`LOAD_SHARE`] of the contender's own median `remote/edge` throughput in this run; the first [`wire::WARM_UP_SHARE`]th of the items not recorded |
//! | `remote/edge/load` | k items/s | the rate those items were paced at |
//!
//! Contenders, each a [`Peer`]: statepipe's cut edge ([`statepipe_peer`], a
//! distributed pipeline's edge on its own), ZeroMQ PUSH/PULL
//! ([`zmq_peer`]), timely's exchange between two processes ([`timely_peer`]). Every
//! sample starts two fresh child processes ([`child`]): the receiver, then (once it
//! listens) the sender; each pins itself, with all of its threads, to its own CPU
//! where the host has two. Throughput samples run round-robin first; the latency
//! group then reads each contender's median capacity from them.

pub mod child;
pub mod statepipe_peer;
pub mod timely_peer;
pub mod wire;
pub mod zmq_peer;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use child::{ChildReport, ChildRequest, Children};
use wire::Load;

use crate::harness::{Contender, Group, Metric};
use crate::report::{Report, ResultRow, OURS};
use crate::stats::median;
use crate::watchdog::Watchdog;
use crate::BenchError;

/// The throughput case.
pub const EDGE: &str = "remote/edge";
/// The latency cases, and the rate they were paced at.
pub const EDGE_LATENCY: [&str; 3] = ["remote/edge/p50", "remote/edge/p99", "remote/edge/load"];
/// The latency samples' rate, as a share of the contender's median throughput.
pub const LOAD_SHARE: f64 = 0.10;
/// Our throughput must be at least this many times ZeroMQ's...
pub const OVER_ZMQ: f64 = 1.5;
/// ... and this many times timely's.
pub const OVER_TIMELY: f64 = 1.0;

/// Every case of this module, in run order.
pub fn case_names() -> Vec<String> {
    std::iter::once(EDGE)
        .chain(EDGE_LATENCY)
        .map(String::from)
        .collect()
}

/// One contender of the remote cases: a way to move 64-byte items from a sender
/// process to a receiver process. The parent side is shared ([`Children::run_pair`]);
/// an implementation only plays either end inside a child process.
pub trait Peer: Sync {
    /// `impl` in the report (`statepipe` for ours).
    fn name(&self) -> &'static str;
    /// `config` in the report: how it is set up.
    fn config(&self) -> String;
    /// `Err(why)` when it cannot run here: its rows are skipped, the header says why.
    fn available(&self) -> Result<(), String> {
        Ok(())
    }
    /// In a child process: plays `req.role` for `req.load`; a receiver calls `ready`
    /// once the sender may start, and counts every item in a [`wire::Tally`].
    ///
    /// # Errors
    ///
    /// The transport failed.
    fn child(&self, req: &ChildRequest, ready: &mut dyn FnMut())
        -> Result<ChildReport, BenchError>;
}

/// Every contender, ours first.
pub static PEERS: [&dyn Peer; 4] = [
    &statepipe_peer::StatepipeEdge::RAW,
    &statepipe_peer::StatepipeEdge::SERDE,
    &zmq_peer::ZmqPushPull,
    &timely_peer::TimelyExchange,
];

/// The contender named `name`.
pub fn peer_named(name: &str) -> Option<&'static dyn Peer> {
    PEERS.iter().copied().find(|p| p.name() == name)
}

/// How big the remote samples are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteSizes {
    /// Items per throughput sample.
    pub flood_items: u64,
    /// How long a latency sample paces its items.
    pub paced_run: Duration,
}

impl RemoteSizes {
    /// A full run: 10 M items (a few seconds a sample), 2 s of paced items.
    pub const FULL: RemoteSizes = RemoteSizes {
        flood_items: 10_000_000,
        paced_run: Duration::from_secs(2),
    };
    /// `--quick`.
    pub const QUICK: RemoteSizes = RemoteSizes {
        flood_items: 1_000_000,
        paced_run: Duration::from_millis(500),
    };
    /// Small enough for a debug build.
    pub const TINY: RemoteSizes = RemoteSizes {
        flood_items: 20_000,
        paced_run: Duration::from_millis(100),
    };
}

/// Lines describing the remote cases, for the run's header, if one is wanted.
pub fn describe(
    s: &RemoteSizes,
    children: Option<&Children>,
    wants: impl Fn(&[&str]) -> bool,
) -> Option<String> {
    if !wants(&case_names().iter().map(String::as_str).collect::<Vec<_>>()) {
        return None;
    }
    let mut lines = vec![format!(
        "pipeline: remote: one edge between two processes on this host, 64-byte items over \
         TCP loopback; {EDGE}: {} items, first to last arrival at the receiver; {}/p50|p99: \
         one-way latency (send stamp to arrival, CLOCK_MONOTONIC), items paced for {} ms at \
         {:.0}% of the contender's own median {EDGE} this run, the first 1/{} not recorded",
        s.flood_items,
        EDGE,
        s.paced_run.as_millis(),
        LOAD_SHARE * 100.0,
        wire::WARM_UP_SHARE
    )];
    match children {
        None => lines.push(
            "pipeline: remote: skipped: no command to start child processes (`statepipe bench \
             pipeline` has one)"
                .into(),
        ),
        Some(c) => lines.push(match c.cpus {
            Some([send, recv]) => format!(
                "pipeline: remote: two fresh processes per sample; sender (all of its threads) \
                 pinned to CPU {send}, receiver to CPU {recv}, every contender alike"
            ),
            None => "pipeline: remote: two fresh processes per sample; fewer than 2 CPUs: \
                     not pinned"
                .into(),
        }),
    }
    for peer in PEERS {
        if let Err(why) = peer.available() {
            lines.push(format!("pipeline: remote: {} skipped: {why}", peer.name()));
        }
    }
    Some(lines.join("\n"))
}

/// The throughput and latency groups, when a remote case is wanted and children can
/// be started; the latency group needs the throughput group's samples, so either case
/// brings the other.
pub fn groups(
    s: &RemoteSizes,
    children: Option<&Children>,
    wants: impl Fn(&[&str]) -> bool,
) -> Vec<Group<'static>> {
    let names = case_names();
    let (true, Some(children)) = (
        wants(&names.iter().map(String::as_str).collect::<Vec<_>>()),
        children,
    ) else {
        return Vec::new();
    };
    let capacity: Rc<RefCell<HashMap<&'static str, Vec<f64>>>> = Rc::default();
    let peers: Vec<&'static dyn Peer> = PEERS
        .iter()
        .copied()
        .filter(|p| p.available().is_ok())
        .collect();
    let flood = peers
        .iter()
        .map(|&peer| {
            let (children, capacity, items) =
                (children.clone(), Rc::clone(&capacity), s.flood_items);
            Contender::new(peer.name(), peer.config(), move || {
                let _watchdog =
                    Watchdog::arm(format!("{} {EDGE}", peer.name()), super::peers::HANG_LIMIT);
                let rate = children.run_pair(peer, Load::Flood { items })?.rate();
                capacity
                    .borrow_mut()
                    .entry(peer.name())
                    .or_default()
                    .push(rate);
                Ok(vec![rate / 1e6])
            })
        })
        .collect();
    let paced = peers
        .iter()
        .map(|&peer| {
            let (children, capacity, run) = (children.clone(), Rc::clone(&capacity), s.paced_run);
            let config = format!(
                "{}; paced at {:.0}% of its median {EDGE}",
                peer.config(),
                LOAD_SHARE * 100.0
            );
            Contender::new(peer.name(), config, move || {
                let who = format!("{} {}", peer.name(), EDGE_LATENCY[0]);
                let cap = capacity.borrow().get(peer.name()).map(|v| median(v));
                let cap =
                    cap.ok_or_else(|| BenchError::failed(&who, "no throughput sample to pace by"))?;
                let rate = (cap * LOAD_SHARE).max(1.0);
                let items = ((rate * run.as_secs_f64()) as u64).max(100);
                let _watchdog = Watchdog::arm(&who, super::peers::HANG_LIMIT);
                let r = children.run_pair(peer, Load::Paced { items, rate })?;
                Ok(vec![
                    r.p50_ns as f64 / 1e3,
                    r.p99_ns as f64 / 1e3,
                    rate / 1e3,
                ])
            })
        })
        .collect();
    let metric = |case: &str, unit: &str, higher_is_better| Metric {
        case: case.into(),
        unit: unit.into(),
        higher_is_better,
    };
    vec![
        Group {
            name: EDGE.into(),
            metrics: vec![metric(EDGE, "M items/s", true)],
            contenders: flood,
        },
        Group {
            name: "remote/edge/latency".into(),
            metrics: vec![
                metric(EDGE_LATENCY[0], "µs", false),
                metric(EDGE_LATENCY[1], "µs", false),
                metric(EDGE_LATENCY[2], "k items/s", true),
            ],
            contenders: paced,
        },
    ]
}

fn row<'r>(report: &'r Report, case: &str, imp: &str) -> Option<&'r ResultRow> {
    report
        .results
        .iter()
        .find(|r| r.case == case && r.imp == imp)
}

/// One line per remote target whose rows are in `report` (none until statepipe's
/// contender runs): what, the figure, the bound, and whether it is met.
pub fn targets(report: &Report) -> Vec<(String, f64, String, bool)> {
    let mut out = Vec::new();
    let Some(ours) = row(report, EDGE, OURS) else {
        return out;
    };
    for (peer, bound) in [(zmq_peer::NAME, OVER_ZMQ), (timely_peer::NAME, OVER_TIMELY)] {
        if let Some(theirs) = row(report, EDGE, peer) {
            let r = ours.median / theirs.median.max(1e-12);
            out.push((
                format!(
                    "{EDGE} statepipe/{peer} ({:.3} / {:.3} M items/s)",
                    ours.median, theirs.median
                ),
                r,
                format!(">= {bound}"),
                r >= bound,
            ));
        }
    }
    let case = EDGE_LATENCY[0];
    if let (Some(ours), Some(zmq)) = (row(report, case, OURS), row(report, case, zmq_peer::NAME)) {
        out.push((
            format!(
                "{case} at {:.0}% load, statepipe µs (zmq: {:.1} µs)",
                LOAD_SHARE * 100.0,
                zmq.median
            ),
            ours.median,
            format!("<= {:.1}", zmq.median),
            ours.median <= zmq.median,
        ));
    }
    out
}
