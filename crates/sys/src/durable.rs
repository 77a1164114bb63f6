//! Files written so that a reader finds the old version or the new one,
//! never a part, and so that a finished write survives a crash of the
//! process or the host.
//!
//! [`write_atomic`] writes in the caller's thread: a temporary file beside
//! the target (`NAME.tmp`), `fsync`, `rename` over the target, `fsync` of
//! the folder (so that the rename itself is durable; see "Ensuring data
//! reaches disk", <https://lwn.net/Articles/457667/>).
//!
//! [`Writer`] does the same on a thread of its own, so that a caller that
//! checkpoints a long computation pays only for taking its bytes, not for
//! the I/O. At most one write is in flight, and at most one item waits
//! behind it: an item handed over while another is still waiting replaces
//! that one, which is never written (the newest checkpoint is the one worth
//! having; a disk slower than the steps skips checkpoints rather than
//! holding the computation up). Only the writer thread touches the
//! temporary file, so two writes never race on it. A failed write stops the
//! writer and is returned by every later [`Writer::submit`] and by
//! [`Writer::finish`], which also waits until the last item handed over is
//! written and durable.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("state.bin");
//! let w = statepipe_sys::durable::Writer::new(&path, |n: u32| Ok(n.to_le_bytes().to_vec())).unwrap();
//! for n in 0..100u32 {
//!     w.submit(n).unwrap(); // returns at once
//! }
//! let done = w.finish().unwrap(); // the last item is on disk now
//! assert_eq!(std::fs::read(&path).unwrap(), 99u32.to_le_bytes());
//! assert_eq!(done.written + done.replaced, 100);
//! ```

use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// The temporary file [`write_atomic`] writes before renaming it to `path`.
pub fn temporary(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Whether [`write_atomic`] can create its temporary file beside `path`
/// (it creates and removes it); the error names the file. Catches a
/// missing or read-only folder, or a parent that is a file, before a long
/// computation that would checkpoint there starts.
pub fn check_writable(path: &Path) -> io::Result<()> {
    let tmp = temporary(path);
    File::create(&tmp)
        .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", tmp.display())))?;
    let _ = std::fs::remove_file(&tmp);
    Ok(())
}

/// Writes `bytes` to `path` atomically and durably (a temporary file,
/// `fsync`, `rename`, `fsync` of the folder). Errors name the file; a
/// write that fails before its rename (a full disk) leaves `path` as it
/// was and removes its temporary file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let named = |what: &str, p: &Path, e: io::Error| {
        io::Error::new(e.kind(), format!("{what} {}: {e}", p.display()))
    };
    let tmp = temporary(path);
    let written = (|| {
        let mut f = File::create(&tmp).map_err(|e| named("creating", &tmp, e))?;
        f.write_all(bytes).map_err(|e| named("writing", &tmp, e))?;
        f.sync_all().map_err(|e| named("syncing", &tmp, e))?;
        drop(f);
        std::fs::rename(&tmp, path).map_err(|e| named("renaming to", path, e))
    })();
    if let Err(e) = written {
        // A write cut short by a full disk would otherwise keep the space
        // it took, and every later write would find the disk full too.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let d = File::open(dir).map_err(|e| named("opening the folder", dir, e))?;
    match d.sync_all() {
        // Some file systems cannot sync a folder; the rename stands.
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
        r => r.map_err(|e| named("syncing the folder", dir, e)),
    }
}

/// The bytes an unprivileged writer can still put on the file system that
/// holds `path` (`statvfs`: available blocks × fragment size).
///
/// ```
/// let free = statepipe_sys::durable::available_bytes(std::path::Path::new(".")).unwrap();
/// # let _ = free;
/// ```
///
/// # Errors
/// `statvfs`'s error, for example a missing path.
pub fn available_bytes(path: &Path) -> io::Result<u64> {
    let st = nix::sys::statvfs::statvfs(path).map_err(io::Error::from)?;
    #[allow(clippy::useless_conversion)] // the field types differ by target
    let bytes = u64::from(st.blocks_available()).saturating_mul(u64::from(st.fragment_size()));
    Ok(bytes)
}

/// Writes `bytes` to `file` at its position in pieces of `piece` bytes,
/// each handed to the disk as soon as it is written, and waits for each
/// piece's write-back before the next-but-one is written: at most two
/// pieces are dirty in the page cache at a time. The caller still
/// `fsync`s at the end (this makes no file durable by itself).
///
/// A large file written in one go sits dirty until its `fsync`, and then
/// every `fsync` of any other file on the same file system that needs a
/// journal commit (ext4, XFS) waits behind all of it: a snapshot of many
/// megabytes stalls the writes of a journal beside it. Paced, another
/// file's `fsync` waits for at most two pieces. On systems other than
/// Linux, or where the file system refuses the write-back requests (a
/// file that is not a regular one), the bytes are written unpaced.
///
/// # Errors
/// The write's error (what `write_all` returns).
pub fn write_paced(file: &mut File, bytes: &[u8], piece: usize) -> io::Result<()> {
    let piece = piece.max(4096);
    #[cfg(target_os = "linux")]
    {
        use std::io::Seek as _;
        use std::os::fd::AsRawFd as _;
        let start = file.stream_position()?;
        let fd = file.as_raw_fd();
        // Whether the kernel took the hint.
        let range = |off: u64, len: usize, flags: libc::c_uint| {
            // SAFETY: `sync_file_range` reads no memory of ours; `fd` is
            // open for the whole call (borrowed from `file`).
            let rc = unsafe {
                libc::sync_file_range(fd, off as libc::off64_t, len as libc::off64_t, flags)
            };
            rc == 0
        };
        // Pacing is only a courtesy to other files' fsyncs: where the file
        // system refuses `sync_file_range`, the rest is written in one go.
        let mut paced = true;
        let mut prev: Option<(u64, usize)> = None;
        for (i, part) in bytes.chunks(piece).enumerate() {
            file.write_all(part)?;
            if !paced {
                continue;
            }
            let off = start + (i * piece) as u64;
            paced = range(off, part.len(), libc::SYNC_FILE_RANGE_WRITE);
            if let Some((o, l)) = prev.replace((off, part.len())).filter(|_| paced) {
                paced = range(
                    o,
                    l,
                    libc::SYNC_FILE_RANGE_WAIT_BEFORE
                        | libc::SYNC_FILE_RANGE_WRITE
                        | libc::SYNC_FILE_RANGE_WAIT_AFTER,
                );
            }
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = piece;
        file.write_all(bytes)
    }
}

/// What a [`Writer`] did, from [`Writer::finish`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Items written to disk.
    pub written: u64,
    /// Items replaced by a newer one before their turn came (never written).
    pub replaced: u64,
}

/// What the caller and the writer thread share.
struct Slot<T> {
    /// The next item to write, if one waits.
    pending: Option<T>,
    /// No more items come: write what waits, then end.
    closed: bool,
    /// The first failed write: its kind and message.
    error: Option<(io::ErrorKind, String)>,
    done: Written,
}

type Shared<T> = Arc<(Mutex<Slot<T>>, Condvar)>;

fn lock<T>(s: &Mutex<Slot<T>>) -> MutexGuard<'_, Slot<T>> {
    // A panic in `encode` poisons nothing we rely on: the slot stays valid.
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// Writes items to one file with [`write_atomic`] on a thread of its own;
/// see the [module docs](self) for the rules.
pub struct Writer<T: Send + 'static> {
    shared: Shared<T>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Writer<T> {
    /// Starts the writer thread for `path`, which turns each item into bytes
    /// with `encode` (on that thread). Fails at once, naming the file, if
    /// [`check_writable`] fails.
    pub fn new(
        path: &Path,
        mut encode: impl FnMut(T) -> io::Result<Vec<u8>> + Send + 'static,
    ) -> io::Result<Self> {
        let tmp = temporary(path);
        File::create(&tmp)
            .map_err(|e| io::Error::new(e.kind(), format!("creating {}: {e}", tmp.display())))?;
        let _ = std::fs::remove_file(&tmp);
        let shared: Shared<T> = Arc::new((
            Mutex::new(Slot {
                pending: None,
                closed: false,
                error: None,
                done: Written::default(),
            }),
            Condvar::new(),
        ));
        let (s, path) = (shared.clone(), path.to_path_buf());
        let thread = std::thread::Builder::new()
            .name("durable-writer".into())
            .spawn(move || loop {
                let item = {
                    let mut g = lock(&s.0);
                    loop {
                        let item = g.pending.take();
                        if let (Some(item), None) = (item, &g.error) {
                            break item;
                        }
                        if g.closed {
                            return;
                        }
                        g = s.1.wait(g).unwrap_or_else(|p| p.into_inner());
                    }
                };
                let r = encode(item).and_then(|b| write_atomic(&path, &b));
                let mut g = lock(&s.0);
                match r {
                    Ok(()) => g.done.written += 1,
                    Err(e) => {
                        g.error.get_or_insert((e.kind(), e.to_string()));
                    }
                }
            })?;
        Ok(Writer {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands `item` to the writer and returns at once: it is written after
    /// the write in flight, if any, unless a newer item replaces it first.
    /// Once a write has failed, returns that failure instead (every time)
    /// and writes nothing more.
    pub fn submit(&self, item: T) -> io::Result<()> {
        let mut g = lock(&self.shared.0);
        if let Some((kind, msg)) = &g.error {
            return Err(io::Error::new(*kind, msg.clone()));
        }
        if g.pending.replace(item).is_some() {
            g.done.replaced += 1;
        }
        self.shared.1.notify_one();
        Ok(())
    }

    /// Waits until the last item handed over is written and durable, ends
    /// the thread, and says what was written, or the first write that
    /// failed.
    pub fn finish(mut self) -> io::Result<Written> {
        self.close();
        let g = lock(&self.shared.0);
        match &g.error {
            Some((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
            None => Ok(g.done),
        }
    }

    fn close(&mut self) {
        lock(&self.shared.0).closed = true;
        self.shared.1.notify_one();
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                let mut g = lock(&self.shared.0);
                g.error.get_or_insert_with(|| {
                    (io::ErrorKind::Other, "the writer thread panicked".into())
                });
            }
        }
    }
}

impl<T: Send + 'static> Drop for Writer<T> {
    /// Writes what waits, as [`Writer::finish`] does, but cannot report a
    /// failure: call `finish` to learn it.
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: u64) -> io::Result<Vec<u8>> {
        Ok(n.to_le_bytes().to_vec())
    }

    #[test]
    fn paced_writes_put_every_byte_after_the_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for piece in [1, 4096, 5000, 1 << 20] {
            let mut f = File::create(&path).unwrap();
            f.write_all(b"head").unwrap();
            write_paced(&mut f, &data, piece).unwrap();
            f.write_all(b"tail").unwrap();
            f.sync_all().unwrap();
            let got = std::fs::read(&path).unwrap();
            assert_eq!(got.len(), 4 + data.len() + 4, "piece {piece}");
            assert!(got.starts_with(b"head") && got.ends_with(b"tail"));
            assert!(got[4..4 + data.len()] == data[..], "piece {piece}");
        }
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn paced_writes_go_unpaced_where_write_back_is_refused() {
        // Not a regular file: `sync_file_range` answers ESPIPE.
        let mut null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .unwrap();
        write_paced(&mut null, &[7u8; 3 * 4096 + 5], 4096).unwrap();
    }

    #[test]
    fn the_last_item_is_on_disk_after_finish() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        let w = Writer::new(&path, bytes).unwrap();
        for n in 0..1000 {
            w.submit(n).unwrap();
        }
        let done = w.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), 999u64.to_le_bytes());
        assert_eq!(done.written + done.replaced, 1000);
        assert!(done.written >= 1);
        assert!(!temporary(&path).exists());
    }

    #[test]
    fn a_write_that_fails_leaves_the_target_and_no_temporary_file() {
        // The target is a folder with a file in it: the temporary file is
        // written whole, and the rename over the folder fails.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("inside"), b"kept").unwrap();
        let e = write_atomic(&path, b"new").unwrap_err();
        assert!(e.to_string().contains("renaming to"), "{e}");
        assert!(!temporary(&path).exists(), "the temporary file stayed");
        assert_eq!(std::fs::read(path.join("inside")).unwrap(), b"kept");
    }

    #[test]
    fn a_path_whose_parent_is_a_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = Writer::new(&file.join("c"), bytes).err().unwrap();
        assert!(e.to_string().contains("c.tmp"), "{e}");
    }

    #[test]
    fn a_failed_write_is_reported_by_the_next_submit_or_by_finish() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("d");
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("c");
        // Accepted, then the folder becomes a file: every write fails.
        let w = Writer::new(&path, bytes).unwrap();
        std::fs::remove_dir(&sub).unwrap();
        std::fs::write(&sub, b"x").unwrap();
        w.submit(1).unwrap();
        for n in 2..10_000 {
            if let Err(e) = w.submit(n) {
                assert!(e.to_string().contains("c.tmp"), "{e}");
                break;
            }
            std::thread::yield_now();
        }
        // Whether a submit saw it or not, finish says it.
        let e = w.finish().err().unwrap();
        assert!(e.to_string().contains("c.tmp"), "{e}");
    }

    #[test]
    fn an_encoding_error_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let w = Writer::new(&dir.path().join("c"), |_: ()| {
            Err(io::Error::other("cannot encode"))
        })
        .unwrap();
        w.submit(()).unwrap();
        let e = w.finish().err().unwrap();
        assert!(e.to_string().contains("cannot encode"));
    }
}
