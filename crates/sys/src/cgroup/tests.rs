//! The quota on fake `/proc` and cgroup trees: v1, v2, hybrid, nested,
//! none, a namespaced mount root, and files missing, unreadable or malformed.

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
