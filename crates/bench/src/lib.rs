//! Benchmarks of statepipe against named peers, run side by side in one process.
//!
//! Every `statepipe bench <what>` subcommand is built from the same pieces:
//!
//! - [`host`] measures the machine first (usable CPUs, a cross-core ping-pong), because
//!   a noisy host reverses rankings and the reader must know which kind of run they see;
//! - [`harness`] runs *groups* of contenders (ours and the peers) sample by sample,
//!   interleaved round-robin, and reduces the samples to a median, min and max;
//! - [`report`] holds the JSON shape shared by every subcommand, the console table and
//!   the SVG chart of the ratios ours/peer;
//! - [`ring`] is the first user: the Disruptor ring against the `disruptor` crate,
//!   rtrb, crossbeam-channel and `std::sync::mpsc`;
//! - [`pipeline`] holds the workloads of pipelines of state machines and their peers
//!   (threads and channels, tokio, `tracing-appender`);
//! - [`sizing`] runs one pipeline inside a real cgroup CPU quota ([`cgroup`]), each
//!   contender in a child process, to show what sizing workers to the quota is worth;
//! - [`apps`] runs Graph500 BFS and k-nucleotide against rayon and plain-threads peers;
//! - [`serve`] drives `statepipe serve` and its axum and actix-web peers with `wrk` and
//!   `oha` over HTTP, each server in its own pinned process;
//! - [`cluster`] measures the distributed evolve engine's masters with workers that
//!   sleep for their cost, so hundreds of worker processes fit on a small machine.
//!
//! A benchmark that gives a wrong answer is worse than none: every workload checks its
//! result (the sums the consumers saw) and fails with a [`BenchError`] when it is wrong,
//! and every sample is bounded in time by a [`watchdog`], so a run never hangs.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod apps;
pub mod cgroup;
pub mod cluster;
mod error;
pub mod harness;
pub mod host;
pub mod metric;
pub mod pipeline;
pub mod report;
pub mod ring;
pub mod serve;
pub mod sizing;
pub mod stats;
pub mod watchdog;

pub use error::BenchError;

/// The READMEs' Rust examples, compiled and run as doctests of this crate
/// (which depends on every crate they use), so they cannot drift from the
/// code. Blocks that are excerpts or signatures are marked `ignore` there.
#[cfg(doctest)]
mod readmes {
    #[doc = include_str!("../../../README.md")]
    struct Top;
    #[doc = include_str!("../../apps/README.md")]
    struct Apps;
    #[doc = include_str!("../../cluster/README.md")]
    struct Cluster;
    #[doc = include_str!("../../models/README.md")]
    struct Models;
    #[doc = include_str!("../../pipeline/README.md")]
    struct Pipeline;
    #[doc = include_str!("../../ring/README.md")]
    struct Ring;
    #[doc = include_str!("../../serve/README.md")]
    struct Serve;
    #[doc = include_str!("../../sys/README.md")]
    struct Sys;
}
