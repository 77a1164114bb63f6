//! The cases' names, sizes and labels, and where checkpoints go.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable naming the folder the checkpoints are written under
/// (default `target/bench-checkpoint`).
pub const DIR_ENV: &str = "STATEPIPE_BENCH_CHECKPOINT_DIR";

/// The labels of the three state sizes, in case names.
pub const SIZE_LABELS: [&str; 3] = ["8B", "1MiB", "64MiB"];

/// The upgrade cases' metrics.
pub const UPGRADE_CASES: [&str; 3] = [
    "checkpoint/upgrade/p50",
    "checkpoint/upgrade/p99",
    "checkpoint/upgrade/max",
];
/// The restore cases' metrics.
pub const RESTORE_CASES: [&str; 2] = ["checkpoint/restore-64MiB", "checkpoint/write-64MiB"];

/// Labels at the start of each contender's `config`, to find its row.
pub(super) const NONE: &str = "no checkpoints";
pub(super) const NO_UPGRADE: &str = "no upgrade";
pub(super) const UPGRADE: &str = "upgrade at the middle";

/// Throughput with a checkpoint every second, as a share of none (1 MiB states).
pub const EVERY_1S_RATIO: f64 = 0.97;
/// The same with one every 100 ms.
pub const EVERY_100MS_RATIO: f64 = 0.90;
/// The longest a worker may stall at a barrier with 1 MiB of state, in µs.
pub const STALL_US: f64 = 1_000.0;
/// What an upgrade may add to the p99 latency of the items around it, in µs.
pub const UPGRADE_P99_US: f64 = 1_000.0;
/// The longest a restore of 64 MiB of state may take, in s.
pub const RESTORE_S: f64 = 0.5;

/// How big and long the checkpoint cases are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointSizes {
    /// How long each throughput sample feeds items.
    pub run: Duration,
    /// The two checkpoint periods compared with none (1 s and 100 ms in a full run).
    pub periods: [Duration; 2],
    /// Slots of `u64` in the table for each of [`SIZE_LABELS`].
    pub slots: [usize; 3],
    /// Slots of the upgraded table (1 MiB in a full run).
    pub upgrade_slots: usize,
    /// How long the upgrade samples send items.
    pub upgrade_run: Duration,
    /// Items per second sent in the upgrade samples.
    pub upgrade_rate: u64,
    /// Half the window of items (by send time) around the middle whose latency counts.
    pub upgrade_window: Duration,
    /// Slots of the restored table (64 MiB in a full run).
    pub restore_slots: usize,
    /// Items through the pipeline before the restore case's checkpoint.
    pub restore_items: u64,
}

pub(super) const MIB_SLOTS: usize = (1 << 20) / 8;

impl CheckpointSizes {
    /// A full run.
    pub const FULL: CheckpointSizes = CheckpointSizes {
        run: Duration::from_secs(3),
        periods: [Duration::from_secs(1), Duration::from_millis(100)],
        slots: [1, MIB_SLOTS, 64 * MIB_SLOTS],
        upgrade_slots: MIB_SLOTS,
        upgrade_run: Duration::from_secs(1),
        upgrade_rate: 20_000,
        upgrade_window: Duration::from_millis(100),
        restore_slots: 64 * MIB_SLOTS,
        restore_items: 1_000_000,
    };

    /// `--quick`: shorter samples, the same states.
    pub const QUICK: CheckpointSizes = CheckpointSizes {
        run: Duration::from_millis(1_200),
        upgrade_run: Duration::from_millis(600),
        restore_items: 100_000,
        ..CheckpointSizes::FULL
    };

    /// Small enough for a debug-build test (the labels stay those of a full run).
    #[cfg(test)]
    pub(in crate::pipeline) const TINY: CheckpointSizes = CheckpointSizes {
        run: Duration::from_millis(300),
        periods: [Duration::from_millis(20), Duration::from_millis(5)],
        slots: [1, 128, 8192],
        upgrade_slots: 128,
        upgrade_run: Duration::from_millis(100),
        upgrade_rate: 20_000,
        upgrade_window: Duration::from_millis(20),
        restore_slots: 8192,
        restore_items: 1_000,
    };
}

/// The throughput case of state size `label`.
pub(super) fn throughput_case(label: &str) -> String {
    format!("checkpoint/{label}")
}

pub(super) fn stall_case(label: &str) -> String {
    format!("checkpoint/{label}/max-stall")
}

pub(super) fn taken_case(label: &str) -> String {
    format!("checkpoint/{label}/taken")
}

pub(super) fn vs_none_case(label: &str) -> String {
    format!("checkpoint/{label}/vs-none")
}

/// Every case of this module, in run order.
pub fn case_names() -> Vec<String> {
    let mut names = Vec::new();
    for label in SIZE_LABELS {
        names.push(throughput_case(label));
        names.push(stall_case(label));
        names.push(taken_case(label));
        names.push(vs_none_case(label));
    }
    names.extend(UPGRADE_CASES.map(String::from));
    names.extend(RESTORE_CASES.map(String::from));
    names
}

/// Where the checkpoints go: `$STATEPIPE_BENCH_CHECKPOINT_DIR`, else
/// `target/bench-checkpoint` under the working directory.
pub fn root_dir() -> PathBuf {
    std::env::var_os(DIR_ENV)
        .map_or_else(|| PathBuf::from("target/bench-checkpoint"), PathBuf::from)
}

/// The file system `path` (or the nearest folder above it that exists) is on, as
/// `/proc/self/mounts` names it: `ext4 on /`; `?` where it cannot be told.
pub fn filesystem_of(path: &Path) -> String {
    let mut p = path.to_path_buf();
    while !p.exists() {
        if !p.pop() {
            break;
        }
    }
    let abs = std::fs::canonicalize(if p.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &p
    })
    .unwrap_or(p);
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return "?".into();
    };
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (dev, at, ty) = (f.next()?, f.next()?, f.next()?);
            abs.starts_with(at)
                .then(|| (at.len(), format!("{ty} on {at} ({dev})")))
        })
        .max_by_key(|(len, _)| *len)
        .map_or("?".into(), |(_, s)| s)
}

pub(super) fn bytes_label(slots: usize) -> String {
    let bytes = slots * 8;
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

pub(super) fn period_label(p: Duration) -> String {
    if p.as_millis() >= 1000 && p.as_millis() % 1000 == 0 {
        format!("{} s", p.as_secs())
    } else {
        format!("{} ms", p.as_millis())
    }
}

/// Lines describing the checkpoint cases, for the run's header.
pub fn describe(s: &CheckpointSizes) -> String {
    let root = root_dir();
    [
        format!(
            "pipeline: checkpoint: durable stages count -> table -> sum on workers(2), plan \
             [0,1,1], deploy_with; table = Vec<u64> of {} | {} | {}, each item adding itself \
             to one slot; {} per sample from the first item; checkpoints every {} | {} | none",
            bytes_label(s.slots[0]),
            bytes_label(s.slots[1]),
            bytes_label(s.slots[2]),
            period_label(s.run),
            period_label(s.periods[0]),
            period_label(s.periods[1]),
        ),
        format!(
            "pipeline: checkpoint: written under {} ({}; {DIR_ENV} to change)",
            root.display(),
            filesystem_of(&root)
        ),
        format!(
            "pipeline: checkpoint/upgrade: {} items/s for {}, table of {}; latency send -> \
             output of the items sent within ±{} of the middle, where the upgrade (migrate: \
             copy into a new state type) is asked for",
            s.upgrade_rate,
            period_label(s.upgrade_run),
            bytes_label(s.upgrade_slots),
            period_label(s.upgrade_window),
        ),
        format!(
            "pipeline: checkpoint/restore: a checkpoint of a {} table after {} items, then \
             Checkpoint::latest + deploy(Config::restore) timed until deploy returns (the \
             files were just written: read from the page cache)",
            bytes_label(s.restore_slots),
            s.restore_items
        ),
    ]
    .join("\n")
}

// ---------------------------------------------------------------------------------------
// The workload.
