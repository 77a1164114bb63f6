//! `Config`, `Server`: recover, bind, start the ring and the I/O threads,
//! and stop them in order.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::Duration;

use mio::{Poll, Waker};
use statepipe_ring::wait::{Adaptive, Blocking, WaitStrategy};
use statepipe_ring::RingBuilder;
use statepipe_sys::lock::{FolderLock, LockError};

use crate::admission::{Admission, InFlight};
use crate::business::{Apply, Decode, Event, Journal, ReplyHandler, Shared};
use crate::error::ServeError;
use crate::io::{Handoff, IoThread, Limits, WAKER};
use crate::journal::{Start, Writer};
use crate::metrics::Metrics;
use crate::store::{recover, Recovered};
use crate::view::Publisher;

/// How to serve.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen (port 0: any free port; see [`Server::local_addr`]).
    pub listen: SocketAddr,
    /// The data directory: journal segments and the snapshot.
    pub data: PathBuf,
    /// Open connections at most; newcomers get 503.
    pub max_connections: usize,
    /// I/O threads; `None`: one per usable CPU.
    pub io_threads: Option<usize>,
    /// Slots on the ring (a power of two): writes in flight at most.
    pub ring_capacity: usize,
    /// Once the age of the oldest unanswered write has stayed over this for
    /// as long as this, writes are refused with 429 at once (until it is
    /// within again).
    pub max_queue_delay: Duration,
    /// Writes between snapshots at least (after each, the journal
    /// restarts); a snapshot also waits for as many writes as the last one
    /// had items, so snapshots never write more than the journal.
    pub snapshot_every: u64,
    /// The size of a journal segment, zero-filled ahead so that a commit's
    /// `fdatasync` flushes data alone (no file size to commit); 0: append
    /// to segments that grow instead.
    pub journal_segment_bytes: u64,
    /// A request's headers must arrive within this, and its body must not
    /// stall for longer (a body whose bytes keep coming may take longer),
    /// or the connection closes.
    pub header_timeout: Duration,
    /// A keep-alive connection idle this long (no bytes in, nothing owed)
    /// is closed.
    pub idle_timeout: Duration,
    /// Whether to pin threads to the usable CPUs.
    pub pin: bool,
    /// The nice value of the ring's handlers (above 0 they are also
    /// `SCHED_BATCH`; the snapshot thread runs at 19 and `SCHED_BATCH`);
    /// `None`: [`SHARED_CPU_NICE`] when the process has one usable CPU, so
    /// the I/O threads run first on it (a request is answered, or refused
    /// with 429, as soon as it arrives, and the pipeline takes the CPU the
    /// I/O leaves), else 0.
    pub pipeline_nice: Option<i32>,
    /// How the ring's handlers wait for work.
    pub handler_wait: HandlerWait,
}

/// How the ring's handlers (and a producer finding it full) wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HandlerWait {
    /// They sleep on a condvar at once (`wait::Blocking`): no CPU while
    /// idle, a wake-up on each hand-off to a sleeping handler.
    #[default]
    Blocking,
    /// They spin briefly, yield, then sleep (`wait::Adaptive`, its spin
    /// learned from what spinning was worth): hand-offs without a wake-up
    /// while the handlers keep busy, some CPU while they wait.
    Adaptive,
}

/// The default size of a zero-filled journal segment: 16 MiB (as
/// PostgreSQL's WAL segments), some 350,000 item creations.
pub const DEFAULT_JOURNAL_SEGMENT: u64 = 16 << 20;

/// The ring handlers' nice value when they share the only usable CPU with
/// the I/O threads.
pub const SHARED_CPU_NICE: i32 = 10;

/// The default bound on a write's expected queueing delay: a few times an
/// fsync on an ordinary SSD, so accepted writes stay within a few times
/// their unloaded latency.
pub const DEFAULT_MAX_QUEUE_DELAY: Duration = Duration::from_millis(20);

impl Config {
    /// Defaults: 10,000 connections, 4,096 ring slots, writes refused when
    /// expected to wait over [`DEFAULT_MAX_QUEUE_DELAY`], a snapshot every
    /// 100,000 writes, zero-filled journal segments of
    /// [`DEFAULT_JOURNAL_SEGMENT`], a 10 s header timeout, a 120 s idle timeout, pinned
    /// threads, handlers that sleep at once ([`HandlerWait::Blocking`]).
    pub fn new(listen: SocketAddr, data: impl Into<PathBuf>) -> Self {
        Config {
            listen,
            data: data.into(),
            max_connections: 10_000,
            io_threads: None,
            ring_capacity: 4096,
            max_queue_delay: DEFAULT_MAX_QUEUE_DELAY,
            snapshot_every: 100_000,
            journal_segment_bytes: DEFAULT_JOURNAL_SEGMENT,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            pin: true,
            pipeline_nice: None,
            handler_wait: HandlerWait::Blocking,
        }
    }
}

/// Stops a running [`Server`]: it stops accepting, answers what is on the
/// ring, fsyncs and returns.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    stop: Arc<AtomicBool>,
    wakers: Arc<OnceLock<Vec<Arc<Waker>>>>,
}

impl ShutdownHandle {
    /// Asks the server to stop; returns at once.
    pub fn shutdown(&self) {
        // Relaxed: the I/O threads poll the flag; the wake makes it prompt.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(wakers) = self.wakers.get() {
            for w in wakers {
                let _ = w.wake();
            }
        }
    }
}

/// A recovered, bound server, not yet serving.
#[derive(Debug)]
pub struct Server {
    config: Config,
    /// The data directory's lock, held until the server has stopped.
    lock: FolderLock,
    listener: std::net::TcpListener,
    recovered: Recovered,
    handle: ShutdownHandle,
    metrics: Arc<Metrics>,
}

impl Server {
    /// Takes the data directory (creating it if need be), recovers it and
    /// binds.
    ///
    /// # Errors
    ///
    /// [`ServeError::InUse`] if another process serves from the directory,
    /// [`ServeError::Corrupt`] for a damaged journal or snapshot,
    /// [`ServeError::Io`] for I/O and bind errors.
    pub fn bind(config: Config) -> Result<Self, ServeError> {
        std::fs::create_dir_all(&config.data)
            .map_err(|e| ServeError::io("creating the data directory", e))?;
        let lock = FolderLock::take(&config.data).map_err(|e| match e {
            LockError::Held { holder } => ServeError::InUse {
                dir: config.data.clone(),
                holder,
            },
            LockError::Io(e) => ServeError::io("locking the data directory", e),
        })?;
        let recovered = recover(&config.data)?;
        tracing::info!(
            items = recovered.store.items.len(),
            replayed = recovered.replayed,
            "recovered"
        );
        let listener = std::net::TcpListener::bind(config.listen)
            .map_err(|e| ServeError::io("binding the listener", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| ServeError::io("configuring the listener", e))?;
        Ok(Server {
            config,
            lock,
            listener,
            recovered,
            handle: ShutdownHandle {
                stop: Arc::new(AtomicBool::new(false)),
                wakers: Arc::new(OnceLock::new()),
            },
            metrics: Arc::new(Metrics::new()),
        })
    }

    /// The address it listens on.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The number of items recovered.
    pub fn items(&self) -> usize {
        self.recovered.store.items.len()
    }

    /// A handle that stops it.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.handle.clone()
    }

    /// Its metrics, to read while it serves (and after): what `/metrics`
    /// shows, and [`Metrics::summary`] for a live view.
    pub fn metrics(&self) -> Arc<Metrics> {
        Arc::clone(&self.metrics)
    }

    /// Serves until [`ShutdownHandle::shutdown`], then drains and returns.
    ///
    /// # Errors
    ///
    /// I/O errors starting, or [`ServeError::Ring`] if a handler panicked.
    pub fn run(self) -> Result<(), ServeError> {
        match self.config.handler_wait {
            HandlerWait::Blocking => self.run_with(Blocking::new()),
            HandlerWait::Adaptive => self.run_with(Adaptive::default()),
        }
    }

    /// [`Server::run`] with the handlers waiting by `wait`.
    fn run_with<W: WaitStrategy>(self, wait: W) -> Result<(), ServeError> {
        // The lock is held to the end of this function, after every
        // thread that writes the directory has stopped.
        let Server {
            config,
            lock: _lock,
            listener,
            recovered,
            handle,
            metrics,
        } = self;
        let cpus = statepipe_sys::cpus::usable_cpus();
        let usable = &cpus.ids[..cpus.count.min(cpus.ids.len()).max(1)];
        let n_io = config.io_threads.unwrap_or(usable.len()).max(1);
        let nice = config.pipeline_nice.unwrap_or(if usable.len() == 1 {
            SHARED_CPU_NICE
        } else {
            0
        });
        tracing::info!(%cpus, io_threads = n_io, pipeline_nice = nice, "serving");
        // The I/O threads take one usable CPU each, in turn. The handlers
        // (journal, decode, apply, reply) take the first usable CPUs in
        // turn too, each sharing one with an I/O thread: on one CPU they
        // all share it; on four or more each has a CPU of its own, so that
        // the write pipeline is not capped by one CPU's time.
        let handler_cpu = |h: usize| config.pin.then(|| usable[h % usable.len()]);
        let io_cpu = |i: usize| config.pin.then(|| usable[i % usable.len()]);

        let writer = Writer::open(
            &config.data,
            Start {
                segments: recovered.segments,
                valid_len: recovered.valid_len,
                torn: recovered.torn,
                format: recovered.format,
                next_lsn: recovered.next_lsn,
                segment_bytes: config.journal_segment_bytes,
            },
        )
        .map_err(|e| ServeError::io("opening the journal", e))?;
        let shared = Arc::new(Shared::new(
            Admission::new(n_io, config.max_queue_delay),
            nice,
            metrics,
        ));
        let (view, readers) = Publisher::new(&recovered.store.items);
        let mut polls = Vec::new();
        let mut wakers = Vec::new();
        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for _ in 0..n_io {
            let poll = Poll::new().map_err(|e| ServeError::io("creating a poll", e))?;
            let waker = Waker::new(poll.registry(), WAKER)
                .map_err(|e| ServeError::io("creating a waker", e))?;
            wakers.push(Arc::new(waker));
            polls.push(poll);
            let (tx, rx) = crossbeam_channel::bounded(config.max_connections.max(1));
            senders.push(tx);
            receivers.push(rx);
        }
        let _ = handle.wakers.set(wakers.clone());

        let (producer, ring) = RingBuilder::new(config.ring_capacity, Event::default)
            .wait_strategy(wait)
            .handler(
                "journal",
                Journal::new(writer, Arc::clone(&shared), handler_cpu(0)),
            )
            .handler("decode", Decode::new(Arc::clone(&shared), handler_cpu(1)))
            .then()
            .handler_mut(
                "apply",
                Apply::new(
                    recovered.store,
                    view,
                    Arc::clone(&shared),
                    config.data.clone(),
                    config.snapshot_every,
                    handler_cpu(2),
                ),
            )
            .then()
            .handler_mut(
                "reply",
                ReplyHandler::new(senders, wakers.clone(), Arc::clone(&shared), handler_cpu(3)),
            )
            .build_multi();

        let limits = Limits {
            max_connections: config.max_connections,
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
        };
        let (inboxes, inbox_rx): (Vec<_>, Vec<_>) = (0..n_io)
            .map(|_| crossbeam_channel::bounded(config.max_connections.max(1)))
            .unzip();
        let handoff = Arc::new(Handoff {
            counts: (0..n_io).map(|i| shared.metrics.connections(i)).collect(),
            inboxes,
            wakers,
            choosing: std::sync::Mutex::new(()),
        });
        let mut threads = Vec::new();
        for (index, ((poll, replies), inbox)) in
            polls.into_iter().zip(receivers).zip(inbox_rx).enumerate()
        {
            let std_listener = listener
                .try_clone()
                .map_err(|e| ServeError::io("cloning the listener", e))?;
            let mut listener = mio::net::TcpListener::from_std(std_listener);
            poll.registry()
                .register(&mut listener, mio::Token(0), mio::Interest::READABLE)
                .map_err(|e| ServeError::io("registering the listener", e))?;
            let io = IoThread {
                index,
                poll,
                listener,
                producer: producer.clone(),
                replies,
                view: readers.reader(),
                in_flight: InFlight::new(index),
                shared: Arc::clone(&shared),
                handoff: Arc::clone(&handoff),
                inbox,
                stop: Arc::clone(&handle.stop),
                limits: limits.clone(),
                date: crate::http::Date::default(),
                tally: shared.metrics.tally(index),
            };
            let cpu = io_cpu(index);
            let spawned = thread::Builder::new()
                .name(format!("serve-io-{index}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        statepipe_sys::pin::pin_current_thread(cpu);
                    }
                    io.run()
                });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    handle.shutdown();
                    return Err(ServeError::io("spawning an I/O thread", e));
                }
            }
        }
        drop(producer);
        drop(listener);
        for t in threads {
            let _ = t.join();
        }
        ring.join()
            .map(|_| ())
            .map_err(|e| ServeError::Ring(e.to_string()))
    }
}

/// Recovers `config.data`, binds `config.listen` and serves until stopped
/// by a [`ShutdownHandle`] (see [`Server`] to get one).
///
/// # Errors
///
/// See [`Server::bind`] and [`Server::run`].
pub fn run(config: Config) -> Result<(), ServeError> {
    Server::bind(config)?.run()
}
