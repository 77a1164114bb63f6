//! The edge list, and where kernel 1 and validation read it from.
//!
//! The specification hands kernel 1 an edge list and validates each tree
//! against it, but the list need not stay in memory: 8 bytes a tuple is as
//! much as the whole graph. [`EdgeList`] holds it in one of three places
//! ([`Storage`]):
//!
//! - **a file** (the default): generated once into an unlinked temporary
//!   file (gone when the process ends, however it ends), then read back in
//!   chunks by each pass. The pages are the kernel's page cache, reclaimed
//!   under pressure, not the process's memory; where the cache cannot hold
//!   them they come from the disk;
//! - **regenerated**: nothing is stored; every pass makes its tuples again
//!   from their indices ([`Kronecker::edge`]), which costs a generation's
//!   time per pass (two in kernel 1, one per validation);
//! - **memory**: one vector, 8 bytes a tuple, as the reference code keeps it.
//!
//! Every pass ([`EdgeList::scan`]) runs on pinned workers, each over its own
//! contiguous share of the list, in order, in chunks of [`CHUNK`] tuples.

use std::io;
use std::path::{Path, PathBuf};

use super::generator::Kronecker;
use super::par;

/// Tuples a worker holds at once when the list is read from a file or
/// regenerated: 1 MiB.
pub const CHUNK: usize = 1 << 17;

/// Where an [`EdgeList`] is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storage {
    /// In an unlinked temporary file in this folder.
    File(PathBuf),
    /// Nowhere: made again by each pass.
    Regenerate,
    /// In memory.
    Memory,
}

impl Storage {
    /// A file in the system's temporary folder (`TMPDIR`, else `/tmp`).
    pub fn temp_file() -> Self {
        Storage::File(std::env::temp_dir())
    }

    /// Bytes of the process's own memory the list takes, for `tuples` tuples.
    pub fn resident_bytes(&self, tuples: u64, workers: usize) -> u64 {
        match self {
            Storage::Memory => 8 * tuples,
            Storage::File(_) | Storage::Regenerate => (8 * CHUNK * workers.max(1)) as u64,
        }
    }

    /// Whether the list's file would live in memory: its folder is on a
    /// tmpfs (as `/tmp` is on many systems, and an `emptyDir` with
    /// `medium: Memory` in Kubernetes), whose pages are the machine's
    /// memory and are not reclaimed as a disk's cached pages are.
    pub fn file_in_memory(&self) -> bool {
        match self {
            Storage::File(dir) => on_tmpfs(dir),
            _ => false,
        }
    }
}

impl Default for Storage {
    /// [`Storage::temp_file`].
    fn default() -> Self {
        Storage::temp_file()
    }
}

/// A Graph500 edge list, kept as its [`Storage`] says.
#[derive(Debug)]
pub struct EdgeList {
    store: Store,
}

#[derive(Debug)]
enum Store {
    Memory(Vec<[u32; 2]>),
    File {
        file: std::fs::File,
        dir: PathBuf,
        tuples: u64,
    },
    Regenerate(Kronecker),
}

/// A pass over an edge list failed.
#[derive(Debug)]
pub enum ScanError<E> {
    /// The list's file could not be read or written.
    Io {
        /// The folder the file is in.
        dir: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// The pass itself stopped with this error.
    Stopped(E),
}

/// Where one pass reads its tuples from.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    Slice(&'a [[u32; 2]]),
    File(&'a std::fs::File, &'a Path, u64),
    Regenerate(&'a Kronecker),
}

impl EdgeList {
    /// Generates the Graph500 edge list of `edgefactor * 2^scale` tuples
    /// for `seed` on `workers` pinned threads and keeps it in `storage`.
    /// The tuples are those of [`generate`](super::generator::generate),
    /// whatever the storage and the number of workers.
    ///
    /// # Errors
    ///
    /// The temporary file cannot be made or written (a full disk, a folder
    /// that is not there): [`ScanError::Io`] naming the folder.
    ///
    /// # Panics
    ///
    /// If `scale` is above 31.
    pub fn generate(
        scale: u32,
        edgefactor: u32,
        seed: u64,
        workers: usize,
        storage: &Storage,
    ) -> Result<Self, ScanError<std::convert::Infallible>> {
        let kronecker = Kronecker::new(scale, edgefactor, seed);
        let tuples = kronecker.tuples();
        let store = match storage {
            Storage::Memory => {
                Store::Memory(super::generator::generate(scale, edgefactor, seed, workers))
            }
            Storage::Regenerate => Store::Regenerate(kronecker),
            Storage::File(dir) => {
                let io = |error| ScanError::Io {
                    dir: dir.clone(),
                    error,
                };
                let file = tempfile::tempfile_in(dir).map_err(io)?;
                file.set_len(8 * tuples).map_err(io)?;
                write_all(&file, &kronecker, workers).map_err(io)?;
                Store::File {
                    file,
                    dir: dir.clone(),
                    tuples,
                }
            }
        };
        Ok(EdgeList { store })
    }

    /// How many tuples the list has.
    pub fn len(&self) -> u64 {
        self.source().len()
    }

    /// Whether the list has no tuple.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn source(&self) -> Source<'_> {
        match &self.store {
            Store::Memory(v) => Source::Slice(v),
            Store::File { file, dir, tuples } => Source::File(file, dir, *tuples),
            Store::Regenerate(k) => Source::Regenerate(k),
        }
    }

    /// Runs a pass over the whole list on `workers` pinned threads: worker
    /// `w` starts with `init(w)` and calls `f(&mut state, tuples)` on its
    /// contiguous share of the list, in order, a chunk at a time. Returns
    /// each worker's state, in worker order.
    ///
    /// # Errors
    ///
    /// The first error of `f` ([`ScanError::Stopped`]; the worker that
    /// met it stops), or a read of the file failing.
    pub fn scan<T: Send, E: Send>(
        &self,
        workers: usize,
        init: impl Fn(usize) -> T + Sync,
        f: impl Fn(&mut T, &[[u32; 2]]) -> Result<(), E> + Sync,
    ) -> Result<Vec<T>, ScanError<E>> {
        self.source().scan(workers, init, f)
    }
}

impl Source<'_> {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Source::Slice(s) => s.len() as u64,
            Source::File(_, _, len) => *len,
            Source::Regenerate(k) => k.tuples(),
        }
    }

    /// [`EdgeList::scan`].
    pub(crate) fn scan<T: Send, E: Send>(
        self,
        workers: usize,
        init: impl Fn(usize) -> T + Sync,
        f: impl Fn(&mut T, &[[u32; 2]]) -> Result<(), E> + Sync,
    ) -> Result<Vec<T>, ScanError<E>> {
        let workers = workers.max(1);
        let len = self.len() as usize;
        let results = par::on_workers(workers, |w| {
            let mut state = init(w);
            let range = par::split(len, workers, w);
            match self {
                Source::Slice(s) => {
                    for chunk in s[range].chunks(CHUNK) {
                        f(&mut state, chunk).map_err(ScanError::Stopped)?;
                    }
                }
                Source::File(file, dir, _) => {
                    let mut buf = vec![[0u32; 2]; CHUNK.min(range.len())];
                    in_chunks(range, |at, n| {
                        read_at(file, &mut buf[..n], at).map_err(|error| ScanError::Io {
                            dir: dir.to_path_buf(),
                            error,
                        })?;
                        f(&mut state, &buf[..n]).map_err(ScanError::Stopped)
                    })?;
                }
                Source::Regenerate(k) => {
                    let mut buf = Vec::with_capacity(CHUNK.min(range.len()));
                    in_chunks(range, |at, n| {
                        buf.clear();
                        k.fill(at as u64, n, &mut buf);
                        f(&mut state, &buf).map_err(ScanError::Stopped)
                    })?;
                }
            }
            Ok(state)
        });
        results.into_iter().collect()
    }
}

#[cfg(target_os = "linux")]
fn on_tmpfs(dir: &Path) -> bool {
    nix::sys::statfs::statfs(dir)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
}

#[cfg(not(target_os = "linux"))]
fn on_tmpfs(_dir: &Path) -> bool {
    false
}

/// Writes the whole list into `file`, each worker its share.
fn write_all(file: &std::fs::File, kronecker: &Kronecker, workers: usize) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let workers = workers.max(1);
    let len = kronecker.tuples() as usize;
    par::on_workers(workers, |w| {
        let range = par::split(len, workers, w);
        let mut buf = Vec::with_capacity(CHUNK.min(range.len()));
        in_chunks(range, |at, n| {
            buf.clear();
            kronecker.fill(at as u64, n, &mut buf);
            file.write_all_at(bytemuck::cast_slice(&buf), 8 * at as u64)
        })
    })
    .into_iter()
    .collect()
}

/// Calls `f(first, len)` for each chunk of at most [`CHUNK`] tuples of
/// `range`, in order, until one fails.
fn in_chunks<E>(
    range: std::ops::Range<usize>,
    mut f: impl FnMut(usize, usize) -> Result<(), E>,
) -> Result<(), E> {
    let mut at = range.start;
    while at < range.end {
        let n = CHUNK.min(range.end - at);
        f(at, n)?;
        at += n;
    }
    Ok(())
}

/// Reads tuples `at..at + buf.len()` of the file into `buf`.
fn read_at(file: &std::fs::File, buf: &mut [[u32; 2]], at: usize) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.read_exact_at(bytemuck::cast_slice_mut(buf), 8 * at as u64)
}

impl<E: std::fmt::Display> std::fmt::Display for ScanError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::Io { dir, error } => write!(
                f,
                "the edge list's temporary file in {} failed: {error} (free space there, \
                 give another folder with --edge-dir, or keep the list with --edges \
                 regenerate)",
                dir.display()
            ),
            ScanError::Stopped(e) => e.fmt(f),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for ScanError<E> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph500::generator::{edge_hash, generate};

    fn gather(list: &EdgeList, workers: usize) -> Vec<[u32; 2]> {
        list.scan(
            workers,
            |_| Vec::new(),
            |out, chunk| {
                out.extend_from_slice(chunk);
                Ok::<_, ()>(())
            },
        )
        .unwrap()
        .concat()
    }

    #[test]
    fn every_storage_gives_the_generated_tuples_in_order() {
        let expected = edge_hash(&generate(9, 16, 5, 1));
        for storage in [Storage::Memory, Storage::Regenerate, Storage::temp_file()] {
            for workers in [1, 3] {
                let list = EdgeList::generate(9, 16, 5, workers, &storage).unwrap();
                assert_eq!(list.len(), 16 << 9);
                assert_eq!(edge_hash(&gather(&list, 2)), expected, "{storage:?}");
            }
        }
    }

    #[test]
    fn a_list_larger_than_a_chunk_is_read_whole() {
        let list = EdgeList::generate(15, 16, 2, 2, &Storage::temp_file()).unwrap();
        assert!(list.len() as usize > 2 * CHUNK);
        assert_eq!(
            edge_hash(&gather(&list, 3)),
            edge_hash(&generate(15, 16, 2, 2))
        );
    }

    #[test]
    fn a_folder_that_is_not_there_is_named() {
        let dir = PathBuf::from("/nonexistent/statepipe-edges");
        let err = EdgeList::generate(4, 4, 1, 1, &Storage::File(dir)).unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent/statepipe-edges"),
            "{err}"
        );
    }

    #[test]
    fn a_file_on_a_tmpfs_is_known_to_be_memory() {
        if !Path::new("/dev/shm").exists() || !on_tmpfs(Path::new("/dev/shm")) {
            return; // no tmpfs mounted here to ask about
        }
        assert!(Storage::File("/dev/shm".into()).file_in_memory());
        assert!(!Storage::Regenerate.file_in_memory());
        assert!(!Storage::Memory.file_in_memory());
    }

    #[test]
    fn a_pass_stops_at_the_first_error() {
        let list = EdgeList::generate(6, 16, 1, 1, &Storage::Regenerate).unwrap();
        let err = list
            .scan(2, |_| (), |_, _| Err::<(), _>("stop"))
            .unwrap_err();
        assert!(matches!(err, ScanError::Stopped("stop")));
    }
}
