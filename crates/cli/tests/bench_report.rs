//! `statepipe bench report` on a fixture repository in a temporary folder: the index is
//! written, and `--check` catches a figure its run does not hold, an unlinked figure, a
//! missing run, a broken link and anchor, and a stale index; it passes once they are fixed.

use std::path::Path;
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

fn report(root: &Path, extra: &[&str]) -> Output {
    Command::new(EXE)
        .args(["bench", "report", "--root"])
        .arg(root)
        .args(extra)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("statepipe runs")
}

fn write(root: &Path, path: &str, text: &str) {
    let full = root.join(path);
    std::fs::create_dir_all(full.parent().unwrap()).unwrap();
    std::fs::write(full, text).unwrap();
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let run = "bench/results/good-run1";
    write(
        root,
        &format!("{run}/output.txt"),
        "speed-up 1.523x over the peer, 14.2 ms\n",
    );
    write(root, &format!("{run}/command"), "statepipe bench ring\n");
    write(
        root,
        &format!("{run}/host.txt"),
        "date: 2026-12-01\n2 CPUs\n",
    );
    write(
        root,
        &format!("{run}/NOTES.md"),
        "# good-run1\n\nThe ring, 1.52× its peer.\n",
    );
    write(
        root,
        "docs/src/intro.md",
        "# Intro\n\nSee [1.52×](performance/runs.md#good-run1).\n",
    );
    dir
}

#[test]
fn check_catches_bad_figures_and_links_and_passes_when_fixed() {
    let dir = fixture();
    let root = dir.path();
    let written = report(root, &[]);
    assert!(written.status.success(), "{written:?}");
    let runs_page = std::fs::read_to_string(root.join("docs/src/performance/runs.md")).unwrap();
    assert!(runs_page.contains("## good-run1"), "{runs_page}");
    assert!(
        runs_page.contains("](../../../bench/results/good-run1/)"),
        "{runs_page}"
    );

    write(
        root,
        "README.md",
        "# Top\n\nFast: [1.52×](bench/results/good-run1/), [14 ms](bench/results/good-run1/),\n\
         [1.9×](bench/results/good-run1/), 2.0× bare, [3×](bench/results/gone-run1/),\n\
         [a](docs/nope.md), [b](README.md#nope), [c](#top).\n\n```\n3.0× in code\n```\n",
    );
    let out = report(root, &["--check"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the check must fail: {err}");
    for expected in [
        "README.md:4: `1.9` in the link text is not in run `good-run1`'s data",
        "README.md:4: figure `2.0×` is not a link to its run",
        "README.md:4: link to run `gone-run1`, which has no folder",
        "README.md:5: link `docs/nope.md`: docs/nope.md does not exist",
        "README.md:5: link `README.md#nope`: README.md has no heading with anchor `#nope`",
    ] {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
    let gone = err.lines().filter(|l| l.contains("gone-run1")).count();
    assert_eq!(gone, 1, "one problem per missing run: {err}");
    for wrong in ["`1.52`", "`14`", "3.0×", "#top"] {
        assert!(!err.contains(wrong), "{wrong} reported in:\n{err}");
    }

    write(
        root,
        "README.md",
        "# Top\n\nFast: [1.52×](bench/results/good-run1/), [c](#top).\n",
    );
    let out = report(root, &["--check"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    write(
        root,
        "bench/results/good-run1/NOTES.md",
        "# good-run1\n\nChanged.\n",
    );
    let out = report(root, &["--check"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a stale index must fail the check");
    assert!(
        err.contains("docs/src/performance/runs.md: out of date"),
        "{err}"
    );

    let out = report(root, &["--check", "--files", "README.md"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("out of date") && !err.contains("intro.md"),
        "{err}"
    );
}
