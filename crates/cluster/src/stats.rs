//! Accounting: per worker busy and waiting time, steals, bytes; the master
//! loop's busy share; a final table and an SVG plot.

use std::fmt::Write as _;
use std::time::Duration;

/// Counters for one worker, kept by the master.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Time the worker reported spending in `evolve` calls.
    pub busy_ns: u64,
    /// States evolved.
    pub evolved: u64,
    /// Evolve batches answered.
    pub batches: u64,
    /// Steals this worker received (as the idle one).
    pub steals_in: u64,
    /// Steals taken from this worker.
    pub steals_out: u64,
    /// States moved to this worker by steals.
    pub stolen_states: u64,
    /// States moved to this worker by the start-of-step rebalance.
    pub rebalanced_states: u64,
    /// Moves (steals and rebalance) that reached this worker, and their
    /// total time from the master's decision to the states being evolvable here.
    pub transfers: u64,
    pub transfer_ns: u64,
    /// Of those, how many came straight from the victim (`StealVia::Peer`).
    pub direct_transfers: u64,
    /// Bytes the master sent to this worker.
    pub bytes_out: u64,
    /// Bytes the master received from this worker.
    pub bytes_in: u64,
}

/// Counters for a whole cluster.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub workers: Vec<WorkerStats>,
    /// Wall time spent inside `evolve_many`.
    pub evolve_wall: Duration,
    /// Time the master thread spent handling events inside `evolve_many`
    /// (event-loop master only; the threaded one cannot tell).
    pub master_busy: Option<Duration>,
    /// `evolve_many` calls.
    pub steps: u64,
}

impl Stats {
    /// Total reported evolve time.
    pub fn total_busy(&self) -> Duration {
        Duration::from_nanos(self.workers.iter().map(|w| w.busy_ns).sum())
    }

    /// Ideal wall time over actual: (total evolve time / workers) / wall time.
    pub fn efficiency(&self) -> f64 {
        let wall = self.evolve_wall.as_secs_f64();
        if wall == 0.0 || self.workers.is_empty() {
            return 0.0;
        }
        self.total_busy().as_secs_f64() / self.workers.len() as f64 / wall
    }

    /// Mean time from deciding a move to the states being evolvable at the
    /// thief, if any move happened.
    pub fn mean_transfer(&self) -> Option<Duration> {
        let n: u64 = self.workers.iter().map(|w| w.transfers).sum();
        let t: u64 = self.workers.iter().map(|w| w.transfer_ns).sum();
        (n > 0).then(|| Duration::from_nanos(t / n))
    }

    /// Share of `evolve_many` wall time the master loop was busy.
    pub fn master_busy_share(&self) -> Option<f64> {
        let wall = self.evolve_wall.as_secs_f64();
        self.master_busy.map(|b| {
            if wall > 0.0 {
                b.as_secs_f64() / wall
            } else {
                0.0
            }
        })
    }

    /// The per-worker table: busy and waiting share, batches, steals, bytes.
    pub fn table(&self) -> String {
        let wall = self.evolve_wall.as_secs_f64().max(1e-12);
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:>6} {:>7} {:>7} {:>8} {:>8} {:>9} {:>10} {:>11} {:>11}",
            "worker",
            "busy%",
            "wait%",
            "states",
            "batches",
            "steals in",
            "steals out",
            "MB to",
            "MB from"
        );
        for (i, w) in self.workers.iter().enumerate() {
            let busy = w.busy_ns as f64 / 1e9 / wall * 100.0;
            let _ = writeln!(
                s,
                "{:>6} {:>7.1} {:>7.1} {:>8} {:>8} {:>9} {:>10} {:>11.3} {:>11.3}",
                i,
                busy,
                (100.0 - busy).max(0.0),
                w.evolved,
                w.batches,
                w.steals_in,
                w.steals_out,
                w.bytes_out as f64 / 1e6,
                w.bytes_in as f64 / 1e6
            );
        }
        let _ = write!(
            s,
            "steps {}  wall {:.3} s  efficiency {:.1}%",
            self.steps,
            wall,
            self.efficiency() * 100.0
        );
        if let Some(b) = self.master_busy_share() {
            let _ = write!(s, "  master loop busy {:.1}%", b * 100.0);
        }
        s
    }
}

/// One line of an efficiency-against-workers plot.
#[derive(Debug, Clone)]
pub struct Series {
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
