//! `statepipe serve` killed with SIGKILL at a random moment under
//! concurrent writes, then restarted on the same data: every acknowledged
//! item is there with its exact body, ids are unique, and what the
//! restarted server serves equals a replay of the data directory. A second
//! server on the same data directory is refused while the first lives. A
//! client that pipelines reads and never reads the answers costs the
//! server bounded memory.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const TRIALS: usize = 20;
const WRITERS: usize = 3;

/// Starts the server on `data`, with zero-filled journal segments of
/// `segment_mib` MiB (0: appended ones).
fn start(data: &std::path::Path, segment_mib: u32) -> (Child, SocketAddr) {
    start_with(data, segment_mib, &[])
}

/// [`start`] with `extra` arguments.
fn start_with(data: &std::path::Path, segment_mib: u32, extra: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_statepipe"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--snapshot-every",
            "40",
            "--journal-segment-mib",
            &segment_mib.to_string(),
            "--data",
        ])
        .arg(data)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start statepipe serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .strip_prefix("listening on ")
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    (child, addr)
}

/// One request on a keep-alive connection: (status, body), or `None` once
/// the server is gone.
fn request(s: &mut TcpStream, raw: &[u8]) -> Option<(u16, String)> {
    s.write_all(raw).ok()?;
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut b).ok()? == 0 {
            return None;
        }
        head.push(b[0]);
    }
    let head = String::from_utf8(head).ok()?;
    let status = head.get(9..12)?.parse().ok()?;
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))?
        .trim()
        .parse()
        .ok()?;
    let mut body = vec![0; len];
    s.read_exact(&mut body).ok()?;
    Some((status, String::from_utf8(body).ok()?))
}

/// A cheap pseudo-random number from the clock (no rand dependency).
fn jitter(modulo: u64) -> u64 {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    (n.wrapping_mul(6364136223846793005) >> 20) % modulo
}

#[test]
fn every_acknowledged_write_survives_sigkill() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    // (id → body) of every 201, over all trials.
    let acked: Arc<Mutex<HashMap<u64, (String, String)>>> = Arc::default();
    for trial in 0..TRIALS {
        // Zero-filled segments and appended ones, in turn, on the same
        // data: each start takes over the other's last segment.
        let (mut child, addr) = start(dir.path(), if trial % 2 == 0 { 1 } else { 0 });
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let acked = Arc::clone(&acked);
                thread::spawn(move || {
                    let Ok(mut s) = TcpStream::connect(addr) else { return };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    for i in 0.. {
                        let name = format!("t{trial}-w{w}-{i} \u{e9}\\\"q");
                        let price = format!("{}.{:02}", i * 7 % 1000, i % 100);
                        let body = serde_json::json!({ "name": name, "price": price.parse::<f64>().unwrap() })
                            .to_string();
                        let raw = format!(
                            "POST /item HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        match request(&mut s, raw.as_bytes()) {
                            Some((201, reply)) => {
                                let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
                                let id = v["id"].as_u64().unwrap();
                                let mut acked = acked.lock().unwrap();
                                let dup = acked.insert(id, (name, price));
                                assert!(dup.is_none(), "id {id} acknowledged twice");
                            }
                            Some((429, _)) => thread::sleep(Duration::from_millis(1)),
                            Some((status, reply)) => panic!("POST answered {status}: {reply}"),
                            None => return,
                        }
                    }
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(20 + jitter(200)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for w in writers {
            w.join().unwrap();
        }
    }
    // Restart and read every acknowledged item back.
    let (mut child, addr) = start(dir.path(), 1);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let acked = acked.lock().unwrap();
    assert!(
        !acked.is_empty(),
        "no write was acknowledged in {TRIALS} trials"
    );
    for (id, (name, price)) in acked.iter() {
        let (status, body) = request(
            &mut s,
            format!("GET /item/{id} HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .expect("the restarted server answers");
        assert_eq!(status, 200, "acknowledged item {id} lost");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["name"].as_str(), Some(name.as_str()), "item {id}");
        assert_eq!(
            v["price"].as_f64(),
            Some(price.parse::<f64>().unwrap()),
            "item {id}"
        );
    }
    // Everything it serves, page by page: ids strictly increasing (unique).
    let mut served = Vec::new();
    let mut after = 0u64;
    loop {
        let (status, body) = request(
            &mut s,
            format!("GET /item?after={after}&limit=1000 HTTP/1.1\r\n\r\n").as_bytes(),
        )
        .expect("the restarted server answers");
        assert_eq!(status, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        for item in v["items"].as_array().unwrap() {
            let id = item["id"].as_u64().unwrap();
            assert!(
                id > after,
                "ids out of order or repeated: {id} after {after}"
            );
            after = id;
            let name = item["name"].as_str().unwrap().to_string();
            served.push((id, name, item["price"].as_f64().unwrap()));
        }
        if v["next_after"].is_null() {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The same state, replayed from the files by the library.
    let replayed = statepipe_serve::store::recover(dir.path()).expect("the data replays");
    let replayed: Vec<_> = replayed
        .store
        .items
        .iter()
        .map(|(id, item)| (*id, item.name.clone(), item.price))
        .collect();
    assert_eq!(served, replayed, "served state differs from a replay");
    assert!(served.len() >= acked.len());
    eprintln!(
        "{} acknowledged writes over {TRIALS} SIGKILLs, all present ({:?})",
        acked.len(),
        started.elapsed()
    );
}

/// A connection to `addr` whose reads give up after 10 s.
fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// `POST /item` with `body` on `s`: the status, or `None` once the server
/// is gone.
fn post(s: &mut TcpStream, body: &str) -> Option<u16> {
    let raw = format!(
        "POST /item HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    request(s, raw.as_bytes()).map(|r| r.0)
}

#[test]
fn sigterm_drains_and_exits_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = start(dir.path(), 1);
    let mut s = connect(addr);
    assert_eq!(post(&mut s, r#"{"name":"kept","price":3}"#), Some(201));
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit status {:?}", out.status);
    let (mut child, addr) = start(dir.path(), 1);
    let mut s = connect(addr);
    let (status, got) = request(&mut s, b"GET /item/1 HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(
        (status, got.as_str()),
        (200, r#"{"id":1,"name":"kept","price":3.0}"#)
    );
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_second_server_on_the_same_data_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let (mut first, addr) = start(dir.path(), 1);
    // Two writers of one journal would lose acknowledged writes: the
    // second exits non-zero at once, naming the first, and changes nothing.
    let second = Command::new(env!("CARGO_BIN_EXE_statepipe"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "exit status {:?}", second.status);
    let named = format!(
        "is in use by another statepipe serve (process {})",
        first.id()
    );
    assert!(err.contains(&named), "stderr: {err}");
    let mut s = connect(addr);
    assert_eq!(post(&mut s, r#"{"name":"still","price":1}"#), Some(201));
    // A killed holder leaves no lock behind.
    first.kill().unwrap();
    first.wait().unwrap();
    let (mut again, addr) = start(dir.path(), 1);
    let mut s = connect(addr);
    let (status, got) = request(&mut s, b"GET /item/1 HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(
        (status, got.as_str()),
        (200, r#"{"id":1,"name":"still","price":1.0}"#)
    );
    again.kill().unwrap();
    again.wait().unwrap();
}

/// The server's resident memory, in KiB.
fn rss_kib(child: &Child) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn a_client_that_never_reads_its_answers_costs_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = start_with(dir.path(), 1, &["--io-threads", "1"]);
    // Killed however the test ends (a failed assertion included).
    struct Server(Child);
    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = Server(child);
    let child = &child.0;
    let mut s = connect(addr);
    let name = "n".repeat(512 * 1024);
    let item = format!(r#"{{"name":"{name}","price":1}}"#);
    assert_eq!(post(&mut s, &item), Some(201));
    let before = rss_kib(child);
    // 300 reads of a 512 KiB item in one stream, and none of the
    // answers read: 150 MB of answers if the server made them all.
    const READS: usize = 300;
    s.write_all(&b"GET /item/1 HTTP/1.1\r\n\r\n".repeat(READS))
        .unwrap();
    // An answer on another connection of the same I/O thread: the stream
    // above has been taken in by then.
    let mut other = connect(addr);
    assert_eq!(
        request(&mut other, b"GET /health HTTP/1.1\r\n\r\n").map(|r| r.0),
        Some(200)
    );
    let grown = rss_kib(child).saturating_sub(before);
    assert!(
        grown < 64 * 1024,
        "the server grew by {grown} KiB for a client that reads nothing"
    );
    // Once the client reads, every answer comes, in order.
    let want = format!(r#"{{"id":1,"name":"{name}","price":1.0}}"#);
    for i in 0..READS {
        let (status, body) = request(&mut s, b"").unwrap_or_else(|| panic!("answer {i}"));
        assert!(status == 200 && body == want, "answer {i}: {status}");
    }
}
