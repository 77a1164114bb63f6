//! HTTP/1.1 requests in (parsed by `httparse`), routes, and responses out.
//! No I/O: [`parse`] looks at the bytes a connection has received so far.

use std::io::Write;

/// The most header bytes a request may have.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// The largest body a request may have.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// The default and largest page of `GET /item`.
pub const DEFAULT_LIMIT: usize = 100;
/// See [`DEFAULT_LIMIT`].
pub const MAX_LIMIT: usize = 1000;
const MAX_HEADERS: usize = 64;

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `POST /item` with its body.
    Create(Vec<u8>),
    /// `GET /item?after=ID&limit=N`.
    List {
        /// Only items with a larger id.
        after: u64,
        /// At most this many.
        limit: usize,
    },
    /// `GET /item/{id}`.
    Get(u64),
    /// `DELETE /item/{id}`.
    Delete(u64),
    /// `GET /health`.
    Health,
    /// `GET /metrics`.
    Metrics,
}

impl Route {
    /// The label of its route in the metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Route::Create(_) => "POST /item",
            Route::List { .. } => "GET /item",
            Route::Get(_) => "GET /item/{id}",
            Route::Delete(_) => "DELETE /item/{id}",
            Route::Health => "GET /health",
            Route::Metrics => "GET /metrics",
        }
    }

    /// Whether it changes the items (and so is journalled).
    pub fn is_write(&self) -> bool {
        matches!(self, Route::Create(_) | Route::Delete(_))
    }
}

/// What the bytes received so far amount to.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Not a whole request yet.
    Incomplete,
    /// A request's headers, its body not all here yet; the client waits
    /// for `100 Continue` before it sends the body if `expects_continue`
    /// (RFC 9110, 10.1.1).
    AwaitingBody {
        /// The request has `Expect: 100-continue`.
        expects_continue: bool,
    },
    /// A request: it used the first `consumed` bytes.
    Request {
        /// Bytes of the buffer it used.
        consumed: usize,
        /// What it asks for (a `HEAD` asks for the `GET` route).
        route: Route,
        /// Whether the connection closes after the response.
        close: bool,
        /// An HTTP/1.0 request that asked to keep the connection
        /// (`Connection: keep-alive`), which stays open: its answer says so.
        keep_alive: bool,
        /// A `HEAD`: answered as the `GET` would be, without the body.
        head: bool,
    },
    /// A request answered at once (404, 405, a bad query): it used the first
    /// `consumed` bytes, and the connection stays open unless `close`.
    Answer {
        /// Bytes of the buffer it used.
        consumed: usize,
        /// The answer.
        response: Response,
    },
    /// Bad bytes: answer, then close (the stream cannot be resynchronised).
    Reject(Response),
}

/// Parses the start of `buf`; see [`Parsed`].
pub fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let header_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n > MAX_HEADER_BYTES => {
            return Parsed::Reject(Response::error(431, "request headers over 8 KiB"))
        }
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEADER_BYTES => {
            return Parsed::Reject(Response::error(431, "request headers over 8 KiB"))
        }
        Ok(httparse::Status::Partial) => return Parsed::Incomplete,
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Reject(Response::error(431, "too many request headers"))
        }
        Err(e) => return Parsed::Reject(Response::error(400, &format!("malformed request: {e}"))),
    };
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Parsed::Reject(Response::error(400, "malformed request line"));
    };
    let mut content_length: Option<usize> = None;
    let (mut close, mut asked_close) = (version == 0, false);
    let mut expects_continue = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            // Digits only (RFC 9112, 6.3: no sign, no list), and the same
            // value if repeated: a proxy in front that read another length
            // would see another request where this one ends.
            let n = std::str::from_utf8(h.value)
                .ok()
                .map(str::trim)
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse().ok());
            match (n, content_length) {
                (None, _) => return Parsed::Reject(Response::error(400, "bad Content-Length")),
                (Some(n), Some(seen)) if n != seen => {
                    return Parsed::Reject(Response::error(400, "conflicting Content-Length"))
                }
                (Some(n), _) => content_length = Some(n),
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Parsed::Reject(Response::error(
                400,
                "Transfer-Encoding is not supported; send Content-Length",
            ));
        } else if h.name.eq_ignore_ascii_case("expect") {
            expects_continue =
                version == 1 && h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        } else if h.name.eq_ignore_ascii_case("connection") {
            // A list of options (RFC 9110, 7.6.1): `close, TE` closes.
            for option in h.value.split(|&b| b == b',') {
                let option = option.trim_ascii();
                if option.eq_ignore_ascii_case(b"close") {
                    asked_close = true;
                } else if option.eq_ignore_ascii_case(b"keep-alive") {
                    close = false;
                }
            }
        }
    }
    let close = close || asked_close;
    // An HTTP/1.0 client keeps the connection only when the answer says
    // `Connection: keep-alive` (RFC 9112, appendix C.2.2); an HTTP/1.1 one
    // keeps it unless told otherwise.
    let keep_alive = version == 0 && !close;
    let content_length = content_length.unwrap_or(0);
    if content_length > MAX_BODY_BYTES {
        return Parsed::Reject(Response::error(413, "request body over 1 MiB"));
    }
    let consumed = header_len + content_length;
    if buf.len() < consumed {
        return Parsed::AwaitingBody { expects_continue };
    }
    let body = &buf[header_len..consumed];
    let head = method == "HEAD";
    match route(if head { "GET" } else { method }, path, body) {
        Ok(route) => Parsed::Request {
            consumed,
            route,
            close,
            keep_alive,
            head,
        },
        Err(mut response) => {
            // A HEAD's error gets no body either: a client reads none,
            // and would take it for the next answer.
            response.close = close;
            response.keep_alive = keep_alive;
            response.head = head;
            Parsed::Answer { consumed, response }
        }
    }
}

fn route(method: &str, target: &str, body: &[u8]) -> Result<Route, Response> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    match path {
        "/item" => match method {
            "POST" => Ok(Route::Create(body.to_vec())),
            "GET" => list_query(query),
            _ => Err(Response::not_allowed("GET, HEAD, POST")),
        },
        "/health" | "/metrics" => match method {
            "GET" if path == "/health" => Ok(Route::Health),
            "GET" => Ok(Route::Metrics),
            _ => Err(Response::not_allowed("GET, HEAD")),
        },
        _ => {
            let Some(id) = path
                .strip_prefix("/item/")
                .and_then(|s| s.parse::<u64>().ok())
            else {
                return Err(Response::error(404, "no such route"));
            };
            match method {
                "GET" => Ok(Route::Get(id)),
                "DELETE" => Ok(Route::Delete(id)),
                _ => Err(Response::not_allowed("GET, HEAD, DELETE")),
            }
        }
    }
}

fn list_query(query: &str) -> Result<Route, Response> {
    let (mut after, mut limit) = (0, DEFAULT_LIMIT);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "after" => {
                after = v
                    .parse()
                    .map_err(|_| Response::field_error("after", "must be an item id"))?
            }
            "limit" => {
                limit = v
                    .parse()
                    .ok()
                    .filter(|l| (1..=MAX_LIMIT).contains(l))
                    .ok_or_else(|| Response::field_error("limit", "must be 1 to 1000"))?
            }
            _ => {}
        }
    }
    Ok(Route::List { after, limit })
}

/// A response, written out by [`Response::write_to`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The body (JSON, or Prometheus text for `/metrics`).
    pub body: Vec<u8>,
    /// The body's content type.
    pub content_type: &'static str,
    /// An `Allow` header (405).
    pub allow: Option<&'static str>,
    /// Whether to send `Retry-After: 1` (429, 503).
    pub retry_after: bool,
    /// Whether the connection closes after it.
    pub close: bool,
    /// Whether to send `Connection: keep-alive` (to an HTTP/1.0 client
    /// whose connection stays open; ignored with `close`).
    pub keep_alive: bool,
    /// The answer to a `HEAD`: the headers only (`Content-Length` still
    /// the body's, as the `GET` would send it).
    pub head: bool,
}

impl Response {
    /// A JSON response.
    pub fn json(status: u16, body: Vec<u8>) -> Self {
        Response {
            status,
            body,
            content_type: "application/json",
            allow: None,
            retry_after: false,
            close: false,
            keep_alive: false,
            head: false,
        }
    }

    /// `{"error": message}`.
    pub fn error(status: u16, message: &str) -> Self {
        Self::json(
            status,
            serde_json::json!({ "error": message })
                .to_string()
                .into_bytes(),
        )
    }

    /// 400 `{"error": message, "field": field}`.
    pub fn field_error(field: &str, message: &str) -> Self {
        Self::json(
            400,
            serde_json::json!({ "error": message, "field": field })
                .to_string()
                .into_bytes(),
        )
    }

    /// 405 with `Allow`.
    pub fn not_allowed(allow: &'static str) -> Self {
        Response {
            allow: Some(allow),
            ..Self::error(405, "method not allowed")
        }
    }

    /// 429 with `Retry-After: 1`: a write refused for load (expected to
    /// wait too long, or the ring is full).
    pub fn busy() -> Self {
        Response {
            retry_after: true,
            ..Self::error(429, "busy: retry")
        }
    }

    /// 503 with `Retry-After: 1`.
    pub fn unavailable(message: &str) -> Self {
        Response {
            retry_after: true,
            ..Self::error(503, message)
        }
    }

    /// Appends the response's bytes to `out`, with `date` (an IMF-fixdate,
    /// see [`Date`]) as its `Date` header. A 204 has no body and so no
    /// `Content-Type` or `Content-Length` (RFC 9110, 8.6).
    pub fn write_to(&self, out: &mut Vec<u8>, date: &str) {
        let _ = write!(
            out,
            "HTTP/1.1 {} {}\r\nDate: {date}\r\n",
            self.status,
            reason(self.status),
        );
        if self.status != 204 {
            let _ = write!(
                out,
                "Content-Type: {}\r\nContent-Length: {}\r\n",
                self.content_type,
                self.body.len()
            );
        }
        if let Some(allow) = self.allow {
            let _ = write!(out, "Allow: {allow}\r\n");
        }
        if self.retry_after {
            out.extend_from_slice(b"Retry-After: 1\r\n");
        }
        if self.close {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if self.keep_alive {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if self.status != 204 && !self.head {
            out.extend_from_slice(&self.body);
        }
    }
}

/// The `Date` header's value (RFC 9110, 6.6.1: an origin server with a
/// clock sends one in every 2xx, 3xx and 4xx response), formatted once a
/// second, not once a response.
#[derive(Debug, Default)]
pub struct Date {
    second: u64,
    text: String,
}

impl Date {
    /// Brings the text up to the current second; cheap when it is.
    pub fn refresh(&mut self) {
        let now = std::time::SystemTime::now();
        let second = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if second != self.second || self.text.is_empty() {
            self.second = second;
            self.text = httpdate::fmt_http_date(now);
        }
    }

    /// The text as of the last [`Date::refresh`] (empty before the first).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::decode_item;
    use proptest::prelude::*;

    #[test]
    fn responses_carry_a_date_and_a_204_no_length() {
        let mut date = Date::default();
        date.refresh();
        // An IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
        assert_eq!(date.as_str().len(), 29, "{}", date.as_str());
        assert!(date.as_str().ends_with(" GMT"));
        let mut out = Vec::new();
        Response::json(200, b"{}".to_vec()).write_to(&mut out, date.as_str());
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!(
                "HTTP/1.1 200 OK\r\nDate: {}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
                date.as_str()
            )
        );
        let mut out = Vec::new();
        Response::json(204, Vec::new()).write_to(&mut out, date.as_str());
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!("HTTP/1.1 204 No Content\r\nDate: {}\r\n\r\n", date.as_str())
        );
    }

    fn status_of(bytes: &[u8]) -> Option<u16> {
        match parse(bytes) {
            Parsed::Incomplete | Parsed::AwaitingBody { .. } => None,
            Parsed::Request { .. } => Some(0),
            Parsed::Answer { response, .. } | Parsed::Reject(response) => Some(response.status),
        }
    }

    #[test]
    fn routes() {
        let p = parse(b"POST /item HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}GET");
        assert_eq!(
            p,
            Parsed::Request {
                consumed: 44,
                route: Route::Create(b"{}".to_vec()),
                close: false,
                keep_alive: false,
                head: false,
            }
        );
        assert!(matches!(
            parse(b"HEAD /item/3 HTTP/1.1\r\n\r\n"),
            Parsed::Request {
                route: Route::Get(3),
                head: true,
                ..
            }
        ));
        assert_eq!(status_of(b"HEAD /item HTTP/1.1\r\n\r\n"), Some(0));
        assert_eq!(status_of(b"HEAD /item/3 HTTP/1.1\r\n\r\n"), Some(0));
        assert!(matches!(
            parse(b"GET /item?after=5&limit=7 HTTP/1.1\r\n\r\n"),
            Parsed::Request {
                route: Route::List { after: 5, limit: 7 },
                ..
            }
        ));
        assert!(matches!(
            parse(b"DELETE /item/9 HTTP/1.0\r\n\r\n"),
            Parsed::Request {
                route: Route::Delete(9),
                close: true,
                ..
            }
        ));
        assert_eq!(status_of(b"GET /nope HTTP/1.1\r\n\r\n"), Some(404));
        // A HEAD's error has no body: the next answer would start inside it.
        for bad in [&b"HEAD /nope"[..], b"HEAD /item?limit=0", b"HEAD /item/abc"] {
            let p = parse(&[bad, b" HTTP/1.1\r\n\r\n"].concat());
            assert!(
                matches!(&p, Parsed::Answer { response, .. } if response.head),
                "{p:?}"
            );
        }
        // A body announced with `Expect: 100-continue` is waited for,
        // saying so.
        assert_eq!(
            parse(b"POST /item HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"),
            Parsed::AwaitingBody {
                expects_continue: true
            }
        );
        assert_eq!(
            parse(b"POST /item HTTP/1.1\r\nContent-Length: 2\r\n\r\n{"),
            Parsed::AwaitingBody {
                expects_continue: false
            }
        );
        // `Connection` is a list of options.
        assert!(matches!(
            parse(b"GET /item/1 HTTP/1.1\r\nConnection: TE, close\r\n\r\n"),
            Parsed::Request { close: true, .. }
        ));
        assert!(matches!(
            parse(b"GET /item/1 HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
            Parsed::Request {
                close: false,
                keep_alive: true,
                ..
            }
        ));
        // HTTP/1.1 keeps the connection without saying so.
        assert!(matches!(
            parse(b"GET /item/1 HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"),
            Parsed::Request {
                close: false,
                keep_alive: false,
                ..
            }
        ));
        assert_eq!(status_of(b"PUT /item HTTP/1.1\r\n\r\n"), Some(405));
        assert_eq!(status_of(b"GET /item?limit=0 HTTP/1.1\r\n\r\n"), Some(400));
        assert_eq!(
            status_of(b"GET /item?limit=1001 HTTP/1.1\r\n\r\n"),
            Some(400)
        );
        assert_eq!(status_of(b"GARBAGE\r\n\r\n"), Some(400));
        assert_eq!(
            status_of(b"POST /item HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n"),
            Some(413)
        );
        // Content-Length: digits only, and one value however often sent.
        for bad in [
            &b"POST /item HTTP/1.1\r\nContent-Length: +2\r\n\r\n{}"[..],
            b"POST /item HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n{}",
            b"POST /item HTTP/1.1\r\nContent-Length: \r\n\r\n{}",
            b"POST /item HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}x",
        ] {
            let p = parse(bad);
            assert!(
                matches!(&p, Parsed::Reject(r) if r.status == 400),
                "{:?}: {p:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            status_of(b"POST /item HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"),
            Some(0)
        );
        let mut big = b"GET /item HTTP/1.1\r\nX: ".to_vec();
        big.resize(9000, b'a');
        assert_eq!(status_of(&big), Some(431));
        assert_eq!(status_of(b"GET /item HTTP/1.1\r\n"), None);
    }

    proptest! {
        /// Random bytes (and random bytes after a valid request line) never
        /// panic the parser or the body decoder: they wait for more, answer
        /// 4xx, or make a request whose body decodes or names its fault.
        #[test]
        fn random_bytes_never_panic(
            prefix in prop_oneof![Just(&b""[..]), Just(&b"POST /item HTTP/1.1\r\n"[..]), Just(&b"GET /item"[..])],
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            end in any::<bool>(),
        ) {
            let mut buf = prefix.to_vec();
            buf.extend_from_slice(&bytes);
            if end {
                buf.extend_from_slice(b"\r\n\r\n");
            }
            match parse(&buf) {
                Parsed::Incomplete => prop_assert!(buf.len() <= MAX_HEADER_BYTES),
                Parsed::AwaitingBody { .. } => {}
                Parsed::Answer { response, consumed } => {
                    prop_assert!((400..500).contains(&response.status));
                    prop_assert!(consumed <= buf.len());
                }
                Parsed::Reject(response) => prop_assert!((400..500).contains(&response.status)),
                Parsed::Request { route, consumed, .. } => {
                    prop_assert!(consumed <= buf.len());
                    if let Route::Create(body) = route {
                        if let Err(e) = decode_item(&body) {
                            prop_assert!(!e.message.is_empty());
                        }
                    }
                }
            }
        }

        #[test]
        fn random_json_bodies_decode_or_name_the_fault(
            name in prop_oneof![Just("\"n\"".to_string()), Just("1".to_string()), "[ -~]{0,8}"],
            price in prop_oneof![Just("2.5".to_string()), Just("\"x\"".to_string()), "[ -~]{0,8}"],
        ) {
            let body = format!("{{\"name\":{name},\"price\":{price}}}");
            let _ = decode_item(body.as_bytes());
        }
    }
}
