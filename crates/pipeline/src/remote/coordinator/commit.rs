//! The committed checkpoint: the `COORDINATOR` file (its number and input
//! position), written once every part's copy is durable, with the older
//! copies removed after it; and read back to resume.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::super::error::RemoteError;
use super::super::member::part_dir;

/// What was committed: a checkpoint every part has, and the input
/// position it resumes from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Committed {
    pub(super) id: u64,
    pub(super) position: u64,
}

const COMMITTED: &str = "COORDINATOR";

/// Writes `c` atomically under `root`, then removes the checkpoints older
/// than it of parts `0..parts`.
pub(super) fn write(root: &Path, c: Committed, parts: usize) -> Result<(), RemoteError> {
    let path = root.join(COMMITTED);
    let json = serde_json::to_vec(&c).map_err(|e| RemoteError::Io(e.to_string()))?;
    statepipe_sys::durable::write_atomic(&path, &json)
        .map_err(|e| RemoteError::Io(format!("{}: {e}", path.display())))?;
    for k in 0..parts as u32 {
        if let Ok(all) = crate::checkpoint::list(&part_dir(root, k)) {
            for (older, d) in all {
                if older < c.id {
                    let _ = std::fs::remove_dir_all(d);
                }
            }
        }
    }
    Ok(())
}

/// The commit under `root`, if there is one.
pub(super) fn read(root: &Path) -> Result<Option<Committed>, RemoteError> {
    let path = root.join(COMMITTED);
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| RemoteError::Config(format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(RemoteError::Io(format!("{}: {e}", path.display()))),
    }
}
