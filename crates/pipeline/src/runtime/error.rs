//! Why a deployment could not start or did not finish.

use std::fmt;

use crate::checkpoint::CheckpointError;

/// Why a deployment could not start or did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeployError {
    /// A stage panicked: the pipeline stopped; items in flight are lost.
    StagePanicked {
        /// The unit the panic came from.
        stage: String,
        /// The panic's message.
        message: String,
    },
    /// The configuration cannot be used.
    Config(String),
    /// A worker thread could not be started.
    Spawn(String),
    /// Checkpoints cannot be taken or restored as configured.
    Checkpoint(CheckpointError),
}

impl From<CheckpointError> for DeployError {
    fn from(e: CheckpointError) -> Self {
        DeployError::Checkpoint(e)
    }
}

impl fmt::Display for DeployError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeployError::StagePanicked { stage, message } => write!(
                f,
                "stage `{stage}` panicked: {message}; the pipeline was stopped \
                 (fix the stage, or return an error from a try_stage to reject one item)"
            ),
            DeployError::Config(m) => write!(f, "bad deployment configuration: {m}"),
            DeployError::Spawn(m) => write!(f, "could not start a worker thread: {m}"),
            DeployError::Checkpoint(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for DeployError {}
