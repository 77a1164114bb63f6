//! [`Member`]: a process that runs the parts its coordinator gives it.

use std::io::BufReader;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use statepipe_sys::auth::Secret;

use super::edge::EdgeStats;
use super::error::RemoteError;
use super::metrics::RemoteMetrics;
use super::part::{Part, PartCtx, Parts, Reporter, Wire};
use super::routes::{self, Routes};
use super::split::Router;
use super::wire::{self, Assign, Msg};
use super::wire::{CONNECT_TIMEOUT, HEARTBEAT};
use crate::checkpoint::Checkpoint;
use crate::runtime::config::Config;

/// A member of a distributed run: it joins a coordinator, builds what the
/// coordinator names ([`app`](Self::app)), and runs the parts it is given
/// until the coordinator says the run is over.
pub struct Member {
    control: TcpStream,
    app: String,
    number: u32,
    secret: Secret,
    listener: TcpListener,
    metrics: RemoteMetrics,
    leave: Option<Arc<AtomicBool>>,
    ready: Option<Arc<AtomicBool>>,
}

impl Member {
    /// Joins the coordinator at `coordinator` (retrying for a while if it
    /// is not listening yet), proving `secret`; its parts' incoming edges
    /// listen on `listen` (`host:0` for any port; the host must be one the
    /// other processes can reach).
    ///
    /// # Errors
    /// [`RemoteError::NoCoordinator`] if the coordinator cannot be
    /// reached, [`RemoteError::Io`] if `listen` cannot be bound or the
    /// connection fails, [`RemoteError::Refused`] if it refuses the secret.
    pub fn join(coordinator: &str, secret: Secret, listen: &str) -> Result<Member, RemoteError> {
        let listener = TcpListener::bind(listen)
            .map_err(|e| RemoteError::Io(format!("listening on {listen}: {e}")))?;
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        let mut control = loop {
            match TcpStream::connect(coordinator) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(RemoteError::NoCoordinator(format!(
                        "connecting to the coordinator at {coordinator}: {e}"
                    )))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        let _ = control.set_nodelay(true);
        let mut buf = Vec::new();
        let refused = |e: wire::WireError| {
            RemoteError::Refused(format!("by the coordinator at {coordinator}: {e}"))
        };
        wire::answer(&mut control, &secret, &mut buf).map_err(refused)?;
        let (app, number) = match wire::read_msg(&mut control, &mut buf).map_err(refused)? {
            Msg::Welcome { app, member } => (app, member),
            Msg::Refused { reason } => return Err(RemoteError::Refused(reason)),
            m => {
                return Err(RemoteError::Refused(format!(
                    "{m:?} where a welcome belongs"
                )))
            }
        };
        Ok(Member {
            control,
            app,
            number,
            secret,
            listener,
            metrics: RemoteMetrics::default(),
            leave: None,
            ready: None,
        })
    }

    /// What the coordinator runs: the application's own description (an
    /// example's name and its arguments), to build the same [`Parts`].
    pub fn app(&self) -> &str {
        &self.app
    }

    /// This member's number in the run.
    pub fn number(&self) -> u32 {
        self.number
    }

    /// Its edges' and checkpoints' counters, to serve as metrics while
    /// [`run`](Self::run) runs.
    pub fn metrics(&self) -> RemoteMetrics {
        self.metrics.clone()
    }

    /// Asks the coordinator to let this member go once `flag` is set (by
    /// a SIGTERM handler, say; it is looked at every heartbeat, 200 ms):
    /// the coordinator moves its parts to the other members at a
    /// checkpoint it takes then, and [`run`](Self::run) returns `Ok` once
    /// it lets this member go. Nothing is lost or delivered twice. A
    /// member that stops without asking is recovered as lost, from the
    /// last committed checkpoint.
    pub fn leave_when(mut self, flag: Arc<AtomicBool>) -> Member {
        self.leave = Some(flag);
        self
    }

    /// Sets `flag` once the coordinator has accepted this member in
    /// [`run`](Self::run) (its build checked: the coordinator's first
    /// message after it is not a refusal), so that it may be given parts,
    /// and clears it when `run` returns: what a readiness probe reports
    /// (`statepipe member --health`).
    pub fn ready_when_admitted(mut self, flag: Arc<AtomicBool>) -> Member {
        self.ready = Some(flag);
        self
    }

    /// Runs the parts the coordinator gives, each deployed with `config`
    /// (its workers shared among this member's parts), until the run is
    /// over.
    ///
    /// # Errors
    /// [`RemoteError::Refused`] if this build differs from the
    /// coordinator's, [`RemoteError::CoordinatorLost`] if the coordinator
    /// goes away before the end.
    pub fn run<I: Wire, O: Wire>(
        self,
        parts: &Parts<I, O>,
        config: &Config,
    ) -> Result<(), RemoteError> {
        let data = self
            .listener
            .local_addr()
            .map_err(|e| RemoteError::Io(e.to_string()))?
            .to_string();
        let writer = Arc::new(Mutex::new(
            self.control
                .try_clone()
                .map_err(|e| RemoteError::Io(e.to_string()))?,
        ));
        let send = {
            let w = Arc::clone(&writer);
            move |m: &Msg| {
                let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
                wire::write_msg(&mut *w, m)
            }
        };
        send(&Msg::Ready {
            build: parts.build(),
            data,
        })
        .map_err(|e| RemoteError::Io(format!("the coordinator: {e}")))?;

        let routes = Arc::new(Routes::default());
        let done = Arc::new(AtomicBool::new(false));
        {
            let listener = self
                .listener
                .try_clone()
                .map_err(|e| RemoteError::Io(e.to_string()))?;
            let (secret, routes, done) =
                (self.secret.clone(), Arc::clone(&routes), Arc::clone(&done));
            std::thread::Builder::new()
                .name("member-edges".into())
                .spawn(move || routes::serve(listener, secret, routes, done))
                .map_err(|e| RemoteError::Io(e.to_string()))?;
        }
        {
            let (send, done, leave) = (send.clone(), Arc::clone(&done), self.leave.clone());
            std::thread::Builder::new()
                .name("member-heartbeat".into())
                .spawn(move || {
                    let mut asked = false;
                    while !done.load(Ordering::Relaxed) && send(&Msg::Heartbeat).is_ok() {
                        // Relaxed: the flag carries no data with it.
                        if !asked && leave.as_ref().is_some_and(|l| l.load(Ordering::Relaxed)) {
                            asked = true;
                            let _ = send(&Msg::Leave);
                        }
                        std::thread::sleep(HEARTBEAT);
                    }
                })
                .map_err(|e| RemoteError::Io(e.to_string()))?;
        }
        let report: Reporter = Arc::new(move |m| {
            let _ = send(&m);
        });
        let result = serve_control(&self, parts, config, &routes, &report);
        done.store(true, Ordering::Relaxed);
        if let Some(r) = &self.ready {
            // Relaxed: a flag a probe reads, no data with it.
            r.store(false, Ordering::Relaxed);
        }
        // Wakes the listener so it sees `done`.
        if let Ok(a) = self.listener.local_addr() {
            let _ = TcpStream::connect(a);
        }
        result
    }
}

/// One attempt's parts on this member.
struct Attempt {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl Attempt {
    fn abort(self) {
        self.stop.store(true, Ordering::Relaxed);
        for s in self
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn serve_control<I: Wire, O: Wire>(
    me: &Member,
    parts: &Parts<I, O>,
    config: &Config,
    routes: &Arc<Routes>,
    report: &Reporter,
) -> Result<(), RemoteError> {
    let control = me
        .control
        .try_clone()
        .map_err(|e| RemoteError::Io(e.to_string()))?;
    control
        .set_read_timeout(Some(wire::COORDINATOR_SILENCE))
        .map_err(|e| RemoteError::Io(e.to_string()))?;
    let mut reader = BufReader::new(control);
    let mut buf = Vec::new();
    let mut current: Option<Attempt> = None;
    loop {
        let msg = match wire::read_msg(&mut reader, &mut buf) {
            Ok(m) => m,
            Err(e) => {
                if let Some(a) = current.take() {
                    a.abort();
                }
                let why = match &e {
                    wire::WireError::Io(io)
                        if matches!(
                            io.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        format!(
                            "silent for {:?} (stopped, or its host cut off)",
                            wire::COORDINATOR_SILENCE
                        )
                    }
                    e => e.to_string(),
                };
                return Err(RemoteError::CoordinatorLost(why));
            }
        };
        if !matches!(msg, Msg::Refused { .. }) {
            if let Some(r) = &me.ready {
                // Relaxed: a flag a probe reads, no data with it.
                r.store(true, Ordering::Relaxed);
            }
        }
        match msg {
            Msg::Start {
                epoch,
                parts: assigned,
                checkpoints,
                credits,
            } => {
                if let Some(a) = current.take() {
                    a.abort();
                }
                routes.forget_before(epoch);
                current = Some(start(
                    me,
                    parts,
                    config,
                    routes,
                    report,
                    epoch,
                    assigned,
                    checkpoints,
                    credits,
                ));
            }
            Msg::Abort { epoch } => {
                if let Some(a) = current.take() {
                    a.abort();
                }
                report(Msg::Aborted { epoch });
            }
            Msg::Refused { reason } => return Err(RemoteError::Refused(reason)),
            Msg::Finish => {
                if let Some(a) = current.take() {
                    for t in a.threads {
                        let _ = t.join();
                    }
                }
                return Ok(());
            }
            _ => {}
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn start<I: Wire, O: Wire>(
    me: &Member,
    parts: &Parts<I, O>,
    config: &Config,
    routes: &Arc<Routes>,
    report: &Reporter,
    epoch: u64,
    assigned: Vec<Assign>,
    checkpoints: Option<String>,
    credits: u64,
) -> Attempt {
    let stop = Arc::new(AtomicBool::new(false));
    let streams = Arc::new(Mutex::new(Vec::new()));
    let share = assigned.len().max(1);
    let units = parts.units();
    let mut threads = Vec::new();
    for a in assigned {
        let number = a.part;
        let Some((stage, part)) = units.get(a.part as usize).cloned() else {
            report(Msg::Failed {
                epoch,
                part: a.part,
                error: format!("this build has {} parts, not part {}", units.len(), a.part),
            });
            continue;
        };
        // A keyed stage's copy sends groups; the part before a keyed stage
        // splits by its key.
        let grouped = parts.stages[stage].router.is_some();
        let router = parts.stages.get(stage + 1).and_then(|s| s.router.clone());
        let mut cfg = config.clone();
        let workers = config.resolved_workers().unwrap_or(1);
        if share > 1 {
            cfg = cfg.workers((workers / share).max(1)).pin(false);
        }
        let stats = me.metrics.part(a.part);
        let (secret, routes, reporter) =
            (me.secret.clone(), Arc::clone(routes), Arc::clone(report));
        let (stop, streams, root) = (Arc::clone(&stop), Arc::clone(&streams), checkpoints.clone());
        let metrics = me.metrics.clone();
        let t = std::thread::Builder::new()
            .name(format!("part {}", a.part))
            .spawn(move || {
                let edges = Edges {
                    secret: &secret,
                    routes: &routes,
                    stop: &stop,
                    streams: &streams,
                    router,
                    grouped,
                };
                let r = run_part(
                    &*part, a, cfg, root, epoch, credits, edges, stats, &reporter, &metrics,
                );
                if let Err(error) = r {
                    if !stop.load(Ordering::Relaxed) {
                        reporter(Msg::Failed {
                            epoch,
                            part: number,
                            error,
                        });
                    }
                }
            });
        match t {
            Ok(t) => threads.push(t),
            Err(e) => report(Msg::Failed {
                epoch,
                part: number,
                error: e.to_string(),
            }),
        }
    }
    Attempt {
        stop,
        threads,
        streams,
    }
}

/// The folder of `part`'s checkpoints under the run's root.
pub(crate) fn part_dir(root: &Path, part: u32) -> PathBuf {
    root.join(format!("part-{part:03}"))
}

/// How a part's edges are made.
struct Edges<'a> {
    secret: &'a Secret,
    routes: &'a Routes,
    stop: &'a Arc<AtomicBool>,
    streams: &'a Mutex<Vec<TcpStream>>,
    router: Option<Router>,
    grouped: bool,
}

#[allow(clippy::too_many_arguments)]
fn run_part(
    part: &dyn Part,
    a: Assign,
    mut cfg: Config,
    root: Option<String>,
    epoch: u64,
    credits: u64,
    edges: Edges<'_>,
    stats: (Arc<EdgeStats>, Arc<EdgeStats>),
    report: &Reporter,
    metrics: &RemoteMetrics,
) -> Result<(), String> {
    if let Some(root) = root {
        let dir = part_dir(Path::new(&root), a.part);
        // Checkpoints after the one restored (or all, starting afresh)
        // were never complete everywhere: they go, so this part numbers
        // its next checkpoint as every other part does.
        let keep = a.restore.unwrap_or(0);
        if let Ok(all) = crate::checkpoint::list(&dir) {
            for (id, d) in all {
                if id > keep {
                    let _ = std::fs::remove_dir_all(d);
                }
            }
        }
        cfg = cfg.checkpoint_dir(&dir);
        cfg.keep_older_checkpoints = true;
        cfg.lock_checkpoint_dir = false;
        cfg.first_checkpoint = Some(a.next_checkpoint);
        cfg.drop_checkpoints_on_stop = true;
        if let Some(id) = a.restore {
            let ckpt = Checkpoint::open(crate::checkpoint::folder(&dir, id))
                .map_err(|e| format!("restoring part {}: {e}", a.part))?;
            cfg = cfg.restore(ckpt);
        }
    }
    let mut downstreams = Vec::new();
    for to in &a.outputs {
        downstreams.push(routes::connect(
            to,
            edges.secret,
            epoch,
            CONNECT_TIMEOUT,
            edges.stop,
        )?);
    }
    let mut upstreams = Vec::new();
    for slot in 0..a.inputs {
        upstreams.push(
            edges
                .routes
                .take(epoch, a.part, slot, CONNECT_TIMEOUT, edges.stop)
                .ok_or_else(|| {
                    format!(
                        "part {}: its upstream {slot} did not connect{}",
                        a.part,
                        edges.routes.refusals()
                    )
                })?,
        );
    }
    {
        let mut s = edges.streams.lock().unwrap_or_else(|p| p.into_inner());
        for x in upstreams.iter().chain(&downstreams) {
            if let Ok(c) = x.try_clone() {
                s.push(c);
            }
        }
    }
    let states = part.run(PartCtx {
        epoch,
        part: a.part,
        config: cfg,
        upstreams,
        downstreams,
        router: edges.router,
        grouped: edges.grouped,
        window: credits,
        stop: Arc::clone(edges.stop),
        stats_in: stats.0,
        stats_out: stats.1,
        report: Arc::clone(report),
    })?;
    metrics.count_done();
    report(Msg::Done {
        epoch,
        part: a.part,
        states,
    });
    Ok(())
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.control.shutdown(Shutdown::Both);
    }
}
