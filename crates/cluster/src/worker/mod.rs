//! A worker: the process (or thread) that holds states and evolves them
//! for a master.
//!
//! A worker program registers the models it can run and serves: started by
//! [`LocalCluster`](crate::LocalCluster) or a launcher that sets
//! [`CONNECT_ENV`] and the secret, it calls [`serve`]; given an address and
//! a secret, [`run`]. Either returns when the master shuts it down or goes
//! away, so a worker never outlives its master.
//!
//! Inside, a reader thread answers control requests at once and a compute
//! thread evolves batches in order, so that a `Remove`, `Give`, `Fetch` or
//! `Drop` overtakes the evolve batches queued behind a long call: the master
//! matches `Evolved` frames against its evolve requests and every other
//! answer against its other requests, each lane in order. That is safe
//! because the master only ever moves or drops states that no queued evolve
//! names. A third thread takes states handed over by other workers.

mod conn;
mod join;
mod peer;
mod replica;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::auth::Secret;
use crate::error::Error;
use crate::evolve::{child_id, StateId};
use crate::protocol::{self, msg, Kind, DEFAULT_MAX_FRAME, MAX_STATE_BYTES};
use crate::registry::{ByteEvolve, Registry};
use crate::wire;
use conn::{fail, lock, Conn, Store};
use replica::ReplicaStore;

pub use join::{launched, WorkerOptions, CONNECT_ENV, DIE_WITH_PARENT_ENV, PIN_ENV};

/// What the loop does after a request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Read the next request.
    Continue,
    /// The master said `Shutdown`.
    Exit,
}

/// A worker's states and model; answers one request at a time.
pub(crate) struct WorkerCore {
    registry: Registry,
    model: Option<Box<dyn ByteEvolve>>,
    seed: u64,
    /// How often the master wants a heartbeat (from `Setup`).
    heartbeat: Option<Duration>,
    store: Store,
    /// Replicas held for buddies (`Recovery::Buddy`).
    replicas: ReplicaStore,
    /// Outgoing handoffs and replicas; without them a `Give` is answered `Given 0`.
    peers: Option<peer::Peers>,
    /// Where this worker takes handoffs, reported in `SetupOk`.
    peer_addr: Option<SocketAddr>,
}

impl WorkerCore {
    /// A core that cannot hand states to peers (it answers `Give` with 0).
    pub(crate) fn new(registry: Registry) -> Self {
        WorkerCore {
            registry,
            model: None,
            seed: 0,
            heartbeat: None,
            store: Store::default(),
            replicas: ReplicaStore::default(),
            peers: None,
            peer_addr: None,
        }
    }

    /// A core that says it takes peers' frames at `addr` (the scheduler's
    /// tests deliver replicas between cores themselves).
    #[cfg(test)]
    pub(crate) fn with_peer_addr(mut self, addr: SocketAddr) -> Self {
        self.peer_addr = Some(addr);
        self
    }

    /// Every state held, in id order (the scheduler's tests replicate them).
    #[cfg(test)]
    pub(crate) fn held_states(&self) -> Vec<(StateId, Vec<u8>)> {
        let mut v: Vec<_> = lock(&self.store)
            .iter()
            .map(|(id, b)| (*id, b.clone()))
            .collect();
        v.sort_unstable_by_key(|x| x.0);
        v
    }

    /// Takes `origin`'s whole replica for `round`, as the peer listener
    /// would; returns whether it is complete.
    #[cfg(test)]
    pub(crate) fn hold_replica(
        &self,
        round: u64,
        origin: u32,
        states: Vec<(StateId, Vec<u8>)>,
    ) -> bool {
        let total = states.len() as u32;
        lock(&self.replicas).receive(round, origin, total, states.into_iter())
    }

    /// Answers one request, appending the response frame to `out`.
    ///
    /// # Errors
    /// A message for a malformed request, an unknown state or model, or an
    /// evolve that panicked; the caller reports it in a `Failed` frame and exits.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn handle(
        &mut self,
        kind: Kind,
        p: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Next, String> {
        if kind == Kind::Evolve {
            let model = self.model.as_deref().ok_or("Evolve before Setup")?;
            evolve_batch(model, self.seed, &self.store, p, out)?;
            return Ok(Next::Continue);
        }
        self.control(kind, p, out)
    }

    /// Every request but `Evolve`.
    fn control(&mut self, kind: Kind, p: &[u8], out: &mut Vec<u8>) -> Result<Next, String> {
        let bad = |e: msg::MsgError| format!("malformed {kind:?} request: {e}");
        match kind {
            Kind::Setup => {
                let s = msg::setup(p).map_err(bad)?;
                self.model = Some(self.registry.build(s.model, s.params)?);
                self.seed = s.seed;
                self.heartbeat =
                    (s.heartbeat_ms > 0).then(|| Duration::from_millis(s.heartbeat_ms.into()));
                lock(&self.store).clear();
                lock(&self.replicas).clear();
                let st = protocol::begin(out, Kind::SetupOk);
                if let Some(a) = self.peer_addr {
                    msg::put_bytes(out, a.to_string().as_bytes());
                }
                protocol::finish(out, st);
            }
            Kind::Add => {
                let states = msg::states(p).map_err(bad)?;
                let n = states.len() as u32;
                let mut held = lock(&self.store);
                for (id, b) in states {
                    if held.insert(id, b.to_vec()).is_some() {
                        return Err(format!("state {id} added twice"));
                    }
                }
                protocol::encode(out, Kind::Added, &n.to_le_bytes());
            }
            Kind::Remove => {
                // As many `Removed` as the states' size takes (the master
                // forwards each as an `Add` and waits for the rest).
                let ids = msg::ids(p).map_err(bad)?;
                let found = self.take(&ids, true)?;
                lock(&self.replicas).keep_given(&found);
                let frames = protocol::state_frames(
                    Kind::Removed,
                    found.iter().map(|(id, b)| (*id, b.as_slice())),
                );
                for (f, _) in frames {
                    out.extend_from_slice(&f);
                }
            }
            Kind::Fetch => {
                // As many `Fetched` as the states' size takes: the master
                // reads on until it has every state it asked for.
                let ids = msg::ids(p).map_err(bad)?;
                let found = self.take(&ids, false)?;
                let frames = protocol::state_frames(
                    Kind::Fetched,
                    found.iter().map(|(id, b)| (*id, b.as_slice())),
                );
                for (f, _) in frames {
                    out.extend_from_slice(&f);
                }
            }
            Kind::Give => {
                let g = msg::give(p).map_err(bad)?;
                let found = self.take(&g.ids, true)?;
                let sent = match self.peers.as_mut() {
                    Some(peers) => match peers.send(g.to, g.ticket, &found) {
                        Ok(()) => true,
                        Err(e) => {
                            tracing::warn!(to = g.to, "handoff failed, keeping the states: {e}");
                            false
                        }
                    },
                    None => false,
                };
                let n = if sent {
                    lock(&self.replicas).keep_given(&found);
                    found.len() as u32
                } else {
                    lock(&self.store).extend(found);
                    0
                };
                protocol::encode(out, Kind::Given, &n.to_le_bytes());
            }
            Kind::Replicate => {
                let r = msg::replicate(p).map_err(bad)?;
                // One copy of the states, into the frames, under the lock
                // (nothing evolves during a round); the sending after it.
                let (frames, states, bytes) = {
                    let held = lock(&self.store);
                    let refs: Vec<(StateId, &[u8])> =
                        held.iter().map(|(id, b)| (*id, b.as_slice())).collect();
                    let bytes: usize = refs.iter().map(|s| s.1.len()).sum();
                    (
                        peer::replica_frames(r.round, r.origin, &refs),
                        refs.len() as u32,
                        bytes,
                    )
                };
                let n = match self.peers.as_mut() {
                    Some(peers) => match peers.send_replica(r.to, &frames) {
                        Ok(()) => states,
                        Err(e) => {
                            tracing::warn!(to = r.to, "could not replicate to the buddy: {e}");
                            u32::MAX
                        }
                    },
                    None => u32::MAX,
                };
                let st = protocol::begin(out, Kind::Shipped);
                msg::put_u32(out, n);
                msg::put_u64(out, bytes as u64);
                protocol::finish(out, st);
            }
            Kind::Commit => {
                let round = msg::commit(p).map_err(bad)?;
                lock(&self.replicas).commit(round);
            }
            Kind::Promote => {
                let ids = msg::ids(p).map_err(bad)?;
                let n = lock(&self.replicas).promote(&ids, &self.store)?;
                protocol::encode(out, Kind::Promoted, &n.to_le_bytes());
            }
            Kind::Drop => {
                let ids = msg::ids(p).map_err(bad)?;
                let mut held = lock(&self.store);
                let n = ids.iter().filter(|id| held.remove(id).is_some()).count() as u32;
                protocol::encode(out, Kind::Dropped, &n.to_le_bytes());
            }
            Kind::Shutdown => return Ok(Next::Exit),
            other => return Err(format!("a worker does not accept {other:?} frames")),
        }
        Ok(Next::Continue)
    }

    /// The states `ids`, removed or copied.
    fn take(&self, ids: &[StateId], remove: bool) -> Result<Vec<(StateId, Vec<u8>)>, String> {
        let mut held = lock(&self.store);
        let mut found = Vec::with_capacity(ids.len());
        for &id in ids {
            let s = if remove {
                held.remove(&id)
            } else {
                held.get(&id).cloned()
            };
            found.push((id, s.ok_or_else(|| format!("unknown state {id}"))?));
        }
        Ok(found)
    }
}

/// Evolves the batch in the `Evolve` payload `p`, appending `Evolved` to `out`.
///
/// # Errors
/// A malformed payload, an unknown state, or an evolve that failed or panicked.
pub(crate) fn evolve_batch(
    model: &dyn ByteEvolve,
    seed: u64,
    store: &Mutex<HashMap<StateId, Vec<u8>>>,
    p: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let limits = Limits {
        state: MAX_STATE_BYTES,
        frame: DEFAULT_MAX_FRAME as usize,
    };
    evolve_batch_within(model, seed, store, p, out, limits)
}

/// The largest child and the largest answer [`evolve_batch_within`] makes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes of one serialised child.
    pub(crate) state: usize,
    /// Bytes of the `Evolved` payload.
    pub(crate) frame: usize,
}

/// [`evolve_batch`] with the limits given: a child or an answer over them
/// fails the batch with a message naming the state.
pub(crate) fn evolve_batch_within(
    model: &dyn ByteEvolve,
    seed: u64,
    store: &Mutex<HashMap<StateId, Vec<u8>>>,
    p: &[u8],
    out: &mut Vec<u8>,
    limits: Limits,
) -> Result<(), String> {
    let msg::EvolveReq {
        step,
        copies,
        items,
    } = msg::evolve(p).map_err(|e| format!("malformed Evolve request: {e}"))?;
    let t0 = Instant::now();
    let start = protocol::begin(out, Kind::Evolved);
    let busy_at = out.len();
    msg::put_u64(out, 0);
    msg::put_u32(out, items.len() as u32);
    // The batch's states, taken out at once; none is taken if one is unknown.
    let batch = {
        let mut held = lock(store);
        if let Some(&(p, _)) = items.iter().find(|(p, _)| !held.contains_key(p)) {
            return Err(format!("unknown state {p}"));
        }
        items
            .iter()
            .map(|&(parent, input)| {
                let state = held
                    .remove(&parent)
                    .ok_or_else(|| format!("state {parent} named twice"))?;
                Ok((parent, state, input))
            })
            .collect::<Result<Vec<_>, String>>()?
    };
    let children = catch_unwind(AssertUnwindSafe(|| model.evolve_batch(seed, step, &batch)))
        .map_err(|p| {
            format!(
                "evolve of a batch from {} panicked: {}",
                batch[0].0,
                panic_text(&p)
            )
        })??;
    let mut born = Vec::new();
    // The largest child: its parent, its id and its length.
    let mut largest: Option<(StateId, StateId, usize)> = None;
    for ((parent, _, _), children) in batch.iter().zip(children) {
        let parent = *parent;
        msg::put_u64(out, parent.0);
        msg::put_u32(out, children.len() as u32);
        for (i, (child, output)) in children.into_iter().enumerate() {
            let id = child_id(seed, step, parent, i as u32);
            msg::put_u64(out, id.0);
            msg::put_bytes(out, &output);
            if copies {
                msg::put_bytes(out, &child);
            }
            if largest.map_or(true, |(_, _, n)| child.len() > n) {
                largest = Some((parent, id, child.len()));
            }
            born.push((id, child));
        }
    }
    if let Some((parent, id, n)) = largest.filter(|&(_, _, n)| n > limits.state) {
        return Err(format!(
            "evolving state {parent} made a child ({id}) of {n} bytes serialised, more than a \
             cluster can hold in one state ({} bytes): keep a state's large data out of it (a \
             file each step, read by path), or split it over several states",
            limits.state
        ));
    }
    let payload = out.len() - start - protocol::HEADER_LEN;
    if payload > limits.frame {
        let (parent, id, n) = largest.unwrap_or((batch[0].0, batch[0].0, 0));
        return Err(format!(
            "the batch from state {} made {payload} bytes of children and outputs, more than \
             one answer carries ({} bytes; its largest child, {id} of state {parent}, has {n}): \
             keep a state's large data out of it, or make its outputs smaller",
            batch[0].0, limits.frame
        ));
    }
    let mut held = lock(store);
    for (id, child) in born {
        if held.insert(id, child).is_some() {
            return Err(format!("child id {id} collides with a held state"));
        }
    }
    drop(held);
    let busy = t0.elapsed().as_nanos() as u64;
    out[busy_at..busy_at + 8].copy_from_slice(&busy.to_le_bytes());
    protocol::finish(out, start);
    Ok(())
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic".to_string()
    }
}

/// Serves the master named by the environment: [`CONNECT_ENV`] (its
/// address), [`SECRET_ENV`](crate::SECRET_ENV) (the shared secret), and optionally
/// [`PIN_ENV`] and [`DIE_WITH_PARENT_ENV`]. Returns when the master shuts
/// the worker down or goes away.
///
/// This is the entry point of a worker process started by
/// [`LocalCluster`](crate::LocalCluster), or by any launcher that sets
/// those variables (a shell loop, Slurm, Kubernetes).
///
/// # Errors
/// [`Error::Config`] if a variable is missing or malformed; otherwise as [`run`].
pub fn serve(registry: Registry) -> Result<(), Error> {
    serve_with_options(registry, &WorkerOptions::default())
}

/// [`serve`], from `base` options: the environment sets the address, the
/// secret, the pin and `die_with_parent` on top of them. A launcher that
/// handles SIGTERM passes its flag as [`WorkerOptions::leave`].
///
/// # Errors
/// As [`serve`].
pub fn serve_with_options(registry: Registry, base: &WorkerOptions) -> Result<(), Error> {
    let addr = std::env::var(CONNECT_ENV)
        .map_err(|_| Error::Config(format!("set {CONNECT_ENV} to the master's address")))?;
    let pin = match std::env::var(PIN_ENV) {
        Ok(v) => Some(
            v.trim()
                .parse()
                .map_err(|_| Error::Config(format!("{PIN_ENV}={v:?} is not a CPU number")))?,
        ),
        Err(_) => None,
    };
    let opts = WorkerOptions {
        pin: pin.or(base.pin),
        die_with_parent: base.die_with_parent
            || std::env::var(DIE_WITH_PARENT_ENV).is_ok_and(|v| v == "1"),
        ..base.clone()
    };
    run(&addr, &Secret::from_env()?, registry, &opts)
}

/// Connects to the master at `addr`, authenticates with `secret`, and serves
/// requests until the master says `Shutdown` (`Ok`) or goes away.
///
/// # Errors
/// [`Error::Connect`] if the master cannot be reached within
/// `opts.connect_timeout`; [`Error::Refused`] if it closes the connection
/// before any request (a wrong secret); [`Error::Disconnected`] if it
/// closes it later without a `Shutdown` (it dropped this worker, or it
/// died); [`Error::WorkerFailed`] if a request failed (after telling the
/// master in a `Failed` frame).
pub fn run(
    addr: &str,
    secret: &Secret,
    registry: Registry,
    opts: &WorkerOptions,
) -> Result<(), Error> {
    if opts.die_with_parent {
        join::die_with_parent()?;
    }
    if let Some(cpu) = opts.pin {
        // Before any thread starts: they inherit the affinity.
        if !statepipe_sys::pin::pin_current_thread(cpu) {
            tracing::warn!(cpu, "could not pin the worker");
        }
    }
    let s = join::join(addr, secret, opts)?;
    serve_conn(
        s,
        registry,
        Some(secret),
        opts.leave.clone(),
        opts.ready.clone(),
    )
    .map_err(|e| match e {
        Error::Refused { .. } => Error::Refused {
            addr: addr.to_string(),
        },
        Error::Disconnected { .. } => Error::Disconnected {
            addr: addr.to_string(),
        },
        e => e,
    })
}

enum Job {
    /// The model and the run's seed.
    Model(Box<dyn ByteEvolve>, u64),
    Evolve(Vec<u8>),
}

fn serve_conn(
    mut s: TcpStream,
    registry: Registry,
    secret: Option<&Secret>,
    leave: Option<Arc<std::sync::atomic::AtomicBool>>,
    ready: Option<Arc<std::sync::atomic::AtomicBool>>,
) -> Result<(), Error> {
    let conn = Conn {
        writer: Arc::new(Mutex::new(s.try_clone()?)),
        failed: Arc::default(),
    };
    let mut core = WorkerCore::new(registry);
    let _listener = match secret {
        Some(secret) => {
            let ip = s.local_addr()?.ip();
            let stores = (core.store.clone(), core.replicas.clone());
            let l =
                peer::Listener::start(ip, secret.clone(), stores, conn.clone()).map_err(|e| {
                    Error::Io(std::io::Error::new(
                        e.kind(),
                        format!("binding the peer listener: {e}"),
                    ))
                })?;
            core.peer_addr = Some(l.addr());
            core.peers = Some(peer::Peers::new(secret.clone()));
            Some(l)
        }
        None => None,
    };
    let (tx, rx) = mpsc::channel::<Job>();
    {
        let (store, conn) = (core.store.clone(), conn.clone());
        std::thread::Builder::new()
            .name("statepipe-evolve".into())
            .spawn(move || compute(&rx, &store, &conn))?;
    }
    let mut heartbeat: Option<conn::Heartbeat> = None;
    let mut leaver: Option<conn::Leaver> = None;
    let mut buf = Vec::with_capacity(64 << 10);
    let mut out = Vec::with_capacity(64 << 10);
    // A master that refuses the answer to its challenge closes the
    // connection without a word: an end before any request is a refusal.
    // One that ends normally says `Shutdown`; any other end, once served,
    // is a drop or the master's abnormal end.
    let mut served = false;
    let mut told_to_exit = false;
    let master = s.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string());
    loop {
        let kind = match wire::read_frame(&mut s, &mut buf, DEFAULT_MAX_FRAME) {
            Ok(Some(k)) => k,
            Ok(None) if !served => return Err(Error::Refused { addr: master }),
            Ok(None) => break,
            Err(_) if lock(&conn.failed).is_some() => break,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                if served {
                    break;
                }
                return Err(Error::Refused { addr: master });
            }
            Err(e) => {
                return Err(Error::Io(std::io::Error::new(
                    e.kind(),
                    format!("reading a request: {e}"),
                )))
            }
        };
        served = true;
        if kind == Kind::Evolve {
            if tx.send(Job::Evolve(std::mem::take(&mut buf))).is_err() {
                break;
            }
            continue;
        }
        out.clear();
        match core.control(kind, &buf, &mut out) {
            Ok(Next::Continue) => {
                if let Some(m) = core.model.take() {
                    let _ = tx.send(Job::Model(m, core.seed));
                }
                if let (None, Some(every)) = (&heartbeat, core.heartbeat) {
                    heartbeat = Some(conn::Heartbeat::start(conn.clone(), every)?);
                }
                if let (None, Some(flag), true) = (&leaver, &leave, kind == Kind::Setup) {
                    // Once set up, the master knows this worker; `Leaving`
                    // answers no request, so its order against `SetupOk`
                    // does not matter.
                    leaver = Some(conn::Leaver::start(conn.clone(), flag.clone())?);
                }
                if let Some((k, n)) = protocol::oversized(&out, DEFAULT_MAX_FRAME as usize) {
                    let m = format!(
                        "the answer to a {kind:?} request is a {k:?} frame of {n} bytes, more \
                         than a frame carries ({DEFAULT_MAX_FRAME} bytes)"
                    );
                    fail(&conn, &m);
                    return Err(Error::WorkerFailed(m));
                }
                if conn.send(&out).is_err() {
                    break;
                }
                if let (Some(r), Kind::Setup) = (&ready, kind) {
                    // Relaxed: a flag a readiness probe polls; nothing
                    // else rides on it.
                    r.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            Ok(Next::Exit) => {
                told_to_exit = true;
                break;
            }
            Err(m) => {
                fail(&conn, &m);
                return Err(Error::WorkerFailed(m));
            }
        }
    }
    drop(tx);
    drop(leaver);
    drop(heartbeat);
    if let Some(r) = &ready {
        r.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let failed = lock(&conn.failed).clone();
    match failed {
        Some(m) => Err(Error::WorkerFailed(m)),
        None if told_to_exit => Ok(()),
        None => Err(Error::Disconnected { addr: master }),
    }
}

/// The compute thread: evolves batches in the order they came.
fn compute(rx: &mpsc::Receiver<Job>, store: &Mutex<HashMap<StateId, Vec<u8>>>, conn: &Conn) {
    let mut model: Option<(Box<dyn ByteEvolve>, u64)> = None;
    let mut out = Vec::with_capacity(64 << 10);
    for job in rx {
        match job {
            Job::Model(m, run) => model = Some((m, run)),
            Job::Evolve(p) => {
                out.clear();
                let r = match &model {
                    Some((m, run)) => evolve_batch(&**m, *run, store, &p, &mut out),
                    None => Err("Evolve before Setup".to_string()),
                };
                match r {
                    Ok(()) => {
                        if conn.send(&out).is_err() {
                            return;
                        }
                    }
                    Err(m) => return fail(conn, &m),
                }
            }
        }
    }
}

/// Starts a worker on a thread of this process (tests, `--workers` threads).
pub(crate) fn spawn_thread(
    addr: SocketAddr,
    secret: Secret,
    registry: Registry,
) -> std::thread::JoinHandle<Result<(), Error>> {
    std::thread::Builder::new()
        .name("statepipe-worker".into())
        .spawn(move || {
            run(
                &addr.to_string(),
                &secret,
                registry,
                &WorkerOptions::default(),
            )
        })
        .expect("spawning a worker thread")
}
