//! Workers: one thread each, pinned to one CPU unless told not to, running
//! their stations in turn with no scheduler between them and the kernel.
//!
//! A worker with nothing to do spins (a few rounds, or as long as the
//! deployment's [`Spin`](super::Spin) says when it has a CPU to itself),
//! yields a few times, then sleeps on its doorbell (at most [`PARK`], so a
//! lost wake-up costs a millisecond, never a hang). It never spins long on a
//! shared CPU, so a deployment with more workers than free cores degrades
//! gracefully instead of collapsing.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::edge::UnitStates;
use super::edge::{Doorbell, Halt};
use super::error::DeployError;
use super::station::{panic_message, running_unit, StagePanic, Step, Task};

/// The longest a worker sleeps without checking its stations.
pub(crate) const PARK: Duration = Duration::from_millis(1);
/// Spin rounds before the clock is first read (and all a zero spin does).
const SPINS: u32 = 64;
const YIELDS: u32 = 8;

/// What every worker shares: the stop flag, the first error, and the rings
/// to halt when something fails.
pub(crate) struct Control {
    stopped: AtomicBool,
    error: Mutex<Option<DeployError>>,
    pub(crate) handles: Mutex<Vec<Box<dyn Halt>>>,
    pub(crate) bells: Vec<Arc<Doorbell>>,
    /// Unit names by unit number, to name a panicking unit.
    pub(crate) unit_names: Vec<String>,
}

impl Control {
    pub(crate) fn new(
        handles: Vec<Box<dyn Halt>>,
        bells: Vec<Arc<Doorbell>>,
        unit_names: Vec<String>,
    ) -> Self {
        Control {
            unit_names,
            stopped: AtomicBool::new(false),
            error: Mutex::new(None),
            handles: Mutex::new(handles),
            bells,
        }
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Records the first failure and stops everything: every ring is
    /// halted, so blocked senders get their item back and workers stop.
    pub(crate) fn fail(&self, e: DeployError) {
        {
            let mut first = self.error.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert(e);
        }
        self.stopped.store(true, Ordering::Relaxed);
        for h in self
            .handles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            h.halt();
        }
        for b in &self.bells {
            b.ring();
        }
    }

    pub(crate) fn take_error(&self) -> Option<DeployError> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// The error for a panic that escaped a station: named by the payload if
/// it carries a name, else by the unit that was running.
fn panic_error(payload: Box<dyn std::any::Any + Send>, names: &[String]) -> DeployError {
    match payload.downcast::<StagePanic>() {
        Ok(p) => DeployError::StagePanicked {
            stage: p.stage,
            message: p.message,
        },
        Err(other) => DeployError::StagePanicked {
            stage: names
                .get(running_unit())
                .cloned()
                .unwrap_or_else(|| "(router or merge)".to_string()),
            message: panic_message(&*other),
        },
    }
}

/// Runs `tasks` until all are done (or the deployment stops); returns the
/// final states of their units.
pub(crate) fn work(
    tasks: Vec<Box<dyn Task>>,
    bell: &Doorbell,
    control: &Control,
    pin: Option<usize>,
    spin: Duration,
) -> UnitStates {
    bell.bind();
    if let Some(cpu) = pin {
        // Best effort: a CPU that vanished from the mask leaves the thread
        // to the scheduler, which is still correct.
        let _ = statepipe_sys::pin::pin_current_thread(cpu);
    }
    let mut states = Vec::new();
    let mut live: Vec<Option<Box<dyn Task>>> = tasks.into_iter().map(Some).collect();
    let mut last = vec![Step::Idle; live.len()];
    let mut idle_rounds = 0u32;
    // The end of the long spin of the current idle streak, while in it.
    let mut spin_until: Option<Instant> = None;
    let mut clock = Instant::now();
    loop {
        if control.stopped() {
            return states;
        }
        let mut progress = false;
        let mut any = false;
        for (slot, last) in live.iter_mut().zip(last.iter_mut()) {
            let Some(task) = slot.as_mut() else {
                continue;
            };
            let step = match catch_unwind(AssertUnwindSafe(|| task.run())) {
                Ok(s) => s,
                Err(payload) => {
                    control.fail(panic_error(payload, &control.unit_names));
                    return states;
                }
            };
            // Rounds in an idle streak read no clock (a read costs as much
            // as a small batch). The first step that does something ends
            // the streak and is charged the time since the last read: its
            // own run plus at most the streak's few spin rounds (a sleep
            // resets the clock), a small overcount of busy time.
            if idle_rounds == 0 || step != Step::Idle {
                let now = Instant::now();
                task.account(step, (now - clock).as_nanos() as u64);
                clock = now;
            }
            *last = step;
            match step {
                Step::Progress => progress = true,
                Step::Done => {
                    if let Some(t) = slot.take() {
                        t.finish(&mut states);
                    }
                    progress = true;
                }
                Step::Halted => return states,
                Step::Idle | Step::Blocked => {}
            }
            any |= slot.is_some();
        }
        if !any {
            return states;
        }
        if progress {
            idle_rounds = 0;
            spin_until = None;
            continue;
        }
        idle_rounds += 1;
        if idle_rounds <= SPINS {
            std::hint::spin_loop();
            if idle_rounds == SPINS && !spin.is_zero() {
                spin_until = Some(Instant::now() + spin);
            }
        } else if let Some(until) = spin_until {
            std::hint::spin_loop();
            // A clock read per 64 rounds (a few percent of the rounds'
            // cost), which also charges the spin as waiting, not as the
            // busy time of the step that ends it.
            if idle_rounds % SPINS == 0 {
                let now = Instant::now();
                charge_wait(&live, &last, (now - clock).as_nanos() as u64);
                clock = now;
                if now >= until {
                    spin_until = None;
                    idle_rounds = SPINS;
                }
            }
        } else if idle_rounds <= SPINS + YIELDS {
            std::thread::yield_now();
        } else {
            bell.sleep(PARK, || {
                control.stopped() || live.iter_mut().flatten().any(|t| t.ready())
            });
            // The sleep counts as blocked for stations waiting on output,
            // idle for the others.
            let now = Instant::now();
            charge_wait(&live, &last, (now - clock).as_nanos() as u64);
            clock = now;
        }
    }
}

/// Charges `ns` of waiting to every live task: as blocked to those whose
/// last step was blocked on output, as idle to the others.
fn charge_wait(live: &[Option<Box<dyn Task>>], last: &[Step], ns: u64) {
    for (t, step) in live.iter().zip(last) {
        if let Some(t) = t {
            t.account(*step, ns);
        }
    }
}
