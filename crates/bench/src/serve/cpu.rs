//! Where a window's CPU time went: each server thread's, from
//! `/proc/PID/task/*/stat`, grouped by thread name (`serve-io-0` …
//! `serve-io-7` as `serve-io-*`), and the load generator's, from the
//! resource usage of the children this process waited for. A figure
//! capped by a thread at 100 % of its CPU, by the server's CPUs all busy,
//! or by the generator's, each reads differently; this says which.

use std::collections::BTreeMap;
use std::time::Duration;

/// Clock ticks per second of `/proc`'s CPU times (`USER_HZ`: 100 on every
/// Linux this runs on).
const TICKS_PER_S: f64 = 100.0;

/// CPU time of each thread of a process: (name, thread id) → ticks.
#[derive(Debug, Clone, Default)]
pub struct Threads(BTreeMap<(String, u32), u64>);

impl Threads {
    /// The threads of `pid` now (none if it is gone).
    pub fn of(pid: u32) -> Threads {
        let mut map = BTreeMap::new();
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return Threads(map);
        };
        for entry in dir.flatten() {
            let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some((name, ticks)) = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
            {
                map.insert((name, tid), ticks);
            }
        }
        Threads(map)
    }

    /// CPUs used by each group of threads between `self` and `later`, over
    /// `window`: the group's name and thread count, busiest first.
    pub fn usage(&self, later: &Threads, window: Duration) -> Vec<(String, usize, f64)> {
        let secs = window.as_secs_f64().max(1e-9);
        let mut groups: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        for ((name, tid), &after) in &later.0 {
            let before = self.0.get(&(name.clone(), *tid)).copied().unwrap_or(0);
            let g = groups.entry(group(name)).or_default();
            g.0 += 1;
            g.1 += after.saturating_sub(before);
        }
        let mut v: Vec<(String, usize, f64)> = groups
            .into_iter()
            .map(|(name, (n, ticks))| (name, n, ticks as f64 / TICKS_PER_S / secs))
            .collect();
        v.sort_by(|a, b| b.2.total_cmp(&a.2).then_with(|| a.0.cmp(&b.0)));
        v
    }
}

/// A thread's name and its user + system ticks, from its `stat` line (the
/// name is in parentheses and may hold spaces or parentheses itself).
fn parse_stat(s: &str) -> Option<(String, u64)> {
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let name = s.get(open + 1..close)?.to_string();
    // After the name: state (field 3) … utime (14), stime (15).
    let rest: Vec<&str> = s.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

/// A thread's group: its name with a trailing number (and the `-` or `.`
/// before it) made `*`, so a pool's threads count together.
fn group(name: &str) -> String {
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if stem.len() == name.len() {
        return name.to_string();
    }
    format!("{stem}*")
}

/// CPU seconds (user + system) of the children this process has waited
/// for so far: a child run to completion between two calls (the load
/// generator) adds its own.
pub fn children_cpu_s() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
}

/// One line: the server's CPUs in all and by group (the busiest six), and
/// the generator's, each against the CPUs it was pinned to (`k`, `g`; 0:
/// not pinned).
pub fn describe(server: &[(String, usize, f64)], k: usize, generator: f64, g: usize) -> String {
    let total: f64 = server.iter().map(|x| x.2).sum();
    let groups: Vec<String> = server
        .iter()
        .filter(|x| x.2 >= 0.005)
        .take(6)
        .map(|(name, n, c)| {
            if *n > 1 {
                format!("{name} x{n} {c:.2}")
            } else {
                format!("{name} {c:.2}")
            }
        })
        .collect();
    // No CPUs listed: not pinned.
    let of = |n: usize| {
        if n == 0 {
            "any CPU".to_string()
        } else {
            n.to_string()
        }
    };
    format!(
        "cpu: server {total:.2} of {} ({}); generator {generator:.2} of {}",
        of(k),
        groups.join(", "),
        of(g)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_name_and_ticks() {
        let line = "4242 (serve-io 3) S 1 2 3 4 5 6 7 8 9 10 120 30 0 0 20 0 1 0";
        assert_eq!(parse_stat(line), Some(("serve-io 3".to_string(), 150)));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[test]
    fn numbered_threads_are_grouped_and_usage_is_per_second() {
        assert_eq!(group("serve-io-12"), "serve-io-*");
        assert_eq!(group("ring-apply"), "ring-apply");
        assert_eq!(
            group("actix-rt|system:0|arbiter:3"),
            "actix-rt|system:0|arbiter:*"
        );
        let before = Threads(BTreeMap::from([
            (("serve-io-0".to_string(), 1), 100),
            (("serve-io-1".to_string(), 2), 100),
            (("ring-apply".to_string(), 3), 0),
        ]));
        let after = Threads(BTreeMap::from([
            (("serve-io-0".to_string(), 1), 300),
            (("serve-io-1".to_string(), 2), 250),
            (("ring-apply".to_string(), 3), 100),
            // A thread born during the window counts from zero.
            (("ring-reply".to_string(), 4), 20),
        ]));
        let u = before.usage(&after, Duration::from_secs(2));
        assert_eq!(u[0], ("serve-io-*".to_string(), 2, 1.75));
        assert_eq!(u[1], ("ring-apply".to_string(), 1, 0.5));
        assert_eq!(u[2], ("ring-reply".to_string(), 1, 0.1));
        let line = describe(&u, 4, 3.5, 8);
        assert!(line.starts_with("cpu: server 2.35 of 4 (serve-io-* x2 1.75, ring-apply 0.50"));
        assert!(line.ends_with("generator 3.50 of 8"), "{line}");
        assert!(describe(&u, 0, 1.0, 0).ends_with("generator 1.00 of any CPU"));
    }
}
