//! Accepting and authenticating workers.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::auth::Secret;
use crate::error::Error;
use crate::protocol::{msg, Kind};
use crate::wire;

/// A worker connection that proved the shared secret.
///
/// Hand them to [`Master::new`](crate::Master::new).
#[derive(Debug)]
pub struct Joined {
    pub(crate) stream: TcpStream,
    pub(crate) addr: SocketAddr,
}

impl Joined {
    /// The worker's address, as the master sees it.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Where workers connect: a TCP listener that admits a connection only once
/// its peer proves it knows the cluster's [`Secret`].
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
    secret: Secret,
}

/// How long a connecting peer has to answer the challenge.
const AUTH_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections the kernel queues for `accept` (it caps this at
/// `net.core.somaxconn`, 4096 on current Linux). `std`'s `bind` asks for
/// 128: hundreds of workers starting at once on a many-core machine
/// overflow that, and a connection whose handshake's last ACK is dropped
/// on a full queue can look established to the worker while the master
/// never sees it (seen: 434 of 450 workers joined on 16 cores).
pub(crate) const LISTEN_BACKLOG: i32 = 4096;

/// Binds a TCP listener on `addr` with a [`LISTEN_BACKLOG`]-deep accept
/// queue (and `SO_REUSEADDR`, as `std` sets it).
///
/// # Errors
/// If no address `addr` resolves to can be bound.
pub(crate) fn bind_deep(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        let s = socket2::Socket::new(
            socket2::Domain::for_address(a),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )?;
        s.set_reuse_address(true)?;
        match s.bind(&a.into()).and_then(|()| s.listen(LISTEN_BACKLOG)) {
            Ok(()) => return Ok(s.into()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "the address resolves to nothing",
        )
    }))
}

impl Listener {
    /// Binds `addr` (use a loopback address unless workers are remote), with
    /// an accept queue deep enough for hundreds of workers joining at once.
    ///
    /// # Errors
    /// If the address cannot be bound.
    pub fn bind(addr: &str, secret: Secret) -> io::Result<Self> {
        let inner = bind_deep(addr)?;
        inner.set_nonblocking(true)?;
        Ok(Listener { inner, secret })
    }

    /// The bound address (to pass to workers).
    ///
    /// # Errors
    /// As `TcpListener::local_addr`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    /// Waits until `n` workers have joined; peers that fail the challenge
    /// are dropped with a logged reason and do not count.
    ///
    /// # Errors
    /// [`Error::JoinTimeout`] if fewer than `n` joined within `timeout`;
    /// [`Error::Io`] if the listening socket fails.
    pub fn accept(&self, n: usize, timeout: Duration) -> Result<Vec<Joined>, Error> {
        self.accept_while(n, timeout, || Ok(()))
    }

    /// [`Listener::accept`], giving up as soon as `stop` is set (by a
    /// signal handler, or a caller's Ctrl-C, say), with
    /// [`Error::Interrupted`].
    ///
    /// # Errors
    /// As [`Listener::accept`]; [`Error::Interrupted`] once `stop` is set.
    pub fn accept_until(
        &self,
        n: usize,
        timeout: Duration,
        stop: &AtomicBool,
    ) -> Result<Vec<Joined>, Error> {
        // Relaxed: a flag polled every 2 ms; nothing else rides on it.
        self.accept_while(n, timeout, || match stop.load(Ordering::Relaxed) {
            true => Err(Error::Interrupted),
            false => Ok(()),
        })
    }

    /// [`Listener::accept`], asking `go_on` between tries whether to.
    pub(crate) fn accept_while(
        &self,
        n: usize,
        timeout: Duration,
        mut go_on: impl FnMut() -> Result<(), Error>,
    ) -> Result<Vec<Joined>, Error> {
        let deadline = Instant::now() + timeout;
        let mut joined = Vec::with_capacity(n);
        while joined.len() < n {
            match self.inner.accept() {
                Ok((stream, addr)) => match self.authenticate(&stream) {
                    Ok(()) => joined.push(Joined { stream, addr }),
                    Err(e) => tracing::warn!(%addr, "refusing a peer: {e}"),
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    go_on()?;
                    if Instant::now() >= deadline {
                        return Err(Error::JoinTimeout {
                            joined: joined.len(),
                            wanted: n,
                            timeout,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(joined)
    }

    /// The workers whose connections are waiting now, authenticated (those
    /// that fail the challenge are dropped with a logged reason); does not
    /// wait for more.
    ///
    /// # Errors
    /// [`Error::Io`] if the listening socket fails.
    pub fn accept_ready(&self) -> Result<Vec<Joined>, Error> {
        let mut joined = Vec::new();
        loop {
            match self.inner.accept() {
                Ok((stream, addr)) => match self.authenticate(&stream) {
                    Ok(()) => joined.push(Joined { stream, addr }),
                    Err(e) => tracing::warn!(%addr, "refusing a peer: {e}"),
                },
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(joined),
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn authenticate(&self, s: &TcpStream) -> io::Result<()> {
        authenticate(&self.secret, s)
    }

    /// Accepts and authenticates workers from now on, on a thread of its
    /// own (each handshake on one more, so that a silent peer holds up no
    /// other), whatever the caller is doing: a worker that joins during a
    /// long step is challenged at once, and waits, authenticated, for the
    /// caller to take it ([`Joiners::take`]). Dropping the [`Joiners`]
    /// stops the thread.
    pub(crate) fn in_background(self) -> Joiners {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let spawned = std::thread::Builder::new()
            .name("statepipe-joiners".into())
            .spawn(move || {
                // Relaxed: a flag polled every 10 ms; nothing rides on it.
                while !flag.load(Ordering::Relaxed) {
                    match self.inner.accept() {
                        Ok((stream, addr)) => {
                            let (secret, tx) = (self.secret.clone(), tx.clone());
                            let _ = std::thread::Builder::new()
                                .name("statepipe-handshake".into())
                                .spawn(move || match authenticate(&secret, &stream) {
                                    Ok(()) => {
                                        let _ = tx.send(Joined { stream, addr });
                                    }
                                    Err(e) => tracing::warn!(%addr, "refusing a peer: {e}"),
                                });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        Err(e) => {
                            // Out of descriptors, say: it may pass.
                            tracing::warn!("accepting workers: {e}");
                            std::thread::sleep(Duration::from_millis(100));
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the thread that admits workers mid-run: {e}");
        }
        Joiners { rx, stop }
    }
}

/// Workers that joined a listener [`Listener::in_background`] accepts on,
/// authenticated, waiting to be taken.
#[derive(Debug)]
pub(crate) struct Joiners {
    rx: std::sync::mpsc::Receiver<Joined>,
    stop: Arc<AtomicBool>,
}

impl Joiners {
    /// The workers that joined since the last call; waits for none.
    pub(crate) fn take(&self) -> Vec<Joined> {
        self.rx.try_iter().collect()
    }
}

impl Drop for Joiners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Challenges the peer on `s` and checks its answer against `secret`,
/// within [`AUTH_TIMEOUT`] a read.
fn authenticate(secret: &Secret, s: &TcpStream) -> io::Result<()> {
    s.set_nonblocking(false)?;
    challenge(secret, s, AUTH_TIMEOUT)
}

/// The accepting side's handshake on `s` (a master's, or a peer
/// listener's): a random challenge, and the answer checked against
/// `secret`, each read within `timeout`; `s` is left without a read
/// timeout.
pub(crate) fn challenge(secret: &Secret, s: &TcpStream, timeout: Duration) -> io::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    let nonce: [u8; 32] = rand::random();
    let mut s2 = s;
    wire::write_frame(&mut s2, Kind::Challenge, &nonce)?;
    let mut buf = Vec::new();
    // A peer may not make us read more than an answer's worth.
    wire::expect_frame(&mut s2, &mut buf, 64, Kind::Auth)?;
    let answer = msg::array32(&buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if !secret.verify(&nonce, &answer) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "wrong secret",
        ));
    }
    s.set_read_timeout(None)?;
    Ok(())
}
