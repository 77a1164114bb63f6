//! Helpers shared by the integration tests: a watchdog so that a deadlock
//! fails a test instead of hanging CI, a tiny deterministic RNG, and the wait
//! strategies under test.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use std::panic;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use statepipe_ring::wait::{Adaptive, Blocking, BusySpin, SpinYield};

/// How long any one test body may run before the watchdog declares a hang.
/// Generous: the bodies take milliseconds to seconds in debug builds.
pub const WATCHDOG: Duration = Duration::from_secs(60);

/// Runs `body` on its own thread and waits for it at most [`WATCHDOG`].
///
/// A panic in `body` is re-raised with its original payload (so
/// `#[should_panic(expected = ...)]` works); a body still running after the
/// limit fails the test with a message naming it. Its threads are leaked:
/// the test binary exits anyway once every test has finished.
pub fn watchdog<R: Send + 'static>(body: impl FnOnce() -> R + Send + 'static) -> R {
    let name = thread::current().name().unwrap_or("test").to_string();
    watchdog_named(&name, WATCHDOG, body)
}

/// [`watchdog`] with an explicit name and limit.
pub fn watchdog_named<R: Send + 'static>(
    name: &str,
    limit: Duration,
    body: impl FnOnce() -> R + Send + 'static,
) -> R {
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let handle = thread::Builder::new()
        .name(format!("watched:{name}"))
        .spawn(move || {
            let result = body();
            // The receiver is gone only if the watchdog already gave up.
            let _ = done_tx.send(());
            result
        })
        .expect("spawn the watched test thread");
    match done_rx.recv_timeout(limit) {
        // Disconnected: the body panicked (the sender dropped while unwinding).
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(result) => result,
            Err(payload) => panic::resume_unwind(payload),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!(
            "watchdog: '{name}' did not finish within {limit:?}; a deadlock, a lost wake-up \
             or a producer/consumer that never returned (its threads are left running)"
        ),
    }
}

/// Spins (sleeping briefly) until `cond` holds. Never times out by itself:
/// call it inside a [`watchdog`], which turns a condition that never comes
/// into a failure.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let mut rounds: u64 = 0;
    while !cond() {
        rounds += 1;
        if rounds.is_power_of_two() && rounds >= 1 << 14 {
            eprintln!("still waiting for: {what} ({rounds} rounds)");
        }
        thread::sleep(Duration::from_micros(200));
    }
}

/// A small deterministic generator (xorshift64*), so that randomised tests
/// reproduce from their seed without another dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        // Never zero: xorshift would stay at zero.
        Self((seed ^ 0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        self.next_u64() % n
    }
}

/// Constructors of the wait strategies, for tests generic over `W`.
pub fn adaptive() -> Adaptive {
    Adaptive::default()
}

/// An adaptive strategy that parks almost at once: exercises the sleep
/// protocol (and its lost-wake-up bound) on nearly every wait.
pub fn adaptive_eager_park() -> Adaptive {
    Adaptive::new(0, 0, 1, Duration::from_micros(50))
}

pub fn busy_spin() -> BusySpin {
    BusySpin
}

pub fn spin_yield() -> SpinYield {
    SpinYield::default()
}

pub fn blocking() -> Blocking {
    Blocking::new()
}

/// Generates one `#[test]` per wait strategy, each calling
/// `$body(constructor)` inside the watchdog (with `$limit`, a `Duration`,
/// instead of [`WATCHDOG`] when given).
#[macro_export]
macro_rules! per_wait_strategy {
    ($module:ident, $body:path) => {
        per_wait_strategy!($module, $body, common::WATCHDOG);
    };
    ($module:ident, $body:path, $limit:expr) => {
        mod $module {
            use super::common;

            fn watched(body: impl FnOnce() + Send + 'static) {
                let name = std::thread::current().name().unwrap_or("test").to_string();
                common::watchdog_named(&name, $limit, body);
            }

            #[test]
            fn adaptive() {
                watched(|| $body(common::adaptive));
            }

            #[test]
            fn busy_spin() {
                watched(|| $body(common::busy_spin));
            }

            #[test]
            fn spin_yield() {
                watched(|| $body(common::spin_yield));
            }

            #[test]
            fn blocking() {
                watched(|| $body(common::blocking));
            }
        }
    };
}
