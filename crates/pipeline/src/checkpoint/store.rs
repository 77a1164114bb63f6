//! The files of a checkpoint: one folder per checkpoint, one file per
//! stage's state, and a manifest written last (see "Files" in the book's
//! `docs/src/operations/checkpoints.md`).
//!
//! ```text
//! DIR/ckpt-0000000007/0000.state   magic "SPSTATE1", u32 LE crc32c of the payload,
//!                                  u64 LE payload length, payload (postcard)
//! DIR/ckpt-0000000007/MANIFEST     JSON, then a last line "crc32c <8 hex digits>\n"
//!                                  over every byte before it
//! ```
//!
//! Every file is written with `statepipe_sys::durable::write_atomic`
//! (temporary file, fsync, rename, fsync of the folder), states first, the
//! manifest last: a folder without a manifest is a checkpoint that was
//! never completed, and is never restored.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::CheckpointError;

/// What the manifest's `format` field says of a statepipe checkpoint.
pub(crate) const FORMAT: &str = "statepipe-checkpoint";
/// The version of the files this build writes and reads.
pub(crate) const VERSION: u32 = 1;
/// The first bytes of a state file.
const STATE_MAGIC: &[u8; 8] = b"SPSTATE1";
/// Magic, crc, length.
const STATE_HEADER: usize = 8 + 4 + 8;
/// The manifest's file name.
pub(crate) const MANIFEST: &str = "MANIFEST";
/// A manifest larger than this is not one (a stage list of a few MB at most).
const MANIFEST_MAX: u64 = 64 << 20;

/// A checkpoint's manifest: what it holds and where it was taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `statepipe-checkpoint`.
    pub format: String,
    /// The format version ([`Manifest::VERSION`]).
    pub version: u32,
    /// The checkpoint's number, increasing over a pipeline's life
    /// (restores included).
    pub id: u64,
    /// How many inputs had been accepted before the barrier: a restored
    /// pipeline resumes with input number `position`.
    pub position: u64,
    /// When it was completed, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// A hash of the pipeline's shape (its units' kinds and stage names).
    pub shape: String,
    /// The units of the plan it was taken under, and the worker of each.
    pub plan: Vec<PlannedUnit>,
    /// Every stage's saved state.
    pub stages: Vec<StageEntry>,
}

impl Manifest {
    /// The format version this build writes and reads.
    pub const VERSION: u32 = VERSION;
}

/// One unit of the plan a checkpoint was taken under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedUnit {
    /// The unit's name.
    pub unit: String,
    /// The worker it ran on.
    pub worker: usize,
}

/// One stage's state in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageEntry {
    /// The stage's name (restores match stages by name).
    pub name: String,
    /// The state's Rust type, checked at a restore.
    pub state_type: String,
    /// The state's file, in the checkpoint's folder.
    pub file: String,
    /// The length of the encoded state.
    pub bytes: u64,
    /// The crc32c of the encoded state.
    pub crc32c: u32,
}

/// The folder of checkpoint `id` under `root`.
pub(crate) fn folder(root: &Path, id: u64) -> PathBuf {
    root.join(format!("ckpt-{id:010}"))
}

/// The checkpoint number a folder name stands for.
pub(crate) fn id_of(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("ckpt-")?;
    (digits.len() == 10 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

fn io_error(path: &Path, e: impl std::fmt::Display) -> CheckpointError {
    CheckpointError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

fn damaged(path: &Path, what: impl Into<String>) -> CheckpointError {
    CheckpointError::Damaged {
        file: path.display().to_string(),
        what: what.into(),
    }
}

/// Writes a state file (header and payload) into a checkpoint's folder
/// and syncs it; returns the payload's crc32c. No temporary file: the
/// folder is not a checkpoint until its manifest, written last, names
/// the file. The caller syncs the folder once, before the manifest.
pub(crate) fn write_state(path: &Path, payload: &[u8]) -> std::io::Result<u32> {
    use std::io::Write as _;
    let crc = crc32c::crc32c(payload);
    let mut header = [0u8; STATE_HEADER];
    header[..8].copy_from_slice(STATE_MAGIC);
    header[8..12].copy_from_slice(&crc.to_le_bytes());
    header[12..].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let named = |what: &str, e: std::io::Error| {
        std::io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
    };
    let mut f = fs::File::create(path).map_err(|e| named("creating", e))?;
    f.write_all(&header).map_err(|e| named("writing", e))?;
    f.write_all(payload).map_err(|e| named("writing", e))?;
    f.sync_all().map_err(|e| named("syncing", e))?;
    Ok(crc)
}

/// Syncs a folder, so the names created in it are durable.
pub(crate) fn sync_folder(dir: &Path) -> std::io::Result<()> {
    match fs::File::open(dir).and_then(|d| d.sync_all()) {
        // Some file systems cannot sync a folder.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Ok(()),
        r => {
            r.map_err(|e| std::io::Error::new(e.kind(), format!("syncing {}: {e}", dir.display())))
        }
    }
}

/// A state file read and checked: its bytes, the payload after the header.
pub(crate) struct StateFile(Vec<u8>);

impl StateFile {
    /// The encoded state.
    pub(crate) fn payload(&self) -> &[u8] {
        &self.0[STATE_HEADER..]
    }
}

/// Reads and checks a state file against its manifest entry (read once,
/// its checksum computed once).
pub(crate) fn read_state(dir: &Path, entry: &StageEntry) -> Result<StateFile, CheckpointError> {
    if entry.file.contains('/') || entry.file.contains("..") || entry.file.is_empty() {
        return Err(damaged(
            &dir.join(MANIFEST),
            format!(
                "stage `{}` names the file {:?}, outside the folder",
                entry.name, entry.file
            ),
        ));
    }
    let path = dir.join(&entry.file);
    let bytes = fs::read(&path).map_err(|e| io_error(&path, e))?;
    let (crc, payload) = unframe_state(&bytes).map_err(|what| damaged(&path, what))?;
    if payload.len() as u64 != entry.bytes || crc != entry.crc32c {
        return Err(damaged(
            &path,
            "the state does not match the manifest's length and checksum",
        ));
    }
    Ok(StateFile(bytes))
}

/// The checksum and payload of a state file's bytes, or what is wrong
/// with them.
pub(crate) fn unframe_state(bytes: &[u8]) -> Result<(u32, &[u8]), String> {
    if bytes.len() < STATE_HEADER {
        return Err(format!(
            "truncated: {} bytes, shorter than the {STATE_HEADER}-byte header",
            bytes.len()
        ));
    }
    if &bytes[..8] != STATE_MAGIC {
        return Err("not a statepipe state file (bad magic)".into());
    }
    let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let payload = &bytes[STATE_HEADER..];
    if payload.len() as u64 != len {
        return Err(format!(
            "truncated or padded: the header says {len} bytes of state, the file holds {}",
            payload.len()
        ));
    }
    if crc32c::crc32c(payload) != crc {
        return Err("checksum mismatch: the state was corrupted".into());
    }
    Ok((crc, payload))
}

/// The manifest file's bytes.
pub(crate) fn encode_manifest(m: &Manifest) -> Vec<u8> {
    let mut out = serde_json::to_vec_pretty(m).expect("a manifest always serializes");
    out.push(b'\n');
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(format!("crc32c {crc:08x}\n").as_bytes());
    out
}

/// A manifest from its file's bytes, or what is wrong with them.
pub(crate) fn decode_manifest(bytes: &[u8]) -> Result<Manifest, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let body_end = text
        .trim_end_matches('\n')
        .rfind('\n')
        .ok_or("no checksum line: truncated, or not a statepipe manifest")?
        + 1;
    let (body, last) = text.split_at(body_end);
    let hex = last
        .trim_end()
        .strip_prefix("crc32c ")
        .ok_or("no checksum line: truncated, or not a statepipe manifest")?;
    let crc = u32::from_str_radix(hex, 16).map_err(|_| format!("a bad checksum line: {last:?}"))?;
    if crc32c::crc32c(body.as_bytes()) != crc {
        return Err("checksum mismatch: the manifest was corrupted or truncated".into());
    }
    let value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("not a JSON manifest: {e}"))?;
    if value.get("format").and_then(|f| f.as_str()) != Some(FORMAT) {
        return Err(format!("not a {FORMAT} manifest (its `format` field)"));
    }
    let version = value.get("version").and_then(|v| v.as_u64());
    if version != Some(u64::from(VERSION)) {
        return Err(format!(
            "format version {}, this build reads version {VERSION}",
            version.map_or("(none)".to_string(), |v| v.to_string())
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("a malformed manifest: {e}"))
}

/// Reads and checks the manifest of the checkpoint in `dir`.
pub(crate) fn read_manifest(dir: &Path) -> Result<Manifest, CheckpointError> {
    let path = dir.join(MANIFEST);
    let meta = fs::metadata(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CheckpointError::Incomplete {
                dir: dir.display().to_string(),
            }
        } else {
            io_error(&path, e)
        }
    })?;
    if meta.len() > MANIFEST_MAX {
        return Err(damaged(
            &path,
            format!("{} bytes: too large for a manifest", meta.len()),
        ));
    }
    let bytes = fs::read(&path).map_err(|e| io_error(&path, e))?;
    let m = decode_manifest(&bytes).map_err(|what| damaged(&path, what))?;
    let named = dir.file_name().and_then(|n| n.to_str()).and_then(id_of);
    if named.is_some_and(|id| id != m.id) {
        return Err(damaged(
            &path,
            format!("it says checkpoint {}, in the folder of another", m.id),
        ));
    }
    Ok(m)
}

/// The checkpoint folders under `root`, by number, oldest first.
pub(crate) fn list(root: &Path) -> Result<Vec<(u64, PathBuf)>, CheckpointError> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io_error(root, e)),
    };
    for e in entries {
        let e = e.map_err(|e| io_error(root, e))?;
        if let Some(id) = e.file_name().to_str().and_then(id_of) {
            out.push((id, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Every decoder of a checkpoint's files over `bytes`: as a manifest and
/// as a state file, raw and framed with a valid checksum (to reach what
/// follows it), and a state's payload as `postcard` decodes a stage's
/// state (here a `Vec<(u64, String)>`). Nothing may panic.
#[cfg(feature = "fuzzing")]
pub(crate) fn decode_all(bytes: &[u8]) {
    let state = |payload: &[u8]| {
        let _ = postcard::from_bytes::<Vec<(u64, String)>>(payload);
    };
    let _ = decode_manifest(bytes);
    let mut manifest = bytes.to_vec();
    if !manifest.ends_with(b"\n") {
        manifest.push(b'\n');
    }
    let crc = crc32c::crc32c(&manifest);
    manifest.extend_from_slice(format!("crc32c {crc:08x}\n").as_bytes());
    let _ = decode_manifest(&manifest);
    if let Ok((_, payload)) = unframe_state(bytes) {
        state(payload);
    }
    let mut framed = STATE_MAGIC.to_vec();
    framed.extend_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
    framed.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    framed.extend_from_slice(bytes);
    let (_, payload) = unframe_state(&framed).expect("a framed state unframes");
    state(payload);
}
