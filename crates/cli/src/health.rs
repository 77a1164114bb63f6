//! `statepipe worker --health ADDR` and `statepipe member --health ADDR`:
//! `GET /health` for a readiness probe (Kubernetes' `httpGet`). 200 while
//! the process is admitted and not leaving (a worker joined and set up, so
//! the master may give it states; a member accepted by its coordinator, so
//! it may be given parts), 503 before that, once it asked to leave
//! (SIGTERM) and after it stopped serving.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Serves `GET /health` on `addr` from a thread of its own, ready while
/// `ready` is set and `leave` is not; anything else gets 404, a request
/// that does not parse 400.
pub fn serve(addr: &str, ready: Arc<AtomicBool>, leave: Arc<AtomicBool>) -> anyhow::Result<()> {
    let l = TcpListener::bind(addr).map_err(|e| {
        anyhow::anyhow!("--health {addr}: {e} (give a free HOST:PORT, or port 0 for any)")
    })?;
    eprintln!("health: http://{}/health", l.local_addr()?);
    std::thread::Builder::new()
        .name("health".into())
        .spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                let Ok(n) = s.read(&mut buf) else { continue };
                let mut headers = [httparse::EMPTY_HEADER; 32];
                let mut req = httparse::Request::new(&mut headers);
                // Relaxed: flags set by the worker or member and its
                // SIGTERM handler; a probe a moment late is no matter.
                let up = ready.load(Ordering::Relaxed) && !leave.load(Ordering::Relaxed);
                let (status, body) = match req.parse(&buf[..n]) {
                    Ok(httparse::Status::Complete(_))
                        if req.method == Some("GET") && req.path == Some("/health") =>
                    {
                        if up {
                            ("200 OK", "ready\n")
                        } else {
                            ("503 Service Unavailable", "not ready\n")
                        }
                    }
                    Ok(httparse::Status::Complete(_)) => ("404 Not Found", "GET /health\n"),
                    _ => ("400 Bad Request", "a malformed request\n"),
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        })?;
    Ok(())
}
