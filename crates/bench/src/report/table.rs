//! The console table: one line per case and contender, with the ratio ours/peer.

use std::fmt::Write as _;

use super::Report;

/// Formats a measured value with as many decimals as its size deserves.
pub fn format_value(value: f64) -> String {
    let magnitude = value.abs();
    if !value.is_finite() {
        value.to_string()
    } else if magnitude >= 10_000.0 {
        format!("{value:.0}")
    } else if magnitude >= 1.0 || magnitude == 0.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

/// Formats a ratio as `2.31x`, `23.1x` or `231x`.
pub fn format_ratio(ratio: f64) -> String {
    if !ratio.is_finite() {
        "inf".to_string()
    } else if ratio >= 100.0 {
        format!("{ratio:.0}x")
    } else if ratio >= 10.0 {
        format!("{ratio:.1}x")
    } else {
        format!("{ratio:.2}x")
    }
}

/// The table of `report`, cases separated by blank lines, with a legend.
///
/// # Examples
///
/// ```
/// use statepipe_bench::report::{table, HostSummary, Report};
/// let report = Report { bench: "ring".into(), host: HostSummary { cpus: 2, pingpong_ns: 125.0 }, results: vec![] };
/// assert!(table::render(&report).contains("median"));
/// ```
pub fn render(report: &Report) -> String {
    const HEAD: [&str; 8] = [
        "case",
        "impl",
        "config",
        "median",
        "min",
        "max",
        "unit",
        "ours/this",
    ];
    let mut lines: Vec<(bool, [String; 8])> = Vec::new();
    let mut previous_case: Option<&str> = None;
    for row in &report.results {
        let first_of_case = previous_case != Some(row.case.as_str());
        previous_case = Some(&row.case);
        let ratio = match report.ratio_of(row) {
            Some(r) => format_ratio(r),
            None if row.imp == super::OURS => "(ours)".to_string(),
            None => "-".to_string(),
        };
        lines.push((
            first_of_case,
            [
                row.case.clone(),
                row.imp.clone(),
                row.config.clone(),
                format_value(row.median),
                format_value(row.min),
                format_value(row.max),
                row.unit.clone(),
                ratio,
            ],
        ));
    }
    let mut width = HEAD.map(str::len);
    for (_, cells) in &lines {
        for (w, cell) in width.iter_mut().zip(cells) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let head = HEAD.map(String::from);
    write_line(&mut out, &head, &width);
    for (first_of_case, cells) in &lines {
        if *first_of_case && !out.is_empty() && lines.len() > 1 {
            out.push('\n');
        }
        write_line(&mut out, cells, &width);
    }
    out.push_str(
        "\nours/this: how many times better statepipe (the case's first statepipe row) is than \
         the row;\n           median/median, inverted for latencies; > 1.00x means statepipe wins.\n",
    );
    out
}

/// Text columns (case, impl, config, unit) align left, numbers right.
fn write_line(out: &mut String, cells: &[String; 8], width: &[usize; 8]) {
    let mut line = String::new();
    for (i, (cell, w)) in cells.iter().zip(width).enumerate() {
        if i > 0 {
            line.push_str("  ");
        }
        let pad = w - cell.chars().count();
        let numeric = matches!(i, 3..=5 | 7);
        if numeric {
            line.push_str(&" ".repeat(pad));
            line.push_str(cell);
        } else {
            line.push_str(cell);
            line.push_str(&" ".repeat(pad));
        }
    }
    let _ = writeln!(out, "{}", line.trim_end());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_report;

    #[test]
    fn table_shows_ratios_and_marks_ours() {
        let text = render(&sample_report());
        assert!(text.contains("(ours)"), "{text}");
        assert!(text.contains("2.00x"), "{text}");
        assert!(text.contains("0.50x"), "{text}");
        let rtrb = text.lines().find(|l| l.contains("rtrb")).unwrap();
        assert!(rtrb.contains("250.0") && rtrb.contains("Mev/s"), "{rtrb}");
    }

    #[test]
    fn values_keep_meaningful_digits() {
        assert_eq!(format_value(512.345), "512.3");
        assert_eq!(format_value(12_345.6), "12346");
        assert_eq!(format_value(0.01234), "0.012");
        assert_eq!(format_ratio(f64::INFINITY), "inf");
        assert_eq!(format_ratio(1234.6), "1235x");
        assert_eq!(format_ratio(12.345), "12.3x");
    }
}
