use statepipe_serve::journal::{encode, scan, Op};
fn mark(rec: &mut [u8]) {
    rec[8] |= 0x80;
    let len = u32::from_le_bytes(rec[0..4].try_into().unwrap()) as usize;
    let crc = crc32c::crc32c(&rec[8..8 + len]);
    rec[4..8].copy_from_slice(&crc.to_le_bytes());
}
fn main() {
    // (a) One acknowledged commit, then a torn last commit whose second
    // record's body embeds a valid record marked as starting a commit.
    let mut bytes = Vec::new();
    encode(1, &Op::Delete(1), &mut bytes);
    mark(&mut bytes);
    let durable = bytes.len();
    let mut forged = Vec::new();
    encode(99, &Op::Delete(7), &mut forged);
    mark(&mut forged);
    let mut body = b"{\"name\":\"".to_vec();
    body.extend_from_slice(&forged);
    body.extend_from_slice(b"\",\"price\":1}");
    let start = bytes.len();
    encode(2, &Op::Create(body), &mut bytes);
    mark(&mut bytes[start..]);
    // The crash: the torn commit's first bytes (its header) never reached the disk.
    for b in &mut bytes[start..start + 8] { *b = 0; }
    println!("(a) torn last commit embedding a forged record: {:?}", scan(&bytes).map(|s| (s.records.len(), s.valid_len, durable)));
    // (b) A torn commit whose bytes claim plausible record lengths at every 4th byte.
    for mib in [1usize, 2, 4] {
        let n = mib << 20;
        let mut tail = vec![0x41u8; n];
        for p in (0..n - 16).step_by(4) {
            let len = ((n - p - 8) as u32).min((1 << 20) + 9);
            tail[p..p + 4].copy_from_slice(&len.to_le_bytes());
        }
        let mut b = bytes[..durable].to_vec();
        b.extend_from_slice(&tail);
        let t = std::time::Instant::now();
        let s = scan(&b);
        println!("(b) {mib} MiB torn tail: scan {:.2} s, {:?}", t.elapsed().as_secs_f64(), s.map(|s| (s.records.len(), s.torn)));
    }
}
