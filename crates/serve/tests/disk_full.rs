//! A real full disk: the data directory on a 1 MiB tmpfs. Writes that do
//! not fit get 503 with `Retry-After` while reads keep working; once there is
//! room again, writes succeed again; a restart has exactly the items
//! acknowledged. Needs root (to mount); skips, saying why, without it (a
//! failure instead under `STATEPIPE_REQUIRE_PRIVILEGED=1`: scripts/skip.rs).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use statepipe_serve::{Config, Server, ShutdownHandle};

#[path = "../../../scripts/skip.rs"]
mod skip;
#[path = "../../../scripts/tmpfs.rs"]
mod tmpfs;
use tmpfs::Tmpfs;

fn start(data: PathBuf) -> (SocketAddr, ShutdownHandle, thread::JoinHandle<()>) {
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), data);
    config.pin = false;
    config.io_threads = Some(1);
    let server = Server::bind(config).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.shutdown_handle();
    let t = thread::spawn(move || server.run().unwrap());
    (addr, stop, t)
}

/// One request; (status, head, body).
fn exchange(s: &mut TcpStream, raw: &[u8]) -> (u16, String, String) {
    s.write_all(raw).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).unwrap(), 1, "closed before a response");
        head.push(b[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut body = vec![0; len];
    s.read_exact(&mut body).unwrap();
    (
        head[9..12].parse().unwrap(),
        head,
        String::from_utf8(body).unwrap(),
    )
}

fn post(s: &mut TcpStream, name: &str) -> (u16, String, String) {
    let body = format!(r#"{{"name":"{name}","price":1}}"#);
    let raw = format!(
        "POST /item HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    exchange(s, raw.as_bytes())
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

#[test]
fn a_full_disk_answers_writes_503_and_reads_keep_working() {
    let Some(fs) = Tmpfs::mount_or_skip("1m") else {
        return;
    };
    let data = fs.path().join("data");
    let (addr, stop, t) = start(data.clone());
    let mut s = connect(addr);
    // Items of 200 KiB: the fifth cannot fit in 1 MiB.
    let big = |i: usize| format!("{i}-{}", "x".repeat(200 * 1024));
    let mut acked = Vec::new();
    let mut refused = 0;
    for i in 0..12 {
        let (st, head, body) = post(&mut s, &big(i));
        match st {
            201 => acked.push((body, i)),
            503 => {
                assert!(head.contains("Retry-After: 1"), "{head}");
                refused += 1;
            }
            other => panic!("POST answered {other}: {body}"),
        }
    }
    assert!(refused > 0, "12 writes of 200 KiB all fit in 1 MiB");
    assert!(!acked.is_empty(), "no write fitted in 1 MiB");
    // Reads keep working, on the same connection and on a new one.
    let (st, _, body) = exchange(&mut s, b"GET /item/1 HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    assert!(body.contains("\"0-xxx"), "{}", &body[..40.min(body.len())]);
    let mut s2 = connect(addr);
    let (st, _, _) = exchange(&mut s2, b"GET /item?limit=2 HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    let (st, _, _) = exchange(&mut s2, b"GET /health HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    // Room again: the next write succeeds.
    fs.resize("8m");
    let (st, _, body) = post(&mut s, "after");
    assert_eq!(st, 201, "{body}");
    let after_id = body;
    stop.shutdown();
    t.join().unwrap();

    // A restart has exactly the acknowledged items, in the order acked.
    let (addr, stop, t) = start(data);
    let mut s = connect(addr);
    let (st, _, list) = exchange(&mut s, b"GET /item?limit=1000 HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&list).unwrap();
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), acked.len() + 1, "items after restart");
    for ((id_json, i), item) in acked.iter().zip(items) {
        let id: serde_json::Value = serde_json::from_str(id_json).unwrap();
        assert_eq!(item["id"], id["id"]);
        assert_eq!(item["name"].as_str().unwrap(), big(*i));
    }
    let id: serde_json::Value = serde_json::from_str(&after_id).unwrap();
    assert_eq!(items.last().unwrap()["id"], id["id"]);
    stop.shutdown();
    t.join().unwrap();
}
