//! The scheduler driven without sockets: frames go from `Scheduler::out` to
//! in-memory worker cores and their answers straight back, in an order the
//! test chooses. Table tests pin placement, the start-of-step rebalance,
//! steal decisions and the books after a lost worker; a property test runs
//! whole steps in random delivery orders against the single-process engine
//! and the rebalance against a brute-force optimum.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use proptest::prelude::*;

use super::{Batch, Placement, Recovery, SchedConfig, Scheduler, StealVia};
use crate::engine::Engine;
use crate::error::Error;
use crate::evolve::{Evolve, StateId};
use crate::local::Local;
use crate::protocol::{self, msg, Kind};
use crate::registry::{decode, encode};
use crate::tests::{registry, Branchy};
use crate::worker::WorkerCore;

const SEED: u64 = 11;

/// Which worker's next frame is delivered: `pick(k)` chooses among `k`
/// workers with frames waiting (in worker order).
type Pick<'a> = &'a mut dyn FnMut(usize) -> usize;

/// A scheduler, a worker core per worker, and the frames each worker has
/// been sent but not yet answered (a connection delivers in order).
struct Cluster {
    sched: Scheduler,
    cores: Vec<WorkerCore>,
    queues: Vec<VecDeque<Vec<u8>>>,
    alive: Vec<bool>,
    /// Every request each worker received, in order: kind and ids.
    log: Vec<Vec<(Kind, Vec<StateId>)>>,
    /// The steps `chaos::run` evolves: every state at cost 1, or these.
    heavy: Option<Heavy>,
}

/// Steps with a heavy tail, for `chaos::run`: each state's cost, and the
/// measurements the scheduler is given at the start of each step (ns per
/// unit of cost, ns per move). In-process test workers take microseconds
/// whatever a call's cost, so the decisions that weigh a call's time
/// against a move's would not come up otherwise.
#[derive(Clone, Copy)]
struct Heavy {
    cost: fn(StateId) -> f64,
    ns_per_cost: f64,
    move_ns: f64,
}

/// Where worker `i` says it takes replicas (nothing listens: `deliver`
/// hands them over).
fn peer_addr(i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], PEER_PORT + i as u16))
}

const PEER_PORT: u16 = 9500;

fn addrs(n: usize) -> Vec<SocketAddr> {
    (0..n)
        .map(|i| SocketAddr::from(([127, 0, 0, 1], 9000 + i as u16)))
        .collect()
}

/// Ids a request names (evolves, moves, adds, drops, fetches).
fn ids_of(kind: Kind, p: &[u8]) -> Vec<StateId> {
    match kind {
        Kind::Evolve => msg::evolve(p).map(|e| e.items.iter().map(|x| x.0).collect()),
        Kind::Add => msg::states(p).map(|s| s.iter().map(|x| x.0).collect()),
        Kind::Remove | Kind::Drop | Kind::Fetch => msg::ids(p),
        _ => Ok(Vec::new()),
    }
    .unwrap_or_default()
}

impl Cluster {
    /// `n` workers with `Branchy` set up.
    fn new(n: usize, cfg: SchedConfig) -> Self {
        let mut c = Cluster {
            sched: Scheduler::new(&addrs(n), SEED, cfg),
            cores: (0..n)
                .map(|i| WorkerCore::new(registry()).with_peer_addr(peer_addr(i)))
                .collect(),
            queues: vec![VecDeque::new(); n],
            alive: vec![true; n],
            log: vec![Vec::new(); n],
            heavy: None,
        };
        let params = encode(&model()).unwrap();
        c.sched.begin_setup(Branchy::NAME, &params).unwrap();
        c.pump(&mut |_| 0);
        c.sched.finish().unwrap();
        c
    }

    /// Moves the scheduler's output into the per-worker queues.
    fn collect(&mut self) {
        for (w, f) in self.sched.out.drain(..) {
            if self.alive[w] {
                let (kind, p, _) = protocol::decode(&f, u32::MAX).unwrap().unwrap();
                self.log[w].push((kind, ids_of(kind, p)));
                self.queues[w].push_back(f);
            }
        }
    }

    /// Delivers one frame to worker `w` and its answer to the scheduler.
    fn deliver(&mut self, w: usize) {
        let f = self.queues[w].pop_front().expect("a frame waits");
        let (kind, p, _) = protocol::decode(&f, u32::MAX).unwrap().unwrap();
        if kind == Kind::Replicate {
            self.replicate(w, p);
            self.collect();
            return;
        }
        let mut out = Vec::new();
        self.cores[w].handle(kind, p, &mut out).unwrap();
        let mut pos = 0;
        while let Some((k, payload, used)) = protocol::decode(&out[pos..], u32::MAX).unwrap() {
            self.sched.on_frame(w, k, payload).unwrap();
            pos += used;
        }
        self.collect();
    }

    /// What a worker's `Replicate` does over its peer connection: its
    /// states go to the buddy (if that is alive), which says `Held` at
    /// once; the worker answers `Shipped`.
    fn replicate(&mut self, w: usize, p: &[u8]) {
        let r = msg::replicate(p).unwrap();
        let to: SocketAddr = r.to.parse().unwrap();
        let b = usize::from(to.port() - PEER_PORT);
        let states = self.cores[w].held_states();
        let (n, bytes) = (
            states.len() as u32,
            states.iter().map(|s| s.1.len() as u64).sum::<u64>(),
        );
        let reached = self.alive[b];
        let mut f = Vec::new();
        let st = protocol::begin(&mut f, Kind::Shipped);
        msg::put_u32(&mut f, if reached { n } else { u32::MAX });
        msg::put_u64(&mut f, bytes);
        protocol::finish(&mut f, st);
        if reached && self.cores[b].hold_replica(r.round, r.origin, states) {
            let mut h = Vec::new();
            let st = protocol::begin(&mut h, Kind::Held);
            msg::put_u64(&mut h, r.round);
            msg::put_u32(&mut h, r.origin);
            msg::put_u32(&mut h, n);
            protocol::finish(&mut h, st);
            let (k, payload, _) = protocol::decode(&h, u32::MAX).unwrap().unwrap();
            self.sched.on_frame(b, k, payload).unwrap();
        }
        let (k, payload, _) = protocol::decode(&f, u32::MAX).unwrap().unwrap();
        self.sched.on_frame(w, k, payload).unwrap();
    }

    /// Delivers frames, `pick` choosing whose, until nothing waits.
    fn pump(&mut self, pick: Pick<'_>) {
        self.collect();
        loop {
            let ready: Vec<usize> = (0..self.queues.len())
                .filter(|&w| !self.queues[w].is_empty())
                .collect();
            if ready.is_empty() {
                break;
            }
            let w = ready[pick(ready.len()) % ready.len()];
            self.deliver(w);
        }
    }

    fn reset(&mut self, n: u64) -> Vec<StateId> {
        let states: Vec<Vec<u8>> = (0..n).map(|i| encode(&state(i)).unwrap()).collect();
        let ids = self.sched.begin_reset(states).unwrap();
        self.pump(&mut |_| 0);
        self.sched.finish().unwrap();
        ids
    }

    /// What a driver does when `w` is lost or dropped: its connection is
    /// gone (its frames never arrive) and the scheduler is told why.
    fn lose(&mut self, w: usize, reason: &str) {
        self.alive[w] = false;
        self.queues[w].clear();
        self.sched.on_disconnect(w, reason);
        self.collect();
    }

    /// Delivers until nothing waits, then runs replication rounds (as
    /// `Master::settle` does) until none starts.
    fn settle(&mut self) {
        loop {
            while let Some(w) = (0..self.queues.len()).find(|&w| !self.queues[w].is_empty()) {
                self.deliver(w);
            }
            if !self.sched.begin_replicate() {
                break;
            }
            self.collect();
        }
    }

    /// Starts a step: every state with input `children` and a cost.
    fn begin(&mut self, inputs: &[(StateId, u32, f64)]) {
        for l in &mut self.log {
            l.clear();
        }
        let inputs = inputs
            .iter()
            .map(|&(id, i, c)| (id, encode(&i).unwrap(), c))
            .collect();
        self.sched.begin_evolve(inputs).unwrap();
        self.collect();
    }

    /// The ids each worker was asked to evolve in this step, in order.
    fn evolved_by(&self, w: usize) -> Vec<StateId> {
        self.log[w]
            .iter()
            .filter(|(k, _)| *k == Kind::Evolve)
            .flat_map(|(_, ids)| ids.iter().copied())
            .collect()
    }

    /// The fetch in progress, ended: every state fetched, decoded.
    fn fetched(&mut self) -> HashMap<StateId, <Branchy as Evolve>::State> {
        self.sched
            .finish_fetch()
            .unwrap()
            .into_iter()
            .map(|(id, b)| (id, decode(&b).unwrap()))
            .collect()
    }

    /// Which worker holds each state now, by asking the scheduler's books.
    fn held(&self) -> HashMap<StateId, usize> {
        self.sched.location.clone()
    }
}

fn model() -> Branchy {
    Branchy { max: 3 }
}

fn state(i: u64) -> (u64, Vec<u8>) {
    (i, vec![i as u8; (i % 5) as usize])
}

fn cfg(placement: Placement, rebalance: bool, steal: bool) -> SchedConfig {
    SchedConfig {
        batch: Batch::Fixed(1),
        pipeline: 1,
        steal,
        placement,
        rebalance,
        cost_hints: true,
        steal_via: StealVia::Master,
        ..SchedConfig::default()
    }
}

/// Children per parent, decoded, as the single-process engine gives them.
type Decoded = crate::IdMap<Vec<(StateId, <Branchy as Evolve>::Output)>>;

fn decoded(raw: super::RawResults) -> Decoded {
    raw.into_iter()
        .map(|(p, kids)| {
            let kids = kids
                .into_iter()
                .map(|(c, o)| (c, decode(&o).unwrap()))
                .collect();
            (p, kids)
        })
        .collect()
}

mod chaos;
mod endloss;
mod limits;
mod moves;
mod silence;
mod soonest;
mod straggle;

#[test]
fn spread_places_contiguous_equal_chunks_and_first_places_all_on_worker_0() {
    // (workers, states) → states per worker, in worker order.
    let table: &[(usize, u64, &[usize])] = &[
        (1, 5, &[5]),
        (2, 5, &[2, 3]),
        (3, 9, &[3, 3, 3]),
        (4, 6, &[1, 2, 1, 2]),
        (4, 2, &[0, 1, 0, 1]),
    ];
    for &(n, states, want) in table {
        let mut c = Cluster::new(n, cfg(Placement::Spread, false, false));
        let ids = c.reset(states);
        let held = c.held();
        let per: Vec<usize> = (0..n)
            .map(|w| ids.iter().filter(|id| held[id] == w).count())
            .collect();
        assert_eq!(per, want, "{n} workers, {states} states");
        // Contiguous: worker indices never decrease along the ids.
        assert!(ids.windows(2).all(|p| held[&p[0]] <= held[&p[1]]));
        let mut c = Cluster::new(n, cfg(Placement::First, false, false));
        let ids = c.reset(states);
        assert!(ids.iter().all(|id| c.held()[id] == 0));
    }
}

#[test]
fn each_worker_starts_its_longest_calls_first() {
    let mut c = Cluster::new(2, cfg(Placement::Spread, false, false));
    let ids = c.reset(8);
    let costs = [3.0, 1.0, 4.0, 1.5, 9.0, 2.0, 6.0, 5.0];
    let inputs: Vec<_> = ids.iter().zip(costs).map(|(&id, c)| (id, 1, c)).collect();
    let cost: HashMap<StateId, f64> = inputs.iter().map(|x| (x.0, x.2)).collect();
    c.begin(&inputs);
    c.pump(&mut |_| 0);
    c.sched.finish_evolve().unwrap();
    for w in 0..2 {
        let order: Vec<f64> = c.evolved_by(w).iter().map(|id| cost[id]).collect();
        assert_eq!(order.len(), 4);
        assert!(order.windows(2).all(|p| p[0] >= p[1]), "{order:?}");
    }
}

#[test]
fn rebalance_deals_the_excess_longest_first_to_the_least_loaded() {
    // Everything on worker 0 of 3: loads 8, 7, 6, 5, 4, 3, 2, 1 (total 36,
    // even share 12). Worker 0 keeps 8 (then 7 does not fit under 12);
    // the pool 7, 6, 5, 4, 3, 2, 1 goes longest first to the least loaded:
    // 7→w1, 6→w2, 5→w2 (11), 4→w1 (11), 3→w0 (11), 2→w1 (13)… and
    // every state moves at most once, before any evolve goes out.
    let mut c = Cluster::new(3, cfg(Placement::First, true, false));
    let ids = c.reset(8);
    let inputs: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(k, &id)| (id, 1, (8 - k) as f64))
        .collect();
    c.begin(&inputs);
    // Only moves until they land: no evolve request yet.
    let sent: Vec<Kind> = c.log.iter().flatten().map(|x| x.0).collect();
    assert!(sent.iter().all(|&k| k == Kind::Remove), "{sent:?}");
    c.pump(&mut |_| 0);
    c.sched.finish_evolve().unwrap();
    let cost: HashMap<StateId, f64> = inputs.iter().map(|x| (x.0, x.2)).collect();
    let load = |w: usize| c.evolved_by(w).iter().map(|id| cost[id]).sum::<f64>();
    let loads = [load(0), load(1), load(2)];
    assert_eq!(loads.iter().sum::<f64>(), 36.0);
    // The longest call stays where it was; no worker ends far above 12.
    assert_eq!(cost[&c.evolved_by(0)[0]], 8.0);
    assert!(loads.iter().all(|&l| l <= 12.0 + 2.0), "{loads:?}");
}

#[test]
fn an_idle_worker_steals_the_most_loaded_workers_longest_states_up_to_half() {
    // All six states on worker 0, no rebalance: worker 1 starts idle and
    // steals at once from worker 0, whose pending cost (after its first
    // batch, the longest, went out) is 5+4+3+2+1 = 15: the longest pending
    // ones up to half of that (5, 4: 9 ≥ 7.5).
    let mut c = Cluster::new(2, cfg(Placement::First, false, true));
    let ids = c.reset(6);
    let inputs: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(k, &id)| (id, 1, (6 - k) as f64))
        .collect();
    let cost: HashMap<StateId, f64> = inputs.iter().map(|x| (x.0, x.2)).collect();
    c.begin(&inputs);
    let to0: Vec<(Kind, Vec<f64>)> = c.log[0]
        .iter()
        .map(|(k, ids)| {
            let mut c: Vec<f64> = ids.iter().map(|i| cost[i]).collect();
            c.sort_by(f64::total_cmp);
            (*k, c)
        })
        .collect();
    assert_eq!(
        to0,
        vec![(Kind::Evolve, vec![6.0]), (Kind::Remove, vec![4.0, 5.0])]
    );
    assert!(
        c.log[1].is_empty(),
        "the thief hears nothing before Removed"
    );
    c.pump(&mut |_| 0);
    let out = c.sched.finish_evolve().unwrap();
    assert_eq!(out.len(), 6);
    // The thief starts with the longest it took (worker 0, idle again
    // before it, may steal the other back).
    let stolen: Vec<f64> = c.evolved_by(1).iter().map(|i| cost[i]).collect();
    assert_eq!(stolen[0], 5.0);
    let st = c.sched.worker_stats();
    assert!(st[1].steals_in >= 1 && st[1].stolen_states >= 2);
    assert_eq!(st[0].steals_out, st[1].steals_in);
}

#[test]
fn without_stealing_an_idle_worker_stays_idle() {
    let mut c = Cluster::new(2, cfg(Placement::First, false, false));
    let ids = c.reset(4);
    let inputs: Vec<_> = ids.iter().map(|&id| (id, 1, 1.0)).collect();
    c.begin(&inputs);
    c.pump(&mut |_| 0);
    c.sched.finish_evolve().unwrap();
    assert!(c.evolved_by(1).is_empty());
    assert_eq!(c.evolved_by(0).len(), 4);
}

#[test]
fn without_recovery_a_lost_worker_leaves_every_state_in_exactly_one_place() {
    let cfg = SchedConfig {
        recovery: Recovery::Off,
        ..cfg(Placement::Spread, false, false)
    };
    let mut c = Cluster::new(3, cfg);
    let ids = c.reset(9);
    let before = c.held();
    let inputs: Vec<_> = ids.iter().map(|&id| (id, 1, 1.0)).collect();
    c.begin(&inputs);
    // Worker 0 answers everything, worker 1 one request, then worker 2 dies
    // with its requests unanswered.
    while !c.queues[0].is_empty() {
        c.deliver(0);
    }
    c.deliver(1);
    c.alive[2] = false;
    c.queues[2].clear();
    c.sched.on_disconnect(2, "test: gone");
    // Worker 1's remaining answers still arrive, then the driver gives up.
    while !c.queues[1].is_empty() {
        c.deliver(1);
    }
    c.sched.abandon();
    let Err(Error::WorkerLost(l)) = c.sched.finish_evolve() else {
        panic!("a lost worker fails the step")
    };
    assert_eq!((l.worker, l.reason.as_str()), (2, "test: gone"));
    let mut on2: Vec<StateId> = ids.iter().copied().filter(|id| before[id] == 2).collect();
    on2.sort_unstable();
    assert_eq!(l.lost, on2);
    assert!(l.unfinished.is_empty());
    // Worker 0 finished its three; worker 1 the two it had been sent (its
    // third was never asked for once the step failed). A completed parent
    // is replaced by its children on the same worker; every other state of
    // the survivors is still held under its id, unevolved.
    let on1: Vec<StateId> = ids.iter().copied().filter(|id| before[id] == 1).collect();
    assert_eq!(l.completed.len(), 3 + c.evolved_by(1).len());
    assert_eq!(c.evolved_by(1).len(), 2);
    let held = c.held();
    for p in ids.iter().filter(|id| before[id] != 2) {
        match l.completed.get(p) {
            Some(kids) => {
                assert!(!held.contains_key(p));
                assert!(kids.iter().all(|k| held[k] == before[p]));
            }
            None => assert_eq!((held[p], on1.contains(p)), (1, true)),
        }
    }
    assert!(held.values().all(|&w| w != 2));
    // The next operation runs on the survivors.
    let kids: Vec<StateId> = held.keys().copied().collect();
    let next: Vec<_> = kids.iter().map(|&id| (id, 1, 1.0)).collect();
    c.begin(&next);
    c.pump(&mut |_| 0);
    assert_eq!(c.sched.finish_evolve().unwrap().len(), kids.len());
}

#[test]
fn unknown_states_are_refused_before_anything_is_sent() {
    let mut c = Cluster::new(2, cfg(Placement::Spread, true, true));
    let ids = c.reset(2);
    let bogus = StateId(42);
    let err = c
        .sched
        .begin_evolve(vec![
            (ids[0], encode(&1u32).unwrap(), 1.0),
            (bogus, vec![0], 1.0),
        ])
        .unwrap_err();
    assert!(matches!(err, Error::UnknownStates(v) if v == vec![bogus]));
    assert!(c.sched.out.is_empty());
}

/// The longest of `loads` for the best assignment of `costs` to `m` workers.
fn brute_force_makespan(costs: &[f64], m: usize) -> f64 {
    let mut best = f64::INFINITY;
    let mut assign = vec![0usize; costs.len()];
    loop {
        let mut load = vec![0.0; m];
        for (c, &w) in costs.iter().zip(&assign) {
            load[w] += c;
        }
        best = best.min(load.iter().copied().fold(0.0, f64::max));
        // Next assignment, as a base-m counter.
        let mut i = 0;
        loop {
            if i == assign.len() {
                return best;
            }
            assign[i] += 1;
            if assign[i] < m {
                break;
            }
            assign[i] = 0;
            i += 1;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the placement, batching, stealing and delivery order, a
    /// run of steps gives the single-process engine's children and outputs,
    /// bit for bit, and every state ends on exactly one worker.
    #[test]
    fn steps_equal_the_sequential_engine_in_any_delivery_order(
        n in 1usize..5,
        states in 1u64..24,
        first in any::<bool>(),
        rebalance in any::<bool>(),
        steal in any::<bool>(),
        batch in 1usize..4,
        pipeline in 1usize..3,
        costs in prop::collection::vec(0.0f64..10.0, 64),
        picks in prop::collection::vec(any::<usize>(), 256),
    ) {
        let cfg = SchedConfig {
            batch: Batch::Fixed(batch),
            pipeline,
            ..cfg(if first { Placement::First } else { Placement::Spread }, rebalance, steal)
        };
        let mut c = Cluster::new(n, cfg);
        let mut local = Local::new(model(), SEED);
        let mut ids = c.reset(states);
        prop_assert_eq!(&local.reset_states((0..states).map(state).collect()).unwrap(), &ids);
        let mut k = 0usize;
        for _step in 0..3 {
            if ids.is_empty() {
                break;
            }
            let inputs: Vec<_> = ids
                .iter()
                .enumerate()
                .map(|(j, &id)| (id, 0u32, costs[(j * 7 + k) % costs.len()]))
                .collect();
            c.begin(&inputs);
            c.pump(&mut |m| {
                k += 1;
                picks[k % picks.len()] % m
            });
            let got = decoded(c.sched.finish_evolve().unwrap());
            let want = local
                .evolve_many(inputs.iter().map(|x| (x.0, x.1)).collect())
                .unwrap();
            prop_assert_eq!(&got, &want);
            let mut next: Vec<StateId> = got.values().flatten().map(|x| x.0).collect();
            next.sort_unstable();
            let mut held: Vec<StateId> = c.held().into_keys().collect();
            held.sort_unstable();
            prop_assert_eq!(&held, &next);
            ids = next;
        }
    }

    /// The start-of-step rebalance, from any starting placement, ends no
    /// worse than the best assignment plus one call (list scheduling's
    /// bound), and leaves a step no longer than it started.
    #[test]
    fn rebalance_is_within_one_call_of_the_brute_force_optimum(
        m in 2usize..4,
        costs in prop::collection::vec(1u32..20, 1..8),
        first in any::<bool>(),
    ) {
        let costs: Vec<f64> = costs.into_iter().map(f64::from).collect();
        let placement = if first { Placement::First } else { Placement::Spread };
        let mut c = Cluster::new(m, cfg(placement, true, false));
        let ids = c.reset(costs.len() as u64);
        let start = c.held();
        let inputs: Vec<_> = ids.iter().zip(&costs).map(|(&id, &x)| (id, 1, x)).collect();
        let cost: HashMap<StateId, f64> = inputs.iter().map(|x| (x.0, x.2)).collect();
        c.begin(&inputs);
        c.pump(&mut |_| 0);
        c.sched.finish_evolve().unwrap();
        let load = |w: usize| c.evolved_by(w).iter().map(|id| cost[id]).sum::<f64>();
        let loads: Vec<f64> = (0..m).map(load).collect();
        let makespan = loads.iter().copied().fold(0.0, f64::max);
        let before: f64 = (0..m)
            .map(|w| ids.iter().filter(|id| start[id] == w).map(|id| cost[id]).sum())
            .fold(0.0, f64::max);
        let longest = costs.iter().copied().fold(0.0, f64::max);
        let opt = brute_force_makespan(&costs, m);
        prop_assert!(makespan <= opt + longest + 1e-9, "{loads:?} vs optimum {opt}");
        prop_assert!(makespan <= before + 1e-9, "{loads:?} from {before}");
    }

    /// With recovery, losing any one or two workers at any moment of a
    /// step (or between steps) changes nothing: the steps give the
    /// single-process engine's bits, and the lost workers' states live on.
    #[test]
    fn lost_workers_are_recovered_with_the_same_bits(
        n in 2usize..5,
        states in 1u64..24,
        first in any::<bool>(),
        rebalance in any::<bool>(),
        steal in any::<bool>(),
        batch in 1usize..4,
        kills in prop::collection::vec((0usize..4, 0usize..40, 0usize..3), 1..3),
        picks in prop::collection::vec(any::<usize>(), 256),
    ) {
        let cfg = SchedConfig {
            batch: Batch::Fixed(batch),
            pipeline: 2,
            recovery: Recovery::MasterCopy,
            ..cfg(if first { Placement::First } else { Placement::Spread }, rebalance, steal)
        };
        let mut c = Cluster::new(n, cfg);
        let mut local = Local::new(model(), SEED);
        let mut ids = c.reset(states);
        local.reset_states((0..states).map(state).collect()).unwrap();
        // Kill (worker, after that many deliveries, in that step); at least
        // one worker always survives.
        let mut kills: Vec<(usize, usize, usize)> =
            kills.into_iter().map(|(w, at, step)| (w % n, at, step)).collect();
        kills.truncate(n - 1);
        let mut k = 0usize;
        for step in 0..3 {
            if ids.is_empty() {
                break;
            }
            let inputs: Vec<_> = ids.iter().map(|&id| (id, 0u32, 1.0)).collect();
            c.begin(&inputs);
            let mut delivered = 0usize;
            loop {
                for &(w, at, s) in &kills {
                    if s == step && at <= delivered && c.alive[w] {
                        c.alive[w] = false;
                        c.queues[w].clear();
                        c.sched.on_disconnect(w, "test: killed");
                        c.collect();
                    }
                }
                let ready: Vec<usize> = (0..n).filter(|&w| !c.queues[w].is_empty()).collect();
                if ready.is_empty() {
                    break;
                }
                k += 1;
                let w = ready[picks[k % picks.len()] % ready.len()];
                c.deliver(w);
                delivered += 1;
            }
            let got = decoded(c.sched.finish_evolve().unwrap());
            let want = local
                .evolve_many(inputs.iter().map(|x| (x.0, x.1)).collect())
                .unwrap();
            prop_assert_eq!(&got, &want);
            let mut next: Vec<StateId> = got.values().flatten().map(|x| x.0).collect();
            next.sort_unstable();
            let held = c.held();
            let mut on: Vec<StateId> = held.keys().copied().collect();
            on.sort_unstable();
            prop_assert_eq!(&on, &next);
            prop_assert!(held.values().all(|&w| c.alive[w]), "a state on a dead worker");
            ids = next;
        }
        // Every state's bytes are where the books say, and right.
        let want = local.fetch_states(&ids).unwrap();
        c.sched.begin_fetch(&ids).unwrap();
        c.pump(&mut |_| 0);
        prop_assert_eq!(c.fetched(), want);
    }
}
