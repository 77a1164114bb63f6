//! Members leaving and joining a running distributed run (threads of this
//! process joining over loopback TCP, as member processes do): a member
//! asked to leave is let go once its parts run on the others, from a
//! checkpoint taken when it asked; a member that joins gets parts at the
//! next checkpoint; below the minimum of members the coordinator waits;
//! without checkpoints a leave restarts every part from the start.
//! Each time every output reaches the sink once, in order. The tests with
//! real processes and signals are the command line's
//! (`crates/cli/tests/remote_elastic.rs`).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common::watchdog;
use statepipe_pipeline::remote::{
    Coordinator, Member, Parts, RemoteConfig, RemoteError, RemoteMetrics, RemoteRun, RestoreKind,
};
use statepipe_pipeline::{Config, Pipeline};
use statepipe_sys::auth::Secret;

const INPUTS: i64 = 2000;
/// The first attempt's source gives this many inputs, then nothing until
/// the test ends (a live source, idle): what happens next happens while
/// the run is surely under way.
const FIRST: i64 = 1000;

fn parts() -> Parts<i64, i64> {
    Parts::new(|| Pipeline::map("double", |x: i64| x * 2))
        .then(|| Pipeline::map("next", |x: i64| x + 1))
}

fn member(
    addr: &str,
    secret: &Secret,
    leave: Option<Arc<AtomicBool>>,
) -> JoinHandle<Result<(), RemoteError>> {
    let (addr, secret) = (addr.to_string(), secret.clone());
    std::thread::spawn(move || {
        let mut m = Member::join(&addr, secret, "127.0.0.1:0")?;
        if let Some(l) = leave {
            m = m.leave_when(l);
        }
        m.run(&parts(), &Config::new().workers(1).pin(false))
    })
}

struct Run {
    addr: String,
    secret: Secret,
    outputs: Arc<Mutex<Vec<(u64, i64)>>>,
    notes: Arc<Mutex<Vec<String>>>,
    metrics: RemoteMetrics,
    run: JoinHandle<Result<RemoteRun, RemoteError>>,
    committed: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _hold: mpsc::Sender<()>,
}

impl Run {
    /// A coordinator of [`parts`] waiting for `members`, with checkpoints
    /// every 20 ms.
    fn start(members: usize, min: Option<usize>) -> Run {
        Run::start_with(members, min, true)
    }

    fn start_with(members: usize, min: Option<usize>, checkpoints: bool) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let secret = Secret::random();
        let co = Coordinator::bind("127.0.0.1:0", secret.clone(), "elastic").unwrap();
        let addr = co.local_addr().to_string();
        let metrics = co.metrics();
        let (hold, idle) = mpsc::channel::<()>();
        let idle = Mutex::new(Some(idle));
        let inputs = move |from: u64| -> Box<dyn Iterator<Item = i64> + Send> {
            match idle.lock().unwrap().take() {
                Some(idle) => Box::new((from as i64..FIRST).chain(std::iter::from_fn(move || {
                    let _ = idle.recv();
                    None
                }))),
                None => Box::new(from as i64..INPUTS),
            }
        };
        let notes = Arc::new(Mutex::new(Vec::new()));
        let said = Arc::clone(&notes);
        let mut config = RemoteConfig::new()
            .members(members)
            .on_note(move |n| said.lock().unwrap().push(n.to_string()));
        if checkpoints {
            config = config
                .checkpoint_dir(dir.path())
                .checkpoint_every(Duration::from_millis(20));
        }
        if let Some(min) = min {
            config = config.min_members(min);
        }
        let outputs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&outputs);
        let run = std::thread::spawn(move || {
            co.run(&parts(), &config, inputs, move |seq, x| {
                sink.lock().unwrap().push((seq, x))
            })
        });
        Run {
            addr,
            secret,
            outputs,
            notes,
            metrics,
            run,
            committed: dir.path().join("COORDINATOR"),
            _dir: dir,
            _hold: hold,
        }
    }

    /// Waits until the first attempt's inputs are all out and a
    /// checkpoint is committed.
    fn wait_for_first(&self) {
        while !self.committed.exists() || self.outputs.lock().unwrap().len() < FIRST as usize {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait_for_note(&self, part: &str) {
        while !self.notes.lock().unwrap().iter().any(|n| n.contains(part)) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The run's end: every output once, in order.
    fn finish(self) -> (RemoteRun, Vec<String>) {
        let run = self.run.join().unwrap().unwrap();
        let want: Vec<(u64, i64)> = (0..INPUTS).map(|x| (x as u64, x * 2 + 1)).collect();
        assert_eq!(*self.outputs.lock().unwrap(), want);
        assert_eq!(run.outputs, INPUTS as u64);
        let notes = self.notes.lock().unwrap().clone();
        (run, notes)
    }
}

#[test]
fn a_member_asked_to_leave_is_let_go_once_its_parts_run_on_the_other() {
    watchdog(|| {
        let r = Run::start(2, None);
        let leave = Arc::new(AtomicBool::new(false));
        let stays = member(&r.addr, &r.secret, None);
        let leaves = member(&r.addr, &r.secret, Some(Arc::clone(&leave)));
        r.wait_for_first();
        leave.store(true, Ordering::Relaxed);
        // It is let go while the run goes on.
        leaves.join().unwrap().unwrap();
        // The live view shows it as left, not lost.
        let seen = r.metrics.members();
        assert!(seen.iter().any(|m| m.left && !m.alive), "{seen:?}");
        assert_eq!(seen.iter().filter(|m| m.left).count(), 1, "{seen:?}");
        let (run, notes) = r.finish();
        let kinds: Vec<RestoreKind> = run.restores.iter().map(|x| x.kind).collect();
        assert_eq!(kinds, [RestoreKind::Left], "{notes:?}");
        assert!(run.restores[0].from.is_some());
        assert!(
            notes.iter().any(|n| n.contains("asks to leave")),
            "{notes:?}"
        );
        stays.join().unwrap().unwrap();
    })
}

#[test]
fn a_member_that_joins_a_running_run_gets_parts() {
    watchdog(|| {
        let r = Run::start(1, None);
        let first = member(&r.addr, &r.secret, None);
        r.wait_for_first();
        let second = member(&r.addr, &r.secret, None);
        let (run, notes) = r.finish();
        let kinds: Vec<RestoreKind> = run.restores.iter().map(|x| x.kind).collect();
        assert_eq!(kinds, [RestoreKind::Joined], "{notes:?}");
        // The last attempt ran a part on each.
        let last = notes
            .iter()
            .rev()
            .find(|n| n.starts_with("attempt "))
            .unwrap();
        assert!(
            last.contains("member 0 ") && last.contains("member 1 "),
            "{notes:?}"
        );
        first.join().unwrap().unwrap();
        second.join().unwrap().unwrap();
    })
}

#[test]
fn below_the_minimum_of_members_the_coordinator_waits_for_one_to_join() {
    watchdog(|| {
        let r = Run::start(2, Some(2));
        let leave = Arc::new(AtomicBool::new(false));
        let stays = member(&r.addr, &r.secret, None);
        let leaves = member(&r.addr, &r.secret, Some(Arc::clone(&leave)));
        r.wait_for_first();
        leave.store(true, Ordering::Relaxed);
        leaves.join().unwrap().unwrap();
        r.wait_for_note("waiting for 1 more member");
        let third = member(&r.addr, &r.secret, None);
        let (run, notes) = r.finish();
        let kinds: Vec<RestoreKind> = run.restores.iter().map(|x| x.kind).collect();
        assert_eq!(kinds, [RestoreKind::Left], "{notes:?}");
        let last = notes
            .iter()
            .rev()
            .find(|n| n.starts_with("attempt "))
            .unwrap();
        assert!(last.contains("member 2 "), "{notes:?}");
        stays.join().unwrap().unwrap();
        third.join().unwrap().unwrap();
    })
}

#[test]
fn without_checkpoints_a_leave_restarts_from_the_start_and_delivers_each_output_once() {
    watchdog(|| {
        let r = Run::start_with(2, None, false);
        let leave = Arc::new(AtomicBool::new(false));
        let stays = member(&r.addr, &r.secret, None);
        let leaves = member(&r.addr, &r.secret, Some(Arc::clone(&leave)));
        while r.outputs.lock().unwrap().len() < FIRST as usize {
            std::thread::sleep(Duration::from_millis(5));
        }
        leave.store(true, Ordering::Relaxed);
        leaves.join().unwrap().unwrap();
        let (run, notes) = r.finish();
        let kinds: Vec<RestoreKind> = run.restores.iter().map(|x| x.kind).collect();
        assert_eq!(kinds, [RestoreKind::Left], "{notes:?}");
        assert_eq!(run.restores[0].from, None);
        stays.join().unwrap().unwrap();
    })
}
