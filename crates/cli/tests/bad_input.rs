//! Inputs the command line refuses: each named, with a non-zero exit,
//! before anything starts.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

#[test]
fn counts_out_of_range_are_named_and_fail_before_anything_starts() {
    for (args, says) in [
        (
            &["pf", "--particles", "0"][..],
            "'--particles <PARTICLES>': must be at least 1",
        ),
        (
            &["pf", "--islands", "0"],
            "'--islands <ISLANDS>': must be at least 1",
        ),
        (
            &["pf", "--workers", "0"],
            "'--workers <WORKERS>': must be at least 1",
        ),
        (
            &["pf", "--particles", "10"],
            "--particles 10 is fewer than --islands 20",
        ),
        (
            &["pf", "--particles", "30"],
            "--islands 20 does not divide --particles 30",
        ),
        (&["master", "--workers", "0"], "must be at least 1"),
        // Before waiting for a worker: none will come.
        (
            &["master", "--workers", "8", "--islands", "3"],
            "--islands 3 does not divide --particles 2000",
        ),
        (
            &["pf", "--json", "/nonexistent-folder/out.json"],
            "there is no folder /nonexistent-folder",
        ),
        // A distributed run: one checkpoint folder, and no flag it would
        // not use.
        (
            &[
                "run",
                "counts",
                "--coordinator",
                "127.0.0.1:0",
                "--checkpoint-dir",
                "/tmp/a",
                "--resume",
                "/tmp/b",
            ],
            "differ: a distributed run resumes from and goes on checkpointing in one folder",
        ),
        (
            &[
                "run",
                "counts",
                "--coordinator",
                "127.0.0.1:0",
                "--dot",
                "g.dot",
            ],
            "cannot be used with",
        ),
        (&["serve", "--max-connections", "0"], "must be at least 1"),
        (&["run", "counts", "--workers", "0"], "must be at least 1"),
        (
            &["member", "--connect", "127.0.0.1:1", "--workers", "0"],
            "must be at least 1",
        ),
    ] {
        let out = Command::new(EXE).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} exited 0: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn a_checkpoint_file_another_run_writes_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("run.ck");
    let held = statepipe_sys::lock::FolderLock::beside(&ck).unwrap();
    let pf = |ck: &std::path::Path| {
        Command::new(EXE)
            .args(["pf", "--engine", "in-process", "--checkpoint"])
            .arg(ck)
            .output()
            .unwrap()
    };
    let out = pf(&ck);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exited 0: {err}");
    let named = format!(
        "another run writes the checkpoint {} (process {})",
        ck.display(),
        std::process::id()
    );
    assert!(err.contains(&named), "{err}");
    assert!(!ck.exists(), "the refused run wrote the checkpoint");
    // Once the other run is over, the file is free.
    drop(held);
    let out = pf(&ck);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ck.exists());
}
