//! The write-ahead journal: length-prefixed, checksummed records in
//! segment files, appended in batches and fsynced once per batch.
//!
//! A segment starts with a header, and records follow it:
//!
//! ```text
//! header = [magic: "SPJRNL2\n"][salt: u64 LE][crc32c(magic, salt): u32 LE][0: u32]
//! record = [len: u32 LE][check: u32 LE][crc: u32 LE][payload: len bytes]
//! payload = [kind: u8][lsn: u64 LE][data]
//!   crc   = crc32c(salt, payload)
//!   check = crc32c(salt, len, crc, kind, lsn)
//!   kind | 0x80: the first record of its commit
//!   kind 1 (create): data = the request body, as received
//!   kind 2 (delete): data = the item id, u64 LE
//! ```
//!
//! The salt is random, drawn when the journal starts, and never leaves the
//! data folder: a request body that holds the bytes of a record does not
//! check out as one (a client cannot make recovery take its bytes for a
//! commit), and the header check lets a scan reject a false start after a
//! few bytes instead of checksumming up to a megabyte at every offset.
//! Segments of the first format (no header; `[len][crc32c(payload)]`
//! records) are read, and a journal that has them goes on in a new segment.
//!
//! Segments are named `journal-{first lsn, 20 digits}.log`; log sequence
//! numbers (lsn) increase strictly through the segments (a batch whose write
//! failed leaves a gap, never a reuse).
//!
//! A segment is zero-filled to its full size and fsynced before its first
//! record goes in (by a thread of its own, off the write path), and records
//! are written over the zeros: the file's size never changes, so an
//! `fdatasync` has only the data to flush, no metadata to commit through
//! the file system's journal (PostgreSQL's `wal_init_zero`). Where no
//! zero-filled segment is ready (the first moments after a start, a disk
//! too full for one, or preallocation turned off) the writer appends to
//! the segment it has, as it would without any. Either way the header is
//! synced before any record is written after it.
//!
//! The first record of each commit has the high bit of its kind set (it
//! starts the commit). A crash during a commit leaves whatever blocks of
//! it reached the disk, in any order, and zeros (or the end of the file)
//! after it.
//!
//! Recovery ([`scan`]) reads records until the first that does not check
//! out. If only zeros follow, that is the end. Otherwise, if a valid record
//! that starts a commit follows it, the damage is in an earlier commit
//! than the last: recovery refuses ([`Corrupt`]), naming the offset. Else
//! it is the last commit, torn by a crash (never acknowledged) or damaged,
//! and it is cut. A damaged header, with records after it, refuses too,
//! as does a segment with neither a header nor one record that reads
//! (cutting it could drop acknowledged records whose salt was lost).

mod record;
mod segment;
mod writer;

#[cfg(test)]
use record::{count, encode_v1};
pub use record::{
    decode, encode, segment_header, start_commit, Format, Key, Op, Record, HEADER_LEN, MAX_PAYLOAD,
    SEGMENT_HEADER,
};
use record::{decode_marked, key_behind_damaged_magic, read_header, Header};
pub use segment::{segment_name, segments, sync_dir};
pub use writer::{CommitError, Start, Writer};

/// Damage in the middle of a journal: a bad record followed by a good one,
/// or a segment header damaged with bytes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt {
    /// Where the bad record starts.
    pub offset: u64,
    /// Why it is bad.
    pub reason: &'static str,
    /// Where the next valid record starts (for a damaged header, where the
    /// records would start).
    pub next_valid: u64,
}

/// What [`scan`] found in one segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The segment's format: `None` for a segment whose header a crash cut
    /// short (it holds no record).
    pub format: Option<Format>,
    /// The valid records, in order.
    pub records: Vec<Record>,
    /// The length of the valid prefix (the header included).
    pub valid_len: u64,
    /// A torn tail after the valid prefix: its offset and why it is bad.
    pub torn: Option<(u64, &'static str)>,
    /// Where the bytes that are not zero end: `valid_len` when only zeros
    /// (of a zero-filled segment) or nothing follow the valid prefix.
    pub used_len: u64,
}

/// Reads the header and records of one segment's bytes; see the module
/// docs.
///
/// # Errors
///
/// [`Corrupt`] when a bad record is followed by a valid record that
/// starts a commit, or a damaged header by records.
pub fn scan(bytes: &[u8]) -> Result<Scan, Corrupt> {
    let format = match read_header(bytes) {
        Header::Valid(key) => Format::V2(key),
        Header::None => match key_behind_damaged_magic(bytes) {
            Some(_) => {
                return Err(damaged_header(
                    bytes,
                    "the segment header's magic is damaged",
                ))
            }
            None => Format::V1,
        },
        Header::Damaged => {
            if bytes[SEGMENT_HEADER..].iter().any(|&b| b != 0) {
                return Err(damaged_header(bytes, "the segment header is damaged"));
            }
            return Ok(headerless(bytes, "the segment header is damaged"));
        }
        Header::Missing => {
            if bytes.iter().any(|&b| b != 0) && bytes.len() >= SEGMENT_HEADER {
                // Zeros where the header was, and bytes after: a header
                // lost to damage (its records unreadable without its salt),
                // or a segment of the first format whose first commit was
                // torn. Which cannot be told, so nothing is cut.
                return Err(damaged_header(
                    bytes,
                    "zeros where the segment header belongs, and bytes after them",
                ));
            }
            return Ok(headerless(bytes, "a segment header cut short"));
        }
    };

    let mut records = Vec::new();
    let mut at = format.start();
    while at < bytes.len() {
        match decode_marked(&bytes[at..], format) {
            Ok((record, n, _)) => {
                records.push(record);
                at += n;
            }
            Err(reason) => {
                let used = used_end(bytes, at);
                if let Some(next_valid) = later_commit(bytes, at, used, format) {
                    return Err(Corrupt {
                        offset: at as u64,
                        reason,
                        next_valid: next_valid as u64,
                    });
                }
                if format == Format::V1 && records.is_empty() && used > at {
                    // No header and not one record: a segment of the first
                    // format whose only commit was torn, or one of this
                    // format whose header and first records were damaged.
                    // Which cannot be told, so nothing is cut.
                    return Err(damaged_header(
                        bytes,
                        "no segment header, and no record where one should start",
                    ));
                }
                return Ok(Scan {
                    format: Some(format),
                    records,
                    valid_len: at as u64,
                    torn: (used > at).then_some((at as u64, reason)),
                    used_len: used as u64,
                });
            }
        }
    }
    Ok(Scan {
        format: Some(format),
        records,
        valid_len: at as u64,
        torn: None,
        used_len: at as u64,
    })
}

/// Where the bytes from `at` on that are not zero end.
fn used_end(bytes: &[u8], at: usize) -> usize {
    bytes[at..]
        .iter()
        .rposition(|&b| b != 0)
        .map_or(at, |p| at + p + 1)
}

/// A segment with no record and no whole header: cut to nothing.
fn headerless(bytes: &[u8], reason: &'static str) -> Scan {
    let used = used_end(bytes, 0);
    Scan {
        format: None,
        records: Vec::new(),
        valid_len: 0,
        torn: (used > 0).then_some((0, reason)),
        used_len: used as u64,
    }
}

fn damaged_header(bytes: &[u8], reason: &'static str) -> Corrupt {
    Corrupt {
        offset: 0,
        reason,
        next_valid: SEGMENT_HEADER.min(bytes.len()) as u64,
    }
}

/// Whether a commit starts between the bad record at `bad` and `used` (the
/// end of the bytes that are not zero): then `bad` is not in the last
/// commit; returns where the first valid record after `bad` starts.
/// Only on a damaged or torn file; each offset costs a header check (the
/// first format's, a payload checksum).
fn later_commit(bytes: &[u8], bad: usize, used: usize, format: Format) -> Option<usize> {
    let mut first = None;
    let mut p = bad + 1;
    while p < used {
        match decode_marked(&bytes[p..], format) {
            Ok((_, n, starts)) => {
                first.get_or_insert(p);
                if starts {
                    return first;
                }
                p += n;
            }
            Err(_) => p += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::fs;

    mod format;

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..64).prop_map(Op::Create),
            any::<u64>().prop_map(Op::Delete),
        ]
    }

    /// Each record a commit of its own.
    fn encode_all(ops: &[Op]) -> (Vec<u8>, Vec<usize>) {
        let commits: Vec<Vec<Op>> = ops.iter().map(|op| vec![op.clone()]).collect();
        let (bytes, ends) = encode_commits(&commits);
        (bytes, ends.into_iter().flatten().collect())
    }

    /// The key of the tests' segments.
    const KEY: fn() -> Key = || Key::new(0x5eed_5a17);
    const H: usize = SEGMENT_HEADER;

    /// A segment (its header, then these commits' records, lsns from 1),
    /// and each commit's record ends.
    fn encode_commits(commits: &[Vec<Op>]) -> (Vec<u8>, Vec<Vec<usize>>) {
        let mut bytes = segment_header(KEY()).to_vec();
        let mut ends = Vec::new();
        let mut lsn = 0;
        for ops in commits {
            let mut these = Vec::new();
            for (i, op) in ops.iter().enumerate() {
                lsn += 1;
                let start = bytes.len();
                encode(KEY(), lsn, op, &mut bytes);
                if i == 0 {
                    start_commit(KEY(), &mut bytes[start..]);
                }
                these.push(bytes.len());
            }
            ends.push(these);
        }
        (bytes, ends)
    }

    fn commits_strategy() -> impl Strategy<Value = Vec<Vec<Op>>> {
        proptest::collection::vec(proptest::collection::vec(op_strategy(), 1..5), 1..6)
    }

    #[test]
    fn zeros_are_not_records_but_the_end() {
        let s = scan(&[0; 100]).unwrap();
        assert!(s.records.is_empty());
        assert_eq!((s.valid_len, s.torn, s.used_len), (0, None, 0));
        let (mut bytes, _) = encode_all(&[Op::Delete(1), Op::Delete(2)]);
        let len = bytes.len();
        bytes.resize(4096, 0);
        let s = scan(&bytes).unwrap();
        assert_eq!(s.records.len(), 2);
        assert_eq!(
            (s.valid_len, s.torn, s.used_len),
            (len as u64, None, len as u64)
        );
    }

    #[test]
    fn writer_fills_zeroed_segments_and_moves_on() {
        let dir = tempfile::tempdir().unwrap();
        let start = Start {
            segment_bytes: 4096,
            ..Start::new(1)
        };
        let mut w = Writer::open(dir.path(), start).unwrap();
        let mut lsn = 0;
        let (mut waited, mut zero_filled) = (0, 0);
        for round in 0..90 {
            // Two rounds in three find a spare ready; the third may not
            // (then the segment appends past its zeros).
            if round % 3 != 0 {
                w.wait_for_spare();
                waited += 1;
            }
            for _ in 0..(round % 7 + 1) {
                lsn = w.append(&Op::Create(vec![b'x'; 100]));
            }
            w.commit().unwrap();
            zero_filled += usize::from(w.zero_filled());
            // What a SIGKILL here would leave recovers every record so far.
            assert_eq!(recovered_lsns(dir.path()), (1..=lsn).collect::<Vec<_>>());
        }
        assert!(
            zero_filled >= waited,
            "{zero_filled} commits over zeros, {waited} waited"
        );
        let segs = segments(dir.path()).unwrap();
        assert!(segs.len() >= 5, "{} segments", segs.len());
        let current = fs::metadata(&segs.last().unwrap().1).unwrap().len();
        assert_eq!(current, 4096, "the current segment keeps its size");
        // Compaction removes the covered segments and keeps the current.
        w.rotate_and_compact(lsn).unwrap();
        let left = segments(dir.path()).unwrap();
        assert_eq!(left.len(), 1);
        drop(w);
        assert!(!dir.path().join(crate::spare::SPARE).exists());
    }

    #[test]
    fn a_reopened_writer_goes_on_over_the_zeros_and_cuts_a_torn_batch() {
        let dir = tempfile::tempdir().unwrap();
        let zeroed = |next_lsn| Start {
            segment_bytes: 4096,
            ..Start::new(next_lsn)
        };
        let mut w = Writer::open(dir.path(), zeroed(1)).unwrap();
        w.wait_for_spare();
        w.append(&Op::Delete(1));
        w.commit().unwrap();
        assert!(w.zero_filled());
        drop(w);
        // A restart: the last segment has zeros after its record.
        let reopen = |next_lsn| {
            let segs = segments(dir.path()).unwrap();
            let s = scan(&fs::read(&segs.last().unwrap().1).unwrap()).unwrap();
            let start = Start {
                segments: segs,
                valid_len: s.valid_len,
                torn: s.torn.is_some(),
                format: s.format,
                ..zeroed(next_lsn)
            };
            Writer::open(dir.path(), start).unwrap()
        };
        let mut w = reopen(2);
        assert!(w.zero_filled());
        w.append(&Op::Delete(2));
        w.commit().unwrap();
        assert!(w.zero_filled(), "written over the zeros, not appended");
        assert_eq!(recovered_lsns(dir.path()), vec![1, 2]);
        drop(w);
        // A torn batch after them: cut on reopening, then written over.
        let last = segments(dir.path()).unwrap().pop().unwrap().1;
        let mut bytes = fs::read(&last).unwrap();
        let end = scan(&bytes).unwrap().valid_len as usize;
        let (torn, _) = encode_commits(&[vec![Op::Delete(3), Op::Delete(4)]]);
        let torn = &torn[H..];
        bytes[end + 30..end + torn.len()].copy_from_slice(&torn[30..]);
        fs::write(&last, &bytes).unwrap();
        let mut w = reopen(5);
        w.append(&Op::Delete(5));
        w.commit().unwrap();
        assert_eq!(recovered_lsns(dir.path()), vec![1, 2, 5]);
    }

    /// The lsns of every record in `dir`'s segments, in order; each
    /// segment whole (no torn tail) and holding no lsn below its name's.
    fn recovered_lsns(dir: &std::path::Path) -> Vec<u64> {
        let mut lsns = Vec::new();
        for (first, path) in segments(dir).unwrap() {
            let s = scan(&fs::read(path).unwrap()).unwrap();
            assert_eq!(s.torn, None);
            for r in &s.records {
                assert!(r.lsn >= first);
                lsns.push(r.lsn);
            }
        }
        lsns
    }

    #[test]
    fn writer_appends_commits_and_compacts() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::open(dir.path(), Start::new(1)).unwrap();
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
        fn a_torn_last_commit_is_cut_and_nothing_before_it(
            commits in commits_strategy(),
            kept in proptest::collection::vec(any::<bool>(), 64),
            zeros in 0..200usize,
        ) {
            // Blocks of 16 bytes of the last commit reach the disk or not,
            // in any combination; zeros follow (a zero-filled segment).
            let (mut bytes, ends) = encode_commits(&commits);
            let before = ends.len().checked_sub(2).map_or(H, |k| *ends[k].last().unwrap());
            for (b, block) in bytes[before..].chunks_mut(16).enumerate() {
                if !kept[b % kept.len()] {
                    block.fill(0);
                }
            }
            bytes.resize(bytes.len() + zeros, 0);
            let s = scan(&bytes).unwrap();
            let earlier: usize = commits[..commits.len() - 1].iter().map(Vec::len).sum();
            prop_assert!(s.records.len() >= earlier);
            prop_assert!(s.valid_len >= before as u64);
            for (i, r) in s.records.iter().enumerate() {
                prop_assert_eq!(r.lsn, i as u64 + 1);
            }
        }

        #[test]
        fn damage_before_the_last_commit_refuses(
            commits in commits_strategy().prop_filter("two commits", |c| c.len() >= 2),
            which in any::<prop::sample::Index>(),
            at in any::<prop::sample::Index>(),
            flip in 1..=255u8,
            zeros in 0..200usize,
        ) {
            let (mut bytes, ends) = encode_commits(&commits);
            let k = which.index(commits.len() - 1);
            let start = if k > 0 { *ends[k - 1].last().unwrap() } else { H };
            let pos = start + at.index(ends[k].last().unwrap() - start);
            bytes[pos] ^= flip;
            bytes.resize(bytes.len() + zeros, 0);
            let record = ends.iter().flatten().filter(|&&e| e <= pos).max().copied().unwrap_or(H);
            let err = scan(&bytes).unwrap_err();
            prop_assert_eq!(err.offset, record as u64);
            prop_assert!(err.next_valid as usize <= *ends[k].last().unwrap());
        }

        #[test]
        fn any_bytes_scan_without_panic_and_agree_with_themselves(
            commits in commits_strategy(),
            noise in proptest::collection::vec(any::<u8>(), 0..300),
            at in any::<prop::sample::Index>(),
            zeros in 0..100usize,
        ) {
            // Records, arbitrary bytes over any part of them, zeros after:
            // what a damaged disk can hand recovery.
            // (Damage to the header: `a_damaged_header_refuses_or_holds_nothing`.)
            let (mut bytes, _) = encode_commits(&commits);
            let from = H + at.index(bytes.len() - H + 1);
            let to = (from + noise.len()).min(bytes.len());
            bytes[from..to].copy_from_slice(&noise[..to - from]);
            bytes.extend_from_slice(&noise[to - from..]);
            bytes.resize(bytes.len() + zeros, 0);
            match scan(&bytes) {
                Ok(s) => {
                    prop_assert_eq!(s.format, Some(Format::V2(KEY())));
                    prop_assert!(s.valid_len <= s.used_len && s.used_len <= bytes.len() as u64);
                    prop_assert_eq!(s.torn.is_some(), s.valid_len < s.used_len);
                    prop_assert!(bytes[s.used_len as usize..].iter().all(|&b| b == 0));
                    let mut at = H;
                    for r in &s.records {
                        let (decoded, n) = decode(&bytes[at..], Format::V2(KEY())).unwrap();
                        prop_assert_eq!(&decoded, r);
                        at += n;
                    }
                    prop_assert_eq!(at as u64, s.valid_len);
                }
                Err(c) => {
                    prop_assert!(c.offset < c.next_valid);
                    prop_assert!(decode(&bytes[c.next_valid as usize..], Format::V2(KEY())).is_ok());
                }
            }
        }

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
            let valid = match whole {
                0 if cut < H => 0,
                0 => H,
                _ => ends[whole - 1],
            };
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
            let start = if ops.len() > 1 { ends[ops.len() - 2] } else { H };
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
            let start = if k > 0 { ends[k - 1] } else { H };
            let pos = start + at.index(ends[k] - start);
            bytes[pos] ^= flip;
            let err = scan(&bytes).unwrap_err();
            prop_assert_eq!(err.offset, start as u64);
            prop_assert!(err.next_valid as usize <= ends[k]);
        }
    }
}
