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
mod tests {
    use super::*;

    /// A fake `/` in a temporary directory: `/proc/self/*` and cgroup trees.
    struct FakeRoot(tempfile::TempDir);

    impl FakeRoot {
        fn new(cgroup: &str, mountinfo: &str) -> FakeRoot {
            let root = FakeRoot(tempfile::tempdir().expect("a temporary directory"));
            root.file(PROC_CGROUP, cgroup);
            root.file(PROC_MOUNTINFO, mountinfo);
            root
        }

        fn file(&self, path: &str, text: &str) -> &Self {
            let path = on_disk(self.0.path(), Path::new(path));
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
            self
        }

        fn dir(&self, path: &str) -> &Self {
            std::fs::create_dir_all(on_disk(self.0.path(), Path::new(path))).expect("mkdir");
            self
        }

        /// A v1 cgroup directory with its quota and period files.
        fn v1(&self, dir: &str, quota: i64, period: u64) -> &Self {
            self.file(&format!("{dir}/{V1_QUOTA}"), &format!("{quota}\n"))
                .file(&format!("{dir}/{V1_PERIOD}"), &format!("{period}\n"))
        }

        fn v2(&self, dir: &str, max: &str) -> &Self {
            self.file(&format!("{dir}/{V2_MAX}"), &format!("{max}\n"))
        }

        fn probe(&self) -> Probe {
            probe(self.0.path())
        }
    }

    const V1_CGROUP: &str = "12:pids:/q\n4:cpu,cpuacct:/q\n1:name=systemd:/\n";
    const V1_MOUNTS: &str = "\
        24 30 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        31 24 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n\
        32 24 0:28 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n";
    const V2_MOUNTS: &str = "\
        24 30 0:22 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
    /// This sandbox's layout: every v1 controller mounted on its own, and the
    /// unified hierarchy at `/sys/fs/cgroup/unified`.
    const HYBRID_MOUNTS: &str = "\
        32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
        33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

    fn quota(cpus: f64, version: CgroupVersion, dir: &str) -> Option<Quota> {
        Some(Quota {
            cpus,
            version,
            dir: dir.into(),
        })
    }

    #[test]
    fn v1_quota_over_period_in_the_cpu_hierarchy() {
        let fake = FakeRoot::new(V1_CGROUP, V1_MOUNTS);
        fake.v1("/sys/fs/cgroup/cpu,cpuacct", -1, 100_000)
            .v1("/sys/fs/cgroup/cpu,cpuacct/q", 150_000, 100_000)
            .v1("/sys/fs/cgroup/pids/q", 1, 1);
        let probe = fake.probe();
        assert_eq!(
            probe.quota,
            quota(1.5, CgroupVersion::V1, "/sys/fs/cgroup/cpu,cpuacct/q")
        );
        assert_eq!(probe.unread, []);
    }

    #[test]
    fn v2_quota_in_cpu_max() {
        let fake = FakeRoot::new("0::/app/web\n", V2_MOUNTS);
        fake.dir("/sys/fs/cgroup")
            .v2("/sys/fs/cgroup/app", "max 100000")
            .v2("/sys/fs/cgroup/app/web", "50000 100000");
        let probe = fake.probe();
        assert_eq!(
            probe.quota,
            quota(0.5, CgroupVersion::V2, "/sys/fs/cgroup/app/web")
        );
        assert_eq!(probe.unread, [], "the root cgroup has no cpu.max");
    }

    #[test]
    fn nested_quotas_the_tightest_wins_wherever_it_is() {
        let fake = FakeRoot::new(
            "4:cpu,cpuacct:/a/b/c\n",
            V1_MOUNTS.lines().nth(1).expect("the cpu mount"),
        );
        fake.v1("/sys/fs/cgroup/cpu,cpuacct", -1, 100_000)
            .v1("/sys/fs/cgroup/cpu,cpuacct/a", 400_000, 100_000)
            .v1("/sys/fs/cgroup/cpu,cpuacct/a/b", 100_000, 50_000)
            .v1("/sys/fs/cgroup/cpu,cpuacct/a/b/c", 300_000, 100_000);
        assert_eq!(
            fake.probe().quota,
            quota(2.0, CgroupVersion::V1, "/sys/fs/cgroup/cpu,cpuacct/a/b")
        );

        let fake = FakeRoot::new("0::/a/b\n", V2_MOUNTS);
        fake.dir("/sys/fs/cgroup")
            .v2("/sys/fs/cgroup/a", "100000 100000")
            .v2("/sys/fs/cgroup/a/b", "300000 100000");
        assert_eq!(
            fake.probe().quota,
            quota(1.0, CgroupVersion::V2, "/sys/fs/cgroup/a")
        );
    }

    #[test]
    fn no_quota_anywhere_is_none_and_nothing_unread() {
        let fake = FakeRoot::new(V1_CGROUP, V1_MOUNTS);
        fake.v1("/sys/fs/cgroup/cpu,cpuacct", -1, 100_000).v1(
            "/sys/fs/cgroup/cpu,cpuacct/q",
            -1,
            100_000,
        );
        assert_eq!(fake.probe(), Probe::default());

        let fake = FakeRoot::new("0::/app\n", V2_MOUNTS);
        fake.v2("/sys/fs/cgroup/app", "max 100000");
        assert_eq!(fake.probe(), Probe::default());
    }

    #[test]
    fn hybrid_takes_the_tightest_of_both_hierarchies() {
        let cgroup = "4:cpu:/q\n3:cpuacct:/q\n0::/u\n";
        let fake = FakeRoot::new(cgroup, HYBRID_MOUNTS);
        fake.v1("/sys/fs/cgroup/cpu", -1, 100_000)
            .v1("/sys/fs/cgroup/cpu/q", 100_000, 100_000)
            .v2("/sys/fs/cgroup/unified/u", "300000 100000");
        let probe = fake.probe();
        assert_eq!(
            probe.quota,
            quota(1.0, CgroupVersion::V1, "/sys/fs/cgroup/cpu/q")
        );
        assert_eq!(probe.unread, []);

        fake.v2("/sys/fs/cgroup/unified/u", "50000 100000");
        assert_eq!(
            fake.probe().quota,
            quota(0.5, CgroupVersion::V2, "/sys/fs/cgroup/unified/u")
        );
    }

    #[test]
    fn hybrid_with_the_process_in_the_unified_root() {
        // As in this sandbox: `0::/`, and no cpu.max in the unified root.
        let fake = FakeRoot::new("1:cpu:/q\n0::/\n", HYBRID_MOUNTS);
        fake.dir("/sys/fs/cgroup/unified")
            .v1("/sys/fs/cgroup/cpu", -1, 100_000)
            .v1("/sys/fs/cgroup/cpu/q", 100_000, 100_000);
        let probe = fake.probe();
        assert_eq!(
            probe.quota,
            quota(1.0, CgroupVersion::V1, "/sys/fs/cgroup/cpu/q")
        );
        assert_eq!(probe.unread, []);
    }

    #[test]
    fn a_namespaced_mount_root_maps_the_path_and_stops_the_walk_at_the_mount() {
        // A container that sees its own cgroup `/docker/abc` mounted at
        // `/sys/fs/cgroup/cpu,cpuacct`; the host's cgroups above it are not
        // visible, and the walk must not climb into `/sys/fs/cgroup`.
        let mounts = "\
            40 39 0:27 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct\n";
        let fake = FakeRoot::new("4:cpu,cpuacct:/docker/abc/job\n", mounts);
        fake.v1("/sys/fs/cgroup", 1_000, 100_000)
            .v1("/sys/fs/cgroup/cpu,cpuacct", 200_000, 100_000)
            .v1("/sys/fs/cgroup/cpu,cpuacct/job", -1, 100_000);
        let probe = fake.probe();
        assert_eq!(
            probe.quota,
            quota(2.0, CgroupVersion::V1, "/sys/fs/cgroup/cpu,cpuacct")
        );
        assert_eq!(probe.unread, []);

        // The same under cgroup namespaces on v2: the process sees `0::/`.
        let mounts = "\
            30 29 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let fake = FakeRoot::new("0::/\n", mounts);
        fake.v2("/sys/fs/cgroup", "100000 100000");
        assert_eq!(
            fake.probe().quota,
            quota(1.0, CgroupVersion::V2, "/sys/fs/cgroup")
        );
    }

    #[test]
    fn no_cgroup_at_all_is_no_quota() {
        // A kernel without cgroups lists none; nothing should have told a
        // quota, so nothing is reported unread.
        let root_fs = "20 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n";
        assert_eq!(FakeRoot::new("", root_fs).probe(), Probe::default());
        // Cgroups without the cpu controller (v1 named hierarchies only).
        let fake = FakeRoot::new("1:name=systemd:/user.slice\n", V1_MOUNTS);
        assert_eq!(fake.probe(), Probe::default());
        // A v2 cgroup in a container that mounts no cgroup filesystem: the
        // quota cannot be read, and the line says where it looked.
        let probe = FakeRoot::new("0::/\n", root_fs).probe();
        assert_eq!(probe.quota, None);
        assert_eq!(
            probe.unread,
            [Unread {
                path: PROC_MOUNTINFO.into(),
                reason: UnreadReason::NotMounted(CgroupVersion::V2),
            }]
        );
    }

    #[test]
    fn a_cgroup_outside_the_mount_root_is_not_mounted() {
        let mounts = "\
            40 39 0:27 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n";
        let fake = FakeRoot::new("4:cpu:/other\n", mounts);
        fake.v1("/sys/fs/cgroup/cpu", 100_000, 100_000);
        let probe = fake.probe();
        assert_eq!(probe.quota, None);
        assert_eq!(
            probe.unread,
            [Unread {
                path: PROC_MOUNTINFO.into(),
                reason: UnreadReason::NotMounted(CgroupVersion::V1),
            }]
        );
        let fake = FakeRoot::new("0::/../..\n", V2_MOUNTS);
        assert_eq!(fake.probe().quota, None);
    }

    #[test]
    fn a_missing_or_unreadable_file_is_reported_and_the_rest_still_counts() {
        // The process's own v1 cgroup lost its quota file; the parent's
        // still counts.
        let fake = FakeRoot::new("4:cpu:/a/b\n", HYBRID_MOUNTS);
        fake.v1("/sys/fs/cgroup/cpu", -1, 100_000)
            .v1("/sys/fs/cgroup/cpu/a", 300_000, 100_000)
            .dir("/sys/fs/cgroup/cpu/a/b");
        let probe = fake.probe();
        assert_eq!(
            probe.quota,
            quota(3.0, CgroupVersion::V1, "/sys/fs/cgroup/cpu/a")
        );
        assert_eq!(
            probe.unread,
            [Unread {
                path: "/sys/fs/cgroup/cpu/a/b/cpu.cfs_quota_us".into(),
                reason: UnreadReason::Missing,
            }]
        );

        // A v2 cpu.max that cannot be read (a directory: reading fails even
        // for root), and no other quota: nothing but the mask is left.
        let fake = FakeRoot::new("0::/app\n", V2_MOUNTS);
        fake.dir("/sys/fs/cgroup/app/cpu.max");
        let probe = fake.probe();
        assert_eq!(probe.quota, None);
        assert_eq!(probe.unread.len(), 1, "{probe:?}");
        assert_eq!(
            probe.unread[0].path,
            Path::new("/sys/fs/cgroup/app/cpu.max")
        );
        assert!(
            matches!(probe.unread[0].reason, UnreadReason::Unreadable(_)),
            "{probe:?}"
        );

        // Malformed text.
        let fake = FakeRoot::new("0::/app\n", V2_MOUNTS);
        fake.v2("/sys/fs/cgroup/app", "lots");
        assert_eq!(
            fake.probe().unread,
            [Unread {
                path: "/sys/fs/cgroup/app/cpu.max".into(),
                reason: UnreadReason::Malformed("lots".into()),
            }]
        );
    }

    #[test]
    fn missing_proc_files_or_cgroup_directories_are_reported() {
        let empty = tempfile::tempdir().expect("a temporary directory");
        let probe = probe(empty.path());
        assert_eq!(probe.quota, None);
        assert_eq!(
            probe.unread,
            [Unread {
                path: PROC_CGROUP.into(),
                reason: UnreadReason::Missing,
            }]
        );

        // The v1 hierarchy is mounted but the process's cgroup directory is
        // not there.
        let fake = FakeRoot::new("4:cpu:/gone\n", HYBRID_MOUNTS);
        fake.v1("/sys/fs/cgroup/cpu", -1, 100_000);
        assert_eq!(
            fake.probe().unread,
            [Unread {
                path: "/sys/fs/cgroup/cpu/gone".into(),
                reason: UnreadReason::Missing,
            }]
        );

        // A v2 cgroup without cpu.max (the controller not delegated to it).
        let fake = FakeRoot::new("0::/user\n", V2_MOUNTS);
        fake.dir("/sys/fs/cgroup/user");
        assert_eq!(
            fake.probe().unread,
            [Unread {
                path: "/sys/fs/cgroup/user/cpu.max".into(),
                reason: UnreadReason::Missing,
            }]
        );
    }

    #[test]
    fn a_v2_line_without_a_unified_mount_is_quiet_when_v1_answers() {
        let fake = FakeRoot::new(
            "4:cpu:/q\n0::/\n",
            V1_MOUNTS.replace("cpu,cpuacct", "cpu").as_str(),
        );
        fake.v1("/sys/fs/cgroup/cpu", -1, 100_000)
            .v1("/sys/fs/cgroup/cpu/q", 200_000, 100_000);
        let probe = fake.probe();
        assert_eq!(
            probe.quota,
            quota(2.0, CgroupVersion::V1, "/sys/fs/cgroup/cpu/q")
        );
        assert_eq!(probe.unread, []);
    }

    #[test]
    fn mount_points_with_escaped_spaces() {
        let line = r"40 39 0:27 / /mnt/cg\040x rw - cgroup cgroup rw,cpu";
        let mount = Mount::parse(line).expect("a cpu mount");
        assert_eq!(mount.point, Path::new("/mnt/cg x"));
        assert_eq!(unescape(r"a\134b\0"), r"a\b\0");
        assert_eq!(Mount::parse("1 2 0:3 / /proc rw - proc proc rw"), None);
        assert_eq!(Mount::parse("garbage"), None);
    }

    #[test]
    fn cgroup_lines() {
        assert_eq!(
            cpu_cgroup_line("0::/a:b"),
            Some((CgroupVersion::V2, "/a:b"))
        );
        assert_eq!(
            cpu_cgroup_line("3:cpuacct,cpu:/x"),
            Some((CgroupVersion::V1, "/x"))
        );
        assert_eq!(cpu_cgroup_line("2:cpuacct:/x"), None);
        assert_eq!(cpu_cgroup_line("2:cpuset:/x"), None);
        assert_eq!(cpu_cgroup_line("1:name=systemd:/"), None);
        assert_eq!(cpu_cgroup_line(""), None);
    }
}
