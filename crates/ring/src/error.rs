//! One error type per operation; each hands back what it could not deliver.

use std::fmt;

/// [`publish`](crate::Producer::publish) failed; the value comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum PublishError<T> {
    /// The ring was halted (by [`Ring::halt`](crate::Ring::halt) or a
    /// panicking handler); nothing more will be consumed.
    Halted(T),
}

/// [`try_publish`](crate::Producer::try_publish) failed; the value comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TryPublishError<T> {
    /// No free slot right now: retry later, or use `publish` to wait.
    Full(T),
    /// The ring was halted; nothing more will be consumed.
    Halted(T),
}

/// [`publish_timeout`](crate::Producer::publish_timeout) failed; the value
/// comes back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum PublishTimeoutError<T> {
    /// No slot became free before the timeout.
    Timeout(T),
    /// The ring was halted; nothing more will be consumed.
    Halted(T),
}

macro_rules! impl_value_error {
    ($ty:ident { $($variant:ident => $msg:literal),* }) => {
        impl<T> $ty<T> {
            /// The value that was not published.
            pub fn into_inner(self) -> T {
                match self { $($ty::$variant(v) => v),* }
            }
        }
        impl<T> fmt::Debug for $ty<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self { $($ty::$variant(_) => write!(f, "{}({})", stringify!($variant), stringify!(..))),* }
            }
        }
        impl<T> fmt::Display for $ty<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self { $($ty::$variant(_) => f.write_str($msg)),* }
            }
        }
        impl<T> std::error::Error for $ty<T> {}
    };
}

impl_value_error!(PublishError {
    Halted => "the ring was halted; the event was not published (see Ring::join for why)"
});
impl_value_error!(TryPublishError {
    Full => "the ring is full; retry later or call publish to wait for space",
    Halted => "the ring was halted; the event was not published (see Ring::join for why)"
});
impl_value_error!(PublishTimeoutError {
    Timeout => "no slot became free before the timeout; consumers are slower than the producer",
    Halted => "the ring was halted; the event was not published (see Ring::join for why)"
});

/// Why [`EventPoller::poll`](crate::EventPoller::poll) has nothing more to give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollError {
    /// Every producer is gone and this poller has handled every event.
    Closed,
    /// The ring was halted.
    Halted,
}

impl fmt::Display for PollError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PollError::Closed => f.write_str("the ring is closed and drained"),
            PollError::Halted => f.write_str("the ring was halted"),
        }
    }
}

impl std::error::Error for PollError {}

/// Why [`Ring::join`](crate::Ring::join) did not end in a clean drain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// A handler panicked while handling `sequence`; the ring halted.
    HandlerPanicked {
        /// The consumer's name, as given to the builder.
        consumer: String,
        /// The sequence the handler was handling.
        sequence: u64,
        /// The panic payload, if it was a string.
        message: String,
    },
    /// [`Ring::halt`](crate::Ring::halt) stopped the ring before it drained.
    Halted {
        /// Per consumer: its name and how many published events it had not
        /// handled when it stopped.
        unhandled: Vec<(String, u64)>,
    },
    /// A consumer thread could not be spawned.
    Spawn(String),
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::HandlerPanicked {
                consumer,
                sequence,
                message,
            } => write!(
                f,
                "consumer '{consumer}' panicked at sequence {sequence}: {message}; the ring halted"
            ),
            RingError::Halted { unhandled } => {
                write!(
                    f,
                    "the ring was halted before it drained; unhandled events:"
                )?;
                for (name, n) in unhandled {
                    write!(f, " {name}={n}")?;
                }
                Ok(())
            }
            RingError::Spawn(e) => write!(f, "could not spawn a consumer thread: {e}"),
        }
    }
}

impl std::error::Error for RingError {}
