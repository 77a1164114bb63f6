//! One cut edge on its own: a typed stream of items from one process to
//! another, with the batching, credits and handshake of a distributed
//! pipeline's edges (`edge.rs`), and nothing else (no barriers, no
//! numbering across parts, no coordinator).

use std::marker::PhantomData;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytemuck::Pod;
use serde::de::DeserializeOwned;
use serde::Serialize;
use statepipe_sys::auth::Secret;

use super::edge::{Arrival, EdgeMetrics, EdgeRx, EdgeStats, EdgeTx};
use super::error::RemoteError;
use super::wire::{self, Msg, WireError};

/// How long [`Link::connect`] retries while nobody listens yet, and how
/// long [`LinkListener::accept`] gives a connection to authenticate.
const HANDSHAKE: Duration = Duration::from_secs(10);

fn io(what: &str, e: impl std::fmt::Display) -> RemoteError {
    RemoteError::Io(format!("{what}: {e}"))
}

fn refused(e: WireError) -> RemoteError {
    match e {
        WireError::Malformed(m) => RemoteError::Refused(m),
        WireError::Io(e) => io("link handshake", e),
    }
}

/// The sending end of one cut edge: items of type `T`, in order, to a
/// [`LinkReceiver`] in another process.
///
/// [`send`](Link::send) batches items into frames of up to 64 KiB and
/// writes a frame when it is full; call [`flush`](Link::flush) when there
/// is nothing more to send for now (a lone item then waits for no timer),
/// and [`finish`](Link::finish) at the end. The sender never has more
/// items on the wire than the receiver granted: with its credits spent,
/// `send` waits, so a slow receiver holds the sender back with bounded
/// memory on both sides.
///
/// ```
/// use statepipe_pipeline::remote::{Link, LinkListener};
/// use statepipe_sys::auth::Secret;
///
/// let secret = Secret::new("example");
/// let listener = LinkListener::bind("127.0.0.1:0", secret.clone()).unwrap();
/// let addr = listener.local_addr().to_string();
/// let sender = std::thread::spawn(move || {
///     let mut link = Link::<(u32, String)>::connect(&addr, &secret).unwrap();
///     for i in 0..1000 {
///         link.send(&(i, format!("item {i}"))).unwrap();
///     }
///     link.finish().unwrap()
/// });
/// let mut rx = listener.accept::<(u32, String)>(64).unwrap();
/// let mut got = Vec::new();
/// while rx.recv_batch(|x| got.push(x)).unwrap() {}
/// assert_eq!(sender.join().unwrap(), 1000);
/// assert_eq!(got.len(), 1000);
/// assert_eq!(got[999], (999, "item 999".to_string()));
/// ```
pub struct Link<T> {
    tx: EdgeTx,
    _items: PhantomData<fn(&T)>,
}

impl<T: Serialize> Link<T> {
    /// Connects to a [`LinkListener`] at `addr` and proves `secret`,
    /// retrying for up to 10 s while nothing listens there yet.
    ///
    /// # Errors
    /// [`RemoteError::Io`] if no connection could be made;
    /// [`RemoteError::Refused`] if the receiver refused it (another
    /// secret, another item type).
    pub fn connect(addr: &str, secret: &Secret) -> Result<Link<T>, RemoteError> {
        let tx = connect_edge(
            addr,
            secret,
            std::any::type_name::<T>().to_string(),
            wire::BATCH,
        )?;
        Ok(Link {
            tx,
            _items: PhantomData,
        })
    }

    /// Queues `item`, after waiting for a credit if the receiver has
    /// granted none; writes the batch if it is full.
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the connection failed or the receiver went
    /// away; [`RemoteError::Config`] if `item` does not encode or encodes
    /// to more than a frame (4 MiB).
    pub fn send(&mut self, item: &T) -> Result<(), RemoteError> {
        let seq = self.tx.sent();
        self.tx.send(seq, item).map_err(wire_error)
    }

    /// Writes the items queued so far.
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the connection failed.
    pub fn flush(&mut self) -> Result<(), RemoteError> {
        self.tx.flush().map_err(wire_error)
    }

    /// Counters of this edge so far (items, bytes, frames, credits,
    /// stalls).
    pub fn metrics(&self) -> EdgeMetrics {
        self.tx.stats.snapshot("link out".into())
    }

    /// Writes what is queued and the end, and waits until the receiver
    /// has read everything and closed: the number of items sent.
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the connection failed first.
    pub fn finish(self) -> Result<u64, RemoteError> {
        let sent = self.tx.sent();
        self.tx.end().map_err(wire_error)?;
        Ok(sent)
    }
}

fn wire_error(e: WireError) -> RemoteError {
    match e {
        WireError::Io(e) => io("link", e),
        WireError::Malformed(m) => RemoteError::Config(m),
    }
}

impl<T> std::fmt::Debug for Link<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("sent", &self.tx.sent())
            .finish()
    }
}

/// Where [`Link`]s connect: a TCP listener that authenticates each
/// connection.
#[derive(Debug)]
pub struct LinkListener {
    listener: TcpListener,
    secret: Secret,
    addr: SocketAddr,
}

impl LinkListener {
    /// Listens on `addr` for links that prove `secret`.
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the address cannot be bound.
    pub fn bind(addr: impl ToSocketAddrs, secret: Secret) -> Result<LinkListener, RemoteError> {
        let listener = TcpListener::bind(addr).map_err(|e| io("binding a link listener", e))?;
        let addr = listener.local_addr().map_err(|e| io("link listener", e))?;
        Ok(LinkListener {
            listener,
            secret,
            addr,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits for the next link, checks its secret and its item type, and
    /// grants it `window` items of credit (at least 1): the most that
    /// may be on the wire at once.
    ///
    /// # Errors
    /// [`RemoteError::Refused`] if the peer had another secret or
    /// another item type (it is told why); [`RemoteError::Io`] if the
    /// connection failed.
    pub fn accept<T: DeserializeOwned>(&self, window: u64) -> Result<LinkReceiver<T>, RemoteError> {
        let rx = self.accept_edge(window, std::any::type_name::<T>())?;
        Ok(LinkReceiver {
            rx: Some(rx),
            _items: PhantomData,
        })
    }

    /// [`accept`](LinkListener::accept) for a [`RawLink`]: the sender's
    /// items must be the same type, of the same size and byte order.
    ///
    /// # Errors
    /// As [`accept`](LinkListener::accept).
    pub fn accept_raw<T: Pod>(&self, window: u64) -> Result<RawLinkReceiver<T>, RemoteError> {
        let rx = self.accept_edge(window, &raw_name::<T>())?;
        Ok(RawLinkReceiver {
            rx: Some(rx),
            _items: PhantomData,
        })
    }

    fn accept_edge(&self, window: u64, want: &str) -> Result<EdgeRx, RemoteError> {
        let (mut s, peer) = self
            .listener
            .accept()
            .map_err(|e| io("accepting a link", e))?;
        let mut buf = Vec::new();
        s.set_read_timeout(Some(HANDSHAKE))
            .map_err(|e| io("link", e))?;
        if let Err(e) = wire::challenge(&mut s, &self.secret, &mut buf) {
            linger(&mut s);
            return Err(RemoteError::Refused(format!("{peer}: {e}")));
        }
        match wire::read_msg(&mut s, &mut buf) {
            Ok(Msg::Link { item }) if item == want => {}
            Ok(Msg::Link { item }) => {
                let reason = format!("this link carries {want}, the sender sends {item}");
                let _ = wire::write_msg(
                    &mut s,
                    &Msg::Refused {
                        reason: reason.clone(),
                    },
                );
                return Err(RemoteError::Refused(format!("{peer}: {reason}")));
            }
            Ok(m) => {
                return Err(RemoteError::Refused(format!(
                    "{peer}: {m:?} where a link's hello belongs"
                )))
            }
            Err(e) => return Err(RemoteError::Refused(format!("{peer}: {e}"))),
        }
        s.set_read_timeout(None).map_err(|e| io("link", e))?;
        EdgeRx::new(s, window.max(1), Arc::new(EdgeStats::default())).map_err(|e| io("link", e))
    }
}

/// Closes a refused connection without discarding the refusal: the peer
/// has written its hello already, and closing with it unread would reset
/// the connection, dropping the refusal before the peer reads it. So stop
/// writing, and read what it sends until it closes (or 1 s passes).
fn linger(s: &mut TcpStream) {
    use std::io::Read;
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut sink = [0u8; 512];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
}

/// What a raw link's ends compare: the type, its size and the byte order.
fn raw_name<T>() -> String {
    let order = if cfg!(target_endian = "little") {
        "little"
    } else {
        "big"
    };
    format!(
        "{} as {} raw {order}-endian bytes",
        std::any::type_name::<T>(),
        std::mem::size_of::<T>()
    )
}

/// Connects, proves `secret`, names the items: the sending end of an edge
/// of `kind` records.
fn connect_edge(
    addr: &str,
    secret: &Secret,
    item: String,
    kind: u8,
) -> Result<EdgeTx, RemoteError> {
    let deadline = Instant::now() + HANDSHAKE;
    let mut s = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if Instant::now() >= deadline => {
                return Err(io(&format!("connecting to {addr}"), e))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    s.set_read_timeout(Some(HANDSHAKE))
        .map_err(|e| io(addr, e))?;
    let mut buf = Vec::new();
    wire::answer(&mut s, secret, &mut buf).map_err(refused)?;
    wire::write_msg(&mut s, &Msg::Link { item }).map_err(|e| io(addr, e))?;
    // The receiver answers with its first grant, or with why it refuses.
    let window = match wire::read_frame(&mut s, &mut buf) {
        Ok(wire::CREDIT) => wire::decode_u64(&buf).map_err(refused)?,
        Ok(wire::CONTROL) => {
            return Err(match wire::decode_msg(&buf) {
                Ok(Msg::Refused { reason }) => RemoteError::Refused(format!("{addr}: {reason}")),
                _ => RemoteError::Refused(format!("{addr}: a malformed answer to a link")),
            })
        }
        Ok(k) => {
            return Err(RemoteError::Refused(format!(
                "{addr}: frame kind {k} where a link's first grant belongs"
            )))
        }
        Err(e) => {
            return Err(io(
                &format!("{addr}: waiting for the link's first grant"),
                e,
            ))
        }
    };
    s.set_read_timeout(None).map_err(|e| io(addr, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let tx = EdgeTx::new(s, stop, Arc::default(), kind).map_err(|e| io(addr, e))?;
    tx.granted_before(window);
    Ok(tx)
}

/// The receiving end of one cut edge (see [`Link`]).
pub struct LinkReceiver<T> {
    rx: Option<EdgeRx>,
    _items: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> LinkReceiver<T> {
    /// Reads the next frame and hands its items to `f`, in the order they
    /// were sent; `Ok(false)` once the sender has finished and every item
    /// has been handed on (then and after).
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the connection failed or closed before the
    /// sender finished; [`RemoteError::Refused`] for a malformed frame
    /// (the link is then unusable).
    pub fn recv_batch(&mut self, mut f: impl FnMut(T)) -> Result<bool, RemoteError> {
        let Some(rx) = self.rx.as_mut() else {
            return Ok(false);
        };
        let more = rx
            .next::<T>(|a| match a {
                Arrival::Item(_, x) => {
                    f(x);
                    Ok(())
                }
                _ => Err(WireError::Malformed("a pipeline's record on a link".into())),
            })
            .map_err(receive_error)?;
        Ok(close_at_end(&mut self.rx, more))
    }

    /// Counters of this edge so far, or `None` once it has ended.
    pub fn metrics(&self) -> Option<EdgeMetrics> {
        self.rx
            .as_ref()
            .map(|rx| rx.stats.snapshot("link in".into()))
    }
}

impl<T> std::fmt::Debug for LinkReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkReceiver")
            .field("ended", &self.rx.is_none())
            .finish()
    }
}

/// A [`Link`] for plain-old-data items (`bytemuck::Pod`: integers,
/// floats, arrays and `#[repr(C)]` structs of them): each item crosses as
/// its own bytes, with no encoding work, so a link of small fixed-size
/// items runs at the speed of `memcpy` and the socket. Both ends must
/// run on machines of the same byte order; the handshake checks it, with
/// the type's name and size.
///
/// ```
/// use statepipe_pipeline::remote::{LinkListener, RawLink};
/// use statepipe_sys::auth::Secret;
///
/// let secret = Secret::new("example");
/// let listener = LinkListener::bind("127.0.0.1:0", secret.clone()).unwrap();
/// let addr = listener.local_addr().to_string();
/// let sender = std::thread::spawn(move || {
///     let mut link = RawLink::<[u64; 8]>::connect(&addr, &secret).unwrap();
///     for i in 0..10_000u64 {
///         link.send(&[i; 8]).unwrap();
///     }
///     link.finish().unwrap()
/// });
/// let mut rx = listener.accept_raw::<[u64; 8]>(1024).unwrap();
/// let mut sum = 0;
/// while rx.recv_batch(|x| sum += x[7]).unwrap() {}
/// assert_eq!(sender.join().unwrap(), 10_000);
/// assert_eq!(sum, (0..10_000).sum::<u64>());
/// ```
pub struct RawLink<T> {
    tx: EdgeTx,
    _items: PhantomData<fn(&T)>,
}

impl<T: Pod> RawLink<T> {
    /// As [`Link::connect`], for items of `T`'s raw bytes.
    ///
    /// # Errors
    /// As [`Link::connect`].
    pub fn connect(addr: &str, secret: &Secret) -> Result<RawLink<T>, RemoteError> {
        let tx = connect_edge(addr, secret, raw_name::<T>(), wire::RAW)?;
        Ok(RawLink {
            tx,
            _items: PhantomData,
        })
    }

    /// As [`Link::send`].
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the connection failed or the receiver went
    /// away.
    #[inline]
    pub fn send(&mut self, item: &T) -> Result<(), RemoteError> {
        self.tx.send_raw(item).map_err(wire_error)
    }

    /// As [`Link::flush`].
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the connection failed.
    pub fn flush(&mut self) -> Result<(), RemoteError> {
        self.tx.flush().map_err(wire_error)
    }

    /// As [`Link::metrics`].
    pub fn metrics(&self) -> EdgeMetrics {
        self.tx.stats.snapshot("raw link out".into())
    }

    /// As [`Link::finish`].
    ///
    /// # Errors
    /// [`RemoteError::Io`] if the connection failed first.
    pub fn finish(self) -> Result<u64, RemoteError> {
        let sent = self.tx.sent();
        self.tx.end().map_err(wire_error)?;
        Ok(sent)
    }
}

impl<T> std::fmt::Debug for RawLink<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawLink")
            .field("sent", &self.tx.sent())
            .finish()
    }
}

/// The receiving end of a [`RawLink`].
pub struct RawLinkReceiver<T> {
    rx: Option<EdgeRx>,
    _items: PhantomData<fn() -> T>,
}

impl<T: Pod> RawLinkReceiver<T> {
    /// As [`LinkReceiver::recv_batch`].
    ///
    /// # Errors
    /// As [`LinkReceiver::recv_batch`].
    pub fn recv_batch(&mut self, f: impl FnMut(T)) -> Result<bool, RemoteError> {
        let Some(rx) = self.rx.as_mut() else {
            return Ok(false);
        };
        let more = rx.next_raw::<T>(f).map_err(receive_error)?;
        Ok(close_at_end(&mut self.rx, more))
    }

    /// As [`LinkReceiver::metrics`].
    pub fn metrics(&self) -> Option<EdgeMetrics> {
        self.rx
            .as_ref()
            .map(|rx| rx.stats.snapshot("raw link in".into()))
    }
}

impl<T> std::fmt::Debug for RawLinkReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawLinkReceiver")
            .field("ended", &self.rx.is_none())
            .finish()
    }
}

/// After the end (`more` false), closes the connection, which tells the
/// sender's `finish` that everything arrived; returns `more`.
fn close_at_end(rx: &mut Option<EdgeRx>, more: bool) -> bool {
    if !more {
        if let Some(rx) = rx.take() {
            rx.close();
        }
    }
    more
}

fn receive_error(e: WireError) -> RemoteError {
    match e {
        WireError::Io(e) => io("link", e),
        WireError::Malformed(m) => RemoteError::Refused(format!("malformed frame: {m}")),
    }
}
