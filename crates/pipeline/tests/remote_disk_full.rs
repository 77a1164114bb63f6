//! A distributed run whose checkpoint folder fills up: the folder on a
//! small tmpfs, a stage whose state grows past it. A checkpoint a part
//! cannot write is skipped: the run goes on from its states without a
//! restore, the last committed checkpoint stays, and the run ends with
//! every output once, reporting what it skipped. Needs root (to mount);
//! skips, saying why, without it (a failure instead under
//! `STATEPIPE_REQUIRE_PRIVILEGED=1`: scripts/skip.rs).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::watchdog;
use statepipe_pipeline::machine;
use statepipe_pipeline::remote::{Coordinator, Member, Parts, RemoteConfig};
use statepipe_pipeline::{Config, Pipeline};
use statepipe_sys::auth::Secret;

#[path = "../../../scripts/skip.rs"]
mod skip;
#[path = "../../../scripts/tmpfs.rs"]
mod tmpfs;
use tmpfs::Tmpfs;

/// A first part whose state keeps 1 KiB for every input (its checkpoint
/// grows with the run), and a second that adds one.
fn parts() -> Parts<i64, i64> {
    Parts::new(|| {
        Pipeline::durable_stage(
            "hoard",
            Vec::<u8>::new(),
            machine::step(|kept: &mut Vec<u8>, x: i64| {
                kept.extend_from_slice(&[x as u8; 1024]);
                x * 2
            }),
        )
    })
    .then(|| Pipeline::map("next", |x: i64| x + 1))
}

#[test]
fn a_checkpoint_the_shared_disk_cannot_hold_is_skipped_and_the_run_goes_on() {
    let Some(fs) = Tmpfs::mount_or_skip("128k") else {
        return;
    };
    let root = fs.path().to_path_buf();
    let (run, got) = watchdog(move || {
        let secret = Secret::random();
        let co = Coordinator::bind("127.0.0.1:0", secret.clone(), "a full disk").unwrap();
        let addr = co.local_addr().to_string();
        let members: Vec<_> = (0..2)
            .map(|_| {
                let (to, secret) = (addr.clone(), secret.clone());
                std::thread::spawn(move || {
                    let m = Member::join(&to, secret, "127.0.0.1:0")?;
                    m.run(&parts(), &Config::new().workers(1).pin(false))
                })
            })
            .collect();
        let config = RemoteConfig::new()
            .members(2)
            .checkpoint_dir(&root)
            .checkpoint_every(Duration::from_millis(10));
        let outputs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&outputs);
        // 400 inputs over about 80 ms: the state passes the disk's 128 KiB
        // after about a third of them, with barriers before and after.
        let run = co
            .run(
                &parts(),
                &config,
                |from| {
                    (from as i64..400).inspect(|_| std::thread::sleep(Duration::from_micros(200)))
                },
                move |seq, x| sink.lock().unwrap().push((seq, x)),
            )
            .unwrap();
        for m in members {
            m.join().unwrap().unwrap();
        }
        let got = outputs.lock().unwrap().clone();
        (run, got)
    });
    let want: Vec<(u64, i64)> = (0..400).map(|x| (x as u64, x * 2 + 1)).collect();
    assert_eq!(got, want);
    assert!(run.restores.is_empty(), "{:?}", run.restores);
    assert!(
        !run.skipped_checkpoints.is_empty(),
        "nothing skipped: the disk did not fill"
    );
    // Either part's copy (the full disk takes the small one's too), or
    // the commit.
    for s in &run.skipped_checkpoints {
        assert!(s.error.contains("No space left"), "{s:?}");
    }
    // What is committed is a whole checkpoint from before the disk filled.
    if let Some((id, position)) = run.last_checkpoint {
        assert!(run.skipped_checkpoints.iter().all(|s| s.id > id));
        assert!(position < 400);
    }
}
