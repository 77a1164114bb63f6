//! A large state on a slow link: the time its bytes take on the wire is
//! not evolve time, so a batch whose request or answer is still in transit
//! is never taken for a hung evolve, nor for a straggler, however short
//! the deadline learned from the small states' calls.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::{registry, Big, Blob};
use crate::auth::Secret;
use crate::config::{Deadlines, Recovery};
use crate::listen::Listener;
use crate::master::MasterImpl;
use crate::worker;
use crate::{Engine, IdMap, Local, Master, MasterConfig};

/// Bytes a second the proxy lets through, each way.
const RATE: f64 = 16e6;

/// Copies `from` to `to` at no more than [`RATE`] bytes a second, then
/// closes `to`'s write half.
fn throttle(mut from: TcpStream, mut to: TcpStream) {
    let start = Instant::now();
    let mut moved = 0u64;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
        moved += n as u64;
        let due = Duration::from_secs_f64(moved as f64 / RATE);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// A proxy in front of `target` whose every connection is throttled both
/// ways: a link of [`RATE`] bytes a second.
fn slow_proxy(target: SocketAddr) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for inbound in l.incoming() {
            let Ok(inbound) = inbound else { return };
            let Ok(outbound) = TcpStream::connect(target) else {
                return;
            };
            let _ = (inbound.set_nodelay(true), outbound.set_nodelay(true));
            let (i2, o2) = (inbound.try_clone().unwrap(), outbound.try_clone().unwrap());
            std::thread::spawn(move || throttle(inbound, outbound));
            std::thread::spawn(move || throttle(o2, i2));
        }
    });
    addr
}

fn slow_cluster(workers: usize, imp: MasterImpl, recovery: Recovery) -> Master<Big> {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let proxy = slow_proxy(l.local_addr().unwrap());
    for _ in 0..workers {
        let _ = worker::spawn_thread(proxy, secret.clone(), registry());
    }
    let joined = l.accept(workers, Duration::from_secs(30)).unwrap();
    let mut cfg = MasterConfig {
        imp,
        seed: 5,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = recovery;
    // A deadline far shorter than the large state's half second on the
    // wire each way, and as long as a loaded host's calls need.
    cfg.sched.deadlines = Deadlines {
        heartbeat: Some(Duration::from_millis(20)),
        // Silence is not what this test is about: a busy host's late
        // heartbeats must not drop anyone.
        quiet: Some(Duration::from_secs(1)),
        floor: Duration::from_millis(250),
        ..Deadlines::default()
    };
    Master::new(&Big, joined, cfg).unwrap()
}

#[test]
fn a_large_state_on_a_slow_link_is_not_taken_for_a_hung_evolve() {
    for (imp, recovery) in [
        (MasterImpl::EventLoop, Recovery::MasterCopy),
        (MasterImpl::Threaded, Recovery::MasterCopy),
        (MasterImpl::EventLoop, Recovery::Buddy),
    ] {
        let mut m = slow_cluster(4, imp, recovery);
        let mut local = Local::new(Big, 5);
        // 8 MiB: half a second each way at 16 MB/s, while the small
        // states' calls teach the master a deadline of 250 ms (the floor: the
        // large state's own call, slow in a debug build on a loaded host,
        // stays well inside it).
        let mut init = vec![Blob(vec![7u8; 8 << 20])];
        init.extend((0..24u8).map(|k| Blob(vec![k; 16])));
        let mut ids = m.reset_states(init.clone()).unwrap();
        assert_eq!(local.reset_states(init).unwrap(), ids);
        for step in 0..3 {
            let inputs: IdMap<u32> = ids.iter().map(|&i| (i, 0)).collect();
            let got = m
                .evolve_many(inputs.clone())
                .unwrap_or_else(|e| panic!("{imp:?} {recovery:?} step {step}: {e}"));
            assert_eq!(
                got,
                local.evolve_many(inputs).unwrap(),
                "{imp:?} {recovery:?} step {step}"
            );
            ids = got.values().flatten().map(|c| c.0).collect();
        }
        assert_eq!(
            m.stats().lost_workers(),
            0,
            "{imp:?} {recovery:?}: a worker was dropped"
        );
    }
}
