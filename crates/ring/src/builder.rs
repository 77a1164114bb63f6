//! The typestate builder that declares a ring's consumer graph.
//!
//! Consumers are added in *stages*: [`handler`](RingBuilder::handler) adds a
//! consumer to the current stage, [`then`](RingBuilder::then) starts a new
//! stage whose consumers each depend on every consumer of the previous one.
//! A consumer can only depend on consumers that already exist, so cycles and
//! dangling dependencies cannot be written. Chains (`P → A → B`), multicast
//! (`P → A, B`) and diamonds (`P → A, B → C`) are all stages.
//!
//! The state parameter tracks what the current stage holds, so the compiler
//! rejects the unsound or meaningless graphs:
//!
//! ```compile_fail
//! # use statepipe_ring::RingBuilder;
//! // A mutable handler must be alone in its stage: another consumer could
//! // read the event while it is mutated.
//! let _ = RingBuilder::new(8, || 0u64)
//!     .handler("reader", |_: &u64, _: u64, _: bool| {})
//!     .handler_mut("writer", |e: &mut u64, _: u64, _: bool| *e += 1);
//! ```
//!
//! ```compile_fail
//! # use statepipe_ring::RingBuilder;
//! // ... and nothing may join its stage afterwards.
//! let _ = RingBuilder::new(8, || 0u64)
//!     .handler_mut("writer", |e: &mut u64, _: u64, _: bool| *e += 1)
//!     .handler("reader", |_: &u64, _: u64, _: bool| {});
//! ```
//!
//! ```compile_fail
//! # use statepipe_ring::RingBuilder;
//! // A ring without consumers would overwrite events nobody read.
//! let _ = RingBuilder::new(8, || 0u64).build_single();
//! ```
//!
//! ```compile_fail
//! # use statepipe_ring::RingBuilder;
//! // An empty stage depends on nothing meaningful.
//! let _ = RingBuilder::new(8, || 0u64).then();
//! ```
//!
//! ```compile_fail
//! # use statepipe_ring::{RingBuilder, wait::BusySpin};
//! // The wait strategy is chosen before the first consumer.
//! let _ = RingBuilder::new(8, || 0u64)
//!     .handler("a", |_: &u64, _: u64, _: bool| {})
//!     .wait_strategy(BusySpin);
//! ```

use std::marker::PhantomData;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::consumer::{
    spawn, Access, EventHandler, EventHandlerMut, EventPoller, Exclusive, SharedAccess,
};
use crate::handle::Ring;
use crate::producer::{Multi, Producer, ProducerKind, Single, Stamped};
use crate::shared::{ConsumerCell, Shared, Slot};
use crate::sync::{thread, Arc, AtomicU64, AtomicU8, AtomicUsize, Mutex, UnsafeCell};
use crate::wait::{Adaptive, WaitStrategy};

/// Builder states (see the module docs).
pub mod state {
    /// No consumer yet; the wait strategy can still change.
    #[derive(Debug)]
    pub enum Empty {}
    /// A new, empty stage after [`then`](super::RingBuilder::then).
    #[derive(Debug)]
    pub enum NewStage {}
    /// The current stage holds consumers that read by `&T`.
    #[derive(Debug)]
    pub enum SharedStage {}
    /// The current stage holds one consumer (or worker group) that mutates.
    #[derive(Debug)]
    pub enum ExclusiveStage {}

    /// States in which a shared consumer may join the current stage.
    pub trait AcceptsShared: sealed::Sealed {}
    /// States in which the current stage is still empty.
    pub trait AcceptsExclusive: sealed::Sealed {}
    /// States in which the graph can be built or extended by a new stage.
    pub trait Complete: sealed::Sealed {}

    impl AcceptsShared for Empty {}
    impl AcceptsShared for NewStage {}
    impl AcceptsShared for SharedStage {}
    impl AcceptsExclusive for Empty {}
    impl AcceptsExclusive for NewStage {}
    impl Complete for SharedStage {}
    impl Complete for ExclusiveStage {}

    mod sealed {
        /// Implemented only by this module's states.
        pub trait Sealed {}
    }
    impl sealed::Sealed for Empty {}
    impl sealed::Sealed for NewStage {}
    impl sealed::Sealed for SharedStage {}
    impl sealed::Sealed for ExclusiveStage {}
}

use state::{
    AcceptsExclusive, AcceptsShared, Complete, Empty, ExclusiveStage, NewStage, SharedStage,
};

/// What [`RingBuilder::linger`] is unless set.
pub const DEFAULT_LINGER: Duration = Duration::from_micros(4);

/// Starts a consumer thread once the producer kind (and so the ring's type)
/// is known; each method is monomorphised for the handler, so the hot loop
/// calls the handler directly.
trait Start<T, W>: Send {
    fn single(self: Box<Self>, ring: Arc<Shared<T, W, Single>>, idx: usize) -> SpawnResult;
    fn stamped(self: Box<Self>, ring: Arc<Shared<T, W, Stamped>>, idx: usize) -> SpawnResult;
    fn multi(self: Box<Self>, ring: Arc<Shared<T, W, Multi>>, idx: usize) -> SpawnResult;
}

type SpawnResult = std::io::Result<thread::JoinHandle<()>>;
type Starter<T, W> = Box<dyn Start<T, W>>;

struct StartWith<A>(A);

impl<T, W, A> Start<T, W> for StartWith<A>
where
    T: Send + Sync + 'static,
    W: WaitStrategy,
    A: Access<T>,
{
    fn single(self: Box<Self>, ring: Arc<Shared<T, W, Single>>, idx: usize) -> SpawnResult {
        spawn(ring, idx, self.0)
    }
    fn stamped(self: Box<Self>, ring: Arc<Shared<T, W, Stamped>>, idx: usize) -> SpawnResult {
        spawn(ring, idx, self.0)
    }
    fn multi(self: Box<Self>, ring: Arc<Shared<T, W, Multi>>, idx: usize) -> SpawnResult {
        spawn(ring, idx, self.0)
    }
}

struct Spec<T, W> {
    name: String,
    deps: Vec<usize>,
    partition: Option<(u64, u64)>,
    /// `None` for a poller.
    start: Option<Starter<T, W>>,
    /// A poller declared with `poller_mut`.
    exclusive: bool,
}

/// Declares a ring: capacity, slot factory, wait strategy, consumer graph.
///
/// # Examples
/// ```
/// use std::sync::{Arc, atomic::{AtomicU64, Ordering}};
/// use statepipe_ring::RingBuilder;
///
/// let total = Arc::new(AtomicU64::new(0));
/// let seen = Arc::clone(&total);
/// let (mut producer, ring) = RingBuilder::new(1024, || 0u64)
///     .handler("double", |e: &u64, _seq: u64, _eob: bool| assert!(*e < 100))
///     .then()
///     .handler("sum", move |e: &u64, _seq: u64, _eob: bool| {
///         seen.fetch_add(*e, Ordering::Relaxed);
///     })
///     .build_single();
/// for i in 0..100 {
///     producer.publish(i).unwrap();
/// }
/// drop(producer); // closes the ring: consumers drain, then stop
/// ring.join().unwrap();
/// assert_eq!(total.load(Ordering::Relaxed), 4950);
/// ```
pub struct RingBuilder<T, W = Adaptive, S = Empty> {
    capacity: usize,
    factory: Box<dyn FnMut() -> T>,
    wait: W,
    max_batch: u64,
    linger: Duration,
    specs: Vec<Spec<T, W>>,
    previous_stage: Vec<usize>,
    stage: Vec<usize>,
    _state: PhantomData<S>,
}

impl<T: Send + Sync + 'static> RingBuilder<T, Adaptive, Empty> {
    /// Starts a ring of `capacity` slots, each filled once by `factory`.
    ///
    /// # Panics
    /// If `capacity` is not a power of two, or is 0 or above 2^40.
    pub fn new(capacity: usize, factory: impl FnMut() -> T + 'static) -> Self {
        assert!(
            capacity.is_power_of_two() && capacity <= 1 << 40,
            "ring capacity must be a power of two between 1 and 2^40, got {capacity}"
        );
        Self {
            capacity,
            factory: Box::new(factory),
            wait: Adaptive::default(),
            max_batch: u64::MAX,
            linger: DEFAULT_LINGER,
            specs: Vec::new(),
            previous_stage: Vec::new(),
            stage: Vec::new(),
            _state: PhantomData,
        }
    }
}

impl<T: Send + Sync + 'static, W: WaitStrategy> RingBuilder<T, W, Empty> {
    /// Chooses how consumers wait for events and producers for space.
    pub fn wait_strategy<W2: WaitStrategy>(self, wait: W2) -> RingBuilder<T, W2, Empty> {
        RingBuilder {
            capacity: self.capacity,
            factory: self.factory,
            wait,
            max_batch: self.max_batch,
            linger: self.linger,
            specs: Vec::new(),
            previous_stage: Vec::new(),
            stage: Vec::new(),
            _state: PhantomData,
        }
    }
}

impl<T: Send + Sync + 'static, W: WaitStrategy, S> RingBuilder<T, W, S> {
    /// Caps how many events a consumer handles before it publishes its
    /// progress (default: everything available; in a multi-producer ring,
    /// whose consumers check each slot's stamp before they read it, at most
    /// 64 KiB of slots, and never fewer than 1,024 events, so that both
    /// passes over a batch stay in the nearer caches; for a consumer with
    /// dependencies, at most 1,024 events, so that later stages get going
    /// while it works).
    ///
    /// # Panics
    /// If `max` is 0.
    pub fn max_batch(mut self, max: usize) -> Self {
        assert!(max > 0, "max_batch must be at least 1");
        self.max_batch = max as u64;
        self
    }

    /// How long a handler of a multi-producer ring that keeps catching up
    /// with its producers waits for them to get ahead before it reads on
    /// (default 4 µs; [`Duration::ZERO`] turns lingering off).
    ///
    /// A consumer right behind producers that publish densely reads each
    /// slot's cache line while they still write it, and every producer's
    /// claim then waits for that line to come back: on 2 vCPUs, three
    /// producers of single events went from about 23 to 55-65 M events/s
    /// with lingering. Only handlers with no dependencies linger, and only
    /// while it measures faster: after a window (at least 100 µs) of short
    /// batches above 5 M events/s, a handler tries a window of lingering and
    /// keeps it while the producers publish at least 1.1x faster, checking
    /// again every 16 windows; a trial that does not pay is retried after
    /// 2, 4, ... up to 16 windows. A linger ends early once the producers
    /// are 1,024 events ahead. Streams under 5 M events/s never linger;
    /// while a handler lingers, an event waits at most `linger` more.
    /// [`ConsumerStats::lingering`](crate::ConsumerStats::lingering) shows
    /// it. Turn it off when every event's latency matters more than
    /// throughput. Single-producer rings never linger.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    fn push<S2>(
        mut self,
        name: &str,
        partition: Option<(u64, u64)>,
        start: Option<Starter<T, W>>,
    ) -> RingBuilder<T, W, S2> {
        assert!(
            self.specs.iter().all(|s| s.name != name),
            "two consumers are named '{name}'; names identify consumers in errors and stats"
        );
        self.stage.push(self.specs.len());
        self.specs.push(Spec {
            name: name.to_string(),
            deps: self.previous_stage.clone(),
            partition,
            start,
            exclusive: false,
        });
        self.retype()
    }

    fn retype<S2>(self) -> RingBuilder<T, W, S2> {
        RingBuilder {
            capacity: self.capacity,
            factory: self.factory,
            wait: self.wait,
            max_batch: self.max_batch,
            linger: self.linger,
            specs: self.specs,
            previous_stage: self.previous_stage,
            stage: self.stage,
            _state: PhantomData,
        }
    }
}

fn starter<T, W, A>(access: A) -> Starter<T, W>
where
    T: Send + Sync + 'static,
    W: WaitStrategy,
    A: Access<T>,
{
    Box::new(StartWith(access))
}

impl<T: Send + Sync + 'static, W: WaitStrategy, S: AcceptsShared> RingBuilder<T, W, S> {
    /// Adds a consumer thread that reads every event by `&T` to the current
    /// stage.
    ///
    /// # Panics
    /// If another consumer already has this name.
    pub fn handler<H: EventHandler<T>>(
        self,
        name: &str,
        handler: H,
    ) -> RingBuilder<T, W, SharedStage> {
        self.push(name, None, Some(starter(SharedAccess(handler))))
    }

    /// Adds `n` consumer threads to the current stage that split the events:
    /// member `i` handles sequence `s` when `s % n == i`. They are named
    /// `name/0`, `name/1`, ...
    ///
    /// # Panics
    /// If `n` is 0 or a name is taken.
    pub fn worker_group<H: EventHandler<T>>(
        mut self,
        name: &str,
        n: usize,
        mut make: impl FnMut(usize) -> H,
    ) -> RingBuilder<T, W, SharedStage> {
        assert!(n > 0, "a worker group needs at least one member");
        for i in 0..n {
            let starter = starter(SharedAccess(make(i)));
            self = self.push::<S>(
                &format!("{name}/{i}"),
                Some((i as u64, n as u64)),
                Some(starter),
            );
        }
        self.retype()
    }

    /// Adds a consumer the user drives: take it after `build` with
    /// [`Ring::take_poller`].
    ///
    /// # Panics
    /// If another consumer already has this name.
    pub fn poller(self, name: &str) -> RingBuilder<T, W, SharedStage> {
        self.push(name, None, None)
    }
}

impl<T: Send + Sync + 'static, W: WaitStrategy, S: AcceptsExclusive> RingBuilder<T, W, S> {
    /// Adds a consumer thread that may mutate each event (`&mut T`). It must
    /// be alone in its stage; later stages see its changes.
    ///
    /// # Panics
    /// If another consumer already has this name.
    pub fn handler_mut<H: EventHandlerMut<T>>(
        self,
        name: &str,
        handler: H,
    ) -> RingBuilder<T, W, ExclusiveStage> {
        self.push(name, None, Some(starter(Exclusive(handler))))
    }

    /// Adds a consumer the user drives that may mutate each event (`&mut
    /// T`), for example to move values out: take it after `build` with
    /// [`Ring::take_poller_mut`]. It must be alone in its stage.
    ///
    /// # Panics
    /// If another consumer already has this name.
    pub fn poller_mut(self, name: &str) -> RingBuilder<T, W, ExclusiveStage> {
        let mut next: RingBuilder<T, W, ExclusiveStage> = self.push(name, None, None);
        if let Some(spec) = next.specs.last_mut() {
            spec.exclusive = true;
        }
        next
    }

    /// A worker group whose members mutate the events they own (`s % n == i`).
    /// It must be alone in its stage.
    ///
    /// # Panics
    /// If `n` is 0 or a name is taken.
    pub fn worker_group_mut<H: EventHandlerMut<T>>(
        mut self,
        name: &str,
        n: usize,
        mut make: impl FnMut(usize) -> H,
    ) -> RingBuilder<T, W, ExclusiveStage> {
        assert!(n > 0, "a worker group needs at least one member");
        for i in 0..n {
            let starter = starter(Exclusive(make(i)));
            self = self.push::<S>(
                &format!("{name}/{i}"),
                Some((i as u64, n as u64)),
                Some(starter),
            );
        }
        self.retype()
    }
}

impl<T: Send + Sync + 'static, W: WaitStrategy, S: Complete> RingBuilder<T, W, S> {
    /// Starts a new stage: its consumers handle an event only after every
    /// consumer of the current stage did.
    pub fn then(mut self) -> RingBuilder<T, W, NewStage> {
        self.previous_stage = std::mem::take(&mut self.stage);
        self.retype()
    }

    /// Builds the ring for one producer and starts the consumer threads.
    pub fn build_single(self) -> (Producer<T, W, Single>, Ring<T, W, Single>) {
        self.build::<Single>(|start, ring, idx| start.single(ring, idx))
    }

    /// Builds the ring for one producer whose slots carry their sequence,
    /// and starts the consumer threads. A waiting consumer then polls the
    /// slot it waits for, so a hand-over moves one cache line instead of
    /// two: the lowest one-hop latency, for sparse events where latency
    /// matters more than throughput. Each slot grows by a stamp (8 bytes),
    /// and consumers read events one stamp at a time: with `u64` events on
    /// 2 vCPUs, single events moved at about half the rate of
    /// [`build_single`](Self::build_single) and batches at about a third.
    pub fn build_stamped(self) -> (Producer<T, W, Stamped>, Ring<T, W, Stamped>) {
        self.build::<Stamped>(|start, ring, idx| start.stamped(ring, idx))
    }

    /// Builds the ring for many producers (clone the handle) and starts the
    /// consumer threads.
    pub fn build_multi(self) -> (Producer<T, W, Multi>, Ring<T, W, Multi>) {
        self.build::<Multi>(|start, ring, idx| start.multi(ring, idx))
    }

    fn build<K: ProducerKind>(
        mut self,
        start: impl Fn(Starter<T, W>, Arc<Shared<T, W, K>>, usize) -> SpawnResult,
    ) -> (Producer<T, W, K>, Ring<T, W, K>) {
        let capacity = self.capacity;
        let slots: Box<[Slot<T, K::Stamp>]> = (0..capacity)
            .map(|_| Slot {
                stamp: K::new_stamp(),
                value: UnsafeCell::new((self.factory)()),
            })
            .collect();
        let consumer_count = self.specs.len();
        let mut starters = Vec::with_capacity(consumer_count);
        let mut exclusive = Vec::with_capacity(consumer_count);
        let consumers: Box<[ConsumerCell]> = self
            .specs
            .drain(..)
            .map(|spec| {
                starters.push(spec.start);
                exclusive.push(spec.exclusive);
                ConsumerCell {
                    name: spec.name,
                    seq: CachePadded::new(AtomicU64::new(0)),
                    deps: spec.deps.into_boxed_slice(),
                    partition: spec.partition,
                    lingering: AtomicU8::new(0),
                }
            })
            .collect();
        let shared = Arc::new(Shared {
            slots,
            // 0: no range ends above any sequence yet.
            range_ends: (0..if K::STAMPED { 0 } else { capacity })
                .map(|_| AtomicU64::new(0))
                .collect(),
            mask: capacity as u64 - 1,
            capacity: capacity as u64,
            cursor: CachePadded::new(AtomicU64::new(0)),
            consumers,
            state: CachePadded::new(AtomicU8::new(0)),
            producers: AtomicUsize::new(1),
            attached: AtomicUsize::new(consumer_count),
            max_batch: self.max_batch,
            linger: self.linger,
            wait: self.wait,
            failure: Mutex::new(None),
        });
        let mut threads = Vec::new();
        let mut pollers = Vec::new();
        let mut spawn_error = None;
        for (idx, starter) in starters.into_iter().enumerate() {
            match starter {
                Some(starter) => match start(starter, Arc::clone(&shared), idx) {
                    Ok(handle) => threads.push(handle),
                    Err(e) => {
                        spawn_error.get_or_insert_with(|| e.to_string());
                        shared.halt();
                    }
                },
                None => pollers.push((EventPoller::new(Arc::clone(&shared), idx), exclusive[idx])),
            }
        }
        let producer = Producer::new(Arc::clone(&shared));
        (producer, Ring::new(shared, threads, pollers, spawn_error))
    }
}
