//! The segment header and its key: forged records, the cost of a damaged
//! tail, damaged headers, and journals of the first format.

use super::*;

/// A segment whose first commit (lsn 1) is durable and whose second, a
/// `Create` whose body holds `forged`, a crash tore: its first 12 bytes
/// (the record's header) never reached the disk. Returns the bytes and
/// where the torn commit starts.
fn torn_commit_around(forged: &[u8]) -> (Vec<u8>, usize) {
    let mut body = br#"{"name":""#.to_vec();
    body.extend_from_slice(forged);
    body.extend_from_slice(br#"","price":1}"#);
    let (mut bytes, ends) = encode_commits(&[vec![Op::Delete(1)], vec![Op::Create(body)]]);
    let torn = ends[0][0];
    bytes[torn..torn + HEADER_LEN].fill(0);
    (bytes, torn)
}

#[test]
fn a_record_inside_a_body_never_passes_for_a_commit() {
    // What a client can send: a record encoded in the first format
    // (unkeyed), or in this one with a key it guessed.
    let mut v1 = Vec::new();
    encode_v1(99, &Op::Delete(7), true, &mut v1);
    let mut guessed = Vec::new();
    encode(Key::new(0), 99, &Op::Delete(7), &mut guessed);
    start_commit(Key::new(0), &mut guessed);
    for forged in [v1, guessed] {
        let (bytes, torn) = torn_commit_around(&forged);
        // The torn last commit is cut, as any torn last commit; the forged
        // bytes do not make it look like damage before a later commit.
        let s = scan(&bytes).unwrap();
        assert_eq!(s.records.len(), 1);
        assert_eq!(s.torn.map(|t| t.0), Some(torn as u64));
        // Whole, the body is a body.
        let (whole, _) = encode_commits(&[vec![Op::Delete(1)], vec![Op::Create(forged)]]);
        assert_eq!(scan(&whole).unwrap().records.len(), 2);
    }
}

#[test]
fn a_damaged_tail_costs_checksums_in_proportion_to_its_size() {
    // A torn commit whose bytes claim, every fourth byte, a record running
    // to the end of the segment (up to the largest): each offset once
    // checksummed up to a megabyte; with the header check, a few bytes.
    let (mut bytes, ends) = encode_commits(&[vec![Op::Delete(1)]]);
    let start = ends[0][0];
    let tail = 4 << 20;
    bytes.resize(start + tail, 0x41);
    for p in (start..bytes.len() - 16).step_by(4) {
        let len = (bytes.len() - p - HEADER_LEN).min(MAX_PAYLOAD) as u32;
        bytes[p..p + 4].copy_from_slice(&len.to_le_bytes());
    }
    let before = count::bytes();
    let s = scan(&bytes).unwrap();
    let checksummed = count::bytes() - before;
    assert_eq!(s.records.len(), 1);
    assert_eq!(s.torn.map(|t| t.0), Some(start as u64));
    assert!(
        checksummed <= 32 * tail as u64,
        "{checksummed} bytes checksummed for a tail of {tail}"
    );
}

#[test]
fn a_damaged_header_refuses_or_holds_nothing() {
    let (bytes, _) = encode_commits(&[vec![Op::Delete(1)], vec![Op::Delete(2)]]);
    // A byte of the salt, of the magic, of the header's checksum: records
    // follow, so refused (never cut: they may be acknowledged).
    for at in [0, 5, 9, 15, 17] {
        let mut b = bytes.clone();
        b[at] ^= 0x20;
        let err = scan(&b).unwrap_err();
        assert_eq!((err.offset, err.next_valid), (0, H as u64), "byte {at}");
    }
    // The header and the first record lost together (a sector zeroed or
    // overwritten): refused, not cut, though no salt is left to read the
    // records after it by.
    for fill in [0u8, 0x5a] {
        let mut b = bytes.clone();
        b[..H + 20].fill(fill);
        let err = scan(&b).unwrap_err();
        assert_eq!(err.offset, 0, "filled with {fill:#x}: {err:?}");
    }
    // A header and zeros (a fresh segment), damaged: it holds nothing.
    let mut fresh = segment_header(KEY()).to_vec();
    fresh.resize(4096, 0);
    fresh[10] ^= 1;
    let s = scan(&fresh).unwrap();
    assert_eq!((s.format, s.valid_len, s.records.len()), (None, 0, 0));
    // A header a crash cut short: nothing, and a writer starts it again.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(segment_name(1));
    fs::write(&path, &segment_header(KEY())[..11]).unwrap();
    let s = scan(&fs::read(&path).unwrap()).unwrap();
    assert_eq!((s.format, s.valid_len, s.records.len()), (None, 0, 0));
    let mut w = Writer::open(dir.path(), start_after(dir.path(), 1)).unwrap();
    w.append(&Op::Delete(1));
    w.commit().unwrap();
    assert_eq!(recovered_lsns(dir.path()), vec![1]);
}

/// Where a writer starts in `dir`, from a scan of its last segment.
fn start_after(dir: &std::path::Path, next_lsn: u64) -> Start {
    let segs = segments(dir).unwrap();
    let s = segs
        .last()
        .map(|(_, p)| scan(&fs::read(p).unwrap()).unwrap());
    Start {
        segments: segs,
        valid_len: s.as_ref().map_or(0, |s| s.valid_len),
        torn: s.as_ref().is_some_and(|s| s.torn.is_some()),
        format: s.and_then(|s| s.format),
        ..Start::new(next_lsn)
    }
}

#[test]
fn a_journal_of_the_first_format_is_read_and_goes_on_in_a_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    // Two commits in the first format, then a torn third.
    let mut old = Vec::new();
    encode_v1(1, &Op::Create(b"a".to_vec()), true, &mut old);
    encode_v1(2, &Op::Delete(1), false, &mut old);
    encode_v1(3, &Op::Delete(2), true, &mut old);
    let end = old.len();
    let mut torn = Vec::new();
    encode_v1(4, &Op::Delete(3), true, &mut torn);
    old.extend_from_slice(&torn[5..]);
    let path = dir.path().join(segment_name(1));
    fs::write(&path, &old).unwrap();
    let s = scan(&old).unwrap();
    assert_eq!(s.format, Some(Format::V1));
    assert_eq!(
        s.records.iter().map(|r| r.lsn).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(s.torn.map(|t| t.0), Some(end as u64));
    // The writer cuts the old segment's torn tail (it is no longer the
    // last) and goes on in a segment of this format.
    let mut w = Writer::open(dir.path(), start_after(dir.path(), 5)).unwrap();
    w.append(&Op::Delete(5));
    w.commit().unwrap();
    drop(w);
    assert_eq!(fs::metadata(&path).unwrap().len(), end as u64);
    assert_eq!(recovered_lsns(dir.path()), vec![1, 2, 3, 5]);
    let segs = segments(dir.path()).unwrap();
    assert_eq!(segs.iter().map(|s| s.0).collect::<Vec<_>>(), [1, 5]);
    let new = scan(&fs::read(&segs[1].1).unwrap()).unwrap();
    let Some(Format::V2(key)) = new.format else {
        panic!("{:?}", new.format)
    };
    // Reopened, it goes on in that segment, with its key.
    let mut w = Writer::open(dir.path(), start_after(dir.path(), 6)).unwrap();
    w.append(&Op::Delete(6));
    w.commit().unwrap();
    assert_eq!(recovered_lsns(dir.path()), vec![1, 2, 3, 5, 6]);
    let again = scan(&fs::read(&segs[1].1).unwrap()).unwrap();
    assert_eq!(again.format, Some(Format::V2(key)));
}

#[test]
fn every_segment_of_a_writer_has_its_key_and_each_journal_its_own() {
    let mut keys = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let start = Start {
            segment_bytes: 4096,
            ..Start::new(1)
        };
        let mut w = Writer::open(dir.path(), start).unwrap();
        for round in 0..40 {
            w.wait_for_spare();
            for _ in 0..(round % 5 + 1) {
                w.append(&Op::Create(vec![b'x'; 100]));
            }
            w.commit().unwrap();
        }
        drop(w);
        let segs = segments(dir.path()).unwrap();
        assert!(segs.len() >= 3, "{} segments", segs.len());
        let formats: Vec<_> = segs
            .iter()
            .map(|(_, p)| scan(&fs::read(p).unwrap()).unwrap().format)
            .collect();
        assert!(formats.iter().all(|f| *f == formats[0]), "{formats:?}");
        keys.push(formats[0]);
    }
    assert_ne!(keys[0], keys[1]);
}

proptest! {
    /// Any bytes at all, the header's included: a scan never panics, and
    /// what it returns agrees with itself.
    #[test]
    fn any_file_scans_without_panic(
        commits in commits_strategy(),
        noise in proptest::collection::vec(any::<u8>(), 0..64),
        at in any::<prop::sample::Index>(),
        whole in any::<bool>(),
    ) {
        let bytes = if whole {
            noise
        } else {
            let (mut bytes, _) = encode_commits(&commits);
            let from = at.index(bytes.len());
            let to = (from + noise.len()).min(bytes.len());
            bytes[from..to].copy_from_slice(&noise[..to - from]);
            bytes
        };
        if let Ok(s) = scan(&bytes) {
            prop_assert!(s.valid_len <= s.used_len && s.used_len <= bytes.len() as u64);
            let mut at = s.format.map_or(0, Format::start);
            for r in &s.records {
                let (again, n) = decode(&bytes[at..], s.format.unwrap()).unwrap();
                prop_assert_eq!(&again, r);
                at += n;
            }
            prop_assert_eq!(at as u64, s.valid_len);
        }
    }
}
