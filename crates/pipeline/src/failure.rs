//! What a pipeline hands back besides its outputs: failed items and stage states.

use std::any::Any;
use std::error::Error;
use std::fmt;

/// A value that can ride in a [`Failure`]: printable, sendable, and
/// recoverable with its own type through [`Failure::item`].
pub trait FailedItem: Any + fmt::Debug + Send {
    /// The value as `Any`, for downcasting.
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any + fmt::Debug + Send> FailedItem for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An item a stage rejected: sent to the pipeline's error output, while the
/// pipeline goes on with the next item.
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::Pipeline;
///
/// let p = Pipeline::try_map("parse", |s: &'static str| s.parse::<u8>());
/// let run = p.run_sequential(["1", "x", "3"]);
/// assert_eq!(run.outputs, vec![1, 3]);
/// let f = &run.failures[0];
/// assert_eq!((f.seq, f.stage.as_str()), (1, "parse"));
/// assert_eq!(f.item::<&str>(), Some(&"x"));
/// assert_eq!(f.error.to_string(), "invalid digit found in string");
/// ```
#[derive(Debug)]
pub struct Failure {
    /// The sequence number of the pipeline input the item came from: inputs
    /// are numbered from 0 in the order they enter.
    pub seq: u64,
    /// The name of the stage that failed.
    pub stage: String,
    /// The stage's input that failed (a copy: see [`Pipeline::try_stage`](crate::Pipeline::try_stage)).
    pub item: Box<dyn FailedItem>,
    /// What the stage returned.
    pub error: Box<dyn Error + Send + Sync>,
}

impl Failure {
    /// The failed item, if it has type `T`.
    pub fn item<T: Any>(&self) -> Option<&T> {
        // Not `self.item.as_any()`: that would pick the blanket impl for the
        // `Box` itself and downcast the box.
        let item: &dyn FailedItem = &*self.item;
        item.as_any().downcast_ref()
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stage `{}` failed on input #{} ({:?}): {}",
            self.stage, self.seq, self.item, self.error
        )
    }
}

impl Error for Failure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.error)
    }
}

/// The final state of one stage, named, with its type erased.
///
/// A pipeline's states come in the order its stages were written, left to
/// right, branches in order, shard copies by copy number.
pub struct StageState {
    /// The stage's name.
    pub name: String,
    pub(crate) state: Box<dyn Any + Send>,
}

impl StageState {
    pub(crate) fn new<S: Any + Send>(name: &str, state: S) -> Self {
        StageState {
            name: name.to_owned(),
            state: Box::new(state),
        }
    }

    /// The state, if it has type `S`.
    pub fn get<S: Any>(&self) -> Option<&S> {
        self.state.downcast_ref()
    }

    /// The state by value, or `self` back if it has another type.
    ///
    /// # Errors
    ///
    /// Returns `self` unchanged when the state is not an `S`.
    pub fn into_inner<S: Any>(self) -> Result<S, Self> {
        match self.state.downcast::<S>() {
            Ok(s) => Ok(*s),
            Err(state) => Err(StageState {
                name: self.name,
                state,
            }),
        }
    }
}

impl fmt::Debug for StageState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StageState")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}
