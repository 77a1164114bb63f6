//! `statepipe pf` with buddy replication on four worker processes, three
//! of which are SIGKILLed at one moment mid-run: that takes a worker with
//! both its buddies, so no copy of its states survives. With `--checkpoint`
//! the run rolls back to its last checkpoint on the worker left, says so,
//! and ends with the result of a run without the loss; without, it fails
//! with the lost worker named.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

const FILTER: [&str; 11] = [
    "--engine",
    "workers",
    "--workers",
    "4",
    "--no-pin",
    "--recovery",
    "buddy",
    "--particles",
    "1000",
    "--islands",
    "10",
];

/// Runs `statepipe pf` with `args`; once `ready` exists (or at once if
/// `None`), SIGKILLs three of its four workers. Returns whether it
/// succeeded and its standard error.
fn pf_killing_three(args: &[&str], ready: Option<&Path>) -> (bool, String) {
    let mut pf = Command::new(EXE)
        .arg("pf")
        .args(FILTER)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(pf.stderr.take().unwrap()).lines();
    let mut err = String::new();
    let line = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| {
            err += l;
            err.push('\n');
            l.starts_with("statepipe pf: ")
        })
        .unwrap_or_else(|| panic!("no worker pids on stderr: {err}"));
    let pids: Vec<i32> = line[line.find('[').unwrap() + 1..line.find(']').unwrap()]
        .split(',')
        .map(|p| p.trim().parse().unwrap())
        .collect();
    let rest = Arc::new(Mutex::new(String::new()));
    let drain = {
        let rest = rest.clone();
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                let mut r = rest.lock().unwrap();
                r.push_str(&l);
                r.push('\n');
            }
        })
    };
    if let Some(ready) = ready {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !ready.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(ready.exists(), "no checkpoint was written");
    } else {
        std::thread::sleep(Duration::from_millis(300));
    }
    // The master numbers workers as they joined, not as they were
    // spawned; three of four on a ring with two replicas always include a
    // worker and both its buddies.
    for &p in &pids[..3] {
        let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
    }
    let ok = pf.wait().unwrap().success();
    drain.join().unwrap();
    err += &rest.lock().unwrap();
    (ok, err)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn with_a_checkpoint_a_run_that_loses_every_copy_rolls_back_to_the_same_result() {
    let dir = tempfile::tempdir().unwrap();
    let (clean, hurt, ckpt) = (
        dir.path().join("clean.json"),
        dir.path().join("hurt.json"),
        dir.path().join("run.ckpt"),
    );
    let out = Command::new(EXE)
        .arg("pf")
        .args(FILTER)
        .args(["--quiet", "--json", clean.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, err) = pf_killing_three(
        &[
            "--checkpoint",
            ckpt.to_str().unwrap(),
            "--every",
            "5",
            "--json",
            hurt.to_str().unwrap(),
        ],
        Some(&ckpt),
    );
    assert!(ok, "the run failed:\n{err}");
    assert!(
        err.contains("rolled back to the checkpoint after step"),
        "{err}"
    );
    let (clean, hurt) = (json(&clean), json(&hurt));
    for key in ["loglik", "loglik_se", "filtered_means"] {
        assert_eq!(clean[key], hurt[key], "{key} differs after a rollback");
    }
    assert!(hurt["rollbacks"].as_u64() >= Some(1), "{hurt}");
    assert_eq!(clean["rollbacks"].as_u64(), Some(0));
}

#[test]
fn without_a_checkpoint_the_run_fails_naming_the_lost_worker() {
    let (ok, err) = pf_killing_three(&[], None);
    assert!(
        !ok,
        "the run succeeded without a copy of some states:\n{err}"
    );
    assert!(err.contains("lost"), "{err}");
    assert!(!err.contains("rolled back"), "{err}");
}
