//! The deployed graph as the compile walk records it: its stations and
//! edges, which metrics read and draw.

use std::sync::Arc;

use super::edge::DepthProbe;
use super::station::StationCounters;

/// A node id in the deployed graph: a unit, or the pipeline's input/output.
pub(crate) const INPUT: usize = usize::MAX;
pub(crate) const OUTPUT: usize = usize::MAX - 1;

/// Where a ring edge of the deployed graph runs, for metrics and drawing.
pub(crate) struct EdgeInfo {
    pub(crate) from: usize,
    pub(crate) to: usize,
    /// How many messages wait on the edge's ring, if it is one.
    pub(crate) depth: Option<DepthProbe>,
}

/// One station, for metrics.
pub(crate) struct StationInfo {
    pub(crate) units: Vec<usize>,
    pub(crate) counters: Arc<StationCounters>,
    pub(crate) depth: DepthProbe,
    /// The slots of its input ring(s), which `depth` fills (0: no ring).
    pub(crate) capacity: u64,
}
