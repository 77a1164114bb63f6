//! The producer kinds: markers that choose, in the type, how producers claim
//! sequences and how consumers see what is published.

use crate::sync::{AtomicU64, Ordering};

/// Marker: one producer, no atomic read-modify-write when publishing.
#[derive(Debug)]
pub enum Single {}
/// Marker: one producer whose slots carry their sequence, so that a
/// hand-over moves one cache line (lowest latency; see the module docs).
#[derive(Debug)]
pub enum Stamped {}
/// Marker: many producers (the handle is `Clone`).
#[derive(Debug)]
pub enum Multi {}

mod sealed {
    /// Implemented only by this crate's producer kinds.
    pub trait Sealed {}
}
impl sealed::Sealed for Single {}
impl sealed::Sealed for Stamped {}
impl sealed::Sealed for Multi {}

/// The producer kinds, [`Single`], [`Stamped`] and [`Multi`].
pub trait ProducerKind: sealed::Sealed + Send + Sync + 'static {
    /// Many producer handles: claims race on the cursor.
    #[doc(hidden)]
    const MULTI: bool;
    /// Slots carry the sequence last published in them, and consumers read
    /// those stamps (never the cursor or range ends) to see what is
    /// published.
    #[doc(hidden)]
    const STAMPED: bool;
    /// What a slot carries besides the event: nothing for a single producer
    /// (the cursor and the range ends say what is published), the sequence
    /// last published in it for the stamped kinds (so consumers poll the
    /// event's own line, never the producers' cursor).
    #[doc(hidden)]
    type Stamp: Send + Sync + 'static;
    #[doc(hidden)]
    fn new_stamp() -> Self::Stamp;
    /// Whether the slot's stamp says sequence `seq` is published.
    #[doc(hidden)]
    fn is_published(stamp: &Self::Stamp, seq: u64) -> bool;
    /// Marks the slot's stamp published for `seq`.
    #[doc(hidden)]
    fn mark_published(stamp: &Self::Stamp, seq: u64);
}

/// The kinds with one producer handle, [`Single`] and [`Stamped`]: the claim
/// is a local counter, and events can be staged.
pub trait SoleProducer: ProducerKind {}
impl SoleProducer for Single {}
impl SoleProducer for Stamped {}

impl ProducerKind for Single {
    const MULTI: bool = false;
    const STAMPED: bool = false;
    type Stamp = ();
    fn new_stamp() {}
    #[inline(always)]
    fn is_published(_: &(), _: u64) -> bool {
        unreachable!("a single-producer ring publishes through its cursor and range ends")
    }
    #[inline(always)]
    fn mark_published(_: &(), _: u64) {}
}

/// How the stamped kinds mark and read a slot's stamp.
macro_rules! stamped_slots {
    () => {
        type Stamp = AtomicU64;
        fn new_stamp() -> AtomicU64 {
            AtomicU64::new(u64::MAX)
        }
        #[inline(always)]
        fn is_published(stamp: &AtomicU64, seq: u64) -> bool {
            // Acquire: pairs with the Release store in `mark_published`; the
            // producer's write of the slot happens before we read it.
            stamp.load(Ordering::Acquire) == seq
        }
        #[inline(always)]
        fn mark_published(stamp: &AtomicU64, seq: u64) {
            // Release: pairs with the Acquire load in `is_published`.
            stamp.store(seq, Ordering::Release);
        }
    };
}

impl ProducerKind for Stamped {
    const MULTI: bool = false;
    const STAMPED: bool = true;
    stamped_slots!();
}
impl ProducerKind for Multi {
    const MULTI: bool = true;
    const STAMPED: bool = true;
    stamped_slots!();
}
