//! The recorded runs (`bench/results/<run>/`) and the files generated from them: the
//! index `bench/results/README.md`, the book's `docs/src/performance/runs.md` and a
//! table per run whose JSON is a bench [`Report`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use statepipe_bench::report::{markdown as md_table, Report};

use super::markdown::links;

/// Where the runs live, relative to the repository root.
pub const RESULTS: &str = "bench/results";
/// The generated index of runs.
pub const INDEX: &str = "bench/results/README.md";
/// The generated book page.
pub const RUNS_PAGE: &str = "docs/src/performance/runs.md";
/// The folder of generated tables.
pub const TABLES: &str = "docs/src/performance/tables";

/// One recorded run, as read from its folder.
#[derive(Debug, Clone)]
pub struct Run {
    /// The folder's name.
    pub name: String,
    /// `date:` from `host.txt`, if any.
    pub date: Option<String>,
    /// `command`, trimmed.
    pub command: Option<String>,
    /// `host.txt`, trimmed.
    pub host: Option<String>,
    /// `NOTES.md`.
    pub notes: Option<String>,
    /// Every file of the folder, relative to it, sorted.
    pub files: Vec<PathBuf>,
    /// The JSON files that parse as a bench report, with their reports.
    pub reports: Vec<(PathBuf, Report)>,
}

/// Every run under `root/bench/results`, sorted by name (numbers in names compare as
/// numbers: `ring-run2` before `ring-run10`).
pub fn load(root: &Path) -> anyhow::Result<Vec<Run>> {
    let dir = root.join(RESULTS);
    let mut runs = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            runs.push(load_run(&entry.path())?);
        }
    }
    runs.sort_by_key(|run| natural_key(&run.name));
    Ok(runs)
}

fn load_run(dir: &Path) -> anyhow::Result<Run> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    files.sort();
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
    let host = read("host.txt").map(|s| s.trim().to_string());
    let date = host.as_deref().and_then(|h| {
        h.lines()
            .find_map(|l| l.strip_prefix("date:"))
            .and_then(|d| d.split_whitespace().next())
            .map(str::to_string)
    });
    let mut reports = Vec::new();
    for file in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "json"))
    {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        if let Ok(report) = serde_json::from_str::<Report>(&text) {
            reports.push((file.clone(), report));
        }
    }
    Ok(Run {
        name,
        date,
        command: read("command").map(|s| s.trim().to_string()),
        host,
        notes: read("NOTES.md"),
        files,
        reports,
    })
}

/// Every file under `dir`, relative to `base`.
pub fn walk(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            walk(base, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(base) {
            out.push(rel.to_path_buf());
        }
    }
    Ok(())
}

/// A sort key in which runs of digits compare as numbers.
fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            let mut digits = c.to_string();
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                digits.push(d);
                chars.next();
            }
            key.push((
                std::mem::take(&mut text),
                digits.parse().unwrap_or(u64::MAX),
            ));
        } else {
            text.push(c);
        }
    }
    key.push((text, 0));
    key
}

impl Run {
    /// The note's first paragraph of prose (after any headings; a paragraph that is a
    /// table, a list, code, or only introduces a command is passed over unless nothing else
    /// is left), links reduced to their text and lines joined.
    pub fn summary(&self) -> String {
        let Some(notes) = &self.notes else {
            return "(no NOTES.md)".to_string();
        };
        let paragraphs = paragraphs(notes);
        let prose = |p: &&String| {
            let first = p.trim_start();
            !(first.starts_with(['|', '-', '*', '#', '>', '<'])
                || first.starts_with("```")
                || first.starts_with("~~~")
                || first.starts_with("Command")
                || first.starts_with("See ")
                || first.starts_with("Same ")
                || first.starts_with("The command of")
                || first.trim_end().ends_with(':'))
        };
        let chosen = paragraphs
            .iter()
            .find(prose)
            .or(paragraphs.iter().find(|p| !p.starts_with('#')))
            .cloned()
            .unwrap_or_default();
        unlink(&chosen)
    }

    /// The note's title (its `# ` line) where it says more than the run's name, without
    /// a leading `RUNS: `.
    pub fn title(&self) -> Option<String> {
        let line = self
            .notes
            .as_deref()?
            .lines()
            .next()?
            .strip_prefix("# ")?
            .trim();
        let line = match line.split_once(": ") {
            Some((runs, rest)) if runs.contains(&self.name) || runs.contains("-run") => rest,
            _ => line,
        };
        let line = unlink(line);
        if line == self.name {
            return None;
        }
        let mut chars = line.chars();
        let line = match chars.next() {
            Some(first) => first.to_uppercase().chain(chars).collect::<String>(),
            None => return None,
        };
        Some(line)
    }

    /// What the run is, in one line for the index: the note's title, else the first
    /// sentence of its first paragraph.
    pub fn first_sentence(&self) -> String {
        let s = self.title().unwrap_or_else(|| self.summary());
        let cut = s
            .char_indices()
            .find(|&(i, c)| c == '.' && s[i + 1..].starts_with(' ') && i > 20)
            .map_or(s.len(), |(i, _)| i + 1);
        let mut out: String = s[..cut].to_string();
        if out.chars().count() > 200 {
            out = out.chars().take(197).collect::<String>() + "...";
        }
        out.replace('|', "\\|")
    }

    /// The host in one line: `host.txt`'s `machine:`, `host:` (the bench's host check) and
    /// `notebook:` lines, else its first lines, the date left out.
    pub fn host_line(&self) -> String {
        let Some(host) = &self.host else {
            return "not recorded".to_string();
        };
        let lines: Vec<&str> = host
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("date:"))
            .collect();
        let tagged: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| {
                ["machine:", "host:", "notebook:"]
                    .iter()
                    .any(|t| l.starts_with(t))
            })
            .take(3)
            .collect();
        let chosen = if tagged.is_empty() {
            lines.into_iter().take(2).collect()
        } else {
            tagged
        };
        if chosen.is_empty() {
            return "not recorded".to_string();
        }
        chosen
            .iter()
            .map(|l| l.strip_prefix("host: ").unwrap_or(l))
            .map(|l| {
                if l.chars().count() > 240 {
                    l.chars().take(237).collect::<String>() + "..."
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The paragraphs of `text` (blank-line separated, lines trimmed and joined by spaces);
/// fenced code blocks are one paragraph each, starting with the fence.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
        }
        if t.is_empty() && !fenced {
            if !current.is_empty() {
                out.push(current.join(" "));
                current.clear();
            }
            continue;
        }
        current.push(t);
    }
    if !current.is_empty() {
        out.push(current.join(" "));
    }
    out
}

/// Links reduced to their text (their targets are relative to the note, not to the page
/// the summary is copied into).
fn unlink(text: &str) -> String {
    let mut out = text.to_string();
    let mut done = usize::MAX;
    let mut found = links(text);
    found.sort_by_key(|l| std::cmp::Reverse(l.span.end));
    for link in &found {
        // A link inside one already replaced (an image in a link) went with it.
        if link.span.end <= done {
            done = link.span.start;
            let inner = text[link.text_span.clone()].to_string();
            let inner = inner.strip_prefix('!').unwrap_or(&inner).to_string();
            out.replace_range(link.span.clone(), &inner);
        }
    }
    out
}

/// Every generated file: path relative to the root, and its content.
pub fn generate(runs: &[Run]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert(INDEX.to_string(), index(runs));
    out.insert(RUNS_PAGE.to_string(), runs_page(runs));
    for run in runs.iter().filter(|r| !r.reports.is_empty()) {
        out.insert(format!("{TABLES}/{}.md", run.name), tables(run));
    }
    out
}

const NOTICE: &str = "Generated by `statepipe bench report` from the run folders; do not edit. \
Edit a run's `NOTES.md`, `command` or `host.txt`, then run `statepipe bench report`.";

fn index(runs: &[Run]) -> String {
    let mut out = format!(
        "# Recorded benchmark runs\n\n{NOTICE}\n\nEach run is a folder here: what the benchmark \
         wrote (`*.json`, `*.txt`, `*.svg`), `command` (how it was run), `host.txt` (the host \
         and the date) and `NOTES.md` (what it measured and showed). The book's index, with \
         the commands and hosts: [docs/src/performance/runs.md](../../{RUNS_PAGE}).\n\n\
         | run | date | what |\n|---|---|---|\n"
    );
    for run in runs {
        let _ = writeln!(
            out,
            "| [{0}]({0}/) | {1} | {2} |",
            run.name,
            run.date.as_deref().unwrap_or("-"),
            run.first_sentence()
        );
    }
    out
}

fn runs_page(runs: &[Run]) -> String {
    let mut out = format!(
        "# Recorded runs\n\n{NOTICE}\n\nEvery figure the book quotes links to its run here. A run \
         is a folder of `bench/results/`: the benchmark's own output, the command, the host \
         and a note. Rerun a command on your machine before you believe any one number.\n"
    );
    for run in runs {
        let _ = write!(out, "\n## {}\n\n", run.name);
        let _ = writeln!(
            out,
            "- date: {}",
            run.date.as_deref().unwrap_or("not recorded")
        );
        let _ = writeln!(out, "- host: {}", run.host_line().replace('\n', " "));
        let _ = writeln!(
            out,
            "- folder: [bench/results/{0}/](../../../bench/results/{0}/)",
            run.name
        );
        if !run.reports.is_empty() {
            let _ = writeln!(out, "- results: [tables/{0}.md](tables/{0}.md)", run.name);
        }
        match &run.command {
            Some(command) => {
                let fence = if command.contains("```") {
                    "~~~~"
                } else {
                    "```"
                };
                let _ = write!(out, "\n{fence}sh\n{command}\n{fence}\n");
            }
            None => out.push_str("\nCommand not recorded.\n"),
        }
        if let Some(title) = run.title() {
            let _ = writeln!(out, "\n**{title}**");
        }
        let _ = writeln!(out, "\n{}", run.summary());
    }
    out
}

fn tables(run: &Run) -> String {
    let mut out = format!("<!-- {NOTICE} Source: bench/results/{}/ -->\n", run.name);
    for (file, report) in &run.reports {
        let _ = write!(
            out,
            "\n**`{}`**: `bench {}`, {} CPUs, cross-core ping-pong {:.0} ns\n\n",
            file.display(),
            report.bench,
            report.host.cpus,
            report.host.pingpong_ns
        );
        out.push_str(&md_table::render(report));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut names = ["ring-run10", "ring-run2", "ring-run1", "pf-run3"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(names, ["pf-run3", "ring-run1", "ring-run2", "ring-run10"]);
    }

    #[test]
    fn summary_is_the_first_paragraph_without_links() {
        let run = Run {
            name: "x".into(),
            date: None,
            command: None,
            host: None,
            notes: Some(
                "# x\n\nCommand:\n\n```\nrun\n```\n\nFirst [line](a.md)\nsecond.\n\nMore.\n".into(),
            ),
            files: vec![],
            reports: vec![],
        };
        assert_eq!(run.summary(), "First line second.");
    }
}
