//! `statepipe bench cluster --faults` as a user runs it, quick: every
//! fault case ends (a faulty run whose bits differ from the fault-free
//! one fails the bench), and `--step-log` has a line per sample with each
//! step's time and the signals sent.

use std::process::Command;

#[test]
fn the_fault_cases_run_and_log_their_steps() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("steps.txt");
    let out = Command::new(env!("CARGO_BIN_EXE_statepipe"))
        .args([
            "bench",
            "cluster",
            "--quick",
            "--workers",
            "0",
            "--steal-workers",
            "0",
            "--no-roundtrips",
            "--faults",
            "20",
            "--states",
            "200",
            "--step-log",
        ])
        .arg(&log)
        .output()
        .expect("starting statepipe");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cases = [
        "no-faults",
        "5%-killed",
        "5%-stopped",
        "buddy/no-faults",
        "buddy/5%-killed",
        "buddy/5%-stopped",
        "5%-drained",
        "buddy/5%-drained",
        "half",
        "scale-out",
        "buddy/scale-out",
        "recovery-off",
    ];
    assert_eq!(lines.len(), cases.len(), "{text}");
    for case in cases {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("faults/workers=20 {case} #1: ")))
            .unwrap_or_else(|| panic!("no line for {case}: {text}"));
        // --quick: five steps, each timed.
        let steps = line
            .split("steps ms ")
            .nth(1)
            .unwrap()
            .split(';')
            .next()
            .unwrap();
        assert_eq!(steps.split(',').count(), 5, "{line}");
        assert!(
            steps.split(',').all(|ms| ms.parse::<f64>().is_ok()),
            "{line}"
        );
        // One of 20 workers (5%) signalled in the faulty cases, none else.
        let signalled = line.split("; signalled ").nth(1).unwrap();
        let letter = if case.ends_with("killed") {
            Some('K')
        } else if case.ends_with("stopped") {
            Some('S')
        } else if case.ends_with("drained") {
            Some('T')
        } else {
            None
        };
        match letter {
            Some(k) => assert!(signalled.contains(k) && !signalled.contains(','), "{line}"),
            None => assert_eq!(signalled, "none", "{line}"),
        }
    }
}
