//! The dashboard's HTTP surface against a real listener: what each path
//! answers, the token, the bounds, and a stalled client next to a live one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use statepipe_dashboard::{Dashboard, Kind, Options, Source};

/// A source whose counter rises at each snapshot, with `pad` bytes of
/// filler to make snapshots large.
struct Counting {
    n: AtomicU64,
    pad: usize,
}

impl Source for Counting {
    fn kind(&self) -> Kind {
        Kind::Service
    }
    fn title(&self) -> String {
        "test".into()
    }
    fn snapshot(&self) -> serde_json::Value {
        let n = self.n.fetch_add(1, Ordering::Relaxed);
        serde_json::json!({ "n": n, "pad": "x".repeat(self.pad) })
    }
    fn metrics(&self) -> String {
        "# TYPE test_total counter\ntest_total 7\n".into()
    }
}

fn start(options: Options, pad: usize) -> Dashboard {
    let source = Arc::new(Counting {
        n: AtomicU64::new(0),
        pad,
    });
    Dashboard::start("127.0.0.1:0", source, options).expect("a dashboard on loopback")
}

/// Sends `request` raw and reads the whole answer (the server closes).
fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

fn get(addr: SocketAddr, path: &str, headers: &str) -> (u16, String, String) {
    raw(
        addr,
        format!("GET {path} HTTP/1.1\r\nhost: x\r\n{headers}\r\n").as_bytes(),
    )
}

#[test]
fn every_path_answers_as_documented() {
    let d = start(Options::default(), 0);
    let a = d.local_addr();
    let (status, head, body) = get(a, "/", "");
    assert_eq!(status, 200);
    assert!(head.contains("text/html"), "{head}");
    assert!(body.contains("<"), "the page is HTML");
    for (path, mime) in [
        ("/assets/app.js", "text/javascript"),
        ("/assets/evolve.js", "text/javascript"),
        ("/assets/pipeline.js", "text/javascript"),
        ("/assets/service.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
        ("/assets/vendor/uPlot.iife.min.js", "text/javascript"),
        ("/assets/vendor/uPlot.min.css", "text/css"),
    ] {
        let (status, head, _) = get(a, path, "");
        assert_eq!(status, 200, "{path}");
        assert!(head.contains(mime), "{path}: {head}");
    }
    // Every script the page loads is served.
    for script in body.split("<script src=\"").skip(1) {
        let src = script.split('"').next().unwrap_or_default();
        assert_eq!(get(a, &format!("/{src}"), "").0, 200, "{src}");
    }
    let (status, _, body) = get(a, "/api/snapshot", "");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["kind"], "service");
    assert_eq!(v["title"], "test");
    assert!(v["uptime_s"].as_f64().is_some());
    assert!(v["data"]["n"].as_u64().is_some());
    let (status, head, body) = get(a, "/metrics", "");
    assert_eq!(status, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(body.contains("test_total 7"));
    assert_eq!(get(a, "/nothing", "").0, 404);
    assert_eq!(get(a, "/api/snapshot?x=1", "").0, 200, "a query is ignored");
    let (status, head, body) = raw(a, b"HEAD /metrics HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(status, 200);
    assert!(head.contains("content-length"));
    assert!(body.is_empty());
}

#[test]
fn nothing_can_change_the_run_and_bad_requests_are_refused() {
    let d = start(Options::default(), 0);
    let a = d.local_addr();
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        let (status, head, _) = raw(
            a,
            format!("{method} /api/snapshot HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
                .as_bytes(),
        );
        assert_eq!(status, 405, "{method}");
        assert!(head.contains("allow: GET, HEAD"));
    }
    assert_eq!(raw(a, b"\x00\x01garbage\r\n\r\n").0, 400);
    assert_eq!(raw(a, b"GET / HTTP/1.1\r\nbad header\r\n\r\n").0, 400);
    let long = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(10_000));
    assert_eq!(raw(a, long.as_bytes()).0, 431);
    let many: String = (0..100).map(|i| format!("h{i}: v\r\n")).collect();
    assert_eq!(
        raw(a, format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()).0,
        431
    );
    // The server still answers after all that.
    assert_eq!(get(a, "/api/snapshot", "").0, 200);
}

#[test]
fn a_token_guards_every_path_and_is_never_shown() {
    let secret = "s3cret/token+x";
    let d = start(
        Options {
            token: Some(secret.into()),
            ..Options::default()
        },
        0,
    );
    let a = d.local_addr();
    assert!(!d.banner().contains(secret), "the banner names no token");
    assert!(!format!("{:?}", Options::from_env()).contains(secret));
    for path in ["/", "/api/snapshot", "/api/stream", "/metrics", "/nothing"] {
        let (status, head, body) = get(a, path, "");
        assert_eq!(status, 401, "{path}");
        assert!(!head.contains(secret) && !body.contains(secret));
    }
    assert_eq!(get(a, "/metrics", "authorization: Bearer wrong\r\n").0, 401);
    assert_eq!(
        get(
            a,
            "/metrics",
            &format!("authorization: Bearer {secret}\r\n")
        )
        .0,
        200
    );
    assert_eq!(get(a, "/login?token=wrong", "").0, 401);
    let (status, head, _) = get(a, "/login?token=s3cret%2Ftoken%2Bx", "");
    assert_eq!(status, 303);
    let cookie = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .expect("a cookie")
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    assert!(!cookie.contains(secret));
    let (status, _, body) = get(a, "/", &format!("cookie: other=1; {cookie}\r\n"));
    assert_eq!(status, 200);
    assert!(!body.contains(secret), "the page holds no token");
    assert_eq!(get(a, "/", "cookie: statepipe_dashboard=00\r\n").0, 401);
}

#[test]
fn connections_past_the_bound_get_503() {
    let d = start(
        Options {
            max_connections: 2,
            ..Options::default()
        },
        0,
    );
    let a = d.local_addr();
    // Two streams hold both connections.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(a).unwrap();
        s.write_all(b"GET /api/stream HTTP/1.1\r\nhost: x\r\n\r\n")
            .unwrap();
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 200"), "{line}");
        held.push(r);
    }
    assert_eq!(get(a, "/api/snapshot", "").0, 503);
    drop(held);
}

/// Reads events from a stream and returns their `n` fields.
fn events(r: &mut BufReader<TcpStream>, count: usize) -> Vec<u64> {
    let mut seen = Vec::new();
    let mut line = String::new();
    while seen.len() < count {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(data) = line.strip_prefix("data: ") {
            let v: serde_json::Value = serde_json::from_str(data.trim_end()).unwrap();
            seen.push(v["data"]["n"].as_u64().unwrap());
        }
    }
    seen
}

#[test]
fn the_stream_sends_fresh_snapshots_while_a_stalled_client_waits() {
    let d = start(
        Options {
            interval: Duration::from_millis(20),
            timeout: Duration::from_millis(300),
            ..Options::default()
        },
        256 * 1024,
    );
    let a = d.local_addr();
    // A client that asks for the stream and never reads.
    let mut stalled = TcpStream::connect(a).unwrap();
    stalled
        .write_all(b"GET /api/stream HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut live = TcpStream::connect(a).unwrap();
    live.write_all(b"GET /api/stream HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(live);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("200"));
    let seen = events(&mut r, 40);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "each event is newer than the one before: {seen:?}"
    );
    // The stalled client is cut off (its socket took no bytes for the
    // timeout); the dashboard counts it. Bounded wait: a dashboard that
    // never cuts it off fails here rather than hanging.
    let mut cut = false;
    for _ in 0..600 {
        let (_, _, body) = get(a, "/metrics", "");
        if body.contains("statepipe_dashboard_slow_clients_cut_off_total 1") {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(cut, "the stalled stream was never cut off");
    drop(stalled);
    // The live stream goes on.
    let more = events(&mut r, 5);
    assert!(more[0] > seen[seen.len() - 1]);
}

#[test]
fn a_bad_address_says_what_to_do() {
    let source = Arc::new(Counting {
        n: AtomicU64::new(0),
        pad: 0,
    });
    let e = Dashboard::start("not an address", source.clone(), Options::default()).unwrap_err();
    assert!(e.to_string().contains("HOST:PORT"), "{e}");
    let taken = start(Options::default(), 0);
    let e =
        Dashboard::start(&taken.local_addr().to_string(), source, Options::default()).unwrap_err();
    assert!(e.to_string().contains("another port"), "{e}");
}

#[test]
fn the_banner_warns_off_loopback() {
    let d = start(Options::default(), 0);
    assert!(d.banner().starts_with("dashboard: http://127.0.0.1:"));
    assert!(!d.banner().contains("warning"));
    let source = Arc::new(Counting {
        n: AtomicU64::new(0),
        pad: 0,
    });
    let open = Dashboard::start("0.0.0.0:0", source, Options::default()).unwrap();
    assert!(open.banner().contains("warning"), "{}", open.banner());
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config { cases: 32, ..Default::default() })]

    /// Whatever bytes arrive, the answer is one of the documented statuses
    /// (or none, for bytes that never finish a head), and the server goes
    /// on answering.
    #[test]
    fn any_bytes_get_a_defined_answer(
        bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048),
        path in "/[a-z/?=%&.]{0,40}",
    ) {
        let d = start(Options { token: Some("t".into()), timeout: Duration::from_millis(200), ..Options::default() }, 0);
        let a = d.local_addr();
        let (status, _, _) = raw(a, &bytes);
        proptest::prop_assert!([0, 400, 401, 405, 431].contains(&status), "{}", status);
        let (status, _, _) = get(a, &path, "authorization: Bearer t\r\n");
        proptest::prop_assert!([200, 303, 400, 401, 404].contains(&status), "{} for {}", status, path);
    }
}

#[test]
fn an_open_stream_gets_the_last_state_when_the_dashboard_stops() {
    let d = start(
        Options {
            interval: Duration::from_secs(3600),
            ..Options::default()
        },
        0,
    );
    let mut s = TcpStream::connect(d.local_addr()).unwrap();
    s.write_all(b"GET /api/stream HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let first = events(&mut r, 1)[0];
    drop(d);
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    let last = rest
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|j| {
            serde_json::from_str::<serde_json::Value>(j).unwrap()["data"]["n"]
                .as_u64()
                .unwrap()
        })
        .next_back()
        .expect("a last snapshot before the stream ends");
    assert!(last > first);
}
