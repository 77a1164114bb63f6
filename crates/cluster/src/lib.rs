//! The distributed evolve engine: states live on worker processes; a
//! single-threaded event-loop master batches evolve requests and steals
//! queued states for idle workers.
//!
//! - [`evolve`]: the user's [`Evolve`](evolve::Evolve) trait; ids and RNGs
//!   derived from `(seed, step, parent)`, so results do not depend on the
//!   number of workers.
//! - [`engine`]: the [`Engine`](engine::Engine) API and the single-process
//!   reference [`Local`](engine::Local).
//! - [`master`]: [`Master`](master::Master), its [`Scheduler`](master::sched::Scheduler)
//!   (the state machine) and two drivers (event loop, threaded baseline).
//! - [`worker`]: the worker loop; [`protocol`]: frames; [`auth`]: HMAC.
//! - [`pf`]: the particle filter (Nile, pharmacokinetic); [`spawn`]: local
//!   worker processes; [`cmd`]: the `statepipe pf | worker | master` commands;
//!   [`bench`]: `statepipe bench cluster`.
//!
//! See `README.md` beside this crate for the protocol and the state machines.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod auth;
pub mod bench;
pub mod cmd;
pub mod engine;
pub mod error;
pub mod evolve;
pub mod master;
pub mod models;
pub mod pf;
pub mod protocol;
pub mod registry;
pub mod spawn;
pub mod stats;
pub mod wire;
pub mod worker;

pub use error::Error;
