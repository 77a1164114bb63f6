//! [`RemoteError`]: why a distributed run could not start or finish.

use std::fmt;

/// Why a distributed run could not start or finish.
#[derive(Debug)]
#[non_exhaustive]
pub enum RemoteError {
    /// A connection failed: what was being done, and the error.
    Io(String),
    /// The peer is not part of this run: a wrong secret, another build,
    /// or a malformed message; it says which.
    Refused(String),
    /// A member was lost (its connection closed, or it fell silent) and
    /// the run has no checkpoint to restore from.
    MemberLost {
        /// The member: its number and address.
        member: String,
        /// Why it counts as lost.
        why: String,
        /// The parts it ran.
        parts: Vec<u32>,
    },
    /// A part failed in a way a restore does not cure (a stage panicked),
    /// or kept failing after restores. (A checkpoint that cannot be
    /// written is skipped, not a failure: `RemoteRun::skipped_checkpoints`.)
    PartFailed {
        /// The part.
        part: u32,
        /// The member it ran on.
        member: String,
        /// What went wrong.
        error: String,
    },
    /// Not enough members joined in time, or none is left.
    NoMembers(String),
    /// A member found no coordinator to join: none listened at the
    /// address within the time `Member::join` retries for.
    NoCoordinator(String),
    /// The coordinator went away; the member stopped its parts.
    CoordinatorLost(String),
    /// The configuration cannot work.
    Config(String),
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RemoteError::Io(m) => write!(f, "{m}"),
            RemoteError::Refused(m) => write!(f, "refused: {m}"),
            RemoteError::MemberLost { member, why, parts } => write!(
                f,
                "member {member} was lost ({why}) with parts {parts:?}, and the run has no \
                 checkpoint to restore from: give the coordinator a checkpoint folder to \
                 recover from such losses"
            ),
            RemoteError::PartFailed {
                part,
                member,
                error,
            } => write!(f, "part {part} failed on member {member}: {error}"),
            RemoteError::NoMembers(m) => write!(f, "{m}"),
            RemoteError::NoCoordinator(m) => write!(f, "{m}"),
            RemoteError::CoordinatorLost(m) => write!(f, "the coordinator is gone: {m}"),
            RemoteError::Config(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for RemoteError {}
