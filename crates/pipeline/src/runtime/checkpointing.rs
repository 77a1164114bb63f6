//! A deployment's checkpoints and upgrades: the checks at deploy time, the
//! restore of every stage's state, the writer and the periodic requests,
//! and the [`Running`] methods that send barriers.

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use super::barrier::{BarrierInfo, Coordinator, StageUpgrade};
use super::compile::Deploy;
use super::config::Config;
use super::error::DeployError;
use super::plan::Plan;
use crate::checkpoint::writer::{self, Job, Setup};
use crate::checkpoint::{
    read_state, CheckpointError, CheckpointInfo, CheckpointTicket, History, PlannedUnit,
    CHECKPOINTS_KEPT,
};
use crate::state::UpgradeError;
use crate::unit::UnitInfo;
use statepipe_sys::lock::{FolderLock, LockError};

/// A state a deployment's source keeps besides the stages' (a cycle's).
pub(crate) enum Extra {
    /// None.
    None,
    /// The deployment cannot take barriers at all.
    Unsupported,
    /// One, saved under this name with this type.
    Cell(&'static str, &'static str),
}

/// What `prepare` found and did before the workers start.
pub(crate) struct Prepared {
    /// The source's own restored state.
    pub(crate) extra: Option<Vec<u8>>,
    pub(crate) first_id: u64,
    pub(crate) resume: u64,
    pub(crate) resumed: Option<u64>,
    pub(crate) stages: Vec<String>,
    shape: String,
    plan: Vec<PlannedUnit>,
}

/// A hash of the pipeline's shape: its units' kinds and names, in order.
pub(crate) fn shape_of(units: &[UnitInfo]) -> String {
    let mut text = String::new();
    for u in units {
        text.push_str(&format!("{:?}:{}:{}\n", u.kind, u.name, u.stages.join(",")));
    }
    format!("{:08x}", crc32c::crc32c(text.as_bytes()))
}

fn io(path: &std::path::Path, e: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Checks that the pipeline can be checkpointed as configured, and
/// restores every stage's state from the checkpoint to restore.
pub(crate) fn prepare<I, O>(
    node: &mut Box<dyn Deploy<I, O>>,
    config: &Config,
    units: &[UnitInfo],
    plan: &Plan,
    extra: &Extra,
) -> Result<Prepared, DeployError> {
    let mut cells: Vec<(String, Option<&'static str>)> = Vec::new();
    node.visit(&mut |c| cells.push((c.name().to_string(), c.durable())));
    if let Extra::Cell(name, ty) = *extra {
        cells.push((name.to_string(), Some(ty)));
    }
    let stages: Vec<String> = cells.iter().map(|(n, _)| n.clone()).collect();
    let supported = !matches!(extra, Extra::Unsupported);
    let mut prepared = Prepared {
        extra: None,
        first_id: 1,
        resume: 0,
        resumed: None,
        stages,
        shape: shape_of(units),
        plan: units
            .iter()
            .zip(&plan.workers)
            .map(|(u, &w)| PlannedUnit {
                unit: u.name.clone(),
                worker: w,
            })
            .collect(),
    };
    if config.checkpoint_dir.is_none() && config.restore.is_none() {
        return Ok(prepared);
    }
    if !supported {
        return Err(CheckpointError::NotConfigured(
            "a cycle started with deploy_cycle cannot be checkpointed or restored: start it with deploy_durable_cycle".into(),
        )
        .into());
    }
    let mut seen = HashSet::new();
    for (name, durable) in &cells {
        if !seen.insert(name.as_str()) {
            return Err(CheckpointError::DuplicateStage(name.clone()).into());
        }
        if durable.is_none() {
            return Err(CheckpointError::NotDurable {
                stage: name.clone(),
            }
            .into());
        }
    }
    if let Some(ckpt) = &config.restore {
        let entries: HashMap<&str, _> = ckpt
            .manifest()
            .stages
            .iter()
            .map(|e| (e.name.as_str(), e))
            .collect();
        if let Some(extra) = ckpt
            .manifest()
            .stages
            .iter()
            .find(|e| !seen.contains(e.name.as_str()))
        {
            return Err(CheckpointError::Mismatch(format!(
                "{} holds the state of stage `{}`, which this pipeline does not have \
                 (a checkpoint of another pipeline, or a stage renamed)",
                ckpt.dir().display(),
                extra.name
            ))
            .into());
        }
        let mut failed: Option<CheckpointError> = None;
        node.visit(&mut |cell| {
            if failed.is_some() {
                return;
            }
            let Some(entry) = entries.get(cell.name()) else {
                return;
            };
            let ty = cell.durable().unwrap_or("(none)");
            if entry.state_type != ty {
                failed = Some(CheckpointError::Mismatch(format!(
                    "stage `{}` holds a `{ty}`, the checkpoint a `{}` (upgrade the stage \
                     instead, or restore with the build that wrote it)",
                    entry.name, entry.state_type
                )));
                return;
            }
            match read_state(ckpt.dir(), entry) {
                Ok(file) => {
                    if let Err(what) = cell.restore(file.payload()) {
                        failed = Some(CheckpointError::Damaged {
                            file: ckpt.dir().join(&entry.file).display().to_string(),
                            what: format!(
                                "the state of stage `{}` does not decode: {what}",
                                entry.name
                            ),
                        });
                    }
                }
                Err(e) => failed = Some(e),
            }
        });
        if let Some(e) = failed {
            return Err(e.into());
        }
        if let Extra::Cell(name, ty) = *extra {
            if let Some(entry) = entries.get(name) {
                if entry.state_type != ty {
                    return Err(CheckpointError::Mismatch(format!(
                        "the cycle's items are `{ty}`, the checkpoint's `{}`",
                        entry.state_type
                    ))
                    .into());
                }
                prepared.extra = Some(read_state(ckpt.dir(), entry)?.payload().to_vec());
            }
        }
        prepared.resume = ckpt.position();
        prepared.resumed = Some(ckpt.position());
        prepared.first_id = ckpt.id() + 1;
    }
    if let Some(root) = &config.checkpoint_dir {
        std::fs::create_dir_all(root).map_err(|e| io(root, e))?;
        statepipe_sys::durable::check_writable(&root.join("probe")).map_err(|e| io(root, e))?;
        let restored_from = config.restore.as_ref().map(|c| c.dir().to_path_buf());
        for (id, dir) in crate::checkpoint::list(root)? {
            prepared.first_id = prepared.first_id.max(id + 1);
            // A folder without a manifest was never completed: it can
            // never be, so it goes (unless it is the one being restored,
            // which has one).
            if !dir.join("MANIFEST").exists() && Some(&dir) != restored_from.as_ref() {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        if let Some(floor) = config.first_checkpoint {
            prepared.first_id = prepared.first_id.max(floor);
        }
    }
    Ok(prepared)
}

/// Gives every stage a copy of its state to clone into at the first
/// barrier, made now: the first checkpoint then stalls no worker on a fresh
/// allocation and its page faults (a cost of the deployment's start
/// instead, and of one copy of every state kept for its life, which the
/// checkpoints need anyway).
pub(crate) fn warm_spares<I, O>(node: &mut Box<dyn Deploy<I, O>>, co: &Coordinator) {
    let mut spares = co.spares.lock().unwrap_or_else(|p| p.into_inner());
    node.visit(&mut |cell| {
        if let Some(s) = cell.snapshot(None) {
            spares.insert(s.stage, s.copy);
        }
    });
}

/// The checkpoint side of a running deployment.
pub(crate) struct Checkpointing {
    co: Arc<Coordinator>,
    writer: Option<JoinHandle<()>>,
    periodic: Option<(Sender<()>, JoinHandle<()>)>,
    pub(crate) resumed: Option<u64>,
    /// The last completed checkpoints.
    pub(crate) history: Arc<History<CheckpointInfo>>,
    /// Tells the writer to drop what it has; set by [`finish`](Self::finish)
    /// for a stopped deployment with `Config::drop_checkpoints_on_stop`.
    dropped: Arc<AtomicBool>,
    drop_on_stop: bool,
}

/// Starts the writer, if the deployment checkpoints.
pub(crate) fn start(
    config: &Config,
    co: &Arc<Coordinator>,
    prepared: Prepared,
) -> Result<Checkpointing, DeployError> {
    let history = Arc::new(History::new(CHECKPOINTS_KEPT));
    let dropped = Arc::new(AtomicBool::new(false));
    let mut writer_thread = None;
    if let Some(root) = &config.checkpoint_dir {
        let io = |e: std::io::Error| {
            DeployError::Checkpoint(CheckpointError::Io {
                path: root.display().to_string(),
                message: e.to_string(),
            })
        };
        std::fs::create_dir_all(root).map_err(io)?;
        let lock = match config.lock_checkpoint_dir {
            true => Some(FolderLock::take(root).map_err(|e| match e {
                LockError::Held { holder } => DeployError::Checkpoint(CheckpointError::InUse {
                    dir: root.display().to_string(),
                    holder,
                }),
                LockError::Io(e) => io(e),
            })?),
            false => None,
        };
        let setup = Setup {
            root: root.clone(),
            stages: prepared.stages.len(),
            shape: prepared.shape,
            plan: prepared.plan,
            history: Arc::clone(&history),
            spares: Arc::clone(&co.spares),
            keep_older: config.keep_older_checkpoints,
            _lock: lock,
            dropped: Arc::clone(&dropped),
        };
        let (tx, t) = writer::start(setup).map_err(|e| DeployError::Spawn(e.to_string()))?;
        *co.writer.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        writer_thread = Some(t);
    }
    Ok(Checkpointing {
        co: Arc::clone(co),
        writer: writer_thread,
        periodic: None,
        resumed: prepared.resumed,
        history,
        dropped,
        drop_on_stop: config.drop_checkpoints_on_stop,
    })
}

/// Asks for a checkpoint: its barrier goes into the input after the
/// inputs accepted so far.
fn request(co: &Coordinator) -> Result<CheckpointTicket, CheckpointError> {
    if !co.supported {
        return Err(CheckpointError::NotConfigured(
            "a cycle started with deploy_cycle cannot be checkpointed: start it with deploy_durable_cycle".into(),
        ));
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let id = {
        let w = co.writer.lock().unwrap_or_else(|p| p.into_inner());
        let w = w.as_ref().ok_or_else(|| {
            CheckpointError::NotConfigured(
                "this deployment has no Config::checkpoint_dir, or has ended".into(),
            )
        })?;
        let id = co.next_id();
        w.send(Job::Begin {
            id,
            started: Instant::now(),
            done: tx,
        })
        .map_err(|_| CheckpointError::Stopped("the checkpoint writer has stopped".into()))?;
        id
    };
    co.send(BarrierInfo::new(id, true, Vec::new()));
    Ok(CheckpointTicket { id, done: rx })
}

impl Checkpointing {
    /// Starts the periodic checkpoints, if configured.
    pub(crate) fn start_periodic(&mut self, config: &Config) {
        let Some(period) = config.checkpoint_every else {
            return;
        };
        if self.writer.is_none() {
            return;
        }
        let (stop, stopped) = crossbeam_channel::bounded::<()>(0);
        let co = Arc::clone(&self.co);
        let t = std::thread::Builder::new()
            .name("statepipe-checkpoint-timer".into())
            .spawn(move || {
                let mut previous: Option<CheckpointTicket> = None;
                while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(period)
                {
                    // Skip while the previous one is still being written.
                    if let Some(p) = &previous {
                        if p.wait_timeout(Duration::ZERO).is_none() {
                            continue;
                        }
                    }
                    match request(&co) {
                        Ok(t) => previous = Some(t),
                        Err(_) => return,
                    }
                }
            });
        if let Ok(t) = t {
            self.periodic = Some((stop, t));
        }
    }

    /// Ends the checkpoint side: no more requests, barriers still in
    /// flight fail with `why`, and the writer finishes what it has (or,
    /// for a `stopped` deployment with
    /// `Config::drop_checkpoints_on_stop`, drops it: with checkpoints
    /// asked for faster than the disk completes them, finishing them could
    /// take far longer than the stop should).
    pub(crate) fn finish(&mut self, why: &str, stopped: bool) {
        if let Some((stop, t)) = self.periodic.take() {
            drop(stop);
            let _ = t.join();
        }
        if stopped && self.drop_on_stop {
            // Release: pairs with the Acquire load in the writer's loop.
            self.dropped.store(true, Ordering::Release);
        }
        self.co.abandon(why);
        if let Some(t) = self.writer.take() {
            let _ = t.join();
        }
    }
}

/// An upgrade under way: [`wait`](UpgradeTicket::wait) for it.
#[derive(Debug)]
pub struct UpgradeTicket<T> {
    pub(crate) done: crossbeam_channel::Receiver<Result<(), UpgradeError>>,
    pub(crate) expected: usize,
    pub(crate) value: T,
}

impl<T> UpgradeTicket<T> {
    /// Waits until the barrier has reached every upgraded stage; returns
    /// the handle(s) for the new state type. Keep the pipeline's output
    /// drained meanwhile: the barrier travels behind the items before it.
    ///
    /// # Errors
    ///
    /// The first stage's refusal ([`UpgradeError::Migrate`] names it; that
    /// stage keeps its old code, while copies whose migration succeeded
    /// run the new one), or [`UpgradeError::Stopped`] if the pipeline
    /// ended first.
    pub fn wait(self) -> Result<T, UpgradeError> {
        let mut first_err = None;
        for _ in 0..self.expected {
            match self.done.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(UpgradeError::Stopped(
                        "the pipeline ended before the barrier reached the stage".into(),
                    ));
                    break;
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(self.value),
        }
    }
}

impl Checkpointing {
    /// Asks for a checkpoint (see `Running::checkpoint`).
    pub(crate) fn checkpoint(&self) -> Result<CheckpointTicket, CheckpointError> {
        request(&self.co)
    }

    /// The last checkpoint completed.
    pub(crate) fn last(&self) -> Option<CheckpointInfo> {
        self.history.last()
    }

    /// The last [`CHECKPOINTS_KEPT`] checkpoints completed, oldest first.
    pub(crate) fn all(&self) -> Vec<CheckpointInfo> {
        self.history.all()
    }

    /// The last upgrades applied, oldest first.
    pub(crate) fn upgrades(&self) -> Vec<crate::state::UpgradeInfo> {
        self.co.upgrades.all()
    }

    /// Sends one barrier that upgrades every stage named in `cmds`.
    pub(crate) fn send_upgrades(
        &self,
        cmds: Vec<(String, Box<dyn Any + Send>)>,
    ) -> Result<(crossbeam_channel::Receiver<Result<(), UpgradeError>>, usize), UpgradeError> {
        let co = &self.co;
        if !co.supported {
            return Err(UpgradeError::Stopped(
                "a cycle started with deploy_cycle cannot be upgraded: start it with deploy_durable_cycle".into(),
            ));
        }
        for (name, _) in &cmds {
            if !co.stages.iter().any(|s| s == name) {
                return Err(UpgradeError::NoSuchStage(name.clone()));
            }
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        let expected = cmds.len();
        let ups = cmds
            .into_iter()
            .map(|(stage, cmd)| StageUpgrade {
                stage,
                cmd: Some(cmd),
                done: tx.clone(),
            })
            .collect();
        co.send(BarrierInfo::new(co.next_id(), false, ups));
        Ok((rx, expected))
    }
}
