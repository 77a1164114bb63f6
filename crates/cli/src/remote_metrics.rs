//! `/metrics` of a distributed pipeline's process (`--metrics ADDR`):
//! its cut edges' counters and the run's checkpoints and restores, in
//! Prometheus' text format (`prometheus-client`), read at each scrape.

use std::io::{Read, Write};
use std::net::TcpListener;

use statepipe_dashboard::{PipelineSource, Source};
use statepipe_pipeline::remote::RemoteMetrics;

/// The metrics now, as Prometheus text: the dashboard's rendering of a
/// distributed run (`statepipe_remote_*`), so `--metrics` and a
/// dashboard's `/metrics` show the same.
pub fn render(m: &RemoteMetrics) -> String {
    PipelineSource::remote(m.clone(), "").metrics()
}

/// Serves `GET /metrics` on `addr` from a thread of its own; anything
/// else gets 404, a request that does not parse 400.
pub fn serve(addr: &str, metrics: RemoteMetrics) -> anyhow::Result<()> {
    let l = TcpListener::bind(addr).map_err(|e| anyhow::anyhow!("--metrics {addr}: {e}"))?;
    eprintln!("metrics: http://{}/metrics", l.local_addr()?);
    std::thread::Builder::new()
        .name("metrics".into())
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
                        if req.method == Some("GET") && req.path == Some("/metrics") =>
                    {
                        ("200 OK", render(&metrics))
                    }
                    Ok(httparse::Status::Complete(_)) => ("404 Not Found", "GET /metrics\n".into()),
                    _ => ("400 Bad Request", "a malformed request\n".into()),
                };
                let _ = write!(
                    s,
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        })?;
    Ok(())
}
