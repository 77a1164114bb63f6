//! Heartbeats: a worker that stops sending anything is lost after the
//! silence, whatever its requests' allowances; a worker busy in a long
//! evolve keeps beating and is not.

use std::io::Write as _;
use std::net::TcpStream;
use std::time::Duration;

use super::{registry, threads, Nap, NapInput};
use crate::auth::Secret;
use crate::config::{Deadlines, Recovery};
use crate::engine::Engine;
use crate::listen::Listener;
use crate::local::Local;
use crate::master::{Master, MasterConfig, MasterImpl};
use crate::protocol::{Kind, DEFAULT_MAX_FRAME};
use crate::worker::{self, Next, WorkerCore};
use crate::{wire, Error};

/// Heartbeats every 20 ms, lost after 300 ms of silence; every request
/// allowance two minutes, and a silent worker's work not started again
/// elsewhere before that (`quiet`), so that only the silence can catch a
/// worker.
fn quick_silence() -> Deadlines {
    Deadlines {
        heartbeat: Some(Duration::from_millis(20)),
        silence: Duration::from_millis(300),
        quiet: Some(Duration::from_secs(120)),
        floor: Duration::from_secs(120),
        unmeasured: Duration::from_secs(120),
        ..Deadlines::default()
    }
}

/// A worker that answers everything, sends one heartbeat after `Setup`,
/// then on its first `Evolve` falls silent with the connection open (a
/// stopped process, a cut link) until the master closes it.
fn falls_silent(addr: std::net::SocketAddr, secret: Secret) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut buf = Vec::new();
    wire::expect_frame(&mut s, &mut buf, 64, Kind::Challenge).unwrap();
    let nonce = crate::protocol::msg::array32(&buf).unwrap();
    wire::write_frame(&mut s, Kind::Auth, &secret.answer(&nonce)).unwrap();
    let mut core = WorkerCore::new(registry());
    let mut out = Vec::new();
    while let Ok(Some(kind)) = wire::read_frame(&mut s, &mut buf, DEFAULT_MAX_FRAME) {
        if kind == Kind::Evolve {
            // Silent: wait for the master to close the connection.
            while let Ok(Some(_)) = wire::read_frame(&mut s, &mut buf, DEFAULT_MAX_FRAME) {}
            return;
        }
        out.clear();
        if core.handle(kind, &buf, &mut out) != Ok(Next::Continue) {
            return;
        }
        if kind == Kind::Setup {
            crate::protocol::encode(&mut out, Kind::Heartbeat, &[]);
        }
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

fn cluster(imp: MasterImpl, recovery: Recovery) -> Master<Nap> {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let addr = l.local_addr().unwrap();
    for _ in 0..2 {
        let _ = worker::spawn_thread(addr, secret.clone(), registry());
    }
    let s = secret.clone();
    std::thread::spawn(move || falls_silent(addr, s));
    let joined = l.accept(3, Duration::from_secs(30)).unwrap();
    let mut cfg = MasterConfig {
        imp,
        seed: 3,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = recovery;
    cfg.sched.deadlines = quick_silence();
    Master::new(&Nap, joined, cfg).unwrap()
}

fn inputs(ids: &[crate::StateId]) -> crate::IdMap<NapInput> {
    ids.iter()
        .map(|&i| {
            (
                i,
                NapInput {
                    cost_us: 2_000,
                    children: 1,
                },
            )
        })
        .collect()
}

#[test]
fn a_worker_that_falls_silent_is_lost_after_the_silence() {
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let mut m = cluster(imp, Recovery::Off);
        let ids = m.reset_states((0..30).collect()).unwrap();
        let err = m.evolve_many(inputs(&ids));
        let Err(Error::WorkerLost(l)) = err else {
            panic!("expected a lost worker, got {err:?}")
        };
        assert!(l.reason.starts_with("silent for"), "{imp:?}: {}", l.reason);
    }
}

#[test]
fn a_silent_worker_is_recovered_with_the_same_bits() {
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let mut m = cluster(imp, Recovery::MasterCopy);
        let mut local = Local::new(Nap, 3);
        let mut ids = m.reset_states((0..30).collect()).unwrap();
        assert_eq!(local.reset_states((0..30).collect()).unwrap(), ids);
        for _ in 0..3 {
            let out = m.evolve_many(inputs(&ids)).unwrap();
            assert_eq!(out, local.evolve_many(inputs(&ids)).unwrap(), "{imp:?}");
            ids = out.values().flatten().map(|c| c.0).collect();
            ids.sort_unstable();
        }
        assert_eq!(m.stats().lost_workers(), 1, "{imp:?}");
    }
}

#[test]
fn an_evolve_much_longer_than_the_silence_is_not_silence() {
    // Each call sleeps four times the silence; the workers' heartbeat
    // threads keep them audible, so nothing is lost (recovery off: a loss
    // would fail the step).
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let mut cfg = MasterConfig {
            imp,
            seed: 5,
            ..MasterConfig::default()
        };
        cfg.sched.recovery = Recovery::Off;
        cfg.sched.deadlines = Deadlines {
            factor: 1.0,
            floor: Duration::from_millis(1),
            ..quick_silence()
        };
        let mut m = threads(&Nap, 2, cfg);
        let ids = m.reset_states((0..4).collect()).unwrap();
        // A short step first, so the per-request allowance (were it used)
        // would be tiny: 1 × the measured time.
        let short: crate::IdMap<_> = ids
            .iter()
            .map(|&i| {
                (
                    i,
                    NapInput {
                        cost_us: 100,
                        children: 1,
                    },
                )
            })
            .collect();
        let out = m.evolve_many(short).unwrap();
        let ids: Vec<_> = out.values().flatten().map(|c| c.0).collect();
        let long: crate::IdMap<_> = ids
            .iter()
            .map(|&i| {
                (
                    i,
                    NapInput {
                        cost_us: 1_200_000,
                        children: 1,
                    },
                )
            })
            .collect();
        let out = m.evolve_many(long).unwrap();
        assert_eq!(out.len(), 4, "{imp:?}");
        assert_eq!(m.stats().lost_workers(), 0, "{imp:?}");
    }
}
