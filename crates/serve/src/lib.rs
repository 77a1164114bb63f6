//! `statepipe-serve`: a durable HTTP item service on the statepipe ring.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod error;
pub mod journal;
pub mod store;

pub use error::ServeError;
