//! The file `statepipe pf|master --checkpoint` writes: its contents, the
//! check of one before a run, and what a rollback to one says.

use std::path::Path;

use anyhow::Context as _;

use statepipe_cluster::pf::PfState;
use statepipe_cluster::{Snapshot, WorkerLost};

/// What `--checkpoint` writes: the run's identity, the master's snapshot
/// and the filter's state after the same step.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Checkpoint {
    /// What must match for a run to resume it (its options).
    pub(crate) run: String,
    pub(crate) snapshot: Snapshot,
    pub(crate) filter: PfState,
}

/// Whether `resume` names a checkpoint of the run `key` and `checkpoint` a
/// file that can be written.
pub(crate) fn check(
    resume: Option<&Path>,
    checkpoint: Option<&Path>,
    key: &str,
) -> anyhow::Result<()> {
    if let Some(path) = resume {
        read(path, key)?;
    }
    if let Some(path) = checkpoint {
        statepipe_sys::durable::check_writable(path)
            .with_context(|| format!("cannot write the checkpoint {}", path.display()))?;
    }
    Ok(())
}

/// The checkpoint at `path`, if it is one of the run `key`.
pub(crate) fn read(path: &Path, key: &str) -> anyhow::Result<Checkpoint> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("reading the checkpoint {}", path.display()))?;
    let c: Checkpoint = postcard::from_bytes(&bytes)
        .with_context(|| format!("{} is not a statepipe checkpoint", path.display()))?;
    anyhow::ensure!(
        c.run == key,
        "the checkpoint {} is of another run: {}; this run: {key} (give the same options)",
        path.display(),
        c.run,
    );
    Ok(c)
}

/// The line said on stderr when the run rolled back to the checkpoint
/// after step `to` because of `cause`.
pub(crate) fn rolled_back(to: usize, cause: &WorkerLost, rollbacks: u32) -> String {
    let who = if cause.others.is_empty() {
        format!("worker {} ({})", cause.worker, cause.addr)
    } else {
        let all: Vec<String> = std::iter::once(cause.worker)
            .chain(cause.others.iter().map(|o| o.0))
            .map(|w| w.to_string())
            .collect();
        format!("workers {}", all.join(", "))
    };
    format!(
        "statepipe: {who} lost ({}), and no copy of {} states survived; rolled back to the \
         checkpoint after step {to} (rollback {rollbacks} to it), going on with the workers left",
        cause.reason,
        cause.lost.len() + cause.unfinished.len(),
    )
}
