//! Turning a pipeline description into stations on workers, following a plan.
//!
//! The description is walked left to right ([`Deploy::deploy`]),
//! carrying the *open* station: a source and the units fused behind it so
//! far, still missing its final sink. Each unit is either fused onto the
//! open station (same worker in the plan) or starts a new station behind a
//! ring (another worker). A shard closes the open station with a router,
//! deploys each copy from a ring of its own, and opens a station on the
//! merge's worker. The last open station ends in the output ring.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;
use statepipe_ring::wait::{BusySpin, WaitStrategy};
use statepipe_ring::{Monitor, RingBuilder, Single};

use super::barrier::Coordinator;
use super::edge::UnitStates;
use super::edge::{
    inner_edge, max_batch, probe, Doorbell, EdgePoller, EdgeProducer, Halt, Move, Msg, RingSource,
    Sink, Source, Take, EDGE_POLLER,
};
use super::fork::{EachItem, Gather, Join};
use super::graph::{EdgeInfo, StationInfo, OUTPUT};
use super::ring_sink::RingSink;
use super::route::{Merge, Pick, Router};
use super::station::UnitSink;
use super::station::{ErrorCounts, Station, StationCounters, Task, UnitCounters};
use crate::failure::Failure;
use crate::node::common::Node;
use crate::unit::{UnitInfo, UnitKind};

/// A part of a description as the compile walk sees it: a [`Node`] that can
/// also be placed on stations. Every construct implements it in
/// [`lower`](super::lower).
pub(crate) trait Deploy<I, O>: Node<I, O> {
    /// Deploys this part behind the open station `up`.
    fn deploy(self: Box<Self>, cx: &mut Compile, up: Open<I>) -> Open<O>;

    /// This part as unit `unit` of a station, fused in front of `next`.
    /// Any part can run as a [`UnitSink`] (a call through
    /// [`push`](Node::push)); a stage runs its machine straight from the
    /// sink instead, one indirect call per item fewer.
    fn fuse(
        self: Box<Self>,
        unit: usize,
        counters: Arc<UnitCounters>,
        next: Box<dyn Sink<O>>,
    ) -> Box<dyn Sink<I>>
    where
        I: Send + 'static,
        O: Send + 'static,
    {
        Box::new(UnitSink::new(unit, self.into_dyn(), counters, next))
    }
}

/// The open station: everything but its final sink.
pub(crate) struct Open<T> {
    pub(crate) worker: usize,
    /// The units (or [`INPUT`](super::graph::INPUT)) whose outputs reach this point.
    pub(crate) tails: Vec<usize>,
    finish: Finisher<T>,
}

/// Closes an open station, given its final sink.
type Finisher<T> = Box<dyn FnOnce(&mut Compile, Box<dyn Sink<T>>)>;

impl<T: Send + 'static> Open<T> {
    /// A station that starts at `source` on worker `worker`.
    pub(crate) fn at(worker: usize, tails: Vec<usize>, source: Box<dyn Source<T>>) -> Self {
        Open {
            worker,
            tails,
            finish: Box::new(move |cx, sink| cx.add_station(worker, source, sink)),
        }
    }

    /// A station on `worker` that starts at `source`, itself unit `unit`
    /// (a merge or a join).
    fn after(unit: usize, worker: usize, source: Box<dyn Source<T>>) -> Self {
        Open {
            worker,
            tails: vec![unit],
            finish: Box::new(move |cx, sink| {
                cx.pending_units.push(unit);
                cx.add_station(worker, source, sink);
            }),
        }
    }

    /// Closes the station with `sink`.
    pub(crate) fn finish(self, cx: &mut Compile, sink: Box<dyn Sink<T>>) {
        (self.finish)(cx, sink);
    }

    /// The same station, its outputs passed through `f` (a choice tags
    /// each branch's outputs with its side).
    pub(crate) fn map<U: Send + 'static>(self, f: fn(T) -> U) -> Open<U> {
        Open {
            worker: self.worker,
            tails: self.tails,
            finish: Box::new(move |cx, next: Box<dyn Sink<U>>| {
                (self.finish)(cx, Box::new(MapSink { f, next }));
            }),
        }
    }
}

/// Passes each output through a function on its way to `next`.
struct MapSink<T, U> {
    f: fn(T) -> U,
    next: Box<dyn Sink<U>>,
}

impl<T: Send + 'static, U: Send + 'static> Sink<T> for MapSink<T, U> {
    #[inline]
    fn item(&mut self, seq: u64, item: T, failures: &mut Vec<Failure>) {
        self.next.item(seq, (self.f)(item), failures);
    }

    fn end(&mut self, seq: u64, failures: &mut Vec<Failure>) {
        self.next.end(seq, failures);
    }

    #[inline]
    fn item_end(&mut self, seq: u64, item: T, failures: &mut Vec<Failure>) {
        self.next.item_end(seq, (self.f)(item), failures);
    }

    fn flush(&mut self) -> bool {
        self.next.flush()
    }

    fn can_flush(&self) -> bool {
        self.next.can_flush()
    }

    fn publish_stats(&mut self) {
        self.next.publish_stats();
    }

    fn barrier(&mut self, seq: u64, co: &Coordinator) {
        self.next.barrier(seq, co);
    }

    fn close(self: Box<Self>, states: &mut UnitStates) {
        self.next.close(states);
    }
}

/// The sending ends of a router's edges, one per branch, while the
/// branches are being deployed.
pub(crate) struct Routes<I> {
    sinks: Vec<RingSink<I, BusySpin>>,
}

impl<I> Routes<I> {
    pub(crate) fn new() -> Self {
        Routes { sinks: Vec::new() }
    }
}

/// The name of the join's poller on a fork ring (after the branches').
const FORK_JOIN: &str = "join";

/// A fork's multicast ring while its branches are being deployed.
pub(crate) struct ForkRing<S> {
    producer: EdgeProducer<S, BusySpin>,
    pollers: std::vec::IntoIter<EdgePoller<S, BusySpin>>,
    names: Vec<String>,
    monitor: Monitor<Msg<S>, BusySpin, Single>,
    /// The worker each branch's first station runs on, then the join's.
    workers: Vec<usize>,
    /// The fork's worker, and the units whose outputs reach it.
    from: usize,
    tails: Vec<usize>,
    /// The next branch to open.
    next: usize,
}

/// The state of one deployment being compiled.
pub(crate) struct Compile {
    pub(crate) plan: Vec<usize>,
    pub(crate) units: Vec<UnitInfo>,
    pub(crate) unit_counters: Vec<Arc<UnitCounters>>,
    next_unit: usize,
    pub(crate) bells: Vec<Arc<Doorbell>>,
    pub(crate) tasks: Vec<Vec<Box<dyn Task>>>,
    pub(crate) handles: Vec<Box<dyn Halt>>,
    pub(crate) stations: Vec<StationInfo>,
    pub(crate) edges: Vec<EdgeInfo>,
    pending_units: Vec<usize>,
    capacity: usize,
    failure_tx: Sender<Failure>,
    pub(crate) errors: ErrorCounts,
    /// Every unit a station of its own (calibration).
    pub(crate) isolate: bool,
    /// How long stations hold outputs back ([`Config::output_hold`]).
    pub(crate) hold: Duration,
    /// Where barriers are looked up.
    pub(crate) co: Arc<Coordinator>,
    /// The number of the first input (a restore's position).
    pub(crate) resume: u64,
    /// The restored state of the source itself (a cycle's), if any.
    pub(crate) restored_extra: Option<Vec<u8>>,
}

impl Compile {
    pub(crate) fn new(
        plan: Vec<usize>,
        units: Vec<UnitInfo>,
        workers: usize,
        capacity: usize,
        failure_tx: Sender<Failure>,
        co: Arc<Coordinator>,
    ) -> Self {
        Compile {
            co,
            resume: 0,
            restored_extra: None,
            unit_counters: units.iter().map(|_| Arc::default()).collect(),
            plan,
            units,
            next_unit: 0,
            bells: (0..workers).map(|_| Doorbell::new()).collect(),
            tasks: (0..workers).map(|_| Vec::new()).collect(),
            handles: Vec::new(),
            stations: Vec::new(),
            edges: Vec::new(),
            pending_units: Vec::new(),
            capacity,
            failure_tx,
            errors: ErrorCounts::default(),
            isolate: false,
            hold: Duration::ZERO,
        }
    }

    /// The producing end of an edge, ringing `wake` when it publishes.
    pub(crate) fn ring_sink<T: Send + 'static, W: WaitStrategy>(
        &self,
        producer: EdgeProducer<T, W>,
        wake: Arc<Doorbell>,
    ) -> RingSink<T, W> {
        RingSink::new(producer, wake, self.hold)
    }

    /// The worker of the next unit to deploy.
    pub(crate) fn next_worker(&self) -> usize {
        self.plan.get(self.next_unit).copied().unwrap_or(0)
    }

    fn take_unit(&mut self, kind: UnitKind) -> (usize, usize) {
        let u = self.next_unit;
        debug_assert_eq!(self.units[u].kind, kind, "plan walk out of step");
        self.next_unit += 1;
        (u, self.plan[u])
    }

    fn add_station<T: Send + 'static>(
        &mut self,
        worker: usize,
        source: Box<dyn Source<T>>,
        sink: Box<dyn Sink<T>>,
    ) {
        let counters = Arc::new(StationCounters::default());
        self.stations.push(StationInfo {
            units: std::mem::take(&mut self.pending_units),
            counters: Arc::clone(&counters),
            depth: source.depth_probe(),
            capacity: source.capacity(),
        });
        self.tasks[worker].push(Box::new(Station {
            source,
            sink,
            failures: Vec::new(),
            failure_tx: self.failure_tx.clone(),
            counters,
            errors: Arc::clone(&self.errors),
            closed: false,
            co: Arc::clone(&self.co),
            blocked: false,
        }));
    }

    /// A ring from the open station to a new one on `worker`, which starts
    /// with unit `to`.
    fn cut<T: Send + 'static>(&mut self, up: Open<T>, worker: usize, to: usize) -> Open<T> {
        let e = inner_edge::<T>(self.capacity);
        let from = up.worker;
        let tails = up.tails.clone();
        for &t in &up.tails {
            self.edges.push(EdgeInfo {
                from: t,
                to,
                depth: Some(probe(&e.monitor)),
            });
        }
        let sink = self.ring_sink(e.producer, Arc::clone(&self.bells[worker]));
        up.finish(self, Box::new(sink));
        self.handles.push(e.handle);
        let source = RingSource::new(e.poller, e.monitor, Arc::clone(&self.bells[from]));
        Open::at(worker, tails, Box::new(source))
    }

    /// Deploys one unit (a stage, or a construct run whole) behind `up`.
    pub(crate) fn unit<A: Send + 'static, B: Send + 'static>(
        &mut self,
        piece: Box<dyn Deploy<A, B>>,
        up: Open<A>,
    ) -> Open<B> {
        let (u, w) = self.take_unit(UnitKind::Stage);
        self.place(u, w, piece, up)
    }

    /// Whether the `n` units from the next one all sit on `worker`, so a
    /// fork made of them runs whole on the open station (one call per
    /// item, no ring in between).
    pub(crate) fn fits_whole(&self, worker: usize, n: usize) -> bool {
        !self.isolate
            && (self.next_unit..self.next_unit + n)
                .all(|u| self.plan.get(u).copied().unwrap_or(0) == worker)
    }

    /// Deploys a construct (a fork or a choice) whose `n` units all sit on
    /// the open station's worker as one unit, run whole; it reports as its
    /// last unit (its join).
    pub(crate) fn whole<A: Send + 'static, B: Send + 'static>(
        &mut self,
        piece: Box<dyn Deploy<A, B>>,
        up: Open<A>,
        n: usize,
    ) -> Open<B> {
        self.next_unit += n.saturating_sub(1);
        let (u, w) = self.take_unit(UnitKind::Join);
        self.place(u, w, piece, up)
    }

    /// Places unit `u` on worker `w` behind `up`: fused when `up` is on
    /// `w`, behind a ring otherwise.
    fn place<A: Send + 'static, B: Send + 'static>(
        &mut self,
        u: usize,
        w: usize,
        piece: Box<dyn Deploy<A, B>>,
        up: Open<A>,
    ) -> Open<B> {
        let up = if up.worker == w && !self.isolate {
            for &t in &up.tails {
                self.edges.push(EdgeInfo {
                    from: t,
                    to: u,
                    depth: None,
                });
            }
            up
        } else {
            self.cut(up, w, u)
        };
        let counters = Arc::clone(&self.unit_counters[u]);
        Open {
            worker: w,
            tails: vec![u],
            finish: Box::new(move |cx: &mut Compile, next: Box<dyn Sink<B>>| {
                cx.pending_units.push(u);
                let sink = piece.fuse(u, counters, next);
                up.finish(cx, sink);
            }),
        }
    }

    /// Deploys a shard: a router closing `up`, each copy from its own ring,
    /// and a merge opening the station after it.
    pub(crate) fn shard<I, O, P>(
        &mut self,
        copies: Vec<Box<dyn Deploy<I, O>>>,
        pick: P,
        up: Open<I>,
    ) -> Open<O>
    where
        I: Send + 'static,
        O: Send + 'static,
        P: Pick<I> + 'static,
    {
        let mut routes = Routes::new();
        let mut outs = Vec::with_capacity(copies.len());
        for copy in copies {
            let open = self.route_branch::<I, Move>(&mut routes, &up);
            outs.push(copy.deploy(self, open));
        }
        let m = self.take_unit(UnitKind::Merge);
        let inputs = outs.into_iter().map(|o| self.join_input(o, m)).collect();
        self.route_close(up, routes, pick, inputs, m)
    }

    /// Opens the station of the next branch of a router behind `up`: an
    /// edge of its own, from which the branch takes its input as `K` says
    /// (the item, or one side of an `Either`).
    pub(crate) fn route_branch<I: Send + 'static, K: Take<I>>(
        &mut self,
        routes: &mut Routes<I>,
        up: &Open<I>,
    ) -> Open<K::Out> {
        let w = self.next_worker();
        let e = inner_edge::<I>(self.capacity);
        self.handles.push(e.handle);
        routes
            .sinks
            .push(self.ring_sink(e.producer, Arc::clone(&self.bells[w])));
        let wake = Arc::clone(&self.bells[up.worker]);
        let source = RingSource::<I, BusySpin, K>::reading(e.poller, e.monitor, EDGE_POLLER, wake);
        Open::at(w, up.tails.clone(), Box::new(source))
    }

    /// Closes `up` with a router over `routes` that sends each item where
    /// `pick` says, and opens the station after the merge `(m, wm)`, which
    /// reads `inputs` (the branches' ends) in the order of the route log.
    pub(crate) fn route_close<I, O, P>(
        &mut self,
        up: Open<I>,
        routes: Routes<I>,
        pick: P,
        inputs: Vec<RingSource<O, BusySpin>>,
        (m, wm): (usize, usize),
    ) -> Open<O>
    where
        I: Send + 'static,
        O: Send + 'static,
        P: Pick<I> + 'static,
    {
        let from = up.worker;
        let log = inner_edge::<u32>(self.capacity);
        self.handles.push(log.handle);
        let router = Router {
            copies: routes.sinks,
            log: self.ring_sink(log.producer, Arc::clone(&self.bells[wm])),
            pick,
            unit: m,
        };
        up.finish(self, Box::new(router));
        let merge = Merge {
            log: RingSource::new(log.poller, log.monitor, Arc::clone(&self.bells[from])),
            copies: inputs,
            current: None,
            barrier: None,
            counters: Arc::clone(&self.unit_counters[m]),
            delivered: 0,
        };
        Open::after(m, wm, Box::new(merge))
    }

    /// Opens a fork behind `up`: the multicast ring its branches read, one
    /// poller per branch and one for the join, chained (see
    /// [`fork`](super::fork)). `sizes` are the branches' unit counts, which
    /// say where each branch, and the join, starts.
    pub(crate) fn fork_ring<I, S: Send + 'static>(
        &mut self,
        up: &Open<I>,
        sizes: &[usize],
    ) -> ForkRing<S> {
        let mut start = self.next_unit;
        // Each branch's first station, then the join's, by the plan.
        let workers: Vec<usize> = sizes
            .iter()
            .chain([&0])
            .map(|&n| {
                let w = self.plan.get(start).copied().unwrap_or(0);
                start += n;
                w
            })
            .collect();
        let names: Vec<String> = (0..sizes.len())
            .map(|k| format!("branch {k}"))
            .chain([FORK_JOIN.to_string()])
            .collect();
        let capacity = self.capacity;
        let mut b = RingBuilder::new(capacity, Msg::empty)
            .wait_strategy(BusySpin)
            .max_batch(max_batch(capacity))
            .poller_mut(&names[0]);
        for name in &names[1..] {
            b = b.then().poller_mut(name);
        }
        let (producer, mut ring) = b.build_single();
        let pollers = names
            .iter()
            .map(|n| {
                ring.take_poller_mut(n)
                    .expect("every reader's poller was declared just above")
            })
            .collect::<Vec<_>>();
        let monitor = ring.monitor();
        self.handles.push(Box::new(ring));
        ForkRing {
            producer,
            pollers: pollers.into_iter(),
            names,
            monitor,
            workers,
            from: up.worker,
            tails: up.tails.clone(),
            next: 0,
        }
    }

    /// Opens the station of the next branch of `ring`, which takes its
    /// input out of each slot as `K` says, each item a group of its own.
    pub(crate) fn branch<S: Send + 'static, K: Take<S>>(
        &mut self,
        ring: &mut ForkRing<S>,
    ) -> Open<K::Out> {
        let k = ring.next;
        ring.next += 1;
        // This reader's progress lets the next one read (the next branch,
        // or after the last the join).
        let wake = Arc::clone(&self.bells[ring.workers[k + 1]]);
        let source = RingSource::<S, BusySpin, K>::reading(
            ring.pollers.next().expect("one poller per branch"),
            ring.monitor.clone(),
            &ring.names[k],
            wake,
        );
        Open::at(
            ring.workers[k],
            ring.tails.clone(),
            Box::new(EachItem(source)),
        )
    }

    /// The join unit of a fork whose branches are deployed.
    pub(crate) fn join_unit(&mut self) -> (usize, usize) {
        self.take_unit(UnitKind::Join)
    }

    /// Ends a branch in a ring to the join `(j, wj)`; returns its far end.
    pub(crate) fn join_input<C: Send + 'static>(
        &mut self,
        out: Open<C>,
        (j, wj): (usize, usize),
    ) -> RingSource<C, BusySpin> {
        let e = inner_edge::<C>(self.capacity);
        self.handles.push(e.handle);
        for &t in &out.tails {
            self.edges.push(EdgeInfo {
                from: t,
                to: j,
                depth: Some(probe(&e.monitor)),
            });
        }
        let source = RingSource::new(e.poller, e.monitor, Arc::clone(&self.bells[out.worker]));
        out.finish(
            self,
            Box::new(self.ring_sink(e.producer, Arc::clone(&self.bells[wj]))),
        );
        source
    }

    /// Closes `up` with the fork onto `ring` (each item made a slot by
    /// `into`), and opens the station after the join `(j, wj)`, which
    /// gathers the branches' outputs with `gather`.
    pub(crate) fn join<I, S, G>(
        &mut self,
        up: Open<I>,
        ring: ForkRing<S>,
        into: fn(I) -> S,
        gather: G,
        (j, wj): (usize, usize),
    ) -> Open<G::Out>
    where
        I: Send + 'static,
        S: Send + 'static,
        G: Gather,
    {
        debug_assert_eq!(
            ring.workers.last(),
            Some(&wj),
            "the join is where the plan put it"
        );
        let first = ring.workers[0];
        let fork = MapSink {
            f: into,
            next: Box::new(self.ring_sink(ring.producer, Arc::clone(&self.bells[first]))),
        };
        up.finish(self, Box::new(fork));
        let mut pollers = ring.pollers;
        let join = Join {
            fork: RingSource::reading(
                pollers
                    .next()
                    .expect("the join's poller, after the branches'"),
                ring.monitor,
                FORK_JOIN,
                // The join frees the fork's slots.
                Arc::clone(&self.bells[ring.from]),
            ),
            gather,
            current: None,
            barrier: None,
            counters: Arc::clone(&self.unit_counters[j]),
            joined: 0,
            delivered: 0,
        };
        Open::after(j, wj, Box::new(join))
    }

    /// Ends the last open station in a closure.
    pub(crate) fn output_fn<O: Send + 'static>(&mut self, last: Open<O>, sink: Box<dyn Sink<O>>) {
        for &t in &last.tails {
            self.edges.push(EdgeInfo {
                from: t,
                to: OUTPUT,
                depth: None,
            });
        }
        last.finish(self, sink);
    }

    /// Ends the last open station in the output ring.
    pub(crate) fn output<O: Send + 'static, W: WaitStrategy>(
        &mut self,
        last: Open<O>,
        producer: EdgeProducer<O, W>,
    ) {
        for &t in &last.tails {
            self.edges.push(EdgeInfo {
                from: t,
                to: OUTPUT,
                depth: None,
            });
        }
        // The user's thread waits inside the ring (its wait strategy), not
        // on a doorbell: this one is never bound, so ringing it is a no-op.
        let sink = self.ring_sink(producer, Doorbell::new());
        last.finish(self, Box::new(sink));
    }
}
