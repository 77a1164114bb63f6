//! A last-resort bound on the time one sample may take.
//!
//! Workloads stop themselves at their deadline (see [`crate::ring`]), so the watchdog
//! only fires when something truly hangs: a lost wake-up, a deadlock in an
//! implementation under test. Threads stuck in someone else's code cannot be stopped
//! from outside, and every later figure would be measured next to them, so the only
//! honest way out is to end the process with a message naming the sample.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Exit status of a process ended by the watchdog.
pub const EXIT_HUNG: i32 = 3;

/// Ends the process if it is not dropped within its limit.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use statepipe_bench::watchdog::Watchdog;
/// let guard = Watchdog::arm("a quick sample", Duration::from_secs(60));
/// // ... the sample runs ...
/// drop(guard); // disarmed: the watchdog thread exits at once
/// ```
#[derive(Debug)]
pub struct Watchdog {
    /// Dropping the sender wakes the watchdog thread with `Disconnected`.
    disarm: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts a watchdog that prints `what` and exits with [`EXIT_HUNG`] after `limit`.
    ///
    /// # Panics
    ///
    /// If the watchdog thread cannot be spawned.
    pub fn arm(what: impl Into<String>, limit: Duration) -> Watchdog {
        let what = what.into();
        let (disarm, armed) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("bench-watchdog".into())
            .spawn(move || {
                if let Err(RecvTimeoutError::Timeout) = armed.recv_timeout(limit) {
                    eprintln!(
                        "watchdog: {what} still running after {:.1} s: it hangs; ending the run",
                        limit.as_secs_f64()
                    );
                    std::process::exit(EXIT_HUNG);
                }
            })
            .expect("spawn the watchdog thread");
        Watchdog {
            disarm: Some(disarm),
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.disarm.take());
        if let Some(thread) = self.thread.take() {
            // The thread only returns or exits the process; it cannot panic.
            let _ = thread.join();
        }
    }
}
