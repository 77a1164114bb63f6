//! Where barriers enter: the first station's source.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::barrier::{Coordinator, BARRIER};
use super::edge::{DepthProbe, Source, SourceEnd};

/// The first station's source: the pipeline's input, with the barriers
/// put in where they were asked for.
///
/// A barrier asked for after `position` inputs goes in before the input
/// numbered `position`: each input handed on first checks (one Relaxed
/// load) whether a barrier is queued. When the caller of
/// `Running::checkpoint` is the thread that sends (or otherwise
/// happens-before the sending of input `position`), the queued flag is
/// visible by then: the sender's Release publication of that input, which
/// the ring's Acquire read pairs with, comes after the flag's store in the
/// sender's order.
pub(crate) struct Injector<T> {
    pub(crate) inner: Box<dyn Source<T>>,
    pub(crate) co: Arc<Coordinator>,
    /// The number of the next input.
    pub(crate) next_seq: u64,
}

/// Puts in every queued barrier due before input `seq` (all of them when
/// `all`), each recorded at position `seq`.
fn inject<T>(
    co: &Coordinator,
    seq: u64,
    all: bool,
    f: &mut dyn FnMut(u64, Option<T>, bool),
) -> usize {
    let mut n = 0;
    while let Some((id, position)) = co.front() {
        if !all && position.is_some_and(|p| p > seq) {
            break;
        }
        // Popped first: the units this station runs see the barrier
        // inside `f`, and the last to see it forgets it.
        co.pop(id, seq);
        f(BARRIER | id, None, false);
        n += 1;
    }
    n
}

impl<T: Send + 'static> Source<T> for Injector<T> {
    fn poll(&mut self, f: &mut dyn FnMut(u64, Option<T>, bool)) -> Result<usize, SourceEnd> {
        let co = &*self.co;
        let mut n = 0;
        // Relaxed: see the type's docs.
        if co.queued.load(Ordering::Relaxed) {
            n += inject(co, self.next_seq, false, f);
        }
        let next = &mut self.next_seq;
        let r = self.inner.poll(&mut |seq, item, last| {
            if co.queued.load(Ordering::Relaxed) {
                inject(co, seq, false, f);
            }
            if last {
                *next = seq + 1;
            }
            f(seq, item, last);
        });
        match r {
            Ok(m) => Ok(n + m),
            Err(SourceEnd::Closed) => {
                // The input is closed: every barrier still asked for goes
                // in after the last input.
                n += inject(co, self.next_seq, true, f);
                if n > 0 {
                    Ok(n)
                } else {
                    Err(SourceEnd::Closed)
                }
            }
            Err(e) => Err(e),
        }
    }

    fn ready(&self) -> bool {
        self.inner.ready() || self.co.queued.load(Ordering::Relaxed)
    }

    fn depth_probe(&self) -> DepthProbe {
        self.inner.depth_probe()
    }

    fn capacity(&self) -> u64 {
        self.inner.capacity()
    }
}
