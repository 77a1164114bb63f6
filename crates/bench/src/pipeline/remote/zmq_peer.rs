//! ZeroMQ PUSH/PULL between two processes, as its users and its own `perf/local_thr`
//! and `remote_thr` tools do it: the receiver binds a PULL socket, the sender connects
//! a PUSH socket and sends one message per item (ZeroMQ batches the small messages
//! into its TCP writes itself); default options (high-water marks of 1000 messages,
//! one I/O thread per context, infinite linger so that nothing sent is dropped at
//! the end).

use std::time::Duration;

use super::child::{ChildReport, ChildRequest, Role};
use super::wire::{now_ns, Item, Load, Pacer, Tally};
use super::Peer;
use crate::BenchError;

/// The `impl` of its rows.
pub const NAME: &str = "zmq";

/// How long the sender waits after `connect` before its first item: ZeroMQ connects in
/// the background, and a paced sample's first latencies should not include it.
const CONNECT_SETTLE: Duration = Duration::from_millis(50);

/// ZeroMQ PUSH/PULL over TCP loopback (the `zmq` crate, libzmq built from its
/// bundled source).
#[derive(Debug, Clone, Copy, Default)]
pub struct ZmqPushPull;

fn err(who: &str, what: &str, e: zmq::Error) -> BenchError {
    BenchError::failed(who, format!("{what}: {e}"))
}

impl Peer for ZmqPushPull {
    fn name(&self) -> &'static str {
        NAME
    }

    fn config(&self) -> String {
        let (major, minor, patch) = zmq::version();
        format!("libzmq {major}.{minor}.{patch}: PUSH->PULL, a message per item, defaults")
    }

    fn child(
        &self,
        req: &ChildRequest,
        ready: &mut dyn FnMut(),
    ) -> Result<ChildReport, BenchError> {
        let who = format!("{NAME} {:?}", req.role);
        let endpoint = format!("tcp://{}", req.addresses[1]);
        let ctx = zmq::Context::new();
        let report = match req.role {
            Role::Recv => {
                let socket = ctx.socket(zmq::PULL).map_err(|e| err(&who, "socket", e))?;
                socket.bind(&endpoint).map_err(|e| err(&who, "bind", e))?;
                ready();
                let mut tally = Tally::new(req.load);
                let mut msg = zmq::Message::new();
                while !tally.done() {
                    socket.recv(&mut msg, 0).map_err(|e| err(&who, "recv", e))?;
                    let item = Item::from_bytes(&msg).ok_or_else(|| {
                        BenchError::failed(&who, format!("a {}-byte message", msg.len()))
                    })?;
                    tally.add(&item);
                }
                ChildReport::Received(tally.report())
            }
            Role::Send => {
                let socket = ctx.socket(zmq::PUSH).map_err(|e| err(&who, "socket", e))?;
                socket
                    .connect(&endpoint)
                    .map_err(|e| err(&who, "connect", e))?;
                std::thread::sleep(CONNECT_SETTLE);
                let items = req.load.items();
                match req.load {
                    Load::Flood { .. } => {
                        for seq in 0..items {
                            socket
                                .send(&Item::new(seq, 0).to_bytes()[..], 0)
                                .map_err(|e| err(&who, "send", e))?;
                        }
                    }
                    Load::Paced { rate, .. } => {
                        let pacer = Pacer::start(rate);
                        for seq in 0..items {
                            pacer.wait(seq);
                            socket
                                .send(&Item::new(seq, now_ns()).to_bytes()[..], 0)
                                .map_err(|e| err(&who, "send", e))?;
                        }
                    }
                }
                // Closing the socket, then the context (on drop), waits for the queued
                // messages to go out (linger -1).
                drop(socket);
                ChildReport::Sent { items }
            }
        };
        drop(ctx);
        Ok(report)
    }
}
