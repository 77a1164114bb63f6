//! The workloads of `statepipe bench pipeline`, shared by statepipe and every peer so
//! that all of them move the same payloads and are checked against the same answers.
//!
//! | workload | what moves | checked by |
//! |---|---|---|
//! | trivial3 | `u64` items `0..n` through three cheap stateful stages ([`trivial_a`], [`trivial_b`], [`trivial_c`]) | the wrapping sum of the last stage's outputs, [`trivial3_expected`] |
//! | scaling | `u64` items through [`SCALING_STAGES`] stages of [`spin_work`] (~1 µs each, [`calibrate_iters_for`]) | [`scaling_expected`] |
//! | fan-out | `u64` items through two branches of two [`spin_work`] stages each ([`fan_out_a`], [`fan_out_b`]), paired per item by [`fan_out_combine`] | [`fanout_expected`] |
//! | thread-ring | one token through [`STAGES`] stages in a ring (Benchmarks Game) | [`thread_ring_answer`] |
//! | message-ring | `in_flight` [`RingMessage`]s circling `laps` times through `stages` stages | [`message_ring_expected`] |
//! | logger | fixed-width lines from [`format_line`], many producers, one file | [`verify_log`] |
//!
//! Every function here is sequential and deterministic: the expected answers are the
//! sequential meaning of the workload, whatever runs it concurrently.

use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::BenchError;

/// The 64-bit golden-ratio constant (Fibonacci hashing); odd, so multiplying by it is a
/// bijection on `u64`.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

// ---------------------------------------------------------------------------------
// trivial3

/// Stage A of trivial3: counts the items it saw and hashes the item.
///
/// `state` starts at 0. The output depends on the item only; the count is state a real
/// stage would keep (and a runtime must carry).
#[inline]
pub fn trivial_a(state: &mut u64, x: u64) -> u64 {
    *state = state.wrapping_add(1);
    x.wrapping_mul(GOLDEN)
}

/// Stage B of trivial3: a running xor-rotate of every item so far; outputs the running
/// value, so a reordered, lost or duplicated item changes every later output.
///
/// `state` starts at 0.
#[inline]
pub fn trivial_b(state: &mut u64, x: u64) -> u64 {
    *state = (*state ^ x).rotate_left(5);
    *state
}

/// Stage C of trivial3: a counter added to each item.
///
/// `state` starts at 0.
#[inline]
pub fn trivial_c(state: &mut u64, x: u64) -> u64 {
    *state = state.wrapping_add(1);
    x.wrapping_add(*state)
}

/// The checksum every trivial3 contender must report: the wrapping sum of stage C's
/// outputs when items `0..n_items` go through A, B and C in order, every state starting
/// at 0.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::workload::{trivial3_expected, trivial_a, trivial_b, trivial_c};
/// let (mut a, mut b, mut c) = (0, 0, 0);
/// let first = trivial_c(&mut c, trivial_b(&mut b, trivial_a(&mut a, 0)));
/// assert_eq!(trivial3_expected(1), first);
/// ```
pub fn trivial3_expected(n_items: u64) -> u64 {
    let (mut a, mut b, mut c) = (0, 0, 0);
    (0..n_items).fold(0u64, |sum, x| {
        let y = trivial_c(&mut c, trivial_b(&mut b, trivial_a(&mut a, x)));
        sum.wrapping_add(y)
    })
}

// ---------------------------------------------------------------------------------
// scaling

/// Stages of the scaling workload.
pub const SCALING_STAGES: usize = 4;

/// A dependent arithmetic loop of `iters` steps (an LCG step and an xor-shift each):
/// work the optimizer can neither remove nor vectorise, about 2 ns a step.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::workload::spin_work;
/// assert_eq!(spin_work(7, 0), 7);
/// assert_ne!(spin_work(7, 10), spin_work(8, 10));
/// ```
#[inline]
pub fn spin_work(x: u64, iters: u32) -> u64 {
    let mut v = black_box(x);
    for _ in 0..black_box(iters) {
        v = v
            .wrapping_mul(0x5851_F42D_4C95_7F2D)
            .wrapping_add(0x1405_7B7E_F767_814F);
        v ^= v >> 29;
    }
    black_box(v)
}

/// How many [`spin_work`] iterations take about `ns` nanoseconds on this machine (at
/// least 1). Takes about 10 ms: doubles the iterations until one call lasts 2 ms, then
/// keeps the fastest of five calls of that size (the least disturbed).
pub fn calibrate_iters_for(ns: u64) -> u32 {
    const LONG_ENOUGH: Duration = Duration::from_millis(2);
    let time = |iters: u32| {
        let t0 = Instant::now();
        black_box(spin_work(black_box(1), iters));
        t0.elapsed()
    };
    let mut iters: u32 = 1024;
    while time(iters) < LONG_ENOUGH && iters < (1 << 30) {
        iters *= 2;
    }
    let best = (0..5).map(|_| time(iters)).min().unwrap_or(LONG_ENOUGH);
    let ns_per_iter = best.as_nanos().max(1) as f64 / f64::from(iters);
    (ns as f64 / ns_per_iter)
        .round()
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

/// The checksum of the scaling workload: the wrapping sum over items `0..n_items` of
/// `stages` nested [`spin_work`]`(_, iters)` calls. Costs as much as running the
/// workload on one thread: compute it once per case, outside the timing.
pub fn scaling_expected(n_items: u64, stages: usize, iters: u32) -> u64 {
    (0..n_items).fold(0u64, |sum, x| {
        let y = (0..stages).fold(x, |v, _| spin_work(v, iters));
        sum.wrapping_add(y)
    })
}

/// One case of the scaling workload with its answer, computed once (it costs as much as
/// running the case on one thread) and shared by every sample of every contender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scaling {
    /// Items `0..items` go through the stages.
    pub items: u64,
    /// Stages, each one [`spin_work`]`(_, iters)` per item.
    pub stages: usize,
    /// Iterations of [`spin_work`] per item and stage.
    pub iters: u32,
    /// [`scaling_expected`]`(items, stages, iters)`.
    pub expected: u64,
}

impl Scaling {
    /// A case and its answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_bench::pipeline::workload::{scaling_expected, Scaling};
    /// let case = Scaling::new(10, 4, 3);
    /// assert_eq!(case.expected, scaling_expected(10, 4, 3));
    /// ```
    pub fn new(items: u64, stages: usize, iters: u32) -> Scaling {
        Scaling {
            items,
            stages,
            iters,
            expected: scaling_expected(items, stages, iters),
        }
    }
}

// ---------------------------------------------------------------------------------
// fan-out

/// What branch b of the fan-out xors into each item before its first stage, so that
/// the two branches compute on different inputs (and a swapped pair shows).
pub const FAN_OUT_SALT: u64 = 0xD1B5_4A32_D192_ED03;

/// Branch a of the fan-out: two [`spin_work`]`(_, iters)` stages on the item.
#[inline]
pub fn fan_out_a(x: u64, iters: u32) -> u64 {
    spin_work(spin_work(x, iters), iters)
}

/// Branch b of the fan-out: two [`spin_work`]`(_, iters)` stages on the item xored
/// with [`FAN_OUT_SALT`].
#[inline]
pub fn fan_out_b(x: u64, iters: u32) -> u64 {
    spin_work(spin_work(x ^ FAN_OUT_SALT, iters), iters)
}

/// The cheap stage after the fan-out's join: combines an item's two branch outputs,
/// not symmetrically (a pair taken the wrong way round changes the result).
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::workload::fan_out_combine;
/// assert_ne!(fan_out_combine(1, 2), fan_out_combine(2, 1));
/// ```
#[inline]
pub fn fan_out_combine(a: u64, b: u64) -> u64 {
    a ^ b.rotate_left(17)
}

/// The checksum of the fan-out workload: the wrapping sum over items `0..n_items` of
/// [`fan_out_combine`]`(`[`fan_out_a`]`(x), `[`fan_out_b`]`(x))`. Costs as much as
/// running the workload on one thread: compute it once per run, outside the timing.
pub fn fanout_expected(n_items: u64, iters: u32) -> u64 {
    (0..n_items).fold(0u64, |sum, x| {
        sum.wrapping_add(fan_out_combine(fan_out_a(x, iters), fan_out_b(x, iters)))
    })
}

/// One case of the fan-out workload with its answer, computed once and shared by every
/// sample of every contender (like [`Scaling`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FanOut {
    /// Items `0..items` go through both branches.
    pub items: u64,
    /// Iterations of [`spin_work`] per item and stage.
    pub iters: u32,
    /// [`fanout_expected`]`(items, iters)`.
    pub expected: u64,
}

impl FanOut {
    /// A case and its answer.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_bench::pipeline::workload::{fanout_expected, FanOut};
    /// let case = FanOut::new(10, 3);
    /// assert_eq!(case.expected, fanout_expected(10, 3));
    /// ```
    pub fn new(items: u64, iters: u32) -> FanOut {
        FanOut {
            items,
            iters,
            expected: fanout_expected(items, iters),
        }
    }
}

// ---------------------------------------------------------------------------------
// thread-ring

/// Stages of the Benchmarks Game's thread-ring, numbered `1..=STAGES`.
///
/// The rule: stage 1 receives a token holding `hops`; a stage receiving a token of 0
/// prints its own number and the ring stops; otherwise it passes the token, decremented,
/// to the next stage (stage `STAGES` passes to stage 1).
pub const STAGES: usize = 503;

/// The number thread-ring prints after `hops` passes: `hops % 503 + 1`.
///
/// # Examples
///
/// ```
/// use statepipe_bench::pipeline::workload::thread_ring_answer;
/// assert_eq!(thread_ring_answer(0), 1);
/// assert_eq!(thread_ring_answer(1000), 498); // the Benchmarks Game's check value
/// ```
pub fn thread_ring_answer(hops: u64) -> u64 {
    hops % STAGES as u64 + 1
}

// ---------------------------------------------------------------------------------
// message-ring

/// One message of the message ring.
///
/// Stage 0 injects message `m` as [`message_ring_start`]`(m)` with `laps == 0`. Each
/// stage `s` applies [`message_ring_hop`]`(value, s)` and passes the message to stage
/// `s + 1`; stage `stages - 1` passes it back to stage 0, which adds one to `laps` and
/// retires the message once `laps` reaches the run's lap count, otherwise starts the
/// next lap (hop at stage 0 again). A lap is therefore `stages` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingMessage {
    /// The payload, transformed at every stage.
    pub value: u64,
    /// Laps completed.
    pub laps: u32,
}

/// The value message `m` starts with.
#[inline]
pub fn message_ring_start(m: u64) -> u64 {
    m
}

/// What stage `stage` does to a message's value: a bijective mix of the value and the
/// stage number, so the final value proves the path it took.
#[inline]
pub fn message_ring_hop(value: u64, stage: usize) -> u64 {
    (value ^ stage as u64).wrapping_mul(GOLDEN).rotate_left(17)
}

/// Sends of one run: `stages * in_flight * laps` (the unit of its msg/s).
pub fn message_ring_sends(stages: usize, in_flight: usize, laps: u32) -> u64 {
    stages as u64 * in_flight as u64 * u64::from(laps)
}

/// The checksum of a message-ring run: the wrapping sum of the retired messages' values.
/// Costs one multiply per send.
pub fn message_ring_expected(stages: usize, in_flight: usize, laps: u32) -> u64 {
    (0..in_flight as u64).fold(0u64, |sum, m| {
        let mut v = message_ring_start(m);
        for _ in 0..laps {
            for s in 0..stages {
                v = message_ring_hop(v, s);
            }
        }
        sum.wrapping_add(v)
    })
}

// ---------------------------------------------------------------------------------
// logger

/// Bytes of every line [`format_line`] writes, `'\n'` included.
pub const LINE_LEN: usize = 81;
/// Producers [`format_line`] can number (two digits).
pub const MAX_PRODUCERS: usize = 100;
/// Lines per producer [`format_line`] can number (ten digits).
pub const MAX_LINES: u64 = 10_000_000_000;

/// Where the producer's two digits start in a line.
const PRODUCER_AT: usize = 8;
/// Where the ten digits of the sequence number start in a line.
const SEQ_AT: usize = 16;

/// Appends line `i` of `producer` to `buf`: a realistic, deterministic (no timestamp)
/// log line of exactly [`LINE_LEN`] bytes ending in `'\n'`, e.g.
///
/// ```text
/// INFO  [p03] seq=0000001234 order accepted id=0a9e54b2c3f1d7e8 qty=0042 px=101.25
/// ```
///
/// # Panics
///
/// If `producer >= MAX_PRODUCERS` or `i >= MAX_LINES` (the line would be longer).
pub fn format_line(buf: &mut Vec<u8>, producer: usize, i: u64) {
    assert!(producer < MAX_PRODUCERS, "producer {producer} has 3 digits");
    assert!(i < MAX_LINES, "line {i} has 11 digits");
    let id = i.wrapping_mul(GOLDEN) ^ producer as u64;
    let qty = 1 + id % 9_999;
    let px_cents = 10_000 + (id >> 20) % 90_000;
    writeln!(
        buf,
        "INFO  [p{producer:02}] seq={i:010} order accepted id={id:016x} qty={qty:04} px={}.{:02}",
        px_cents / 100,
        px_cents % 100
    )
    .expect("writing to a Vec cannot fail");
}

/// Checks that the file at `path` holds exactly the lines `0..lines_per_producer` of every
/// producer `0..producers`, each producer's in order (producers interleaved freely).
///
/// # Errors
///
/// [`BenchError::WrongCount`] when the file does not have `producers * lines_per_producer`
/// lines, [`BenchError::Failed`] when it cannot be read or a line is not the one
/// expected next from its producer (lost, duplicated, torn or reordered lines).
pub fn verify_log(
    who: &str,
    path: &Path,
    producers: usize,
    lines_per_producer: u64,
) -> Result<(), BenchError> {
    let data = std::fs::read(path)
        .map_err(|e| BenchError::failed(who, format!("read {}: {e}", path.display())))?;
    let expected = producers as u64 * lines_per_producer;
    let got = data.iter().filter(|&&b| b == b'\n').count() as u64;
    if got != expected || !(data.is_empty() || data.ends_with(b"\n")) {
        return Err(BenchError::WrongCount {
            who: format!("{who} log lines"),
            expected,
            got,
        });
    }
    let mut next = vec![0u64; producers];
    let mut want = Vec::with_capacity(LINE_LEN);
    for (n, line) in data.split_inclusive(|&b| b == b'\n').enumerate() {
        let bad = |why: &str| BenchError::failed(who, format!("log line {}: {why}", n + 1));
        let producer = parse_digits(line.get(PRODUCER_AT..PRODUCER_AT + 2))
            .and_then(|p| usize::try_from(p).ok())
            .filter(|&p| p < producers)
            .ok_or_else(|| bad("no valid producer number"))?;
        let seq =
            parse_digits(line.get(SEQ_AT..SEQ_AT + 10)).ok_or_else(|| bad("no sequence number"))?;
        if seq != next[producer] {
            return Err(bad(&format!(
                "producer {producer} wrote line {seq}, expected {}",
                next[producer]
            )));
        }
        want.clear();
        format_line(&mut want, producer, seq);
        if line != want.as_slice() {
            return Err(bad("bytes differ from format_line's"));
        }
        next[producer] += 1;
    }
    Ok(())
}

/// The decimal number in `digits`, if they are all ASCII digits.
fn parse_digits(digits: Option<&[u8]>) -> Option<u64> {
    let digits = digits?;
    digits.iter().try_fold(0u64, |n, &d| {
        d.is_ascii_digit().then(|| n * 10 + u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trivial3_expected_is_the_sequential_fold() {
        assert_eq!(trivial3_expected(0), 0);
        let (mut a, mut b, mut c) = (0, 0, 0);
        let mut sum = 0u64;
        for x in 0..100 {
            let y = trivial_a(&mut a, x);
            let y = trivial_b(&mut b, y);
            sum = sum.wrapping_add(trivial_c(&mut c, y));
        }
        assert_eq!(trivial3_expected(100), sum);
        assert_eq!((a, c), (100, 100));
    }

    #[test]
    fn trivial3_sees_a_swap() {
        // Items 1 and 2 swapped before stage B: the checksum must differ.
        let (mut a, mut b, mut c) = (0, 0, 0);
        let outs: Vec<u64> = (0..4).map(|x| trivial_a(&mut a, x)).collect();
        let swapped = [outs[0], outs[2], outs[1], outs[3]];
        let sum = swapped.iter().fold(0u64, |s, &y| {
            s.wrapping_add(trivial_c(&mut c, trivial_b(&mut b, y)))
        });
        assert_ne!(sum, trivial3_expected(4));
    }

    #[test]
    fn spin_work_is_deterministic_and_calibrates() {
        assert_eq!(spin_work(42, 100), spin_work(42, 100));
        let per_us = calibrate_iters_for(1_000);
        assert!(per_us >= 1, "{per_us}");
        assert!(calibrate_iters_for(0) >= 1);
        let by_hand: u64 = (0..3u64).fold(0, |s, x| s.wrapping_add(spin_work(spin_work(x, 5), 5)));
        assert_eq!(scaling_expected(3, 2, 5), by_hand);
    }

    #[test]
    fn fanout_expected_pairs_two_different_branches() {
        assert_eq!(fanout_expected(0, 5), 0);
        let by_hand = (0..3u64).fold(0u64, |s, x| {
            let a = spin_work(spin_work(x, 5), 5);
            let b = spin_work(spin_work(x ^ FAN_OUT_SALT, 5), 5);
            s.wrapping_add(a ^ b.rotate_left(17))
        });
        assert_eq!(fanout_expected(3, 5), by_hand);
        assert_ne!(fan_out_a(7, 5), fan_out_b(7, 5));
        let swapped = (0..3u64).fold(0u64, |s, x| {
            s.wrapping_add(fan_out_combine(fan_out_b(x, 5), fan_out_a(x, 5)))
        });
        assert_ne!(swapped, by_hand);
    }

    /// The rule of thread-ring, played out hop by hop.
    fn simulate_thread_ring(hops: u64) -> u64 {
        let (mut stage, mut token) = (1u64, hops);
        while token != 0 {
            token -= 1;
            stage = stage % STAGES as u64 + 1;
        }
        stage
    }

    #[test]
    fn thread_ring_closed_form_matches_the_rule() {
        for hops in (0..2_000).chain([5_000, 50_000]) {
            assert_eq!(
                thread_ring_answer(hops),
                simulate_thread_ring(hops),
                "{hops}"
            );
        }
        assert_eq!(thread_ring_answer(1_000), 498);
    }

    #[test]
    fn message_ring_expected_follows_the_path() {
        assert_eq!(message_ring_expected(3, 0, 5), 0);
        assert_eq!(message_ring_expected(3, 2, 0), 1); // starts 0 and 1, never moved
        let one = |m: u64| {
            let v = message_ring_start(m);
            let lap = |v| message_ring_hop(message_ring_hop(v, 0), 1);
            lap(lap(v))
        };
        assert_eq!(
            message_ring_expected(2, 3, 2),
            one(0).wrapping_add(one(1)).wrapping_add(one(2))
        );
        assert_eq!(message_ring_sends(2, 3, 2), 12);
    }

    #[test]
    fn format_line_is_fixed_width_and_parses_back() {
        let mut buf = Vec::new();
        for (p, i) in [(0, 0), (7, 1234), (99, MAX_LINES - 1)] {
            buf.clear();
            format_line(&mut buf, p, i);
            assert_eq!(buf.len(), LINE_LEN, "{}", String::from_utf8_lossy(&buf));
            assert_eq!(buf.last(), Some(&b'\n'));
            assert_eq!(
                parse_digits(buf.get(PRODUCER_AT..PRODUCER_AT + 2)),
                Some(p as u64)
            );
            assert_eq!(parse_digits(buf.get(SEQ_AT..SEQ_AT + 10)), Some(i));
        }
    }

    #[test]
    fn verify_log_accepts_interleavings_and_rejects_losses() {
        let path =
            std::env::temp_dir().join(format!("statepipe-verify-{}.log", std::process::id()));
        let mut good = Vec::new();
        for i in 0..3 {
            format_line(&mut good, 1, i);
            format_line(&mut good, 0, i);
        }
        std::fs::write(&path, &good).unwrap();
        verify_log("t", &path, 2, 3).unwrap();
        assert!(matches!(
            verify_log("t", &path, 2, 4),
            Err(BenchError::WrongCount { .. })
        ));

        let mut reordered = Vec::new();
        for i in [0, 2, 1] {
            format_line(&mut reordered, 0, i);
        }
        std::fs::write(&path, &reordered).unwrap();
        assert!(matches!(
            verify_log("t", &path, 1, 3),
            Err(BenchError::Failed { .. })
        ));
        std::fs::remove_file(&path).unwrap();
    }
}
