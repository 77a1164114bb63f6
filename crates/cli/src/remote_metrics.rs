//! `/metrics` of a distributed pipeline's process (`--metrics ADDR`):
//! its cut edges' counters and the run's checkpoints and restores, in
//! Prometheus' text format (`prometheus-client`), read at each scrape.

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
    crate::one_route::serve(
        "--metrics",
        addr,
        "/metrics",
        "text/plain; version=0.0.4",
        move || ("200 OK", render(&metrics)),
    )
}
