//! Event handlers and the loop of a handler thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use super::chase::Chase;
use crate::producer::ProducerKind;
use crate::shared::{Failure, Seen, Shared as Ring, HALTED};
use crate::sync::{thread, Arc, Ordering, UnsafeCell};
use crate::wait::WaitStrategy;

/// Handles events by shared reference; many such handlers may read the same
/// event at once (multicast).
///
/// Closures `FnMut(&T, u64, bool) + Send + 'static` implement it (annotate
/// the argument types: `|event: &u64, sequence: u64, end_of_batch: bool|`).
pub trait EventHandler<T>: Send + 'static {
    /// Handles `event` at `sequence`; `end_of_batch` is true for the last
    /// event of the batch that was available when the batch started: a good
    /// moment to flush.
    fn on_event(&mut self, event: &T, sequence: u64, end_of_batch: bool);

    /// Runs on the consumer thread before the first event.
    fn on_start(&mut self) {}

    /// Runs when the wait strategy's consumer timeout passes without an
    /// event (see [`Blocking::with_timeout`](crate::wait::Blocking::with_timeout));
    /// `next_sequence` is the event being waited for.
    fn on_timeout(&mut self, next_sequence: u64) {
        let _ = next_sequence;
    }

    /// Runs on the consumer thread after the last event once the ring is
    /// drained or halted (not after a panic in this handler).
    fn on_shutdown(&mut self) {}
}

impl<T, F> EventHandler<T> for F
where
    F: FnMut(&T, u64, bool) + Send + 'static,
{
    #[inline(always)]
    fn on_event(&mut self, event: &T, sequence: u64, end_of_batch: bool) {
        self(event, sequence, end_of_batch)
    }
}

/// Handles events by mutable reference. The builder accepts such a handler
/// only as the sole member of its stage, so no other consumer can read the
/// event while it is mutated; later stages see the mutation.
pub trait EventHandlerMut<T>: Send + 'static {
    /// Handles `event` at `sequence`; see [`EventHandler::on_event`].
    fn on_event(&mut self, event: &mut T, sequence: u64, end_of_batch: bool);

    /// See [`EventHandler::on_start`].
    fn on_start(&mut self) {}

    /// See [`EventHandler::on_timeout`].
    fn on_timeout(&mut self, next_sequence: u64) {
        let _ = next_sequence;
    }

    /// See [`EventHandler::on_shutdown`].
    fn on_shutdown(&mut self) {}
}

impl<T, F> EventHandlerMut<T> for F
where
    F: FnMut(&mut T, u64, bool) + Send + 'static,
{
    #[inline(always)]
    fn on_event(&mut self, event: &mut T, sequence: u64, end_of_batch: bool) {
        self(event, sequence, end_of_batch)
    }
}

/// How a handler reaches the slot: shared or exclusive.
pub(crate) trait Access<T>: Send + 'static {
    fn handle(&mut self, cell: &UnsafeCell<T>, sequence: u64, end_of_batch: bool);
    fn start(&mut self);
    fn timeout(&mut self, next: u64);
    fn shutdown(&mut self);
}

/// A handler that reads events by `&T`.
pub(crate) struct Shared<H>(pub(crate) H);
/// A handler that mutates events by `&mut T`.
pub(crate) struct Exclusive<H>(pub(crate) H);

impl<T, H: EventHandler<T>> Access<T> for Shared<H> {
    #[inline(always)]
    fn handle(&mut self, cell: &UnsafeCell<T>, sequence: u64, end_of_batch: bool) {
        cell.with(|p| {
            // SAFETY: the sequence is published (Acquire) and below every
            // dependency, and producers do not write it until this consumer's
            // sequence passes it (gate): only shared reads happen now.
            let event = unsafe { &*p };
            self.0.on_event(event, sequence, end_of_batch)
        })
    }
    fn start(&mut self) {
        self.0.on_start()
    }
    fn timeout(&mut self, next: u64) {
        self.0.on_timeout(next)
    }
    fn shutdown(&mut self) {
        self.0.on_shutdown()
    }
}

impl<T, H: EventHandlerMut<T>> Access<T> for Exclusive<H> {
    #[inline(always)]
    fn handle(&mut self, cell: &UnsafeCell<T>, sequence: u64, end_of_batch: bool) {
        cell.with_mut(|p| {
            // SAFETY: as for `Shared`, and in addition the builder admits an
            // exclusive handler only as the sole consumer of its stage (or a
            // worker group that splits sequences), so while this consumer
            // sits between its dependencies and its dependents no other
            // consumer can touch event `sequence`.
            let event = unsafe { &mut *p };
            self.0.on_event(event, sequence, end_of_batch)
        })
    }
    fn start(&mut self) {
        self.0.on_start()
    }
    fn timeout(&mut self, next: u64) {
        self.0.on_timeout(next)
    }
    fn shutdown(&mut self) {
        self.0.on_shutdown()
    }
}

/// Spawns the thread of consumer `idx`.
pub(crate) fn spawn<T, W, K, A>(
    ring: Arc<Ring<T, W, K>>,
    idx: usize,
    mut access: A,
) -> std::io::Result<thread::JoinHandle<()>>
where
    T: Send + Sync + 'static,
    W: WaitStrategy,
    K: ProducerKind,
    A: Access<T>,
{
    let name = format!("ring-{}", ring.consumers[idx].name);
    thread::Builder::new().name(name).spawn(move || {
        let at = std::cell::Cell::new(0u64);
        let result = catch_unwind(AssertUnwindSafe(|| run(&ring, idx, &mut access, &at)));
        if let Err(payload) = result {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_string());
            ring.fail(Failure {
                consumer: ring.consumers[idx].name.clone(),
                sequence: at.get(),
                message,
            });
        }
    })
}

/// The loop of one handler thread: wait, handle a batch, publish progress.
fn run<T, W: WaitStrategy, K: ProducerKind, A: Access<T>>(
    ring: &Ring<T, W, K>,
    idx: usize,
    access: &mut A,
    at: &std::cell::Cell<u64>,
) {
    let me = &ring.consumers[idx];
    let partition = me.partition;
    let timeout = ring.wait.consumer_timeout();
    access.start();
    let mut next: u64 = 0;
    // How far the ring is known to be published (see `Shared::published_from`).
    let mut seen = Seen::default();
    // Whether to let dense producers get ahead first (see `chase`).
    let mut chase = Chase::new(ring, idx);
    loop {
        let mut upper = ring.available_for(idx, next, &mut seen);
        if upper == next && chase.lingers() {
            chase.linger(ring, next);
            upper = ring.available_for(idx, next, &mut seen);
        }
        if upper == next {
            let mut stop = false;
            let mut polls = 0u32;
            let deadline = timeout.map(|t| Instant::now() + t);
            let ready = ring.wait.wait_until(deadline, || {
                upper = ring.available_for(idx, next, &mut seen);
                if upper > next {
                    return true;
                }
                polls = polls.saturating_add(1);
                ring.prefetch_while_idle(next, polls);
                stop = ring.finished(next);
                stop
            });
            if stop {
                break;
            }
            if !ready {
                access.timeout(next);
                continue;
            }
        }
        let end = upper.min(next.saturating_add(ring.max_batch));
        chase.batch(end - next, &me.lingering);
        match partition {
            None => {
                // Walk the batch as (at most two) contiguous runs of slots:
                // no masking or bounds check per event.
                let mut s = next;
                while s < end {
                    let run = ring.run(s, end);
                    for (k, slot) in run.iter().enumerate() {
                        let seq = s + k as u64;
                        at.set(seq);
                        access.handle(&slot.value, seq, seq + 1 == end);
                    }
                    s += run.len() as u64;
                }
            }
            Some((i, n)) => {
                let last = last_handled(next, end, partition);
                let first = next + (i + n - next % n) % n;
                let mut s = first;
                while s < end {
                    at.set(s);
                    access.handle(ring.slot(s), s, Some(s) == last);
                    s += n;
                }
            }
        }
        // Release: pairs with the Acquire loads of consumer sequences in
        // `Shared::gate` (producers) and `Shared::available_for` (dependents):
        // our accesses to `[next, end)` happen before they reuse those slots.
        me.seq.store(end, Ordering::Release);
        ring.wait.notify();
        next = end;
        if ring.state() & HALTED != 0 {
            break;
        }
    }
    access.shutdown();
}

/// The last sequence in `[from, end)` that a consumer with `partition`
/// handles, if any.
#[inline(always)]
fn last_handled(from: u64, end: u64, partition: Option<(u64, u64)>) -> Option<u64> {
    if end <= from {
        return None;
    }
    match partition {
        None => Some(end - 1),
        Some((i, n)) => {
            let last = end - 1;
            // The largest s <= last with s % n == i.
            let back = (last % n + n - i) % n;
            (last >= from + back).then(|| last - back)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::last_handled;

    #[test]
    fn last_handled_matches_a_scan() {
        for n in 1..5u64 {
            for i in 0..n {
                for from in 0..12u64 {
                    for end in 0..14u64 {
                        let scan = (from..end).rev().find(|s| s % n == i);
                        assert_eq!(last_handled(from, end, Some((i, n))), scan);
                    }
                }
            }
        }
        assert_eq!(last_handled(3, 7, None), Some(6));
        assert_eq!(last_handled(3, 3, None), None);
    }
}
