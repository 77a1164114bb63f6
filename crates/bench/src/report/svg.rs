//! A hand-written SVG bar chart of the ratios ours/peer (no plotting crate).
//!
//! One horizontal bar per (case, other row), on a logarithmic axis centred on 1.0: a bar
//! to the right (green) means statepipe is better by that factor, to the left (red)
//! worse. Ratios of a hundred and of a hundredth both stay readable.

use std::fmt::Write as _;

use super::table::format_ratio;
use super::Report;

/// Width of the plot area (the bars), in pixels.
const PLOT_WIDTH: f64 = 560.0;
/// Room left of the labels for the y axis title.
const LEFT_MARGIN: f64 = 34.0;
/// Room right of the plot for the value of the longest bar.
const RIGHT_MARGIN: f64 = 90.0;
/// Room between the labels and the smallest ratio drawn, for that bar's value.
const PAD: f64 = 48.0;
/// Approximate advance of one character at font-size 12 (sans-serif).
const CHAR_WIDTH: f64 = 6.8;
const TOP: f64 = 70.0;
const ROW: f64 = 20.0;
const BOTTOM: f64 = 60.0;
/// Ratios are clamped to [1/LIMIT, LIMIT] for drawing (labels keep the true value).
const LIMIT: f64 = 1_000.0;

/// The chart of `report`'s ratios as a complete SVG document.
///
/// # Examples
///
/// ```
/// use statepipe_bench::report::{svg, HostSummary, Report};
/// let report = Report { bench: "ring".into(), host: HostSummary { cpus: 2, pingpong_ns: 125.0 }, results: vec![] };
/// assert!(svg::render(&report).starts_with("<svg"));
/// ```
pub fn render(report: &Report) -> String {
    let ratios = report.ratios();
    let rows = ratios.len().max(1) as f64;
    let height = TOP + rows * ROW + BOTTOM;
    let labels: Vec<String> = ratios
        .iter()
        .map(|r| format!("{} vs {} ({})", r.case, r.imp, shorten(&r.config, 40)))
        .collect();
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
    let x0 = LEFT_MARGIN + longest * CHAR_WIDTH + 8.0;
    let x1 = x0 + PLOT_WIDTH;
    let width = (x1 + RIGHT_MARGIN).max(720.0);

    // The axis runs between the 1-2-5 ticks around every finite ratio, at least
    // [0.5, 2]; the plot starts PAD px right of the labels to leave room for the
    // value of a bar that reaches the left end.
    let finite = ratios
        .iter()
        .map(|r| r.ratio)
        .filter(|r| r.is_finite() && *r > 0.0);
    let (lo, hi) = finite.fold((0.5_f64, 2.0_f64), |(lo, hi), r| (lo.min(r), hi.max(r)));
    let ticks = ticks();
    let low = ticks
        .iter()
        .rev()
        .find(|t| **t <= lo * 1.0001)
        .copied()
        .unwrap_or(ticks[0]);
    let high = ticks
        .iter()
        .find(|t| **t >= hi / 1.0001)
        .copied()
        .unwrap_or(LIMIT);
    let plot_left = x0 + PAD;
    let x_of = |ratio: f64| {
        let r = ratio.clamp(low, high);
        plot_left + (r / low).log10() / (high / low).log10() * (x1 - plot_left)
    };

    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height}" viewBox="0 0 {width:.0} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="24" font-size="16" font-weight="bold" text-anchor="middle">statepipe bench {}: how many times better statepipe is than each peer</text>"#,
        width / 2.0,
        escape(&report.bench)
    );
    let _ = writeln!(
        svg,
        r##"<text x="{}" y="44" text-anchor="middle" fill="#555">host: {} CPUs, cross-core ping-pong {:.0} ns; median of samples; latency ratios are peer/ours</text>"##,
        width / 2.0,
        report.host.cpus,
        report.host.pingpong_ns
    );

    // Vertical grid and x tick labels at 1, 2, 5 x 10^k.
    let plot_bottom = TOP + rows * ROW;
    for tick in ticks.iter().copied().filter(|t| (low..=high).contains(t)) {
        let x = x_of(tick);
        let _ = writeln!(
            svg,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{plot_bottom}" stroke="#ddd"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            plot_bottom + 16.0,
            trim_number(tick)
        );
    }

    let one = x_of(1.0);
    let mut previous_case: Option<&str> = None;
    for (i, r) in ratios.iter().enumerate() {
        let y = TOP + i as f64 * ROW;
        if previous_case.is_some_and(|c| c != r.case) {
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT_MARGIN}" y1="{y}" x2="{x1}" y2="{y}" stroke="#bbb"/>"##
            );
        }
        previous_case = Some(&r.case);
        let label = &labels[i];
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            x0 - 8.0,
            y + ROW * 0.7,
            escape(label)
        );
        let end = x_of(if r.ratio.is_finite() { r.ratio } else { LIMIT });
        let (left, right) = if end >= one { (one, end) } else { (end, one) };
        let colour = if r.ratio >= 1.0 { "#2e7d32" } else { "#c62828" };
        let _ = writeln!(
            svg,
            r#"<rect x="{left:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{colour}"/>"#,
            y + 3.0,
            (right - left).max(1.0),
            ROW - 6.0
        );
        let (text_x, anchor) = if end >= one {
            (right + 4.0, "start")
        } else {
            (left - 4.0, "end")
        };
        let _ = writeln!(
            svg,
            r#"<text x="{text_x:.1}" y="{:.1}" text-anchor="{anchor}">{}</text>"#,
            y + ROW * 0.7,
            format_ratio(r.ratio)
        );
    }
    if ratios.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">no ratios: no case has both statepipe and a peer</text>"#,
            (x0 + x1) / 2.0,
            TOP + ROW * 0.7
        );
    }

    // Axes: the line at 1.0 (parity), the x axis, and both axis titles.
    let _ = writeln!(
        svg,
        r#"<line x1="{one:.1}" y1="{}" x2="{one:.1}" y2="{plot_bottom}" stroke="black" stroke-width="2"/>"#,
        TOP - 6.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{one:.1}" y="{}" text-anchor="middle" font-weight="bold">1.0 = parity</text>"#,
        TOP - 10.0
    );
    let _ = writeln!(
        svg,
        r#"<line x1="{plot_left}" y1="{plot_bottom}" x2="{x1}" y2="{plot_bottom}" stroke="black"/>"#
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">ratio ours/peer (log scale): right of 1.0 = statepipe better, left = worse</text>"#,
        (plot_left + x1) / 2.0,
        plot_bottom + 38.0
    );
    let mid_y = TOP + rows * ROW / 2.0;
    let _ = writeln!(
        svg,
        r#"<text x="14" y="{mid_y:.1}" text-anchor="middle" transform="rotate(-90 14 {mid_y:.1})">case vs peer (config)</text>"#
    );
    svg.push_str("</svg>\n");
    svg
}

/// 1, 2 and 5 times the powers of ten in [1/LIMIT, LIMIT], ascending.
fn ticks() -> Vec<f64> {
    (-3..=3)
        .flat_map(|exp| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(exp)))
        .filter(|t| (1.0 / LIMIT..=LIMIT).contains(t))
        .collect()
}

/// `0.5`, `1`, `20`: no trailing zeros.
fn trim_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut short: String = text.chars().take(max - 1).collect();
        short.push('~');
        short
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_report;

    #[test]
    fn chart_has_a_bar_per_ratio_and_a_parity_line() {
        let svg = render(&sample_report());
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(
            svg.matches("<rect").count(),
            1 + 3,
            "background + one bar per ratio"
        );
        assert!(svg.contains("1.0 = parity"));
        assert!(svg.contains("2.00x") && svg.contains("0.50x"));
        assert!(svg.contains("ratio ours/peer"));
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(escape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        assert_eq!(trim_number(0.5), "0.5");
        assert_eq!(trim_number(100.0), "100");
    }
}
