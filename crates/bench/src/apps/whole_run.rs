//! The `graph500-run` group's sample: one whole `statepipe graph500` run
//! as a child process, timed, its output block read, its resident memory
//! sampled from outside.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::BenchError;

/// What one whole `graph500` run measured.
pub(super) struct RunFigures {
    /// Seconds from start to exit.
    pub(super) seconds: f64,
    /// The harmonic-mean TEPS of its output block.
    pub(super) teps: f64,
    /// The median search time of its output block, in seconds.
    pub(super) median: f64,
    /// Its peak resident memory, in bytes.
    pub(super) peak: f64,
}

/// One whole `graph500` run of `exe` as a child process (`edges`: its
/// `--edges` value, `None` for an executable that predates the flag): its
/// seconds start to exit, the harmonic-mean TEPS of its output block, and
/// its peak resident memory in bytes, sampled from outside every 10 ms
/// (`VmRSS` in `/proc/PID/status`; the child's own high-water mark is no
/// use here, as `statepipe graph500` resets it phase by phase).
pub(super) fn graph500_command(
    exe: &std::path::Path,
    scale: u32,
    roots: usize,
    edges: Option<&str>,
) -> Result<RunFigures, BenchError> {
    let started = Instant::now();
    let mut command = std::process::Command::new(exe);
    command.args([
        "graph500",
        "--scale",
        &scale.to_string(),
        "--roots",
        &roots.to_string(),
    ]);
    if let Some(edges) = edges {
        command.args(["--edges", edges]);
    }
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| BenchError::failed("statepipe graph500", e))?;
    let pid = child.id();
    let done = AtomicBool::new(false);
    let (out, peak) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak = 0u64;
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(statepipe_sys::rss::of_process(pid).unwrap_or(0));
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            peak
        });
        let out = child.wait_with_output();
        done.store(true, Ordering::Relaxed);
        (out, sampler.join().expect("the RSS sampler panicked"))
    });
    let out = out.map_err(|e| BenchError::failed("statepipe graph500", e))?;
    let seconds = started.elapsed().as_secs_f64();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if !out.status.success() {
        return Err(BenchError::failed(
            "statepipe graph500",
            format!("{}: {}", out.status, stderr.trim()),
        ));
    }
    let teps = parse_value(&stdout, "bfs  harmonic_mean_TEPS:").ok_or_else(|| {
        BenchError::failed(
            "statepipe graph500",
            format!("no harmonic_mean_TEPS line in its output:\n{stdout}\n{stderr}"),
        )
    })?;
    let median = parse_value(&stdout, "bfs  median_time:").unwrap_or(f64::NAN);
    Ok(RunFigures {
        seconds,
        teps,
        median,
        peak: peak as f64,
    })
}

/// The number after `key` on its line of `text`.
fn parse_value(text: &str, key: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_output_block() {
        let block = "SCALE:                          8\nbfs  harmonic_mean_TEPS:        1.5e+09\n";
        assert_eq!(parse_value(block, "bfs  harmonic_mean_TEPS:"), Some(1.5e9));
        assert_eq!(parse_value(block, "bfs  mean_time:"), None);
    }
}
