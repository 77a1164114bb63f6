//! `statepipe bench report --check`: the figures and links of the docs against the
//! recorded runs (the rules are in docs' CONVENTION: every `×` figure links to the run
//! that measured it, the numbers in a run link are in that run's data, relative links
//! resolve, the generated files are current).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use super::markdown::{anchors, line_of, links, mask_code};
use super::numbers::{self, Quoted};
use super::runs::{walk, Run, RESULTS, RUNS_PAGE, TABLES};

/// One problem: where, what, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The file, relative to the root.
    pub file: String,
    /// 1-based line; 0 for a whole file.
    pub line: usize,
    /// What is wrong and what to do.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

/// The numbers of a run's data files (its `*.json`, `*.txt` and `*.md`), loaded once.
#[derive(Default)]
pub struct RunData {
    cache: HashMap<String, Option<Vec<f64>>>,
}

impl RunData {
    /// The numbers of run `name` under `root`, or `None` when it has no folder.
    fn numbers(&mut self, root: &Path, name: &str) -> Option<&[f64]> {
        self.cache
            .entry(name.to_string())
            .or_insert_with(|| run_numbers(&root.join(RESULTS).join(name)))
            .as_deref()
    }
}

fn run_numbers(dir: &Path) -> Option<Vec<f64>> {
    if !dir.is_dir() {
        return None;
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files).ok()?;
    let mut out = Vec::new();
    for file in files {
        let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !matches!(ext, "json" | "txt" | "md") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(dir.join(&file)) else {
            continue;
        };
        if ext == "json" {
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
                numbers::from_json(&value, &mut out);
            }
        }
        out.extend(numbers::scan(&text).iter().map(|q| q.value));
    }
    Some(out)
}

/// The run a link target names, if it points into `bench/results/<run>` or at an
/// anchor of the generated runs page. `file` is the linking file, relative to the root.
fn run_of(file: &Path, target: &str) -> Option<String> {
    let (path, anchor) = split_anchor(target);
    let resolved = resolve(file, path)?;
    let text = resolved.to_string_lossy().replace('\\', "/");
    if text == RUNS_PAGE {
        return anchor.filter(|a| !a.is_empty()).map(str::to_string);
    }
    let rest = text.strip_prefix(RESULTS)?.strip_prefix('/')?;
    let run = rest.split('/').next()?;
    (!run.is_empty() && run != "README.md").then(|| run.to_string())
}

fn split_anchor(target: &str) -> (&str, Option<&str>) {
    match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    }
}

/// `target` (relative to `file`'s folder) as a path relative to the root, `..` and `.`
/// folded; `None` when it climbs above the root or is absolute.
fn resolve(file: &Path, target: &str) -> Option<PathBuf> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<String> = file
        .parent()
        .map(|p| {
            p.components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    for piece in target.split('/') {
        match piece {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p.to_string()),
        }
    }
    Some(parts.iter().collect())
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:") || target.is_empty()
}

/// Checks `file` (its text given, path relative to `root`) and appends its problems.
/// `generated` marks a generated file: its `×` figures quote its own run and are not
/// asked for links.
pub fn check_file(
    root: &Path,
    file: &Path,
    text: &str,
    generated: bool,
    data: &mut RunData,
    anchor_cache: &mut HashMap<PathBuf, Option<Vec<String>>>,
    out: &mut Vec<Problem>,
) {
    let name = file.to_string_lossy().replace('\\', "/");
    let masked = mask_code(text);
    let found = links(text);
    let mut run_text_spans = Vec::new();
    let mut push = |offset: usize, message: String| {
        out.push(Problem {
            file: name.clone(),
            line: line_of(text, offset),
            message,
        })
    };
    for link in &found {
        if is_external(&link.target) {
            continue;
        }
        if let Some(run) = run_of(file, &link.target) {
            run_text_spans.push(link.text_span.clone());
            match data.numbers(root, &run) {
                None => {
                    push(
                        link.span.start,
                        format!(
                            "link to run `{run}`, which has no folder {RESULTS}/{run}/: point it at \
                             the run that measured the figure (ls {RESULTS}), or record the run"
                        ),
                    );
                    continue;
                }
                Some(values) => {
                    for q in numbers::scan(&link.text) {
                        if !values.iter().any(|&v| q.matches(v)) {
                            push(
                                link.span.start,
                                format!(
                                    "`{}` in the link text is not in run `{run}`'s data at the \
                                     precision quoted ({}): quote the run's figure, or link the \
                                     run that has it",
                                    show(q),
                                    interval(q)
                                ),
                            );
                        }
                    }
                }
            }
        }
        check_target(root, file, &link.target, anchor_cache, |msg| {
            push(link.span.start, msg)
        });
    }
    if generated {
        return;
    }
    for (offset, c) in masked.char_indices() {
        if c != '×' || offset == 0 || !masked.as_bytes()[offset - 1].is_ascii_digit() {
            continue;
        }
        if run_text_spans.iter().any(|s| s.contains(&offset)) {
            continue;
        }
        let start = masked[..offset]
            .char_indices()
            .rev()
            .find(|&(_, ch)| !(ch.is_ascii_digit() || ch == '.' || ch == ','))
            .map_or(0, |(i, ch)| i + ch.len_utf8());
        push(
            offset,
            format!(
                "figure `{}×` is not a link to its run: write it as [{0}×](<path to \
                 {RESULTS}/RUN/>) (from a book page: [{0}×](<relative path to \
                 {RUNS_PAGE}>#RUN)), or drop the figure",
                &masked[start..offset]
            ),
        );
    }
}

fn show(q: Quoted) -> String {
    format!("{:.*}", q.decimals as usize, q.value)
}

fn interval(q: Quoted) -> String {
    let half = 0.5 * 10f64.powi(-(q.decimals as i32));
    let d = q.decimals as usize + 1;
    format!(
        "any value in [{:.*}, {:.*})",
        d,
        q.value - half,
        d,
        q.value + half
    )
}

/// Whether the relative `target` exists, and its `#anchor` where it names a markdown file
/// (or the linking file itself, for `#anchor` alone).
fn check_target(
    root: &Path,
    file: &Path,
    target: &str,
    anchor_cache: &mut HashMap<PathBuf, Option<Vec<String>>>,
    mut problem: impl FnMut(String),
) {
    let (path, anchor) = split_anchor(target);
    let resolved = if path.is_empty() {
        Some(file.to_path_buf())
    } else {
        resolve(file, path)
    };
    let Some(resolved) = resolved else {
        problem(format!(
            "link `{target}` leaves the repository or is absolute: use a path relative to this file"
        ));
        return;
    };
    let full = root.join(&resolved);
    if !full.exists() {
        problem(format!(
            "link `{target}`: {} does not exist: fix the path (relative to this file) or drop the link",
            resolved.display()
        ));
        return;
    }
    let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
        return;
    };
    if full.extension().map_or(true, |e| e != "md") {
        return;
    }
    let known = anchor_cache
        .entry(resolved.clone())
        .or_insert_with(|| std::fs::read_to_string(&full).ok().map(|t| anchors(&t)));
    if let Some(known) = known {
        if !known.iter().any(|a| a == anchor) {
            problem(format!(
                "link `{target}`: {} has no heading with anchor `#{anchor}` (anchors: lowercase, \
                 spaces to '-', punctuation but '-' and '_' dropped): link an existing heading",
                resolved.display()
            ));
        }
    }
}

/// The problems of the run folders themselves: a file a run needs that is missing, a
/// program or patch kept among the results.
pub fn check_runs(root: &Path, runs: &[Run], out: &mut Vec<Problem>) {
    for run in runs {
        let file = format!("{RESULTS}/{}/", run.name);
        for (what, missing) in [
            ("command", run.command.is_none()),
            ("host.txt", run.host.is_none()),
            ("NOTES.md", run.notes.is_none()),
        ] {
            if missing {
                out.push(Problem {
                    file: file.clone(),
                    line: 0,
                    message: format!("no {what}: every run folder has command, host.txt and NOTES.md (write what is known)"),
                });
            }
        }
        for f in &run.files {
            let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
            let program = matches!(ext, "sh" | "py" | "rs" | "c" | "lua" | "diff" | "patch")
                || f.file_name().is_some_and(|n| n == "Cargo.toml")
                || is_executable(&root.join(RESULTS).join(&run.name).join(f));
            if program {
                out.push(Problem {
                    file: format!("{file}{}", f.display()),
                    line: 0,
                    message: "a program or patch among the results: move what is worth rerunning into a bench case or flag, and delete it here".into(),
                });
            }
        }
    }
}

/// Whether `path` has an execute bit (always false where there are none).
fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// The generated files that differ from what is on disk, and stale tables.
pub fn check_generated(root: &Path, generated: &BTreeMap<String, String>, out: &mut Vec<Problem>) {
    for (path, want) in generated {
        let have = std::fs::read_to_string(root.join(path)).ok();
        if have.as_deref() != Some(want.as_str()) {
            out.push(Problem {
                file: path.clone(),
                line: 0,
                message: format!(
                    "{}: run `statepipe bench report` and commit the result",
                    if have.is_none() {
                        "missing"
                    } else {
                        "out of date"
                    }
                ),
            });
        }
    }
    if let Ok(entries) = std::fs::read_dir(root.join(TABLES)) {
        for entry in entries.flatten() {
            let path = format!("{TABLES}/{}", entry.file_name().to_string_lossy());
            if !generated.contains_key(&path) {
                out.push(Problem {
                    file: path,
                    line: 0,
                    message: "no run renders this table any more: run `statepipe bench report`, which removes it".into(),
                });
            }
        }
    }
}
