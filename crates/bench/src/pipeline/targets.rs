//! The targets of the pipeline benchmark, read off a finished [`Report`]: one line per
//! target with the figure measured and whether it was met.
//!
//! The report's own ratio column compares statepipe with each peer; the targets add
//! what it cannot show: laundry against the ideal as measured/ideal, the thread-ring
//! against an absolute bound, the message ring against the rate of Rust's pipes in Eric
//! Holk's "Rust Pipes Performance" (2012,
//! <http://theincredibleholk.wordpress.com/2012/07/10/rust-pipes-performance/>).
//!
//! [`OUR_TARGETS`] are bounds on cases with no peer to take a ratio against.

use std::fmt::Write as _;

use crate::report::{Report, ResultRow, OURS};

/// The message-ring rate of Rust's pipes in Holk's "Rust Pipes Performance", in M msg/s.
pub const PIPES_MESSAGE_RING: f64 = 4.39;

/// How far above the ideal a laundry layout may be (measured/ideal).
pub const LAUNDRY_SLACK: f64 = 1.05;
/// The most ns a thread-ring hop may take on one worker.
pub const THREAD_RING_NS: f64 = 40.0;

/// A case whose statepipe figure must reach at least the bound.
pub const OUR_TARGETS: [(&str, f64); 1] = [("fan-out/speed-up", 1.6)];

/// One line per target whose rows are in `report` (cases filtered out are skipped);
/// empty when none is.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::targets::summary;
/// use statepipe_bench::report::{HostSummary, Report};
/// let report = Report { bench: "pipeline".into(), host: HostSummary { cpus: 2, pingpong_ns: 125.0 }, results: vec![] };
/// assert!(summary(&report).is_empty());
/// ```
pub fn summary(report: &Report) -> String {
    let mut lines = Vec::new();
    let mut target = |what: String, figure: f64, bound: &str, met: bool| {
        lines.push(format!(
            "{what}: {figure:.3} (target {bound}): {}",
            if met { "met" } else { "MISSED" }
        ));
    };
    for layout in ["sequential", "pipelined", "shard2", "shard3"] {
        let case = format!("laundry/{layout}");
        if let (Some(ours), Some(ideal)) = (row(report, &case, OURS), row(report, &case, "ideal")) {
            let r = ours.median / ideal.median;
            target(
                format!(
                    "{case} measured/ideal ({:.3} s / {:.3} s)",
                    ours.median, ideal.median
                ),
                r,
                &format!("<= {LAUNDRY_SLACK}"),
                r <= LAUNDRY_SLACK,
            );
        }
    }
    for (who, ours) in ours_rows(report, "thread-ring/503") {
        target(
            format!("thread-ring/503 {who} ns/hop"),
            ours.median,
            &format!("<= {THREAD_RING_NS}"),
            ours.median <= THREAD_RING_NS,
        );
    }
    if let Some(ours) = row(report, "message-ring", OURS) {
        let ratio = ours.median / PIPES_MESSAGE_RING;
        target(
            format!("message-ring x Holk's pipes ({PIPES_MESSAGE_RING} M msg/s)"),
            ratio,
            ">= 20",
            ratio >= 20.0,
        );
    }
    let ratios = [
        ("message-ring", "crossbeam-threads", 3.0),
        ("trivial3", "crossbeam-threads", 5.0),
        ("logger/3p", "tracing-appender", 1.5),
        ("logger/10p", "tracing-appender", 1.5),
    ];
    for (case, peer, bound) in ratios {
        let Some(peer_row) = row(report, case, peer) else {
            continue;
        };
        for (who, ours) in ours_rows(report, case) {
            // Throughputs: how many times faster ours is.
            let r = ours.median / peer_row.median;
            target(
                format!("{case} {who}/{peer}"),
                r,
                &format!(">= {bound}"),
                r >= bound,
            );
        }
    }
    for (case, bound) in [("scaling/speed-up", 1.8), ("sizing/ratio", 2.0)] {
        if let Some(ours) = row(report, case, OURS) {
            target(
                format!("{case} statepipe {}", ours.unit),
                ours.median,
                &format!(">= {bound}"),
                ours.median >= bound,
            );
        }
    }
    for (case, bound) in OUR_TARGETS {
        if let Some(ours) = row(report, case, OURS) {
            target(
                format!("{case} statepipe {}", ours.unit),
                ours.median,
                &format!(">= {bound}"),
                ours.median >= bound,
            );
        }
    }
    let remote = super::remote::targets(report);
    for (what, figure, bound, met) in super::checkpoint::targets(report).into_iter().chain(remote) {
        target(what, figure, &bound, met);
    }
    let mut out = String::new();
    for line in lines {
        let _ = writeln!(out, "target: {line}");
    }
    out
}

/// Every statepipe row of `case`, the first labelled `statepipe`, the others with their
/// config too (a case may measure ours in more than one way).
fn ours_rows<'r>(report: &'r Report, case: &str) -> Vec<(String, &'r ResultRow)> {
    report
        .results
        .iter()
        .filter(|r| r.case == case && r.imp == OURS)
        .enumerate()
        .map(|(i, r)| {
            let who = if i == 0 {
                OURS.to_string()
            } else {
                format!("{OURS} [{}]", r.config)
            };
            (who, r)
        })
        .collect()
}

/// The first row of `case` by `imp`.
fn row<'r>(report: &'r Report, case: &str, imp: &str) -> Option<&'r ResultRow> {
    report
        .results
        .iter()
        .find(|r| r.case == case && r.imp == imp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::HostSummary;

    fn row(case: &str, imp: &str, unit: &str, hib: bool, median: f64) -> ResultRow {
        ResultRow {
            case: case.into(),
            imp: imp.into(),
            config: String::new(),
            unit: unit.into(),
            higher_is_better: hib,
            median,
            min: median,
            max: median,
            samples: 1,
        }
    }

    #[test]
    fn targets_read_the_rows() {
        let report = Report {
            bench: "pipeline".into(),
            host: HostSummary {
                cpus: 2,
                pingpong_ns: 100.0,
            },
            results: vec![
                row("laundry/pipelined", OURS, "s", false, 1.64),
                row("laundry/pipelined", "ideal", "s", false, 1.6),
                row("thread-ring/503", OURS, "ns/hop", false, 50.0),
                row("trivial3", OURS, "M items/s", true, 60.0),
                ResultRow {
                    config: "deploy_with".into(),
                    ..row("trivial3", OURS, "M items/s", true, 20.0)
                },
                row("trivial3", "crossbeam-threads", "M items/s", true, 10.0),
                row("scaling/speed-up", OURS, "x (2w/1w)", true, 1.9),
                row("fan-out/speed-up", OURS, "x (2w/1w)", true, 1.5),
            ],
        };
        let text = summary(&report);
        assert_eq!(text.lines().count(), 6, "{text}");
        assert!(
            text.contains(
                "laundry/pipelined measured/ideal (1.640 s / 1.600 s): 1.025 (target <= 1.05): met"
            ),
            "{text}"
        );
        assert!(
            text.contains("ns/hop: 50.000 (target <= 40): MISSED"),
            "{text}"
        );
        assert!(
            text.contains("trivial3 statepipe/crossbeam-threads: 6.000 (target >= 5): met"),
            "{text}"
        );
        assert!(
            text.contains(
                "trivial3 statepipe [deploy_with]/crossbeam-threads: 2.000 (target >= 5): MISSED"
            ),
            "{text}"
        );
        assert!(
            text.contains("speed-up statepipe x (2w/1w): 1.900"),
            "{text}"
        );
        assert!(
            text.contains("fan-out/speed-up statepipe x (2w/1w): 1.500 (target >= 1.6): MISSED"),
            "{text}"
        );
    }
}
