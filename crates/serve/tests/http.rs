//! The error paths over real sockets: 400, 404, 405, 413, 431, 429, 503,
//! the header and idle timeouts, pipelined requests past the read cap and
//! a half-close, HTTP/1.0 keep-alive, pages held to about a mebibyte, snapshots spaced by the store's growth, restarts that
//! keep the items, and connections shared out evenly over the I/O threads.
//! The server and the raw-socket client: `http/sockets.rs`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use statepipe_serve::{Config, Server};

#[path = "http/sockets.rs"]
mod sockets;
use sockets::{
    closed, connect, connections_per_thread, exchange, read_head, read_response, requests_total,
    start,
};

#[test]
fn error_paths_answer_and_keep_or_close_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    let mut s = connect(addr);
    // Keep-alive through several answers on one connection.
    let (st, _, body) = exchange(
        &mut s,
        b"POST /item HTTP/1.1\r\nContent-Length: 24\r\n\r\n{\"name\":\"a\",\"price\":2.5}",
    );
    assert_eq!((st, body.as_str()), (201, r#"{"id":1}"#));
    let (st, _, body) = exchange(
        &mut s,
        b"POST /item HTTP/1.1\r\nContent-Length: 14\r\n\r\n{\"name\":\"a\"}  ",
    );
    assert_eq!(st, 400);
    assert!(body.contains(r#""field":"price""#), "{body}");
    let (st, _, _) = exchange(
        &mut s,
        b"POST /item HTTP/1.1\r\nContent-Length: 3\r\n\r\n{x}",
    );
    assert_eq!(st, 400);
    let (st, _, _) = exchange(&mut s, b"GET /nothing HTTP/1.1\r\n\r\n");
    assert_eq!(st, 404);
    let (st, _, _) = exchange(&mut s, b"GET /item/77 HTTP/1.1\r\n\r\n");
    assert_eq!(st, 404);
    let (st, _, _) = exchange(&mut s, b"DELETE /item/77 HTTP/1.1\r\n\r\n");
    assert_eq!(st, 404);
    let (st, head, _) = exchange(&mut s, b"PATCH /item/1 HTTP/1.1\r\n\r\n");
    assert_eq!(st, 405);
    assert!(head.contains("Allow: GET, HEAD, DELETE"), "{head}");
    // A HEAD: the GET's headers, no body (the next answer follows at once).
    s.write_all(b"HEAD /item/1 HTTP/1.1\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
        .unwrap();
    let head = read_head(&mut s);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Content-Length: 31\r\n"), "{head}");
    let (st, _, body) = read_response(&mut s);
    assert_eq!((st, body.as_str()), (200, r#"{"status":"ok"}"#));
    let (st, _, body) = exchange(&mut s, b"GET /item/1 HTTP/1.1\r\n\r\n");
    assert_eq!(
        (st, body.as_str()),
        (200, r#"{"id":1,"name":"a","price":2.5}"#)
    );
    let (st, _, _) = exchange(&mut s, b"GET /health HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    let (st, _, body) = exchange(&mut s, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    assert!(
        body.contains("statepipe_serve_journal_fsync_seconds"),
        "{body}"
    );
    assert!(
        body.contains("statepipe_serve_journal_zero_filled"),
        "{body}"
    );
    // Per-stage throughput and depth: the four writes so far (three POSTs
    // and the DELETE of 77) went through every stage; the reads, the 404,
    // the 405, /health and /metrics are answered by the I/O thread.
    for stage in ["journal", "decode", "apply", "reply"] {
        assert!(
            body.contains(&format!(
                "statepipe_serve_stage_depth{{stage=\"{stage}\"}} 0"
            )),
            "{body}"
        );
        assert!(
            body.contains(&format!(
                "statepipe_serve_stage_events_total{{stage=\"{stage}\"}} 4"
            )),
            "{body}"
        );
    }

    // Malformed: 400 and close.
    let mut s = connect(addr);
    let (st, _, _) = exchange(&mut s, b"GET /item HTTP/1.1\r\nBad Header\r\n\r\n");
    assert_eq!(st, 400);
    assert!(closed(&mut s));
    // Body too large: 413 and close.
    let mut s = connect(addr);
    let (st, _, _) = exchange(
        &mut s,
        b"POST /item HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n",
    );
    assert_eq!(st, 413);
    assert!(closed(&mut s));
    // Headers too large: 431 and close.
    let mut s = connect(addr);
    let mut big = b"GET /item HTTP/1.1\r\nX-Big: ".to_vec();
    big.resize(9 * 1024, b'a');
    let (st, _, _) = exchange(&mut s, &big);
    assert_eq!(st, 431);
    assert!(closed(&mut s));

    stop.shutdown();
    t.join().unwrap();

    // A restart keeps the item.
    let (addr, stop, t) = start(dir.path(), |_| {});
    let mut s = connect(addr);
    let (st, _, body) = exchange(&mut s, b"GET /item/1 HTTP/1.1\r\n\r\n");
    assert_eq!(
        (st, body.as_str()),
        (200, r#"{"id":1,"name":"a","price":2.5}"#)
    );
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn a_full_ring_answers_429_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |c| {
        c.ring_capacity = 2;
        // Admission by delay off: the ring itself refuses.
        c.max_queue_delay = Duration::from_secs(3600);
    });
    let mut conns: Vec<TcpStream> = (0..64).map(|_| connect(addr)).collect();
    let req = b"POST /item HTTP/1.1\r\nContent-Length: 22\r\n\r\n{\"name\":\"b\",\"price\":1}";
    // Every connection sends before any reads, so requests pile up.
    for c in &mut conns {
        c.write_all(req).unwrap();
    }
    let mut busy = 0;
    for c in &mut conns {
        let (st, head, _) = read_response(c);
        assert!(st == 201 || st == 429, "{st}");
        if st == 429 {
            assert!(head.contains("Retry-After: 1"), "{head}");
            busy += 1;
        }
    }
    assert!(busy > 0, "64 writes at once never filled a 2-slot ring");
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn the_connection_cap_answers_503_and_slow_headers_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |c| {
        c.max_connections = 1;
        c.header_timeout = Duration::from_millis(300);
    });
    let mut first = connect(addr);
    first.write_all(b"GET /item HTTP/1.1\r\n").unwrap(); // and never finishes
    thread::sleep(Duration::from_millis(50));
    let mut second = connect(addr);
    let (st, _, _) = read_response(&mut second);
    assert_eq!(st, 503);
    assert!(
        closed(&mut first),
        "a client that never finished its headers stays open"
    );
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn a_slow_body_that_keeps_coming_is_taken_and_a_stalled_one_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |c| {
        c.header_timeout = Duration::from_secs(1);
    });
    // A body a byte every 100 ms, 2.5 s in all: longer than the limit,
    // but never silent for it.
    let body = br#"{"name":"slow","price":1}"#;
    let mut s = connect(addr);
    s.write_all(
        format!(
            "POST /item HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    for b in body {
        thread::sleep(Duration::from_millis(100));
        s.write_all(&[*b]).unwrap();
    }
    let (status, _, created) = read_response(&mut s);
    assert_eq!((status, created.as_str()), (201, r#"{"id":1}"#));
    // A body that stops coming is closed once silent for the limit.
    let mut stalled = connect(addr);
    stalled
        .write_all(b"POST /item HTTP/1.1\r\nContent-Length: 20\r\n\r\n{\"na")
        .unwrap();
    assert!(closed(&mut stalled), "a stalled body kept its connection");
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn connections_are_shared_out_evenly_over_the_io_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |c| c.io_threads = Some(4));
    // One at a time, each answered before the next opens: whichever I/O
    // thread accepts it, it goes to one with the fewest.
    let clients: Vec<TcpStream> = (0..40)
        .map(|_| {
            let mut s = connect(addr);
            let (st, _, _) = exchange(&mut s, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
            assert_eq!(st, 200);
            s
        })
        .collect();
    let mut watch = connect(addr);
    let counts = connections_per_thread(&mut watch, 4);
    assert_eq!(counts.iter().sum::<i64>(), 41, "{counts:?}");
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(max - min <= 1, "uneven: {counts:?}");
    // A burst: 40 more opened at once, none waited for.
    let burst: Vec<TcpStream> = (0..40).map(|_| connect(addr)).collect();
    for mut s in burst.iter().map(|s| s.try_clone().unwrap()) {
        let (st, _, _) = exchange(&mut s, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(st, 200);
    }
    let counts = connections_per_thread(&mut watch, 4);
    assert_eq!(counts.iter().sum::<i64>(), 81, "{counts:?}");
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(max - min <= 1, "uneven after a burst: {counts:?}");
    // Closed connections leave their threads' counts (closes are seen
    // asynchronously: wait for them, however long that takes).
    drop(clients);
    drop(burst);
    loop {
        let counts = connections_per_thread(&mut watch, 4);
        if counts.iter().sum::<i64>() == 1 {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn answers_on_every_io_thread_are_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |c| c.io_threads = Some(3));
    // Six connections, shared out over the three I/O threads, each with
    // its own count of 404s and 201s.
    let mut clients: Vec<TcpStream> = (0..6).map(|_| connect(addr)).collect();
    for (i, s) in clients.iter_mut().enumerate() {
        for _ in 0..=i {
            let (st, _, _) = exchange(s, b"GET /item/999 HTTP/1.1\r\n\r\n");
            assert_eq!(st, 404);
        }
        let (st, _, _) = exchange(
            s,
            b"POST /item HTTP/1.1\r\nContent-Length: 22\r\n\r\n{\"name\":\"a\",\"price\":1}",
        );
        assert_eq!(st, 201);
    }
    let mut watch = connect(addr);
    assert_eq!(requests_total(&mut watch, "GET /item/{id}", 404), 21);
    assert_eq!(requests_total(&mut watch, "POST /item", 201), 6);
    // Read again: nothing counted twice; the first read's own answer now
    // counted.
    assert_eq!(requests_total(&mut watch, "GET /item/{id}", 404), 21);
    assert_eq!(requests_total(&mut watch, "GET /metrics", 200), 3);
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn an_idle_keep_alive_connection_is_closed_and_a_busy_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |c| {
        c.idle_timeout = Duration::from_secs(2);
    });
    let mut idle = connect(addr);
    let mut busy = connect(addr);
    let (st, _, _) = exchange(&mut idle, b"GET /health HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    // The busy connection asks every 50 ms for longer than the idle
    // timeout: it stays open.
    for _ in 0..60 {
        let (st, _, _) = exchange(&mut busy, b"GET /item HTTP/1.1\r\n\r\n");
        assert_eq!(st, 200);
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        closed(&mut idle),
        "an idle keep-alive connection stays open"
    );
    let (st, _, _) = exchange(&mut busy, b"GET /health HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn pipelined_writes_past_the_read_cap_and_a_half_close_are_all_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    // 200 writes of ~7.5 kB each in one stream (1.5 MB, more than the
    // server holds unread while a write is on the ring), then a read and
    // the write half closed: every one answered in order, then the close.
    let pad = "p".repeat(7 * 1024);
    let mut raw = b"GET /health HTTP/1.1\r\n\r\nGET /item/1 HTTP/1.1\r\n\r\n".repeat(3);
    for i in 0..200 {
        raw.extend_from_slice(
            format!(
                "POST /item HTTP/1.1\r\nX-Pad: {pad}\r\nContent-Length: 23\r\n\r\n{{\"name\":\"n\",\"price\":{:>2}}}",
                i % 100
            )
            .as_bytes(),
        );
    }
    raw.extend_from_slice(b"GET /item/200 HTTP/1.1\r\n\r\n");
    let mut s = connect(addr);
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || {
        w.write_all(&raw).unwrap();
        w.shutdown(std::net::Shutdown::Write).unwrap();
    });
    for _ in 0..3 {
        assert_eq!(read_response(&mut s).0, 200);
        assert_eq!(read_response(&mut s).0, 404);
    }
    for i in 1..=200 {
        let (st, _, body) = read_response(&mut s);
        assert_eq!((st, body), (201, format!("{{\"id\":{i}}}")));
    }
    let (st, _, body) = read_response(&mut s);
    assert_eq!(st, 200);
    assert!(body.contains("\"price\":99"), "{body}");
    writer.join().unwrap();
    assert!(
        closed(&mut s),
        "the server kept a half-closed connection open"
    );
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn pipelined_reads_past_the_read_cap_are_all_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    // 400 reads of ~4 kB each in one stream (1.6 MB, more than the server
    // reads ahead), every one answered at once, none through the ring:
    // the server must read on by itself where its reads stopped.
    let pad = "p".repeat(4 * 1024);
    let raw = format!("GET /health HTTP/1.1\r\nX-Pad: {pad}\r\n\r\n").repeat(400);
    let mut s = connect(addr);
    let mut w = s.try_clone().unwrap();
    let writer = thread::spawn(move || w.write_all(raw.as_bytes()).unwrap());
    for i in 0..400 {
        let (status, _, _) = read_response(&mut s);
        assert_eq!(status, 200, "answer {i}");
    }
    writer.join().unwrap();
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn a_client_that_expects_100_continue_gets_it_before_it_sends_the_body() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    let mut s = connect(addr);
    let body = br#"{"name":"late","price":2}"#;
    s.write_all(
        format!(
            "POST /item HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    // The interim answer comes before the body is sent, then the final one.
    let mut interim = [0u8; 25];
    s.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(body).unwrap();
    let (status, _, created) = read_response(&mut s);
    assert_eq!((status, created.as_str()), (201, r#"{"id":1}"#));
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn a_refused_body_sent_whole_still_gets_its_answer() {
    // A client that sends a 4 MiB body without waiting (no Expect): the
    // server refuses it at its headers and closes, with the body still
    // coming. Closing with bytes unread resets the connection, which can
    // destroy the 413 on its way; the server reads the rest away first.
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    for _ in 0..5 {
        let mut s = connect(addr);
        let mut w = s.try_clone().unwrap();
        let writer = thread::spawn(move || {
            let body = vec![b'x'; 4 << 20];
            let head = format!(
                "POST /item HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = w.write_all(head.as_bytes());
            let _ = w.write_all(&body);
            let _ = w.shutdown(std::net::Shutdown::Write);
        });
        thread::sleep(Duration::from_millis(50));
        let (status, _, _) = read_response(&mut s);
        assert_eq!(status, 413);
        writer.join().unwrap();
    }
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn a_page_of_large_items_stops_at_about_a_mebibyte() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    let mut s = connect(addr);
    let name = "n".repeat(300 * 1024);
    let body = format!(r#"{{"name":"{name}","price":1}}"#);
    let post = format!(
        "POST /item HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    for _ in 0..10 {
        assert_eq!(exchange(&mut s, post.as_bytes()).0, 201);
    }
    // Three items of 300 KiB make a page; the next page goes on after it.
    let (status, _, page) = exchange(&mut s, b"GET /item?limit=1000 HTTP/1.1\r\n\r\n");
    assert_eq!(status, 200);
    assert_eq!(
        page.matches("\"id\":").count(),
        3,
        "{}",
        &page[page.len() - 40..]
    );
    assert!(
        page.ends_with(r#""next_after":3}"#),
        "{}",
        &page[page.len() - 40..]
    );
    let (_, _, last) = exchange(&mut s, b"GET /item?after=9&limit=1000 HTTP/1.1\r\n\r\n");
    assert!(
        last.ends_with(r#""next_after":null}"#),
        "{}",
        &last[last.len() - 40..]
    );
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn snapshots_come_further_apart_as_the_store_grows_and_restart_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |c| c.snapshot_every = 10);
    let mut s = connect(addr);
    let body = b"POST /item HTTP/1.1\r\nContent-Length: 22\r\n\r\n{\"name\":\"n\",\"price\":1}";
    let count = |s: &mut TcpStream| {
        let (st, _, metrics) = exchange(s, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(st, 200);
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("statepipe_serve_snapshot_seconds_count "))
            .map(|n| n.trim().parse::<u64>().unwrap())
            .unwrap_or_else(|| panic!("no snapshot count in {metrics}"))
    };
    // Due after 10 writes and as many as the last snapshot had items: at
    // 10, 20, 40 and 80 items, not every 10 writes. Each is waited for
    // where it falls due, so that none is skipped for its predecessor
    // still being written (the snapshot thread runs at the lowest
    // priority, slow on a busy host), and none comes in between.
    let mut taken = 0;
    for i in 1..=100 {
        let (st, _, got) = exchange(&mut s, body);
        assert_eq!((st, got), (201, format!("{{\"id\":{i}}}")));
        if [10, 20, 40, 80].contains(&i) {
            taken += 1;
            let mut n = count(&mut s);
            // Bounded: a failure, not a hang, if it never comes.
            for _ in 0..3000 {
                if n >= taken {
                    break;
                }
                thread::sleep(Duration::from_millis(20));
                n = count(&mut s);
            }
            assert_eq!(
                n, taken,
                "snapshots after {i} writes with --snapshot-every 10"
            );
        }
    }
    assert_eq!(count(&mut s), 4, "snapshots in 100 writes");
    stop.shutdown();
    t.join().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    let mut s = connect(addr);
    let (st, _, got) = exchange(&mut s, b"GET /item?limit=1000 HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    assert_eq!(got.matches("\"id\":").count(), 100, "{got}");
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn an_http_1_0_client_that_asks_keep_alive_is_told_the_connection_stays() {
    // An HTTP/1.0 client (ApacheBench with -k) keeps its connection only
    // if the answer says `Connection: keep-alive`; without it, it waits for
    // the server to close. Writes (answered from the ring) and reads alike.
    let dir = tempfile::tempdir().unwrap();
    let (addr, stop, t) = start(dir.path(), |_| {});
    let mut s = connect(addr);
    let body = br#"{"name":"old","price":1}"#;
    let post = format!(
        "POST /item HTTP/1.0\r\nConnection: Keep-Alive\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut raw = post.into_bytes();
    raw.extend_from_slice(body);
    let (status, head, created) = exchange(&mut s, &raw);
    assert_eq!((status, created.as_str()), (201, r#"{"id":1}"#));
    assert!(head.contains("\r\nConnection: keep-alive\r\n"), "{head:?}");
    for raw in [
        &b"GET /item/1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"[..],
        &b"GET /nowhere HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"[..],
    ] {
        let (_, head, _) = exchange(&mut s, raw);
        assert!(head.contains("\r\nConnection: keep-alive\r\n"), "{head:?}");
    }
    // Without the option, HTTP/1.0 closes after the answer.
    let (status, head, _) = exchange(&mut s, b"GET /item/1 HTTP/1.0\r\n\r\n");
    assert_eq!(status, 200);
    assert!(head.contains("\r\nConnection: close\r\n"), "{head:?}");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    // HTTP/1.1 says nothing: it keeps the connection by default.
    let mut s = connect(addr);
    let (_, head, _) = exchange(&mut s, b"GET /item/1 HTTP/1.1\r\n\r\n");
    assert!(!head.contains("Connection:"), "{head:?}");
    stop.shutdown();
    t.join().unwrap();
}

#[test]
fn the_summary_counts_requests_latencies_and_journal_commits() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), dir.path());
    config.pin = false;
    config.io_threads = Some(2);
    let server = Server::bind(config).unwrap();
    let metrics = server.metrics();
    let addr = server.local_addr().unwrap();
    let stop = server.shutdown_handle();
    let t = thread::spawn(move || server.run().unwrap());
    assert_eq!(metrics.summary().latency.count, 0);
    let mut clients: Vec<TcpStream> = (0..2).map(|_| connect(addr)).collect();
    for s in &mut clients {
        for _ in 0..5 {
            let (st, _, _) = exchange(
                s,
                b"POST /item HTTP/1.1\r\nContent-Length: 22\r\n\r\n{\"name\":\"a\",\"price\":1}",
            );
            assert_eq!(st, 201);
        }
        for _ in 0..10 {
            let (st, _, _) = exchange(s, b"GET /item/999 HTTP/1.1\r\n\r\n");
            assert_eq!(st, 404);
        }
    }
    let s = metrics.summary();
    let count = |route: &str, status: u16| {
        s.requests
            .iter()
            .find(|r| r.route == route && r.status == status)
            .map_or(0, |r| r.count)
    };
    assert_eq!(count("POST /item", 201), 10, "{s:?}");
    assert_eq!(count("GET /item/{id}", 404), 20, "{s:?}");
    assert_eq!(s.latency.count, 30, "{s:?}");
    assert!(s.latency.p50 <= s.latency.p99, "{s:?}");
    assert!(s.latency.p99 > Duration::ZERO, "{s:?}");
    assert_eq!(s.journal_events, 10, "{s:?}");
    assert!((1..=10).contains(&s.journal_fsyncs), "{s:?}");
    assert_eq!(s.published, 10);
    assert_eq!(s.ring_depth, 0);
    assert_eq!(s.connections, 2);
    assert_eq!(
        s.refusals,
        [("queue_delay", 0), ("ring_full", 0), ("connections", 0)]
    );
    // The latencies are the interval's: the next summary starts afresh,
    // while the counts go on.
    let again = metrics.summary();
    assert_eq!(again.latency.count, 0);
    assert_eq!(again.requests, s.requests);
    // `/metrics` shows the latencies too, per I/O thread, from the start.
    let (st, _, body) = exchange(&mut clients[0], b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(st, 200);
    let timed: u64 = body
        .lines()
        .filter(|l| l.starts_with("statepipe_serve_request_seconds_count{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(timed, 30, "{body}");
    assert!(
        body.contains("statepipe_serve_journal_events_total 10"),
        "{body}"
    );
    stop.shutdown();
    t.join().unwrap();
}
