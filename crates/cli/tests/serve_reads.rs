//! `statepipe serve` (the real binary, several I/O threads) with concurrent
//! writers and readers on many connections: a read sent after the answer
//! to a write arrived sees that write on any connection (read-your-writes,
//! and others' acknowledged writes), a read never sees less than an
//! earlier read saw (monotonic reads across connections), and a delete is
//! seen at once too. Then admission: writes expected to wait too long get
//! 429 with `Retry-After` at once, reads are never refused, and `/metrics`
//! counts the refusals by cause.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const WRITERS: usize = 3;
const WRITES: usize = 60;
const READERS: usize = 2;
const CONNS_PER_READER: usize = 3;

/// The server child, killed when dropped (a failed assertion too).
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(data: &std::path::Path, extra: &[&str]) -> (Served, SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_statepipe"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(data)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start statepipe serve");
    let mut child = Served(child);
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
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

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

/// Reads one response: (status, head, body).
fn response(s: &mut TcpStream) -> (u16, String, String) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_ne!(s.read(&mut b).unwrap(), 0, "closed before a response");
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head[9..12].parse().unwrap();
    // No Content-Length: a 204, which has no body (RFC 9110, 8.6).
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .map_or(0, |v| v.trim().parse().unwrap());
    assert_eq!(status == 204, !head.contains("Content-Length"), "{head:?}");
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

fn request(s: &mut TcpStream, raw: &str) -> (u16, String) {
    s.write_all(raw.as_bytes()).unwrap();
    let (status, _, body) = response(s);
    (status, body)
}

fn post(name: &str) -> String {
    let body = format!(r#"{{"name":"{name}","price":1}}"#);
    format!(
        "POST /item HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn get(id: u64) -> String {
    format!("GET /item/{id} HTTP/1.1\r\n\r\n")
}

/// POSTs `name` until it is not refused; its id.
fn create(s: &mut TcpStream, name: &str) -> u64 {
    loop {
        match request(s, &post(name)) {
            (201, body) => {
                let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                return v["id"].as_u64().unwrap();
            }
            (429, _) => thread::sleep(Duration::from_millis(1)),
            other => panic!("POST answered {other:?}"),
        }
    }
}

fn name_of(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    v["name"].as_str().unwrap().to_string()
}

#[test]
fn reads_see_every_acknowledged_write_on_any_connection() {
    reads_see_every_acknowledged_write("blocking");
}

#[test]
fn reads_see_every_acknowledged_write_with_handlers_that_spin_first() {
    reads_see_every_acknowledged_write("adaptive");
}

/// Writers and readers on many connections over 4 I/O threads, the
/// ring's handlers waiting by `handler_wait`: every acknowledged write is
/// read back on another connection, and reads never go back in time.
fn reads_see_every_acknowledged_write(handler_wait: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = start(
        dir.path(),
        &["--io-threads", "4", "--handler-wait", handler_wait],
    );
    // Acknowledged items that stay (id → name), and the largest such id.
    let acked = Arc::new(Mutex::new(BTreeMap::<u64, String>::new()));
    let acked_max = Arc::new(AtomicU64::new(0));
    let writing = Arc::new(AtomicBool::new(true));

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (acked, acked_max) = (Arc::clone(&acked), Arc::clone(&acked_max));
            thread::spawn(move || {
                let mut writes = connect(addr);
                let mut reads = connect(addr);
                for i in 0..WRITES {
                    let name = format!("w{w}-{i}");
                    let id = create(&mut writes, &name);
                    acked.lock().unwrap().insert(id, name.clone());
                    acked_max.fetch_max(id, Ordering::SeqCst);
                    // Read-your-writes, on another connection.
                    let (status, body) = request(&mut reads, &get(id));
                    assert_eq!(status, 200, "item {id} acknowledged, then {body}");
                    assert_eq!(name_of(&body), name);
                    if i % 5 == 0 {
                        // A delete is seen at once too (an item of its own,
                        // never shown to the readers).
                        let tmp = create(&mut writes, &format!("tmp-{w}-{i}"));
                        let (status, _) =
                            request(&mut writes, &format!("DELETE /item/{tmp} HTTP/1.1\r\n\r\n"));
                        assert_eq!(status, 204);
                        let (status, body) = request(&mut reads, &get(tmp));
                        assert_eq!(status, 404, "item {tmp} deleted, then {body}");
                    }
                }
            })
        })
        .collect();

    let readers: Vec<_> = (0..READERS)
        .map(|_| {
            let (acked, acked_max, writing) = (
                Arc::clone(&acked),
                Arc::clone(&acked_max),
                Arc::clone(&writing),
            );
            thread::spawn(move || {
                let mut conns: Vec<TcpStream> =
                    (0..CONNS_PER_READER).map(|_| connect(addr)).collect();
                let mut turn = 0;
                let mut next = || {
                    turn += 1;
                    turn % CONNS_PER_READER
                };
                // The largest lasting id this reader has seen.
                let mut seen = 0u64;
                let mut checks = 0u64;
                loop {
                    let last_round = !writing.load(Ordering::SeqCst);
                    // Another writer's acknowledged item, taken before the
                    // read is sent: it must be there.
                    let max = acked_max.load(Ordering::SeqCst);
                    if max > 0 {
                        let name = acked.lock().unwrap()[&max].clone();
                        let (status, body) = request(&mut conns[next()], &get(max));
                        assert_eq!(status, 200, "acknowledged item {max}, then {body}");
                        assert_eq!(name_of(&body), name);
                    }
                    // Monotonic reads: a page past what this reader saw,
                    // then the newest lasting item of it on another
                    // connection.
                    let (status, body) = request(
                        &mut conns[next()],
                        &format!("GET /item?after={seen}&limit=1000 HTTP/1.1\r\n\r\n"),
                    );
                    assert_eq!(status, 200, "{body}");
                    let page: serde_json::Value = serde_json::from_str(&body).unwrap();
                    for item in page["items"].as_array().unwrap() {
                        if !item["name"].as_str().unwrap().starts_with("tmp-") {
                            seen = seen.max(item["id"].as_u64().unwrap());
                        }
                    }
                    if seen > 0 {
                        let (status, body) = request(&mut conns[next()], &get(seen));
                        assert_eq!(status, 200, "item {seen} was seen, then {body}");
                    }
                    checks += 1;
                    if last_round {
                        return (seen, checks);
                    }
                }
            })
        })
        .collect();

    for w in writers {
        w.join().unwrap();
    }
    writing.store(false, Ordering::SeqCst);
    let max = acked_max.load(Ordering::SeqCst);
    for r in readers {
        let (seen, checks) = r.join().unwrap();
        assert_eq!(seen, max, "a reader's last round missed acknowledged items");
        assert!(checks > 0);
    }
    assert_eq!(acked.lock().unwrap().len(), WRITERS * WRITES);
    drop(child);
}

#[test]
fn writes_expected_to_wait_too_long_get_429_at_once_and_reads_never_do() {
    let dir = tempfile::tempdir().unwrap();
    // A bound of zero: a write is admitted only when none is unanswered.
    let (child, addr) = start(
        dir.path(),
        &["--io-threads", "1", "--max-queue-delay", "0ms"],
    );
    let mut setup = connect(addr);
    let first = create(&mut setup, "first");
    let mut writers: Vec<TcpStream> = (0..64).map(|_| connect(addr)).collect();
    let mut readers: Vec<TcpStream> = (0..16).map(|_| connect(addr)).collect();
    // Every connection sends before any reads, so writes pile up.
    for (i, c) in writers.iter_mut().enumerate() {
        c.write_all(post(&format!("p{i}")).as_bytes()).unwrap();
        if let Some(r) = readers.get_mut(i / 4) {
            if i % 4 == 0 {
                r.write_all(get(first).as_bytes()).unwrap();
            }
        }
    }
    let mut refused = 0u64;
    let mut created = Vec::new();
    for c in &mut writers {
        let (status, head, body) = response(c);
        match status {
            201 => created.push(body),
            429 => {
                assert!(head.contains("Retry-After: 1"), "{head}");
                refused += 1;
            }
            other => panic!("a write answered {other}: {body}"),
        }
    }
    for r in &mut readers {
        let (status, _, body) = response(r);
        assert_eq!(status, 200, "a read refused under write load: {body}");
    }
    assert!(
        refused > 0,
        "64 writes at once, none refused with a zero bound"
    );
    assert!(!created.is_empty(), "every write refused");
    let (status, metrics) = request(&mut setup, "GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    assert!(
        metrics.contains(&format!(
            "statepipe_serve_refusals_total{{cause=\"queue_delay\"}} {refused}"
        )),
        "{metrics}"
    );
    assert!(
        metrics.contains("statepipe_serve_refusals_total{cause=\"ring_full\"} 0"),
        "{metrics}"
    );
    // Every acknowledged write is there.
    for body in created {
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let (status, _) = request(&mut setup, &get(v["id"].as_u64().unwrap()));
        assert_eq!(status, 200);
    }
    drop(child);
}

#[test]
fn a_bad_queue_delay_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_statepipe"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--max-queue-delay",
            "20",
        ])
        .arg("--data")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--max-queue-delay") && err.contains("no unit"),
        "{err}"
    );
}
