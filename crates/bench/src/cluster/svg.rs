//! The efficiency-against-workers chart of `statepipe bench cluster`.

use std::fmt::Write as _;

/// One line of an efficiency-against-workers plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// The legend.
    pub name: String,
    /// `(workers, efficiency)` points.
    pub points: Vec<(f64, f64)>,
}

/// A hand-written SVG: efficiency (0–1) against workers (log scale).
pub fn efficiency_svg(title: &str, series: &[Series]) -> String {
    let (w, h, l, r, t, b) = (640.0, 400.0, 60.0, 20.0, 40.0, 50.0);
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    let xmin = xs.iter().cloned().fold(f64::INFINITY, f64::min).max(1.0);
    let xmax = xs.iter().cloned().fold(1.0, f64::max).max(xmin * 2.0);
    let px = |x: f64| l + (x.ln() - xmin.ln()) / (xmax.ln() - xmin.ln()) * (w - l - r);
    let py = |y: f64| t + (1.0 - y.clamp(0.0, 1.1) / 1.1) * (h - t - b);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        w / 2.0,
        escape(title)
    );
    for i in 0..=11 {
        let y = i as f64 / 10.0;
        let _ = writeln!(
            s,
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}%</text>",
            w - r,
            py(y),
            py(y),
            l - 5.0,
            py(y) + 4.0,
            y * 100.0
        );
    }
    let mut ticks: Vec<f64> = xs.clone();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();
    for x in ticks {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{x}</text>",
            px(x),
            h - b + 18.0
        );
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">workers (log scale)</text>",
        w / 2.0,
        h - 8.0
    );
    let colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
    for (i, se) in series.iter().enumerate() {
        let c = colors[i % colors.len()];
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        for &(x, y) in &se.points {
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/>",
                px(x),
                py(y)
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" fill=\"{c}\">{}</text>",
            l + 10.0,
            t + 16.0 + 16.0 * i as f64,
            escape(&se.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn escape(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
