//! [`Metric`]: what a figure measures, shared by the harness that takes
//! samples and the report that shows them (both depend on it, it on
//! neither).

/// One figure a group reports per contender, e.g. `1p1c/single` in `Mev/s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metric {
    /// The case name in the report, e.g. `1p1c/single` or `latency/p99`.
    pub case: String,
    /// The unit of the values, e.g. `Mev/s` or `ns`.
    pub unit: String,
    /// Whether a larger value is better (throughput) or worse (latency).
    pub higher_is_better: bool,
}

impl Metric {
    /// A metric of `case` in `unit`.
    pub fn new(case: impl Into<String>, unit: &str, higher_is_better: bool) -> Metric {
        Metric {
            case: case.into(),
            unit: unit.into(),
            higher_is_better,
        }
    }

    /// A throughput in millions of events per second.
    pub fn throughput(case: impl Into<String>) -> Metric {
        Metric {
            case: case.into(),
            unit: "Mev/s".into(),
            higher_is_better: true,
        }
    }

    /// A latency in nanoseconds.
    pub fn latency_ns(case: impl Into<String>) -> Metric {
        Metric {
            case: case.into(),
            unit: "ns".into(),
            higher_is_better: false,
        }
    }
}
