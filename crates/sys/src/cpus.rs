//! Which CPUs this process may use, and how many of them it can keep busy.
//!
//! Two limits apply, and neither implies the other: the scheduler affinity
//! mask says *which* CPUs a thread may run on, the cgroup CPU quota (v2
//! `cpu.max`, v1 `cpu.cfs_quota_us`) says how much CPU time the process's
//! cgroup gets per period. A container given 2 CPUs of time on a 64-CPU host
//! has 64 ids in its mask and a quota of 2.0; starting 64 busy workers there
//! only makes them preempt each other, and the kernel stops all of them
//! together once the period's time is spent.

use std::env::VarError;
use std::fmt;
use std::path::Path;

pub use crate::cgroup::{parse_cpu_max, CgroupVersion, Quota, Unread, UnreadReason};

/// The CPUs this process may use, as [`usable_cpus`] found them.
///
/// Its [`Display`](fmt::Display) is the one-line explanation a command
/// prints at start, e.g. `2 CPUs in affinity, quota 1.0 CPU (cgroup v1
/// cpu.cfs_quota_us at /sys/fs/cgroup/cpu/q) → 1 worker`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cpus {
    /// The CPUs in this process's affinity mask, in increasing id order.
    ///
    /// Never empty: where the mask cannot be read, `0..n` with `n` from
    /// [`std::thread::available_parallelism`] (a guess, so pinning to them
    /// may fail).
    pub ids: Vec<usize>,
    /// The tightest cgroup CPU quota over this process's cgroups (v1 and v2,
    /// each cgroup from its own up to the root it can see: a parent's quota
    /// caps its children); `None` where none sets one.
    pub quota: Option<Quota>,
    /// How many CPUs the process can keep busy: `min(ids.len(),
    /// floor(quota))`, at least 1. The first `count` of
    /// [`ids`](Cpus::ids) are the CPUs to pin that many workers to.
    ///
    /// The quota is rounded down: under 1.5 CPUs of quota, two busy workers
    /// spend the period's time in three quarters of the period and are then
    /// stopped together until the next one, so every item in flight waits
    /// out the stop; one busy worker is never stopped and leaves the half
    /// CPU to the threads that feed and drain it.
    pub count: usize,
    /// The cgroup files that should have told a quota and did not (missing,
    /// unreadable, malformed). Where no other file gave a quota, the
    /// affinity mask alone sized the process.
    pub unread: Vec<Unread>,
}

impl Cpus {
    /// Combines an affinity mask and a quota; `ids` must not be empty.
    fn new(ids: Vec<usize>, quota: Option<Quota>, unread: Vec<Unread>) -> Self {
        debug_assert!(!ids.is_empty(), "an empty CPU list");
        let by_quota = quota
            .as_ref()
            .map_or(usize::MAX, |q| q.cpus.floor() as usize);
        let count = ids.len().min(by_quota).max(1);
        Cpus {
            ids,
            quota,
            count,
            unread,
        }
    }
}

impl fmt::Display for Cpus {
    /// `N CPUs in affinity, quota Q CPUs (cgroup vX FILE at DIR) → C workers`,
    /// or `no cgroup CPU quota` in place of the quota; the files that told
    /// nothing follow in parentheses.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.ids.len();
        write!(f, "{n} CPU{} in affinity, ", plural(n))?;
        match &self.quota {
            Some(q) => write!(
                f,
                "quota {} CPU{} ({} {} at {})",
                cpus_text(q.cpus),
                if q.cpus == 1.0 { "" } else { "s" },
                q.version,
                q.version.quota_file(),
                q.dir.display()
            )?,
            None => f.write_str("no cgroup CPU quota")?,
        }
        if !self.unread.is_empty() {
            let unread: Vec<String> = self.unread.iter().map(Unread::to_string).collect();
            let then = if self.quota.is_some() {
                "ignored"
            } else {
                "fell back to the affinity mask"
            };
            write!(f, " ({}; {then})", unread.join(", "))?;
        }
        write!(f, " → {} worker{}", self.count, plural(self.count))
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A CPU count with one to two decimals: `1.0`, `1.5`, `0.25`.
fn cpus_text(cpus: f64) -> String {
    let text = format!("{cpus:.2}");
    match text.strip_suffix('0') {
        Some(one) => one.to_string(),
        None => text,
    }
}

/// The CPUs this process may use: its affinity mask and the cgroup CPU quota
/// on its cgroup paths, v1 and v2 (see [`Cpus`]).
///
/// Reads the mask, `/proc/self/cgroup`, `/proc/self/mountinfo` and the quota
/// files at each call; the result is a snapshot (a process can be moved to
/// another cgroup or given another mask while it runs). The mask is the
/// calling thread's: call this before pinning, or from a thread that was
/// never pinned. Off Linux there is no cgroup, and the quota is `None`.
///
/// # Examples
///
/// ```
/// let cpus = statepipe_sys::cpus::usable_cpus();
/// let pins = &cpus.ids[..cpus.count];
/// assert!(!pins.is_empty());
/// eprintln!("{cpus}"); // e.g. `2 CPUs in affinity, no cgroup CPU quota → 2 workers`
/// ```
pub fn usable_cpus() -> Cpus {
    let mut ids = affinity();
    if ids.is_empty() {
        ids = (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    let probe = if cfg!(target_os = "linux") {
        crate::cgroup::probe(Path::new("/"))
    } else {
        Default::default()
    };
    Cpus::new(ids, probe.quota, probe.unread)
}

/// The affinity mask of the calling thread, sorted; empty when it cannot
/// be read.
#[cfg(target_os = "linux")]
fn affinity() -> Vec<usize> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The CPUs `core_affinity` reports (all of them where the platform has no
/// affinity mask), sorted; empty when it cannot tell.
#[cfg(not(target_os = "linux"))]
fn affinity() -> Vec<usize> {
    let mut ids: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect();
    ids.sort_unstable();
    ids
}

/// The worker count the user set in the environment variable `var` (such
/// as `STATEPIPE_WORKERS`): `None` when it is unset.
///
/// Surrounding whitespace is ignored.
///
/// # Errors
///
/// When `var` is set but is not a positive integer (empty, zero, negative,
/// not a number, not Unicode); the message names the variable and quotes
/// the value, ready to show the user.
///
/// # Examples
///
/// ```
/// use statepipe_sys::cpus::workers_from_env;
///
/// assert_eq!(workers_from_env("STATEPIPE_SYS_DOCTEST_NEVER_SET"), Ok(None));
/// ```
pub fn workers_from_env(var: &str) -> Result<Option<usize>, String> {
    match std::env::var(var) {
        Ok(value) => parse_workers(var, &value).map(Some),
        Err(VarError::NotPresent) => Ok(None),
        Err(VarError::NotUnicode(value)) => Err(format!(
            "{var} must be a positive integer (a number of workers), got {value:?}"
        )),
    }
}

/// Parses the value of `var` as [`workers_from_env`] does; split out so
/// tests need not change the process environment.
fn parse_workers(var: &str, value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "{var} must be a positive integer (a number of workers), got {value:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_max_parses_quota_over_period() {
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(1.5));
        assert_eq!(parse_cpu_max("200000 100000"), Some(2.0));
        assert_eq!(parse_cpu_max("50000 50000"), Some(1.0));
    }

    #[test]
    fn cpu_max_defaults_the_period() {
        assert_eq!(parse_cpu_max("50000\n"), Some(0.5));
    }

    #[test]
    fn cpu_max_without_a_limit_or_malformed_is_none() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("max"), None);
        assert_eq!(parse_cpu_max(""), None);
        assert_eq!(parse_cpu_max("100000 0"), None);
        assert_eq!(parse_cpu_max("100000 soon"), None);
    }

    fn quota(cpus: f64) -> Option<Quota> {
        Some(Quota {
            cpus,
            version: CgroupVersion::V1,
            dir: "/sys/fs/cgroup/cpu/q".into(),
        })
    }

    #[test]
    fn count_is_the_tighter_limit_rounded_down_and_at_least_one() {
        let eight: Vec<usize> = (0..8).collect();
        let count = |q: Option<Quota>| Cpus::new(eight.clone(), q, Vec::new()).count;
        assert_eq!(count(None), 8);
        assert_eq!(count(quota(2.5)), 2);
        assert_eq!(count(quota(1.5)), 1);
        assert_eq!(count(quota(1.99)), 1);
        assert_eq!(count(quota(0.5)), 1);
        assert_eq!(count(quota(64.0)), 8);
        assert_eq!(count(quota(0.0)), 1);
    }

    #[test]
    fn the_line_names_the_quota_and_where_it_came_from() {
        let cpus = Cpus::new(vec![0, 1], quota(1.0), Vec::new());
        assert_eq!(
            cpus.to_string(),
            "2 CPUs in affinity, quota 1.0 CPU (cgroup v1 cpu.cfs_quota_us at \
             /sys/fs/cgroup/cpu/q) → 1 worker"
        );
        let v2 = Some(Quota {
            cpus: 2.5,
            version: CgroupVersion::V2,
            dir: "/sys/fs/cgroup/app".into(),
        });
        let cpus = Cpus::new((0..4).collect(), v2, Vec::new());
        assert_eq!(
            cpus.to_string(),
            "4 CPUs in affinity, quota 2.5 CPUs (cgroup v2 cpu.max at /sys/fs/cgroup/app) \
             → 2 workers"
        );
        let cpus = Cpus::new(vec![3], None, Vec::new());
        assert_eq!(
            cpus.to_string(),
            "1 CPU in affinity, no cgroup CPU quota → 1 worker"
        );
    }

    #[test]
    fn the_line_says_what_was_unread_and_that_the_mask_decided() {
        let unread = vec![Unread {
            path: "/sys/fs/cgroup/cpu/q/cpu.cfs_quota_us".into(),
            reason: UnreadReason::Unreadable(std::io::ErrorKind::PermissionDenied),
        }];
        let line = Cpus::new(vec![0, 1], None, unread.clone()).to_string();
        assert_eq!(
            line,
            "2 CPUs in affinity, no cgroup CPU quota (/sys/fs/cgroup/cpu/q/cpu.cfs_quota_us \
             unreadable: permission denied; fell back to the affinity mask) → 2 workers"
        );
        let line = Cpus::new(vec![0, 1], quota(1.0), unread).to_string();
        assert!(
            line.contains("unreadable: permission denied; ignored) → 1 worker"),
            "{line}"
        );
    }

    #[test]
    fn usable_cpus_count_is_within_the_mask() {
        let cpus = usable_cpus();
        assert!(cpus.count >= 1, "{cpus:?}");
        assert!(cpus.count <= cpus.ids.len(), "{cpus:?}");
        assert!(cpus.ids.windows(2).all(|w| w[0] < w[1]), "{cpus:?}");
    }

    #[test]
    fn workers_parse_positive_integers() {
        assert_eq!(parse_workers("W", "4"), Ok(4));
        assert_eq!(parse_workers("W", " 12\n"), Ok(12));
    }

    #[test]
    fn workers_reject_everything_else_with_a_clear_message() {
        for bad in ["", " ", "0", "-1", "two", "1.5", "4 workers"] {
            let err = parse_workers("STATEPIPE_WORKERS", bad).unwrap_err();
            assert!(err.contains("STATEPIPE_WORKERS"), "{err}");
            assert!(err.contains("positive integer"), "{err}");
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn workers_from_an_unset_variable_are_none() {
        assert_eq!(workers_from_env("STATEPIPE_SYS_TEST_NEVER_SET"), Ok(None));
    }
}
