//! Tests that reach inside the crate: frames and decoders, fake workers
//! that misbehave on the wire, and the scheduler driven without sockets.

#[path = "../../tests/common/mod.rs"]
mod common;

pub(crate) use common::*;

mod failures;
mod protocol;
mod sched;
