//! The markdown table of a run: the console [`table`](super::table)'s rows as a GitHub /
//! mdBook table, for the book's pages (`statepipe bench report` writes one per run).

use std::fmt::Write as _;

use super::table::{format_ratio, format_value};
use super::{Report, OURS};

/// The table of `report`: one row per case and contender, numbers right-aligned, the
/// ratio ours/this in the last column (`(ours)` on our row, `-` where a case has no row
/// of ours). Cells are escaped so that a `|` in a config cannot split a row.
///
/// # Examples
///
/// ```
/// use statepipe_bench::report::{markdown, HostSummary, Report};
/// let report = Report { bench: "ring".into(), host: HostSummary { cpus: 2, pingpong_ns: 125.0 }, results: vec![] };
/// assert!(markdown::render(&report).starts_with("| case |"));
/// ```
pub fn render(report: &Report) -> String {
    let mut out = String::from(
        "| case | impl | config | median | min | max | unit | ours/this |\n\
         |---|---|---|---:|---:|---:|---|---:|\n",
    );
    for row in &report.results {
        let ratio = match report.ratio_of(row) {
            Some(r) => format_ratio(r),
            None if row.imp == OURS => "(ours)".to_string(),
            None => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&row.case),
            cell(&row.imp),
            cell(&row.config),
            format_value(row.median),
            format_value(row.min),
            format_value(row.max),
            cell(&row.unit),
            ratio
        );
    }
    out
}

/// A table cell: `|`, `<`, `>` and `&` escaped (a peer's name such as
/// `Mutex<HashMap>` is text, not an HTML tag), line breaks and surrounding
/// spaces gone.
fn cell(text: &str) -> String {
    text.trim()
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_report;

    #[test]
    fn rows_carry_ratios_and_escape_pipes() {
        let mut report = sample_report();
        report.results[1].config = "a|b".into();
        let text = render(&report);
        assert!(
            text.contains("| 1p1c/single | rtrb | a\\|b | 250.0 | 125.0 | 500.0 | Mev/s | 2.00x |"),
            "{text}"
        );
        assert!(text.contains("(ours)"), "{text}");
        assert_eq!(text.lines().count(), 2 + report.results.len());
    }

    #[test]
    fn angle_brackets_are_text_not_tags() {
        assert_eq!(
            cell(" Mutex<HashMap> & co "),
            "Mutex&lt;HashMap&gt; &amp; co"
        );
    }
}
