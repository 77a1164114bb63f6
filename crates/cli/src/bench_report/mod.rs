//! `statepipe bench report`: the index of the recorded runs (`bench/results/<run>/`)
//! generated from the runs' folders, and with `--check` the docs' figures and links
//! checked against them.
//!
//! Generated: `bench/results/README.md` (one line per run), `docs/src/performance/runs.md`
//! (a `## <run>` section per run: date, host, command, the note's first paragraph, a link
//! to the folder) and `docs/src/performance/tables/<run>.md` for every run with a JSON
//! file in the bench's report shape. Output is sorted, so it is the same on every
//! machine and CI can compare it with what is committed.

mod check;
mod markdown;
mod numbers;
mod runs;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use check::{Problem, RunData};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Check instead of writing: every figure (`N×`) links to its run, the numbers in
    /// run links are in the run's data, relative links and anchors resolve, the run
    /// folders are complete and the generated files are current. Exits 1 listing each
    /// problem as file:line: what, and what to do.
    #[arg(long)]
    pub check: bool,
    /// The repository's root.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
    /// The markdown files to check, relative to the root (default: README.md,
    /// ARCHITECTURE.md, crates/*/README.md, python/README.md, deploy/README.md,
    /// docs/src/**/*.md).
    #[arg(long, value_name = "FILE", num_args = 1..)]
    pub files: Vec<PathBuf>,
}

pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let root = &args.root;
    anyhow::ensure!(
        root.join(runs::RESULTS).is_dir(),
        "{} has no {}: run from the repository's root or pass --root",
        root.display(),
        runs::RESULTS
    );
    let all = runs::load(root)?;
    let generated = runs::generate(&all);
    if !args.check {
        write_generated(root, &generated)?;
        println!(
            "wrote {} files for {} runs ({}, {}, {}/)",
            generated.len(),
            all.len(),
            runs::INDEX,
            runs::RUNS_PAGE,
            runs::TABLES
        );
        return Ok(());
    }
    let files = if args.files.is_empty() {
        default_files(root)?
    } else {
        args.files.clone()
    };
    let problems = check_all(root, &all, &generated, &files)?;
    if problems.is_empty() {
        println!(
            "bench report --check: {} runs, {} files: no problems",
            all.len(),
            files.len()
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("{p}");
    }
    anyhow::bail!(
        "{} problems in the recorded runs and the docs' figures (above); the rules are in \
         `statepipe bench report --help`",
        problems.len()
    )
}

fn check_all(
    root: &Path,
    all: &[runs::Run],
    generated: &std::collections::BTreeMap<String, String>,
    files: &[PathBuf],
) -> anyhow::Result<Vec<Problem>> {
    let mut problems = Vec::new();
    check::check_runs(root, all, &mut problems);
    check::check_generated(root, generated, &mut problems);
    let mut data = RunData::default();
    let mut anchors = HashMap::new();
    for file in files {
        let text = std::fs::read_to_string(root.join(file))
            .with_context(|| format!("reading {}", root.join(file).display()))?;
        let name = file.to_string_lossy().replace('\\', "/");
        let is_generated = generated.contains_key(&name);
        check::check_file(
            root,
            file,
            &text,
            is_generated,
            &mut data,
            &mut anchors,
            &mut problems,
        );
    }
    problems.sort();
    problems.dedup();
    Ok(problems)
}

/// The files `--check` reads when `--files` is not given, as they are on disk, sorted:
/// README.md, ARCHITECTURE.md, python/README.md, deploy/README.md, crates/*/README.md and
/// every page of the book (docs/src/**/*.md).
fn default_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "python/README.md",
        "deploy/README.md",
    ]
    .iter()
    .map(PathBuf::from)
    .filter(|p| root.join(p).is_file())
    .collect();
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        for entry in crates.flatten() {
            let readme = Path::new("crates")
                .join(entry.file_name())
                .join("README.md");
            if root.join(&readme).is_file() {
                out.push(readme);
            }
        }
    }
    let book = root.join("docs/src");
    if book.is_dir() {
        let mut pages = Vec::new();
        runs::walk(root, &book, &mut pages)?;
        out.extend(
            pages
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "md")),
        );
    }
    out.sort();
    Ok(out)
}

fn write_generated(
    root: &Path,
    generated: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<()> {
    for (path, text) in generated {
        let full = root.join(path);
        if let Some(dir) = full.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        if std::fs::read_to_string(&full).ok().as_deref() != Some(text.as_str()) {
            std::fs::write(&full, text).with_context(|| format!("writing {}", full.display()))?;
        }
    }
    if let Ok(entries) = std::fs::read_dir(root.join(runs::TABLES)) {
        for entry in entries.flatten() {
            let rel = format!("{}/{}", runs::TABLES, entry.file_name().to_string_lossy());
            if !generated.contains_key(&rel) {
                std::fs::remove_file(entry.path())
                    .with_context(|| format!("removing the stale {rel}"))?;
            }
        }
    }
    Ok(())
}
