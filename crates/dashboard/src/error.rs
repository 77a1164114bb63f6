//! The dashboard's errors.

use std::fmt;

/// Why a dashboard could not start.
#[derive(Debug)]
#[non_exhaustive]
pub enum DashboardError {
    /// The address does not parse or resolve.
    Address {
        /// The address given.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The address could not be bound (in use, or not this host's).
    Bind {
        /// The address given.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A thread could not be started.
    Thread(std::io::Error),
}

impl fmt::Display for DashboardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DashboardError::Address { addr, reason } => write!(
                f,
                "dashboard address {addr:?}: {reason} (give HOST:PORT, for example 127.0.0.1:8787)"
            ),
            DashboardError::Bind { addr, source } => write!(
                f,
                "dashboard: cannot listen at {addr}: {source} (choose another port, or port 0 for any free one)"
            ),
            DashboardError::Thread(e) => write!(f, "dashboard: cannot start a thread: {e}"),
        }
    }
}

impl std::error::Error for DashboardError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DashboardError::Bind { source, .. } | DashboardError::Thread(source) => Some(source),
            DashboardError::Address { .. } => None,
        }
    }
}
