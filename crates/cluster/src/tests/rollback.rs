//! A worker lost together with both its buddies (`Recovery::Buddy`, two
//! replicas) leaves no copy of its states: with checkpoints the filter rolls
//! back to the last one and ends with the bits of a run without the loss;
//! without, the step fails with `WorkerLost` naming the states.
//!
//! Workers are threads of this process behind a TCP relay per connection,
//! so that the test can cut a worker off at once, the way a killed process's
//! connection resets: the master reads the end of the stream, and the
//! worker, its master gone, exits.

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::resume::Walk;
use crate::auth::Secret;
use crate::config::Recovery;
use crate::listen::Listener;
use crate::local::Local;
use crate::pf::{self, Bootstrap, Checkpoints, PfConfig, PfResult, Progress};
use crate::{worker, Error, Master, MasterConfig, MasterImpl, Registry};

/// Relayed connections: the relay's address at the master (what the
/// master's `Joined::addr` says), and both sockets.
type Links = Arc<Mutex<Vec<(SocketAddr, TcpStream, TcpStream)>>>;

/// Copies `from` into `to` until either ends, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// `n` workers on threads, each connected to the master through a relay,
/// and a master `imp` over them (`Recovery::Buddy` with two replicas, seed
/// 5). Returns the master and, per worker index, a way to cut it off.
fn relayed(n: usize, imp: MasterImpl) -> (Master<Bootstrap<Walk>>, Vec<SocketAddr>, Links) {
    let secret = Secret::random();
    let l = Listener::bind("127.0.0.1:0", secret.clone()).unwrap();
    let master = l.local_addr().unwrap();
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_addr = relay.local_addr().unwrap();
    let links: Links = Arc::default();
    let kept = links.clone();
    std::thread::spawn(move || {
        for w in relay.incoming() {
            let Ok(w) = w else { return };
            let Ok(up) = TcpStream::connect(master) else {
                return;
            };
            let _ = (w.set_nodelay(true), up.set_nodelay(true));
            let at = up.local_addr().unwrap();
            let (w2, up2) = (w.try_clone().unwrap(), up.try_clone().unwrap());
            kept.lock()
                .unwrap()
                .push((at, w.try_clone().unwrap(), up.try_clone().unwrap()));
            std::thread::spawn(move || pump(w, up));
            std::thread::spawn(move || pump(up2, w2));
        }
    });
    let registry = Registry::new().with::<Bootstrap<Walk>>();
    for _ in 0..n {
        let _ = worker::spawn_thread(relay_addr, secret.clone(), registry.clone());
    }
    let joined = l.accept(n, Duration::from_secs(30)).unwrap();
    let order = joined.iter().map(|j| j.addr).collect();
    let mut cfg = MasterConfig {
        imp,
        seed: 5,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = Recovery::Buddy;
    cfg.sched.replicas = 2;
    (
        Master::new(&Bootstrap(walk()), joined, cfg).unwrap(),
        order,
        links,
    )
}

/// Cuts off the workers at `which` (indices in the master's order).
fn cut(order: &[SocketAddr], links: &Links, which: &[usize]) {
    for (at, w, up) in links.lock().unwrap().iter() {
        if which.iter().any(|&i| order[i] == *at) {
            let _ = w.shutdown(Shutdown::Both);
            let _ = up.shutdown(Shutdown::Both);
        }
    }
}

fn walk() -> Walk {
    Walk {
        y: (0..16).map(|t| (t as f64 * 0.4).cos() * 2.0).collect(),
    }
}

const CFG: PfConfig = PfConfig {
    particles: 240,
    islands: 3,
    seed: 5,
};

fn reference() -> PfResult {
    let mut local = Local::new(Bootstrap(walk()), 5);
    pf::run(&mut local, &walk(), CFG, |_| {}).unwrap()
}

/// Runs the filter with a checkpoint every 4 steps, cutting off workers
/// `which` after step `at`; returns the result and the steps rolled back to.
fn with_checkpoints(
    imp: MasterImpl,
    at: usize,
    which: &[usize],
) -> (Result<PfResult, Error>, Vec<usize>, u64) {
    let (mut m, order, links) = relayed(5, imp);
    let mut rolled = Vec::new();
    let mut done = false;
    let every = Checkpoints {
        every: 4,
        ..Checkpoints::default()
    };
    let r = pf::run_checkpointed(&mut m, &walk(), CFG, None, every, |_, p| {
        match p {
            Progress::Step { state, .. } if state.t == at && !done => {
                done = true;
                cut(&order, &links, which);
            }
            Progress::RolledBack { to, cause, .. } => {
                assert!(!cause.lost.is_empty() || !cause.unfinished.is_empty());
                rolled.push(to);
            }
            Progress::Step { .. } => {}
        }
        Ok(())
    });
    let rollbacks = m.stats().rollbacks;
    (r, rolled, rollbacks)
}

#[test]
fn a_worker_lost_with_all_its_buddies_rolls_back_to_the_last_checkpoint() {
    let want = reference();
    // Worker 1's replicas are on 2 and 3: all three lost at once leave no
    // copy of its states. After step 6 the last checkpoint is step 4's;
    // after step 2 there is none yet, and the run goes back to its start.
    for (imp, at, to) in [
        (MasterImpl::EventLoop, 6, 4),
        (MasterImpl::EventLoop, 2, 0),
        (MasterImpl::Threaded, 6, 4),
    ] {
        let (got, rolled, n) = with_checkpoints(imp, at, &[1, 2, 3]);
        assert_eq!(got.unwrap(), want, "cut after step {at} ({imp:?})");
        assert_eq!(rolled, vec![to], "cut after step {at} ({imp:?})");
        assert_eq!(n, 1, "the master's count");
    }
}

#[test]
fn without_checkpoints_the_loss_fails_the_step_naming_the_states() {
    let (mut m, order, links) = relayed(5, MasterImpl::EventLoop);
    let err = pf::run_from(&mut m, &walk(), CFG, None, |_, st| {
        if st.t == 6 {
            cut(&order, &links, &[1, 2, 3]);
        }
        Ok(())
    })
    .unwrap_err();
    match err {
        Error::WorkerLost(l) => assert!(!l.lost.is_empty() || !l.unfinished.is_empty()),
        e => panic!("expected WorkerLost, got {e}"),
    }
}

#[test]
fn with_no_worker_left_a_rollback_fails_at_once() {
    let (got, rolled, _) = with_checkpoints(MasterImpl::EventLoop, 6, &[0, 1, 2, 3, 4]);
    assert!(matches!(got, Err(Error::NoWorkers)), "{got:?}");
    assert!(rolled.is_empty());
}
