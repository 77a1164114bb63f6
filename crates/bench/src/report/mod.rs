//! What a benchmark run produces: the JSON document shared by every `statepipe bench`
//! subcommand, the console [`table`] and the [`svg`] chart of the ratios.
//!
//! The JSON shape:
//!
//! ```json
//! {"bench": "ring", "host": {"cpus": 2, "pingpong_ns": 125.0},
//!  "results": [{"case": "1p1c/single", "impl": "statepipe", "config": "wait=adaptive",
//!               "unit": "Mev/s", "higher_is_better": true,
//!               "median": 512.0, "min": 480.0, "max": 530.0, "samples": 5}]}
//! ```
//!
//! **Ratios.** In each case, *ours* is the first row whose impl is `statepipe` (groups
//! list our default configuration first). Every other row of the case gets the ratio
//! "how many times better ours is": `ours / row` for a throughput, `row / ours` for a
//! latency. Above 1.0, statepipe wins.

pub mod markdown;
pub mod svg;
pub mod table;

use serde::{Deserialize, Serialize};

use crate::host::Host;
use crate::metric::Metric;
use crate::stats::Summary;

/// The implementation name that marks our rows.
pub const OURS: &str = "statepipe";

/// A whole run, as written by `--json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The subcommand: `ring`, later `pipeline`, `cluster`.
    pub bench: String,
    /// The host's state when the run started.
    pub host: HostSummary,
    /// One row per case and contender.
    pub results: Vec<ResultRow>,
}

/// The host's state in a [`Report`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSummary {
    /// CPUs the process could use.
    pub cpus: usize,
    /// Median cross-core round trip, in nanoseconds.
    pub pingpong_ns: f64,
}

impl From<&Host> for HostSummary {
    fn from(host: &Host) -> Self {
        HostSummary {
            cpus: host.cpu_count,
            pingpong_ns: host.pingpong_ns,
        }
    }
}

/// One contender's figures on one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultRow {
    /// The case, e.g. `1p1c/single`.
    pub case: String,
    /// The implementation, e.g. `statepipe`.
    #[serde(rename = "impl")]
    pub imp: String,
    /// Its configuration, e.g. `wait=adaptive`.
    pub config: String,
    /// The unit of median, min and max.
    pub unit: String,
    /// Whether larger is better.
    pub higher_is_better: bool,
    /// Median over the samples.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub samples: usize,
}

impl ResultRow {
    /// The row of `metric` for one contender.
    pub fn new(metric: &Metric, imp: &str, config: &str, summary: Summary) -> Self {
        ResultRow {
            case: metric.case.clone(),
            imp: imp.to_string(),
            config: config.to_string(),
            unit: metric.unit.clone(),
            higher_is_better: metric.higher_is_better,
            median: summary.median,
            min: summary.min,
            max: summary.max,
            samples: summary.samples,
        }
    }
}

/// How ours compares with one other row of the same case.
#[derive(Debug, Clone, PartialEq)]
pub struct Ratio {
    /// The case.
    pub case: String,
    /// The other row's implementation.
    pub imp: String,
    /// The other row's configuration.
    pub config: String,
    /// How many times better ours is (see the module docs); infinite when the other row
    /// measured zero throughput.
    pub ratio: f64,
}

impl Report {
    /// The report of a run of `bench` on `host`.
    pub fn new(bench: impl Into<String>, host: &Host, results: Vec<ResultRow>) -> Self {
        Report {
            bench: bench.into(),
            host: host.into(),
            results,
        }
    }

    /// The cases in order of first appearance.
    pub fn cases(&self) -> Vec<&str> {
        let mut cases: Vec<&str> = Vec::new();
        for row in &self.results {
            if !cases.contains(&row.case.as_str()) {
                cases.push(&row.case);
            }
        }
        cases
    }

    /// Our row of `case`: its first row with impl [`OURS`].
    pub fn ours(&self, case: &str) -> Option<&ResultRow> {
        self.results
            .iter()
            .find(|r| r.case == case && r.imp == OURS)
    }

    /// The ratio of ours to `row` (see the module docs); `None` for our own row, or
    /// when the case has no row of ours.
    pub fn ratio_of(&self, row: &ResultRow) -> Option<f64> {
        let ours = self.ours(&row.case)?;
        if std::ptr::eq(ours, row) {
            return None;
        }
        let (better, worse) = if row.higher_is_better {
            (ours.median, row.median)
        } else {
            (row.median, ours.median)
        };
        Some(if worse > 0.0 {
            better / worse
        } else {
            f64::INFINITY
        })
    }

    /// Every ratio, case by case, in row order.
    pub fn ratios(&self) -> Vec<Ratio> {
        self.results
            .iter()
            .filter_map(|row| {
                self.ratio_of(row).map(|ratio| Ratio {
                    case: row.case.clone(),
                    imp: row.imp.clone(),
                    config: row.config.clone(),
                    ratio,
                })
            })
            .collect()
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises")
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample_report() -> Report {
        let row = |case: &str, imp: &str, hib: bool, median: f64| ResultRow {
            case: case.into(),
            imp: imp.into(),
            config: "c".into(),
            unit: if hib { "Mev/s" } else { "ns" }.into(),
            higher_is_better: hib,
            median,
            min: median / 2.0,
            max: median * 2.0,
            samples: 5,
        };
        Report {
            bench: "ring".into(),
            host: HostSummary {
                cpus: 2,
                pingpong_ns: 125.0,
            },
            results: vec![
                row("1p1c/single", OURS, true, 500.0),
                row("1p1c/single", "rtrb", true, 250.0),
                row("latency/p50", OURS, false, 50.0),
                row("latency/p50", "disruptor", false, 100.0),
                row("latency/p50", "crossbeam", false, 25.0),
            ],
        }
    }

    #[test]
    fn ratios_say_how_much_better_ours_is() {
        let report = sample_report();
        let ratios: Vec<(String, f64)> = report
            .ratios()
            .into_iter()
            .map(|r| (r.imp, r.ratio))
            .collect();
        assert_eq!(
            ratios,
            [
                ("rtrb".to_string(), 2.0),
                ("disruptor".to_string(), 2.0),
                ("crossbeam".to_string(), 0.5)
            ]
        );
        assert_eq!(report.cases(), ["1p1c/single", "latency/p50"]);
    }

    #[test]
    fn json_has_the_shared_shape() {
        let json: serde_json::Value = serde_json::from_str(&sample_report().to_json()).unwrap();
        assert_eq!(json["bench"], "ring");
        assert_eq!(json["host"]["cpus"], 2);
        assert_eq!(json["host"]["pingpong_ns"], 125.0);
        let first = &json["results"][0];
        for key in [
            "case",
            "impl",
            "config",
            "unit",
            "higher_is_better",
            "median",
            "min",
            "max",
            "samples",
        ] {
            assert!(!first[key].is_null(), "missing {key}");
        }
        assert_eq!(first.as_object().unwrap().len(), 9);
        let back: Report = serde_json::from_value(json).unwrap();
        assert_eq!(back, sample_report());
    }
}
