//! The machines built by the combinator methods of [`Machine`].
//!
//! All of them run fused: a value goes from one part to the next inside one
//! call of `step`. Only the pairing combinators ([`Fanout`], [`Split`]) hold a
//! buffer, because every output of one side must meet every output of the
//! other; the buffers are kept between steps, so after the first few items no
//! step allocates.

use std::marker::PhantomData;

use super::Machine;
use crate::Either;

/// `a` then `b`: see [`Machine::then`].
pub struct Then<A, B> {
    a: A,
    b: B,
}

impl<A, B> Then<A, B> {
    pub(super) fn new(a: A, b: B) -> Self {
        Then { a, b }
    }
}

impl<S, A: Machine<S>, B: Machine<S, In = A::Out>> Machine<S> for Then<A, B> {
    type In = A::In;
    type Out = B::Out;

    fn step<E: FnMut(&mut S, B::Out)>(&mut self, state: &mut S, input: A::In, emit: &mut E) {
        let b = &mut self.b;
        self.a.step(state, input, &mut |s, x| b.step(s, x, emit));
    }
}

/// `m` on the first half of a pair: see [`Machine::first`].
pub struct First<M, X> {
    m: M,
    _other: PhantomData<fn(X) -> X>,
}

impl<M, X> First<M, X> {
    pub(super) fn new(m: M) -> Self {
        First {
            m,
            _other: PhantomData,
        }
    }
}

impl<S, M: Machine<S>, X: Clone> Machine<S> for First<M, X> {
    type In = (M::In, X);
    type Out = (M::Out, X);

    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: Self::In, emit: &mut E) {
        let (a, x) = input;
        self.m.step(state, a, &mut |s, c| emit(s, (c, x.clone())));
    }
}

/// `m` on the second half of a pair: see [`Machine::second`].
pub struct Second<M, X> {
    m: M,
    _other: PhantomData<fn(X) -> X>,
}

impl<M, X> Second<M, X> {
    pub(super) fn new(m: M) -> Self {
        Second {
            m,
            _other: PhantomData,
        }
    }
}

impl<S, M: Machine<S>, X: Clone> Machine<S> for Second<M, X> {
    type In = (X, M::In);
    type Out = (X, M::Out);

    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: Self::In, emit: &mut E) {
        let (x, b) = input;
        self.m.step(state, b, &mut |s, d| emit(s, (x.clone(), d)));
    }
}

/// Emits every pair of `left` × `right`, `left` outermost, and empties both.
fn emit_pairs<S, C: Clone, D: Clone, E: FnMut(&mut S, (C, D))>(
    state: &mut S,
    left: &mut Vec<C>,
    right: &mut Vec<D>,
    emit: &mut E,
) {
    for c in left.drain(..) {
        for d in right.iter() {
            emit(state, (c.clone(), d.clone()));
        }
    }
    right.clear();
}

/// Both machines on a copy of the input: see [`Machine::fanout`].
pub struct Fanout<A, B, C, D> {
    a: A,
    b: B,
    left: Vec<C>,
    right: Vec<D>,
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

impl<S, A, B> Machine<S> for Fanout<A, B, A::Out, B::Out>
where
    A: Machine<S>,
    A::In: Clone,
    A::Out: Clone,
    B: Machine<S, In = A::In>,
    B::Out: Clone,
{
    type In = A::In;
    type Out = (A::Out, B::Out);

    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: A::In, emit: &mut E) {
        let (left, right) = (&mut self.left, &mut self.right);
        self.a.step(state, input.clone(), &mut |_, c| left.push(c));
        self.b.step(state, input, &mut |_, d| right.push(d));
        emit_pairs(state, left, right, emit);
    }
}

/// One machine per half of a pair: see [`Machine::split`].
pub struct Split<A, B, C, D> {
    a: A,
    b: B,
    left: Vec<C>,
    right: Vec<D>,
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

impl<S, A, B> Machine<S> for Split<A, B, A::Out, B::Out>
where
    A: Machine<S>,
    A::Out: Clone,
    B: Machine<S>,
    B::Out: Clone,
{
    type In = (A::In, B::In);
    type Out = (A::Out, B::Out);

    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: Self::In, emit: &mut E) {
        let (x, y) = input;
        let (left, right) = (&mut self.left, &mut self.right);
        self.a.step(state, x, &mut |_, c| left.push(c));
        self.b.step(state, y, &mut |_, d| right.push(d));
        emit_pairs(state, left, right, emit);
    }
}

/// One machine per side of an [`Either`], outputs tagged: see [`Machine::choice`].
pub struct Choice<A, B> {
    a: A,
    b: B,
}

impl<A, B> Choice<A, B> {
    pub(super) fn new(a: A, b: B) -> Self {
        Choice { a, b }
    }
}

impl<S, A: Machine<S>, B: Machine<S>> Machine<S> for Choice<A, B> {
    type In = Either<A::In, B::In>;
    type Out = Either<A::Out, B::Out>;

    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: Self::In, emit: &mut E) {
        match input {
            Either::Left(x) => self.a.step(state, x, &mut |s, c| emit(s, Either::Left(c))),
            Either::Right(y) => self.b.step(state, y, &mut |s, d| emit(s, Either::Right(d))),
        }
    }
}

/// One machine per side of an [`Either`], outputs merged: see [`Machine::merge`].
pub struct Merge<A, B> {
    a: A,
    b: B,
}

impl<A, B> Merge<A, B> {
    pub(super) fn new(a: A, b: B) -> Self {
        Merge { a, b }
    }
}

impl<S, A: Machine<S>, B: Machine<S, Out = A::Out>> Machine<S> for Merge<A, B> {
    type In = Either<A::In, B::In>;
    type Out = A::Out;

    fn step<E: FnMut(&mut S, A::Out)>(&mut self, state: &mut S, input: Self::In, emit: &mut E) {
        match input {
            Either::Left(x) => self.a.step(state, x, emit),
            Either::Right(y) => self.b.step(state, y, emit),
        }
    }
}

/// Fallible `a` then fallible `b`: see [`Machine::try_then`].
pub struct TryThen<A, B, T> {
    a: A,
    b: B,
    _ok: PhantomData<fn(T) -> T>,
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

impl<S, T, U, Er, A, B> Machine<S> for TryThen<A, B, T>
where
    A: Machine<S, Out = Result<T, Er>>,
    B: Machine<S, In = T, Out = Result<U, Er>>,
{
    type In = A::In;
    type Out = Result<U, Er>;

    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: A::In, emit: &mut E) {
        let b = &mut self.b;
        self.a.step(state, input, &mut |s, r| match r {
            Ok(t) => b.step(s, t, emit),
            Err(e) => emit(s, Err(e)),
        });
    }
}
