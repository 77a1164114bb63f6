//! Which CPUs this process may use, and how many of them it can keep busy.
//!
//! Two limits apply, and neither implies the other: the scheduler affinity
//! mask says *which* CPUs a thread may run on, the cgroup v2 `cpu.max` quota
//! says how much CPU time the process's cgroup gets per period. A container
//! given 2 CPUs of time on a 64-CPU host has 64 ids in its mask and a quota
//! of 2.0; starting 64 busy workers there only makes them preempt each other.

use std::env::VarError;
use std::path::{Path, PathBuf};

/// The CPUs this process may use, as [`usable_cpus`] found them.
#[derive(Debug, Clone, PartialEq)]
pub struct Cpus {
    /// The CPUs in this process's affinity mask, in increasing id order.
    ///
    /// Never empty: where the mask cannot be read, `0..n` with `n` from
    /// [`std::thread::available_parallelism`] (a guess, so pinning to them
    /// may fail).
    pub ids: Vec<usize>,
    /// The tightest cgroup v2 `cpu.max` quota on this process's cgroup path,
    /// in CPUs (`1.5` for `150000 100000`); `None` where no cgroup on the
    /// path sets one, or there is no cgroup v2 hierarchy.
    pub quota: Option<f64>,
    /// How many CPUs the process can keep busy: `min(ids.len(), floor(quota))`,
    /// at least 1. The first `count` of [`ids`](Cpus::ids) are the CPUs to
    /// pin that many workers to.
    pub count: usize,
}

impl Cpus {
    /// Combines an affinity mask and a quota; `ids` must not be empty.
    fn new(ids: Vec<usize>, quota: Option<f64>) -> Self {
        debug_assert!(!ids.is_empty(), "an empty CPU list");
        let by_quota = quota.map_or(usize::MAX, |q| q.floor() as usize);
        let count = ids.len().min(by_quota).max(1);
        Cpus { ids, quota, count }
    }
}

/// The CPUs this process may use: its affinity mask and the cgroup v2
/// `cpu.max` quota on its cgroup path (see [`Cpus`]).
///
/// Reads the mask and `/proc/self/cgroup` and the `cpu.max` files at each
/// call; the result is a snapshot (a process can be moved to another cgroup
/// or given another mask while it runs). The mask is the calling thread's:
/// call this before pinning, or from a thread that was never pinned.
///
/// # Examples
///
/// ```
/// let cpus = statepipe_sys::cpus::usable_cpus();
/// let pins = &cpus.ids[..cpus.count];
/// assert!(!pins.is_empty());
/// ```
pub fn usable_cpus() -> Cpus {
    let mut ids = affinity();
    if ids.is_empty() {
        ids = (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    Cpus::new(ids, cgroup_quota())
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

/// Where the cgroup v2 hierarchy is mounted.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The tightest `cpu.max` quota (in CPUs) on this process's cgroup path, from
/// its own cgroup up to the root: a parent's quota caps its children.
fn cgroup_quota() -> Option<f64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // The cgroup v2 line is `0::/path`; v1 lines name their controllers.
    let rel = cg.lines().find_map(|l| l.strip_prefix("0::"))?.trim();
    let mut dir = PathBuf::from(CGROUP_ROOT).join(rel.trim_start_matches('/'));
    let mut best: Option<f64> = None;
    // Bounded: each turn pops one component, until the root.
    loop {
        if let Some(q) = std::fs::read_to_string(dir.join("cpu.max"))
            .ok()
            .and_then(|s| parse_cpu_max(&s))
        {
            best = Some(best.map_or(q, |b| b.min(q)));
        }
        if dir == Path::new(CGROUP_ROOT) || !dir.pop() {
            return best;
        }
    }
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

    #[test]
    fn count_is_the_tighter_limit_and_at_least_one() {
        let eight: Vec<usize> = (0..8).collect();
        assert_eq!(Cpus::new(eight.clone(), None).count, 8);
        assert_eq!(Cpus::new(eight.clone(), Some(2.5)).count, 2);
        assert_eq!(Cpus::new(eight.clone(), Some(0.5)).count, 1);
        assert_eq!(Cpus::new(eight.clone(), Some(64.0)).count, 8);
        assert_eq!(Cpus::new(eight, Some(0.0)).count, 1);
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
