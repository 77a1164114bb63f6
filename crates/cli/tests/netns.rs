//! A cluster across network namespaces on this host (`deploy/netns/run.sh`):
//! `statepipe master` in one namespace, a `statepipe worker` in each of
//! four others, joined by a bridge in a namespace of its own. The Nile
//! filter's result (500 particles in 5 islands) must equal `statepipe pf
//! --workers 4` on loopback bit for bit, and the `sleep` model's final
//! states must equal its loopback run's, on a clean bridge and with the
//! workers' links delayed (2 ms ± 1 ms), then also lossy (0.5 %).
//! Efficiency figures are printed, not asserted; so is a worker lost on the
//! way (on a loaded host one can fall silent long enough to be dropped as
//! stopped), whose loss must leave the result the same bits. With
//! `--elastic`, half the workers leave (SIGTERM) mid-run, or join it, and
//! the result is the same bits again.
//!
//! Needs root and network namespaces; where they are missing the test
//! records a skip, saying why, and returns (a failure instead under
//! `STATEPIPE_REQUIRE_PRIVILEGED=1`: scripts/skip.rs). Every namespace and process is
//! removed by the script's exit trap, failure included.

use std::path::Path;
use std::process::Command;

#[path = "../../../scripts/skip.rs"]
mod skip;
use skip::Lack;

/// Runs `deploy/netns/run.sh ARGS` with `env` and this build's binary,
/// after its `--check`; `None` (a skip recorded, saying why) where it
/// cannot run here. Its stdout, printed; a failure fails the test.
fn run_script(args: &[&str], env: &[(&str, &str)]) -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/netns/run.sh");
    let check = Command::new("bash")
        .arg(&script)
        .args(args)
        .arg("--check")
        .output()
        .expect("bash runs");
    let reason = String::from_utf8_lossy(&check.stderr);
    if check.status.code() == Some(3) {
        skip::skip(Lack::Privilege, reason.trim());
        return None;
    }
    assert!(check.status.success(), "{}: {reason}", check.status);
    // `timeout` bounds the whole run; each process in it has its own bound.
    let out = Command::new("timeout")
        .args(["300", "bash"])
        .arg(&script)
        .args(args)
        .env("STATEPIPE", env!("CARGO_BIN_EXE_statepipe"))
        .envs(env.iter().copied())
        .output()
        .expect("timeout and bash run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    Some(stdout)
}

#[test]
fn a_cluster_across_namespaces_matches_the_local_run_bit_for_bit() {
    let env = [
        ("WORKERS", "4"),
        ("STEPS", "6"),
        ("PARTICLES", "500"),
        ("ISLANDS", "5"),
    ];
    let Some(stdout) = run_script(&[], &env) else {
        return;
    };
    for run in ["bridge", "delay", "delay-loss"] {
        let nile = format!("nile {run}: identical to the local reference");
        assert!(stdout.contains(&nile), "{nile}:\n{stdout}");
        let sleep = stdout
            .lines()
            .find(|l| l.starts_with(&format!("sleep {run}: ")))
            .unwrap_or_else(|| panic!("no sleep {run} line:\n{stdout}"));
        assert!(sleep.ends_with("states identical"), "{sleep}");
    }
    assert!(stdout.contains("all results identical"), "{stdout}");
}

/// A distributed pipeline (`run.sh --pipeline`): a coordinator and two
/// members in three namespaces; every run's digest, on the bridge, over a
/// 2 ms ± 1 ms link and with loss, equals the one-process run's.
#[test]
fn a_pipeline_across_namespaces_ends_with_the_one_process_digest() {
    let Some(stdout) = run_script(&["--pipeline"], &[("ITEMS", "100000")]) else {
        return;
    };
    for run in ["bridge", "delay", "delay-loss"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("pipeline {run}: ")))
            .unwrap_or_else(|| panic!("no pipeline {run} line:\n{stdout}"));
        assert!(line.ends_with("digest identical"), "{line}");
    }
}

/// Workers that come and go mid-run (`run.sh --elastic`): the pk filter
/// across the bridge with 4 workers, 2 of them sent SIGTERM half a second
/// in (each leaves and exits 0), then with 2 workers and 2 more joining
/// half a second in from their own namespaces. Both results equal the
/// loopback run's bit for bit.
#[test]
fn workers_leaving_and_joining_across_namespaces_change_nothing() {
    // Seconds of work in either build: the scaling lands mid-run.
    let particles = if cfg!(debug_assertions) {
        "1000"
    } else {
        "10000"
    };
    let env = [
        ("WORKERS", "4"),
        ("PARTICLES", particles),
        ("ISLANDS", "10"),
        ("PK_HOURS", "24"),
        ("SCALE_AFTER_S", "0.5"),
    ];
    let Some(stdout) = run_script(&["--elastic"], &env) else {
        return;
    };
    let line = |run: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("scale-{run}: ")))
            .unwrap_or_else(|| panic!("no scale-{run} line:\n{stdout}"))
            .to_string()
    };
    let scale_in = line("in");
    assert!(
        scale_in.contains("identical to the local reference")
            && scale_in.contains("2 of 4 workers left mid-run"),
        "{scale_in}"
    );
    let scale_out = line("out");
    assert!(
        scale_out.contains("identical to the local reference")
            && scale_out.contains("4 workers took part"),
        "{scale_out}"
    );
    assert!(stdout.contains("all results identical"), "{stdout}");
}
