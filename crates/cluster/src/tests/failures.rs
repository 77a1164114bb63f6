//! Failure and bad input: lost workers, malformed frames, wrong secrets.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::skip::{skip, Lack};
use super::{registry, Branchy};
use crate::auth::Secret;
use crate::config::{Recovery, StealVia};
use crate::engine::Engine;
use crate::evolve::{IdMap, StateId};
use crate::listen::Listener;
use crate::local::Local;
use crate::master::{Master, MasterConfig, MasterImpl};
use crate::protocol::{self, msg, Kind, DEFAULT_MAX_FRAME};
use crate::telemetry::{Telemetry, TelemetryEventKind};
use crate::worker::{self, Next, WorkerCore};
use crate::{wire, Error};

/// What the misbehaving worker does on its first `Evolve`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Disconnect,
    Garbage,
    Oversized,
    Truncated,
    /// Keep the connection open and never answer again.
    Hang,
    /// Work normally, but advertise a peer address nobody listens on.
    BogusPeer,
}

fn fake_worker(addr: std::net::SocketAddr, secret: Secret, fault: Fault) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut buf = Vec::new();
    wire::expect_frame(&mut s, &mut buf, 64, Kind::Challenge).unwrap();
    wire::write_frame(
        &mut s,
        Kind::Auth,
        &secret.answer(&msg::array32(&buf).unwrap()),
    )
    .unwrap();
    let mut core = WorkerCore::new(registry());
    let mut out = Vec::new();
    while let Ok(Some(kind)) = wire::read_frame(&mut s, &mut buf, DEFAULT_MAX_FRAME) {
        if kind == Kind::Evolve && !matches!(fault, Fault::BogusPeer) {
            match fault {
                Fault::Disconnect => return,
                Fault::Hang => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
                Fault::BogusPeer => unreachable!(),
                Fault::Garbage => s.write_all(b"this is not a frame at all").unwrap(),
                Fault::Oversized => {
                    let mut f = vec![protocol::MAGIC, protocol::VERSION, Kind::Evolved as u8, 0];
                    f.extend_from_slice(&u32::MAX.to_le_bytes());
                    s.write_all(&f).unwrap();
                }
                Fault::Truncated => {
                    s.write_all(&[
                        protocol::MAGIC,
                        protocol::VERSION,
                        Kind::Evolved as u8,
                        0,
                        200,
                        0,
                        0,
                        0,
                        1,
                        2,
                    ])
                    .unwrap();
                    return;
                }
            }
            // Stay connected: the master must drop us on its own.
            std::thread::sleep(Duration::from_secs(3));
            return;
        }
        out.clear();
        if core.handle(kind, &buf, &mut out) != Ok(Next::Continue) {
            return;
        }
        if kind == Kind::Setup && matches!(fault, Fault::BogusPeer) {
            out.clear();
            let st = protocol::begin(&mut out, Kind::SetupOk);
            msg::put_bytes(&mut out, b"127.0.0.1:1");
            protocol::finish(&mut out, st);
        }
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

fn cluster(
    good: usize,
    fault: Option<Fault>,
    imp: MasterImpl,
    recovery: Recovery,
) -> Master<Branchy> {
    cluster_with(good, fault, imp, recovery, None)
}

fn cluster_with(
    good: usize,
    fault: Option<Fault>,
    imp: MasterImpl,
    recovery: Recovery,
    telemetry: Option<Telemetry>,
) -> Master<Branchy> {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    for _ in 0..good {
        let _ = worker::spawn_thread(addr, secret.clone(), registry());
    }
    let extra = usize::from(fault.is_some());
    if let Some(f) = fault {
        let s = secret.clone();
        std::thread::spawn(move || fake_worker(addr, s, f));
    }
    let joined = l.accept(good + extra, Duration::from_secs(30)).unwrap();
    let mut cfg = MasterConfig {
        imp,
        seed: 1,
        telemetry,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = recovery;
    Master::new(&Branchy { max: 2 }, joined, cfg).unwrap()
}

/// Without recovery, a step where one worker fails: the error names it and
/// what was lost, and every surviving state can be evolved afterwards.
fn survives(fault: Fault, imp: MasterImpl) -> String {
    let mut m = cluster(2, Some(fault), imp, Recovery::Off);
    let ids = m
        .reset_states((0..30).map(|i| (i, vec![])).collect())
        .unwrap();
    let t0 = Instant::now();
    let err = m.evolve_many(ids.iter().map(|&i| (i, 1)).collect());
    eprintln!("{fault:?}/{imp:?}: failed after {:?}", t0.elapsed());
    let Err(Error::WorkerLost(l)) = err else {
        panic!("expected a lost worker, got {err:?}")
    };
    assert!(!l.lost.is_empty() || !l.unfinished.is_empty(), "{l:?}");
    let text = Error::WorkerLost(l.clone()).to_string();
    assert!(
        text.contains(&format!("worker {}", l.worker)) && text.contains("lost"),
        "{text}"
    );
    let gone: std::collections::HashSet<_> = l.lost.iter().chain(&l.unfinished).copied().collect();
    let mut alive: Vec<_> = ids
        .iter()
        .filter(|i| !gone.contains(i) && !l.completed.contains_key(i))
        .copied()
        .collect();
    alive.extend(l.completed.values().flatten());
    let again = m
        .evolve_many(alive.iter().map(|&i| (i, 1)).collect())
        .unwrap();
    assert_eq!(again.len(), alive.len());
    assert!(matches!(
        m.fetch_states(&l.lost[..l.lost.len().min(1)]),
        Err(Error::UnknownStates(_)) | Ok(_)
    ));
    l.reason
}

/// With recovery (the default), the same faults cost nothing but time:
/// three steps give the single-process engine's bits, and the master
/// counts one lost worker.
fn recovers(fault: Fault, imp: MasterImpl) {
    let mut m = cluster(2, Some(fault), imp, Recovery::MasterCopy);
    let mut local = Local::new(Branchy { max: 2 }, 1);
    let init: Vec<(u64, Vec<u8>)> = (0..30).map(|i| (i, vec![i as u8])).collect();
    let mut ids = m.reset_states(init.clone()).unwrap();
    assert_eq!(local.reset_states(init).unwrap(), ids);
    for _ in 0..3 {
        let inputs: IdMap<u32> = ids.iter().map(|&i| (i, 0)).collect();
        let out = canonical(m.evolve_many(inputs.clone()).unwrap());
        assert_eq!(
            out,
            canonical(local.evolve_many(inputs).unwrap()),
            "{fault:?}/{imp:?}"
        );
        ids = out.iter().flat_map(|p| p.1.iter().map(|c| c.0)).collect();
    }
    let mut held = m.fetch_states(&ids).unwrap();
    let want = local.fetch_states(&ids).unwrap();
    assert_eq!(held.len(), want.len());
    held.retain(|k, v| want.get(k) != Some(v));
    assert!(held.is_empty(), "states differ after recovery");
    let lost = m.stats().lost_workers();
    if fault == Fault::Hang {
        // A worker that never answers is a straggler first: once its work
        // and moves have been started elsewhere from the copies, nothing
        // waits for it, and it may never need declaring lost.
        assert!(lost <= 1, "{fault:?}/{imp:?}: {lost}");
    } else {
        assert_eq!(lost, 1, "{fault:?}/{imp:?}");
    }
}

#[test]
fn a_worker_that_disconnects_mid_step() {
    survives(Fault::Disconnect, MasterImpl::EventLoop);
    survives(Fault::Disconnect, MasterImpl::Threaded);
}

#[test]
fn a_lost_worker_is_recovered_with_the_same_bits() {
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        for f in [
            Fault::Disconnect,
            Fault::Garbage,
            Fault::Truncated,
            Fault::Hang,
        ] {
            recovers(f, imp);
        }
    }
}

#[test]
fn a_worker_that_hangs_is_declared_lost_like_a_disconnect() {
    // Its deadline: 10 × the p99 batch time the others measured, at least 1 s.
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let reason = survives(Fault::Hang, imp);
        assert!(reason.starts_with("no answer for"), "{reason}");
    }
}

/// A lost worker shows on the telemetry: lost (with its reason), then
/// recovered, and its row is no longer alive.
#[test]
fn a_lost_worker_shows_as_lost_then_recovered() {
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let t = Telemetry::new();
        let mut m = cluster_with(
            2,
            Some(Fault::Disconnect),
            imp,
            Recovery::MasterCopy,
            Some(t.clone()),
        );
        let ids = m
            .reset_states((0..30).map(|i| (i, vec![])).collect())
            .unwrap();
        m.evolve_many(ids.iter().map(|&i| (i, 1)).collect())
            .unwrap();
        let s = t.snapshot();
        let lost: Vec<_> = s
            .events
            .iter()
            .filter(|e| e.kind == TelemetryEventKind::Lost)
            .collect();
        assert_eq!(lost.len(), 1, "{imp:?}: {:?}", s.events);
        let w = lost[0].worker.expect("a worker");
        // The reason: closed, or reset, as the kernel saw it.
        assert!(!lost[0].detail.is_empty(), "{:?}", lost[0]);
        let recovered = s
            .events
            .iter()
            .position(|e| e.kind == TelemetryEventKind::Recovered && e.worker == Some(w));
        let at = s
            .events
            .iter()
            .position(|e| e.kind == TelemetryEventKind::Lost);
        assert!(recovered > at, "{imp:?}: {:?}", s.events);
        assert!(!s.workers[w].alive && s.workers[w].states == 0);
        assert_eq!(s.totals.losses, 1);
        assert_eq!(
            s.totals.states, 30,
            "{imp:?}: every state held by the survivors"
        );
        assert!(s.workers.iter().map(|x| x.recovered_states).sum::<u64>() > 0);
    }
}

#[test]
fn malformed_frames_drop_only_that_connection() {
    for f in [Fault::Garbage, Fault::Oversized, Fault::Truncated] {
        survives(f, MasterImpl::EventLoop);
    }
    survives(Fault::Garbage, MasterImpl::Threaded);
}

#[test]
fn an_evolve_that_panics_fails_the_step_with_the_workers_message() {
    // Every worker panics on u32::MAX; the first failure is reported (and
    // not recovered from: the same call would panic again).
    let mut m = cluster(2, None, MasterImpl::EventLoop, Recovery::MasterCopy);
    let ids = m.reset_states(vec![(1, vec![]), (2, vec![])]).unwrap();
    let err = m
        .evolve_many(IdMap::from_iter([(ids[0], u32::MAX)]))
        .unwrap_err();
    assert!(err.to_string().contains("asked to panic"), "{err}");
}

#[test]
fn wrong_secret_is_refused_and_right_ones_join() {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let intruder = worker::spawn_thread(addr, Secret::new("guess"), registry());
    // The intruder is challenged, refused and closed, and never counts.
    // (Handled alone: were the right worker accepted first, `accept` would
    // return before challenging it, and it would wait forever.)
    assert!(matches!(
        l.accept(1, Duration::from_millis(1500)),
        Err(Error::JoinTimeout { joined: 0, .. })
    ));
    // The refused worker says so, rather than end as if it had served.
    let refused = intruder.join().unwrap().unwrap_err();
    assert!(matches!(refused, Error::Refused { .. }), "{refused}");
    assert!(refused.to_string().contains("wrong secret"), "{refused}");
    let _ = worker::spawn_thread(addr, secret, registry());
    let joined = l.accept(1, Duration::from_secs(30)).unwrap();
    assert_eq!(joined.len(), 1);
}

#[test]
fn a_peer_sending_garbage_instead_of_an_answer_is_refused() {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&[0u8; 16]).unwrap();
    let _ = worker::spawn_thread(addr, secret, registry());
    assert_eq!(l.accept(1, Duration::from_secs(30)).unwrap().len(), 1);
}

/// Step outputs with children in a canonical order.
fn canonical<T: PartialOrd + Clone>(
    out: IdMap<Vec<(StateId, T)>>,
) -> Vec<(StateId, Vec<(StateId, T)>)> {
    let mut v: Vec<_> = out.into_iter().collect();
    v.sort_by_key(|p| p.0);
    v
}

#[test]
fn an_unreachable_thief_falls_back_to_stealing_through_the_master() {
    // Worker 0 (real) holds every state; worker 1 advertises a peer address
    // nobody listens on; worker 2 is real. Handoffs to 1 fail (`Given 0`),
    // the states stay put, and later moves to 1 go through the master.
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    let _ = worker::spawn_thread(addr, secret.clone(), registry());
    let mut joined = l.accept(1, Duration::from_secs(30)).unwrap();
    let s = secret.clone();
    std::thread::spawn(move || fake_worker(addr, s, Fault::BogusPeer));
    joined.extend(l.accept(1, Duration::from_secs(30)).unwrap());
    let _ = worker::spawn_thread(addr, secret, registry());
    joined.extend(l.accept(1, Duration::from_secs(30)).unwrap());
    let mut cfg = super::stealing(MasterImpl::EventLoop, 4);
    cfg.sched.steal_via = StealVia::Peer;
    cfg.sched.recovery = Recovery::Off; // recovery moves states through the master
    cfg.sched.rebalance = true;
    let model = Branchy { max: 3 };
    let mut m = Master::new(&model, joined, cfg).unwrap();
    let mut local = Local::new(model, 4);
    let init: Vec<(u64, Vec<u8>)> = (0..40).map(|i| (i, vec![])).collect();
    let mut ids = m.reset_states(init.clone()).unwrap();
    assert_eq!(local.reset_states(init).unwrap(), ids);
    for _ in 0..4 {
        let inputs: IdMap<u32> = ids.iter().map(|&i| (i, 0)).collect();
        let out = canonical(m.evolve_many(inputs.clone()).unwrap());
        assert_eq!(out, canonical(local.evolve_many(inputs).unwrap()));
        ids = out.iter().flat_map(|p| p.1.iter().map(|c| c.0)).collect();
        ids.truncate(60);
    }
    let st = m.stats();
    let direct: u64 = st.workers.iter().map(|w| w.direct_transfers).sum();
    let all: u64 = st.workers.iter().map(|w| w.transfers).sum();
    assert!(direct > 0 && all > direct, "{direct} of {all} moves direct");
}

/// A master stand-in that accepts connections but challenges only those
/// after the first `silent` (which it keeps open and never writes to: what
/// a worker sees when the master's accept queue dropped its handshake),
/// then checks the answer and sends `Shutdown`.
fn choosy_master(
    silent: usize,
    secret: Secret,
) -> (std::net::SocketAddr, std::thread::JoinHandle<bool>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut held = Vec::new();
        for _ in 0..silent {
            held.push(l.accept().unwrap().0);
        }
        let Ok((mut s, _)) = l.accept() else {
            return false;
        };
        let nonce = [7u8; 32];
        wire::write_frame(&mut s, Kind::Challenge, &nonce).unwrap();
        let mut buf = Vec::new();
        wire::expect_frame(&mut s, &mut buf, 64, Kind::Auth).unwrap();
        let ok = secret.verify(&nonce, &msg::array32(&buf).unwrap());
        wire::write_frame(&mut s, Kind::Shutdown, &[]).unwrap();
        ok
    });
    (addr, t)
}

#[test]
fn a_connection_never_challenged_is_dropped_and_made_again() {
    let secret = Secret::random();
    let (addr, master) = choosy_master(2, secret.clone());
    let opts = worker::WorkerOptions {
        challenge_timeout: Duration::from_millis(200),
        connect_timeout: Duration::from_secs(60),
        ..worker::WorkerOptions::default()
    };
    worker::run(&addr.to_string(), &secret, registry(), &opts).unwrap();
    assert!(
        master.join().unwrap(),
        "the third connection answered right"
    );
}

#[test]
fn a_master_that_never_challenges_is_an_error_not_a_hang() {
    let secret = Secret::random();
    // Never gets past the silent connections: the worker gives up first.
    let (addr, _master) = choosy_master(usize::MAX, secret.clone());
    let opts = worker::WorkerOptions {
        challenge_timeout: Duration::from_millis(100),
        connect_timeout: Duration::from_millis(500),
        ..worker::WorkerOptions::default()
    };
    let err = worker::run(&addr.to_string(), &secret, registry(), &opts).unwrap_err();
    assert!(matches!(err, Error::Connect { .. }), "{err}");
    assert!(err.to_string().contains("awaiting its challenge"), "{err}");
}

#[test]
fn hundreds_of_workers_connecting_at_once_all_get_queued() {
    // `std`'s listeners queue 128 connections; the master's must hold a
    // whole cluster joining at once (the kernel caps it at somaxconn).
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let n = 300;
    if somaxconn < n + 1 {
        skip(
            Lack::Privilege,
            &format!("net.core.somaxconn is {somaxconn}, below {}", n + 1),
        );
        return;
    }
    let l = Listener::bind("127.0.0.1:0", Secret::random()).unwrap();
    let addr = l.local_addr().unwrap();
    // Nothing accepts: every connect completes only if the queue holds it.
    let conns: Vec<_> = (0..n)
        .map(|i| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("connection {i} of {n} not queued: {e}"))
        })
        .collect();
    assert_eq!(conns.len(), n);
}

#[test]
fn states_larger_than_a_frame_are_placed_and_fetched_in_several() {
    // 70 MiB of states on one worker: more than one frame may carry (64
    // MiB), so they go as several `Add`s and come back as several
    // `Fetched`, with every byte.
    let mut m = cluster(1, None, MasterImpl::EventLoop, Recovery::MasterCopy);
    let init: Vec<(u64, Vec<u8>)> = (0..70u64).map(|i| (i, vec![i as u8; 1 << 20])).collect();
    let ids = m.reset_states(init.clone()).unwrap();
    let held = m.fetch_states(&ids).unwrap();
    assert_eq!(held.len(), init.len());
    for (id, want) in ids.iter().zip(&init) {
        assert!(held[id] == *want, "state {id} came back otherwise");
    }
    let out = m
        .evolve_many(ids.iter().map(|&i| (i, 1)).collect())
        .unwrap();
    assert_eq!(out.len(), ids.len());
}

#[test]
fn a_spawned_worker_that_exits_before_joining_ends_the_wait_saying_so() {
    // `false` exits at once: the wait must not last its 600 s.
    let c = crate::LocalCluster::spawn(&crate::WorkerCommand::new("false"), 2, &[]).unwrap();
    let err = c.accept(Duration::from_secs(600)).unwrap_err();
    assert!(err.to_string().contains("exited before it joined"), "{err}");
}

#[test]
fn a_wait_for_workers_ends_when_asked_to() {
    let l = Listener::bind("127.0.0.1:0", Secret::random()).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(true);
    let r = l.accept_until(1, Duration::from_secs(600), &stop);
    assert!(matches!(r, Err(Error::Interrupted)), "{r:?}");
}
