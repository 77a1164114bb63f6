//! The machines built by the combinator methods of [`Machine`](super::Machine).
//!
//! All of them run fused: a value goes from one part to the next inside one
//! call of `step`. Only the pairing combinators ([`Fanout`], [`Split`]) hold a
//! buffer, because every output of one side must meet every output of the
//! other; the buffers are kept between steps, so after the first few items no
//! step allocates.

use std::marker::PhantomData;

/// `a` then `b`: see [`Machine::then`](super::Machine::then).
pub struct Then<A, B> {
    pub(crate) a: A,
    pub(crate) b: B,
}

impl<A, B> Then<A, B> {
    pub(super) fn new(a: A, b: B) -> Self {
        Then { a, b }
    }
}

/// `m` on the first half of a pair: see [`Machine::first`](super::Machine::first).
pub struct First<M, X> {
    pub(crate) m: M,
    pub(crate) _other: PhantomData<fn(X) -> X>,
}

impl<M, X> First<M, X> {
    pub(super) fn new(m: M) -> Self {
        First {
            m,
            _other: PhantomData,
        }
    }
}

/// `m` on the second half of a pair: see [`Machine::second`](super::Machine::second).
pub struct Second<M, X> {
    pub(crate) m: M,
    pub(crate) _other: PhantomData<fn(X) -> X>,
}

impl<M, X> Second<M, X> {
    pub(super) fn new(m: M) -> Self {
        Second {
            m,
            _other: PhantomData,
        }
    }
}

/// Both machines on a copy of the input: see [`Machine::fanout`](super::Machine::fanout).
pub struct Fanout<A, B, C, D> {
    pub(crate) a: A,
    pub(crate) b: B,
    pub(crate) left: Vec<C>,
    pub(crate) right: Vec<D>,
}

impl<A, B, C, D> Fanout<A, B, C, D> {
    pub(super) fn new(a: A, b: B) -> Self {
        Fanout {
            a,
            b,
            left: Vec::new(),
            right: Vec::new(),
        }
    }
}

/// One machine per half of a pair: see [`Machine::split`](super::Machine::split).
pub struct Split<A, B, C, D> {
    pub(crate) a: A,
    pub(crate) b: B,
    pub(crate) left: Vec<C>,
    pub(crate) right: Vec<D>,
}

impl<A, B, C, D> Split<A, B, C, D> {
    pub(super) fn new(a: A, b: B) -> Self {
        Split {
            a,
            b,
            left: Vec::new(),
            right: Vec::new(),
        }
    }
}

/// One machine per side of an [`Either`](crate::Either), outputs tagged: see [`Machine::choice`](super::Machine::choice).
pub struct Choice<A, B> {
    pub(crate) a: A,
    pub(crate) b: B,
}

impl<A, B> Choice<A, B> {
    pub(super) fn new(a: A, b: B) -> Self {
        Choice { a, b }
    }
}

/// One machine per side of an [`Either`](crate::Either), outputs merged: see [`Machine::merge`](super::Machine::merge).
pub struct Merge<A, B> {
    pub(crate) a: A,
    pub(crate) b: B,
}

impl<A, B> Merge<A, B> {
    pub(super) fn new(a: A, b: B) -> Self {
        Merge { a, b }
    }
}

/// Fallible `a` then fallible `b`: see [`Machine::try_then`](super::Machine::try_then).
pub struct TryThen<A, B, T> {
    pub(crate) a: A,
    pub(crate) b: B,
    pub(crate) _ok: PhantomData<fn(T) -> T>,
}

impl<A, B, T> TryThen<A, B, T> {
    pub(super) fn new(a: A, b: B) -> Self {
        TryThen {
            a,
            b,
            _ok: PhantomData,
        }
    }
}
