//! A cgroup with a CPU quota ([`QuotaCgroup`]) or a cap on the write
//! operations a block device takes from it ([`WriteIopsCgroup`]), made for
//! one measurement and removed after it.
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
    /// No hierarchy with the `blkio` controller is mounted (v1), and no
    /// unified hierarchy offers `io` (v2).
    #[error("no cgroup hierarchy with the blkio (v1) or io (v2) controller is mounted (/proc/self/mountinfo)")]
    NoIoHierarchy,
    /// The file system of `path` is not on a block device.
    #[error("{} is on device {device}, which is not a block device (tmpfs, overlay?): put --data on a disk", path.display())]
    NoBlockDevice {
        /// The path asked about.
        path: PathBuf,
        /// Its file system's device, `major:minor`.
        device: String,
    },
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
    made: Made,
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
        Self::create_with_period(name, cpus, PERIOD_US)
    }

    /// [`QuotaCgroup::create`] with a CFS period of `period_us`
    /// microseconds (the kernel takes 1,000 to 1,000,000) instead of
    /// [`PERIOD_US`]. The period bounds what the quota does to latency: a
    /// group that has spent its `cpus · period` waits, unscheduled, for the
    /// rest of the period, so under a quota of `q` CPUs a request arriving
    /// at a random moment waits up to `(1 − q) · period` before any of the
    /// group's threads can read it.
    ///
    /// # Errors
    ///
    /// As [`QuotaCgroup::create`].
    pub fn create_with_period(
        name: &str,
        cpus: f64,
        period_us: u64,
    ) -> Result<QuotaCgroup, CgroupError> {
        let made = make(name, ("cpu", "cpu"), CgroupError::NoCpuHierarchy)?;
        let dir = &made.dir;
        let quota = (cpus * period_us as f64).round() as u64;
        if made.v1 {
            write(&dir.join("cpu.cfs_period_us"), &period_us.to_string())?;
            write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
        } else {
            write(&dir.join("cpu.max"), &format!("{quota} {period_us}"))?;
        }
        Ok(QuotaCgroup { made })
    }

    /// The cgroup's directory, e.g. `/sys/fs/cgroup/cpu/statepipe-1234`.
    pub fn dir(&self) -> &Path {
        &self.made.dir
    }
}

/// A cgroup whose processes may issue at most so many write operations a
/// second to one block device (v1 `blkio.throttle.write_iops_device`, v2
/// `io.max`'s `wiops`); removed when dropped. Writes from the page cache
/// that `fsync`/`fdatasync` pushes out count against the caller's cgroup,
/// so a durable server in one is a server on a slow disk: its write
/// capacity is set by the device, and its CPUs stay free.
#[derive(Debug)]
pub struct WriteIopsCgroup {
    made: Made,
}

impl WriteIopsCgroup {
    /// Creates cgroup `name` (a single directory name, made unique by the
    /// caller) under the root of the `blkio` (v1) or `io` (v2) hierarchy,
    /// capping writes to the block device that holds `path` at `iops` a
    /// second.
    ///
    /// # Errors
    ///
    /// [`CgroupError::NoIoHierarchy`] or [`CgroupError::NoBlockDevice`], or
    /// [`CgroupError::Io`] as [`QuotaCgroup::create`]; nothing is left
    /// behind.
    pub fn create(name: &str, path: &Path, iops: u64) -> Result<WriteIopsCgroup, CgroupError> {
        let (major, minor) = block_device_of(path)?;
        let made = make(name, ("blkio", "io"), CgroupError::NoIoHierarchy)?;
        let (file, rule) = if made.v1 {
            (
                "blkio.throttle.write_iops_device",
                format!("{major}:{minor} {iops}"),
            )
        } else {
            ("io.max", format!("{major}:{minor} wiops={iops}"))
        };
        write(&made.dir.join(file), &rule)?;
        Ok(WriteIopsCgroup { made })
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.made.dir
    }
}

/// The whole disk (major, minor) that holds `path`: the device of its file
/// system, or that partition's disk (throttling rules name disks).
///
/// # Errors
///
/// [`CgroupError::NoBlockDevice`] when the file system is not on a block
/// device (tmpfs, overlay): there is nothing to throttle.
pub fn block_device_of(path: &Path) -> Result<(u32, u32), CgroupError> {
    use std::os::unix::fs::MetadataExt as _;
    let dev = std::fs::metadata(path)
        .map_err(|source| CgroupError::Io {
            what: "reading",
            path: path.to_path_buf(),
            source,
        })?
        .dev();
    let (major, minor) = (
        nix::sys::stat::major(dev) as u32,
        nix::sys::stat::minor(dev) as u32,
    );
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let none = || CgroupError::NoBlockDevice {
        path: path.to_path_buf(),
        device: format!("{major}:{minor}"),
    };
    if !sys.exists() {
        return Err(none());
    }
    if !sys.join("partition").exists() {
        return Ok((major, minor));
    }
    // A partition: its directory sits in its disk's, whose `dev` says
    // `major:minor`.
    let disk = std::fs::canonicalize(&sys).map_err(|_| none())?;
    let text = disk
        .parent()
        .and_then(|d| std::fs::read_to_string(d.join("dev")).ok())
        .ok_or_else(none)?;
    let (a, b) = text.trim().split_once(':').ok_or_else(none)?;
    Ok((
        a.parse().map_err(|_| none())?,
        b.parse().map_err(|_| none())?,
    ))
}

/// Makes cgroup `name` under the root of the first hierarchy with the
/// controller `(v1 name, v2 name)` (see `controller_mount`), delegating it
/// to the root's children on v2. `missing` when there is no such hierarchy.
fn make(name: &str, (c1, c2): (&str, &str), missing: CgroupError) -> Result<Made, CgroupError> {
    let mountinfo =
        std::fs::read_to_string("/proc/self/mountinfo").map_err(|source| CgroupError::Io {
            what: "reading",
            path: "/proc/self/mountinfo".into(),
            source,
        })?;
    let (v1, point) = controller_mount(&mountinfo, c1, c2).ok_or(missing)?;
    if !v1 {
        // The children of the v2 root get the controller's files only once
        // the root delegates it.
        write(&point.join("cgroup.subtree_control"), &format!("+{c2}"))?;
    }
    let dir = point.join(name);
    std::fs::create_dir(&dir).map_err(|source| CgroupError::Io {
        what: "creating",
        path: dir.clone(),
        source,
    })?;
    Ok(Made { v1, dir })
}

/// A cgroup directory this process made, removed when dropped (so that one
/// whose control files cannot be written is not left behind).
#[derive(Debug)]
struct Made {
    /// Whether its hierarchy is v1 (else v2, the unified one).
    v1: bool,
    dir: PathBuf,
}

impl Drop for Made {
    fn drop(&mut self) {
        remove(&self.dir);
    }
}

/// Removes a cgroup's directory. A process that just exited may still be
/// counted in it for a moment; `rmdir` fails with EBUSY until it is gone.
/// Bounded: 50 tries of 10 ms.
fn remove(dir: &Path) {
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    eprintln!(
        "warning: could not remove cgroup {} (processes still in it?)",
        dir.display()
    );
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

/// The first hierarchy in `mountinfo` with a controller: `(true, mount
/// point)` for v1 `cgroup` with `v1` among its options, else `(false, mount
/// point)` for `cgroup2` whose root lists `v2` in `cgroup.controllers`.
fn controller_mount(mountinfo: &str, v1: &str, v2: &str) -> Option<(bool, PathBuf)> {
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
    let first = mounts
        .iter()
        .find(|(fs, _, opts)| *fs == "cgroup" && opts.split(',').any(|o| o == v1));
    if let Some((_, point, _)) = first {
        return Some((true, PathBuf::from(point)));
    }
    mounts
        .iter()
        .filter(|(fs, _, _)| *fs == "cgroup2")
        .map(|(_, point, _)| PathBuf::from(point))
        .find(|point| {
            std::fs::read_to_string(point.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == v2))
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
            controller_mount(mountinfo, "cpu", "cpu"),
            Some((true, PathBuf::from("/sys/fs/cgroup/cpu,cpuacct")))
        );
        assert_eq!(
            controller_mount("1 2 0:3 / /proc rw - proc proc rw\n", "cpu", "cpu"),
            None
        );
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

    #[test]
    fn a_short_period_is_written_with_its_quota() {
        let name = format!("statepipe-bench-test-period-{}", std::process::id());
        let cgroup = match QuotaCgroup::create_with_period(&name, 0.3, 10_000) {
            Ok(c) => c,
            Err(e) => {
                skip::skip(
                    Lack::Privilege,
                    &format!("cannot create a cgroup here: {e}"),
                );
                return;
            }
        };
        let dir = cgroup.dir();
        let v1 = std::fs::read_to_string(dir.join("cpu.cfs_quota_us")).and_then(|q| {
            Ok(format!(
                "{} {}",
                q.trim(),
                std::fs::read_to_string(dir.join("cpu.cfs_period_us"))?.trim()
            ))
        });
        let got = v1
            .or_else(|_| std::fs::read_to_string(dir.join("cpu.max")))
            .expect("a quota file");
        assert_eq!(got.trim(), "3000 10000");
    }

    #[test]
    fn a_write_iops_cgroup_caps_the_disk_of_a_path() {
        let here = std::env::temp_dir();
        let dev = match block_device_of(&here) {
            Ok(d) => d,
            Err(e) => {
                skip::skip(
                    Lack::Privilege,
                    &format!("the temporary directory is not on a disk: {e}"),
                );
                return;
            }
        };
        let name = format!("statepipe-bench-test-io-{}", std::process::id());
        let cgroup = match WriteIopsCgroup::create(&name, &here, 250) {
            Ok(c) => c,
            Err(e) => {
                skip::skip(
                    Lack::Privilege,
                    &format!("cannot create an io cgroup here: {e}"),
                );
                return;
            }
        };
        let dir = cgroup.dir().to_path_buf();
        let rule = std::fs::read_to_string(dir.join("blkio.throttle.write_iops_device"))
            .or_else(|_| std::fs::read_to_string(dir.join("io.max")))
            .expect("a throttle file");
        let want = format!("{}:{}", dev.0, dev.1);
        assert!(rule.contains(&want) && rule.contains("250"), "{rule}");
        drop(cgroup);
        assert!(!dir.exists(), "{} removed", dir.display());
    }

    #[test]
    fn a_file_system_without_a_disk_has_no_block_device() {
        // /proc is never on a block device.
        let e = block_device_of(Path::new("/proc/self")).expect_err("/proc has no disk");
        assert!(matches!(e, CgroupError::NoBlockDevice { .. }), "{e}");
        assert!(e.to_string().contains("not a block device"), "{e}");
    }
}
