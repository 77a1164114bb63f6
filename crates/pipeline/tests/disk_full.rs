//! A real full disk under the checkpoint folder: the checkpoint folder on
//! a small tmpfs. A checkpoint that does not fit fails alone, naming the
//! file it could not write; its folder is removed and the one before
//! stays; the pipeline goes on, losing nothing; once there is room again,
//! the next checkpoint completes, and a restore from it goes on from its
//! state. Needs root (to mount); skips, saying why, without it (a failure
//! instead under `STATEPIPE_REQUIRE_PRIVILEGED=1`: scripts/skip.rs).

use statepipe_pipeline::machine;
use statepipe_pipeline::{Checkpoint, CheckpointError, Config, Pipeline};

#[path = "../../../scripts/skip.rs"]
mod skip;
#[path = "../../../scripts/tmpfs.rs"]
mod tmpfs;
use tmpfs::Tmpfs;

/// A stage whose state keeps every byte it was sent: its checkpoint grows
/// with its input. Each output is the state's length.
fn hoard() -> Pipeline<Vec<u8>, u64> {
    Pipeline::durable_stage(
        "hoard",
        Vec::<u8>::new(),
        machine::step(|kept: &mut Vec<u8>, x: Vec<u8>| {
            kept.extend_from_slice(&x);
            kept.len() as u64
        }),
    )
}

#[test]
fn a_checkpoint_that_does_not_fit_fails_alone_and_the_pipeline_goes_on() {
    let Some(fs) = Tmpfs::mount_or_skip("256k") else {
        return;
    };
    let config = Config::new()
        .workers(1)
        .pin(false)
        .checkpoint_dir(fs.path());
    let d = hoard().deploy(&config).unwrap();
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    input.send(vec![1; 10_000]).unwrap();
    assert_eq!(output.recv(), Some((0, 10_000)));
    let first = running.checkpoint().unwrap().wait().unwrap();
    // 400 kB of state: more than the whole disk.
    input.send(vec![2; 400_000]).unwrap();
    assert_eq!(output.recv(), Some((1, 410_000)));
    match running.checkpoint().unwrap().wait() {
        Err(CheckpointError::Io { path, message }) => {
            assert!(path.starts_with(&*fs.path().to_string_lossy()), "{path}");
            assert!(message.contains("No space left"), "{message}");
        }
        other => panic!("a checkpoint larger than the disk: {other:?}"),
    }
    // Only the checkpoint before is on disk; the pipeline goes on.
    let on_disk = Checkpoint::latest(fs.path()).unwrap().unwrap();
    assert_eq!(on_disk.id(), first.id);
    let folders = std::fs::read_dir(fs.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name() != "LOCK")
        .count();
    assert_eq!(folders, 1, "the failed checkpoint's folder is removed");
    assert_eq!(running.last_checkpoint().map(|c| c.id), Some(first.id));
    input.send(vec![3; 5]).unwrap();
    assert_eq!(output.recv(), Some((2, 410_005)));
    // Room again: the next one completes, the older one is removed.
    fs.resize("4m");
    let next = running.checkpoint().unwrap().wait().unwrap();
    assert!(next.id > first.id);
    drop(input);
    assert_eq!(output.recv(), None);
    running.join().unwrap();
    let latest = Checkpoint::latest(fs.path()).unwrap().unwrap();
    assert_eq!(latest.id(), next.id);
    // Restored, the state is every byte acknowledged.
    let run = hoard()
        .deploy(&Config::new().workers(1).pin(false).restore(latest))
        .unwrap()
        .run([vec![4; 1]])
        .unwrap();
    assert_eq!(run.outputs, [410_006]);
    assert_eq!(run.seqs, [3]);
}
