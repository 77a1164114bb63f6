//! A real full disk under `statepipe pf --checkpoint`: the checkpoint's
//! folder on a small tmpfs. A checkpoint that does not fit fails the run,
//! non-zero, naming the file and the cause, and leaves nothing of itself
//! on the disk (no temporary file holding the space), so the same run
//! with room again completes and writes its checkpoint. Needs root (to
//! mount); skips, saying why, without it (a failure instead under
//! `STATEPIPE_REQUIRE_PRIVILEGED=1`: scripts/skip.rs).

use std::process::Command;

#[path = "../../../scripts/skip.rs"]
mod skip;
#[path = "../../../scripts/tmpfs.rs"]
mod tmpfs;
use tmpfs::Tmpfs;

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

/// `statepipe pf` on one worker process, checkpointing after every step
/// to `ckpt`: whether it exited 0, and its stderr.
fn pf(ckpt: &std::path::Path) -> (bool, String) {
    let out = Command::new(EXE)
        .args(["pf", "--engine", "workers", "--workers", "1", "--quiet"])
        .args(["--particles", "4000", "--islands", "2"])
        .args(["--checkpoint", ckpt.to_str().unwrap(), "--every", "1"])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_checkpoint_the_disk_cannot_hold_fails_the_run_and_leaves_no_part_of_itself() {
    let Some(fs) = Tmpfs::mount_or_skip("16k") else {
        return;
    };
    let ckpt = fs.path().join("run.ckpt");
    // 4,000 particles: a checkpoint of tens of kB, more than the whole
    // disk.
    let (ok, err) = pf(&ckpt);
    assert!(!ok, "exited 0 with a full disk: {err}");
    assert!(err.contains("run.ckpt"), "{err}");
    assert!(err.contains("No space left"), "{err}");
    let left: Vec<String> = std::fs::read_dir(fs.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "run.ckpt.lock")
        .collect();
    // Its lock beside it (empty, released), nothing else.
    assert!(left.is_empty(), "left on the full disk: {left:?}");
    // Room again: the same run completes and its checkpoint is there.
    fs.resize("8m");
    let (ok, err) = pf(&ckpt);
    assert!(ok, "{err}");
    assert!(ckpt.exists());
}
