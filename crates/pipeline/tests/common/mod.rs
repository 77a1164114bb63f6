//! Helpers shared by the deployment tests. Each test file uses some of
//! them, so the rest is dead code there.
#![allow(dead_code)]

pub mod random;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use statepipe_pipeline::{Config, DeployError, Pipeline};

/// Runs `f` on a thread and fails the test if it has not finished within a
/// generous bound: a hang is a failure, not a stuck CI run.
pub fn watchdog<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(f()).ok());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the deployment hung")
}

/// `PROPTEST_CASES` if set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A random plan for `units` units on `workers` workers, from `seed`
/// (xorshift): neighbours on one worker fuse, others get a ring between.
pub fn random_plan(units: usize, workers: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    (0..units)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % workers as u64) as usize
        })
        .collect()
}

/// Deploys `p` on `plan` (rings of 4 slots), feeds it `0..` until a send
/// fails, and returns the error `join` gives: the deployment must stop on
/// its own (a stage panics), tell the sender, and say why.
pub fn panic_of<O: Send + 'static>(p: Pipeline<u32, O>, plan: Vec<usize>) -> DeployError {
    watchdog(move || {
        let d = p
            .deploy(&Config::new().plan(plan).pin(false).capacity(4))
            .unwrap();
        let (mut input, mut output, running) = (d.input, d.output, d.running);
        let feeder = thread::spawn(move || {
            // Sends stop with an error once the pipeline is halted.
            for x in 0..1_000_000u32 {
                if input.send(x).is_err() {
                    return true;
                }
            }
            false
        });
        while output.recv().is_some() {}
        let stopped = feeder.join().unwrap();
        assert!(stopped, "senders learn that the pipeline stopped");
        running.join().unwrap_err()
    })
}

/// Asserts that `err` names `stage` and carries a message containing `says`.
pub fn assert_panicked(err: DeployError, stage: &str, says: &str) {
    match err {
        DeployError::StagePanicked {
            stage: named,
            message,
        } => {
            assert_eq!(named, stage);
            assert!(message.contains(says), "{message}");
        }
        other => panic!("{other:?}"),
    }
}
