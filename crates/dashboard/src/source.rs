//! What a dashboard shows: a source of snapshots and metrics.

/// Which page draws a source's snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The evolve engine's master.
    Evolve,
    /// A pipeline: one process, or a distributed run's coordinator.
    Pipeline,
    /// The HTTP service.
    Service,
}

impl Kind {
    /// The name the snapshot's `kind` field carries.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Evolve => "evolve",
            Kind::Pipeline => "pipeline",
            Kind::Service => "service",
        }
    }
}

/// What a running process shows on its dashboard.
///
/// Both methods are called from the dashboard's own threads, a few times a
/// second at most; they must only read (counters, bounded buffers) and
/// never wait for the run.
pub trait Source: Send + Sync + 'static {
    /// Which page draws it.
    fn kind(&self) -> Kind;
    /// A line naming the run (the page's title).
    fn title(&self) -> String;
    /// The page's data now: the `data` field of the snapshot (the crate's
    /// README gives its fields for each kind).
    fn snapshot(&self) -> serde_json::Value;
    /// The Prometheus text exposition now.
    fn metrics(&self) -> String;
}
