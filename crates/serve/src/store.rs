//! The items, their snapshot file and recovery from snapshot + journal.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::error::ServeError;
use crate::journal::{self, Op};

/// An item as a client sent it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// Its name.
    pub name: String,
    /// Its price (finite).
    pub price: f64,
}

/// Why a body is not an item: the JSON error body names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadItem {
    /// The field at fault, or `None` when the body is not a JSON object.
    pub field: Option<&'static str>,
    /// What is wrong.
    pub message: String,
}

/// Decodes a `POST /item` body: a JSON object with a string `name` and a
/// number `price` (other fields are ignored).
///
/// # Errors
///
/// [`BadItem`] naming the missing or ill-typed field.
pub fn decode_item(body: &[u8]) -> Result<Item, BadItem> {
    // The common case, without building a `serde_json::Value`: a body that
    // this decodes is one the general path below accepts with the same
    // result; anything else (an error to name, duplicate keys) goes there.
    #[derive(serde::Deserialize)]
    struct Plain<'a> {
        #[serde(borrow)]
        name: std::borrow::Cow<'a, str>,
        price: f64,
    }
    if let Ok(plain) = serde_json::from_slice::<Plain<'_>>(body) {
        if plain.price.is_finite() {
            return Ok(Item {
                name: plain.name.into_owned(),
                price: plain.price,
            });
        }
    }
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| BadItem {
        field: None,
        message: format!("invalid JSON: {e}"),
    })?;
    let serde_json::Value::Object(map) = value else {
        return Err(BadItem {
            field: None,
            message: "the body must be a JSON object".into(),
        });
    };
    let name = match map.get("name") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(_) => return Err(bad("name", "must be a string")),
        None => return Err(bad("name", "is missing")),
    };
    let price = match map.get("price") {
        Some(serde_json::Value::Number(n)) => n.as_f64().filter(|p| p.is_finite()),
        Some(_) => return Err(bad("price", "must be a number")),
        None => return Err(bad("price", "is missing")),
    };
    let Some(price) = price else {
        return Err(bad("price", "must be a finite number"));
    };
    Ok(Item { name, price })
}

fn bad(field: &'static str, what: &str) -> BadItem {
    BadItem {
        field: Some(field),
        message: format!("field `{field}` {what}"),
    }
}

/// The items by id: a persistent (copy-on-write) ordered map, so that a
/// clone, a snapshot's copy of millions of items, costs O(1) and the
/// writer pays only for the nodes it changes afterwards.
pub type Items = imbl::OrdMap<u64, Arc<Item>>;

/// The items by id, and where the journal stands. A clone is O(1) (see
/// [`Items`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Store {
    /// The items (shared, immutable once created: the read view holds the
    /// same `Arc`s).
    pub items: Items,
    /// The id the next created item gets.
    pub next_id: u64,
    /// The lsn of the last write applied.
    pub last_lsn: u64,
}

impl Store {
    /// An empty store; ids start at 1.
    pub fn new() -> Self {
        Store {
            items: Items::new(),
            next_id: 1,
            last_lsn: 0,
        }
    }

    /// Adds an item journalled at `lsn`; returns its id.
    pub fn create(&mut self, lsn: u64, item: Item) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.items.insert(id, Arc::new(item));
        self.last_lsn = lsn;
        id
    }

    /// Removes item `id` (journalled at `lsn`); whether it was there.
    pub fn delete(&mut self, lsn: u64, id: u64) -> bool {
        self.last_lsn = lsn;
        self.items.remove(&id).is_some()
    }

    /// Applies a journal record as the live path did: a create whose body
    /// does not decode changed nothing then, and changes nothing now.
    pub fn replay(&mut self, lsn: u64, op: &Op) {
        match op {
            Op::Create(body) => match decode_item(body) {
                Ok(item) => {
                    self.create(lsn, item);
                }
                Err(_) => self.last_lsn = lsn,
            },
            Op::Delete(id) => {
                self.delete(lsn, *id);
            }
        }
    }
}

const SNAPSHOT: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";
const MAGIC: &[u8; 8] = b"SPSNAP01";
/// A snapshot goes to the disk in pieces of this size (see
/// [`statepipe_sys::durable::write_paced`]), so that the journal's fsyncs
/// never wait behind a whole snapshot.
const SNAPSHOT_PIECE: usize = 1 << 20;

/// Writes `store` to `dir/snapshot` atomically: a temporary file written and
/// fsynced, renamed over the old one, and the directory fsynced.
///
/// # Errors
///
/// Any I/O error; the old snapshot then stays in place.
pub fn write_snapshot(dir: &Path, store: &Store) -> io::Result<()> {
    write_snapshot_bytes(dir, &encode_snapshot(store))
}

/// The bytes of `store`'s snapshot file.
pub fn encode_snapshot(store: &Store) -> Vec<u8> {
    let names: usize = store.items.values().map(|i| i.name.len()).sum();
    let mut out = Vec::with_capacity(MAGIC.len() + 28 + store.items.len() * 24 + names);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&store.last_lsn.to_le_bytes());
    out.extend_from_slice(&store.next_id.to_le_bytes());
    out.extend_from_slice(&(store.items.len() as u64).to_le_bytes());
    for (id, item) in &store.items {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&item.price.to_bits().to_le_bytes());
        out.extend_from_slice(&(item.name.len() as u64).to_le_bytes());
        out.extend_from_slice(item.name.as_bytes());
    }
    let crc = crc32c::crc32c(&out[MAGIC.len()..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Writes the bytes of [`encode_snapshot`] to `dir/snapshot` atomically: a
/// temporary file written and fsynced, renamed over the old one, and the
/// directory fsynced.
///
/// # Errors
///
/// Any I/O error; the old snapshot then stays in place.
pub fn write_snapshot_bytes(dir: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = dir.join(SNAPSHOT_TMP);
    let written = (|| {
        let mut file = File::create(&tmp)?;
        statepipe_sys::durable::write_paced(&mut file, bytes, SNAPSHOT_PIECE)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, dir.join(SNAPSHOT))
    })();
    if let Err(e) = written {
        // A snapshot cut short by a full disk would otherwise hold the
        // space the journal needs, for good.
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    journal::sync_dir(dir)
}

/// Reads `dir/snapshot`, if there is one.
///
/// # Errors
///
/// [`ServeError::Corrupt`] if it does not check out (it is written by
/// rename, so a crash never leaves half of one).
pub fn read_snapshot(dir: &Path) -> Result<Option<Store>, ServeError> {
    let path = dir.join(SNAPSHOT);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ServeError::io("reading the snapshot", e)),
    };
    decode_snapshot(&bytes)
        .map(Some)
        .map_err(|what| ServeError::Corrupt {
            file: path.clone(),
            offset: 0,
            detail: format!("snapshot: {what}"),
        })
}

/// A snapshot from its file's bytes, or what is wrong with them.
///
/// # Errors
///
/// What does not check out: the header, the checksum, a short item, a
/// name that is not UTF-8.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Store, &'static str> {
    if bytes.len() < MAGIC.len() + 28 || &bytes[..8] != MAGIC {
        return Err("bad header");
    }
    let (body, crc) = bytes[8..].split_at(bytes.len() - 12);
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return Err("checksum mismatch");
    }
    let mut r = Reader(body);
    let last_lsn = r.u64().ok_or("short")?;
    let next_id = r.u64().ok_or("short")?;
    let count = r.u64().ok_or("short")?;
    let mut items = Items::new();
    for _ in 0..count {
        let id = r.u64().ok_or("short item")?;
        let price = f64::from_bits(r.u64().ok_or("short item")?);
        let len = r.u64().ok_or("short item")?;
        let name = r.bytes(len).ok_or("short name")?;
        let name = String::from_utf8(name.to_vec()).map_err(|_| "name not UTF-8")?;
        items.insert(id, Arc::new(Item { name, price }));
    }
    Ok(Store {
        items,
        next_id,
        last_lsn,
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u64(&mut self) -> Option<u64> {
        let b = self.bytes(8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    fn bytes(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok()?;
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
}

/// What recovery leaves: the store and where the journal goes on.
#[derive(Debug)]
pub struct Recovered {
    /// The items as of the last durable record.
    pub store: Store,
    /// The journal's segments on disk, by first lsn.
    pub segments: Vec<(u64, PathBuf)>,
    /// The valid length of the last segment.
    pub valid_len: u64,
    /// Whether the last segment has a torn tail (for the writer to cut).
    pub torn: bool,
    /// The last segment's format (its key, for the writer to go on with).
    pub format: Option<journal::Format>,
    /// The lsn the next record gets.
    pub next_lsn: u64,
    /// Records replayed from the journal.
    pub replayed: u64,
}

/// Loads the snapshot, then replays every journal record after it. A torn
/// tail of the last segment is reported (with a warning) and left for the
/// writer to cut.
///
/// # Errors
///
/// [`ServeError::Corrupt`] for damage anywhere but the last segment's tail
/// (or lsns out of order), [`ServeError::Io`] for I/O errors.
pub fn recover(dir: &Path) -> Result<Recovered, ServeError> {
    // A snapshot that a crash cut short (the data folder's lock says no
    // other process is writing one).
    match fs::remove_file(dir.join(SNAPSHOT_TMP)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            return Err(ServeError::io("removing an unfinished snapshot", e))
        }
        _ => {}
    }
    let mut store = read_snapshot(dir)?.unwrap_or_else(Store::new);
    let segments = journal::segments(dir).map_err(|e| ServeError::io("listing the journal", e))?;
    let mut valid_len = 0;
    let mut torn = false;
    let mut format = None;
    let mut last_seen = store.last_lsn;
    let mut prev_lsn = 0;
    let mut replayed = 0;
    for (i, (first, path)) in segments.iter().enumerate() {
        let bytes = fs::read(path).map_err(|e| ServeError::io("reading the journal", e))?;
        let scan = journal::scan(&bytes).map_err(|c| ServeError::Corrupt {
            file: path.clone(),
            offset: c.offset,
            detail: format!(
                "{} in a record followed by a valid one at offset {}",
                c.reason, c.next_valid
            ),
        })?;
        let last = i + 1 == segments.len();
        if let Some((offset, reason)) = scan.torn {
            if !last {
                return Err(ServeError::Corrupt {
                    file: path.clone(),
                    offset,
                    detail: format!("{reason} in a segment that is not the last"),
                });
            }
            tracing::warn!(
                file = %path.display(),
                offset,
                reason,
                cut = scan.used_len - offset,
                "cutting a torn tail off the journal"
            );
        }
        for record in &scan.records {
            if record.lsn <= prev_lsn || record.lsn < *first {
                return Err(ServeError::Corrupt {
                    file: path.clone(),
                    offset: 0,
                    detail: format!("lsn {} out of order (after {prev_lsn})", record.lsn),
                });
            }
            prev_lsn = record.lsn;
            if record.lsn > store.last_lsn {
                store.replay(record.lsn, &record.op);
                replayed += 1;
            }
            last_seen = last_seen.max(record.lsn);
        }
        valid_len = scan.valid_len;
        torn = scan.torn.is_some();
        format = scan.format;
    }
    // The next lsn follows every lsn any file names, so none is reused.
    let next_lsn = segments.last().map_or(0, |s| s.0).max(last_seen + 1).max(1);
    Ok(Recovered {
        store,
        segments,
        valid_len,
        torn,
        format,
        next_lsn,
        replayed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_that_fails_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // A folder where the snapshot goes: the rename fails.
        fs::create_dir_all(dir.path().join(SNAPSHOT).join("x")).unwrap();
        assert!(write_snapshot_bytes(dir.path(), &[7; 4096]).is_err());
        assert!(!dir.path().join(SNAPSHOT_TMP).exists());
    }

    #[test]
    fn recovery_removes_an_unfinished_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(SNAPSHOT_TMP), [1; 100]).unwrap();
        let r = recover(dir.path()).unwrap();
        assert_eq!(r.store.items.len(), 0);
        assert!(!dir.path().join(SNAPSHOT_TMP).exists());
    }

    #[test]
    fn decode_names_the_field() {
        assert_eq!(
            decode_item(br#"{"name":"a","price":1.5}"#).unwrap(),
            Item {
                name: "a".into(),
                price: 1.5
            }
        );
        assert_eq!(
            decode_item(br#"{"price":1}"#).unwrap_err().field,
            Some("name")
        );
        assert_eq!(
            decode_item(br#"{"name":"a"}"#).unwrap_err().field,
            Some("price")
        );
        assert_eq!(
            decode_item(br#"{"name":"a","price":"1"}"#)
                .unwrap_err()
                .field,
            Some("price")
        );
        assert_eq!(
            decode_item(br#"{"name":2,"price":1}"#).unwrap_err().field,
            Some("name")
        );
        assert_eq!(decode_item(b"[1]").unwrap_err().field, None);
        assert_eq!(decode_item(b"{").unwrap_err().field, None);
    }

    #[test]
    fn the_plain_path_agrees_with_the_general_one() {
        for body in [
            &br#"{"name":"a","price":1}"#[..],
            br#"{"price":2.5,"name":"b\u00e9","extra":[1,{"x":null}]}"#,
            br#"{"name":"a","name":"b","price":1}"#,
            br#"{"name":"a","price":1e400}"#,
            br#"{"name":null,"price":1}"#,
            br#"{"name":"a","price":"1"}"#,
        ] {
            let general = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| {
                    Some(Item {
                        name: v.get("name")?.as_str()?.to_string(),
                        price: v.get("price")?.as_f64().filter(|p| p.is_finite())?,
                    })
                });
            assert_eq!(
                decode_item(body).ok(),
                general,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn snapshot_then_journal_recovers() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::new();
        store.create(1, decode_item(br#"{"name":"a","price":1}"#).unwrap());
        store.create(2, decode_item(br#"{"name":"b","price":2}"#).unwrap());
        write_snapshot(dir.path(), &store).unwrap();
        let mut w = journal::Writer::open(dir.path(), journal::Start::new(2)).unwrap();
        // lsn 2 is in the snapshot already; 3 and 4 are not.
        w.append(&Op::Create(br#"{"name":"b","price":2}"#.to_vec()));
        w.append(&Op::Delete(1));
        w.append(&Op::Create(br#"{"name":"c","price":3}"#.to_vec()));
        w.commit().unwrap();
        let r = recover(dir.path()).unwrap();
        assert_eq!(r.replayed, 2);
        assert_eq!(r.next_lsn, 5);
        let names: Vec<_> = r
            .store
            .items
            .iter()
            .map(|(id, i)| (*id, i.name.as_str()))
            .collect();
        assert_eq!(names, vec![(2, "b"), (3, "c")]);
    }

    #[test]
    fn a_corrupt_middle_refuses_with_the_offset() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = journal::Writer::open(dir.path(), journal::Start::new(1)).unwrap();
        for _ in 0..3 {
            w.append(&Op::Delete(9));
            w.commit().unwrap();
        }
        let path = dir.path().join(journal::segment_name(1));
        let mut bytes = fs::read(&path).unwrap();
        // Inside the second commit (each is one 29-byte record after the
        // 24-byte segment header).
        bytes[60] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        match recover(dir.path()) {
            Err(ServeError::Corrupt { offset, .. }) => assert_eq!(offset, 53),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }
}
