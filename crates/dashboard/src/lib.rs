//! A live, read-only web page for a running statepipe process: the page,
//! JSON snapshots, a Server-Sent Events stream and Prometheus metrics, over
//! one HTTP listener of its own.
//!
//! - A [`Source`] says what the process is doing: a JSON snapshot (its page
//!   draws it) and the Prometheus text. [`EvolveSource`] reads the evolve
//!   engine's [`Telemetry`](statepipe_cluster::Telemetry); with the
//!   `pipeline` and `serve` features, `PipelineSource` and `ServiceSource`
//!   read a pipeline and the service.
//! - [`Dashboard::start`] serves a source until the [`Dashboard`] is dropped.
//!
//! The run never waits for its dashboard: sources only read counters and
//! bounded buffers, one publisher thread makes a snapshot four times a
//! second while someone watches, and slow clients skip snapshots or are
//! disconnected. See `README.md` beside this crate for the endpoints and the
//! snapshots' JSON.
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod assets;
mod error;
mod evolve;
#[cfg(feature = "pipeline")]
mod pipeline;
mod server;
#[cfg(feature = "serve")]
mod service;
mod source;

pub use error::DashboardError;
pub use evolve::EvolveSource;
#[cfg(feature = "pipeline")]
pub use pipeline::PipelineSource;
pub use server::{Dashboard, Options, TOKEN_ENV};
#[cfg(feature = "serve")]
pub use service::ServiceSource;
pub use source::{Kind, Source};
