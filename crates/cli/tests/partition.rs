//! A real network partition: a master in this network namespace and three
//! workers each in a namespace of its own, joined by veth pairs. Mid-run
//! one worker's link goes down (`ip link set … down`: no reset, no FIN,
//! just silence) and comes back three seconds later. The master must
//! declare that worker lost after its silence (heartbeats every 25 ms; lost
//! after 150 ms while it owes an evolve, else 1.5 s: the defaults), rerun
//! its share on the other two, and end
//! with the final states of a run without the cut; what the worker sends
//! after its link returns must not count (its connection was closed: it
//! gets a reset and exits).
//!
//! Needs root and `ip netns`; skips with the reason otherwise (a failure
//! instead under `STATEPIPE_REQUIRE_PRIVILEGED=1`: scripts/skip.rs).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "../../../scripts/skip.rs"]
mod skip;
use skip::Lack;

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");
const WORKERS: usize = 3;

/// Why this host cannot run the test, if it cannot.
fn cannot() -> Option<String> {
    let uid = Command::new("id").arg("-u").output().ok();
    if !uid.is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0") {
        return Some("needs root (network namespaces)".into());
    }
    let probe = format!("sppr{}", std::process::id() % 100_000);
    let ok = ip(&["netns", "add", &probe]);
    let _ = ip(&["netns", "del", &probe]);
    if !ok {
        return Some("`ip netns add` failed (no iproute2, or no namespaces here)".into());
    }
    None
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn must(args: &[&str]) {
    assert!(ip(args), "ip {}", args.join(" "));
}

/// The namespaces and links of one run; removed (with every process
/// started in them) on drop.
struct Net {
    tag: String,
    children: Vec<Child>,
}

impl Net {
    fn ns(&self, i: usize) -> String {
        format!("{}w{i}", self.tag)
    }

    /// The host side of worker `i`'s link.
    fn link(&self, i: usize) -> String {
        format!("{}h{i}", self.tag)
    }

    fn build(tag: &str) -> Net {
        let net = Net {
            tag: tag.to_string(),
            children: Vec::new(),
        };
        for i in 0..WORKERS {
            let (ns, host, inner) = (net.ns(i), net.link(i), format!("{tag}p{i}"));
            must(&["netns", "add", &ns]);
            must(&["link", "add", &host, "type", "veth", "peer", "name", &inner]);
            must(&["link", "set", &inner, "netns", &ns]);
            must(&["addr", "add", &format!("10.239.{i}.1/24"), "dev", &host]);
            must(&["link", "set", &host, "up"]);
            must(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("10.239.{i}.2/24"),
                "dev",
                &inner,
            ]);
            must(&["-n", &ns, "link", "set", &inner, "up"]);
            must(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        net
    }

    fn worker(&mut self, i: usize, port: u16, secret: &str) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns(i), EXE, "worker", "--connect"])
            .arg(format!("10.239.{i}.1:{port}"))
            .env("STATEPIPE_SECRET", secret)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting a worker");
        self.children.push(child);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for i in 0..WORKERS {
            let _ = ip(&["link", "del", &self.link(i)]);
            let _ = ip(&["netns", "del", &self.ns(i)]);
        }
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One run of `statepipe sleep-master` over the namespaces; with `cut`,
/// worker 1's link goes down `cut.0` after the workers start, for `cut.1`.
/// Returns the master's JSON and, with a cut, when it began (Unix time).
fn run(dir: &Path, name: &str, cut: Option<(Duration, Duration)>) -> (serde_json::Value, f64) {
    let tag = format!("sp{}{name}", std::process::id() % 10_000);
    let mut net = Net::build(&tag);
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let secret = format!("partition-test-{tag}");
    let json: PathBuf = dir.join(format!("{name}.json"));
    let mut master = Command::new(EXE)
        .args(["sleep-master", "--listen"])
        .arg(format!("0.0.0.0:{port}"))
        .args(["--workers", &WORKERS.to_string(), "--wait-s", "60"])
        .args(["--states", "24", "--steps", "10", "--sleep-ms", "100"])
        .arg("--json")
        .arg(&json)
        .env("STATEPIPE_SECRET", &secret)
        .stdout(Stdio::null())
        .spawn()
        .expect("starting the master");
    for i in 0..WORKERS {
        net.worker(i, port, &secret);
    }
    let mut cut_at = 0.0;
    if let Some((after, down)) = cut {
        std::thread::sleep(after);
        cut_at = unix_now();
        must(&["link", "set", &net.link(1), "down"]);
        std::thread::sleep(down);
        must(&["link", "set", &net.link(1), "up"]);
    }
    let status = master.wait().expect("waiting for the master");
    assert!(status.success(), "{name}: the master failed: {status}");
    // The cut worker's late frames met a closed connection: it exits on
    // its own (bounded wait; the guard kills whatever is left).
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60)
        && net
            .children
            .iter_mut()
            .any(|c| c.try_wait().ok().flatten().is_none())
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = net
        .children
        .iter_mut()
        .filter_map(|c| c.try_wait().ok())
        .filter(Option::is_none)
        .count();
    assert_eq!(left, 0, "{name}: workers still running after the master");
    let text = std::fs::read_to_string(&json).expect("the master's JSON");
    (serde_json::from_str(&text).expect("JSON"), cut_at)
}

#[test]
fn a_partitioned_worker_is_declared_lost_and_its_late_frames_ignored() {
    if let Some(why) = cannot() {
        skip::skip(Lack::Privilege, &why);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (clean, _) = run(dir.path(), "a", None);
    assert_eq!(clean["lost_workers"].as_u64(), Some(0), "{clean}");
    let (cut, cut_at) = run(
        dir.path(),
        "b",
        Some((Duration::from_millis(2500), Duration::from_secs(3))),
    );
    assert_eq!(
        clean["states"], cut["states"],
        "the final states differ after a partition"
    );
    assert_eq!(cut["lost_workers"].as_u64(), Some(1), "{cut}");
    if let Some(t) = cut["recovered_unix_s"][0].as_f64() {
        eprintln!("link cut to states reassigned: {:.3} s", t - cut_at);
    }
}
