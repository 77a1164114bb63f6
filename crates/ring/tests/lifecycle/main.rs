//! Lifecycle: drain on close, halt, panicking handlers, hooks, pollers,
//! monitoring, and the panics that reject misuse.
//!
//! Where a test wants a producer *blocked* on a full ring when something
//! happens, it pauses briefly (`settle`) before acting. The pause only makes
//! the interesting interleaving likely; every assertion holds whichever
//! interleaving happens, so nothing here depends on timing.
#![cfg(not(loom))]

#[path = "../common/mod.rs"]
mod common;
mod drain;
mod dropping;
mod halt;
mod hooks;
mod misuse;
mod monitoring;
mod panics;
mod partial;
mod pollers;
mod staging;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use common::{wait_for, watchdog, WATCHDOG};
use halt::{assert_halted, assert_halted_join};
use statepipe_ring::state::SharedStage;
use statepipe_ring::wait::{Adaptive, Blocking, WaitStrategy};
use statepipe_ring::{
    EventHandler, EventHandlerMut, JoinReport, PollError, Producer, ProducerKind, PublishError,
    PublishTimeoutError, Ring, RingBuilder, RingError, SoleProducer, TryPublishError,
};

/// Lets another thread reach its blocking call. Correctness never depends
/// on it (see the module docs).
fn settle() {
    thread::sleep(Duration::from_millis(20));
}

type Log<T> = Arc<Mutex<Vec<T>>>;

fn new_log<T>() -> Log<T> {
    Arc::new(Mutex::new(Vec::new()))
}

/// A copy of what the log holds now.
fn snapshot<T: Clone>(log: &Log<T>) -> Vec<T> {
    log.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

fn push<T>(log: &Log<T>, value: T) {
    log.lock().unwrap_or_else(|e| e.into_inner()).push(value);
}

/// A configurable handler: logs the values it sees and its hooks, and can
/// stall, slow down or panic at a chosen sequence.
struct Probe {
    values: Log<u64>,
    hooks: Log<String>,
    /// Busy work per event, in rounds of 100 iterations: a consumer slower
    /// than the producers. (Not `yield_now`: under `BusySpin` a yield hands
    /// the core to a spinner for a whole time slice.)
    slow: u32,
    /// At this sequence: report it, then wait for the go-ahead.
    stall_at: Option<(u64, Sender<u64>, Receiver<()>)>,
    /// At this sequence (after any stall): panic.
    panic_at: Option<u64>,
}

impl Probe {
    fn new() -> Self {
        Self {
            values: new_log(),
            hooks: new_log(),
            slow: 0,
            stall_at: None,
            panic_at: None,
        }
    }

    fn slow(mut self, rounds: u32) -> Self {
        self.slow = rounds;
        self
    }

    fn panic_at(mut self, seq: u64) -> Self {
        self.panic_at = Some(seq);
        self
    }

    /// Stalls at `seq`; returns the channel that reports the stall and the
    /// one that releases it.
    fn stall_at(mut self, seq: u64) -> (Self, Receiver<u64>, Sender<()>) {
        let (entered_tx, entered_rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel();
        self.stall_at = Some((seq, entered_tx, go_rx));
        (self, entered_rx, go_tx)
    }

    fn logs(&self) -> (Log<u64>, Log<String>) {
        (Arc::clone(&self.values), Arc::clone(&self.hooks))
    }

    fn event(&mut self, value: u64, seq: u64) {
        if let Some((at, entered, go)) = &self.stall_at {
            if *at == seq {
                entered.send(seq).expect("the test waits for the stall");
                go.recv_timeout(WATCHDOG)
                    .expect("the test releases the stall");
            }
        }
        if self.panic_at == Some(seq) {
            panic!("boom at {seq}");
        }
        for i in 0..self.slow * 100 {
            std::hint::black_box(i);
        }
        push(&self.values, value);
        push(&self.hooks, format!("event {seq}"));
    }
}

impl EventHandler<u64> for Probe {
    fn on_event(&mut self, event: &u64, sequence: u64, _end_of_batch: bool) {
        self.event(*event, sequence);
    }
    fn on_start(&mut self) {
        push(&self.hooks, "start".to_string());
    }
    fn on_shutdown(&mut self) {
        push(&self.hooks, "shutdown".to_string());
    }
}

impl EventHandlerMut<u64> for Probe {
    fn on_event(&mut self, event: &mut u64, sequence: u64, _end_of_batch: bool) {
        self.event(*event, sequence);
    }
    fn on_start(&mut self) {
        push(&self.hooks, "start".to_string());
    }
    fn on_shutdown(&mut self) {
        push(&self.hooks, "shutdown".to_string());
    }
}

/// Asserts `hooks` is `start`, the events of `seqs`, `shutdown` (the last
/// one only if `shutdown`).
fn assert_hooks(
    name: &str,
    hooks: &Log<String>,
    seqs: impl IntoIterator<Item = u64>,
    shutdown: bool,
) {
    let mut expected = vec!["start".to_string()];
    expected.extend(seqs.into_iter().map(|s| format!("event {s}")));
    if shutdown {
        expected.push("shutdown".to_string());
    }
    assert_eq!(snapshot(hooks), expected, "hooks of {name}");
}
