//! `ServeError`: every way `run` fails.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why the service could not start or stopped with an error.
#[derive(Debug)]
pub enum ServeError {
    /// An I/O error while doing `what`.
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The journal or snapshot is damaged somewhere a crash cannot explain;
    /// the service refuses to start rather than serve with a gap.
    Corrupt {
        /// The damaged file.
        file: PathBuf,
        /// Where in it.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// Another process serves from the data directory (it holds its
    /// `LOCK`): two writers of one journal would lose acknowledged writes.
    InUse {
        /// The data directory.
        dir: PathBuf,
        /// The other process's id, if it could be read.
        holder: Option<u32>,
    },
    /// A ring handler panicked.
    Ring(String),
}

impl ServeError {
    pub(crate) fn io(what: &'static str, source: io::Error) -> Self {
        ServeError::Io { what, source }
    }
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Io { what, source } => write!(f, "{what}: {source}"),
            ServeError::Corrupt {
                file,
                offset,
                detail,
            } => write!(
                f,
                "{} is corrupt at offset {offset}: {detail}; refusing to start",
                file.display()
            ),
            ServeError::InUse { dir, holder } => {
                write!(f, "{} is in use by another statepipe serve", dir.display())?;
                if let Some(pid) = holder {
                    write!(f, " (process {pid})")?;
                }
                write!(f, "; stop it first, or give this one another --data")
            }
            ServeError::Ring(e) => write!(f, "the ring stopped: {e}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
