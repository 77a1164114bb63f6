//! A cgroup with a CPU quota, made for one measurement and removed after it.
//!
//! [`QuotaCgroup::create`] makes a new cgroup in the hierarchy of the `cpu`
//! controller (v1, or v2 where that is what the host has), found through
//! `/proc/self/mountinfo`, and gives it a quota; a process moves itself in
//! with [`enter`] (writing its pid to `cgroup.procs`, so the threads it
//! starts afterwards are in it too). Dropping the [`QuotaCgroup`] removes the
//! directory. Creating one needs root (or a delegated subtree); where that
//! fails, the error says why, for the caller to print and skip.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The CFS period the quota is given over: the kernel's default, 100 ms.
pub const PERIOD_US: u64 = 100_000;

/// Why a [`QuotaCgroup`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// No hierarchy with the `cpu` controller is mounted (v1), and no
    /// unified hierarchy offers it (v2).
    #[error("no cgroup hierarchy with the cpu controller is mounted (/proc/self/mountinfo)")]
    NoCpuHierarchy,
    /// Creating the directory or writing a control file failed (typically
    /// `EACCES`/`EROFS`: not root, or a read-only `/sys/fs/cgroup`).
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done: `creating`, `writing`.
        what: &'static str,
        /// The directory or file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// A cgroup with a CPU quota; removed when dropped.
#[derive(Debug)]
pub struct QuotaCgroup {
    dir: PathBuf,
}

impl QuotaCgroup {
    /// Creates cgroup `name` (a single directory name, made unique by the
    /// caller) with a quota of `cpus` CPUs per [`PERIOD_US`], under the root of
    /// the first `cpu` hierarchy this process can see: v1 `cpu` (or
    /// `cpu,cpuacct`), else v2 with the `cpu` controller enabled for its
    /// children.
    ///
    /// # Errors
    ///
    /// [`CgroupError`] when there is no such hierarchy, or the directory or
    /// its files cannot be written (not root, read-only); nothing is left
    /// behind.
    pub fn create(name: &str, cpus: f64) -> Result<QuotaCgroup, CgroupError> {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| CgroupError::Io {
                what: "reading",
                path: "/proc/self/mountinfo".into(),
                source,
            })?;
        let (v1, point) = cpu_mount(&mountinfo).ok_or(CgroupError::NoCpuHierarchy)?;
        if !v1 {
            // The children of the v2 root get a cpu.max only once the root
            // delegates the controller.
            write(&point.join("cgroup.subtree_control"), "+cpu")?;
        }
        let dir = point.join(name);
        std::fs::create_dir(&dir).map_err(|source| CgroupError::Io {
            what: "creating",
            path: dir.clone(),
            source,
        })?;
        let cgroup = QuotaCgroup { dir };
        let quota = (cpus * PERIOD_US as f64).round() as u64;
        if v1 {
            write(
                &cgroup.dir.join("cpu.cfs_period_us"),
                &PERIOD_US.to_string(),
            )?;
            write(&cgroup.dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
        } else {
            write(&cgroup.dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
        }
        Ok(cgroup)
    }

    /// The cgroup's directory, e.g. `/sys/fs/cgroup/cpu/statepipe-1234`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for QuotaCgroup {
    fn drop(&mut self) {
        // A process that just exited may still be counted in the cgroup for a
        // moment; `rmdir` fails with EBUSY until it is gone. Bounded: 50 tries
        // of 10 ms.
        for _ in 0..50 {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        eprintln!(
            "warning: could not remove cgroup {} (processes still in it?)",
            self.dir.display()
        );
    }
}

/// Moves the calling process (every thread of it) into the cgroup at `dir`.
///
/// # Errors
///
/// [`CgroupError::Io`] when `dir/cgroup.procs` cannot be written.
pub fn enter(dir: &Path) -> Result<(), CgroupError> {
    write(&dir.join("cgroup.procs"), &std::process::id().to_string())
}

fn write(path: &Path, text: &str) -> Result<(), CgroupError> {
    std::fs::write(path, text).map_err(|source| CgroupError::Io {
        what: "writing",
        path: path.to_path_buf(),
        source,
    })
}

/// The first `cpu` hierarchy in `mountinfo`: `(true, mount point)` for v1
/// `cgroup` with the `cpu` controller, else `(false, mount point)` for
/// `cgroup2` whose root lists `cpu` in `cgroup.controllers`.
fn cpu_mount(mountinfo: &str) -> Option<(bool, PathBuf)> {
    let mounts: Vec<(&str, &str, &str)> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let point = left.split(' ').nth(4)?;
            let mut right = right.split(' ');
            let fstype = right.next()?;
            let options = right.nth(1)?;
            Some((fstype, point, options))
        })
        .collect();
    let v1 = mounts
        .iter()
        .find(|(fs, _, opts)| *fs == "cgroup" && opts.split(',').any(|o| o == "cpu"));
    if let Some((_, point, _)) = v1 {
        return Some((true, PathBuf::from(point)));
    }
    mounts
        .iter()
        .filter(|(fs, _, _)| *fs == "cgroup2")
        .map(|(_, point, _)| PathBuf::from(point))
        .find(|point| {
            std::fs::read_to_string(point.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"))
        })
        .map(|point| (false, point))
}

#[cfg(test)]
#[path = "../../../scripts/skip.rs"]
mod skip;

#[cfg(test)]
mod tests {
    use super::skip::{self, Lack};
    use super::*;

    #[test]
    fn finds_the_v1_cpu_mount_first() {
        let mountinfo = "\
            33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n\
            32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n\
            41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cpu_mount(mountinfo),
            Some((true, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")))
        );
        assert_eq!(cpu_mount("1 2 0:3 / /proc rw - proc proc rw\n"), None);
    }

    /// Creates a real half-CPU cgroup where the host allows it, checks its
    /// quota file, and removes it.
    #[test]
    fn a_quota_cgroup_is_made_and_removed() {
        let name = format!("statepipe-bench-test-{}", std::process::id());
        let cgroup = match QuotaCgroup::create(&name, 0.5) {
            Ok(c) => c,
            Err(e) => {
                skip::skip(
                    Lack::Privilege,
                    &format!("cannot create a cgroup here: {e}"),
                );
                return;
            }
        };
        let dir = cgroup.dir().to_path_buf();
        let quota = std::fs::read_to_string(dir.join("cpu.cfs_quota_us"))
            .or_else(|_| std::fs::read_to_string(dir.join("cpu.max")))
            .expect("a quota file");
        assert!(quota.starts_with("50000"), "{quota}");
        drop(cgroup);
        assert!(!dir.exists(), "{} removed", dir.display());
    }
}
