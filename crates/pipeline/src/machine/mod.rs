//! State machines: what one stage computes, `(&mut S, In) -> 0..n Out`.
//!
//! A [`Machine<S>`] reads one input, may change the stage state `S`, and emits
//! zero or more outputs through a callback, so a fused chain of machines
//! passes each value straight from one step to the next with no queue and no
//! allocation per item. As in the arrow `SM s a b`, every machine fused into
//! one stage shares that stage's state `S`; the machines themselves are the
//! code. Leaf machines come from the functions here ([`map`], [`step`],
//! [`flat`], ...), bigger ones from the combinator methods of [`Machine`],
//! whose types live in [`combinators`].

pub mod combinators;

use std::marker::PhantomData;

use crate::Either;
use combinators::{Choice, Fanout, First, Merge, Second, Split, Then, TryThen};

/// A state machine over the stage state `S`: one input in, `0..n` outputs out.
///
/// # Examples
///
/// A running sum, then doubled, fused into one machine:
///
/// ```
/// use statepipe_pipeline::machine::{self, Machine};
///
/// let mut m = machine::step(|sum: &mut u64, x: u64| {
///     *sum += x;
///     *sum
/// })
/// .map(|s| s * 2);
/// let mut sum = 0;
/// assert_eq!(m.run(&mut sum, [1, 2, 3]), vec![2, 6, 12]);
/// assert_eq!(sum, 6);
/// ```
///
/// A machine that works beside any state (like [`Map`]) should name `S` in
/// its type, as `Map<F, I, O, S>` does: then a chain made only of such
/// machines learns `S` from the stage it is put in, with no annotation.
pub trait Machine<S> {
    /// What one step reads.
    type In;
    /// What one step emits (zero or more times).
    type Out;

    /// Consumes `input`, updates `state`, and calls `emit` once per output,
    /// in order.
    ///
    /// `emit` is handed the state back along with each output, so the next
    /// machine of a fused chain can step at once, inside this call, with no
    /// buffer between the two.
    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: Self::In, emit: &mut E);

    /// Runs the machine over `inputs` and collects every output: the plain
    /// fold meaning of the machine.
    fn run<I: IntoIterator<Item = Self::In>>(&mut self, state: &mut S, inputs: I) -> Vec<Self::Out>
    where
        Self: Sized,
    {
        let mut out = Vec::new();
        for x in inputs {
            self.step(state, x, &mut |_, o| out.push(o));
        }
        out
    }

    /// Sequential composition (left to right): each
    /// output of `self` is fed to `next` at once, before `self` emits its
    /// next output.
    fn then<M: Machine<S, In = Self::Out>>(self, next: M) -> Then<Self, M>
    where
        Self: Sized,
    {
        Then::new(self, next)
    }

    /// Applies `f` to every output.
    fn map<O, F: FnMut(Self::Out) -> O>(self, f: F) -> Then<Self, Map<F, Self::Out, O, S>>
    where
        Self: Sized,
    {
        Then::new(self, map(f))
    }

    /// Acts on the first half of a pair; the second half is copied to every
    /// output (arrow `first`).
    fn first<X: Clone>(self) -> First<Self, X>
    where
        Self: Sized,
    {
        First::new(self)
    }

    /// Acts on the second half of a pair; the first half is copied to every
    /// output (arrow `second`).
    fn second<X: Clone>(self) -> Second<Self, X>
    where
        Self: Sized,
    {
        Second::new(self)
    }

    /// Fanout (`&&&`): both machines read a copy of the input; every pair of
    /// their outputs is emitted, `self`'s outputs outermost.
    fn fanout<M: Machine<S, In = Self::In>>(self, other: M) -> Fanout<Self, M, Self::Out, M::Out>
    where
        Self: Sized,
    {
        Fanout::new(self, other)
    }

    /// Split (`***`): `self` reads the first half of a pair, `other` the
    /// second; every pair of their outputs is emitted.
    fn split<M: Machine<S>>(self, other: M) -> Split<Self, M, Self::Out, M::Out>
    where
        Self: Sized,
    {
        Split::new(self, other)
    }

    /// Choice (`+++`): `Left` inputs go to `self`, `Right` inputs to `other`;
    /// outputs keep their side.
    fn choice<M: Machine<S>>(self, other: M) -> Choice<Self, M>
    where
        Self: Sized,
    {
        Choice::new(self, other)
    }

    /// Merge (`|||`): like [`choice`](Machine::choice), but both sides emit
    /// the same type, so the outputs are not tagged.
    fn merge<M: Machine<S, Out = Self::Out>>(self, other: M) -> Merge<Self, M>
    where
        Self: Sized,
    {
        Merge::new(self, other)
    }

    /// Composition of fallible machines: `Ok` outputs of `self` go to
    /// `next`; an `Err` skips `next` and is emitted as it is.
    fn try_then<T, U, Er, M>(self, next: M) -> TryThen<Self, M, T>
    where
        Self: Sized + Machine<S, Out = Result<T, Er>>,
        M: Machine<S, In = T, Out = Result<U, Er>>,
    {
        TryThen::new(self, next)
    }
}

/// A [`Map`] over a plain function pointer: the type of [`id`], [`fst`],
/// [`snd`], [`left`] and [`right`].
pub type FnMap<S, I, O> = Map<fn(I) -> O, I, O, S>;

/// A machine that emits its input unchanged.
pub fn id<S, T>() -> FnMap<S, T, T> {
    map(std::convert::identity)
}

/// The machine built by [`map`]: a function of the input only.
///
/// It names the state type `S` it runs beside (though it never reads it), so
/// that a chain of stateless machines learns `S` from where it is used.
pub struct Map<F, I, O, S> {
    f: F,
    _types: PhantomData<fn(&mut S, I) -> O>,
}

/// A stateless machine: one output `f(input)` per input.
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::machine::{self, Machine};
///
/// assert_eq!(machine::map(|x: u8| x + 1).run(&mut (), [1, 2]), vec![2, 3]);
/// ```
pub fn map<S, I, O, F: FnMut(I) -> O>(f: F) -> Map<F, I, O, S> {
    Map {
        f,
        _types: PhantomData,
    }
}

impl<S, I, O, F: FnMut(I) -> O> Machine<S> for Map<F, I, O, S> {
    type In = I;
    type Out = O;

    fn step<E: FnMut(&mut S, O)>(&mut self, state: &mut S, input: I, emit: &mut E) {
        emit(state, (self.f)(input));
    }
}

/// The machine built by [`step`]: one output per input, reading the state.
pub struct Step<F, I, O> {
    f: F,
    _types: PhantomData<fn(I) -> O>,
}

/// A stateful machine with exactly one output per input: `(&mut S, In) -> Out`.
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::machine::{self, Machine};
///
/// let mut count = machine::step(|n: &mut usize, _x: char| {
///     *n += 1;
///     *n
/// });
/// assert_eq!(count.run(&mut 0, ['a', 'b']), vec![1, 2]);
/// ```
pub fn step<S, I, O, F: FnMut(&mut S, I) -> O>(f: F) -> Step<F, I, O> {
    Step {
        f,
        _types: PhantomData,
    }
}

impl<S, I, O, F: FnMut(&mut S, I) -> O> Machine<S> for Step<F, I, O> {
    type In = I;
    type Out = O;

    fn step<E: FnMut(&mut S, O)>(&mut self, state: &mut S, input: I, emit: &mut E) {
        let out = (self.f)(state, input);
        emit(state, out);
    }
}

/// The machine built by [`flat`]: any number of outputs per input.
pub struct Flat<F, I, It> {
    f: F,
    _types: PhantomData<fn(I) -> It>,
}

/// A stateful machine with `0..n` outputs per input: `f` returns them as
/// anything iterable (an `Option`, an array, an iterator; a `Vec` allocates).
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::machine::{self, Machine};
///
/// let mut words = machine::flat(|_: &mut (), line: &str| {
///     line.split_whitespace().map(str::to_owned).collect::<Vec<_>>()
/// });
/// assert_eq!(words.run(&mut (), ["a b", "", "c"]), ["a", "b", "c"]);
/// ```
pub fn flat<S, I, It: IntoIterator, F: FnMut(&mut S, I) -> It>(f: F) -> Flat<F, I, It> {
    Flat {
        f,
        _types: PhantomData,
    }
}

impl<S, I, It: IntoIterator, F: FnMut(&mut S, I) -> It> Machine<S> for Flat<F, I, It> {
    type In = I;
    type Out = It::Item;

    fn step<E: FnMut(&mut S, It::Item)>(&mut self, state: &mut S, input: I, emit: &mut E) {
        for out in (self.f)(state, input) {
            emit(state, out);
        }
    }
}

/// The machine built by [`filter`].
pub struct Filter<P, T, S> {
    pred: P,
    _types: PhantomData<fn(&mut S, T) -> T>,
}

/// A machine that emits the inputs for which `pred` holds, and nothing for
/// the others.
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::machine::{self, Machine};
///
/// assert_eq!(machine::filter(|x: &u8| x % 2 == 0).run(&mut (), 0..5), vec![0, 2, 4]);
/// ```
pub fn filter<S, T, P: FnMut(&T) -> bool>(pred: P) -> Filter<P, T, S> {
    Filter {
        pred,
        _types: PhantomData,
    }
}

impl<S, T, P: FnMut(&T) -> bool> Machine<S> for Filter<P, T, S> {
    type In = T;
    type Out = T;

    fn step<E: FnMut(&mut S, T)>(&mut self, state: &mut S, input: T, emit: &mut E) {
        if (self.pred)(&input) {
            emit(state, input);
        }
    }
}

/// The projection on the first half of a pair.
pub fn fst<S, A, B>() -> FnMap<S, (A, B), A> {
    map(|(a, _)| a)
}

/// The projection on the second half of a pair.
pub fn snd<S, A, B>() -> FnMap<S, (A, B), B> {
    map(|(_, b)| b)
}

/// Injects into the left side of an [`Either`].
pub fn left<S, L, R>() -> FnMap<S, L, Either<L, R>> {
    map(Either::Left)
}

/// Injects into the right side of an [`Either`].
pub fn right<S, L, R>() -> FnMap<S, R, Either<L, R>> {
    map(Either::Right)
}

// The combinators are machines: each runs its parts fused, inside one
// `step`.

impl<S, A: Machine<S>, B: Machine<S, In = A::Out>> Machine<S> for Then<A, B> {
    type In = A::In;
    type Out = B::Out;

    fn step<E: FnMut(&mut S, B::Out)>(&mut self, state: &mut S, input: A::In, emit: &mut E) {
        let b = &mut self.b;
        self.a.step(state, input, &mut |s, x| b.step(s, x, emit));
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

impl<S, M: Machine<S>, X: Clone> Machine<S> for Second<M, X> {
    type In = (X, M::In);
    type Out = (X, M::Out);

    fn step<E: FnMut(&mut S, Self::Out)>(&mut self, state: &mut S, input: Self::In, emit: &mut E) {
        let (x, b) = input;
        self.m.step(state, b, &mut |s, d| emit(s, (x.clone(), d)));
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
