//! Pipelines across processes and machines.
//!
//! A [`Parts`] is a pipeline cut into parts. A [`Coordinator`] holds the
//! input and the output and places the parts on the [`Member`]s that
//! join it (contiguous parts per member, spread evenly); each member
//! deploys its parts as ordinary deployments, on its own workers. An edge
//! between parts is a TCP connection carrying batches of items (postcard),
//! with credit-based flow control: the receiving end grants items of
//! room, and the sender never has more on the wire than it was granted,
//! so a slow part holds back the parts before it across machines with
//! bounded memory. See `edge.rs` for batching and credits and `wire.rs`
//! for the frames.
//!
//! A [`Link`] is one such edge on its own, without a coordinator: a
//! typed, authenticated stream of items from one process to another
//! ([`LinkListener`] and [`LinkReceiver`] at the other end); a [`RawLink`]
//! carries plain-old-data items as their bytes.
//!
//! Items keep the number of the input they came from across every part,
//! so outputs and failures are numbered as
//! [`run_sequential`](crate::Pipeline::run_sequential) numbers them, and
//! outputs come in its order.
//!
//! **Joining.** Every connection, control or data, starts with the
//! shared-secret challenge of [`statepipe_sys::auth`]; a member also
//! proves it runs the same build (a hash of every part's shape, stage
//! names and edge types). A wrong secret or another build is refused with
//! a message saying which.
//!
//! **Checkpoints.** With a checkpoint folder, the coordinator puts a
//! barrier on the input's edge every so often; each part checkpoints at it
//! (the receiving thread is its input's only sender, so the checkpoint
//! falls exactly between the same two items as upstream) and passes it
//! on. Once every part's checkpoint is durable, the coordinator commits
//! it (the `COORDINATOR` file: its number and input position) and removes
//! the older ones.
//!
//! **Failures.** A member whose connection closes, or that sends no
//! heartbeat for [`RemoteConfig::silence`] (1 s), is lost. The
//! coordinator stops every part, restores each from the last committed
//! checkpoint on the members still alive (or that joined since), and
//! feeds the input again from its position; the sink recognises outputs
//! it already delivered, so each is delivered once. Without checkpoints
//! the run ends with [`RemoteError::MemberLost`] naming the member.
//! **Leaving and joining.** A member asked to leave
//! ([`Member::leave_when`]: the command line sets it on SIGTERM) tells its
//! coordinator, which has the input's edge send a checkpoint's barrier at
//! once; once a checkpoint taken after the request is committed, it stops
//! the attempt, restores every part from that checkpoint on the other
//! members, and lets the leaver go ([`Member::run`] returns `Ok`). A member
//! that joins a running run gets parts the same way, at the next
//! checkpoint, when spreading the parts over it changes where they run
//! (otherwise it waits as a spare). Either is a [`Restore`] of kind
//! [`RestoreKind::Left`] or [`RestoreKind::Joined`]; the sink's
//! exactly-once holds as for a loss. Without checkpoints a leave restarts
//! every part from the start (the sink drops what it has delivered), and
//! a member that joins waits as a spare. With
//! [`RemoteConfig::min_members`], the coordinator waits, below that many
//! members, for more to join instead of going on with fewer; without it,
//! the run ends once none is left. [`Member::ready_when_admitted`] sets a
//! flag once the coordinator has accepted the member, for a readiness
//! probe (`statepipe member --health`).
//!
//! The coordinator itself is not replicated: if it dies, the members stop,
//! and a new coordinator can [`resume`](RemoteConfig::resume) from the
//! committed checkpoint.
//!
//! ```
//! use statepipe_pipeline::remote::{Coordinator, Member, Parts, RemoteConfig};
//! use statepipe_pipeline::{machine, Config, Pipeline};
//! use statepipe_sys::auth::Secret;
//!
//! fn parts() -> Parts<u64, u64> {
//!     Parts::new(|| Pipeline::map("double", |x: u64| x * 2)).then(|| {
//!         Pipeline::durable_stage("sum", 0u64, machine::step(|s: &mut u64, x: u64| {
//!             *s += x;
//!             *s
//!         }))
//!     })
//! }
//!
//! let secret = Secret::new("example");
//! let co = Coordinator::bind("127.0.0.1:0", secret.clone(), "sums").unwrap();
//! let addr = co.local_addr().to_string();
//! let member = std::thread::spawn(move || {
//!     let m = Member::join(&addr, secret, "127.0.0.1:0").unwrap();
//!     assert_eq!(m.app(), "sums");
//!     m.run(&parts(), &Config::new().workers(1)).unwrap();
//! });
//! let mut outputs = Vec::new();
//! let (tx, rx) = std::sync::mpsc::channel();
//! let run = co
//!     .run(&parts(), &RemoteConfig::new().members(1), |from| from..100, move |_, x| tx.send(x).unwrap())
//!     .unwrap();
//! outputs.extend(rx.try_iter());
//! member.join().unwrap();
//! assert_eq!(outputs, parts().pipeline().run_sequential(0..100).outputs);
//! assert_eq!(run.states[1].get::<u64>(), Some(&9900));
//! ```

mod coordinator;
mod edge;
mod ends;
mod error;
mod join;
mod link;
mod member;
mod metrics;
mod part;
mod routes;
mod run;
mod split;
mod wire;
mod wiring;

pub use coordinator::Coordinator;
pub use edge::EdgeMetrics;
pub use error::RemoteError;
pub use link::{Link, LinkListener, LinkReceiver, RawLink, RawLinkReceiver};
pub use member::Member;
pub use metrics::{MemberInfo, RemoteMetrics, RestoreInfo, RESTORES_KEPT};
pub use part::{Parts, Wire};
pub use run::{
    RemoteConfig, RemoteFailure, RemoteRun, Restore, RestoreKind, SkippedCheckpoint, SKIPPED_KEPT,
};

/// Every decoder over bytes from a peer; nothing may panic (the fuzz
/// target's entry point).
#[cfg(feature = "fuzzing")]
pub(crate) fn decode_all(bytes: &[u8]) {
    wire::decode_all(bytes);
}
