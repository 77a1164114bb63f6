//! `statepipe-serve`: a durable HTTP item service on the statepipe ring.
//!
//! Requests are parsed on `mio` I/O threads, one per usable CPU. Reads are
//! answered there, from a read view `apply` publishes after each batch (a
//! read sent after the answer to a write arrived sees that write). Writes
//! are admitted by their expected queueing delay (429 at once otherwise)
//! and published on one multi-producer ring, where
//! `journal ∥ decode → apply → reply` handle them: every write is
//! journalled and fsynced (one fsync per batch) before its answer leaves;
//! `apply` owns the items without locks; answers go back to the I/O thread
//! that owns the connection. See the crate README (routes and errors) and
//! the repository's book, `docs/src/concepts/service.md` (how a request
//! flows, durability, the file formats).
//!
//! ```no_run
//! use statepipe_serve::{Config, Server};
//!
//! let server = Server::bind(Config::new("127.0.0.1:8080".parse()?, "data"))?;
//! println!("listening on {}", server.local_addr()?);
//! let stop = server.shutdown_handle(); // stop.shutdown() from a signal handler
//! server.run()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod admission;
mod business;
mod error;
pub mod http;
mod io;
pub mod journal;
mod metrics;
mod server;
mod spare;
pub mod store;
mod view;

pub use error::ServeError;
pub use metrics::{
    IoLabels, LatencySummary, Metrics, RefusalLabels, RequestCount, RequestLabels, ServiceSummary,
    StageLabels, STAGES,
};
pub use server::{
    run, Config, HandlerWait, Server, ShutdownHandle, DEFAULT_JOURNAL_SEGMENT,
    DEFAULT_MAX_QUEUE_DELAY, SHARED_CPU_NICE,
};
