//! The checkpoint writer: a thread that encodes the state copies units
//! hand it at a barrier, writes them, and completes a checkpoint with its
//! manifest once every stage's state and the input position are in.
//!
//! Workers only clone at a barrier and send the copies here (an unbounded
//! channel: at most one copy of every state per checkpoint in flight), so
//! encoding and I/O never stop a worker. A failed write fails that
//! checkpoint alone: its folder is removed, the previous complete
//! checkpoint stays, and the pipeline goes on.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender};

use super::error::CheckpointError;
use super::store::{self, Manifest, PlannedUnit, StageEntry, FORMAT, VERSION};
use super::{CheckpointInfo, History};
use crate::state::{Copied, Snapshot};

/// What the writer is told.
pub(crate) enum Job {
    /// Checkpoint `id` was asked for; `done` hears how it ended.
    Begin {
        id: u64,
        started: Instant,
        done: Sender<Result<CheckpointInfo, CheckpointError>>,
    },
    /// Its barrier entered the pipeline after input `position - 1`.
    Position { id: u64, position: u64 },
    /// One unit's stages' states, copied at the barrier, and how long the
    /// copying stopped the unit.
    Part {
        id: u64,
        snaps: Vec<Snapshot>,
        stall: Duration,
    },
}

/// What every checkpoint of one deployment shares.
pub(crate) struct Setup {
    pub(crate) root: PathBuf,
    /// How many stages report per checkpoint.
    pub(crate) stages: usize,
    pub(crate) shape: String,
    pub(crate) plan: Vec<PlannedUnit>,
    /// The last completed checkpoints, for `Running::last_checkpoint` and
    /// `Running::checkpoints`.
    pub(crate) history: Arc<History<CheckpointInfo>>,
    /// Where encoded copies go back to, by stage name.
    pub(crate) spares: Arc<Mutex<HashMap<String, Copied>>>,
    /// Whether older checkpoints stay when one completes.
    pub(crate) keep_older: bool,
    /// The root's lock: one writer at a time, held while the thread runs
    /// (`None` for a distributed pipeline's part).
    pub(crate) _lock: Option<statepipe_sys::lock::FolderLock>,
    /// Set when the checkpoints still queued or being written are to be
    /// dropped, not finished (the deployment was stopped).
    pub(crate) dropped: Arc<AtomicBool>,
}

/// One checkpoint being written.
struct Pending {
    started: Option<Instant>,
    done: Option<Sender<Result<CheckpointInfo, CheckpointError>>>,
    position: Option<u64>,
    entries: Vec<StageEntry>,
    received: usize,
    bytes: u64,
    stall: Duration,
    error: Option<CheckpointError>,
}

impl Pending {
    fn new() -> Self {
        Pending {
            started: None,
            done: None,
            position: None,
            entries: Vec::new(),
            received: 0,
            bytes: 0,
            stall: Duration::ZERO,
            error: None,
        }
    }
}

/// Starts the writer thread.
pub(crate) fn start(setup: Setup) -> std::io::Result<(Sender<Job>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    let t = std::thread::Builder::new()
        .name("statepipe-checkpoint".into())
        .spawn(move || run(&setup, &rx))?;
    Ok((tx, t))
}

fn run(setup: &Setup, rx: &Receiver<Job>) {
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    for job in rx {
        // Acquire: pairs with the Release store in `Checkpointing::finish`.
        if setup.dropped.load(Ordering::Acquire) {
            break;
        }
        let id = match job {
            Job::Begin { id, started, done } => {
                let p = pending.entry(id).or_insert_with(Pending::new);
                p.started = Some(started);
                p.done = Some(done);
                id
            }
            Job::Position { id, position } => {
                pending.entry(id).or_insert_with(Pending::new).position = Some(position);
                id
            }
            Job::Part { id, snaps, stall } => {
                let p = pending.entry(id).or_insert_with(Pending::new);
                p.received += snaps.len();
                p.stall = p.stall.max(stall);
                if p.error.is_none() {
                    if let Err(e) = write_parts(setup, id, p, snaps) {
                        p.error = Some(e);
                    }
                }
                id
            }
        };
        let ready = pending.get(&id).is_some_and(|p| {
            p.received >= setup.stages && p.position.is_some() && p.done.is_some()
        });
        if ready {
            let p = pending.remove(&id).expect("just looked up");
            finish(setup, id, p);
        }
    }
    // Dropped: a checkpoint begun and not completed goes with its folder
    // (it has no manifest), and whoever waits for it hears why; those
    // still queued go with the channel.
    for (id, p) in pending {
        let _ = std::fs::remove_dir_all(store::folder(&setup.root, id));
        if let Some(done) = p.done {
            let _ = done.send(Err(CheckpointError::Stopped(
                "the pipeline was stopped before the checkpoint was written".into(),
            )));
        }
    }
}

fn write_parts(
    setup: &Setup,
    id: u64,
    p: &mut Pending,
    snaps: Vec<Snapshot>,
) -> Result<(), CheckpointError> {
    let dir = store::folder(&setup.root, id);
    if p.entries.is_empty() {
        std::fs::create_dir_all(&dir).map_err(|e| CheckpointError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
    }
    for s in snaps {
        let payload = (s.encode)(&*s.copy).map_err(|e| CheckpointError::Io {
            path: dir.display().to_string(),
            message: format!("encoding the state of stage `{}`: {e}", s.stage),
        })?;
        let file = format!("{:04}.state", p.entries.len());
        let path = dir.join(&file);
        let crc = store::write_state(&path, &payload).map_err(|e| CheckpointError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        p.bytes += payload.len() as u64;
        // The copy goes back, to be cloned into at the next barrier.
        setup
            .spares
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(s.stage.clone(), s.copy);
        p.entries.push(StageEntry {
            name: s.stage,
            state_type: s.type_name.to_string(),
            file,
            bytes: payload.len() as u64,
            crc32c: crc,
        });
    }
    Ok(())
}

fn finish(setup: &Setup, id: u64, mut p: Pending) {
    let dir = store::folder(&setup.root, id);
    let result = match p.error.take() {
        Some(e) => Err(e),
        None => complete(setup, id, &mut p, &dir),
    };
    if result.is_err() {
        // Never leave a half-written checkpoint that could be mistaken for
        // one: it has no manifest, and now no folder either.
        let _ = std::fs::remove_dir_all(&dir);
    }
    if let Ok(info) = &result {
        setup.history.push(info.clone());
    }
    if let Some(done) = p.done {
        let _ = done.send(result);
    }
}

fn complete(
    setup: &Setup,
    id: u64,
    p: &mut Pending,
    dir: &std::path::Path,
) -> Result<CheckpointInfo, CheckpointError> {
    if p.entries.is_empty() {
        std::fs::create_dir_all(dir).map_err(|e| CheckpointError::Io {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
    }
    p.entries.sort_by(|a, b| a.name.cmp(&b.name));
    let position = p.position.unwrap_or(0);
    let manifest = Manifest {
        format: FORMAT.to_string(),
        version: VERSION,
        id,
        position,
        created_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        shape: setup.shape.clone(),
        plan: setup.plan.clone(),
        stages: std::mem::take(&mut p.entries),
    };
    let io = |path: &std::path::Path, e: std::io::Error| CheckpointError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    // The state files' names first (one sync of the folder for all), then
    // the manifest (temporary file, sync, rename, sync of the folder), then
    // the checkpoint's own name in the root: only then is it complete and
    // may the older ones go.
    store::sync_folder(dir).map_err(|e| io(dir, e))?;
    let path = dir.join(store::MANIFEST);
    statepipe_sys::durable::write_atomic(&path, &store::encode_manifest(&manifest))
        .map_err(|e| io(&path, e))?;
    store::sync_folder(&setup.root).map_err(|e| io(&setup.root, e))?;
    // Complete: the older checkpoints (and folders never completed) go.
    if setup.keep_older {
        // Somebody else (a distributed pipeline's coordinator) says when.
    } else if let Ok(all) = store::list(&setup.root) {
        for (older, d) in all {
            if older < id {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
    Ok(CheckpointInfo {
        id,
        position,
        dir: dir.to_path_buf(),
        bytes: p.bytes,
        max_stall: p.stall,
        duration: p.started.map_or(Duration::ZERO, |s| s.elapsed()),
        completed: Instant::now(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queues checkpoints 1 and 2 (no stages: each is complete with its
    /// position) on a writer told to drop them or not; how each ended.
    fn queued(dropped: bool) -> (tempfile::TempDir, Vec<bool>) {
        let dir = tempfile::tempdir().unwrap();
        let setup = Setup {
            root: dir.path().to_path_buf(),
            stages: 0,
            shape: String::new(),
            plan: Vec::new(),
            history: Arc::new(History::new(4)),
            spares: Arc::default(),
            keep_older: true,
            _lock: None,
            dropped: Arc::new(AtomicBool::new(dropped)),
        };
        let (tx, t) = start(setup).unwrap();
        let mut tickets = Vec::new();
        for id in 1..=2 {
            let (done, rx) = crossbeam_channel::bounded(1);
            tx.send(Job::Begin {
                id,
                started: Instant::now(),
                done,
            })
            .unwrap();
            tx.send(Job::Position { id, position: id }).unwrap();
            tickets.push(rx);
        }
        drop(tx);
        t.join().unwrap();
        let ok = tickets
            .iter()
            .map(|rx| matches!(rx.recv(), Ok(Ok(_))))
            .collect();
        (dir, ok)
    }

    #[test]
    fn a_dropped_writer_completes_none_of_the_checkpoints_it_still_has() {
        let (dir, ok) = queued(false);
        assert_eq!(ok, [true, true]);
        assert!(store::folder(dir.path(), 2).join(store::MANIFEST).exists());
        let (dir, ok) = queued(true);
        assert_eq!(ok, [false, false]);
        assert!(store::list(dir.path()).unwrap().is_empty());
    }
}
