//! Tests that reach inside the crate: frames and decoders, fake workers
//! that misbehave on the wire. (The scheduler's own tests, driven without
//! sockets, are in `master/sched/tests.rs`.)

#[path = "../../tests/common/mod.rs"]
mod common;

pub(crate) use common::*;

#[path = "../../../../scripts/skip.rs"]
mod skip;

mod auto;
mod elastic;
mod failures;
mod heartbeat;
mod hung;
pub(crate) mod kid_ids;
mod large;
mod protocol;
mod resume;
mod rollback;
mod slow_link;
mod stop;
mod telemetry;
