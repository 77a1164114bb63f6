//! Skipped and reduced tests, made visible. Included with `#[path]` by the
//! tests that need a privilege or a tool a host may lack, and by those that
//! shrink on a small host.
//!
//! A test that cannot run here calls [`skip`] and returns. The skip is
//! printed and appended, one line, to the file `STATEPIPE_SKIP_LOG` names:
//! `scripts/test` sets it and lists those lines (`SKIPPED n tests: ...`)
//! at its end, so a skip never reads as a pass. Where
//! `STATEPIPE_REQUIRE_PRIVILEGED=1` (`.ci/run` sets it when it runs as
//! root: CI's machine is root, with `ip netns`, `tc`, a writable cgroup v1
//! `cpu` controller and tmpfs mounts), a skip for want of a
//! [`Lack::Privilege`] panics instead: there the test can run, so a skip
//! would hide a broken check. Missing tools ([`Lack::Tool`]) stay skips.
#![allow(dead_code)]

use std::io::Write;

/// What a skipped test lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lack {
    /// Root, a kernel feature or a host setting that CI's machine has.
    Privilege,
    /// A tool that CI installs at best effort (a developer's laptop may not
    /// have it).
    Tool,
}

/// The running test's name: its crate target and libtest's thread name.
fn test_name() -> String {
    let thread = std::thread::current();
    let name = thread.name().unwrap_or("?");
    let name = name.strip_prefix("watched:").unwrap_or(name);
    format!("{}::{name}", env!("CARGO_CRATE_NAME"))
}

/// Records that the calling test cannot run here, saying `why`; the caller
/// then returns. Panics instead for a [`Lack::Privilege`] under
/// `STATEPIPE_REQUIRE_PRIVILEGED=1`.
pub(crate) fn skip(lack: Lack, why: &str) {
    let line = format!("{} ({why})", test_name());
    let required = std::env::var_os("STATEPIPE_REQUIRE_PRIVILEGED").is_some_and(|v| v == "1");
    if lack == Lack::Privilege && required {
        panic!(
            "{line}: STATEPIPE_REQUIRE_PRIVILEGED=1 says this host has what this test needs, \
             yet it cannot run"
        );
    }
    record("SKIPPED", &line);
}

/// Records that the calling test runs a reduced case here, saying `what`
/// and `why` (it still runs: this is not a skip).
pub(crate) fn reduce(what: &str, why: &str) {
    record("REDUCED", &format!("{} {what} ({why})", test_name()));
}

fn record(kind: &str, line: &str) {
    // One line in the log, whatever the reason's own line breaks.
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    eprintln!("{kind}: {line}");
    if let Some(path) = std::env::var_os("STATEPIPE_SKIP_LOG") {
        // One short `write` per line in append mode: lines from tests
        // running at once, in threads or processes, do not interleave.
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("STATEPIPE_SKIP_LOG {path:?}: {e}"));
        file.write_all(format!("{kind} {line}\n").as_bytes())
            .unwrap_or_else(|e| panic!("STATEPIPE_SKIP_LOG {path:?}: {e}"));
    }
}
