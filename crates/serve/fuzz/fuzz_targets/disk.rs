//! Bytes from the data folder, as recovery reads them: a journal segment
//! (raw, or a valid segment of records built from the input and then
//! damaged by it) and a snapshot (raw, or the input framed with the
//! snapshot's magic and a valid checksum, to reach the item decoder).
//! Nothing may panic, what a scan returns must agree with itself, and no
//! decoder may allocate more than its input's size.
//!
//! From `crates/serve`:
//! `cargo fuzz run disk -s none /tmp/fuzz-disk -- -max_total_time=60`
#![no_main]

use libfuzzer_sys::fuzz_target;
use statepipe_serve::journal::{decode, encode, scan, segment_header, start_commit, Key, Op};
use statepipe_serve::store::decode_snapshot;

fuzz_target!(|bytes: &[u8]| {
    let Some((&mode, rest)) = bytes.split_first() else {
        return;
    };
    match mode % 4 {
        0 => check_scan(rest),
        1 => check_scan(&damaged_segment(rest)),
        2 => {
            let _ = decode_snapshot(rest);
        }
        _ => {
            let mut framed = b"SPSNAP01".to_vec();
            framed.extend_from_slice(rest);
            let crc = crc32c::crc32c(&framed[8..]);
            framed.extend_from_slice(&crc.to_le_bytes());
            let _ = decode_snapshot(&framed);
        }
    }
});

/// A segment of up to 16 records read from `input` (each a byte, whose
/// high bit marks a record that starts a commit and whose rest modulo 48
/// is its body's length, a zero length a delete; then the body), then the
/// rest of the input as (position, xor) pairs of damage.
fn damaged_segment(input: &[u8]) -> Vec<u8> {
    let key = Key::new(0x5eed);
    let mut seg = segment_header(key).to_vec();
    let mut at = 0;
    let mut lsn = 0;
    while at < input.len() && lsn < 16 {
        let (starts, n) = (input[at] & 0x80 != 0, usize::from(input[at] & 0x7f) % 48);
        at += 1;
        let body = &input[at..(at + n).min(input.len())];
        at += body.len();
        lsn += 1;
        let op = if n == 0 {
            Op::Delete(lsn)
        } else {
            Op::Create(body.to_vec())
        };
        let start = seg.len();
        encode(key, lsn, &op, &mut seg);
        if starts {
            start_commit(key, &mut seg[start..]);
        }
    }
    for pair in input[at..].chunks_exact(3) {
        let pos = usize::from(u16::from_le_bytes([pair[0], pair[1]])) % seg.len();
        seg[pos] ^= pair[2];
    }
    seg
}

fn check_scan(seg: &[u8]) {
    match scan(seg) {
        Ok(s) => {
            assert!(s.valid_len <= s.used_len && s.used_len <= seg.len() as u64);
            assert_eq!(s.torn.is_some(), s.valid_len < s.used_len);
            assert!(seg[s.used_len as usize..].iter().all(|&b| b == 0));
            let body: usize = s
                .records
                .iter()
                .map(|r| match &r.op {
                    Op::Create(b) => b.len(),
                    Op::Delete(_) => 0,
                })
                .sum();
            assert!(body <= seg.len());
            if let Some(format) = s.format {
                let mut at = format.start();
                for r in &s.records {
                    let (again, n) = decode(&seg[at..], format).expect("a scanned record decodes");
                    assert_eq!(&again, r);
                    at += n;
                }
                assert_eq!(at as u64, s.valid_len);
            } else {
                assert!(s.records.is_empty() && s.valid_len == 0);
            }
        }
        Err(c) => {
            assert!(c.offset < c.next_valid && c.next_valid <= seg.len() as u64);
        }
    }
}
