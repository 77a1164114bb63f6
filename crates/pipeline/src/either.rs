//! The binary sum type that `choice` (`+++`) and `merge` (`|||`) route on.

/// A value of one of two types: what `choice` and `merge` route on.
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::Either;
///
/// let e: Either<u32, String> = Either::Left(3);
/// assert_eq!(e.map_left(|x| x + 1), Either::Left(4));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Either<L, R> {
    /// The left alternative.
    Left(L),
    /// The right alternative.
    Right(R),
}

impl<L, R> Either<L, R> {
    /// Applies `f` to a `Left` value; a `Right` passes unchanged.
    pub fn map_left<L2>(self, f: impl FnOnce(L) -> L2) -> Either<L2, R> {
        match self {
            Either::Left(l) => Either::Left(f(l)),
            Either::Right(r) => Either::Right(r),
        }
    }

    /// Applies `f` to a `Right` value; a `Left` passes unchanged.
    pub fn map_right<R2>(self, f: impl FnOnce(R) -> R2) -> Either<L, R2> {
        match self {
            Either::Left(l) => Either::Left(l),
            Either::Right(r) => Either::Right(f(r)),
        }
    }
}

impl<T> Either<T, T> {
    /// The value, whichever side it is on.
    pub fn into_inner(self) -> T {
        match self {
            Either::Left(x) | Either::Right(x) => x,
        }
    }
}
