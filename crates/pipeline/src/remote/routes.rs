//! Where incoming data connections wait for the part they feed: a
//! listener authenticates each (challenge, answer, hello) and files it
//! under its attempt and part until that part's thread takes it.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use statepipe_sys::auth::Secret;

use super::wire::{self, Msg, Target};

/// The longest one try at connecting to a peer and reading its challenge
/// takes before [`connect`] looks at its deadline and `stop` again.
const HANDSHAKE_STEP: Duration = Duration::from_secs(1);

/// Connections that arrived, by (attempt, part).
#[derive(Default)]
pub(crate) struct Routes {
    waiting: Mutex<HashMap<(u64, u32, u32), TcpStream>>,
    arrived: Condvar,
    /// Connections refused (wrong secret, malformed hello), and why the
    /// last one was.
    pub(crate) refused: Mutex<(u64, Option<String>)>,
}

impl Routes {
    /// Takes the connection `slot` of `part` of attempt `epoch`, waiting
    /// up to `timeout` (and no longer than `stop` stays unset).
    pub(crate) fn take(
        &self,
        epoch: u64,
        part: u32,
        slot: u32,
        timeout: Duration,
        stop: &AtomicBool,
    ) -> Option<TcpStream> {
        let deadline = Instant::now() + timeout;
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(s) = w.remove(&(epoch, part, slot)) {
                return Some(s);
            }
            if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                return None;
            }
            w = self
                .arrived
                .wait_timeout(w, Duration::from_millis(50))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// What to add to "did not connect": how many connections this
    /// process refused and why it refused the last (a peer with another
    /// secret, a stray client), or nothing where it refused none.
    pub(crate) fn refusals(&self) -> String {
        let r = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        match &r.1 {
            Some(last) => format!(
                " ({} connection(s) to this process's data port refused; the last, from {last})",
                r.0
            ),
            None => String::new(),
        }
    }

    /// Forgets the connections of attempts before `epoch`.
    pub(crate) fn forget_before(&self, epoch: u64) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        w.retain(|(e, _, _), _| *e >= epoch);
    }

    fn file(&self, epoch: u64, part: u32, slot: u32, s: TcpStream) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        w.insert((epoch, part, slot), s);
        self.arrived.notify_all();
    }
}

/// Accepts data connections on `listener` until `done` is set, each
/// authenticated on a thread of its own (a silent peer holds up nobody).
pub(crate) fn serve(
    listener: TcpListener,
    secret: Secret,
    routes: Arc<Routes>,
    done: Arc<AtomicBool>,
) {
    for s in listener.incoming() {
        if done.load(Ordering::Relaxed) {
            break;
        }
        let Ok(s) = s else { continue };
        let (secret, routes) = (secret.clone(), Arc::clone(&routes));
        let _ = std::thread::Builder::new()
            .name("edge-accept".into())
            .spawn(move || {
                let peer = s.peer_addr().map_or("?".to_string(), |a| a.to_string());
                if let Err(e) = admit(s, &secret, &routes) {
                    let mut r = routes.refused.lock().unwrap_or_else(|p| p.into_inner());
                    r.0 += 1;
                    r.1 = Some(format!("{peer}: {e}"));
                }
            });
    }
}

fn admit(mut s: TcpStream, secret: &Secret, routes: &Routes) -> Result<(), wire::WireError> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::new();
    wire::challenge(&mut s, secret, &mut buf)?;
    match wire::read_msg(&mut s, &mut buf)? {
        Msg::Hello { epoch, part, slot } => {
            s.set_read_timeout(None)?;
            routes.file(epoch, part, slot, s);
            Ok(())
        }
        m => Err(wire::WireError::Malformed(format!(
            "{m:?} where a hello belongs"
        ))),
    }
}

/// Connects to `to` in attempt `epoch`, retrying while the peer is not
/// listening yet, up to `timeout` or until `stop`.
pub(crate) fn connect(
    to: &Target,
    secret: &Secret,
    epoch: u64,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<TcpStream, String> {
    let deadline = Instant::now() + timeout;
    let addr = to.addr.as_str();
    loop {
        // A peer whose host is gone (no answer to the connect), or that is
        // stopped or hung (the kernel accepts for it, and the challenge
        // never comes), is given a step at a time, so that `stop` and
        // the deadline are seen: without these bounds the thread would
        // wait on it for as long as it stays that way.
        let left = deadline.saturating_duration_since(Instant::now());
        let step = left.clamp(Duration::from_millis(1), HANDSHAKE_STEP);
        let connected = addr
            .to_socket_addrs()
            .and_then(|mut a| {
                a.next()
                    .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no address"))
            })
            .and_then(|a| TcpStream::connect_timeout(&a, step));
        match connected {
            Ok(mut s) => {
                let mut buf = Vec::new();
                s.set_read_timeout(Some(step))
                    .map_err(|e| format!("{addr}: {e}"))?;
                match wire::answer(&mut s, secret, &mut buf) {
                    Ok(()) => {}
                    Err(wire::WireError::Io(e))
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
                            return Err(format!(
                                "{addr}: no challenge from the peer within {timeout:?}"
                            ));
                        }
                        continue;
                    }
                    Err(e) => return Err(format!("{addr}: {e}")),
                }
                s.set_read_timeout(None)
                    .map_err(|e| format!("{addr}: {e}"))?;
                wire::write_msg(
                    &mut s,
                    &Msg::Hello {
                        epoch,
                        part: to.part,
                        slot: to.slot,
                    },
                )
                .map_err(|e| format!("{addr}: {e}"))?;
                return Ok(s);
            }
            Err(e) if Instant::now() >= deadline || stop.load(Ordering::Relaxed) => {
                return Err(format!("connecting to {addr}: {e}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_connection_is_named_where_the_wait_for_it_ends() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let routes = Arc::new(Routes::default());
        let done = Arc::new(AtomicBool::new(false));
        let server = {
            let (routes, done) = (Arc::clone(&routes), Arc::clone(&done));
            std::thread::spawn(move || serve(listener, Secret::random(), routes, done))
        };
        assert_eq!(routes.refusals(), "");
        // A peer with another secret: refused at the handshake.
        let mut s = TcpStream::connect(addr).unwrap();
        let mut buf = Vec::new();
        wire::answer(&mut s, &Secret::random(), &mut buf).unwrap();
        let stop = AtomicBool::new(false);
        let mut why = String::new();
        for _ in 0..100 {
            assert!(routes
                .take(1, 0, 0, Duration::from_millis(20), &stop)
                .is_none());
            why = routes.refusals();
            if !why.is_empty() {
                break;
            }
        }
        assert!(why.contains("1 connection(s)"), "{why}");
        assert!(why.contains("shared secret"), "{why}");
        done.store(true, Ordering::Relaxed);
        // `serve` looks at `done` when a connection arrives.
        let _ = TcpStream::connect(addr);
        server.join().unwrap();
    }
}
