//! A journal record's encoding, and the mark on a commit's first record.

/// Bytes before a record's payload: length and checksum.
pub const HEADER_LEN: usize = 8;
/// The smallest payload: kind and lsn.
const MIN_PAYLOAD: usize = 9;
/// The largest payload: a 1 MiB body plus kind and lsn.
pub const MAX_PAYLOAD: usize = (1 << 20) + MIN_PAYLOAD;

const KIND_CREATE: u8 = 1;
const KIND_DELETE: u8 = 2;
/// Set in the kind of the first record of a commit.
const STARTS_COMMIT: u8 = 0x80;

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

/// Marks the encoded record at the start of `record` as the first of its
/// commit (and checksums it again).
pub(super) fn start_commit(record: &mut [u8]) {
    record[HEADER_LEN] |= STARTS_COMMIT;
    let len = u32::from_le_bytes(record[0..4].try_into().expect("4 bytes")) as usize;
    let crc = crc32c::crc32c(&record[HEADER_LEN..HEADER_LEN + len]);
    record[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The lsn of the encoded record at the start of `record` (unchecked: a
/// record this process encoded).
pub(super) fn lsn_of(record: &[u8]) -> u64 {
    let at = HEADER_LEN + 1;
    u64::from_le_bytes(record[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes the record at the start of `bytes`: the record and its encoded
/// length, or why it is not one.
pub fn decode(bytes: &[u8]) -> Result<(Record, usize), &'static str> {
    decode_marked(bytes).map(|(record, n, _)| (record, n))
}

/// [`decode`], and whether the record starts a commit.
pub(super) fn decode_marked(bytes: &[u8]) -> Result<(Record, usize, bool), &'static str> {
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
    let op = match payload[0] & !STARTS_COMMIT {
        KIND_CREATE => Op::Create(data.to_vec()),
        KIND_DELETE if data.len() == 8 => {
            Op::Delete(u64::from_le_bytes(data.try_into().expect("8 bytes")))
        }
        KIND_DELETE => return Err("delete record of the wrong length"),
        _ => return Err("unknown kind"),
    };
    Ok((
        Record { lsn, op },
        HEADER_LEN + len,
        payload[0] & STARTS_COMMIT != 0,
    ))
}
