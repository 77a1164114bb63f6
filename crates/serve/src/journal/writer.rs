//! The segment [`Writer`]: group commits over zero-filled segments,
//! moving to the next, rotation and compaction (see the module docs of
//! [`crate::journal`]).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use super::record::{
    encode, lsn_of, segment_header, start_commit, Format, Key, Op, SEGMENT_HEADER,
};
use super::segment::{segment_name, sync_dir};
use crate::spare::Spares;

/// A failed [`Writer::commit`].
#[derive(Debug)]
pub struct CommitError {
    /// The write or fsync error.
    pub source: io::Error,
    /// Whether the segment could not be cut back to its durable prefix.
    pub broken: bool,
}

impl std::fmt::Display for CommitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.source)
    }
}

/// Writes records into the current segment; one write and one
/// `fdatasync` per [`commit`](Writer::commit).
#[derive(Debug)]
pub struct Writer {
    dir: PathBuf,
    file: File,
    /// Segments on disk other than the current one, by first lsn.
    older: Vec<(u64, PathBuf)>,
    current: (u64, PathBuf),
    /// The length of the durable prefix of the current segment.
    durable_len: u64,
    /// How far the current segment is zero-filled: records written below
    /// this change no file size. At or below `durable_len`: appending.
    zeroed_len: u64,
    /// A rename into `dir` that is not yet known durable: the next commit
    /// syncs the folder before it writes.
    dir_unsynced: bool,
    next_lsn: u64,
    pending: Vec<u8>,
    /// The key of every segment this writer writes: the last segment's when
    /// it goes on in it, else a fresh one.
    key: Key,
    /// Where the zero-filled segments come from; `None`: always append.
    spares: Option<Spares>,
}

/// Where [`Writer::open`] starts.
#[derive(Debug)]
pub struct Start {
    /// The segments on disk, by first lsn (from [`segments`](super::segments)).
    pub segments: Vec<(u64, PathBuf)>,
    /// The valid prefix of the last segment ([`Scan::valid_len`](super::Scan::valid_len)).
    pub valid_len: u64,
    /// Whether the last segment has a torn tail to cut.
    pub torn: bool,
    /// The last segment's format ([`Scan::format`](super::Scan::format)).
    pub format: Option<Format>,
    /// The lsn the next record gets.
    pub next_lsn: u64,
    /// The size of a zero-filled segment; 0: never preallocate, append.
    pub segment_bytes: u64,
}

impl Start {
    /// A journal with no segments yet, whose first record gets `next_lsn`,
    /// always appending (no zero-filled segments).
    pub fn new(next_lsn: u64) -> Self {
        Start {
            segments: Vec::new(),
            valid_len: 0,
            torn: false,
            format: None,
            next_lsn,
            segment_bytes: 0,
        }
    }
}

impl Writer {
    /// Opens `dir`'s last segment for writing after its valid prefix
    /// (cutting a torn tail), or starts a segment at `next_lsn` if none or
    /// if the last is of the first format, and starts preparing zero-filled
    /// segments.
    ///
    /// # Errors
    ///
    /// Any I/O error opening, cutting or syncing, or no random salt.
    pub fn open(dir: &Path, start: Start) -> io::Result<Self> {
        let Start {
            segments: mut segs,
            valid_len,
            torn,
            format,
            next_lsn,
            segment_bytes,
        } = start;
        let last = segs.pop();
        let key = match format {
            Some(Format::V2(key)) if last.is_some() => key,
            _ => Key::random()?,
        };
        let (current, file, durable_len, zeroed_len) = match (last, format) {
            (Some((first, path)), Some(Format::V1)) if valid_len > 0 => {
                // A segment of the first format: cut its torn tail (it is
                // no longer the last), and go on in a new one.
                if torn {
                    let file = OpenOptions::new().write(true).open(&path)?;
                    file.set_len(valid_len)?;
                    file.sync_all()?;
                }
                segs.push((first, path));
                let path = dir.join(segment_name(next_lsn));
                let file = create_segment(dir, &path, key)?;
                ((next_lsn, path), file, SEGMENT_HEADER as u64, 0)
            }
            (Some((first, path)), Some(Format::V2(_))) => {
                let file = OpenOptions::new().write(true).open(&path)?;
                let len = file.metadata()?.len();
                // Without a torn tail, whatever follows the valid prefix is
                // zeros: room to write over.
                let zeroed = if torn || len < valid_len {
                    file.set_len(valid_len)?;
                    file.sync_all()?;
                    valid_len
                } else {
                    len
                };
                ((first, path), file, valid_len, zeroed)
            }
            (Some((first, path)), _) => {
                // No record in it (its header cut short by a crash): it
                // starts again.
                let file = create_segment(dir, &path, key)?;
                ((first, path), file, SEGMENT_HEADER as u64, 0)
            }
            (None, _) => {
                let path = dir.join(segment_name(next_lsn));
                let file = create_segment(dir, &path, key)?;
                ((next_lsn, path), file, SEGMENT_HEADER as u64, 0)
            }
        };
        let spares = (segment_bytes > 0)
            .then(|| Spares::start(dir, segment_bytes, segment_header(key).to_vec()))
            .transpose()?;
        Ok(Writer {
            dir: dir.to_path_buf(),
            file,
            older: segs,
            current,
            durable_len,
            zeroed_len,
            dir_unsynced: false,
            next_lsn,
            pending: Vec::new(),
            key,
            spares,
        })
    }

    /// Buffers a record; returns its lsn. Nothing is durable before
    /// [`commit`](Writer::commit).
    pub fn append(&mut self, op: &Op) -> u64 {
        let lsn = self.next_lsn;
        self.next_lsn += 1;
        let start = self.pending.len();
        encode(self.key, lsn, op, &mut self.pending);
        if start == 0 {
            start_commit(self.key, &mut self.pending);
        }
        lsn
    }

    /// Whether records wait for a commit.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes the buffered records (the first marked as starting the
    /// commit) and fsyncs, moving to a zero-filled segment first where one is
    /// ready and they would not fit in the zeros of this one. On error the
    /// segment is cut back to its durable prefix and the buffered records
    /// are dropped (their lsns are not reused).
    ///
    /// # Errors
    ///
    /// [`CommitError`]: the write or fsync error, and whether cutting back
    /// failed too (the journal can then take no more records).
    pub fn commit(&mut self) -> Result<(), CommitError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let result = self.write_pending();
        self.pending.clear();
        result.map_err(|source| {
            // The bytes past the durable prefix go (zeros included: the
            // segment appends from here until the next one).
            let cut = self.file.set_len(self.durable_len);
            self.zeroed_len = self.zeroed_len.min(self.durable_len);
            CommitError {
                source,
                broken: cut.is_err(),
            }
        })
    }

    fn write_pending(&mut self) -> io::Result<()> {
        let len = self.pending.len() as u64;
        if self.durable_len + len > self.zeroed_len {
            self.enter_spare(lsn_of(&self.pending));
        }
        if self.dir_unsynced {
            sync_dir(&self.dir)?;
            self.dir_unsynced = false;
        }
        self.file.write_all_at(&self.pending, self.durable_len)?;
        self.file.sync_data()?;
        self.durable_len += len;
        Ok(())
    }

    /// Moves to a zero-filled segment whose first record is `first_lsn`,
    /// if one is ready; otherwise stays (and appends).
    fn enter_spare(&mut self, first_lsn: u64) {
        let path = self.dir.join(segment_name(first_lsn));
        // Once renamed, nothing can fail before it is the current segment
        // (a segment without records whose name lies inside another's lsns
        // would mislead compaction).
        let taken = self.spares.as_ref().and_then(|s| s.take_into(&path));
        let file = match taken {
            None => return,
            Some(Ok(file)) => file,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "a zero-filled journal segment could not be taken; appending");
                return;
            }
        };
        // Unknown size: treated as no zeros (the segment appends).
        let zeroed = file.metadata().map_or(0, |m| m.len());
        let old = std::mem::replace(&mut self.current, (first_lsn, path));
        let old_file = std::mem::replace(&mut self.file, file);
        if self.has_records() {
            // Give back the old segment's unused zeros (best effort: a
            // zero tail left after a crash reads as the end anyway).
            let _ = old_file.set_len(self.durable_len);
            self.older.push(old);
        } else if old.1 != self.current.1 {
            // No record in it: it goes (one with the same name was
            // replaced by the rename).
            let _ = fs::remove_file(&old.1);
        }
        self.durable_len = SEGMENT_HEADER as u64;
        self.zeroed_len = zeroed;
        // The rename must be durable before a record in the new segment is
        // acknowledged: the next write syncs the folder first.
        self.dir_unsynced = true;
    }

    /// Compacts after a snapshot: removes every segment whose records all
    /// have lsn ≤ `covered` (the snapshot holds them). A segment that
    /// appends (no zero-filled room) is closed first, after committing, so
    /// that an appending journal does not grow without bound; a zero-filled
    /// one is kept until it is full.
    ///
    /// # Errors
    ///
    /// Any I/O error; the journal stays usable on the segment it had.
    pub fn rotate_and_compact(&mut self, covered: u64) -> io::Result<()> {
        self.commit().map_err(|e| e.source)?;
        if self.has_records() && self.zeroed_len <= self.durable_len {
            self.enter_spare(self.next_lsn);
            if self.has_records() {
                let path = self.dir.join(segment_name(self.next_lsn));
                let file = create_segment(&self.dir, &path, self.key)?;
                let old = std::mem::replace(&mut self.current, (self.next_lsn, path));
                self.older.push(old);
                self.file = file;
                self.durable_len = SEGMENT_HEADER as u64;
                self.zeroed_len = 0;
            }
        }
        // Segment i holds lsns below the first lsn of segment i + 1.
        let mut removed = false;
        while let Some((_, path)) = self.older.first() {
            let next_first = self.older.get(1).map_or(self.current.0, |s| s.0);
            if next_first > covered.saturating_add(1) {
                break;
            }
            fs::remove_file(path)?;
            self.older.remove(0);
            removed = true;
        }
        if removed || self.dir_unsynced {
            sync_dir(&self.dir)?;
            self.dir_unsynced = false;
        }
        Ok(())
    }

    /// The lsn the next record gets.
    pub fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// Whether the current segment holds a durable record.
    fn has_records(&self) -> bool {
        self.durable_len > SEGMENT_HEADER as u64
    }

    /// Waits until a zero-filled segment is ready (tests).
    #[cfg(test)]
    pub(super) fn wait_for_spare(&self) {
        if let Some(spares) = &self.spares {
            spares.wait_ready();
        }
    }

    /// Whether the current segment is zero-filled past its records (an
    /// `fdatasync` then commits no metadata).
    pub fn zero_filled(&self) -> bool {
        self.zeroed_len > self.durable_len
    }
}

/// Creates (or empties) the segment `path` with the header of `key`,
/// synced with its folder before any record is written after it.
fn create_segment(dir: &Path, path: &Path, key: Key) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)?;
    file.write_all_at(&segment_header(key), 0)?;
    file.sync_all()?;
    sync_dir(dir)?;
    Ok(file)
}
