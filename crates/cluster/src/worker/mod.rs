//! The worker: one loop, its states in a hash map, one request at a time.
//!
//! [`WorkerCore`] is the state machine (request in, response out) and is
//! driven by [`run`] over a blocking socket. A worker exits when the master
//! sends `Shutdown` or closes the connection, so it never outlives its master.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::auth::Secret;
use crate::evolve::{call_rng, child_id, StateId};
use crate::protocol::{self, msg, Kind, DEFAULT_MAX_FRAME};
use crate::registry::{ByteEvolve, Registry};
use crate::wire;

/// What the loop does after a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    Exit,
}

/// A worker's states and model; answers one request at a time.
pub struct WorkerCore {
    registry: Registry,
    model: Option<Box<dyn ByteEvolve>>,
    seed: u64,
    states: HashMap<StateId, Vec<u8>>,
}

impl WorkerCore {
    pub fn new(registry: Registry) -> Self {
        WorkerCore {
            registry,
            model: None,
            seed: 0,
            states: HashMap::new(),
        }
    }

    /// Number of states held.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether no state is held.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Answers one request, appending the response frame to `out`.
    ///
    /// # Errors
    /// A message for a malformed request, an unknown state or model, or an
    /// evolve that panicked; the caller reports it in a `Failed` frame and exits.
    pub fn handle(&mut self, kind: Kind, p: &[u8], out: &mut Vec<u8>) -> Result<Next, String> {
        let bad = |e: msg::MsgError| format!("malformed {kind:?} request: {e}");
        match kind {
            Kind::Setup => {
                let s = msg::setup(p).map_err(bad)?;
                self.model = Some(self.registry.build(s.model, s.params)?);
                self.seed = s.seed;
                self.states.clear();
                protocol::encode(out, Kind::SetupOk, &[]);
            }
            Kind::Evolve => {
                let (step, items) = msg::evolve(p).map_err(bad)?;
                self.evolve(step, &items, out)?;
            }
            Kind::Add => {
                let states = msg::states(p).map_err(bad)?;
                let n = states.len() as u32;
                for (id, b) in states {
                    if self.states.insert(id, b.to_vec()).is_some() {
                        return Err(format!("state {id} added twice"));
                    }
                }
                protocol::encode(out, Kind::Added, &n.to_le_bytes());
            }
            Kind::Remove | Kind::Fetch => {
                let ids = msg::ids(p).map_err(bad)?;
                let mut found = Vec::with_capacity(ids.len());
                for id in ids {
                    let s = if kind == Kind::Remove {
                        self.states.remove(&id)
                    } else {
                        self.states.get(&id).cloned()
                    };
                    found.push((id, s.ok_or_else(|| format!("unknown state {id}"))?));
                }
                let start = protocol::begin(
                    out,
                    if kind == Kind::Remove {
                        Kind::Removed
                    } else {
                        Kind::Fetched
                    },
                );
                msg::put_states(out, found.iter().map(|(id, b)| (*id, b.as_slice())));
                protocol::finish(out, start);
            }
            Kind::Drop => {
                let ids = msg::ids(p).map_err(bad)?;
                let n = ids
                    .iter()
                    .filter(|id| self.states.remove(id).is_some())
                    .count() as u32;
                protocol::encode(out, Kind::Dropped, &n.to_le_bytes());
            }
            Kind::Shutdown => return Ok(Next::Exit),
            other => return Err(format!("a worker does not accept {other:?} frames")),
        }
        Ok(Next::Continue)
    }

    fn evolve(
        &mut self,
        step: u64,
        items: &[(StateId, &[u8])],
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let t0 = Instant::now();
        let model = self.model.as_ref().ok_or("Evolve before Setup")?;
        let start = protocol::begin(out, Kind::Evolved);
        let busy_at = out.len();
        msg::put_u64(out, 0);
        msg::put_u32(out, items.len() as u32);
        let mut born = Vec::new();
        for &(parent, input) in items {
            let state = self
                .states
                .remove(&parent)
                .ok_or_else(|| format!("unknown state {parent}"))?;
            let mut rng = call_rng(self.seed, step, parent);
            let children = catch_unwind(AssertUnwindSafe(|| model.evolve(&state, input, &mut rng)))
                .map_err(|p| format!("evolve of {parent} panicked: {}", panic_text(&p)))??;
            msg::put_u64(out, parent.0);
            msg::put_u32(out, children.len() as u32);
            for (i, (child, output)) in children.into_iter().enumerate() {
                let id = child_id(self.seed, step, parent, i as u32);
                msg::put_u64(out, id.0);
                msg::put_bytes(out, &output);
                born.push((id, child));
            }
        }
        for (id, child) in born {
            if self.states.insert(id, child).is_some() {
                return Err(format!("child id {id} collides with a held state"));
            }
        }
        let busy = t0.elapsed().as_nanos() as u64;
        out[busy_at..busy_at + 8].copy_from_slice(&busy.to_le_bytes());
        protocol::finish(out, start);
        Ok(())
    }
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

/// How a worker process joins.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Pin this thread to this CPU.
    pub pin: Option<usize>,
    /// Keep retrying the connection this long (the master may start later).
    pub connect_timeout: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            pin: None,
            connect_timeout: Duration::from_secs(30),
        }
    }
}

fn connect(addr: &str, timeout: Duration) -> anyhow::Result<TcpStream> {
    let deadline = Instant::now() + timeout;
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .with_context(|| format!("resolving {addr}"))?
        .collect();
    loop {
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect(a) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if Instant::now() >= deadline {
            let e = last.map_or_else(|| "no address".to_string(), |e| e.to_string());
            anyhow::bail!("cannot connect to master at {addr}: {e}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Connects to the master at `addr`, authenticates with `secret`, and serves
/// requests until the master says `Shutdown` or goes away.
///
/// # Errors
/// If the connection or authentication fails, or a request fails (after
/// telling the master in a `Failed` frame).
pub fn run(
    addr: &str,
    secret: &Secret,
    registry: Registry,
    opts: &WorkerOptions,
) -> anyhow::Result<()> {
    if let Some(cpu) = opts.pin {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
            tracing::warn!(cpu, "could not pin the worker");
        }
    }
    let mut s = connect(addr, opts.connect_timeout)?;
    s.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(64 << 10);
    wire::expect_frame(&mut s, &mut buf, DEFAULT_MAX_FRAME, Kind::Challenge)
        .context("awaiting the challenge")?;
    let nonce = msg::array32(&buf).context("challenge")?;
    wire::write_frame(&mut s, Kind::Auth, &secret.answer(&nonce))?;
    serve(s, registry)
}

/// Serves requests on an authenticated connection.
///
/// # Errors
/// As [`run`].
pub fn serve(mut s: TcpStream, registry: Registry) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut core = WorkerCore::new(registry);
    let mut buf = Vec::with_capacity(64 << 10);
    let mut out = Vec::with_capacity(64 << 10);
    loop {
        let kind = match wire::read_frame(&mut s, &mut buf, DEFAULT_MAX_FRAME) {
            Ok(Some(k)) => k,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e).context("reading a request"),
        };
        out.clear();
        match core.handle(kind, &buf, &mut out) {
            Ok(Next::Continue) => s.write_all(&out)?,
            Ok(Next::Exit) => return Ok(()),
            Err(m) => {
                tracing::error!("{m}");
                let _ = wire::write_frame(&mut s, Kind::Failed, m.as_bytes());
                anyhow::bail!(m);
            }
        }
    }
}

/// Starts a worker on a thread of this process (tests, `--workers` threads).
pub fn spawn_thread(
    addr: SocketAddr,
    secret: Secret,
    registry: Registry,
) -> std::thread::JoinHandle<anyhow::Result<()>> {
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
