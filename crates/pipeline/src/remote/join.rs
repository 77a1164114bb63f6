//! A member joining the coordinator: the handshake, the build check,
//! and the thread that reads its messages into the coordinator's events.

use std::io::BufReader;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use statepipe_sys::auth::Secret;

use super::wire::{self, Msg};

/// A member as the coordinator knows it.
pub(crate) struct Known {
    pub(crate) addr: String,
    pub(crate) data: String,
    pub(crate) writer: Arc<Mutex<TcpStream>>,
    pub(crate) last_seen: Instant,
    pub(crate) alive: bool,
}

impl Known {
    pub(crate) fn send(&self, m: &Msg) -> bool {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        wire::write_msg(&mut *w, m).is_ok()
    }

    pub(crate) fn drop_connection(&mut self) {
        self.alive = false;
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let _ = w.shutdown(Shutdown::Both);
    }
}

pub(crate) enum Ev {
    Joined(u32, Known),
    Msg(u32, Msg),
    Lost(u32, String),
    Source(u64, Result<(), String>),
    Sink(u64, Result<(), String>),
    /// Attempt `.0`'s output edge has delivered every output before
    /// barrier `.1` to the sink.
    Seen(u64, u64),
}

/// Authenticates a member, checks its build, then reads its messages.
pub(crate) fn admit(
    mut s: TcpStream,
    secret: &Secret,
    app: &str,
    build: &str,
    tx: &Sender<Ev>,
    numbers: &AtomicU32,
) {
    let addr = s.peer_addr().map_or("?".into(), |a| a.to_string());
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut buf = Vec::new();
    if wire::challenge(&mut s, secret, &mut buf).is_err() {
        return;
    }
    let number = numbers.fetch_add(1, Ordering::Relaxed);
    if wire::write_msg(
        &mut s,
        &Msg::Welcome {
            app: app.to_string(),
            member: number,
        },
    )
    .is_err()
    {
        return;
    }
    let data = match wire::read_msg(&mut s, &mut buf) {
        Ok(Msg::Ready { build: b, data }) if b == build => data,
        Ok(Msg::Ready { build: b, .. }) => {
            let _ = wire::write_msg(
                &mut s,
                &Msg::Refused {
                    reason: format!(
                        "this member's build of `{app}` has shape {b}, the coordinator's {build}: \
                         run the same build (and the same application arguments) everywhere"
                    ),
                },
            );
            return;
        }
        _ => return,
    };
    // A member listening on every interface is reached where it joined from.
    let data = match (data.parse::<SocketAddr>(), s.peer_addr()) {
        (Ok(d), Ok(p)) if d.ip().is_unspecified() => SocketAddr::new(p.ip(), d.port()).to_string(),
        _ => data,
    };
    let _ = s.set_read_timeout(None);
    let Ok(writer) = s.try_clone() else { return };
    let writer = Arc::new(Mutex::new(writer));
    let beating = Arc::downgrade(&writer);
    let known = Known {
        addr: addr.clone(),
        data,
        writer,
        last_seen: Instant::now(),
        alive: true,
    };
    if tx.send(Ev::Joined(number, known)).is_err() {
        return;
    }
    // The coordinator's beat, on a thread of its own so that a slow
    // commit does not hold it up: a member that hears nothing for
    // `wire::COORDINATOR_SILENCE` (its coordinator stopped, or its host
    // cut off) stops its parts. It ends with the connection: once the
    // driver has let go of the member, or a write fails.
    let _ = std::thread::Builder::new()
        .name("coordinator-beat".into())
        .spawn(move || loop {
            std::thread::sleep(wire::HEARTBEAT);
            let Some(w) = beating.upgrade() else { return };
            let mut w = w.lock().unwrap_or_else(|p| p.into_inner());
            if wire::write_msg(&mut *w, &Msg::Heartbeat).is_err() {
                return;
            }
        });
    let mut r = BufReader::new(s);
    loop {
        match wire::read_msg(&mut r, &mut buf) {
            Ok(m) => {
                if tx.send(Ev::Msg(number, m)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.send(Ev::Lost(number, e.to_string()));
                return;
            }
        }
    }
}
