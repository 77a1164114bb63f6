//! Distributed runs against the sequential meaning.
//!
//! A random pipeline of every construct, cut into one to three parts and
//! maybe a keyed stage of one to three copies (each a part), runs on one
//! to three members (threads of this process, each joining the
//! coordinator over loopback TCP with the shared secret, as member
//! processes do). Its outputs with their input numbers, its failures and
//! its final states must be those of `run_sequential` of the whole
//! pipeline. The fault tests, with real processes killed, are the
//! command line's (`crates/cli/tests/remote.rs`).

mod common;

use std::sync::{Arc, Mutex};

use common::random::{build, desc, Desc};
use common::{cases, watchdog};
use proptest::prelude::*;
use statepipe_pipeline::remote::{Coordinator, Member, Parts, RemoteConfig, RemoteError};
use statepipe_pipeline::{Config, Pipeline};
use statepipe_sys::auth::Secret;

/// A keyed stage: its copies, the modulus of its key, each copy's shape.
type Keyed = Option<(usize, i64, Desc)>;

/// `ds` as parts, with `keyed` (whose copies are parts of their own) after
/// the first.
fn parts_of(ds: &[Desc], keyed: &Keyed) -> Parts<i64, i64> {
    let make = |k: usize, d: &Desc| {
        let d = d.clone();
        move || build(&d, &format!("p{k}"))
    };
    let mut parts = Parts::new(make(0, &ds[0]));
    if let Some((copies, m, d)) = keyed.clone() {
        parts = parts.then_keyed(
            copies,
            move |x: &i64| x.rem_euclid(m),
            move |k| build(&d, &format!("k/{k}")),
        );
    }
    for (k, d) in ds.iter().enumerate().skip(1) {
        parts = parts.then(make(k, d));
    }
    parts
}

type Outcome = (
    Vec<(u64, i64)>,
    Vec<(u64, String, String, String)>,
    Vec<(String, i64)>,
);

/// Runs `ds` on `members` member threads over loopback.
fn distributed(
    ds: Vec<Desc>,
    keyed: Keyed,
    members: usize,
    inputs: Vec<i64>,
    credits: u64,
) -> Result<Outcome, RemoteError> {
    let secret = Secret::random();
    let co = Coordinator::bind("127.0.0.1:0", secret.clone(), "random").unwrap();
    let addr = co.local_addr().to_string();
    let threads: Vec<_> = (0..members)
        .map(|_| {
            let (addr, secret) = (addr.clone(), secret.clone());
            let (ds, keyed) = (ds.clone(), keyed.clone());
            std::thread::spawn(move || {
                let m = Member::join(&addr, secret, "127.0.0.1:0")?;
                m.run(&parts_of(&ds, &keyed), &Config::new().workers(2).pin(false))
            })
        })
        .collect();
    let outputs = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&outputs);
    let config = RemoteConfig::new().members(members).credits(credits);
    let run = co.run(
        &parts_of(&ds, &keyed),
        &config,
        move |from| inputs.clone().into_iter().skip(from as usize),
        move |seq, x| sink.lock().unwrap().push((seq, x)),
    )?;
    for t in threads {
        t.join().unwrap()?;
    }
    let mut failures: Vec<_> = run
        .failures
        .iter()
        .map(|f| (f.seq, f.stage.clone(), f.item.clone(), f.error.clone()))
        .collect();
    failures.sort();
    let states = run
        .states
        .iter()
        .filter_map(|s| Some((s.name.clone(), *s.get::<i64>()?)))
        .collect();
    let out = outputs.lock().unwrap().clone();
    Ok((out, failures, states))
}

fn sequential(ds: &[Desc], keyed: &Keyed, inputs: &[i64]) -> Outcome {
    let run = parts_of(ds, keyed)
        .pipeline()
        .run_sequential(inputs.iter().copied());
    let outputs = run
        .seqs
        .iter()
        .copied()
        .zip(run.outputs.iter().copied())
        .collect();
    let mut failures: Vec<_> = run
        .failures
        .iter()
        .map(|f| {
            (
                f.seq,
                f.stage.clone(),
                format!("{:?}", f.item),
                f.error.to_string(),
            )
        })
        .collect();
    failures.sort();
    let states = run
        .states
        .iter()
        .filter_map(|s| Some((s.name.clone(), *s.get::<i64>()?)))
        .collect();
    (outputs, failures, states)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(12)))]

    #[test]
    fn a_distributed_run_equals_the_sequential_run(
        ds in proptest::collection::vec(desc(), 1..=3),
        keyed in proptest::option::of((1usize..=3, 1i64..=5, desc())),
        members in 1usize..=3,
        inputs in proptest::collection::vec(-50i64..50, 0..300),
        credits in prop_oneof![Just(1u64), Just(7), Just(65_536)],
    ) {
        let want = sequential(&ds, &keyed, &inputs);
        let got = watchdog(move || distributed(ds, keyed, members, inputs, credits)).unwrap();
        prop_assert_eq!(&got.0, &want.0, "outputs");
        prop_assert_eq!(&got.1, &want.1, "failures");
        prop_assert_eq!(&got.2, &want.2, "states");
    }
}

#[test]
fn a_member_with_another_build_is_refused_saying_why() {
    let secret = Secret::random();
    let co = Coordinator::bind("127.0.0.1:0", secret.clone(), "two parts").unwrap();
    let addr = co.local_addr().to_string();
    let add = |c: i64| Pipeline::map("add", move |x: i64| x + c);
    let t = std::thread::spawn(move || {
        let m = Member::join(&addr, secret, "127.0.0.1:0").unwrap();
        let other = Parts::new(move || add(1)).then(|| Pipeline::map("renamed", |x: i64| x));
        m.run(&other, &Config::new().workers(1))
    });
    let mine = Parts::new(move || add(1)).then(|| Pipeline::map("next", |x: i64| x));
    let r = co.run(
        &mine,
        &RemoteConfig::new().join_timeout(std::time::Duration::from_secs(3)),
        |from| from as i64..10,
        |_, _| {},
    );
    assert!(matches!(r, Err(RemoteError::NoMembers(_))), "{r:?}");
    let e = t.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("same build"), "{e}");
}

#[test]
fn a_member_with_a_wrong_secret_is_refused() {
    let co = Coordinator::bind("127.0.0.1:0", Secret::new("right"), "x").unwrap();
    let addr = co.local_addr().to_string();
    let t = std::thread::spawn(move || {
        Member::join(&addr, Secret::new("wrong"), "127.0.0.1:0").map(|_| ())
    });
    let r = co.run(
        &Parts::new(|| Pipeline::map("id", |x: i64| x)),
        &RemoteConfig::new().join_timeout(std::time::Duration::from_secs(2)),
        |from| from as i64..10,
        |_, _| {},
    );
    assert!(matches!(r, Err(RemoteError::NoMembers(_))), "{r:?}");
    let e = t.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("STATEPIPE_SECRET"), "{e}");
}

/// A forwarder from a port of its own to `to`, whose connections
/// [`Cut::cut`] closes: to lose a member (its control connection) while
/// its thread lives on.
struct Cut {
    addr: String,
    conns: Arc<Mutex<Vec<std::net::TcpStream>>>,
}

impl Cut {
    fn to(to: String) -> Cut {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let conns = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&conns);
        std::thread::spawn(move || {
            for a in l.incoming() {
                let Ok(a) = a else { return };
                let Ok(b) = std::net::TcpStream::connect(&to) else {
                    return;
                };
                let mut kept = kept.lock().unwrap();
                kept.extend([a.try_clone().unwrap(), b.try_clone().unwrap()]);
                for (mut from, mut into) in
                    [(a.try_clone().unwrap(), b.try_clone().unwrap()), (b, a)]
                {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut into);
                        let _ = into.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Cut { addr, conns }
    }

    fn cut(&self) {
        for c in self.conns.lock().unwrap().iter() {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }
}

type Source = Box<dyn Fn(u64) -> Box<dyn Iterator<Item = i64> + Send> + Send + Sync>;

/// A run of `x * 2 + 1` on two members with checkpoints every 10 ms, the
/// sink taking `sink_ms` an output; the second member is cut off once a
/// checkpoint is committed and `ready(outputs so far)` holds. Returns the
/// sink's outputs (the run must restore once, and end well).
fn losing_a_member(
    inputs: Source,
    sink_ms: u64,
    ready: impl Fn(usize) -> bool + Send + 'static,
) -> Vec<(u64, i64)> {
    watchdog(move || {
        let dir = tempfile::tempdir().unwrap();
        let secret = Secret::random();
        let co = Coordinator::bind("127.0.0.1:0", secret.clone(), "losing a member").unwrap();
        let addr = co.local_addr().to_string();
        let parts = || {
            Parts::new(|| Pipeline::map("double", |x: i64| x * 2))
                .then(|| Pipeline::map("next", |x: i64| x + 1))
        };
        let cut = Cut::to(addr.clone());
        let members: Vec<_> = [addr, cut.addr.clone()]
            .into_iter()
            .map(|to| {
                let secret = secret.clone();
                std::thread::spawn(move || {
                    let m = Member::join(&to, secret, "127.0.0.1:0")?;
                    m.run(&parts(), &Config::new().workers(1).pin(false))
                })
            })
            .collect();
        let outputs = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&outputs);
        let config = RemoteConfig::new()
            .members(2)
            .checkpoint_dir(dir.path())
            .checkpoint_every(std::time::Duration::from_millis(10));
        let committed = dir.path().join("COORDINATOR");
        let metrics = co.metrics();
        let run = std::thread::spawn(move || {
            co.run(&parts(), &config, inputs, move |seq, x| {
                std::thread::sleep(std::time::Duration::from_millis(sink_ms));
                sink.lock().unwrap().push((seq, x));
            })
        });
        while !committed.exists() || !ready(outputs.lock().unwrap().len()) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        cut.cut();
        let run = run.join().unwrap().unwrap();
        assert_eq!(run.restores.len(), 1, "{:?}", run.restores);
        // The live view saw the same: two members, two parts, one restore
        // from a committed checkpoint with one member left.
        assert!(metrics.is_finished());
        assert_eq!(metrics.parts(), 2);
        let seen = metrics.members();
        assert_eq!(seen.len(), 2, "{seen:?}");
        let placed: Vec<u32> = seen.iter().flat_map(|m| m.parts.clone()).collect();
        assert_eq!(
            placed,
            [0, 1],
            "the last attempt's parts, on the member left"
        );
        let restores = metrics.restore_history();
        assert_eq!(restores.len(), 1);
        assert_eq!(restores[0].restore, run.restores[0]);
        assert_eq!(restores[0].members_left, 1);
        assert!(restores[0].restore.from.is_some());
        assert!(restores[0].at >= metrics.created());
        let mut members = members.into_iter();
        // The member that was not cut off ends well; the other says it
        // lost its coordinator.
        members.next().unwrap().join().unwrap().unwrap();
        assert!(members.next().unwrap().join().unwrap().is_err());
        let out = outputs.lock().unwrap().clone();
        out
    })
}

#[test]
fn a_member_lost_while_the_sink_lags_loses_no_output() {
    // The sink takes 5 ms an output, so that the parts run far ahead of it
    // and checkpoints are durable on every part long before the sink has
    // the outputs before them. Once one is committed, a member is lost;
    // every output must still reach the sink once. The inputs come over
    // about 40 ms, so that barriers fall among them.
    let inputs: Source = Box::new(|from| {
        Box::new(
            (from as i64..400)
                .inspect(|_| std::thread::sleep(std::time::Duration::from_micros(100))),
        )
    });
    let got = losing_a_member(inputs, 5, |_| true);
    let want: Vec<(u64, i64)> = (0..400).map(|x| (x as u64, x * 2 + 1)).collect();
    assert_eq!(got.len(), want.len(), "outputs delivered");
    assert_eq!(got, want);
}

#[test]
fn a_member_lost_while_the_source_is_idle_is_recovered() {
    // The first attempt's source gives 200 inputs, then nothing (a live
    // source with nothing to say) until the test ends; a member is lost
    // meanwhile. The restore must not wait for the idle source: the next
    // attempt's source gives the rest.
    let (hold, idle) = std::sync::mpsc::channel::<()>();
    let idle = Mutex::new(Some(idle));
    let inputs: Source = Box::new(move |from| match idle.lock().unwrap().take() {
        // Blocks once the 200 are out, until the test ends.
        Some(idle) => Box::new((from as i64..200).chain(std::iter::from_fn(move || {
            let _ = idle.recv();
            None
        }))),
        None => Box::new(from as i64..400),
    });
    let got = losing_a_member(inputs, 0, |n| n >= 200);
    drop(hold);
    let want: Vec<(u64, i64)> = (0..400).map(|x| (x as u64, x * 2 + 1)).collect();
    assert_eq!(got, want);
}
