//! Property test: random rings against a sequential model.
//!
//! Each case draws a topology (1–4 producers; 1–4 consumer units arranged in
//! stages: handlers, pollers driven from a thread, worker groups, mutating
//! handlers and mutating worker groups, so chains, multicast and diamonds), a
//! capacity (1..=64), a maximum batch, a wait strategy and, per producer, how
//! many events it publishes before it drops its handle (the close points) and
//! a seed that picks the publish call for every event. Events carry
//! `(producer, counter)`.
//!
//! The sequential model: the producers' returned sequences number the events
//! `0..total`; every consumer unit must see exactly that sequence of events,
//! once each, in order (a worker group: the union of its members, each member
//! only its residue), after each of its dependencies handled the event, with
//! the marks of every earlier mutating stage and of no later one; batches
//! respect `max_batch`; `join` and the monitor report the totals.
//!
//! `PROPTEST_CASES` overrides the number of cases (128 by default; about a
//! second in a debug build).
#![cfg(not(loom))]

#[path = "../common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use statepipe_ring::state::{Empty, ExclusiveStage, NewStage, SharedStage};
use statepipe_ring::wait::{Adaptive, Blocking, BusySpin, SpinYield, WaitStrategy};
use statepipe_ring::{
    EventHandler, EventHandlerMut, JoinReport, Multi, PollError, Producer, ProducerKind,
    PublishTimeoutError, Ring, RingBuilder, Single, SoleProducer, Stamped, TryPublishError,
};

/// The event: who published it, its per-producer counter, and one bit per
/// mutating stage that has seen it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Ev {
    producer: u32,
    counter: u64,
    marks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Handler,
    Poller,
    Group(usize),
    HandlerMut,
    GroupMut(usize),
}

impl Kind {
    fn members(self) -> usize {
        match self {
            Kind::Group(n) | Kind::GroupMut(n) => n,
            _ => 1,
        }
    }

    fn exclusive(self) -> bool {
        matches!(self, Kind::HandlerMut | Kind::GroupMut(_))
    }
}

#[derive(Debug, Clone, Copy)]
enum Wait {
    Adaptive,
    AdaptiveEagerPark,
    BusySpin,
    SpinYield,
    Blocking,
    BlockingWithTimeout,
}

#[derive(Debug, Clone)]
struct Case {
    capacity: usize,
    max_batch: Option<usize>,
    wait: Wait,
    /// Per producer: events to publish before dropping the handle, and the
    /// seed that picks the publish call of each event.
    producers: Vec<(u64, u64)>,
    /// Consumer units in declaration order; `true` asks for a new stage
    /// before the unit (see `Topology::new`).
    units: Vec<(Kind, bool)>,
    /// Call `join` before the producers finish (only without pollers, whose
    /// threads must hand their poller back before `join` reads the counts).
    join_early: bool,
    /// With one producer: build the stamped kind (`build_stamped`), not
    /// `build_single`.
    stamped: bool,
}

struct Unit {
    kind: Kind,
    name: String,
    stage: usize,
    /// Units of the previous stage.
    deps: Vec<usize>,
    /// The bit this unit sets in `Ev::marks` (mutating units only).
    mut_bit: Option<u64>,
    /// The marks every event must carry when this unit sees it.
    expected_marks: u64,
    first_member: usize,
}

struct Member {
    name: String,
    partition: Option<(u64, u64)>,
}

struct Topology {
    units: Vec<Unit>,
    stages: Vec<Vec<usize>>,
    members: Vec<Member>,
}

impl Topology {
    /// Arranges the drawn units into stages the builder accepts: a mutating
    /// unit gets a stage of its own; a reader starts a new stage when asked
    /// or when the current one is exclusive. At most two pollers (each needs
    /// a thread of the test).
    fn new(raw: &[(Kind, bool)]) -> Self {
        let mut stages: Vec<Vec<usize>> = vec![Vec::new()];
        let mut kinds = Vec::new();
        let mut current_exclusive = false;
        let mut pollers = 0;
        for (u, &(kind, new_stage)) in raw.iter().enumerate() {
            let kind = match kind {
                Kind::Poller if pollers == 2 => Kind::Handler,
                Kind::Poller => {
                    pollers += 1;
                    kind
                }
                other => other,
            };
            let current = stages.last().expect("at least one stage");
            if !current.is_empty() && (kind.exclusive() || current_exclusive || new_stage) {
                stages.push(Vec::new());
            }
            stages.last_mut().expect("at least one stage").push(u);
            current_exclusive = kind.exclusive();
            kinds.push(kind);
        }
        let mut units = Vec::new();
        let mut members = Vec::new();
        let mut marks_before_stage = 0u64;
        for (stage, in_stage) in stages.iter().enumerate() {
            let mut marks_of_stage = 0;
            for &u in in_stage {
                let kind = kinds[u];
                let name = match kind {
                    Kind::Handler => format!("h{u}"),
                    Kind::Poller => format!("p{u}"),
                    Kind::Group(_) => format!("g{u}"),
                    Kind::HandlerMut => format!("m{u}"),
                    Kind::GroupMut(_) => format!("gm{u}"),
                };
                let mut_bit = kind.exclusive().then_some(1u64 << stage);
                marks_of_stage |= mut_bit.unwrap_or(0);
                let first_member = members.len();
                match kind {
                    Kind::Group(n) | Kind::GroupMut(n) => {
                        for i in 0..n {
                            members.push(Member {
                                name: format!("{name}/{i}"),
                                partition: Some((i as u64, n as u64)),
                            });
                        }
                    }
                    _ => members.push(Member {
                        name: name.clone(),
                        partition: None,
                    }),
                }
                units.push(Unit {
                    kind,
                    name,
                    stage,
                    deps: if stage == 0 {
                        Vec::new()
                    } else {
                        stages[stage - 1].clone()
                    },
                    mut_bit,
                    expected_marks: marks_before_stage,
                    first_member,
                });
            }
            marks_before_stage |= marks_of_stage;
        }
        Self {
            units,
            stages,
            members,
        }
    }

    fn pollers(&self) -> impl Iterator<Item = &Unit> {
        self.units.iter().filter(|u| u.kind == Kind::Poller)
    }
}

/// `handled[unit * total + s]`: unit `unit` has handled event `s`. Set
/// (Relaxed) inside the handler, before the ring publishes the consumer's
/// progress (Release); a dependent reads it (Relaxed) after the ring let it
/// at `s` (Acquire), so the ring's ordering alone guarantees it sees `true`.
struct Flags {
    total: usize,
    handled: Vec<AtomicBool>,
}

impl Flags {
    fn get(&self, unit: usize, seq: u64) -> bool {
        self.handled[unit * self.total + seq as usize].load(Ordering::Relaxed)
    }

    fn set(&self, unit: usize, seq: u64) {
        self.handled[unit * self.total + seq as usize].store(true, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone)]
struct Rec {
    seq: u64,
    producer: u32,
    counter: u64,
    marks: u64,
    end_of_batch: bool,
    deps_done: bool,
}

type Logs = Arc<Mutex<Vec<Option<Vec<Rec>>>>>;

/// Records what one consumer (a member) saw; hands its log to `sink` when
/// dropped, which happens on the consumer thread before `join` returns.
struct Recorder {
    member: usize,
    unit: usize,
    deps: Vec<usize>,
    mut_bit: u64,
    flags: Arc<Flags>,
    log: Vec<Rec>,
    sink: Logs,
}

impl Recorder {
    fn see(&mut self, event: &Ev, seq: u64, end_of_batch: bool) {
        let in_range = (seq as usize) < self.flags.total;
        let deps_done = in_range && self.deps.iter().all(|&d| self.flags.get(d, seq));
        self.log.push(Rec {
            seq,
            producer: event.producer,
            counter: event.counter,
            marks: event.marks,
            end_of_batch,
            deps_done,
        });
    }

    fn done(&self, seq: u64) {
        if (seq as usize) < self.flags.total {
            self.flags.set(self.unit, seq);
        }
    }
}

impl EventHandler<Ev> for Recorder {
    fn on_event(&mut self, event: &Ev, seq: u64, end_of_batch: bool) {
        self.see(event, seq, end_of_batch);
        self.done(seq);
    }
}

impl EventHandlerMut<Ev> for Recorder {
    fn on_event(&mut self, event: &mut Ev, seq: u64, end_of_batch: bool) {
        self.see(event, seq, end_of_batch);
        event.marks |= self.mut_bit;
        self.done(seq);
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let log = std::mem::take(&mut self.log);
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        sink[self.member] = Some(log);
    }
}

struct Ctx {
    flags: Arc<Flags>,
    sink: Logs,
}

impl Ctx {
    fn recorder(&self, topo: &Topology, unit: usize, i: usize) -> Recorder {
        let u = &topo.units[unit];
        Recorder {
            member: u.first_member + i,
            unit,
            deps: u.deps.clone(),
            mut_bit: u.mut_bit.unwrap_or(0),
            flags: Arc::clone(&self.flags),
            log: Vec::new(),
            sink: Arc::clone(&self.sink),
        }
    }
}

/// A builder in any of its states, so a topology can be built in a loop.
enum B<W: WaitStrategy> {
    Empty(RingBuilder<Ev, W, Empty>),
    New(RingBuilder<Ev, W, NewStage>),
    Shared(RingBuilder<Ev, W, SharedStage>),
    Excl(RingBuilder<Ev, W, ExclusiveStage>),
}

macro_rules! add_shared {
    ($b:expr, $x:ident => $e:expr) => {
        match $b {
            B::Empty($x) => B::Shared($e),
            B::New($x) => B::Shared($e),
            B::Shared($x) => B::Shared($e),
            B::Excl(_) => unreachable!("a reader never joins an exclusive stage"),
        }
    };
}

macro_rules! add_exclusive {
    ($b:expr, $x:ident => $e:expr) => {
        match $b {
            B::Empty($x) => B::Excl($e),
            B::New($x) => B::Excl($e),
            _ => unreachable!("a mutating unit always starts its own stage"),
        }
    };
}

mod check;
mod run;

use check::check_events;
use run::run_case;

fn kind_strategy() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Handler),
        1 => Just(Kind::Poller),
        2 => (1usize..=3).prop_map(Kind::Group),
        2 => Just(Kind::HandlerMut),
        1 => (1usize..=3).prop_map(Kind::GroupMut),
    ]
}

fn wait_strategy() -> impl Strategy<Value = Wait> {
    prop_oneof![
        Just(Wait::Adaptive),
        Just(Wait::AdaptiveEagerPark),
        Just(Wait::BusySpin),
        Just(Wait::SpinYield),
        Just(Wait::Blocking),
        Just(Wait::BlockingWithTimeout),
    ]
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        0u32..=6,
        proptest::option::of(1usize..=80),
        wait_strategy(),
        proptest::collection::vec((0u64..=250, any::<u64>()), 1..=4),
        proptest::collection::vec((kind_strategy(), any::<bool>()), 1..=4),
        any::<bool>(),
        // Drawn last, so that the seeds saved in `proptest-regressions`
        // still give the cases they were saved for.
        any::<bool>(),
    )
        .prop_map(
            |(cap_log, max_batch, wait, producers, units, join_early, stamped)| Case {
                capacity: 1 << cap_log,
                max_batch,
                wait,
                producers,
                units,
                join_early,
                stamped,
            },
        )
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    ProptestConfig {
        cases,
        // A hung case costs the watchdog's minute per shrink step: bound it.
        max_shrink_time: 120_000,
        ..ProptestConfig::default()
    }
}

fn run_watched(case: Case) {
    let name = format!("model case {case:?}");
    common::watchdog_named(&name, common::WATCHDOG, move || run_case(case));
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn ring_matches_the_sequential_model(case in case_strategy()) {
        run_watched(case);
    }
}

/// Shapes that must be covered whatever the random draw: a chain of four,
/// a diamond around a mutating stage, a mutating worker group feeding
/// readers, pollers in the middle of the graph, all on tiny rings.
#[test]
fn fixed_topologies() {
    use Kind::*;
    let shapes: Vec<Vec<(Kind, bool)>> = vec![
        vec![
            (Handler, false),
            (Handler, true),
            (Handler, true),
            (Handler, true),
        ],
        vec![
            (Handler, false),
            (HandlerMut, false),
            (Handler, false),
            (Group(2), false),
        ],
        vec![
            (GroupMut(3), false),
            (Handler, false),
            (Poller, false),
            (Handler, true),
        ],
        vec![
            (Poller, false),
            (Group(3), false),
            (Poller, true),
            (HandlerMut, false),
        ],
        vec![
            (HandlerMut, false),
            (HandlerMut, false),
            (GroupMut(2), false),
            (Handler, false),
        ],
    ];
    let waits = [
        Wait::Adaptive,
        Wait::AdaptiveEagerPark,
        Wait::SpinYield,
        Wait::Blocking,
        Wait::BlockingWithTimeout,
    ];
    for (i, units) in shapes.into_iter().enumerate() {
        for (j, &capacity) in [1usize, 2, 16].iter().enumerate() {
            run_watched(Case {
                capacity,
                max_batch: [None, Some(1), Some(3)][j],
                wait: waits[(i + j) % waits.len()],
                producers: vec![(120, i as u64), (0, 1), (77, 2 + j as u64)][..1 + (i + j) % 3]
                    .to_vec(),
                units: units.clone(),
                join_early: j == 0,
                stamped: i % 2 == 1,
            });
        }
    }
}
