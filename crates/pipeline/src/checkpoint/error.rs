//! Why a checkpoint was not taken, or cannot be restored.

use std::fmt;

/// Why a checkpoint was not taken, or cannot be restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointError {
    /// A file or folder could not be read or written.
    Io {
        /// The file or folder.
        path: String,
        /// What the system said.
        message: String,
    },
    /// A checkpoint file is truncated, corrupted, of another format
    /// version, or not a statepipe checkpoint at all.
    Damaged {
        /// The file.
        file: String,
        /// What is wrong.
        what: String,
    },
    /// A checkpoint folder has no manifest: it was never completed.
    Incomplete {
        /// The folder.
        dir: String,
    },
    /// A stage's state cannot be checkpointed: it was not built with
    /// [`Pipeline::durable_stage`](crate::Pipeline::durable_stage) (or
    /// another durable constructor).
    NotDurable {
        /// The stage.
        stage: String,
    },
    /// Two stages share a name: checkpoints restore states by name.
    DuplicateStage(String),
    /// The checkpoint does not fit this pipeline.
    Mismatch(String),
    /// This deployment takes no checkpoints (no
    /// [`Config::checkpoint_dir`](crate::Config::checkpoint_dir), or a cycle).
    NotConfigured(String),
    /// The pipeline ended or stopped before the checkpoint completed.
    Stopped(String),
    /// Another deployment (another process, or one of this process not yet
    /// finished) writes checkpoints into the folder: two writers would mix
    /// their checkpoints.
    InUse {
        /// The checkpoint folder.
        dir: String,
        /// The other writer's process id, if it could be read.
        holder: Option<u32>,
    },
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckpointError::Io { path, message } => write!(f, "{path}: {message}"),
            CheckpointError::Damaged { file, what } => write!(
                f,
                "{file}: {what}; nothing was restored (restore an older checkpoint with its folder)"
            ),
            CheckpointError::Incomplete { dir } => write!(
                f,
                "{dir} has no MANIFEST: that checkpoint was never completed"
            ),
            CheckpointError::NotDurable { stage } => write!(
                f,
                "stage `{stage}` has a state that cannot be checkpointed: build it with \
                 Pipeline::durable_stage (serde Serialize + Deserialize + Clone)"
            ),
            CheckpointError::DuplicateStage(s) => write!(
                f,
                "two stages are named `{s}`: checkpoints restore states by stage name, give each a name of its own"
            ),
            CheckpointError::Mismatch(m) => write!(f, "the checkpoint does not fit this pipeline: {m}"),
            CheckpointError::NotConfigured(m) => write!(f, "no checkpoints here: {m}"),
            CheckpointError::Stopped(m) => write!(f, "the checkpoint was not completed: {m}"),
            CheckpointError::InUse { dir, holder } => {
                write!(f, "{dir} takes the checkpoints of another deployment")?;
                if let Some(pid) = holder {
                    write!(f, " (process {pid})")?;
                }
                write!(f, "; end it first, or give this one another checkpoint folder")
            }
        }
    }
}

impl std::error::Error for CheckpointError {}
