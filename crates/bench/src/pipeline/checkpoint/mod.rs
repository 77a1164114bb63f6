//! The `checkpoint/*` cases of `statepipe bench pipeline`: what checkpoints, a hot
//! upgrade and a restore cost a running stateful pipeline.
//!
//! The pipeline: three durable stages on two workers (plan `[0, 1, 1]`) —
//! `count` (a `u64` counter), `table` (a `Vec<u64>` of `slots` slots, filled with
//! full-width values, each item adding itself to the slot its hash picks) and `sum` (a
//! running sum) — fed from a range on
//! the first worker and folded on the second (`deploy_with`), so no other thread takes
//! part besides the checkpoint writer and timer.
//!
//! | case | unit | contenders |
//! |---|---|---|
//! | `checkpoint/{8B,1MiB,64MiB}` | M items/s | no checkpoints; `Config::checkpoint_every(1 s)`; `(100 ms)` |
//! | `checkpoint/{..}/max-stall` | µs | the same samples: the longest `CheckpointInfo::max_stall` of the run's checkpoints |
//! | `checkpoint/{..}/taken` | checkpoints | the same samples: checkpoints completed during the run |
//! | `checkpoint/{..}/vs-none` | x | the same samples: each rate over the same round's rate without checkpoints (a paired ratio) |
//! | `checkpoint/upgrade/{p50,p99,max}` | µs | items sent at a steady rate, latency from send to output, inside a window around the middle: without an upgrade; with `Running::upgrade` of `table` (1 MiB) at the middle |
//! | `checkpoint/restore-64MiB`, `checkpoint/write-64MiB` | s | `Checkpoint::latest` + deploy with `Config::restore` until deploy returns; the checkpoint's own `duration` |
//!
//! A throughput sample runs for a fixed time from its first item; its rate is the
//! items out over the time from the first item in to the last out (deployment and the
//! final checkpoint's write excluded: neither is steady-state work). Every sample checks
//! that no item was lost or duplicated: the counter, the table's sum and the folded
//! sum must all match the items sent.
//!
//! The stall, count and paired-ratio rows are read back from the throughput samples
//! (their groups replay what those samples recorded, they run nothing), so a filter
//! that selects one brings the other along. Checkpoints go under [`root_dir`].

mod base;
mod groups;
mod run;
mod targets;
#[cfg(test)]
mod tests;

pub use base::{
    case_names, describe, filesystem_of, root_dir, CheckpointSizes, DIR_ENV, EVERY_100MS_RATIO,
    EVERY_1S_RATIO, RESTORE_CASES, RESTORE_S, SIZE_LABELS, STALL_US, UPGRADE_CASES, UPGRADE_P99_US,
};
pub use groups::{groups, restore_group, size_groups, upgrade_group};
pub use run::{restore, throughput, upgrade_latency, Latency, Restore, Throughput};
pub use targets::targets;
