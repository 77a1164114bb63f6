//! A journal record's encoding, the mark on a commit's first record, and
//! the segment header whose salt keys every checksum in the segment.

/// The segment header: magic, salt, and a checksum of both.
pub const SEGMENT_HEADER: usize = 24;
const MAGIC: &[u8; 8] = b"SPJRNL2\n";
/// Bytes before a record's payload: length, header check, payload checksum.
pub const HEADER_LEN: usize = 12;
/// A record's header in the first format (segments without a header).
const V1_HEADER_LEN: usize = 8;
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

/// A segment's salt, secret to the process that wrote it, with which
/// every checksum in the segment starts: bytes a client sent (a request
/// body holding an encoded record) never pass for a record of the
/// segment, and a record from another segment or journal neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    salt: u64,
    /// `crc32c(salt)`: where every checksum of the segment starts.
    seed: u32,
}

impl Key {
    /// The key of `salt`.
    pub fn new(salt: u64) -> Key {
        Key {
            salt,
            seed: crc32c::crc32c(&salt.to_le_bytes()),
        }
    }

    /// A fresh random key, from the operating system's generator.
    ///
    /// # Errors
    ///
    /// When the generator cannot be read.
    pub fn random() -> std::io::Result<Key> {
        getrandom::u64()
            .map(Key::new)
            .map_err(|e| std::io::Error::other(format!("no random salt for the journal: {e}")))
    }

    /// The salt.
    pub fn salt(&self) -> u64 {
        self.salt
    }

    fn crc(&self, parts: &[&[u8]]) -> u32 {
        parts.iter().fold(self.seed, |c, p| {
            checksummed(p.len());
            crc32c::crc32c_append(c, p)
        })
    }

    /// The header check of a record: its length, payload checksum, kind
    /// and lsn (the first [`MIN_PAYLOAD`] bytes of the payload).
    fn check(&self, record: &[u8]) -> u32 {
        self.crc(&[&record[0..4], &record[8..HEADER_LEN + MIN_PAYLOAD]])
    }
}

/// The format of a segment's records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Segments without a header, written before salts: unkeyed
    /// `crc32c(payload)`, no header check. Read, never written.
    V1,
    /// A segment header, then records checked with its key.
    V2(Key),
}

impl Format {
    /// Where the records of a segment of this format start.
    pub fn start(self) -> usize {
        match self {
            Format::V1 => 0,
            Format::V2(_) => SEGMENT_HEADER,
        }
    }
}

/// The header of a segment keyed by `key`.
pub fn segment_header(key: Key) -> [u8; SEGMENT_HEADER] {
    let mut h = [0u8; SEGMENT_HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(&key.salt.to_le_bytes());
    let crc = crc32c::crc32c(&h[..16]);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    h
}

/// What the first bytes of a segment say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Header {
    /// A whole, valid segment header.
    Valid(Key),
    /// No header whole, and nothing else: a segment whose creation a crash
    /// cut short (its header is written and synced before any record).
    Missing,
    /// The magic, with a salt or checksum that does not check out.
    Damaged,
    /// Not a segment header: a segment of the first format.
    None,
}

/// Reads the segment header at the start of `bytes`.
pub(super) fn read_header(bytes: &[u8]) -> Header {
    let n = bytes.len().min(MAGIC.len());
    if bytes.len() < SEGMENT_HEADER {
        // Shorter than a header and than any first-format record: what a
        // crash left of a header, or zeros.
        let partial = bytes[..n] == MAGIC[..n] || bytes.iter().all(|&b| b == 0);
        return if partial {
            Header::Missing
        } else {
            Header::None
        };
    }
    if &bytes[..8] != MAGIC {
        return if bytes[..SEGMENT_HEADER].iter().all(|&b| b == 0) {
            Header::Missing
        } else {
            Header::None
        };
    }
    let crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..16]) != crc || bytes[20..24] != [0; 4] {
        return Header::Damaged;
    }
    Header::Valid(Key::new(u64::from_le_bytes(
        bytes[8..16].try_into().expect("8 bytes"),
    )))
}

/// The key in a header whose magic is gone, if the record after it checks
/// out with that key: a damaged header, not a segment of the first format.
pub(super) fn key_behind_damaged_magic(bytes: &[u8]) -> Option<Key> {
    let salt = bytes.get(8..16)?;
    let key = Key::new(u64::from_le_bytes(salt.try_into().expect("8 bytes")));
    let format = Format::V2(key);
    decode_marked(bytes.get(SEGMENT_HEADER..)?, format).ok()?;
    Some(key)
}

/// Appends the encoding of a record, checked with `key`, to `out`.
pub fn encode(key: Key, lsn: u64, op: &Op, out: &mut Vec<u8>) {
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
    out.extend_from_slice(&[0; 8]);
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
    seal(key, &mut out[start..]);
}

/// Writes the checksum and header check of the encoded record at the
/// start of `record`.
fn seal(key: Key, record: &mut [u8]) {
    let len = u32::from_le_bytes(record[0..4].try_into().expect("4 bytes")) as usize;
    let crc = key.crc(&[&record[HEADER_LEN..HEADER_LEN + len]]);
    record[8..12].copy_from_slice(&crc.to_le_bytes());
    let check = key.check(record);
    record[4..8].copy_from_slice(&check.to_le_bytes());
}

/// Marks the encoded record at the start of `record` as the first of its
/// commit (and checksums it again).
pub fn start_commit(key: Key, record: &mut [u8]) {
    record[HEADER_LEN] |= STARTS_COMMIT;
    seal(key, record);
}

/// The lsn of the encoded record at the start of `record` (unchecked: a
/// record this process encoded).
pub(super) fn lsn_of(record: &[u8]) -> u64 {
    let at = HEADER_LEN + 1;
    u64::from_le_bytes(record[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes the record at the start of `bytes`, of a segment of `format`:
/// the record and its encoded length, or why it is not one.
pub fn decode(bytes: &[u8], format: Format) -> Result<(Record, usize), &'static str> {
    decode_marked(bytes, format).map(|(record, n, _)| (record, n))
}

/// [`decode`], and whether the record starts a commit.
///
/// A candidate costs a few dozen bytes of checksum before its payload is
/// checksummed (its header check), so that looking for a record at every
/// offset of a damaged segment costs time in proportion to its size.
pub(super) fn decode_marked(
    bytes: &[u8],
    format: Format,
) -> Result<(Record, usize, bool), &'static str> {
    let head = match format {
        Format::V1 => V1_HEADER_LEN,
        Format::V2(_) => HEADER_LEN,
    };
    if bytes.len() < head {
        return Err("short header");
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes")) as usize;
    if !(MIN_PAYLOAD..=MAX_PAYLOAD).contains(&len) {
        return Err("length out of range");
    }
    let Some(payload) = bytes.get(head..head + len) else {
        return Err("short payload");
    };
    let ok = match format {
        Format::V1 => {
            let crc = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
            checksummed(len);
            crc32c::crc32c(payload) == crc
        }
        Format::V2(key) => {
            let check = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
            if key.check(bytes) != check {
                return Err("header check mismatch");
            }
            let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
            key.crc(&[payload]) == crc
        }
    };
    if !ok {
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
        head + len,
        payload[0] & STARTS_COMMIT != 0,
    ))
}

#[inline]
fn checksummed(_n: usize) {
    #[cfg(test)]
    count::add(_n);
}

/// A record in the first format (tests: journals written before salts).
#[cfg(test)]
pub(super) fn encode_v1(lsn: u64, op: &Op, starts: bool, out: &mut Vec<u8>) {
    let start = out.len();
    // The second format's record, then its header cut to the first's.
    encode(Key::new(0), lsn, op, out);
    out.drain(start + 4..start + 8);
    if starts {
        out[start + V1_HEADER_LEN] |= STARTS_COMMIT;
    }
    let crc = crc32c::crc32c(&out[start + V1_HEADER_LEN..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Counts the bytes checksummed on this thread (tests: the work a scan
/// does, bounded by its input's size).
#[cfg(test)]
pub(super) mod count {
    use std::cell::Cell;

    thread_local!(static BYTES: Cell<u64> = const { Cell::new(0) });

    pub(in crate::journal) fn add(n: usize) {
        BYTES.with(|b| b.set(b.get() + n as u64));
    }

    /// The bytes checksummed on this thread so far.
    pub(in crate::journal) fn bytes() -> u64 {
        BYTES.with(Cell::get)
    }
}
