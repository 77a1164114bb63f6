//! [`Coordinator`]: the process that holds a distributed run's input and
//! output, places its parts on members, commits checkpoints, and restores
//! every part from the last committed one when a member is lost.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use statepipe_sys::auth::Secret;

use super::ends::{Dedup, Inputs, Positions};
use super::error::RemoteError;
use super::join::{admit, Ev, Known};
use super::metrics::RemoteMetrics;
use super::part::{Parts, Wire};
use super::routes::{self, Routes};
use super::run::{
    RemoteConfig, RemoteFailure, RemoteRun, Restore, RestoreKind, SkippedCheckpoint, SKIPPED_KEPT,
};
use super::wire::{Msg, WireFailure};

/// The coordinating process of a distributed run.
pub struct Coordinator {
    control: TcpListener,
    data: TcpListener,
    secret: Secret,
    app: String,
    metrics: RemoteMetrics,
}

mod attempt;
mod commit;

use commit::Committed;

impl Coordinator {
    /// Listens for members at `addr`, which prove `secret`; `app` tells
    /// each member what to build (an application's name and arguments).
    ///
    /// # Errors
    /// [`RemoteError::Io`] if `addr` cannot be bound.
    pub fn bind(
        addr: &str,
        secret: Secret,
        app: impl Into<String>,
    ) -> Result<Coordinator, RemoteError> {
        let control = TcpListener::bind(addr)
            .map_err(|e| RemoteError::Io(format!("listening on {addr}: {e}")))?;
        let ip = control
            .local_addr()
            .map_err(|e| RemoteError::Io(e.to_string()))?
            .ip();
        let data = TcpListener::bind(SocketAddr::new(ip, 0))
            .map_err(|e| RemoteError::Io(e.to_string()))?;
        Ok(Coordinator {
            control,
            data,
            secret,
            app: app.into(),
            metrics: RemoteMetrics::default(),
        })
    }

    /// The address members join.
    pub fn local_addr(&self) -> SocketAddr {
        self.control
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The run's counters (source and sink edges, checkpoints, restores).
    pub fn metrics(&self) -> RemoteMetrics {
        self.metrics.clone()
    }

    /// Runs `parts` on the members that join: `inputs(from)` gives the
    /// inputs numbered `from` onwards (again from a checkpoint's position
    /// after a restore); `sink` receives each output once, with the
    /// number of the input it came from, in the order
    /// [`run_sequential`](crate::Pipeline::run_sequential) gives.
    ///
    /// # Errors
    /// [`RemoteError::NoMembers`] if too few members join in time,
    /// [`RemoteError::MemberLost`] if a member is lost without
    /// checkpoints, [`RemoteError::PartFailed`] if a part fails.
    pub fn run<I, O, It>(
        self,
        parts: &Parts<I, O>,
        config: &RemoteConfig,
        inputs: impl Fn(u64) -> It + Send + Sync + 'static,
        sink: impl FnMut(u64, O) + Send + 'static,
    ) -> Result<RemoteRun, RemoteError>
    where
        I: Wire,
        O: Wire,
        It: IntoIterator<Item = I>,
        It::IntoIter: 'static,
    {
        if config.members == 0 {
            return Err(RemoteError::Config(
                "a distributed run needs at least one member".into(),
            ));
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        let done = Arc::new(AtomicBool::new(false));
        self.accept_members(parts.build(), tx.clone(), Arc::clone(&done))?;
        let routes = Arc::new(Routes::default());
        {
            let listener = self
                .data
                .try_clone()
                .map_err(|e| RemoteError::Io(e.to_string()))?;
            let (secret, routes, done) =
                (self.secret.clone(), Arc::clone(&routes), Arc::clone(&done));
            std::thread::spawn(move || routes::serve(listener, secret, routes, done));
        }
        let mut run = Driver {
            co: &self,
            config,
            members: BTreeMap::new(),
            rx,
            tx,
            routes,
            inputs: Arc::new(move |from| {
                Box::new(inputs(from).into_iter()) as Box<dyn Iterator<Item = I>>
            }),
            sink: Arc::new(Mutex::new(Dedup {
                delivered: None,
                count: 0,
                sink: Box::new(sink),
            })),
            failures: Vec::new(),
            epoch: 0,
            committed: None,
            restores: Vec::new(),
            skipped: std::collections::VecDeque::new(),
            positions: Positions::default(),
            issued: Arc::default(),
            place: Vec::new(),
            leaving: BTreeSet::new(),
            joined: None,
            checkpoint_now: Arc::default(),
        };
        let result = run.drive(parts);
        done.store(true, Ordering::Relaxed);
        self.metrics.finish();
        for m in run.members.values_mut().filter(|m| m.alive) {
            if result.is_ok() {
                m.send(&Msg::Finish);
            }
            m.drop_connection();
        }
        for l in [&self.control, &self.data] {
            if let Ok(a) = l.local_addr() {
                let _ = TcpStream::connect(a);
            }
        }
        result
    }

    fn accept_members(
        &self,
        build: String,
        tx: Sender<Ev>,
        done: Arc<AtomicBool>,
    ) -> Result<(), RemoteError> {
        let listener = self
            .control
            .try_clone()
            .map_err(|e| RemoteError::Io(e.to_string()))?;
        let (secret, app) = (self.secret.clone(), self.app.clone());
        let numbers = Arc::new(AtomicU32::new(0));
        std::thread::Builder::new()
            .name("coordinator-accept".into())
            .spawn(move || {
                for s in listener.incoming() {
                    if done.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(s) = s else { continue };
                    let (secret, app, build, tx, numbers) = (
                        secret.clone(),
                        app.clone(),
                        build.clone(),
                        tx.clone(),
                        Arc::clone(&numbers),
                    );
                    std::thread::spawn(move || admit(s, &secret, &app, &build, &tx, &numbers));
                }
            })
            .map_err(|e| RemoteError::Io(e.to_string()))?;
        Ok(())
    }
}

struct Driver<'a, I, O> {
    co: &'a Coordinator,
    config: &'a RemoteConfig,
    members: BTreeMap<u32, Known>,
    rx: Receiver<Ev>,
    tx: Sender<Ev>,
    routes: Arc<Routes>,
    inputs: Inputs<I>,
    sink: Arc<Mutex<Dedup<O>>>,
    failures: Vec<WireFailure>,
    /// The attempt under way (messages of earlier ones are stale).
    epoch: u64,
    committed: Option<Committed>,
    restores: Vec<Restore>,
    /// The last checkpoints that could not be written.
    skipped: std::collections::VecDeque<SkippedCheckpoint>,
    /// Each barrier's input position and when it went, by checkpoint.
    positions: Positions,
    /// The highest barrier number sent, in any attempt.
    issued: Arc<AtomicU64>,
    /// Which member runs each part in the attempt under way (empty
    /// between attempts).
    place: Vec<u32>,
    /// Members that asked to leave, still running parts: let go once the
    /// attempt is stopped.
    leaving: BTreeSet<u32>,
    /// The last member that joined, not yet looked at by the attempt.
    joined: Option<u32>,
    /// Set to have the input's edge send a checkpoint's barrier at once.
    checkpoint_now: Arc<AtomicBool>,
}

/// Why an attempt ended early.
enum Cause {
    Lost(u32, String, Vec<u32>),
    Failed(u32, u32, String),
    /// A member left or joined: the parts move at a committed checkpoint.
    Rescale(RestoreKind, String),
}

/// An attempt's edges at the coordinator, to stop them.
struct Ends {
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl<I: Wire, O: Wire> Driver<'_, I, O> {
    fn root(&self) -> Option<&Path> {
        self.config.checkpoint_dir.as_deref()
    }

    fn drive(&mut self, parts: &Parts<I, O>) -> Result<RemoteRun, RemoteError> {
        let deadline = Instant::now() + self.config.join_timeout;
        let need = self
            .config
            .members
            .max(self.config.min_members.unwrap_or(0));
        while self.live().len() < need {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(ev) => {
                    let _ = self.on_event(ev);
                }
                Err(_) => {
                    return Err(RemoteError::NoMembers(format!(
                        "{} of {} members joined within {:?}: start them with the coordinator's \
                         address and the same {}",
                        self.live().len(),
                        need,
                        self.config.join_timeout,
                        statepipe_sys::auth::SECRET_ENV
                    )))
                }
            }
        }
        let resumed_from = if self.config.resume {
            self.committed = self.read_committed()?;
            self.committed.map(|c| c.id)
        } else {
            None
        };
        let mut epoch = 0;
        let mut fruitless = 0;
        loop {
            self.release_leavers();
            self.wait_for_min_members();
            epoch += 1;
            let started_from = self.committed.map(|c| c.id);
            let attempt = self.attempt(parts, epoch);
            self.place.clear();
            match attempt? {
                Ok(states) => {
                    let mut all = Vec::new();
                    for (k, (_, p)) in parts.units().iter().enumerate() {
                        let s = states.get(&(k as u32)).map_or(&[][..], Vec::as_slice);
                        all.extend(p.decode_states(s).map_err(|e| RemoteError::PartFailed {
                            part: k as u32,
                            member: "(coordinator)".into(),
                            error: format!("its final states do not decode here: {e}"),
                        })?);
                    }
                    let outputs = self.sink.lock().unwrap_or_else(|p| p.into_inner()).count;
                    self.failures.sort_by_key(|f| f.seq);
                    return Ok(RemoteRun {
                        outputs,
                        failures: self
                            .failures
                            .iter()
                            .map(|f| RemoteFailure {
                                seq: f.seq,
                                stage: f.stage.clone(),
                                item: f.item.clone(),
                                error: f.error.clone(),
                            })
                            .collect(),
                        states: all,
                        restores: std::mem::take(&mut self.restores),
                        last_checkpoint: self.committed.map(|c| (c.id, c.position)),
                        skipped_checkpoints: std::mem::take(&mut self.skipped).into(),
                        resumed_from,
                    });
                }
                Err((cause, detected)) => {
                    let (kind, lost, why, parts_of) = match &cause {
                        Cause::Lost(n, why, of) => {
                            (RestoreKind::Lost, Some(*n), why.clone(), of.clone())
                        }
                        Cause::Failed(_, part, e) => {
                            (RestoreKind::Failed, None, e.clone(), vec![*part])
                        }
                        Cause::Rescale(kind, why) => (*kind, None, why.clone(), Vec::new()),
                    };
                    let member = |n: u32| {
                        self.members
                            .get(&n)
                            .map_or(format!("{n}"), |m| format!("{n} ({})", m.addr))
                    };
                    match cause {
                        Cause::Lost(n, ..) if self.root().is_none() => {
                            return Err(RemoteError::MemberLost {
                                member: member(n),
                                why,
                                parts: parts_of,
                            })
                        }
                        Cause::Failed(n, part, error) => {
                            fruitless += 1;
                            if self.root().is_none() || fruitless > 2 {
                                return Err(RemoteError::PartFailed {
                                    part,
                                    member: member(n),
                                    error,
                                });
                            }
                        }
                        Cause::Lost(..) | Cause::Rescale(..) => {}
                    }
                    if self.committed.map(|c| c.id) != started_from {
                        fruitless = 0;
                    }
                    let restore = Restore {
                        kind,
                        lost: lost.map(member),
                        why,
                        from: self.committed.map(|c| c.id),
                        position: self.committed.map_or(0, |c| c.position),
                        detected_after: detected,
                    };
                    self.co
                        .metrics
                        .count_restore(restore.clone(), self.live().len());
                    self.restores.push(restore);
                }
            }
        }
    }

    /// The members alive that stay: parts go on them.
    fn live(&self) -> Vec<u32> {
        self.members
            .iter()
            .filter(|(n, m)| m.alive && !self.leaving.contains(n))
            .map(|(n, _)| *n)
            .collect()
    }

    /// Every member alive, those leaving too.
    fn alive(&self) -> Vec<u32> {
        self.members
            .iter()
            .filter(|(_, m)| m.alive)
            .map(|(n, _)| *n)
            .collect()
    }

    fn name(&self, n: u32) -> String {
        self.members.get(&n).map_or(format!("member {n}"), |m| {
            format!("member {n} ({})", m.addr)
        })
    }

    /// Lets member `n` go: the run is over for it, and it exits.
    fn release(&mut self, n: u32) {
        let name = self.name(n);
        if let Some(k) = self.members.get_mut(&n).filter(|k| k.alive) {
            // Marked before it is told, so whoever sees it go sees it left.
            self.co.metrics.member_left(n);
            k.send(&Msg::Finish);
            k.drop_connection();
            self.config.notes.say(&format!(
                "{name} left: released, its parts run on the others"
            ));
        }
    }

    /// Lets go every member that asked to leave (their parts are stopped).
    fn release_leavers(&mut self) {
        for n in std::mem::take(&mut self.leaving) {
            self.release(n);
        }
    }

    /// With [`RemoteConfig::min_members`], waits until that many members
    /// are alive (no deadline: the run resumes once they join).
    fn wait_for_min_members(&mut self) {
        let Some(min) = self.config.min_members else {
            return;
        };
        let mut said = usize::MAX;
        loop {
            let have = self.live().len();
            if have >= min {
                if said != usize::MAX {
                    self.config
                        .notes
                        .say(&format!("{have} members: going on (at least {min} wanted)"));
                }
                return;
            }
            if have != said {
                self.config.notes.say(&format!(
                    "waiting for {} more member(s) to join: {have} alive, the run needs at \
                     least {min} (minimum members); it goes on from the last checkpoint once \
                     they join",
                    min - have
                ));
                said = have;
            }
            if let Ok(ev) = self.rx.recv_timeout(std::time::Duration::from_millis(100)) {
                let _ = self.on_event(ev);
            }
            if self.rx.is_empty() {
                let _ = self.check_silence();
            }
        }
    }

    /// Which member runs part `k` of `p`: contiguous runs of parts, spread
    /// evenly over the live members.
    fn placement(&self, p: usize) -> Vec<u32> {
        let live = self.live();
        let m = live.len().min(p).max(1);
        (0..p).map(|k| live[k * m / p]).collect()
    }

    fn on_event(&mut self, ev: Ev) -> Option<Ev> {
        match ev {
            Ev::Joined(n, k) => {
                self.co.metrics.member_joined(n, &k.addr);
                self.members.insert(n, k);
                self.config.notes.say(&format!("{} joined", self.name(n)));
                self.joined = Some(n);
                None
            }
            Ev::Msg(n, m) => {
                if let Some(k) = self.members.get_mut(&n) {
                    k.last_seen = Instant::now();
                }
                match m {
                    Msg::Heartbeat => None,
                    Msg::Leave if self.place.contains(&n) => {
                        if self.leaving.insert(n) {
                            self.config.notes.say(&format!(
                                "{} asks to leave: its parts move to the others at the next \
                                 checkpoint",
                                self.name(n)
                            ));
                        }
                        Some(Ev::Msg(n, Msg::Leave))
                    }
                    // It runs no part: it may go at once.
                    Msg::Leave => {
                        self.release(n);
                        None
                    }
                    Msg::Failures {
                        epoch, failures, ..
                    } if epoch == self.epoch => {
                        self.failures.extend(failures);
                        None
                    }
                    Msg::Failures { .. } => None,
                    m => Some(Ev::Msg(n, m)),
                }
            }
            Ev::Lost(n, why) => {
                self.leaving.remove(&n);
                let was_alive = self.members.get_mut(&n).is_some_and(|k| {
                    let a = k.alive;
                    k.drop_connection();
                    a
                });
                self.co.metrics.member_gone(n);
                was_alive.then_some(Ev::Lost(n, why))
            }
            ev => Some(ev),
        }
    }

    /// Marks members silent for too long as lost.
    fn check_silence(&mut self) -> Option<(u32, String)> {
        let limit = self.config.silence;
        let silent = self
            .members
            .iter()
            .find(|(_, m)| m.alive && m.last_seen.elapsed() > limit)
            .map(|(n, _)| *n)?;
        if let Some(k) = self.members.get_mut(&silent) {
            k.drop_connection();
        }
        self.co.metrics.member_gone(silent);
        Some((silent, format!("silent for more than {limit:?}")))
    }

    fn commit(&mut self, id: u64, parts: usize) -> Result<(), RemoteError> {
        let Some(root) = self.root().map(Path::to_path_buf) else {
            return Ok(());
        };
        let Some((position, at)) = self
            .positions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
        else {
            return Ok(());
        };
        let c = Committed { id, position };
        if let Err(e) = commit::write(&root, c, parts) {
            // Every part's copy is durable, but the commit is not: the
            // one before stays committed, and the run goes on.
            self.skip(id, None, e.to_string());
            return Ok(());
        }
        self.committed = Some(c);
        self.co.metrics.count_checkpoint(at.elapsed());
        Ok(())
    }

    /// Notes checkpoint `id` as skipped (`part`'s copy, or the commit,
    /// could not be written): counted, and the last [`SKIPPED_KEPT`] kept
    /// for the run's report.
    pub(super) fn skip(&mut self, id: u64, part: Option<u32>, error: String) {
        self.co.metrics.count_skipped();
        if self.skipped.len() == SKIPPED_KEPT {
            self.skipped.pop_front();
        }
        self.skipped
            .push_back(SkippedCheckpoint { id, part, error });
    }

    fn read_committed(&self) -> Result<Option<Committed>, RemoteError> {
        let Some(root) = self.root() else {
            return Err(RemoteError::Config(
                "resuming needs the checkpoint folder".into(),
            ));
        };
        commit::read(root)
    }
}
