//! Worker-to-worker handoffs, for stealing without the master in the
//! states' path.
//!
//! Each worker listens on the address it reaches the master from (port 0)
//! and reports it in `SetupOk`. For a `Give { ticket, to, ids }` the victim
//! removes the states, sends them to `to` as one `Handoff` frame over a
//! cached connection (opened on first use, authenticated with the same
//! HMAC challenge as the master's: the listener challenges, the victim
//! answers), and tells the master `Given n`. The thief stores them and tells
//! the master `Arrived { ticket, n }` on its own connection; only then does
//! the master ask it to evolve them, because the two frames travel on
//! different connections and could otherwise overtake each other.
//!
//! The same connections carry `Replica` frames (`Recovery::Buddy`, see
//! `replica.rs`): the buddy keeps them and tells the master `Held`.

use std::collections::HashMap;
use std::io::{self, Write as _};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::conn::{lock, Conn, Store};
use super::replica::ReplicaStore;
use crate::auth::Secret;
use crate::evolve::StateId;
use crate::protocol::{self, msg, Kind, DEFAULT_MAX_FRAME};
use crate::wire;

/// How long a victim waits to connect to and authenticate with a thief.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a write to a peer may make no progress before the peer is
/// given up on: a buddy that is stopped (SIGSTOP, a frozen VM) or cut off
/// keeps its connection open and reads nothing, and a replica larger than
/// the sockets' buffers would wait on it for as long as it stays so,
/// holding up the master's round (the worker's heartbeats go on, so
/// nothing else would end the wait). A live peer's thread reads all the
/// time, whatever the worker is evolving.
const PEER_WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A victim's connections to thieves, by address.
pub(crate) struct Peers {
    secret: Secret,
    conns: HashMap<String, TcpStream>,
    write_timeout: Duration,
}

impl Peers {
    pub(crate) fn new(secret: Secret) -> Self {
        Peers {
            secret,
            conns: HashMap::new(),
            write_timeout: PEER_WRITE_TIMEOUT,
        }
    }

    /// Sends `states` to the worker listening at `to` as one `Handoff`.
    ///
    /// # Errors
    /// If no connection can be made or written to (the states are then
    /// the caller's to keep).
    pub(crate) fn send(
        &mut self,
        to: &str,
        ticket: u64,
        states: &[(StateId, Vec<u8>)],
    ) -> io::Result<()> {
        let mut f = Vec::new();
        let st = protocol::begin(&mut f, Kind::Handoff);
        msg::put_u64(&mut f, ticket);
        msg::put_states(&mut f, states.iter().map(|(id, b)| (*id, b.as_slice())));
        protocol::finish(&mut f, st);
        self.send_frames(to, &f)
    }

    /// Sends `frames` (from [`replica_frames`]) to the worker listening
    /// at `to`.
    ///
    /// # Errors
    /// If no connection can be made or written to.
    pub(crate) fn send_replica(&mut self, to: &str, frames: &[Vec<u8>]) -> io::Result<()> {
        frames.iter().try_for_each(|f| self.send_frames(to, f))
    }

    /// Writes whole frames to the worker listening at `to`.
    fn send_frames(&mut self, to: &str, f: &[u8]) -> io::Result<()> {
        // A cached connection may have died with its worker: retry once.
        for attempt in 0..2 {
            if !self.conns.contains_key(to) {
                let c = self.connect(to)?;
                self.conns.insert(to.to_string(), c);
            }
            let c = self.conns.get_mut(to).expect("just inserted");
            match c.write_all(f) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    self.conns.remove(to);
                    if attempt == 1 {
                        return Err(e);
                    }
                }
            }
        }
        unreachable!("the loop returns")
    }

    fn connect(&self, to: &str) -> io::Result<TcpStream> {
        let addr: SocketAddr = to
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{to:?}: {e}")))?;
        let mut s = TcpStream::connect_timeout(&addr, PEER_TIMEOUT)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(PEER_TIMEOUT))?;
        let mut buf = Vec::new();
        wire::expect_frame(&mut s, &mut buf, 64, Kind::Challenge)?;
        let nonce =
            msg::array32(&buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        wire::write_frame(&mut s, Kind::Auth, &self.secret.answer(&nonce))?;
        s.set_read_timeout(None)?;
        s.set_write_timeout(Some(self.write_timeout))?;
        Ok(s)
    }
}

/// `states` as the replica of `origin` for `round`: one `Replica` frame
/// a run of [`protocol::state_runs`] (at most [`protocol::STATE_FRAME_BYTES`] of
/// state bytes, or one larger state).
pub(crate) fn replica_frames(round: u64, origin: u32, states: &[(StateId, &[u8])]) -> Vec<Vec<u8>> {
    let total = states.len() as u32;
    protocol::state_runs(states)
        .into_iter()
        .map(|run| {
            let mut f = Vec::new();
            let st = protocol::begin(&mut f, Kind::Replica);
            msg::put_u64(&mut f, round);
            msg::put_u32(&mut f, origin);
            msg::put_u32(&mut f, total);
            msg::put_states(&mut f, run.iter().copied());
            protocol::finish(&mut f, st);
            f
        })
        .collect()
}

/// A thief's listener: a thread accepting peers, and one per peer storing
/// what it hands over. Dropping it stops the accepting thread.
pub(crate) struct Listener {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Listener {
    /// Listens on `ip`, port 0.
    ///
    /// # Errors
    /// If the address cannot be bound.
    pub(crate) fn start(
        ip: IpAddr,
        secret: Secret,
        stores: (Store, ReplicaStore),
        conn: Conn,
    ) -> io::Result<Self> {
        let l = crate::listen::bind_deep(SocketAddr::new(ip, 0))?;
        let addr = l.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        std::thread::Builder::new()
            .name("statepipe-peers".into())
            .spawn(move || {
                for s in l.incoming() {
                    if stop2.load(Ordering::Acquire) {
                        return;
                    }
                    let Ok(s) = s else {
                        // Out of descriptors, say: the error comes back at
                        // once, and a retry at once would spin.
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let (secret, stores, conn) = (secret.clone(), stores.clone(), conn.clone());
                    let _ = std::thread::Builder::new()
                        .name("statepipe-peer".into())
                        .spawn(move || {
                            if let Err(e) = take_handoffs(s, &secret, &stores, &conn) {
                                tracing::warn!("peer connection closed: {e}");
                            }
                        });
                }
            })?;
        Ok(Listener { addr, stop })
    }

    /// Where peers connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
    }
}

/// Authenticates a peer, then stores every `Handoff` and `Replica` it
/// sends and reports them to the master.
fn take_handoffs(
    mut s: TcpStream,
    secret: &Secret,
    (store, replicas): &(Store, ReplicaStore),
    conn: &Conn,
) -> io::Result<()> {
    crate::listen::challenge(secret, &s, PEER_TIMEOUT)?;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let bad = |e: msg::MsgError| io::Error::new(io::ErrorKind::InvalidData, e);
    while let Some(kind) = wire::read_frame(&mut s, &mut buf, DEFAULT_MAX_FRAME)? {
        if kind == Kind::Replica {
            let r = msg::replica(&buf).map_err(bad)?;
            let states = r.states.into_iter().map(|(id, b)| (id, b.to_vec()));
            if lock(replicas).receive(r.round, r.origin, r.total, states) {
                out.clear();
                let st = protocol::begin(&mut out, Kind::Held);
                msg::put_u64(&mut out, r.round);
                msg::put_u32(&mut out, r.origin);
                msg::put_u32(&mut out, r.total);
                protocol::finish(&mut out, st);
                conn.send(&out)?;
            }
            continue;
        }
        if kind != Kind::Handoff {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a peer sent {kind:?}"),
            ));
        }
        let (ticket, states) = msg::handoff(&buf).map_err(bad)?;
        let n = states.len() as u32;
        {
            let mut held = lock(store);
            for (id, b) in states {
                if held.insert(id, b.to_vec()).is_some() {
                    drop(held);
                    conn.fail(&format!("state {id} handed over twice"));
                    return Ok(());
                }
            }
        }
        out.clear();
        let st = protocol::begin(&mut out, Kind::Arrived);
        msg::put_u64(&mut out, ticket);
        msg::put_u32(&mut out, n);
        protocol::finish(&mut out, st);
        conn.send(&out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_peer_that_reads_nothing_fails_the_replica_instead_of_holding_it() {
        // A buddy that authenticates and then reads nothing (stopped, or
        // cut off): 64 MiB of replica fill the sockets' buffers.
        let secret = Secret::random();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = l.local_addr().unwrap().to_string();
        let buddy_secret = secret.clone();
        let buddy = std::thread::spawn(move || {
            let mut held = Vec::new();
            for s in l.incoming().take(2) {
                let mut s = s.unwrap();
                let nonce: [u8; 32] = rand::random();
                wire::write_frame(&mut s, Kind::Challenge, &nonce).unwrap();
                let mut buf = Vec::new();
                wire::expect_frame(&mut s, &mut buf, 64, Kind::Auth).unwrap();
                assert!(buddy_secret.verify(&nonce, &msg::array32(&buf).unwrap()));
                held.push(s);
            }
            held
        });
        let mut peers = Peers::new(secret);
        peers.write_timeout = Duration::from_millis(200);
        let state = vec![3u8; 1 << 20];
        let states: Vec<(StateId, &[u8])> = (0..64).map(|i| (StateId(i), &state[..])).collect();
        let frames = replica_frames(1, 0, &states);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(peers.send_replica(&to, &frames).is_err()));
        let failed = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the replica waited on a peer that reads nothing");
        assert!(failed);
        drop(buddy);
    }
}
