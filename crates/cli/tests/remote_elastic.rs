//! Members leaving and joining a running `statepipe run EXAMPLE
//! --coordinator` (real processes): a member sent SIGTERM at some moment
//! of the run (checkpoints go every 50 ms, so often while one is under
//! way) asks to leave, its parts move to the other member, and it exits
//! 0; a second SIGTERM ends it at once with status 143, and a SIGKILL
//! after the SIGTERM kills it, both recovered as a crash; a member that
//! joins mid-run gets parts; with --min-members the coordinator waits for
//! a member to join instead of going on with fewer. Every time the run
//! ends with the one-process digest and as many outputs. A member's
//! `--health` says 503 until its coordinator admits it, 200 then, 503
//! from its SIGTERM on; with `--served-file`, a member started again after
//! its run ended exits 0.

mod common;

use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::health;
use common::remote::SECRET;
use common::remote::{
    coordinator, digest, finish, member, member_with_health, one_process, outputs, wait_for, Lines,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Enough counted items for checkpoints to be committed mid-run.
const ITEMS: &str = "1000000";
const LIMIT: Duration = Duration::from_secs(120);

fn signal(c: &Child, s: Signal) {
    kill(Pid::from_raw(c.id() as i32), s).unwrap();
}

/// Some milliseconds below `below`, different each run (printed, to
/// replay a failure).
fn some_ms(below: u64) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    let ms = nanos % below;
    eprintln!("waiting {ms} ms");
    Duration::from_millis(ms)
}

/// A coordinator of `counts` with checkpoints every 50 ms in `dir`.
fn start(dir: &tempfile::TempDir, extra: &[&str]) -> (Child, String, Lines) {
    let d = dir.path().to_str().unwrap();
    let mut args = vec!["--checkpoint-dir", d, "--checkpoint-every", "0.05"];
    args.extend_from_slice(extra);
    let members = if extra.contains(&"--parts") { "1" } else { "2" };
    coordinator("counts", ITEMS, members, &args)
}

/// The coordinator ends well with the one-process digest and outputs;
/// its standard output and error.
fn ends_as_one_process(c: Child, lines: Lines) -> (String, String) {
    let want = one_process("counts", ITEMS);
    let (out, stdout) = finish(c);
    let stderr = lines.rest();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(digest(&stdout), want, "{stdout}\n{stderr}");
    assert_eq!(outputs(&stdout), outputs(&want), "{stdout}");
    (stdout, stderr)
}

/// The member's number, from its `member N: running` line.
fn number(m: &mut Child) -> (u32, Lines) {
    let mut lines = Lines::of(m.stderr.take().unwrap());
    let l = lines.wait_for(": running", LIMIT);
    let n = l
        .trim_start_matches("member ")
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (n, lines)
}

#[test]
fn a_member_sent_sigterm_leaves_exits_0_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let (c, addr, lines) = start(&dir, &[]);
    let a = member(&addr, SECRET);
    let mut b = member(&addr, SECRET);
    let (_, mut b_lines) = number(&mut b);
    wait_for(&dir.path().join("COORDINATOR"), LIMIT);
    std::thread::sleep(some_ms(300));
    signal(&b, Signal::SIGTERM);
    let status = b.wait().unwrap();
    b_lines.wait_for("left; its parts run on the other members", LIMIT);
    assert_eq!(status.code(), Some(0), "{}", b_lines.rest());
    let (stdout, stderr) = ends_as_one_process(c, lines);
    assert!(stdout.contains("rescaled: member"), "{stdout}");
    assert!(stderr.contains("asks to leave"), "{stderr}");
    assert!(a.wait_with_output().unwrap().status.success());
}

#[test]
fn a_second_sigterm_exits_143_and_the_run_recovers_as_from_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (c, addr, lines) = start(&dir, &[]);
    let a = member(&addr, SECRET);
    let mut b = member(&addr, SECRET);
    let (_, mut b_lines) = number(&mut b);
    wait_for(&dir.path().join("COORDINATOR"), LIMIT);
    signal(&b, Signal::SIGTERM);
    // Once it has noted the first, before it can have left (that takes a
    // heartbeat and a checkpoint).
    b_lines.wait_for("SIGTERM: asking", LIMIT);
    signal(&b, Signal::SIGTERM);
    assert_eq!(b.wait().unwrap().code(), Some(143));
    let (stdout, _) = ends_as_one_process(c, lines);
    assert!(stdout.contains("restored after member"), "{stdout}");
    assert!(a.wait_with_output().unwrap().status.success());
}

#[test]
fn a_sigkill_while_leaving_is_recovered_as_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (c, addr, lines) = start(&dir, &[]);
    let a = member(&addr, SECRET);
    let mut b = member(&addr, SECRET);
    let (_, _b_lines) = number(&mut b);
    wait_for(&dir.path().join("COORDINATOR"), LIMIT);
    signal(&b, Signal::SIGTERM);
    std::thread::sleep(some_ms(400));
    // It may have left already; if not, it dies mid-leave.
    let _ = kill(Pid::from_raw(b.id() as i32), Signal::SIGKILL);
    let _ = b.wait();
    let (stdout, _) = ends_as_one_process(c, lines);
    assert!(
        stdout.contains("rescaled: member") || stdout.contains("restored after member"),
        "{stdout}"
    );
    assert!(a.wait_with_output().unwrap().status.success());
}

#[test]
fn a_member_that_joins_mid_run_gets_parts() {
    let dir = tempfile::tempdir().unwrap();
    // Two parts, one member to start with.
    let (c, addr, mut lines) = start(&dir, &["--parts", "2"]);
    let mut a = member(&addr, SECRET);
    let _a_lines = number(&mut a);
    wait_for(&dir.path().join("COORDINATOR"), LIMIT);
    let mut b = member(&addr, SECRET);
    let (n, _b_lines) = number(&mut b);
    // The coordinator places a part on it.
    let placed = format!("member {n} (");
    let attempt = lines.wait_for("coordinator: attempt 2 ", LIMIT);
    assert!(
        attempt.contains(&placed) && attempt.contains("runs part"),
        "{attempt}"
    );
    let (stdout, _) = ends_as_one_process(c, lines);
    assert!(stdout.contains("rescaled: member"), "{stdout}");
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
}

#[test]
fn with_min_members_the_coordinator_waits_for_a_member_to_join() {
    let dir = tempfile::tempdir().unwrap();
    let (c, addr, mut lines) = start(&dir, &["--min-members", "2"]);
    let a = member(&addr, SECRET);
    let mut b = member(&addr, SECRET);
    let _b_lines = number(&mut b);
    wait_for(&dir.path().join("COORDINATOR"), LIMIT);
    signal(&b, Signal::SIGTERM);
    assert_eq!(b.wait().unwrap().code(), Some(0));
    lines.wait_for("waiting for 1 more member", LIMIT);
    let d = member(&addr, SECRET);
    let (_, stderr) = ends_as_one_process(c, lines);
    assert!(stderr.contains("going on"), "{stderr}");
    assert!(a.wait_with_output().unwrap().status.success());
    assert!(d.wait_with_output().unwrap().status.success());
}

/// Asks `addr` for its health until it says one of `want` (None: nothing
/// answers), failing after `LIMIT`; what it said.
fn health_until(addr: &str, want: &[Option<u16>], what: &str) -> Option<u16> {
    let deadline = Instant::now() + LIMIT;
    loop {
        let said = health(addr);
        if want.contains(&said) {
            return said;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the member's health said {said:?} for {LIMIT:?}, not one of {want:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn member_health_is_503_until_admitted_200_then_503_from_its_sigterm_on() {
    // A listener that never answers: the member has connected, but no
    // coordinator has admitted it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = silent.local_addr().unwrap().to_string();
    let (mut early, h, _early_lines) = member_with_health(&at, &[]);
    assert_eq!(health(&h), Some(503), "a member nobody admitted is ready");
    early.kill().unwrap();
    let _ = early.wait();
    drop(silent);

    let dir = tempfile::tempdir().unwrap();
    let (c, addr, lines) = start(&dir, &[]);
    let a = member(&addr, SECRET);
    let (b, h, b_lines) = member_with_health(&addr, &[]);
    health_until(&h, &[Some(200)], "admitted");
    signal(&b, Signal::SIGTERM);
    // Not ready once the signal is noted (a moment), until it is gone.
    health_until(&h, &[Some(503), None], "sent SIGTERM");
    let (out, _) = finish(b);
    assert_eq!(out.status.code(), Some(0), "{}", b_lines.rest());
    ends_as_one_process(c, lines);
    assert!(a.wait_with_output().unwrap().status.success());
}

#[test]
fn a_member_started_again_after_its_run_with_its_served_file_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("served");
    let r = record.to_str().unwrap();
    let (c, addr, lines) = coordinator("counts", "1000", "1", &[]);
    let (m, _, m_lines) = member_with_health(&addr, &["--served-file", r]);
    let (out, stdout) = finish(c);
    assert!(out.status.success(), "{stdout}\n{}", lines.rest());
    assert!(finish(m).0.status.success(), "{}", m_lines.rest());
    assert!(
        record.exists(),
        "the member wrote no {r} at the end of its run"
    );
    // Started again (as a Deployment does): no coordinator, the record
    // there, so its run is over.
    let (again, _, again_lines) = member_with_health(&addr, &["--served-file", r]);
    let (out, _) = finish(again);
    let said = again_lines.rest();
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("that run is over"), "{said}");
    // Without the record, no coordinator is a failure.
    std::fs::remove_file(&record).unwrap();
    let (first, _, first_lines) = member_with_health(&addr, &["--served-file", r]);
    let (out, _) = finish(first);
    let said = first_lines.rest();
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("connecting to the coordinator"), "{said}");
}
