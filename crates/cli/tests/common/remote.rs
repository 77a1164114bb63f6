//! Helpers of the tests of distributed pipeline runs: a one-process run's
//! digest, a coordinator (`statepipe run EXAMPLE --coordinator`) whose
//! standard error is read as it comes, and its members.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::EXE;

pub const SECRET: &str = "remote-test-secret";

/// The `digest: ` line of a run's standard output.
pub fn digest(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with("digest: "))
        .unwrap_or_else(|| panic!("no digest line in\n{stdout}"))
        .to_string()
}

/// The outputs a run delivered, from its ` outputs from ` line (or the
/// digest's first field).
pub fn outputs(stdout: &str) -> Option<String> {
    let delivered = stdout
        .lines()
        .find(|l| l.contains(" outputs from "))
        .or_else(|| stdout.lines().find(|l| l.starts_with("digest: ")))?;
    delivered
        .trim_start_matches("digest: ")
        .split(" outputs")
        .next()
        .map(str::to_string)
}

/// The digest line of `example` over `items` inputs in one process.
pub fn one_process(example: &str, items: &str) -> String {
    let out = Command::new(EXE)
        .args([
            "run",
            example,
            "--items",
            items,
            "--workers",
            "1",
            "--no-pin",
        ])
        .env("STATEPIPE_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    digest(&String::from_utf8_lossy(&out.stdout))
}

/// A process's standard error lines, read on a thread of their own (so
/// that it never blocks on a full pipe), as they come.
pub struct Lines {
    rx: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    pub fn of(err: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end even with nobody listening: a closed pipe
            // would fail the process's next write.
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Lines {
            rx,
            seen: Vec::new(),
        }
    }

    /// Waits for a line containing `part` (failing after `limit`, saying
    /// what came instead); returns it.
    pub fn wait_for(&mut self, part: &str, limit: Duration) -> String {
        if let Some(l) = self.seen.iter().find(|l| l.contains(part)) {
            return l.clone();
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.contains(part) {
                        return l;
                    }
                }
                Err(_) => panic!(
                    "no line with {part:?} within {limit:?}; got:\n{}",
                    self.seen.join("\n")
                ),
            }
        }
    }

    /// Every line, once the process has closed its standard error.
    pub fn rest(mut self) -> String {
        self.seen.extend(self.rx.iter());
        self.seen.join("\n")
    }
}

/// Starts a coordinator; returns it, the address its members join, and
/// its standard error.
#[allow(clippy::zombie_processes)] // a test that panics here ends the process
pub fn coordinator(
    example: &str,
    items: &str,
    members: &str,
    extra: &[&str],
) -> (Child, String, Lines) {
    let mut c = Command::new(EXE)
        .args([
            "run",
            example,
            "--items",
            items,
            "--coordinator",
            "127.0.0.1:0",
            "--members",
            members,
        ])
        .args(extra)
        .env("STATEPIPE_SECRET", SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::of(c.stderr.take().unwrap());
    let line = lines.wait_for("--connect ", Duration::from_secs(60));
    let addr = line.trim().split("--connect ").nth(1).unwrap().to_string();
    (c, addr, lines)
}

/// A `statepipe member` of the coordinator at `addr`, on one worker.
pub fn member(addr: &str, secret: &str) -> Child {
    Command::new(EXE)
        .args(["member", "--connect", addr, "--workers", "1", "--no-pin"])
        .env("STATEPIPE_SECRET", secret)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A `statepipe member --health 127.0.0.1:0` of the coordinator at
/// `addr`, on one worker, with `extra` arguments; the address its health
/// endpoint listens on, and its standard error.
pub fn member_with_health(addr: &str, extra: &[&str]) -> (Child, String, Lines) {
    let mut m = Command::new(EXE)
        .args(["member", "--connect", addr, "--workers", "1", "--no-pin"])
        .args(["--health", "127.0.0.1:0"])
        .args(extra)
        .env("STATEPIPE_SECRET", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = Lines::of(m.stderr.take().unwrap());
    let line = lines.wait_for("health: http://", Duration::from_secs(60));
    let health = line
        .trim()
        .trim_start_matches("health: http://")
        .trim_end_matches("/health")
        .to_string();
    (m, health, lines)
}

/// Waits for `c` to end; its output and standard output.
pub fn finish(c: Child) -> (Output, String) {
    let out = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

/// Waits for `path` to appear (failing after `limit`).
pub fn wait_for(path: &Path, limit: Duration) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}
