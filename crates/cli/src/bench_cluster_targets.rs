//! The recovery targets of `statepipe bench cluster --faults`: each fault
//! case's wall time against the fault-free run of its recovery mode, with
//! its verdict.

use statepipe_bench::report::ResultRow;

/// The most a case may take over its mode's fault-free run: 5 % of the
/// workers killed 1.15×, 10 % killed 1.25×, 5 % stopped 1.3×, 5 % asked
/// to leave (SIGTERM) 1.03× (the chaos schedules have none).
fn bound(case: &str) -> Option<f64> {
    match case {
        "5%-killed" => Some(1.15),
        "10%-killed" => Some(1.25),
        "5%-stopped" => Some(1.3),
        "5%-drained" => Some(1.03),
        _ => None,
    }
}

/// How much faster than staying at half the workers a run that starts
/// with half and gets the rest at step 3 of 10 must end.
const SCALE_OUT_SPEEDUP: f64 = 1.3;

/// One line per fault case of each `faults/…/wall` table, or nothing if
/// the run had none.
pub fn targets(rows: &[ResultRow]) -> String {
    let mark = |ok: bool| if ok { "met" } else { "NOT met" };
    let walls: Vec<&ResultRow> = rows
        .iter()
        .filter(|r| r.case.starts_with("faults/") && r.case.ends_with("/wall"))
        .collect();
    let mut out = String::new();
    for r in &walls {
        // `buddy/…` rows are buddy mode's; the others the master's copies'
        // (`chaos/10%` among them).
        let (mode, case) = match r.imp.strip_prefix("buddy/") {
            Some(c) => (Some("buddy"), c),
            None => (None, r.imp.as_str()),
        };
        if case == "no-faults" || case == "recovery-off" || case == "half" {
            continue;
        }
        if case == "scale-out" {
            // Against staying at half the workers (the master's copies).
            if let Some(half) = walls.iter().find(|b| b.case == r.case && b.imp == "half") {
                let speedup = half.median / r.median;
                out.push_str(&format!(
                    "  {}: {:.2} s = {speedup:.3}x faster than half the workers throughout \
                     ({:.2} s) [need >= {SCALE_OUT_SPEEDUP}x: {}]\n",
                    r.imp,
                    r.median,
                    half.median,
                    mark(speedup >= SCALE_OUT_SPEEDUP)
                ));
            }
            continue;
        }
        let base_imp = mode.map_or("no-faults".to_string(), |m| format!("{m}/no-faults"));
        let Some(base) = walls
            .iter()
            .find(|b| b.case == r.case && b.imp == base_imp)
            .map(|b| b.median)
        else {
            continue;
        };
        let ratio = r.median / base;
        let verdict = bound(case).map_or(String::new(), |b| {
            format!(" [need <= {b}x: {}]", mark(ratio <= b))
        });
        out.push_str(&format!(
            "  {}: {:.2} s = {ratio:.3}x {base_imp} ({base:.2} s){verdict}\n",
            r.imp, r.median
        ));
    }
    if out.is_empty() {
        return out;
    }
    format!(
        "targets (every faulty run ended with the fault-free bits, or the bench would have \
         failed):\n{out}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(imp: &str, median: f64) -> ResultRow {
        crate::bench_pf::row("faults/workers=200/wall", imp, "", "s", &[median])
    }

    #[test]
    fn each_case_is_measured_against_its_own_modes_fault_free_run() {
        let rows = vec![
            wall("no-faults", 4.0),
            wall("5%-killed", 4.4),
            wall("5%-stopped", 5.6),
            wall("buddy/no-faults", 5.0),
            wall("buddy/5%-killed", 5.9),
            wall("buddy/chaos/10%", 6.0),
            wall("chaos/10%", 4.8),
            wall("recovery-off", 4.0),
            wall("5%-drained", 4.08),
            wall("half", 8.0),
            wall("scale-out", 5.6),
        ];
        let t = targets(&rows);
        assert!(
            t.contains("  5%-killed: 4.40 s = 1.100x no-faults (4.00 s) [need <= 1.15x: met]"),
            "{t}"
        );
        assert!(
            t.contains("  5%-stopped: 5.60 s = 1.400x no-faults (4.00 s) [need <= 1.3x: NOT met]"),
            "{t}"
        );
        assert!(t.contains("  buddy/5%-killed: 5.90 s = 1.180x buddy/no-faults (5.00 s) [need <= 1.15x: NOT met]"), "{t}");
        assert!(
            t.contains("  buddy/chaos/10%: 6.00 s = 1.200x buddy/no-faults (5.00 s)\n"),
            "{t}"
        );
        assert!(
            t.contains("  chaos/10%: 4.80 s = 1.200x no-faults (4.00 s)\n"),
            "{t}"
        );
        assert!(!t.contains("recovery-off"));
        assert!(
            t.contains("  5%-drained: 4.08 s = 1.020x no-faults (4.00 s) [need <= 1.03x: met]"),
            "{t}"
        );
        assert!(
            t.contains(
                "  scale-out: 5.60 s = 1.429x faster than half the workers throughout (8.00 s) \
                 [need >= 1.3x: met]"
            ),
            "{t}"
        );
        assert!(!t.contains("  half:"), "{t}");
        assert_eq!(targets(&[]), "");
    }
}
