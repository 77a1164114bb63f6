//! The HTTP listener: the page, snapshots, the stream and `/metrics`.
//!
//! One accepting thread, one thread per open connection (at most
//! [`Options::max_connections`]), and one publisher thread that makes the
//! stream's snapshot while a stream is open. Nothing here is called by the
//! run: the run only feeds its [`Source`]'s counters.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::assets;
use crate::error::DashboardError;
use crate::source::Source;

/// The environment variable holding the bearer token, if any.
pub const TOKEN_ENV: &str = "STATEPIPE_DASHBOARD_TOKEN";

/// The cookie `GET /login?token=…` sets.
const COOKIE: &str = "statepipe_dashboard";
/// The longest request head read.
const MAX_HEAD: usize = 8 * 1024;
/// The most headers a request may carry.
const MAX_HEADERS: usize = 64;

/// How a dashboard serves.
#[derive(Clone)]
pub struct Options {
    /// A bearer token every request must carry; `None` for none.
    pub token: Option<String>,
    /// How often the stream sends a snapshot (default 250 ms).
    pub interval: Duration,
    /// Connections open at once; the next is refused with 503 (default 32).
    pub max_connections: usize,
    /// A client whose socket takes no write (or sends no request) for this
    /// long is disconnected (default 5 s).
    pub timeout: Duration,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is never written out, not even in a debug print.
        f.debug_struct("Options")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("interval", &self.interval)
            .field("max_connections", &self.max_connections)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            token: None,
            interval: Duration::from_millis(250),
            max_connections: 32,
            timeout: Duration::from_secs(5),
        }
    }
}

impl Options {
    /// The defaults, with the token from [`TOKEN_ENV`] when it is set and
    /// not empty.
    pub fn from_env() -> Self {
        Options {
            token: std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()),
            ..Options::default()
        }
    }
}

/// What the connection threads share.
struct Shared {
    source: Arc<dyn Source>,
    options: Options,
    started: Instant,
    stop: AtomicBool,
    /// Connections open now.
    open: AtomicUsize,
    /// Streams open now: the publisher works only while this is not zero.
    streams: AtomicUsize,
    /// Streams cut off because their client took no bytes for the timeout.
    cut_off: AtomicU64,
    /// The newest stream snapshot and its number.
    latest: Mutex<(u64, Arc<String>)>,
    fresh: Condvar,
}

/// A running dashboard: serves its source until dropped.
pub struct Dashboard {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    publisher: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Dashboard {
    /// Listens at `addr` (`HOST:PORT`; port 0 takes any free port) and
    /// serves `source` from threads of its own.
    ///
    /// # Errors
    ///
    /// [`DashboardError::Address`] when `addr` does not resolve,
    /// [`DashboardError::Bind`] when it cannot be bound,
    /// [`DashboardError::Thread`] when a thread cannot start.
    pub fn start(
        addr: &str,
        source: Arc<dyn Source>,
        options: Options,
    ) -> Result<Dashboard, DashboardError> {
        let resolved: SocketAddr = addr
            .to_socket_addrs()
            .map_err(|e| DashboardError::Address {
                addr: addr.to_owned(),
                reason: e.to_string(),
            })?
            .next()
            .ok_or_else(|| DashboardError::Address {
                addr: addr.to_owned(),
                reason: "resolves to no address".into(),
            })?;
        let listener = TcpListener::bind(resolved).map_err(|source| DashboardError::Bind {
            addr: addr.to_owned(),
            source,
        })?;
        let local = listener
            .local_addr()
            .map_err(|source| DashboardError::Bind {
                addr: addr.to_owned(),
                source,
            })?;
        let shared = Arc::new(Shared {
            source,
            options,
            started: Instant::now(),
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            streams: AtomicUsize::new(0),
            cut_off: AtomicU64::new(0),
            latest: Mutex::new((0, Arc::new(String::new()))),
            fresh: Condvar::new(),
        });
        let publisher = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("dashboard-publish".into())
                .spawn(move || publish(&shared))
                .map_err(DashboardError::Thread)?
        };
        let accept = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("dashboard".into())
                .spawn(move || accept_loop(&listener, &shared))
                .map_err(DashboardError::Thread)?
        };
        Ok(Dashboard {
            addr: local,
            shared,
            accept: Some(accept),
            publisher: Some(publisher),
        })
    }

    /// The address it listens at.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The page's URL.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The lines a process prints when its dashboard starts: the URL, how
    /// to pass the token if one is set (never the token itself), and a
    /// warning when the address is reachable from other hosts.
    pub fn banner(&self) -> String {
        let mut s = format!("dashboard: {}", self.url());
        if self.shared.options.token.is_some() {
            s.push_str(&format!(
                "\ndashboard: a token is required ({TOKEN_ENV}): open {}login?token=<the token> \
                 once in the browser, or send `Authorization: Bearer <the token>`",
                self.url()
            ));
        }
        if !self.addr.ip().is_loopback() {
            s.push_str(&format!(
                "\nwarning: the dashboard listens at {}, which other hosts can reach; \
                 it is read-only, but set {TOKEN_ENV} or give a loopback address \
                 (127.0.0.1:PORT) unless this is what you want",
                self.addr
            ));
        }
        s
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        // Open pages get the run's last state (a finished run shows as
        // finished), then their streams end: a second at most.
        if self.shared.streams.load(Ordering::Relaxed) > 0 {
            let body = Arc::new(envelope(&self.shared));
            let mut latest = self
                .shared
                .latest
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            latest.0 += 1;
            latest.1 = body;
        }
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.fresh.notify_all();
        let flushing = Instant::now();
        while self.shared.streams.load(Ordering::Relaxed) > 0
            && flushing.elapsed() < Duration::from_secs(1)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Wake the accepting thread with a connection of our own.
        let wake = if self.addr.ip().is_unspecified() {
            SocketAddr::new(
                if self.addr.is_ipv4() {
                    std::net::Ipv4Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv6Addr::LOCALHOST.into()
                },
                self.addr.port(),
            )
        } else {
            self.addr
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        if let Some(t) = self.publisher.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(shared.options.timeout));
        let _ = conn.set_write_timeout(Some(shared.options.timeout));
        if shared.open.fetch_add(1, Ordering::Relaxed) >= shared.options.max_connections {
            shared.open.fetch_sub(1, Ordering::Relaxed);
            let _ = respond(
                &mut conn,
                "503 Service Unavailable",
                "text/plain; charset=utf-8",
                &[],
                b"503: too many dashboard connections are open; close a tab and reload\n",
                false,
            );
            continue;
        }
        let worker = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("dashboard-conn".into())
            .spawn(move || {
                serve_connection(conn, &worker);
                worker.open.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            shared.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Makes the stream's snapshot every interval while a stream is open.
fn publish(shared: &Shared) {
    while !shared.stop.load(Ordering::Relaxed) {
        if shared.streams.load(Ordering::Relaxed) > 0 {
            let body = Arc::new(envelope(shared));
            let mut latest = shared.latest.lock().unwrap_or_else(PoisonError::into_inner);
            latest.0 += 1;
            latest.1 = body;
            drop(latest);
            shared.fresh.notify_all();
        }
        // Dropping the dashboard unparks this thread.
        std::thread::park_timeout(shared.options.interval);
    }
}

/// The snapshot with its envelope, as JSON text.
fn envelope(shared: &Shared) -> String {
    let s = &shared.source;
    serde_json::json!({
        "kind": s.kind().name(),
        "title": s.title(),
        "uptime_s": shared.started.elapsed().as_secs_f64(),
        "data": s.snapshot(),
    })
    .to_string()
}

/// The source's metrics, then the dashboard's own.
fn metrics(shared: &Shared) -> String {
    let mut out = shared.source.metrics();
    let mut r = Registry::with_prefix("statepipe_dashboard");
    let streams = Gauge::<i64>::default();
    streams.set(i64::try_from(shared.streams.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
    r.register("streams", "Dashboard streams open now", streams);
    let open = Gauge::<i64>::default();
    open.set(i64::try_from(shared.open.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
    r.register("connections", "Dashboard connections open now", open);
    let cut = Counter::<u64>::default();
    cut.inc_by(shared.cut_off.load(Ordering::Relaxed));
    r.register(
        "slow_clients_cut_off",
        "Streams closed because their client took no bytes for the timeout",
        cut,
    );
    let mut own = String::new();
    let _ = prometheus_client::encoding::text::encode_registry(&mut own, &r);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    // The source's text may end with `# EOF`; ours goes before it.
    let eof = out.ends_with("# EOF\n");
    if eof {
        out.truncate(out.len() - "# EOF\n".len());
    }
    out.push_str(&own);
    out.push_str("# EOF\n");
    out
}

/// A parsed request head: what this server needs of it.
struct Head {
    method: String,
    path: String,
    query: String,
    authorization: Option<String>,
    cookie: Option<String>,
}

enum ReadHead {
    Head(Head),
    Malformed(&'static str),
    TooLarge,
    Closed,
}

fn read_head(conn: &mut TcpStream) -> ReadHead {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return ReadHead::Closed,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                let target = req.path.unwrap_or("/");
                let (path, query) = target.split_once('?').unwrap_or((target, ""));
                let header = |name: &str| {
                    req.headers
                        .iter()
                        .find(|h| h.name.eq_ignore_ascii_case(name))
                        .and_then(|h| std::str::from_utf8(h.value).ok())
                        .map(str::to_owned)
                };
                return ReadHead::Head(Head {
                    method: req.method.unwrap_or("").to_owned(),
                    path: path.to_owned(),
                    query: query.to_owned(),
                    authorization: header("authorization"),
                    cookie: header("cookie"),
                });
            }
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD => return ReadHead::TooLarge,
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => return ReadHead::TooLarge,
            Err(_) => return ReadHead::Malformed("the request does not parse as HTTP/1.1"),
        }
    }
}

fn serve_connection(mut conn: TcpStream, shared: &Shared) {
    let head = match read_head(&mut conn) {
        ReadHead::Head(h) => h,
        ReadHead::Closed => return,
        ReadHead::Malformed(why) => {
            let _ = respond(
                &mut conn,
                "400 Bad Request",
                TEXT,
                &[],
                format!("400: {why}\n").as_bytes(),
                false,
            );
            return;
        }
        ReadHead::TooLarge => {
            let _ = respond(
                &mut conn,
                "431 Request Header Fields Too Large",
                TEXT,
                &[],
                b"431: the request head is over 8 KiB or 64 headers\n",
                false,
            );
            return;
        }
    };
    let head_only = head.method == "HEAD";
    if head.method != "GET" && !head_only {
        let _ = respond(
            &mut conn,
            "405 Method Not Allowed",
            TEXT,
            &[("allow", "GET, HEAD")],
            b"405: the dashboard is read-only: GET and HEAD only\n",
            false,
        );
        return;
    }
    if let Some(token) = &shared.options.token {
        if head.path == "/login" {
            login(&mut conn, token, &head.query);
            return;
        }
        if !authorized(&head, token) {
            let _ = respond(
                &mut conn,
                "401 Unauthorized",
                TEXT,
                &[("www-authenticate", "Bearer")],
                format!(
                    "401: this dashboard needs its token ({TOKEN_ENV}): send \
                     `Authorization: Bearer <token>`, or open /login?token=<token> once in the browser\n"
                )
                .as_bytes(),
                head_only,
            );
            return;
        }
    }
    let _ = match head.path.as_str() {
        "/api/stream" => {
            stream(conn, shared, head_only);
            return;
        }
        "/api/snapshot" => respond(
            &mut conn,
            "200 OK",
            "application/json",
            &[("cache-control", "no-store")],
            envelope(shared).as_bytes(),
            head_only,
        ),
        "/metrics" => respond(
            &mut conn,
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            &[("cache-control", "no-store")],
            metrics(shared).as_bytes(),
            head_only,
        ),
        path => match assets::find(path) {
            Some(a) => respond(
                &mut conn,
                "200 OK",
                a.mime,
                &[("cache-control", "no-cache")],
                a.body,
                head_only,
            ),
            None => respond(
                &mut conn,
                "404 Not Found",
                TEXT,
                &[],
                b"404: the dashboard serves /, /api/snapshot, /api/stream and /metrics\n",
                head_only,
            ),
        },
    };
}

const TEXT: &str = "text/plain; charset=utf-8";

/// `GET /login?token=…`: sets the cookie and goes to the page when the
/// token is right, 401 otherwise.
fn login(conn: &mut TcpStream, token: &str, query: &str) {
    let given = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "token")
        .map(|(_, v)| percent_decode(v));
    if given.as_deref().is_some_and(|g| same(g, token)) {
        let cookie = format!(
            "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
            cookie_value(token)
        );
        let _ = respond(
            conn,
            "303 See Other",
            TEXT,
            &[("location", "/"), ("set-cookie", &cookie)],
            b"",
            false,
        );
    } else {
        let _ = respond(
            conn,
            "401 Unauthorized",
            TEXT,
            &[],
            b"401: wrong or missing token: open /login?token=<the token>\n",
            false,
        );
    }
}

/// The cookie's value: the token, hex-encoded (a token may hold bytes a
/// cookie may not).
fn cookie_value(token: &str) -> String {
    token.bytes().map(|b| format!("{b:02x}")).collect()
}

fn authorized(head: &Head, token: &str) -> bool {
    let bearer = head
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .is_some_and(|t| same(t.trim(), token));
    let cookie = head.cookie.as_deref().is_some_and(|c| {
        c.split(';')
            .filter_map(|kv| kv.trim().split_once('='))
            .any(|(k, v)| k == COOKIE && same(v, &cookie_value(token)))
    });
    bearer || cookie
}

/// Compares in time that depends on the lengths alone.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn respond(
    conn: &mut TcpStream,
    status: &str,
    content_type: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    head_only: bool,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         connection: close\r\n{SECURITY}",
        body.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    conn.write_all(head.as_bytes())?;
    if !head_only {
        conn.write_all(body)?;
    }
    conn.flush()?;
    let _ = conn.shutdown(Shutdown::Write);
    Ok(())
}

/// Headers on every answer: the page loads nothing from elsewhere and is
/// not framed.
const SECURITY: &str = "x-content-type-options: nosniff\r\nx-frame-options: DENY\r\n\
     content-security-policy: default-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; frame-ancestors 'none'\r\n";

/// `GET /api/stream`: the newest snapshot each time the publisher makes
/// one, until the client goes, stops reading for the timeout, or the
/// dashboard stops.
fn stream(mut conn: TcpStream, shared: &Shared, head_only: bool) {
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-store\r\n\
         connection: close\r\n{SECURITY}\r\nretry: 1000\n\n"
    );
    if conn.write_all(head.as_bytes()).is_err() || head_only {
        return;
    }
    shared.streams.fetch_add(1, Ordering::Relaxed);
    // The first event at once, not after the publisher's next turn.
    let mut sent = {
        let latest = shared.latest.lock().unwrap_or_else(PoisonError::into_inner);
        latest.0
    };
    let mut body = Arc::new(envelope(shared));
    loop {
        let mut event = String::with_capacity(body.len() + 8);
        event.push_str("data: ");
        event.push_str(&body);
        event.push_str("\n\n");
        // A client that takes no bytes for the timeout fails this write.
        if let Err(e) = conn.write_all(event.as_bytes()).and_then(|()| conn.flush()) {
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) {
                shared.cut_off.fetch_add(1, Ordering::Relaxed);
            }
            break;
        }
        let mut latest = shared.latest.lock().unwrap_or_else(PoisonError::into_inner);
        while latest.0 == sent && !shared.stop.load(Ordering::Relaxed) {
            latest = shared
                .fresh
                .wait_timeout(latest, Duration::from_secs(1))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        if latest.0 == sent {
            break; // stopped, with nothing newer to send
        }
        // Skips to the newest: the ones in between are dropped.
        sent = latest.0;
        body = Arc::clone(&latest.1);
    }
    shared.streams.fetch_sub(1, Ordering::Relaxed);
    let _ = conn.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_by_content() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c%2"), "a b c%2");
        assert_eq!(percent_decode("%zz"), "%zz");
        assert_eq!(percent_decode("%41"), "A");
    }
}
