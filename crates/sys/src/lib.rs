//! Host facts every statepipe layer needs, measured in one place.
//!
//! The ring benchmarks, the pipeline's pinned stages and the cluster's worker
//! processes all ask the same questions of the machine: which CPUs may this
//! process run on, how many of them can it keep busy, and how to keep a
//! thread on one of them. Answered separately, the answers drift (one layer
//! honours the cgroup quota, another does not) and two layers of one run
//! size themselves differently. This crate answers them once:
//!
//! - [`cpus`] has [`usable_cpus`](cpus::usable_cpus) — the affinity mask, the
//!   cgroup CPU quota (v2 `cpu.max`, v1 `cpu.cfs_quota_us`, found through
//!   `/proc/self/cgroup` and `/proc/self/mountinfo`), the count of CPUs they
//!   leave and a one-line explanation of it — and
//!   [`workers_from_env`](cpus::workers_from_env) for a count the user set;
//! - [`pin`] has [`pin_current_thread`](pin::pin_current_thread),
//!   [`pin_current_thread_for_now`](pin::pin_current_thread_for_now),
//!   [`set_current_thread_nice`](pin::set_current_thread_nice),
//!   [`set_current_thread_batch`](pin::set_current_thread_batch) and
//!   [`set_current_thread_fifo`](pin::set_current_thread_fifo);
//! - [`auth`] has the [`Secret`](auth::Secret) processes of one run share
//!   and its challenge-response;
//! - [`durable`] writes a file atomically and durably, in the caller's
//!   thread or on a writer thread of its own (checkpoints), and paces a
//!   large write to the disk so that other files' fsyncs do not wait
//!   behind it;
//! - [`lock`] keeps a folder to one process at a time
//!   ([`FolderLock`](lock::FolderLock));
//! - [`rss`] reads the process's resident memory and its peak, and resets
//!   the peak, to account for the memory of each phase of a run.
//!
//! It is the bottom of the dependency graph: it depends on no other statepipe
//! crate, and holds no policy (how many workers to start, where to pin
//! them); callers decide that from the facts.
//!
//! ```
//! let cpus = statepipe_sys::cpus::usable_cpus();
//! assert!(cpus.count >= 1 && cpus.count <= cpus.ids.len());
//! eprintln!("cpus: {cpus}");
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs, unreachable_pub)]

pub mod auth;
mod cgroup;
pub mod cpus;
pub mod durable;
pub mod lock;
pub mod pin;
pub mod rss;
