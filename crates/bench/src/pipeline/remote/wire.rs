//! What every contender of the remote cases moves, and how its two ends measure it:
//! the 64-byte [`Item`], the shared monotonic clock, the sender's [`Pacer`] and the
//! receiver's [`Tally`].
//!
//! Both processes run on one host, so `CLOCK_MONOTONIC` is one clock for both: a send
//! time written into an item by the sender can be subtracted from the receiver's clock.

use std::time::Duration;

use hdrhistogram::Histogram;
use nix::time::{clock_gettime, ClockId};
use serde::{Deserialize, Serialize};

/// Bytes of an item, on the wire and in memory.
pub const ITEM_BYTES: usize = 64;

/// Mixed into every item's check word.
const CHECK: u64 = 0x9E37_79B9_7F4A_7C15;

/// One item: a sequence number, its send time, a check word and padding to 64 bytes.
///
/// `sent_ns` is [`now_ns`] when the sender handed the item over, in a paced sample; 0 in
/// a flood (nothing reads it there, and reading the clock per item would slow the sender).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bytemuck::Pod, bytemuck::Zeroable,
)]
#[repr(C)]
pub struct Item {
    /// 0, 1, 2, ... in send order.
    pub seq: u64,
    /// When it was sent (monotonic ns), or 0.
    pub sent_ns: u64,
    /// `seq ^ CHECK`: a corrupted or misframed item fails [`Item::is_intact`].
    pub check: u64,
    /// Payload up to 64 bytes (copies of `seq`).
    pub pad: [u64; 5],
}

const _: () = assert!(std::mem::size_of::<Item>() == ITEM_BYTES);

impl Item {
    /// Item `seq`, sent at `sent_ns`.
    #[inline]
    pub fn new(seq: u64, sent_ns: u64) -> Item {
        Item {
            seq,
            sent_ns,
            check: seq ^ CHECK,
            pad: [seq; 5],
        }
    }

    /// Whether the check word and the last payload word agree with `seq`.
    #[inline]
    pub fn is_intact(&self) -> bool {
        self.check == self.seq ^ CHECK && self.pad[4] == self.seq
    }

    /// Its 64 bytes, little-endian words in field order.
    #[inline]
    pub fn to_bytes(&self) -> [u8; ITEM_BYTES] {
        let mut out = [0u8; ITEM_BYTES];
        let words = [self.seq, self.sent_ns, self.check]
            .into_iter()
            .chain(self.pad);
        for (chunk, word) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        out
    }

    /// The item in `bytes`, or `None` when they are not 64.
    #[inline]
    pub fn from_bytes(bytes: &[u8]) -> Option<Item> {
        if bytes.len() != ITEM_BYTES {
            return None;
        }
        let mut w = [0u64; 8];
        for (word, chunk) in w.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *word = u64::from_le_bytes(b);
        }
        Some(Item {
            seq: w[0],
            sent_ns: w[1],
            check: w[2],
            pad: [w[3], w[4], w[5], w[6], w[7]],
        })
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the same clock in every process of the host.
#[inline]
pub fn now_ns() -> u64 {
    // CLOCK_MONOTONIC cannot fail on Linux; 0 would only make a latency absurd, not wrong silently.
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

/// What one sample asks the sender to send.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Load {
    /// `items` items as fast as the sender can; timed at the receiver, from the first
    /// item received to the last (ZeroMQ's `local_thr` measures so).
    Flood {
        /// Items to send.
        items: u64,
    },
    /// `items` items, item `i` due `i / rate` s after the start, each stamped with the
    /// clock when sent; the receiver records each one's latency.
    Paced {
        /// Items to send.
        items: u64,
        /// Items per second.
        rate: f64,
    },
}

impl Load {
    /// Items the sender sends and the receiver expects.
    pub fn items(&self) -> u64 {
        match *self {
            Load::Flood { items } | Load::Paced { items, .. } => items,
        }
    }
}

/// Sleeps rather than spins when the next item is further away than this.
const SLEEP_ABOVE: Duration = Duration::from_micros(200);

/// The sender's schedule in a paced sample.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    start_ns: u64,
    ns_per_item: f64,
}

impl Pacer {
    /// A schedule of `rate` items per second from now.
    pub fn start(rate: f64) -> Pacer {
        Pacer {
            start_ns: now_ns(),
            ns_per_item: 1e9 / rate.max(1e-3),
        }
    }

    /// When item `seq` is due.
    #[inline]
    pub fn due_ns(&self, seq: u64) -> u64 {
        self.start_ns + (seq as f64 * self.ns_per_item) as u64
    }

    /// Nanoseconds since the start.
    #[inline]
    pub fn elapsed_ns(&self, now: u64) -> u64 {
        now.saturating_sub(self.start_ns)
    }

    /// Waits until item `seq` is due and returns the clock then: sleeps while it is far,
    /// then yields the CPU (to the transport's own threads, pinned beside the sender)
    /// until it is due.
    pub fn wait(&self, seq: u64) -> u64 {
        let due = self.due_ns(seq);
        loop {
            let now = now_ns();
            if now >= due {
                return now;
            }
            let left = Duration::from_nanos(due - now);
            if left > SLEEP_ABOVE {
                std::thread::sleep(left - SLEEP_ABOVE / 2);
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// The share of a paced sample's first items whose latency is not recorded (warm-up:
/// connections, caches, the first allocations).
pub const WARM_UP_SHARE: u64 = 10;

/// What the receiver counts: items, their sequence numbers' sum, broken items, the
/// first and last arrival, and (paced) each item's latency.
#[derive(Debug)]
pub struct Tally {
    load: Load,
    count: u64,
    seq_sum: u64,
    broken: u64,
    first_ns: u64,
    last_ns: u64,
    latency: Histogram<u64>,
}

impl Tally {
    /// An empty tally for `load`.
    pub fn new(load: Load) -> Tally {
        Tally {
            load,
            count: 0,
            seq_sum: 0,
            broken: 0,
            first_ns: 0,
            last_ns: 0,
            // 1 ns to 100 s at 3 significant digits (a longer latency saturates).
            latency: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid bounds"),
        }
    }

    /// Counts `item`, received now. Reads the clock for the first and last item, and
    /// for every item of a paced sample.
    #[inline]
    pub fn add(&mut self, item: &Item) {
        self.count += 1;
        self.seq_sum = self.seq_sum.wrapping_add(item.seq);
        if !item.is_intact() {
            self.broken += 1;
        }
        let items = self.load.items();
        match self.load {
            Load::Flood { .. } => {
                if self.count == 1 {
                    self.first_ns = now_ns();
                }
                if self.count == items {
                    self.last_ns = now_ns();
                }
            }
            Load::Paced { .. } => {
                let now = now_ns();
                if self.count == 1 {
                    self.first_ns = now;
                }
                self.last_ns = now;
                if item.seq >= items / WARM_UP_SHARE {
                    self.latency
                        .saturating_record(now.saturating_sub(item.sent_ns));
                }
            }
        }
    }

    /// Whether every expected item has come.
    #[inline]
    pub fn done(&self) -> bool {
        self.count >= self.load.items()
    }

    /// The figures, for the parent.
    pub fn report(&self) -> Received {
        let q = |q: f64| self.latency.value_at_quantile(q);
        Received {
            items: self.count,
            seq_sum: self.seq_sum,
            broken: self.broken,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            recorded: self.latency.len(),
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            max_ns: self.latency.max(),
        }
    }
}

/// What a receiver reports at the end of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    /// Items received.
    pub items: u64,
    /// The wrapping sum of their sequence numbers.
    pub seq_sum: u64,
    /// Items that failed [`Item::is_intact`].
    pub broken: u64,
    /// When the first item arrived (monotonic ns).
    pub first_ns: u64,
    /// When the last expected item arrived.
    pub last_ns: u64,
    /// Latencies recorded (paced samples; 0 in a flood).
    pub recorded: u64,
    /// Median latency, ns.
    pub p50_ns: u64,
    /// 99th percentile latency, ns.
    pub p99_ns: u64,
    /// Largest latency, ns.
    pub max_ns: u64,
}

impl Received {
    /// Checks the tally against `items` items `0..items`, each once and intact.
    ///
    /// # Errors
    ///
    /// The count, the sum or the check words disagree.
    pub fn check(&self, who: &str, items: u64) -> Result<(), crate::BenchError> {
        if self.items != items {
            return Err(crate::BenchError::WrongCount {
                who: who.into(),
                expected: items,
                got: self.items,
            });
        }
        let want = (0..items).fold(0u64, u64::wrapping_add);
        if self.seq_sum != want {
            return Err(crate::BenchError::WrongSum {
                who: who.into(),
                expected: want,
                got: self.seq_sum,
            });
        }
        if self.broken > 0 {
            return Err(crate::BenchError::failed(
                who,
                format!("{} items arrived corrupted", self.broken),
            ));
        }
        Ok(())
    }

    /// Items per second from the first arrival to the last: `(items - 1) / elapsed`.
    pub fn rate(&self) -> f64 {
        let ns = self.last_ns.saturating_sub(self.first_ns).max(1);
        self.items.saturating_sub(1) as f64 * 1e9 / ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_round_trips_through_its_bytes() {
        let item = Item::new(42, 7);
        let bytes = item.to_bytes();
        assert_eq!(Item::from_bytes(&bytes), Some(item));
        assert!(item.is_intact());
        let mut bad = bytes;
        bad[0] ^= 1;
        assert!(!Item::from_bytes(&bad).unwrap().is_intact());
        assert_eq!(Item::from_bytes(&bytes[..63]), None);
    }

    #[test]
    fn a_tally_checks_counts_and_sums() {
        let load = Load::Paced {
            items: 20,
            rate: 1e6,
        };
        let mut tally = Tally::new(load);
        for seq in 0..20 {
            assert!(!tally.done());
            tally.add(&Item::new(seq, now_ns()));
        }
        assert!(tally.done());
        let r = tally.report();
        assert_eq!(r.recorded, 18, "the first 10% are warm-up");
        r.check("t", 20).unwrap();
        assert!(r.check("t", 21).is_err());
        let mut dup = Tally::new(Load::Flood { items: 2 });
        dup.add(&Item::new(1, 0));
        dup.add(&Item::new(1, 0));
        assert!(dup.report().check("t", 2).is_err());
    }

    #[test]
    fn the_pacer_waits_for_each_item() {
        let pacer = Pacer::start(10_000.0);
        let now = pacer.wait(5);
        assert!(now >= pacer.due_ns(5));
        assert_eq!(pacer.due_ns(10) - pacer.due_ns(0), 1_000_000);
    }
}
