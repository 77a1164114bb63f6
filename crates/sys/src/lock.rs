//! A folder (or a file) one process at a time: an exclusive `flock` on a
//! `LOCK` file in the folder (or on `NAME.lock` beside the file), which
//! holds the holder's process id.
//!
//! The kernel releases the lock when the process ends, however it ends (a
//! `SIGKILL`, a crash, the machine's restart), so a lock is never left
//! behind; a second process that tries while the first lives is refused
//! at once, with the first's process id to name.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let held = statepipe_sys::lock::FolderLock::take(dir.path()).unwrap();
//! match statepipe_sys::lock::FolderLock::take(dir.path()) {
//!     Err(statepipe_sys::lock::LockError::Held { holder }) => {
//!         assert_eq!(holder, Some(std::process::id()))
//!     }
//!     other => panic!("{other:?}"),
//! }
//! drop(held);
//! statepipe_sys::lock::FolderLock::take(dir.path()).unwrap();
//! ```

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The file [`FolderLock::take`] locks in its folder.
pub const LOCK_FILE: &str = "LOCK";

/// An exclusive lock on a folder, held while the value lives.
#[derive(Debug)]
pub struct FolderLock {
    _file: Flock<File>,
}

/// Why a [`FolderLock`] was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the folder: its process id, as it wrote it
    /// (`None` if it could not be read).
    Held {
        /// The holder's process id.
        holder: Option<u32>,
    },
    /// Opening or locking the file failed.
    Io(io::Error),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Held { holder: Some(pid) } => write!(f, "held by process {pid}"),
            LockError::Held { holder: None } => write!(f, "held by another process"),
            LockError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LockError {}

impl FolderLock {
    /// Takes the lock of `dir` (which must exist), or says who holds it.
    ///
    /// # Errors
    ///
    /// [`LockError::Held`] while another process (or another `FolderLock`
    /// of this one) holds it; [`LockError::Io`] if the file cannot be
    /// opened or locked.
    pub fn take(dir: &Path) -> Result<FolderLock, LockError> {
        Self::lock(&dir.join(LOCK_FILE))
    }

    /// Takes the lock of the single file `path` (which need not exist):
    /// `NAME.lock` beside it, for a file that one process at a time
    /// writes (a checkpoint replaced now and then).
    ///
    /// # Errors
    ///
    /// As [`FolderLock::take`].
    pub fn beside(path: &Path) -> Result<FolderLock, LockError> {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        Self::lock(&path.with_file_name(name))
    }

    fn lock(path: &Path) -> Result<FolderLock, LockError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(LockError::Io)?;
        let file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(file) => file,
            Err((_, Errno::EWOULDBLOCK)) => {
                let holder = fs::read_to_string(path)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                return Err(LockError::Held { holder });
            }
            Err((_, e)) => return Err(LockError::Io(e.into())),
        };
        // Who holds it, for the next one to name (not for the lock itself).
        let pid = format!("{}\n", std::process::id());
        file.set_len(0).map_err(LockError::Io)?;
        file.write_all_at(pid.as_bytes(), 0)
            .map_err(LockError::Io)?;
        Ok(FolderLock { _file: file })
    }
}
