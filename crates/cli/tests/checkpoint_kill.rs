//! `statepipe run --checkpoint-dir`, killed with SIGKILL at random moments
//! and resumed with `--resume`, ends with the digest of an uninterrupted
//! run: no input lost or counted twice, every stage's final state the
//! same. A damaged checkpoint is refused with the file named and a
//! non-zero exit.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");
const ITEMS: &str = "400000";

fn run(args: &[&str]) -> Output {
    Command::new(EXE)
        .args([
            "run",
            "counts",
            "--items",
            ITEMS,
            "--workers",
            "2",
            "--no-pin",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn digest(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "statepipe run failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find(|l| l.starts_with("digest: "))
        .unwrap_or_else(|| panic!("no digest line in\n{stdout}"))
        .to_string()
}

#[test]
fn killed_and_resumed_runs_end_with_the_uninterrupted_digest() {
    let want = digest(&run(&[]));
    assert!(
        want.starts_with(&format!("digest: {ITEMS} outputs, ")),
        "{want}"
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_c4e7);
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let args = [
            "--checkpoint-dir",
            d,
            "--checkpoint-every",
            "0.02",
            "--resume",
            d,
        ];
        // Up to three kills at random moments, then a run to the end.
        for _ in 0..3 {
            let mut child = Command::new(EXE)
                .args([
                    "run",
                    "counts",
                    "--items",
                    ITEMS,
                    "--workers",
                    "2",
                    "--no-pin",
                ])
                .args(args)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(Duration::from_millis(rng.random_range(30..600)));
            // SIGKILL: no handler runs, nothing is flushed.
            let _ = child.kill();
            let _ = child.wait();
        }
        let resumed = run(&args);
        let stdout = String::from_utf8_lossy(&resumed.stdout);
        if let Some(line) = stdout.lines().find(|l| l.starts_with("resumed at input")) {
            eprintln!("round {round}: {line}");
        }
        assert_eq!(digest(&resumed), want, "round {round}");
    }
}

#[test]
fn a_damaged_checkpoint_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let first = run(&["--checkpoint-dir", d, "--checkpoint-every", "0.01"]);
    digest(&first);
    let ckpt = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("MANIFEST").exists())
        .expect("a complete checkpoint");
    let manifest = ckpt.join("MANIFEST");
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&manifest, &bytes).unwrap();
    let out = run(&["--resume", d]);
    assert!(
        !out.status.success(),
        "a damaged checkpoint must not resume"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MANIFEST"), "the error names the file: {err}");
    // The refusal touched nothing.
    assert_eq!(std::fs::read(&manifest).unwrap(), bytes);
}
