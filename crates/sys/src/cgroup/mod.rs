//! The CPU quota of this process's cgroups, on cgroup v1 and v2.
//!
//! The process's cgroup paths come from `/proc/self/cgroup` (one line per
//! hierarchy: `0::/path` for v2, `3:cpu,cpuacct:/path` for a v1 hierarchy
//! with the `cpu` controller), the places those hierarchies are mounted from
//! `/proc/self/mountinfo`. A mount shows the hierarchy from its *root* field
//! down: in a container with its own cgroup namespace, or one given only its
//! own subtree, the root is the container's cgroup, not `/`, and the cgroups
//! above it are not visible. So a cgroup path `P` under a mount of root `R`
//! at mount point `M` is the directory `M/(P - R)`, and the walk up from it
//! stops at `M`.
//!
//! Each directory on the way up may set a quota (a parent's caps its
//! children): v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` (`-1`: none), v2
//! `cpu.max` (`max`: none). On a hybrid host (v1 `cpu` controller and the
//! v2 unified hierarchy both mounted) both walks run. The tightest quota of
//! all wins.
//!
//! Everything here reads files under a `root` directory (`/` on a live
//! system), so that tests can build a fake one.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Which cgroup hierarchy a [`Quota`] was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// cgroup v1: `cpu.cfs_quota_us` over `cpu.cfs_period_us` in the hierarchy
    /// of the `cpu` controller.
    V1,
    /// cgroup v2: `cpu.max` in the unified hierarchy.
    V2,
}

impl CgroupVersion {
    /// The name of the file that holds the quota: `cpu.cfs_quota_us` (v1) or
    /// `cpu.max` (v2).
    pub fn quota_file(self) -> &'static str {
        match self {
            CgroupVersion::V1 => V1_QUOTA,
            CgroupVersion::V2 => V2_MAX,
        }
    }
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        })
    }
}

/// A cgroup CPU quota and the cgroup that sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    /// CPUs of time per period: quota / period (`1.5` for 150 ms of CPU time
    /// every 100 ms). Always positive.
    pub cpus: f64,
    /// The hierarchy it was read from.
    pub version: CgroupVersion,
    /// The cgroup directory whose file sets it, as this process sees it,
    /// e.g. `/sys/fs/cgroup/cpu/q`.
    pub dir: PathBuf,
}

impl Quota {
    /// The file that sets the quota: [`dir`](Quota::dir) joined with
    /// [`CgroupVersion::quota_file`].
    pub fn file(&self) -> PathBuf {
        self.dir.join(self.version.quota_file())
    }
}

/// A file that should have told the quota and did not; the quota is then
/// taken from the other files (or, where none gave one, the affinity mask
/// alone sizes the process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    /// The file or directory, as this process sees it (absolute).
    pub path: PathBuf,
    /// What was wrong with it.
    pub reason: UnreadReason,
}

/// Why an [`Unread`] file told nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnreadReason {
    /// It does not exist.
    Missing,
    /// It exists but reading it failed.
    Unreadable(io::ErrorKind),
    /// Its text is not what the kernel writes there (quoted, trimmed).
    Malformed(String),
    /// `/proc/self/cgroup` names a hierarchy that is not mounted where this
    /// process can see its cgroup (no mount, or the cgroup lies outside the
    /// mount's root); the path is `/proc/self/mountinfo`.
    NotMounted(CgroupVersion),
}

impl fmt::Display for Unread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.reason {
            UnreadReason::Missing => write!(f, "{path} missing"),
            UnreadReason::Unreadable(kind) => write!(f, "{path} unreadable: {kind}"),
            UnreadReason::Malformed(text) => write!(f, "{path} malformed: {text:?}"),
            UnreadReason::NotMounted(version) => write!(
                f,
                "{version} cpu hierarchy not mounted over this process's cgroup ({path})"
            ),
        }
    }
}

/// What [`probe`] found: the tightest quota, and the files that told nothing.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Probe {
    pub(crate) quota: Option<Quota>,
    pub(crate) unread: Vec<Unread>,
}

impl Probe {
    fn offer(&mut self, q: Quota) {
        let tighter = match &self.quota {
            Some(best) => q.cpus < best.cpus,
            None => true,
        };
        if tighter {
            self.quota = Some(q);
        }
    }

    fn unread(&mut self, path: PathBuf, reason: UnreadReason) {
        self.unread.push(Unread { path, reason });
    }
}

const V1_QUOTA: &str = "cpu.cfs_quota_us";
const V1_PERIOD: &str = "cpu.cfs_period_us";
const V2_MAX: &str = "cpu.max";
const PROC_CGROUP: &str = "/proc/self/cgroup";
const PROC_MOUNTINFO: &str = "/proc/self/mountinfo";

/// The tightest CPU quota over this process's cgroups, v1 and v2, reading
/// `/proc/self/cgroup`, `/proc/self/mountinfo` and the cgroup files under
/// `root` (`/` on a live system; every path in the result is as seen from
/// `root`).
pub(crate) fn probe(root: &Path) -> Probe {
    let mut probe = Probe::default();
    let Some(cgroups) = read(root, Path::new(PROC_CGROUP), &mut probe) else {
        return probe;
    };
    let Some(mountinfo) = read(root, Path::new(PROC_MOUNTINFO), &mut probe) else {
        return probe;
    };
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
    let mut hierarchies = Vec::new();
    for (version, path) in cgroups.lines().filter_map(cpu_cgroup_line) {
        match mounts.iter().find_map(|m| m.dir_of(version, path)) {
            Some(found) => hierarchies.push((version, found)),
            None => probe.unread(
                PathBuf::from(PROC_MOUNTINFO),
                UnreadReason::NotMounted(version),
            ),
        }
    }
    // A `0::` line with no unified mount is ordinary on a host that mounts
    // only v1; it matters only where nothing else was found.
    if !hierarchies.is_empty() {
        probe.unread.retain(|u| {
            !matches!(u.reason, UnreadReason::NotMounted(CgroupVersion::V2))
                || hierarchies.iter().any(|(v, _)| *v == CgroupVersion::V2)
        });
    }
    for (version, (mount_point, dir)) in hierarchies {
        walk(root, version, &mount_point, &dir, &mut probe);
    }
    probe
}

/// Reads the quota files of `dir` and each of its parents up to
/// `mount_point`, offering each quota to `probe`.
fn walk(root: &Path, version: CgroupVersion, mount_point: &Path, dir: &Path, probe: &mut Probe) {
    if !on_disk(root, dir).is_dir() {
        probe.unread(dir.to_path_buf(), UnreadReason::Missing);
        return;
    }
    // Bounded: each turn goes one directory up, and `dir` is under
    // `mount_point` (it was built by joining onto it).
    let mut level = Some(dir);
    while let Some(d) = level {
        let quota = match version {
            CgroupVersion::V1 => v1_quota(root, d, probe),
            // The root cgroup has no `cpu.max`, and a cgroup whose parent
            // does not delegate the `cpu` controller has none either: a
            // missing file above the process's own cgroup sets no limit.
            CgroupVersion::V2 => v2_quota(root, d, d == dir && d != mount_point, probe),
        };
        if let Some(cpus) = quota {
            probe.offer(Quota {
                cpus,
                version,
                dir: d.to_path_buf(),
            });
        }
        level = d.parent().filter(|_| d != mount_point);
    }
}

/// The v1 quota of `dir` in CPUs; `None` for `-1` (no limit) or a file that
/// told nothing (recorded in `probe`).
fn v1_quota(root: &Path, dir: &Path, probe: &mut Probe) -> Option<f64> {
    let quota_path = dir.join(V1_QUOTA);
    let text = read(root, &quota_path, probe)?;
    let quota: i64 = match text.trim().parse() {
        Ok(q) if q != 0 => q,
        _ => return malformed(probe, quota_path, &text),
    };
    if quota < 0 {
        return None;
    }
    let period_path = dir.join(V1_PERIOD);
    let text = read(root, &period_path, probe)?;
    match text.trim().parse::<u64>() {
        Ok(period) if period > 0 => Some(quota as f64 / period as f64),
        _ => malformed(probe, period_path, &text),
    }
}

/// The v2 quota of `dir` in CPUs; `None` for `max` (no limit) or a file that
/// told nothing (recorded in `probe`, a missing file only when
/// `must_exist`).
fn v2_quota(root: &Path, dir: &Path, must_exist: bool, probe: &mut Probe) -> Option<f64> {
    let path = dir.join(V2_MAX);
    let text = match std::fs::read_to_string(on_disk(root, &path)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !must_exist => return None,
        Err(e) => {
            probe.unread(path, reason(&e));
            return None;
        }
    };
    if text.split_whitespace().next() == Some("max") {
        return None;
    }
    match parse_cpu_max(&text) {
        Some(q) if q > 0.0 => Some(q),
        _ => malformed(probe, path, &text),
    }
}

fn malformed(probe: &mut Probe, path: PathBuf, text: &str) -> Option<f64> {
    probe.unread(path, UnreadReason::Malformed(text.trim().to_string()));
    None
}

/// Reads `path` under `root`, recording a failure in `probe`.
fn read(root: &Path, path: &Path, probe: &mut Probe) -> Option<String> {
    match std::fs::read_to_string(on_disk(root, path)) {
        Ok(text) => Some(text),
        Err(e) => {
            probe.unread(path.to_path_buf(), reason(&e));
            None
        }
    }
}

fn reason(e: &io::Error) -> UnreadReason {
    match e.kind() {
        io::ErrorKind::NotFound => UnreadReason::Missing,
        kind => UnreadReason::Unreadable(kind),
    }
}

/// `path` (absolute, as the process sees it) under `root`.
fn on_disk(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The hierarchy and cgroup path of a `/proc/self/cgroup` line that can set
/// a CPU quota: `0::/path` (v2) or `N:...cpu...:/path` (v1 with the `cpu`
/// controller); `None` for the others.
fn cpu_cgroup_line(line: &str) -> Option<(CgroupVersion, &str)> {
    let mut fields = line.splitn(3, ':');
    let (id, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
    if id == "0" && controllers.is_empty() {
        Some((CgroupVersion::V2, path))
    } else if controllers.split(',').any(|c| c == "cpu") {
        Some((CgroupVersion::V1, path))
    } else {
        None
    }
}

/// A cgroup mount from `/proc/self/mountinfo`.
#[derive(Debug, PartialEq)]
struct Mount {
    version: CgroupVersion,
    /// The cgroup the mount shows at its mount point (`/` for the whole
    /// hierarchy).
    root: PathBuf,
    point: PathBuf,
}

impl Mount {
    /// A `cgroup2` mount, or a `cgroup` mount with the `cpu` controller; `None`
    /// for other lines.
    ///
    /// The format (proc(5)): `id parent major:minor root mount-point options
    /// [optional fields...] - fstype source super-options`.
    fn parse(line: &str) -> Option<Mount> {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (fstype, _source, options) = (right.next()?, right.next()?, right.next()?);
        let version = match fstype {
            "cgroup2" => CgroupVersion::V2,
            "cgroup" if options.split(',').any(|o| o == "cpu") => CgroupVersion::V1,
            _ => return None,
        };
        Some(Mount {
            version,
            root: PathBuf::from(unescape(left.get(3)?)),
            point: PathBuf::from(unescape(left.get(4)?)),
        })
    }

    /// The mount point and the directory of cgroup `path` of hierarchy
    /// `version` under this mount; `None` when the mount is of another
    /// hierarchy or does not show that cgroup.
    fn dir_of(&self, version: CgroupVersion, path: &str) -> Option<(PathBuf, PathBuf)> {
        if self.version != version {
            return None;
        }
        let rel = Path::new(path.trim()).strip_prefix(&self.root).ok()?;
        // A path outside the cgroup namespace shows as `/../..`: not ours.
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return None;
        }
        let dir = if rel.as_os_str().is_empty() {
            self.point.clone()
        } else {
            self.point.join(rel)
        };
        Some((self.point.clone(), dir))
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`,
/// `\134`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match (bytes[i], octal) {
            (b'\\', Some(b)) => {
                out.push(b);
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The quota in a cgroup v2 `cpu.max` file, in CPUs: `"$QUOTA $PERIOD"`
/// gives quota / period; `"max ..."` (no limit) or a malformed line gives
/// `None`. The period defaults to 100 000 µs when absent.
///
/// # Examples
///
/// ```
/// use statepipe_sys::cpus::parse_cpu_max;
///
/// assert_eq!(parse_cpu_max("200000 100000\n"), Some(2.0));
/// assert_eq!(parse_cpu_max("max 100000\n"), None);
/// ```
pub fn parse_cpu_max(s: &str) -> Option<f64> {
    let mut it = s.split_whitespace();
    let quota: f64 = it.next()?.parse().ok()?;
    let period: f64 = it.next().map_or(Some(100_000.0), |p| p.parse().ok())?;
    (period > 0.0).then_some(quota / period)
}

#[cfg(test)]
mod tests;
