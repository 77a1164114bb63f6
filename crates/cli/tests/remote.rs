//! `statepipe run EXAMPLE --coordinator ADDR --members N` with real member
//! processes: the same digest as a one-process run; a member killed with
//! SIGKILL is recovered from the last checkpoint with the same digest;
//! without checkpoints the run ends non-zero naming the lost member; a
//! member with a wrong secret is refused and exits non-zero saying why.

mod common;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use common::remote::{coordinator, digest, finish, member, one_process, wait_for, SECRET};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

#[test]
fn a_distributed_run_ends_with_the_one_process_digest() {
    let want = one_process("counts", "100000");
    let (c, addr, _) = coordinator("counts", "100000", "2", &[]);
    let ms = [member(&addr, SECRET), member(&addr, SECRET)];
    let (out, stdout) = finish(c);
    assert!(out.status.success(), "{stdout}");
    assert_eq!(digest(&stdout), want);
    for m in ms {
        assert!(m.wait_with_output().unwrap().status.success());
    }
}

#[test]
fn a_killed_member_is_recovered_from_the_last_checkpoint() {
    // A million counted items: long enough for checkpoints to be
    // committed in the middle of the run, whatever this machine's speed.
    let want = one_process("counts", "1000000");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (c, addr, rest) = coordinator(
        "counts",
        "1000000",
        "2",
        &["--checkpoint-dir", d, "--checkpoint-every", "0.05"],
    );
    let a = member(&addr, SECRET);
    let mut b = member(&addr, SECRET);
    // Once a checkpoint is committed, the second member dies.
    wait_for(&dir.path().join("COORDINATOR"), Duration::from_secs(60));
    kill(Pid::from_raw(b.id() as i32), Signal::SIGKILL).unwrap();
    let _ = b.wait();
    let (out, stdout) = finish(c);
    let stderr = rest.rest();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("restored after member"), "{stdout}");
    assert_eq!(digest(&stdout), want, "{stdout}");
    // Every output reached the coordinator's sink once, as in one process.
    let outputs = |s: &str| s.split(" outputs").next().map(str::to_string);
    let delivered = stdout.lines().find(|l| l.contains(" outputs from "));
    assert_eq!(
        delivered.and_then(outputs),
        outputs(want.trim_start_matches("digest: ")),
        "{stdout}"
    );
    assert!(a.wait_with_output().unwrap().status.success());
}

#[test]
fn without_checkpoints_a_lost_member_ends_the_run_naming_it() {
    let (c, addr, rest) = coordinator("laundry", "400", "2", &[]);
    let a = member(&addr, SECRET);
    let mut b = member(&addr, SECRET);
    // Both joined once the second says it runs.
    let mut err = BufReader::new(b.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(b.id() as i32), Signal::SIGKILL).unwrap();
    let _ = b.wait();
    let out = c.wait_with_output().unwrap();
    assert!(!out.status.success());
    let stderr = rest.rest();
    assert!(
        stderr.contains("was lost") && stderr.contains("checkpoint"),
        "{stderr}"
    );
    let _ = a.wait_with_output();
}

#[test]
fn a_member_with_a_wrong_secret_exits_non_zero_saying_why() {
    let (mut c, addr, _) = coordinator("counts", "1000", "1", &[]);
    let out = member(&addr, "not-the-secret").wait_with_output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("STATEPIPE_SECRET"), "{stderr}");
    let _ = c.kill();
    let _ = c.wait();
}

#[test]
fn a_member_whose_coordinator_stops_exits_non_zero_saying_so() {
    // The coordinator waits for a second member that never comes; once
    // the first has joined, the coordinator is stopped (its sockets stay
    // open, as on a frozen host): the member must not wait on it forever.
    let (mut c, addr, _rest) = coordinator("counts", "1000", "2", &[]);
    let mut a = member(&addr, SECRET);
    let mut err = BufReader::new(a.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("running") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the member ended");
    }
    let co = Pid::from_raw(c.id() as i32);
    kill(co, Signal::SIGSTOP).unwrap();
    let status = a.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    kill(co, Signal::SIGCONT).unwrap();
    let _ = c.kill();
    let _ = c.wait();
    assert!(!status.success());
    assert!(rest.contains("silent for 5s"), "{rest}");
}
