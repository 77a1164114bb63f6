//! Checkpoints: consistent snapshots of every stage's state taken with
//! barriers in the stream, written in the background, and restored by
//! stage name.
//!
//! [`Running::checkpoint`](crate::Running::checkpoint) (or
//! [`Config::checkpoint_every`](crate::Config::checkpoint_every)) puts a
//! barrier into the input after the items accepted so far. Each unit copies
//! its stages' states when the barrier reaches it — after one barrier from
//! every input, at joins and merges — and goes on at once; a writer thread
//! encodes and writes the copies. The checkpoint is complete when every
//! stage's state and the manifest are durable; the previous complete one
//! is removed only then. A deployment configured with
//! [`Config::restore`](crate::Config::restore) starts every stage from the
//! checkpoint's state and numbers its inputs from the checkpoint's
//! position, so replaying the source from there gives the outputs of an
//! uninterrupted run, each output tagged with the input it came from.

mod error;
mod store;
pub(crate) mod writer;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use error::CheckpointError;
#[cfg(feature = "fuzzing")]
pub(crate) use store::decode_all;
pub(crate) use store::{folder, list, read_state};
pub use store::{Manifest, PlannedUnit, StageEntry};

/// A complete checkpoint on disk: its folder and its checked manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    dir: PathBuf,
    manifest: Manifest,
}

impl Checkpoint {
    /// The newest complete checkpoint under `root` (the folder given to
    /// [`Config::checkpoint_dir`](crate::Config::checkpoint_dir)), or `None`
    /// if there is none. Folders of checkpoints that never completed (no
    /// manifest) are passed over.
    ///
    /// # Errors
    ///
    /// [`CheckpointError::Damaged`] if the newest manifest is present but
    /// damaged (it names the file; restore an older one with
    /// [`Checkpoint::open`]), [`CheckpointError::Io`] if `root` cannot be
    /// read.
    pub fn latest(root: impl AsRef<Path>) -> Result<Option<Checkpoint>, CheckpointError> {
        for (_, dir) in store::list(root.as_ref())?.into_iter().rev() {
            match Checkpoint::open(&dir) {
                Ok(c) => return Ok(Some(c)),
                Err(CheckpointError::Incomplete { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// The checkpoint in `dir` (a `ckpt-NNNNNNNNNN` folder), its manifest
    /// read and checked. Each state file is checked when it is restored.
    ///
    /// # Errors
    ///
    /// [`CheckpointError::Incomplete`] without a manifest,
    /// [`CheckpointError::Damaged`] for a truncated, corrupted, foreign or
    /// wrong-version manifest, naming the file and what is wrong.
    pub fn open(dir: impl AsRef<Path>) -> Result<Checkpoint, CheckpointError> {
        let dir = dir.as_ref().to_path_buf();
        let manifest = store::read_manifest(&dir)?;
        Ok(Checkpoint { dir, manifest })
    }

    /// Its number.
    pub fn id(&self) -> u64 {
        self.manifest.id
    }

    /// The input position to resume from: inputs `0..position` were taken
    /// into account.
    pub fn position(&self) -> u64 {
        self.manifest.position
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
}

/// A completed checkpoint, as [`CheckpointTicket::wait`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Its number.
    pub id: u64,
    /// Inputs accepted before its barrier.
    pub position: u64,
    /// Its folder.
    pub dir: PathBuf,
    /// Bytes of state written.
    pub bytes: u64,
    /// The longest any unit spent copying its states at the barrier.
    pub max_stall: Duration,
    /// From the request to the manifest being durable.
    pub duration: Duration,
    /// When it completed (its manifest became durable).
    pub completed: Instant,
}

/// How many completed checkpoints a deployment remembers
/// ([`Running::checkpoints`](crate::Running::checkpoints)): the last ones.
pub const CHECKPOINTS_KEPT: usize = 1000;

/// The last `cap` records of something that happens now and then
/// (checkpoints, upgrades, restores), oldest first: what a watcher reads
/// while the run goes on. Pushing takes an uncontended lock, once per
/// event, never on an item's path.
#[derive(Debug)]
pub(crate) struct History<T> {
    cap: usize,
    items: Mutex<VecDeque<T>>,
}

impl<T: Clone> History<T> {
    /// An empty history of at most `cap` records.
    pub(crate) fn new(cap: usize) -> Self {
        History {
            cap,
            items: Mutex::new(VecDeque::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a record, forgetting the oldest once `cap` are kept.
    pub(crate) fn push(&self, item: T) {
        let mut items = self.lock();
        if items.len() == self.cap {
            items.pop_front();
        }
        items.push_back(item);
    }

    /// The records kept, oldest first.
    pub(crate) fn all(&self) -> Vec<T> {
        self.lock().iter().cloned().collect()
    }

    /// The newest record.
    pub(crate) fn last(&self) -> Option<T> {
        self.lock().back().cloned()
    }
}

/// A checkpoint under way: [`wait`](CheckpointTicket::wait) for it.
#[derive(Debug)]
pub struct CheckpointTicket {
    pub(crate) id: u64,
    pub(crate) done: crossbeam_channel::Receiver<Result<CheckpointInfo, CheckpointError>>,
}

impl CheckpointTicket {
    /// The checkpoint's number.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Waits until the checkpoint is complete (durable) or has failed.
    /// Keep the pipeline's output drained meanwhile: the barrier travels
    /// behind the items before it.
    ///
    /// # Errors
    ///
    /// [`CheckpointError::Io`] if a file could not be written (the previous
    /// checkpoint stays), [`CheckpointError::Stopped`] if the pipeline ended
    /// first.
    pub fn wait(self) -> Result<CheckpointInfo, CheckpointError> {
        self.done.recv().unwrap_or_else(|_| {
            Err(CheckpointError::Stopped(
                "the pipeline ended before the barrier reached every stage".into(),
            ))
        })
    }

    /// Like [`wait`](Self::wait), giving up after `timeout` (`None`).
    pub fn wait_timeout(
        &self,
        timeout: Duration,
    ) -> Option<Result<CheckpointInfo, CheckpointError>> {
        match self.done.recv_timeout(timeout) {
            Ok(r) => Some(r),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                Some(Err(CheckpointError::Stopped(
                    "the pipeline ended before the barrier reached every stage".into(),
                )))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::History;

    #[test]
    fn a_history_keeps_the_last_records_in_order() {
        let h = History::new(3);
        assert_eq!(h.last(), None::<u32>);
        for k in 0..10u32 {
            h.push(k);
            assert_eq!(h.all().len(), (k as usize + 1).min(3));
        }
        assert_eq!(h.all(), [7, 8, 9]);
        assert_eq!(h.last(), Some(9));
    }
}
