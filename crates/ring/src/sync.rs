//! The one place atomics, cells, locks and threads come from.
//!
//! Everything in this crate that synchronises goes through this module so that
//! `RUSTFLAGS="--cfg loom"` swaps in [loom]'s model-checked versions. Outside
//! loom these are the `std` types with zero overhead.
//!
//! [loom]: https://docs.rs/loom

#[cfg(loom)]
pub(crate) use loom::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    sync::{Arc, Condvar, Mutex},
    thread,
};

#[cfg(not(loom))]
pub(crate) use std::{
    hint::spin_loop,
    sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering},
    sync::{Arc, Condvar, Mutex},
    thread,
};

/// An `UnsafeCell` with loom's closure API, so loom can check every access to a
/// ring slot for data races.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// An `UnsafeCell` with loom's closure API, so loom can check every access to a
/// ring slot for data races. Outside loom it compiles to a plain pointer access.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Yields the current thread (loom's scheduler point under loom).
#[inline]
pub(crate) fn yield_now() {
    thread::yield_now();
}
