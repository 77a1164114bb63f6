//! The service's page: a source over `statepipe serve`'s
//! [`Metrics`](statepipe_serve::Metrics).

use std::sync::Arc;

use serde_json::{json, Map, Value};
use statepipe_serve::{Metrics, ServiceSummary};

use crate::source::{Kind, Source};

/// The HTTP service, as its dashboard shows it: the snapshot is the
/// README's `service` object, made from [`Metrics::summary`]; the metrics
/// are the service's own `/metrics` text ([`Metrics::encode`]).
///
/// Its snapshots take the service's latency histograms since the previous
/// snapshot (they are interval histograms, emptied on each read): give the
/// service's metrics to one `ServiceSource`, and let nothing else call
/// [`Metrics::summary`] on them.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use statepipe_dashboard::{ServiceSource, Source};
///
/// // With a server: `ServiceSource::new(server.metrics(), title)`, before `server.run()`.
/// let source = ServiceSource::new(Arc::new(statepipe_serve::Metrics::new()), "serve: 127.0.0.1:8080");
/// let s = source.snapshot();
/// assert_eq!(s["latency"]["count"], 0);
/// assert_eq!(s["refusals"]["ring_full"], 0);
/// assert!(source.metrics().contains("statepipe_serve_ring_published_total 0"));
/// ```
#[derive(Debug, Clone)]
pub struct ServiceSource {
    metrics: Arc<Metrics>,
    title: String,
}

impl ServiceSource {
    /// A source over a server's metrics
    /// ([`Server::metrics`](statepipe_serve::Server::metrics)), its page
    /// titled `title`.
    pub fn new(metrics: Arc<Metrics>, title: impl Into<String>) -> Self {
        ServiceSource {
            metrics,
            title: title.into(),
        }
    }
}

/// The README's `service` object.
fn to_json(s: &ServiceSummary) -> Value {
    let requests: Vec<Value> = s
        .requests
        .iter()
        .map(|r| json!({"route": r.route, "status": r.status, "count": r.count}))
        .collect();
    let refusals: Map<String, Value> = s
        .refusals
        .iter()
        .map(|(cause, n)| (cause.to_string(), json!(n)))
        .collect();
    json!({
        "requests": requests,
        "refusals": refusals,
        "latency": {
            "window_s": s.latency.window.as_secs_f64(),
            "count": s.latency.count,
            "p50_s": s.latency.p50.as_secs_f64(),
            "p99_s": s.latency.p99.as_secs_f64(),
        },
        "journal": {"fsyncs": s.journal_fsyncs, "events": s.journal_events},
        "connections": s.connections,
        "ring_depth": s.ring_depth,
        "published": s.published,
    })
}

impl Source for ServiceSource {
    fn kind(&self) -> Kind {
        Kind::Service
    }

    fn title(&self) -> String {
        self.title.clone()
    }

    fn snapshot(&self) -> Value {
        to_json(&self.metrics.summary())
    }

    fn metrics(&self) -> String {
        self.metrics.encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn a_snapshot_has_the_readmes_fields() {
        let source = ServiceSource::new(Arc::new(Metrics::new()), "serve");
        assert_eq!(source.kind(), Kind::Service);
        assert_eq!(source.title(), "serve");
        let s = source.snapshot();
        assert_eq!(
            keys(&s),
            [
                "connections",
                "journal",
                "latency",
                "published",
                "refusals",
                "requests",
                "ring_depth"
            ]
        );
        assert_eq!(
            keys(&s["refusals"]),
            ["connections", "queue_delay", "ring_full"]
        );
        assert_eq!(keys(&s["latency"]), ["count", "p50_s", "p99_s", "window_s"]);
        assert_eq!(keys(&s["journal"]), ["events", "fsyncs"]);
        assert!(s["requests"].as_array().unwrap().is_empty());
    }
}
