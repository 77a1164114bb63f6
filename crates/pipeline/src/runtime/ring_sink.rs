//! The producing end of an edge: [`RingSink`], which stages a station's
//! outputs in the ring and publishes them together.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use statepipe_ring::wait::WaitStrategy;
use statepipe_ring::TryPublishError;

use super::barrier::Coordinator;
use super::edge::UnitStates;
use super::edge::{max_batch, Doorbell, EdgeProducer, Msg, Sink};
use crate::failure::Failure;

/// The producing end of an edge.
///
/// Outputs are *staged* in the ring (written in place, not yet visible)
/// and published together: at the end of each input batch (`flush`), or
/// once `limit` of them wait. Publishing each output alone cost the
/// station a cache line fetched back from its reader for nearly every
/// slot, since the reader polls right behind it: trivial3 through
/// `Input`/`Output` ran at 10-11 M items/s on 2 vCPUs with the worker
/// 100% busy, against 80 M with no ring at either end. `limit` adapts so
/// that staging delays an output by about `hold` ([`Config::output_hold`])
/// at most: each flush that published something measures the time per
/// output since the last one, so a cheap stage publishes every few dozen
/// outputs and a stage of a microsecond or more publishes each output at
/// once. It starts at 1; after an idle spell the first batch is not
/// measured (its time would include the idling).
///
/// [`Config::output_hold`]: crate::Config::output_hold
pub(crate) struct RingSink<T, W: WaitStrategy> {
    producer: Option<EdgeProducer<T, W>>,
    /// An output not yet published: it goes out with `last` set if the
    /// group ends before another output comes.
    held: Option<(u64, T)>,
    /// Messages that found the ring full, in order.
    overflow: VecDeque<(u64, Option<T>, bool)>,
    /// The consuming worker's doorbell.
    wake: Arc<Doorbell>,
    published: bool,
    /// Staged outputs are published once this many wait.
    limit: u64,
    /// The most `limit` grows to: a consumer's batch, and half the ring.
    max_limit: u64,
    /// When the last measuring flush ran.
    mark: Option<Instant>,
    /// Messages staged since `mark`.
    since: u64,
    /// Flushes in a row that had nothing to publish.
    quiet: u8,
    /// How long outputs may wait staged, in nanoseconds; 0 never stages.
    hold_ns: u64,
}

impl<T: Send + 'static, W: WaitStrategy> RingSink<T, W> {
    pub(crate) fn new(producer: EdgeProducer<T, W>, wake: Arc<Doorbell>, hold: Duration) -> Self {
        let capacity = producer.capacity() as usize;
        RingSink {
            producer: Some(producer),
            held: None,
            overflow: VecDeque::new(),
            wake,
            published: false,
            limit: 1,
            max_limit: max_batch(capacity).min(capacity / 2).max(1) as u64,
            mark: None,
            since: 0,
            quiet: 0,
            hold_ns: u64::try_from(hold.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// Sets `limit` from the time per message since the last measuring
    /// flush (one clock read per flush that published something).
    fn pace(&mut self) {
        if self.hold_ns == 0 {
            return;
        }
        let now = (self.since > 0).then(Instant::now);
        self.pace_at(now);
    }

    /// `pace` with the clock read at `now` (`None` when nothing was
    /// staged since the last flush).
    fn pace_at(&mut self, now: Option<Instant>) {
        let Some(now) = now.filter(|_| self.since > 0) else {
            // Under load every batch ends in a flush that publishes, and
            // the next run's first flush finds nothing: one quiet flush is
            // normal, two mean the station idled.
            self.quiet = self.quiet.saturating_add(1);
            if self.quiet >= 2 {
                self.mark = None;
            }
            return;
        };
        self.quiet = 0;
        if let Some(mark) = self.mark {
            let per = (now.duration_since(mark).as_nanos() as u64 / self.since).max(1);
            self.limit = (self.hold_ns / per).clamp(1, self.max_limit);
        }
        self.mark = Some(now);
        self.since = 0;
    }

    fn send(&mut self, seq: u64, item: Option<T>, last: bool) {
        if self.overflow.is_empty() {
            if let Some(item) = self.put(seq, item, last) {
                self.overflow.push_back((seq, item, last));
            }
        } else {
            self.overflow.push_back((seq, item, last));
        }
    }

    /// Stages one message if there is room; hands the item back if the
    /// ring is full. On a halted ring (the pipeline is stopping on a
    /// failure reported elsewhere) or a closed sink the message is dropped.
    fn put(&mut self, seq: u64, item: Option<T>, last: bool) -> Option<Option<T>> {
        let p = self.producer.as_mut()?;
        let mut item = Some(item);
        let r = p.try_stage_with(|m: &mut Msg<T>| {
            m.seq = seq;
            *m.item.get_mut() = item.take().flatten();
            m.last = last;
        });
        match r {
            Ok(_) => {
                self.since += 1;
                if p.staged() >= self.limit {
                    p.publish_staged();
                    self.published = true;
                }
                None
            }
            // The closure did not run: the item is still ours. Finding the
            // ring full published what was staged.
            Err(TryPublishError::Full(_)) => {
                self.published = true;
                item
            }
            Err(TryPublishError::Halted(_)) => {
                self.producer = None;
                None
            }
        }
    }
}

impl<T: Send + 'static, W: WaitStrategy> Sink<T> for RingSink<T, W> {
    #[inline]
    fn item(&mut self, seq: u64, item: T, _: &mut Vec<Failure>) {
        if let Some((s, x)) = self.held.replace((seq, item)) {
            self.send(s, Some(x), false);
        }
    }

    #[inline]
    fn end(&mut self, seq: u64, _: &mut Vec<Failure>) {
        match self.held.take() {
            Some((s, x)) => self.send(s, Some(x), true),
            None => self.send(seq, None, true),
        }
    }

    #[inline]
    fn item_end(&mut self, seq: u64, item: T, _: &mut Vec<Failure>) {
        if let Some((s, x)) = self.held.take() {
            self.send(s, Some(x), false);
        }
        self.send(seq, Some(item), true);
    }

    fn flush(&mut self) -> bool {
        while let Some((seq, item, last)) = self.overflow.pop_front() {
            if self.producer.is_none() {
                self.overflow.clear();
                break;
            }
            if let Some(item) = self.put(seq, item, last) {
                self.overflow.push_front((seq, item, last));
                break;
            }
        }
        if let Some(p) = self.producer.as_mut() {
            if p.staged() > 0 {
                p.publish_staged();
                self.published = true;
            }
        }
        self.pace();
        if std::mem::take(&mut self.published) {
            self.wake.ring();
        }
        self.overflow.is_empty()
    }

    fn can_flush(&self) -> bool {
        self.producer
            .as_ref()
            .is_some_and(|p| p.staged() > 0 || (!self.overflow.is_empty() && p.has_space()))
    }

    fn publish_stats(&mut self) {}

    fn barrier(&mut self, seq: u64, _: &Coordinator) {
        // Between groups: nothing is held back.
        debug_assert!(self.held.is_none(), "a barrier inside a group");
        self.send(seq, None, false);
    }

    fn close(mut self: Box<Self>, _: &mut UnitStates) {
        debug_assert!(self.held.is_none(), "a group was left open at close");
        if let Some(p) = self.producer.as_mut() {
            p.publish_staged();
        }
        self.producer = None;
        self.wake.ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::edge::{inner_edge, Edge, EdgePoller, Halt};
    use statepipe_ring::wait::BusySpin;

    /// A sink, the edge's poller, and its ring (dropping either would
    /// halt the ring).
    fn sink(
        capacity: usize,
        hold: Duration,
    ) -> (
        RingSink<u64, BusySpin>,
        EdgePoller<u64, BusySpin>,
        Box<dyn Halt>,
    ) {
        let Edge {
            producer,
            poller,
            handle,
            ..
        } = inner_edge::<u64>(capacity);
        (
            RingSink::new(producer, Doorbell::new(), hold),
            poller,
            handle,
        )
    }

    #[test]
    fn the_limit_follows_the_time_per_output() {
        let (mut s, _poller, _ring) = sink(1024, Duration::from_micros(2));
        let t0 = Instant::now();
        let at = |us: u64| Some(t0 + Duration::from_micros(us));
        assert_eq!((s.limit, s.max_limit), (1, 128));
        // (outputs staged since the last flush, its time in µs, the limit):
        let steps = [
            (100, 0, 1),   // the first flush that staged something only sets the mark
            (100, 1, 128), // 10 ns per output: 200 fit in 2 µs; at most 128
            (10, 6, 4),    // 500 ns per output: 4 fit
            (1, 16, 1),    // one output of 10 µs: publish each at once
        ];
        for (since, us, limit) in steps {
            s.since = since;
            s.pace_at(at(us));
            assert_eq!(s.limit, limit, "{since} outputs, flush at {us} µs");
        }
        // One quiet flush is the next run's start: the mark stays.
        s.pace_at(None);
        assert_eq!(s.mark, at(16));
        s.since = 100;
        s.pace_at(at(17));
        assert_eq!(s.limit, 128);
        // Two in a row mean the station idled: the next batch, whose time
        // includes the idling, is not measured.
        s.pace_at(None);
        s.pace_at(None);
        assert_eq!(s.mark, None);
        s.since = 1;
        s.pace_at(at(1_000_000));
        assert_eq!(s.limit, 128, "not measured across the idle spell");
    }

    #[test]
    fn a_zero_hold_publishes_every_output_at_once() {
        let (mut s, mut poller, _ring) = sink(64, Duration::ZERO);
        let mut failures = Vec::new();
        for seq in 0..10 {
            s.item_end(seq, seq * 2, &mut failures);
            assert_eq!(s.producer.as_ref().map(|p| p.staged()), Some(0));
            assert!(s.flush());
        }
        assert_eq!(s.limit, 1);
        let mut seen = Vec::new();
        poller
            .poll(|m, _, _| seen.push((m.seq, *m.item.get_mut(), m.last)))
            .expect("running");
        let want: Vec<_> = (0..10).map(|q| (q, Some(q * 2), true)).collect();
        assert_eq!(seen, want);
    }
}
