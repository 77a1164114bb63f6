//! The write-ahead journal: length-prefixed, checksummed records in
//! segment files, appended in batches and fsynced once per batch.
//!
//! A record on disk is
//!
//! ```text
//! [len: u32 LE][crc32c(payload): u32 LE][payload: len bytes]
//! payload = [kind: u8][lsn: u64 LE][data]
//!   kind 1 (create): data = the request body, as received
//!   kind 2 (delete): data = the item id, u64 LE
//! ```
//!
//! Segments are named `journal-{first lsn, 20 digits}.log`; log sequence
//! numbers (lsn) increase strictly through the segments (a batch whose write
//! failed leaves a gap, never a reuse).
//!
//! Recovery ([`scan`]) reads records until the first that does not check
//! out. If no valid record starts anywhere after it, it is a torn tail (a
//! crash during a write) and is cut; if one does, the damage is in the
//! middle and recovery refuses ([`Corrupt`]), naming the offset.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Bytes before a record's payload: length and checksum.
pub const HEADER_LEN: usize = 8;
/// The smallest payload: kind and lsn.
const MIN_PAYLOAD: usize = 9;
/// The largest payload: a 1 MiB body plus kind and lsn.
pub const MAX_PAYLOAD: usize = (1 << 20) + MIN_PAYLOAD;

const KIND_CREATE: u8 = 1;
const KIND_DELETE: u8 = 2;

/// What a record says happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `POST /item` with this body (decoded again on replay).
    Create(Vec<u8>),
    /// `DELETE /item/{id}`.
    Delete(u64),
}

/// One journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its log sequence number.
    pub lsn: u64,
    /// What it records.
    pub op: Op,
}

/// Appends the encoding of a record to `out`.
pub fn encode(lsn: u64, op: &Op, out: &mut Vec<u8>) {
    let data: &[u8] = match op {
        Op::Create(body) => body,
        Op::Delete(_) => &[],
    };
    let len = MIN_PAYLOAD
        + if let Op::Delete(_) = op {
            8
        } else {
            data.len()
        };
    assert!(len <= MAX_PAYLOAD, "record of {len} bytes over the limit");
    let start = out.len();
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    match op {
        Op::Create(body) => {
            out.push(KIND_CREATE);
            out.extend_from_slice(&lsn.to_le_bytes());
            out.extend_from_slice(body);
        }
        Op::Delete(id) => {
            out.push(KIND_DELETE);
            out.extend_from_slice(&lsn.to_le_bytes());
            out.extend_from_slice(&id.to_le_bytes());
        }
    }
    let crc = crc32c::crc32c(&out[start + HEADER_LEN..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes the record at the start of `bytes`: the record and its encoded
/// length, or why it is not one.
pub fn decode(bytes: &[u8]) -> Result<(Record, usize), &'static str> {
    if bytes.len() < HEADER_LEN {
        return Err("short header");
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    if !(MIN_PAYLOAD..=MAX_PAYLOAD).contains(&len) {
        return Err("length out of range");
    }
    let Some(payload) = bytes.get(HEADER_LEN..HEADER_LEN + len) else {
        return Err("short payload");
    };
    let crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    if crc32c::crc32c(payload) != crc {
        return Err("checksum mismatch");
    }
    let lsn = u64::from_le_bytes(payload[1..9].try_into().expect("8 bytes"));
    let data = &payload[MIN_PAYLOAD..];
    let op = match payload[0] {
        KIND_CREATE => Op::Create(data.to_vec()),
        KIND_DELETE if data.len() == 8 => {
            Op::Delete(u64::from_le_bytes(data.try_into().expect("8 bytes")))
        }
        KIND_DELETE => return Err("delete record of the wrong length"),
        _ => return Err("unknown kind"),
    };
    Ok((Record { lsn, op }, HEADER_LEN + len))
}

/// Damage in the middle of a journal: a bad record followed by a good one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt {
    /// Where the bad record starts.
    pub offset: u64,
    /// Why it is bad.
    pub reason: &'static str,
    /// Where the next valid record starts.
    pub next_valid: u64,
}

/// What [`scan`] found in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The valid records, in order.
    pub records: Vec<Record>,
    /// The length of the valid prefix.
    pub valid_len: u64,
    /// A torn tail after the valid prefix: its offset and why it is bad.
    pub torn: Option<(u64, &'static str)>,
}

/// Reads the records of one segment's bytes; see the module docs.
///
/// # Errors
///
/// [`Corrupt`] when a bad record is followed by a valid one.
pub fn scan(bytes: &[u8]) -> Result<Scan, Corrupt> {
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        match decode(&bytes[at..]) {
            Ok((record, n)) => {
                records.push(record);
                at += n;
            }
            Err(reason) => {
                // Bounded by the bytes left; only on a damaged file.
                if let Some(next) = (at + 1..bytes.len()).find(|&p| decode(&bytes[p..]).is_ok()) {
                    return Err(Corrupt {
                        offset: at as u64,
                        reason,
                        next_valid: next as u64,
                    });
                }
                return Ok(Scan {
                    records,
                    valid_len: at as u64,
                    torn: Some((at as u64, reason)),
                });
            }
        }
    }
    Ok(Scan {
        records,
        valid_len: at as u64,
        torn: None,
    })
}

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

/// Appends records to the current segment; one write and one fsync per
/// [`commit`](Writer::commit).
#[derive(Debug)]
pub struct Writer {
    dir: PathBuf,
    file: File,
    /// Segments on disk other than the current one, by first lsn.
    older: Vec<(u64, PathBuf)>,
    current: (u64, PathBuf),
    /// The length of the durable prefix of the current segment.
    durable_len: u64,
    next_lsn: u64,
    pending: Vec<u8>,
}

impl Writer {
    /// Opens `dir`'s last segment for appending at `valid_len` (cutting
    /// anything after it), or starts a segment at `next_lsn` if none.
    ///
    /// # Errors
    ///
    /// Any I/O error opening, cutting or syncing.
    pub fn open(
        dir: &Path,
        mut segs: Vec<(u64, PathBuf)>,
        valid_len: u64,
        next_lsn: u64,
    ) -> io::Result<Self> {
        let (current, file, durable_len) = match segs.pop() {
            Some((first, path)) => {
                let file = OpenOptions::new().write(true).open(&path)?;
                if file.metadata()?.len() != valid_len {
                    file.set_len(valid_len)?;
                    file.sync_all()?;
                }
                ((first, path), file, valid_len)
            }
            None => {
                let path = dir.join(segment_name(next_lsn));
                let file = create_segment(dir, &path)?;
                ((next_lsn, path), file, 0)
            }
        };
        let mut w = Writer {
            dir: dir.to_path_buf(),
            file,
            older: segs,
            current,
            durable_len,
            next_lsn,
            pending: Vec::new(),
        };
        w.file.seek(SeekFrom::Start(w.durable_len))?;
        Ok(w)
    }

    /// Buffers a record; returns its lsn. Nothing is durable before
    /// [`commit`](Writer::commit).
    pub fn append(&mut self, op: &Op) -> u64 {
        let lsn = self.next_lsn;
        self.next_lsn += 1;
        encode(lsn, op, &mut self.pending);
        lsn
    }

    /// Whether records wait for a commit.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Writes the buffered records and fsyncs. On error the segment is cut
    /// back to its durable prefix and the buffered records are dropped (their
    /// lsns are not reused).
    ///
    /// # Errors
    ///
    /// [`CommitError`]: the write or fsync error, and whether cutting back
    /// failed too (the journal can then take no more records).
    pub fn commit(&mut self) -> Result<(), CommitError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let result = self
            .file
            .write_all(&self.pending)
            .and_then(|()| self.file.sync_data());
        let written = self.pending.len() as u64;
        self.pending.clear();
        match result {
            Ok(()) => {
                self.durable_len += written;
                Ok(())
            }
            Err(source) => {
                let cut = self
                    .file
                    .set_len(self.durable_len)
                    .and_then(|()| self.file.seek(SeekFrom::Start(self.durable_len)));
                Err(CommitError {
                    source,
                    broken: cut.is_err(),
                })
            }
        }
    }

    /// Starts a new segment at the next lsn (after committing), then removes
    /// every segment whose records all have lsn ≤ `covered` (a snapshot holds
    /// them).
    ///
    /// # Errors
    ///
    /// Any I/O error; the journal stays usable on the segment it had.
    pub fn rotate_and_compact(&mut self, covered: u64) -> io::Result<()> {
        self.commit().map_err(|e| e.source)?;
        if self.durable_len > 0 {
            let path = self.dir.join(segment_name(self.next_lsn));
            let file = create_segment(&self.dir, &path)?;
            let old = std::mem::replace(&mut self.current, (self.next_lsn, path));
            self.older.push(old);
            self.file = file;
            self.durable_len = 0;
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
        if removed {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// The lsn the next record gets.
    pub fn next_lsn(&self) -> u64 {
        self.next_lsn
    }
}

fn create_segment(dir: &Path, path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)?;
    file.sync_all()?;
    sync_dir(dir)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(Op::Create),
            any::<u64>().prop_map(Op::Delete),
        ]
    }

    fn encode_all(ops: &[Op]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut ends = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            encode(i as u64 + 1, op, &mut bytes);
            ends.push(bytes.len());
        }
        (bytes, ends)
    }

    #[test]
    fn zeros_are_not_records() {
        let s = scan(&[0; 100]).unwrap();
        assert!(s.records.is_empty());
        assert_eq!(s.torn, Some((0, "length out of range")));
    }

    #[test]
    fn writer_appends_commits_and_compacts() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::open(dir.path(), Vec::new(), 0, 1).unwrap();
        assert_eq!(w.append(&Op::Create(b"a".to_vec())), 1);
        assert_eq!(w.append(&Op::Delete(7)), 2);
        w.commit().unwrap();
        w.rotate_and_compact(0).unwrap();
        assert_eq!(w.append(&Op::Delete(8)), 3);
        w.commit().unwrap();
        assert_eq!(segments(dir.path()).unwrap().len(), 2);
        w.rotate_and_compact(2).unwrap();
        let segs = segments(dir.path()).unwrap();
        assert_eq!(segs.iter().map(|s| s.0).collect::<Vec<_>>(), vec![3, 4]);
        let bytes = fs::read(&segs[0].1).unwrap();
        let s = scan(&bytes).unwrap();
        assert_eq!(
            s.records,
            vec![Record {
                lsn: 3,
                op: Op::Delete(8)
            }]
        );
    }

    proptest! {
        #[test]
        fn records_round_trip(ops in proptest::collection::vec(op_strategy(), 0..20)) {
            let (bytes, _) = encode_all(&ops);
            let s = scan(&bytes).unwrap();
            prop_assert_eq!(s.torn, None);
            prop_assert_eq!(s.valid_len, bytes.len() as u64);
            let got: Vec<Op> = s.records.into_iter().map(|r| r.op).collect();
            prop_assert_eq!(got, ops);
        }

        #[test]
        fn a_cut_replays_exactly_the_whole_records_before_it(
            ops in proptest::collection::vec(op_strategy(), 1..12),
            cut in any::<prop::sample::Index>(),
        ) {
            let (bytes, ends) = encode_all(&ops);
            let cut = cut.index(bytes.len() + 1);
            let s = scan(&bytes[..cut]).unwrap();
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            prop_assert_eq!(s.records.len(), whole);
            let valid = if whole == 0 { 0 } else { ends[whole - 1] };
            prop_assert_eq!(s.valid_len, valid as u64);
            prop_assert_eq!(s.torn.is_some(), valid != cut);
        }

        #[test]
        fn a_flipped_byte_in_the_last_record_cuts_it(
            ops in proptest::collection::vec(op_strategy(), 1..12),
            at in any::<prop::sample::Index>(),
            flip in 1..=255u8,
        ) {
            let (mut bytes, ends) = encode_all(&ops);
            let start = if ops.len() > 1 { ends[ops.len() - 2] } else { 0 };
            let pos = start + at.index(bytes.len() - start);
            bytes[pos] ^= flip;
            let s = scan(&bytes).unwrap();
            prop_assert_eq!(s.records.len(), ops.len() - 1);
            prop_assert_eq!(s.torn.map(|t| t.0), Some(start as u64));
        }

        #[test]
        fn a_flipped_byte_in_the_middle_refuses(
            ops in proptest::collection::vec(op_strategy(), 2..12),
            which in any::<prop::sample::Index>(),
            at in any::<prop::sample::Index>(),
            flip in 1..=255u8,
        ) {
            let (mut bytes, ends) = encode_all(&ops);
            let k = which.index(ops.len() - 1);
            let start = if k > 0 { ends[k - 1] } else { 0 };
            let pos = start + at.index(ends[k] - start);
            bytes[pos] ^= flip;
            let err = scan(&bytes).unwrap_err();
            prop_assert_eq!(err.offset, start as u64);
            prop_assert!(err.next_valid as usize <= ends[k]);
        }
    }
}
