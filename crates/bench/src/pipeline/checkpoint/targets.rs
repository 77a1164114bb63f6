//! The cases' targets, read from a report.

use super::base::*;
use crate::report::{Report, ResultRow, OURS};

/// Our rows of `case`, in contender order.
pub(super) fn ours_in<'r>(report: &'r Report, case: &str) -> Vec<&'r ResultRow> {
    report
        .results
        .iter()
        .filter(|r| r.case == case && r.imp == OURS)
        .collect()
}

/// A row's contender label: its config up to the first `;`.
pub(super) fn label_of(row: &ResultRow) -> &str {
    row.config.split(';').next().unwrap_or("")
}

pub(super) fn find<'r>(report: &'r Report, case: &str, label: &str) -> Option<&'r ResultRow> {
    report
        .results
        .iter()
        .find(|r| r.case == case && r.imp == OURS && r.config.starts_with(label))
}

/// One line per checkpoint target whose rows are in `report`: what, the figure, the
/// bound, and whether it is met.
pub fn targets(report: &Report) -> Vec<(String, f64, String, bool)> {
    let mut out = Vec::new();
    // Rows by position: the contenders are [none, periods[0], periods[1]] (1 s and
    // 100 ms in a full run), the stall and ratio cases' [periods[0], periods[1]].
    let case = throughput_case("1MiB");
    let rates = ours_in(report, &case);
    let paired = ours_in(report, &vs_none_case("1MiB"));
    let bounds = [EVERY_1S_RATIO, EVERY_100MS_RATIO];
    if let ([none, with @ ..], true) = (rates.as_slice(), paired.len() == 2) {
        for ((row, paired), bound) in with.iter().zip(&paired).zip(bounds) {
            let label = label_of(row);
            out.push((
                format!(
                    "{case} {label} / {NONE}, median of the rounds' ratios ({:.3}..{:.3}; \
                     medians {:.2} / {:.2} M items/s = {:.3})",
                    paired.min,
                    paired.max,
                    row.median,
                    none.median,
                    row.median / none.median.max(1e-12)
                ),
                paired.median,
                format!(">= {bound}"),
                paired.median >= bound,
            ));
        }
    }
    let case = stall_case("1MiB");
    for row in ours_in(report, &case) {
        out.push((
            format!(
                "{case} {}, ms (median of the runs' longest; largest {:.3} ms)",
                label_of(row),
                row.max / 1e3
            ),
            row.median / 1e3,
            format!("<= {}", STALL_US / 1e3),
            row.median <= STALL_US,
        ));
    }
    let case = UPGRADE_CASES[1];
    if let (Some(none), Some(up)) = (find(report, case, NO_UPGRADE), find(report, case, UPGRADE)) {
        let added = up.median - none.median;
        out.push((
            format!(
                "{case} added by the upgrade, ms ({:.3} - {:.3} ms)",
                up.median / 1e3,
                none.median / 1e3
            ),
            added / 1e3,
            format!("<= {}", UPGRADE_P99_US / 1e3),
            added <= UPGRADE_P99_US,
        ));
    }
    if let Some(row) = report.results.iter().find(|r| r.case == RESTORE_CASES[0]) {
        out.push((
            format!("{} s", RESTORE_CASES[0]),
            row.median,
            format!("<= {RESTORE_S}"),
            row.median <= RESTORE_S,
        ));
    }
    out
}
