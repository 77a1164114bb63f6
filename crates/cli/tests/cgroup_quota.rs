//! `statepipe run` inside a real cgroup with a 1-CPU quota plans one worker,
//! and says why at start (`sharded` plans one worker per CPU where it has
//! them).
//!
//! Needs permission to create a cgroup (root, a writable `cpu` hierarchy);
//! where that is missing the test records a skip, saying why, and returns
//! (a failure instead under `STATEPIPE_REQUIRE_PRIVILEGED=1`:
//! scripts/skip.rs).

use std::process::Command;

use statepipe_bench::cgroup::QuotaCgroup;

#[path = "../../../scripts/skip.rs"]
mod skip;
use skip::Lack;

#[test]
fn run_under_a_one_cpu_quota_plans_one_worker() {
    let name = format!("statepipe-cli-test-{}", std::process::id());
    // Removed when dropped, whether the assertions below pass or not.
    let cgroup = match QuotaCgroup::create(&name, 1.0) {
        Ok(c) => c,
        Err(e) => {
            skip::skip(
                Lack::Privilege,
                &format!("cannot create a cgroup with a CPU quota here: {e}"),
            );
            return;
        }
    };
    let procs = cgroup.dir().join("cgroup.procs");
    // The shell moves itself into the cgroup, then becomes statepipe.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$1" && exec "$2" run sharded --items 2000"#)
        .arg("sh")
        .arg(&procs)
        .arg(env!("CARGO_BIN_EXE_statepipe"))
        .env_remove("STATEPIPE_WORKERS")
        .output()
        .expect("sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}\n{stderr}", out.status);
    let cpus = stderr
        .lines()
        .find(|l| l.starts_with("cpus: "))
        .unwrap_or_else(|| panic!("no cpus line in:\n{stderr}"));
    assert!(cpus.contains("quota 1.0 CPU ("), "{cpus}");
    assert!(
        cpus.contains(&cgroup.dir().display().to_string()),
        "names the cgroup: {cpus}"
    );
    assert!(cpus.ends_with("→ 1 worker"), "{cpus}");
    let plan = stderr
        .lines()
        .find(|l| l.starts_with("run: "))
        .unwrap_or_else(|| panic!("no plan line in:\n{stderr}"));
    assert!(plan.contains("plan: 1 worker(s)"), "{plan}");
}

/// `bench serve --server-quota` refuses, before it starts anything, a quota
/// per period below the kernel's least (1,000 µs), and says what to change.
#[test]
fn bench_serve_refuses_a_quota_the_kernel_cannot_take() {
    let out = Command::new(env!("CARGO_BIN_EXE_statepipe"))
        .args(["bench", "serve", "--server-quota", "0.5"])
        .args(["--server-quota-period-us", "1000", "--data"])
        .arg(std::env::temp_dir().join(format!("statepipe-quota-arg-{}", std::process::id())))
        .output()
        .expect("statepipe runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("500 µs a period") && stderr.contains("give a longer period"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains("load generator"),
        "refused first: {stdout}"
    );
}
