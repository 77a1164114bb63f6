//! How a worker joins its master: its options, the environment a
//! launcher sets, connecting (retrying until the master is up) and the
//! challenge, made again when the master never sent it.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::auth::Secret;
use crate::error::Error;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::protocol::{msg, Kind};
use crate::wire;

/// How a worker joins its master.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Pin the worker's threads to this CPU.
    pub pin: Option<usize>,
    /// Keep retrying the connection this long (the master may start later).
    pub connect_timeout: Duration,
    /// How long a connection may wait for the master's challenge before the
    /// worker drops it and connects again (within `connect_timeout`). A
    /// connection can look established to the worker while the master never
    /// saw it (its accept queue was full when the handshake ended): without
    /// this the worker would wait on it forever.
    pub challenge_timeout: Duration,
    /// Ask the kernel to kill this process when its parent dies (Linux
    /// `PR_SET_PDEATHSIG`), so that a master killed by SIGKILL leaves no
    /// worker behind. [`LocalCluster`](crate::LocalCluster) sets it.
    pub die_with_parent: bool,
    /// Give up on a master that acknowledges nothing (its host is gone, the
    /// link is cut) after this long: the kernel's `TCP_USER_TIMEOUT` on
    /// the connection, which the worker's heartbeats keep busy, so the
    /// worker exits rather than wait for TCP's own limit (about 15
    /// minutes). A master that is merely busy still acknowledges.
    pub unreachable_timeout: Duration,
    /// Set this flag to ask to leave (what a SIGTERM handler does): the
    /// worker tells the master, goes on serving while its states move to
    /// the other workers, and returns `Ok` when the master lets it go. A
    /// worker that is the only one stays until the run ends.
    pub leave: Option<Arc<AtomicBool>>,
    /// Set once the worker is set up (it joined and holds the model, so
    /// the master may give it states), cleared when it stops serving: what
    /// a readiness probe reports (`statepipe worker --health`).
    pub ready: Option<Arc<AtomicBool>>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            pin: None,
            connect_timeout: Duration::from_secs(30),
            challenge_timeout: Duration::from_secs(5),
            die_with_parent: false,
            unreachable_timeout: Duration::from_secs(30),
            leave: None,
            ready: None,
        }
    }
}

/// The environment variable holding the master's address, for a worker
/// started by [`LocalCluster`](crate::LocalCluster) or any launcher.
pub const CONNECT_ENV: &str = "STATEPIPE_CONNECT";
/// The environment variable holding the CPU to pin a worker to (optional).
pub const PIN_ENV: &str = "STATEPIPE_PIN";
/// The environment variable that, set to `1`, makes a worker die with its
/// parent (see [`WorkerOptions::die_with_parent`]).
pub const DIE_WITH_PARENT_ENV: &str = "STATEPIPE_DIE_WITH_PARENT";

/// Whether this process was started as a worker: [`CONNECT_ENV`] is set.
///
/// A program that is both master and worker calls this first thing in
/// `main` and, when it is true, hands over to [`serve`](super::serve).
pub fn launched() -> bool {
    std::env::var_os(CONNECT_ENV).is_some()
}

/// Asks the kernel for SIGKILL when the parent process dies.
pub(super) fn die_with_parent() -> Result<(), Error> {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::signal::Signal;
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
            .map_err(|e| Error::Io(std::io::Error::from(e)))?;
        if nix::unistd::getppid() == nix::unistd::Pid::from_raw(1) {
            return Err(Error::Config(
                "the parent (the master) is already gone".into(),
            ));
        }
    }
    Ok(())
}

/// Connects to `addr`, retrying every 50 ms until `deadline`.
fn connect(addr: &str, deadline: Instant) -> Result<TcpStream, Error> {
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| connect_error(addr, format!("resolving the address: {e}")))?
        .collect();
    loop {
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect(a) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if Instant::now() >= deadline {
            let e = last.map_or_else(|| "no address".to_string(), |e| e.to_string());
            return Err(connect_error(
                addr,
                format!(
                    "{e} (is the master started, and listening on an address this host reaches?)"
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Connects to the master at `addr` and answers its challenge; a
/// connection on which no challenge comes within `opts.challenge_timeout`
/// is dropped and a new one made, until `opts.connect_timeout` has passed.
fn connect_error(addr: &str, reason: String) -> Error {
    Error::Connect {
        addr: addr.to_string(),
        reason,
    }
}

pub(super) fn join(addr: &str, secret: &Secret, opts: &WorkerOptions) -> Result<TcpStream, Error> {
    let deadline = Instant::now() + opts.connect_timeout;
    let mut buf = Vec::with_capacity(64);
    loop {
        let s = connect(addr, deadline)?;
        s.set_nodelay(true)?;
        #[cfg(target_os = "linux")]
        socket2::SockRef::from(&s).set_tcp_user_timeout(Some(opts.unreachable_timeout))?;
        s.set_read_timeout(Some(opts.challenge_timeout.max(Duration::from_millis(1))))?;
        match wire::expect_frame(&mut &s, &mut buf, 64, Kind::Challenge) {
            Ok(()) => {
                let nonce = msg::array32(&buf)
                    .map_err(|e| connect_error(addr, format!("a malformed challenge: {e}")))?;
                wire::write_frame(&mut &s, Kind::Auth, &secret.answer(&nonce))?;
                s.set_read_timeout(None)?;
                return Ok(s);
            }
            Err(e) if retry_join(&e) && Instant::now() < deadline => {
                tracing::warn!(%addr, "no challenge from the master ({e}); connecting again");
            }
            Err(e) => {
                return Err(connect_error(
                    addr,
                    format!(
                        "awaiting its challenge: {e}; is a statepipe master listening there, \
                         and not overloaded? (waited {:?} per connection, {:?} in all)",
                        opts.challenge_timeout, opts.connect_timeout
                    ),
                ))
            }
        }
    }
}

/// Whether a failed wait for the challenge is worth a new connection: no
/// answer, or a connection the master's side never had (reset, closed).
fn retry_join(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::WouldBlock | K::TimedOut | K::ConnectionReset | K::ConnectionAborted | K::UnexpectedEof
    )
}
