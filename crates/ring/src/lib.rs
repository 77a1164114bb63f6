//! A Disruptor-style ring buffer for passing events between threads.
//!
//! One preallocated ring of slots, reused forever; producers claim sequences
//! and fill slots in place; consumers follow with sequences of their own,
//! each seeing every event (multicast), in a dependency graph declared by a
//! typestate builder; both sides batch; the ring applies back-pressure when
//! the slowest consumer is a full ring behind; how threads wait is a type
//! parameter ([`wait`]).
//!
//! ```
//! use statepipe_ring::RingBuilder;
//!
//! let (mut producer, ring) = RingBuilder::new(64, || 0u64)
//!     .handler("print", |e: &u64, seq: u64, end_of_batch: bool| {
//!         let _ = (e, seq, end_of_batch);
//!     })
//!     .build_single();
//! producer.publish(7).unwrap();
//! producer.publish_batch(3, |i, slot| *slot = i as u64).unwrap();
//! drop(producer);
//! let report = ring.join().unwrap();
//! assert_eq!(report.published, 4);
//! ```
//!
//! See `ARCHITECTURE.md` in the repository for the protocol, and the docs of
//! the `shared` module (in the source) for the memory ordering.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs, unreachable_pub)]

mod builder;
mod consumer;
mod error;
mod handle;
mod monitor;
mod producer;
mod shared;
mod sync;
pub mod wait;

pub use builder::{state, RingBuilder, DEFAULT_LINGER};
pub use consumer::{EventHandler, EventHandlerMut, EventPoller, EventPollerMut};
pub use error::{PollError, PublishError, PublishTimeoutError, RingError, TryPublishError};
pub use handle::{JoinReport, Ring};
pub use monitor::{ConsumerStats, Monitor, RingStats};
pub use producer::{
    Multi, MultiProducer, Producer, ProducerKind, Single, SingleProducer, SoleProducer, Stamped,
    StampedProducer,
};
