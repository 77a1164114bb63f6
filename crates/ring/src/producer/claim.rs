//! How a claim of slots may fail, and how long it may wait.

use std::time::Instant;

use crate::error::TryPublishError;

/// Why a claim failed.
pub(crate) enum ClaimError {
    Full,
    Timeout,
    Halted,
}

impl ClaimError {
    /// What a call that never waits returns for this failure, with `v`.
    pub(crate) fn refuse<V>(self, v: V) -> TryPublishError<V> {
        match self {
            ClaimError::Halted => TryPublishError::Halted(v),
            _ => TryPublishError::Full(v),
        }
    }
}

/// How long a claim may wait for space.
#[derive(Clone, Copy)]
pub(crate) enum Until {
    Never,
    Deadline(Instant),
    Forever,
}
