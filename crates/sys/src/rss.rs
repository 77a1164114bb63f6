//! The process's resident memory, as the kernel counts it.
//!
//! [`peak`] reads the high-water mark (`VmHWM` in `/proc/self/status`),
//! and [`reset_peak`] brings it down to what is resident now (writing `5`
//! to `/proc/self/clear_refs`), so the peak of one phase of a run can be
//! read on its own. The kernel keeps one mark per process, and what a
//! parent reads of a child's peak when it exits (`getrusage`, `time -v`)
//! is that same mark: a child that resets it reports only the peak since
//! its last reset.
//!
//! ```
//! if let Some(peak) = statepipe_sys::rss::peak() {
//!     assert!(peak >= statepipe_sys::rss::now().unwrap_or(0) / 2);
//! }
//! ```

/// The peak resident memory of this process, in bytes (since it started or
/// since the last [`reset_peak`]); `None` where `/proc` cannot tell.
pub fn peak() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// The resident memory of this process now, in bytes.
pub fn now() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// The resident memory now of the process `pid`, in bytes (to watch a
/// child from outside); `None` once it has ended, or without `/proc`.
pub fn of_process(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_kib(&status, "VmRSS:")
}

/// Lowers the mark [`peak`] reads to the resident memory now; false where
/// that is not possible (no `/proc`, an old kernel).
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib(&status, key)
}

fn parse_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..].split_whitespace().next()?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernel_s_lines() {
        let status = "Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n";
        assert_eq!(parse_kib(status, "VmHWM:"), Some(2 << 20));
        assert_eq!(parse_kib(status, "VmRSS:"), Some(1 << 20));
        assert_eq!(parse_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn reads_this_process_from_outside_as_from_inside() {
        let Some(inside) = now() else {
            return; // no /proc here
        };
        let outside = of_process(std::process::id()).unwrap();
        assert!(
            outside.abs_diff(inside) < 16 << 20,
            "{outside} against {inside}"
        );
    }

    #[test]
    fn the_peak_comes_down_to_what_is_resident() {
        let (Some(_), true) = (peak(), reset_peak()) else {
            return; // no /proc here
        };
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let with = peak().unwrap();
        drop(big);
        assert!(reset_peak());
        let after = peak().unwrap();
        assert!(after + (32 << 20) < with, "{after} after, {with} with");
    }
}
