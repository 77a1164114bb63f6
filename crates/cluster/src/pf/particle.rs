//! What a particle's step takes and gives: the filter's input and output
//! types, shared by the filter and its work between steps.

use serde::{Deserialize, Serialize};

/// One particle's step: which observation, and how many children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfInput {
    /// The observation the children are weighed by.
    pub t: u32,
    /// How many children resampling gave the particle.
    pub children: u32,
}

/// A child's log-weight and summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PfOutput {
    /// Log density of observation `t` given the child.
    pub log_w: f64,
    /// [`SsModel::summary`](super::SsModel::summary) of the child.
    pub summary: f64,
}
