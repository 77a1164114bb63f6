//! `/metrics` of a distributed pipeline's process (`--metrics ADDR`):
//! its cut edges' counters and the run's checkpoints and restores, in
//! Prometheus' text format (`prometheus-client`), read at each scrape.

use std::io::{Read, Write};
use std::net::TcpListener;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use statepipe_pipeline::remote::RemoteMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Edge {
    edge: String,
}

/// The metrics now, as Prometheus text.
pub fn render(m: &RemoteMetrics) -> String {
    let mut r = Registry::with_prefix("statepipe_remote");
    let items = Family::<Edge, Counter>::default();
    let bytes = Family::<Edge, Counter>::default();
    let frames = Family::<Edge, Counter>::default();
    let stalls = Family::<Edge, Counter>::default();
    let credits = Family::<Edge, Gauge>::default();
    for e in m.edges() {
        let l = Edge {
            edge: e.name.clone(),
        };
        items.get_or_create(&l).inc_by(e.items);
        bytes.get_or_create(&l).inc_by(e.bytes);
        frames.get_or_create(&l).inc_by(e.frames);
        stalls.get_or_create(&l).inc_by(e.stalls);
        credits.get_or_create(&l).set(e.credits as i64);
    }
    r.register("edge_items", "Items that crossed a cut edge", items);
    r.register(
        "edge_bytes",
        "Bytes of item frames that crossed a cut edge",
        bytes,
    );
    r.register("edge_frames", "Frames that crossed a cut edge", frames);
    r.register(
        "edge_stalls",
        "Times a cut edge's sender waited for credits",
        stalls,
    );
    r.register(
        "edge_credits",
        "Credits granted and not yet used: the items a cut edge may still carry (its queue's room)",
        credits,
    );
    let checkpoints = Counter::<u64>::default();
    checkpoints.inc_by(m.checkpoints());
    r.register(
        "checkpoints",
        "Checkpoints committed by every part",
        checkpoints,
    );
    let skipped = Counter::<u64>::default();
    skipped.inc_by(m.skipped_checkpoints());
    r.register(
        "skipped_checkpoints",
        "Checkpoints that could not be written (a part's copy or the commit) and were skipped",
        skipped,
    );
    let restores = Counter::<u64>::default();
    restores.inc_by(m.restores());
    r.register(
        "restores",
        "Restores from a checkpoint after a loss",
        restores,
    );
    let last = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    last.set(m.last_checkpoint_seconds());
    r.register(
        "checkpoint_seconds",
        "From the last committed checkpoint's barrier to its commit",
        last,
    );
    let done = Counter::<u64>::default();
    done.inc_by(m.parts_done());
    r.register("parts_done", "Parts this process ran to their end", done);
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
    out
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
