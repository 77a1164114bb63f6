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

use std::path::{Path, PathBuf};
use std::time::Duration;

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
