//! Segment files: their names, finding them, and syncing their folder.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

/// The file name of the segment whose first record is `first_lsn`.
pub fn segment_name(first_lsn: u64) -> String {
    format!("journal-{first_lsn:020}.log")
}

/// The segments in `dir`, by first lsn.
pub fn segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut found = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(first) = name
            .strip_prefix("journal-")
            .and_then(|n| n.strip_suffix(".log"))
            .and_then(|n| n.parse::<u64>().ok())
        {
            found.push((first, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Fsyncs a directory, so a file created, renamed or removed in it stays so.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
