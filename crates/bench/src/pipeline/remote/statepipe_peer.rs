//! PLACEHOLDER: statepipe's own contender of the remote cases, one cut edge of a
//! distributed `statepipe-pipeline` (crates/pipeline/src/remote/), is not written yet.
//! [`StatepipeEdge::available`] says so, and the groups skip it (the run's header
//! names it as skipped); its rows, ratios and targets appear once it is.
//!
//! To fill it: make `available` return `Ok(())` and `child` play both ends, as the
//! peers beside this file do: on `Role::Recv`, listen on `req.addresses[1]` (or deploy
//! the receiving half of a two-process plan there), call `ready()` once the sender may
//! connect, feed every arriving [`super::wire::Item`] to a [`super::wire::Tally`] until
//! `done()`, and return `ChildReport::Received(tally.report())`; on `Role::Send`,
//! connect, send `req.load.items()` items `Item::new(seq, 0)` (flood) or
//! `Item::new(seq, now_ns())` after `Pacer::wait(seq)` (paced), flush, and return
//! `ChildReport::Sent { items }`. The parent side ([`super::child::Children`]) is
//! shared and needs no change.

use super::child::{ChildReport, ChildRequest};
use super::Peer;
use crate::report::OURS;
use crate::BenchError;

/// Why the contender is skipped.
pub const NOT_AVAILABLE: &str = "not available: the distributed pipeline's cut edge \
     (crates/pipeline/src/remote/) is not plugged into this benchmark yet";

/// statepipe: one cut edge between two processes (placeholder, skipped).
#[derive(Debug, Clone, Copy, Default)]
pub struct StatepipeEdge;

impl Peer for StatepipeEdge {
    fn name(&self) -> &'static str {
        OURS
    }

    fn config(&self) -> String {
        "one cut edge over TCP, credit-based flow control".into()
    }

    fn available(&self) -> Result<(), String> {
        Err(NOT_AVAILABLE.into())
    }

    fn child(
        &self,
        _req: &ChildRequest,
        _ready: &mut dyn FnMut(),
    ) -> Result<ChildReport, BenchError> {
        Err(BenchError::failed(OURS, NOT_AVAILABLE))
    }
}
