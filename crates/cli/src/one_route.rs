//! A plain HTTP/1.1 endpoint of one `GET` route on a thread of its own,
//! one request per connection: what `--health` and `--metrics` serve.

use std::io::{Read, Write};
use std::net::TcpListener;

/// Binds `addr` (`flag` names the option in the error) and answers
/// `GET path` with `answer()`'s status and body as `content_type`;
/// another path gets 404, a request that does not parse 400. Prints the
/// URL on stderr.
pub fn serve(
    flag: &str,
    addr: &str,
    path: &'static str,
    content_type: &'static str,
    answer: impl Fn() -> (&'static str, String) + Send + 'static,
) -> anyhow::Result<()> {
    let l = TcpListener::bind(addr).map_err(|e| {
        anyhow::anyhow!("{flag} {addr}: {e} (give a free HOST:PORT, or port 0 for any)")
    })?;
    eprintln!("{}: http://{}{path}", &flag[2..], l.local_addr()?);
    std::thread::Builder::new()
        .name(flag[2..].to_string())
        .spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let Ok(n) = s.read(&mut buf) else { continue };
                let mut headers = [httparse::EMPTY_HEADER; 32];
                let mut req = httparse::Request::new(&mut headers);
                let (status, body) = match req.parse(&buf[..n]) {
                    Ok(httparse::Status::Complete(_))
                        if req.method == Some("GET") && req.path == Some(path) =>
                    {
                        answer()
                    }
                    Ok(httparse::Status::Complete(_)) => ("404 Not Found", format!("GET {path}\n")),
                    _ => ("400 Bad Request", "a malformed request\n".into()),
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        })?;
    Ok(())
}
