//! statepipe's contenders: one cut edge of a distributed pipeline on its own
//! (`statepipe_pipeline::remote`: the same batching, credits and handshake as
//! the edges between a pipeline's parts), in its two encodings:
//!
//! - [`StatepipeEdge::RAW`] (`statepipe`, the row the targets read): a
//!   [`RawLink`] of [`Item`]s, which are `bytemuck::Pod`, so each crosses as
//!   its 64 bytes (as the book's `docs/src/concepts/remote-pipelines.md`
//!   recommends for fixed-size items);
//! - [`StatepipeEdge::SERDE`] (`statepipe-serde`): a [`Link`], postcard, the
//!   encoding of any serde type on a pipeline's edge (varint integers: the
//!   items' large check and time words cost up to 10 bytes and a loop each).
//!
//! The receiver listens with a [`LinkListener`] and grants a pipeline's default
//! window ([`WINDOW`] items); the sender calls `send` per item, and in a paced
//! sample `flush` whenever the next item is not due yet (it has nothing more to
//! send, as a pipeline's edge flushes when its sender runs out of items), at most
//! once per [`COALESCE_NS`] while the next item is due sooner than that.

use statepipe_pipeline::remote::{Link, LinkListener, RawLink, RemoteError};
use statepipe_sys::auth::Secret;

use super::child::{ChildReport, ChildRequest, Role};
use super::wire::{now_ns, Item, Load, Pacer, Tally};
use super::Peer;
use crate::report::OURS;
use crate::BenchError;

/// Credits the receiver grants: a distributed pipeline's default
/// (`RemoteConfig::credits`).
pub const WINDOW: u64 = 1 << 16;

/// In a paced sample, the sender writes what it has queued once it is idle (the
/// next item is not due yet), but at most once per this many ns while items keep
/// coming sooner than that: a `write` per 64-byte item costs more than the item
/// (here 1–3 µs), and a stream of one-item TCP segments fills the receiver's socket
/// buffer with per-segment overhead until the kernel drops and retransmits.
pub const COALESCE_NS: u64 = 10_000;

/// The secret both children prove (any will do: they are started together).
const SECRET: &str = "statepipe bench remote";

/// statepipe: one cut edge over TCP, credit-based flow control.
#[derive(Debug, Clone, Copy)]
pub struct StatepipeEdge {
    raw: bool,
}

impl StatepipeEdge {
    /// Items as their bytes ([`RawLink`]).
    pub const RAW: StatepipeEdge = StatepipeEdge { raw: true };
    /// Items through serde and postcard ([`Link`]).
    pub const SERDE: StatepipeEdge = StatepipeEdge { raw: false };
}

/// The `impl` of the serde rows.
pub const SERDE_NAME: &str = "statepipe-serde";

fn failed(who: &str, e: RemoteError) -> BenchError {
    BenchError::failed(who, e.to_string())
}

/// Either sending end, as the sender's loop needs it.
enum Tx {
    Raw(RawLink<Item>),
    Serde(Link<Item>),
}

impl Tx {
    #[inline]
    fn send(&mut self, item: &Item) -> Result<(), RemoteError> {
        match self {
            Tx::Raw(l) => l.send(item),
            Tx::Serde(l) => l.send(item),
        }
    }

    fn flush(&mut self) -> Result<(), RemoteError> {
        match self {
            Tx::Raw(l) => l.flush(),
            Tx::Serde(l) => l.flush(),
        }
    }

    fn finish(self) -> Result<u64, RemoteError> {
        match self {
            Tx::Raw(l) => l.finish(),
            Tx::Serde(l) => l.finish(),
        }
    }
}

impl StatepipeEdge {
    fn receive(&self, req: &ChildRequest, ready: &mut dyn FnMut()) -> Result<Tally, RemoteError> {
        let listener = LinkListener::bind(req.addresses[1].as_str(), Secret::new(SECRET))?;
        ready();
        let mut tally = Tally::new(req.load);
        // Reads to the end (past the last item), so that the sender's `finish` returns.
        if self.raw {
            let mut rx = listener.accept_raw::<Item>(WINDOW)?;
            while rx.recv_batch(|item| tally.add(&item))? {}
        } else {
            let mut rx = listener.accept::<Item>(WINDOW)?;
            while rx.recv_batch(|item| tally.add(&item))? {}
        }
        Ok(tally)
    }

    fn send(&self, req: &ChildRequest) -> Result<u64, RemoteError> {
        let (addr, secret) = (req.addresses[1].as_str(), Secret::new(SECRET));
        let mut tx = if self.raw {
            Tx::Raw(RawLink::connect(addr, &secret)?)
        } else {
            Tx::Serde(Link::connect(addr, &secret)?)
        };
        let items = req.load.items();
        match req.load {
            Load::Flood { .. } => {
                for seq in 0..items {
                    tx.send(&Item::new(seq, 0))?;
                }
            }
            Load::Paced { rate, .. } => {
                let pacer = Pacer::start(rate);
                let mut flushed = 0;
                for seq in 0..items {
                    pacer.wait(seq);
                    tx.send(&Item::new(seq, now_ns()))?;
                    let (now, next) = (now_ns(), pacer.due_ns(seq + 1));
                    if now < next && (next - now >= COALESCE_NS || now - flushed >= COALESCE_NS) {
                        tx.flush()?;
                        flushed = now;
                    }
                }
            }
        }
        tx.finish()
    }
}

impl Peer for StatepipeEdge {
    fn name(&self) -> &'static str {
        if self.raw {
            OURS
        } else {
            SERDE_NAME
        }
    }

    fn config(&self) -> String {
        let how = if self.raw {
            "RawLink: 64 raw bytes per item"
        } else {
            "Link: postcard"
        };
        format!("{how}, one cut edge over TCP, {WINDOW} credits")
    }

    fn child(
        &self,
        req: &ChildRequest,
        ready: &mut dyn FnMut(),
    ) -> Result<ChildReport, BenchError> {
        let who = format!("{} {:?}", self.name(), req.role);
        match req.role {
            Role::Recv => Ok(ChildReport::Received(
                self.receive(req, ready)
                    .map_err(|e| failed(&who, e))?
                    .report(),
            )),
            Role::Send => Ok(ChildReport::Sent {
                items: self.send(req).map_err(|e| failed(&who, e))?,
            }),
        }
    }
}
