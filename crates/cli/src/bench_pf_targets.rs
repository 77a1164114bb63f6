//! The targets of `statepipe bench pf`, each with its figure and whether
//! it is met, from a report's rows.

use statepipe_bench::report::ResultRow;

/// The median of `imp`'s row of `case`, if the run has one.
fn median(rows: &[ResultRow], case: &str, imp: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.case == case && r.imp == imp)
        .map(|r| r.median)
}

/// The targets at each particle count of the run, with all threads =
/// `threads`: one thread within 2× the sequential floor; at least 3× the
/// speed of `particles` from 20,000 particles; the whole command at 2,000
/// particles within half `particles`' warm filter; at 200,000 particles,
/// 2 threads 1.8× one, 16 threads 10× one (other counts: the ratio, no
/// target), each beside the machine's ceiling (the keyed floor on all
/// threads against one).
pub fn targets(rows: &[ResultRow], threads: usize) -> String {
    let mark = |ok: bool| if ok { "met" } else { "NOT met" };
    let mut out = String::from("targets:\n");
    let mut sizes: Vec<usize> = rows
        .iter()
        .filter_map(|r| r.case.strip_prefix("nile/")?.parse().ok())
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    for n in sizes {
        let case = format!("nile/{n}");
        let m = |imp: &str| median(rows, &case, imp);
        let (Some(one), Some(all)) = (m("statepipe"), m("statepipe-threads")) else {
            continue;
        };
        if let Some(floor) = m("floor-seq") {
            let r = one / floor;
            out.push_str(&format!(
                "  {n}: one thread {one:.1} ns per particle-step = {r:.2}x the sequential floor \
                 ({floor:.1}) [need <= 2x: {}]\n",
                mark(r <= 2.0)
            ));
        }
        if let Some(peer) = m("particles") {
            let r = peer / one;
            let need = if n >= 20_000 { " [need >= 3x: " } else { " [" };
            let verdict = if n >= 20_000 {
                mark(r >= 3.0)
            } else {
                "no target"
            };
            out.push_str(&format!(
                "  {n}: one thread {r:.2}x the speed of particles ({peer:.1}){need}{verdict}]\n"
            ));
        }
        let speedup = one / all;
        let ceiling = match (m("floor-keyed"), m("floor-keyed-threads")) {
            (Some(a), Some(b)) => format!("; the machine's ceiling {:.2}x", a / b),
            _ => String::new(),
        };
        let need = match (n, threads) {
            (200_000, 2) => Some(1.8),
            (200_000, t) if t >= 16 => Some(10.0),
            _ => None,
        };
        out.push_str(&format!(
            "  {n}: {threads} threads {speedup:.2}x one{ceiling}{}\n",
            need.map_or(String::new(), |x| format!(
                " [need >= {x}x: {}]",
                mark(speedup >= x)
            ))
        ));
    }
    if let (Some(cmd), Some(peer)) = (
        median(rows, "command/2000", "statepipe"),
        median(rows, "command/2000", "particles"),
    ) {
        let r = cmd / peer;
        out.push_str(&format!(
            "  command at 2000: {cmd:.1} ms = {r:.2}x particles' warm filter ({peer:.1} ms) \
             [need <= 0.5x: {}]\n",
            mark(r <= 0.5)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(case: &str, imp: &str, median: f64) -> ResultRow {
        crate::bench_pf::row(case, imp, "", "ns/particle-step", &[median])
    }

    #[test]
    fn each_target_says_its_figure_and_verdict() {
        let rows = vec![
            row("nile/200000", "statepipe", 12.0),
            row("nile/200000", "statepipe-threads", 6.0),
            row("nile/200000 evolve", "statepipe", 9.0),
            row("nile/200000", "floor-seq", 18.0),
            row("nile/200000", "floor-keyed", 26.0),
            row("nile/200000", "floor-keyed-threads", 13.0),
            row("nile/200000", "particles", 42.0),
            row("nile/2000", "statepipe", 10.0),
            row("nile/2000", "statepipe-threads", 10.0),
            row("nile/2000", "particles", 60.0),
            row("command/2000", "statepipe", 5.0),
            row("command/2000", "particles", 12.0),
        ];
        let t = targets(&rows, 2);
        assert!(
            t.contains("200000: one thread 12.0 ns per particle-step = 0.67x"),
            "{t}"
        );
        assert!(t.contains("[need <= 2x: met]"), "{t}");
        assert!(
            t.contains("200000: one thread 3.50x the speed of particles"),
            "{t}"
        );
        assert!(t.contains("[need >= 3x: met]"), "{t}");
        assert!(t.contains("2000: one thread 6.00x the speed of particles (60.0) [no target]"));
        assert!(
            t.contains(
                "200000: 2 threads 2.00x one; the machine's ceiling 2.00x [need >= 1.8x: met]"
            ),
            "{t}"
        );
        assert!(t.contains("2000: 2 threads 1.00x one\n"), "{t}");
        assert!(t.contains("command at 2000: 5.0 ms = 0.42x"), "{t}");
        // On 16 threads the 200,000 target is 10x.
        let t = targets(&rows, 16);
        assert!(
            t.contains("16 threads 2.00x one; the machine's ceiling 2.00x [need >= 10x: NOT met]"),
            "{t}"
        );
    }
}
