//! The tests' server on a loopback port, and a client over a raw socket:
//! requests written byte for byte, responses read and checked (status,
//! `Date`, `Content-Length`), and the counters read from `GET /metrics`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use statepipe_serve::{Config, Server, ShutdownHandle};

pub(crate) fn start(
    dir: &std::path::Path,
    tweak: impl FnOnce(&mut Config),
) -> (SocketAddr, ShutdownHandle, thread::JoinHandle<()>) {
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), dir);
    config.pin = false;
    config.io_threads = Some(1);
    tweak(&mut config);
    let server = Server::bind(config).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.shutdown_handle();
    let t = thread::spawn(move || server.run().unwrap());
    (addr, stop, t)
}

/// Sends `raw`, reads one response: (status, headers, body).
pub(crate) fn exchange(stream: &mut TcpStream, raw: &[u8]) -> (u16, String, String) {
    stream.write_all(raw).unwrap();
    read_response(stream)
}

/// Reads up to the end of a response's headers.
pub(crate) fn read_head(stream: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).unwrap() == 0 {
            panic!(
                "closed before a response: {:?}",
                String::from_utf8_lossy(&buf)
            );
        }
        buf.push(byte[0]);
    }
    String::from_utf8(buf).unwrap()
}

pub(crate) fn read_response(stream: &mut TcpStream) -> (u16, String, String) {
    let head = read_head(stream);
    let status = head[9..12].parse().unwrap();
    assert!(head.contains("\r\nDate: "), "no Date header: {head:?}");
    // A 204 has no body, and no Content-Length (RFC 9110, 8.6).
    let len: usize = if status == 204 {
        assert!(!head.contains("Content-Length"), "{head:?}");
        0
    } else {
        head.lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let mut body = vec![0; len];
    stream.read_exact(&mut body).unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Whether the server closed the connection (a read that times out says no).
pub(crate) fn closed(stream: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    match stream.read(&mut b) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// `statepipe_serve_connections{io="i"}` for I/O threads `0..n`, from one
/// `GET /metrics` on `stream`.
pub(crate) fn connections_per_thread(stream: &mut TcpStream, n: usize) -> Vec<i64> {
    let (status, _, body) = exchange(stream, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(status, 200);
    (0..n)
        .map(|i| {
            let key = format!("statepipe_serve_connections{{io=\"{i}\"}} ");
            body.lines()
                .find_map(|l| l.strip_prefix(&key))
                .unwrap_or_else(|| panic!("no {key:?} in:\n{body}"))
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

/// `statepipe_serve_requests_total{route, status}`'s value, 0 when absent.
pub(crate) fn requests_total(stream: &mut TcpStream, route: &str, status: u16) -> u64 {
    let (st, _, body) = exchange(stream, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    let series =
        format!("statepipe_serve_requests_total{{route=\"{route}\",status=\"{status}\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |v| v.trim().parse().unwrap())
}
