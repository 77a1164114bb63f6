//! Consumers: handler threads the ring runs, and pollers the user drives.
//!
//! Every consumer owns one sequence (the count of events it is done with),
//! stores it once per batch with Release, and handles event `s` only once
//! `s` is published and every consumer it depends on is past `s`.

mod chase;
mod handler;
mod poller;

pub(crate) use handler::{spawn, Access, Exclusive, Shared as SharedAccess};
pub use handler::{EventHandler, EventHandlerMut};
pub use poller::{EventPoller, EventPollerMut};
