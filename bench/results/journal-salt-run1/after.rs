//! After: the same torn commits in a segment of the salted format.
use statepipe_serve::journal::{encode, scan, segment_header, Key, Op, HEADER_LEN};
fn mark_v1(rec: &mut [u8]) {
    rec[8] |= 0x80;
    let len = u32::from_le_bytes(rec[0..4].try_into().unwrap()) as usize;
    let crc = crc32c::crc32c(&rec[8..8 + len]);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
}
fn main() {
    let key = Key::random().unwrap();
    // One durable record (a scan needs no commit mark on it).
    let mut bytes = segment_header(key).to_vec();
    encode(key, 1, &Op::Delete(1), &mut bytes);
    let durable = bytes.len();
    // (a) the first format's forged record, as a client can send it
    let mut forged = Vec::new();
    {
        let len: u32 = 9 + 8;
        forged.extend_from_slice(&len.to_le_bytes());
        forged.extend_from_slice(&[0; 4]);
        forged.push(2);
        forged.extend_from_slice(&99u64.to_le_bytes());
        forged.extend_from_slice(&7u64.to_le_bytes());
        mark_v1(&mut forged);
    }
    let mut body = b"{\"name\":\"".to_vec();
    body.extend_from_slice(&forged);
    body.extend_from_slice(b"\",\"price\":1}");
    let s = bytes.len();
    encode(key, 2, &Op::Create(body), &mut bytes);
    for b in &mut bytes[s..s + HEADER_LEN] { *b = 0; }
    println!("(a) torn last commit embedding a forged record: {:?}", scan(&bytes).map(|s| (s.records.len(), s.valid_len, s.torn)));
    for mib in [1usize, 2, 4, 64] {
        let n = mib << 20;
        let mut b = bytes[..durable].to_vec();
        let base = b.len();
        b.resize(base + n, 0x41);
        for p in (base..b.len() - 16).step_by(4) {
            let len = ((b.len() - p - HEADER_LEN) as u32).min((1 << 20) + 9);
            b[p..p + 4].copy_from_slice(&len.to_le_bytes());
        }
        let t = std::time::Instant::now();
        let s = scan(&b);
        println!("(b) {mib} MiB torn tail: scan {:.3} s, {:?}", t.elapsed().as_secs_f64(), s.map(|s| (s.records.len(), s.torn)));
    }
}
