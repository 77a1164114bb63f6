//! A cut edge: the two ends of one TCP connection between parts, with
//! credit-based flow control.
//!
//! The receiving end grants credits, counted in items: first its window,
//! then, as it hands items on into its part's input ring, what it handed
//! on. The sending end never has more items on the wire than it was
//! granted: with its window spent it flushes and waits. So a slow part
//! holds back the parts before it, across machines, with at most `window`
//! items in sockets and buffers per edge.
//!
//! The sender batches: items go into one frame until it holds
//! [`BATCH_BYTES`](super::wire::BATCH_BYTES), and the frame is written when
//! it is full, when the window is spent, at a barrier, at the end, and as
//! soon as the sender finds nothing more to send (so a lone item waits for
//! no timer). `TCP_NODELAY` is on: batching is the sender's, not Nagle's.

use std::io::{BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::wire::{self, BatchBuf, WireError};

/// One edge's counters (relaxed: they are only read for metrics).
#[derive(Debug, Default)]
pub(crate) struct EdgeStats {
    pub(crate) items: AtomicU64,
    pub(crate) bytes: AtomicU64,
    pub(crate) frames: AtomicU64,
    /// Credits granted by the receiver so far.
    pub(crate) granted: AtomicU64,
    /// Times the sender waited with its window spent.
    pub(crate) stalls: AtomicU64,
}

/// A snapshot of one edge's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EdgeMetrics {
    /// The edge: `part N in` (from the previous part or the source) or
    /// `part N out`.
    pub name: String,
    /// Items that crossed.
    pub items: u64,
    /// Bytes of item frames that crossed.
    pub bytes: u64,
    /// Frames that crossed.
    pub frames: u64,
    /// Items the sender may still send (granted, not yet sent); for an
    /// incoming edge, credits granted and not yet used.
    pub credits: u64,
    /// Times the sender found its window spent and waited.
    pub stalls: u64,
}

impl EdgeStats {
    pub(crate) fn snapshot(&self, name: String) -> EdgeMetrics {
        let items = self.items.load(Ordering::Relaxed);
        EdgeMetrics {
            name,
            items,
            bytes: self.bytes.load(Ordering::Relaxed),
            frames: self.frames.load(Ordering::Relaxed),
            credits: self.granted.load(Ordering::Relaxed).saturating_sub(items),
            stalls: self.stalls.load(Ordering::Relaxed),
        }
    }
}

/// The receiving end's read buffer: small frames (a lone item, a credit)
/// come through it in one `read`, while most of a full batch's body,
/// being longer, is read straight into the frame's buffer, not copied
/// twice.
const READ_BUFFER: usize = 16 << 10;

/// Set when an edge must give up (its attempt was aborted).
pub(crate) type StopFlag = Arc<AtomicBool>;

/// The sending end.
pub(crate) struct EdgeTx {
    stream: TcpStream,
    batch: BatchBuf,
    sent: u64,
    granted: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
    stop: StopFlag,
    pub(crate) stats: Arc<EdgeStats>,
    credits: Option<std::thread::JoinHandle<()>>,
}

impl EdgeTx {
    /// Takes over a connected, authenticated stream, for records of
    /// `kind` (`BATCH`, `GROUPS` or `ROUTE`): a thread reads the credits
    /// that come back on it and wakes the calling thread, which must be
    /// the one that sends.
    pub(crate) fn new(
        stream: TcpStream,
        stop: StopFlag,
        stats: Arc<EdgeStats>,
        kind: u8,
    ) -> std::io::Result<Self> {
        stream.set_nodelay(true)?;
        let granted = Arc::new(AtomicU64::new(0));
        let closed = Arc::new(AtomicBool::new(false));
        let reader = stream.try_clone()?;
        let me = std::thread::current();
        let (g, c, st) = (
            Arc::clone(&granted),
            Arc::clone(&closed),
            Arc::clone(&stats),
        );
        let credits = std::thread::Builder::new()
            .name("edge-credits".into())
            .spawn(move || read_credits(reader, &g, &c, &st, &me))?;
        Ok(EdgeTx {
            stream,
            batch: BatchBuf::new(kind),
            sent: 0,
            granted,
            closed,
            stop,
            stats,
            credits: Some(credits),
        })
    }

    /// Counts credits read before this end took over the stream (a
    /// link's first grant, which answers its handshake).
    pub(crate) fn granted_before(&self, n: u64) {
        // Release: pairs with the Acquire loads in `wait_credit`, as the
        // credit reader's grants do.
        self.granted.fetch_add(n, Ordering::Release);
        self.stats.granted.fetch_add(n, Ordering::Relaxed);
    }

    /// Records queued so far (sent or in the batch).
    pub(crate) fn sent(&self) -> u64 {
        self.sent
    }

    /// Whether one more record may go without waiting.
    pub(crate) fn has_credit(&self) -> bool {
        // Acquire: pairs with the Release `fetch_add` in `read_credits`.
        self.sent < self.granted.load(Ordering::Acquire)
    }

    /// Waits until one more item may go.
    fn wait_credit(&mut self) -> Result<(), WireError> {
        // Acquire: pairs with the Release `fetch_add` in `read_credits`
        // (only the count matters; no other data rides on it).
        if self.sent < self.granted.load(Ordering::Acquire) {
            return Ok(());
        }
        self.flush()?;
        self.stats.stalls.fetch_add(1, Ordering::Relaxed);
        while self.sent >= self.granted.load(Ordering::Acquire) {
            if self.closed.load(Ordering::Acquire) {
                return Err(WireError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            if self.stop.load(Ordering::Relaxed) {
                return Err(WireError::Io(std::io::ErrorKind::Interrupted.into()));
            }
            std::thread::park_timeout(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Queues one item; writes the batch if it is full.
    pub(crate) fn send<T: Serialize>(&mut self, seq: u64, item: &T) -> Result<(), WireError> {
        self.wait_credit()?;
        self.batch.push(seq, item)?;
        self.sent += 1;
        if self.batch.full() {
            self.flush()?;
        }
        Ok(())
    }

    /// Queues one `bytemuck::Pod` item as its bytes (a `RAW` batch).
    #[inline]
    pub(crate) fn send_raw<T: bytemuck::Pod>(&mut self, item: &T) -> Result<(), WireError> {
        self.wait_credit()?;
        self.batch.raw(bytemuck::bytes_of(item));
        self.sent += 1;
        if self.batch.full() {
            self.flush()?;
        }
        Ok(())
    }

    /// Queues the end of a group of a keyed copy's outputs: an output (the
    /// group's last if `last`) or only the end.
    pub(crate) fn send_group<T: Serialize>(
        &mut self,
        seq: u64,
        last: bool,
        item: Option<&T>,
    ) -> Result<(), WireError> {
        self.wait_credit()?;
        self.batch.record(seq, &(seq, last, item))?;
        self.sent += 1;
        if self.batch.full() {
            self.flush()?;
        }
        Ok(())
    }

    /// Queues one entry of a route log: the next item went to `copy`.
    pub(crate) fn route(&mut self, copy: u32) -> Result<(), WireError> {
        self.wait_credit()?;
        self.batch.record(0, &copy)?;
        self.sent += 1;
        if self.batch.full() {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes what is batched.
    pub(crate) fn flush(&mut self) -> Result<(), WireError> {
        if self.batch.count == 0 {
            return Ok(());
        }
        self.stats
            .items
            .fetch_add(u64::from(self.batch.count), Ordering::Relaxed);
        self.stats
            .bytes
            .fetch_add(self.batch.len() as u64, Ordering::Relaxed);
        self.stats.frames.fetch_add(1, Ordering::Relaxed);
        self.batch.write_to(&mut self.stream)?;
        Ok(())
    }

    /// Sends a barrier after everything before it.
    pub(crate) fn barrier(&mut self, id: u64) -> Result<(), WireError> {
        self.flush()?;
        wire::write_frame(&mut self.stream, wire::BARRIER, &id.to_le_bytes())?;
        Ok(())
    }

    /// Sends the end, and waits for the receiver to close its side (so
    /// every item is known to have arrived).
    pub(crate) fn end(mut self) -> Result<(), WireError> {
        self.flush()?;
        wire::write_frame(&mut self.stream, wire::END, &[])?;
        self.stream.flush()?;
        if let Some(t) = self.credits.take() {
            let _ = t.join();
        }
        Ok(())
    }
}

impl Drop for EdgeTx {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(t) = self.credits.take() {
            let _ = t.join();
        }
    }
}

fn read_credits(
    stream: TcpStream,
    granted: &AtomicU64,
    closed: &AtomicBool,
    stats: &EdgeStats,
    sender: &Thread,
) {
    let mut r = BufReader::new(stream);
    let mut buf = Vec::new();
    while let Ok(wire::CREDIT) = wire::read_frame(&mut r, &mut buf) {
        let Ok(n) = wire::decode_u64(&buf) else { break };
        // Release: pairs with the Acquire loads in `wait_credit`.
        granted.fetch_add(n, Ordering::Release);
        stats.granted.fetch_add(n, Ordering::Relaxed);
        sender.unpark();
    }
    // Release: pairs with the Acquire load in `wait_credit`.
    closed.store(true, Ordering::Release);
    sender.unpark();
}

/// What the receiving end hands on.
pub(crate) enum Arrival<T> {
    /// An item and its number.
    Item(u64, T),
    /// A keyed copy's output (or only the end of an input's outputs): its
    /// number, whether it is the input's last, the item.
    Group(u64, bool, Option<T>),
    /// A route log's entry: the next item went to this copy.
    Route(u32),
    /// A barrier.
    Barrier(u64),
}

/// The receiving end.
pub(crate) struct EdgeRx {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    buf: Vec<u8>,
    last: Option<u64>,
    /// Items handed on whose credit has not gone back yet.
    owed: u64,
    window: u64,
    pub(crate) stats: Arc<EdgeStats>,
}

impl EdgeRx {
    /// Takes over a connected, authenticated stream and grants `window`.
    pub(crate) fn new(
        stream: TcpStream,
        window: u64,
        stats: Arc<EdgeStats>,
    ) -> std::io::Result<Self> {
        stream.set_nodelay(true)?;
        let mut writer = stream.try_clone()?;
        wire::write_frame(&mut writer, wire::CREDIT, &window.to_le_bytes())?;
        stats.granted.fetch_add(window, Ordering::Relaxed);
        Ok(EdgeRx {
            reader: BufReader::with_capacity(READ_BUFFER, stream),
            writer,
            buf: Vec::new(),
            last: None,
            owed: 0,
            window,
            stats,
        })
    }

    /// Reads the next frame and hands each item (or the barrier) to
    /// `f`; `Ok(false)` at the end. Items handed on are granted back
    /// once a quarter of the window is owed: a sender waiting for credit
    /// has all `window` items outstanding, so once they have arrived at
    /// least a quarter is owed and granted, and it never waits for a
    /// grant that does not come. Granting in quarters, not per frame,
    /// keeps the credit frames (and the sender's wake-ups) rare.
    pub(crate) fn next<T: DeserializeOwned>(
        &mut self,
        mut f: impl FnMut(Arrival<T>) -> Result<(), WireError>,
    ) -> Result<bool, WireError> {
        match wire::read_frame(&mut self.reader, &mut self.buf)? {
            wire::BATCH => {
                let mut n = 0u64;
                let mut err = Ok(());
                let bytes = self.buf.len() as u64;
                self.last = wire::decode_batch::<T>(&self.buf, self.last, |s, x| {
                    if err.is_ok() {
                        err = f(Arrival::Item(s, x));
                    }
                    n += 1;
                })?;
                err?;
                self.received(n, bytes)?;
                Ok(true)
            }
            wire::GROUPS => {
                let mut n = 0u64;
                let bytes = self.buf.len() as u64;
                let last = &mut self.last;
                wire::decode_records::<(u64, bool, Option<T>)>(&self.buf, |(s, end, x)| {
                    wire::in_order(last, s)?;
                    n += 1;
                    f(Arrival::Group(s, end, x))
                })?;
                self.received(n, bytes)?;
                Ok(true)
            }
            wire::ROUTE => {
                let mut n = 0u64;
                let bytes = self.buf.len() as u64;
                wire::decode_records::<u32>(&self.buf, |k| {
                    n += 1;
                    f(Arrival::Route(k))
                })?;
                self.received(n, bytes)?;
                Ok(true)
            }
            wire::BARRIER => {
                f(Arrival::Barrier(wire::decode_u64(&self.buf)?))?;
                Ok(true)
            }
            wire::END => Ok(false),
            k => Err(WireError::Malformed(format!(
                "frame kind {k} on a data edge"
            ))),
        }
    }

    /// Reads the next frame of a raw link and hands each item to `f`;
    /// `Ok(false)` at the end.
    pub(crate) fn next_raw<T: bytemuck::Pod>(
        &mut self,
        mut f: impl FnMut(T),
    ) -> Result<bool, WireError> {
        match wire::read_frame(&mut self.reader, &mut self.buf)? {
            wire::RAW => {
                let bytes = self.buf.len() as u64;
                let n = wire::decode_raw::<T>(&self.buf, |x| {
                    f(x);
                    Ok(())
                })?;
                self.received(n, bytes)?;
                Ok(true)
            }
            wire::END => Ok(false),
            k => Err(WireError::Malformed(format!(
                "frame kind {k} on a raw link"
            ))),
        }
    }

    /// Counts `n` records handed on; grants them back once a quarter of
    /// the window is owed.
    fn received(&mut self, n: u64, bytes: u64) -> Result<(), WireError> {
        self.stats.items.fetch_add(n, Ordering::Relaxed);
        self.stats.bytes.fetch_add(bytes, Ordering::Relaxed);
        self.stats.frames.fetch_add(1, Ordering::Relaxed);
        self.owed += n;
        if self.owed >= self.window / 4 {
            self.grant()?;
        }
        Ok(())
    }

    fn grant(&mut self) -> Result<(), WireError> {
        wire::write_frame(&mut self.writer, wire::CREDIT, &self.owed.to_le_bytes())?;
        self.stats.granted.fetch_add(self.owed, Ordering::Relaxed);
        self.owed = 0;
        Ok(())
    }

    /// Closes the connection (after the end: the sender is waiting for it).
    pub(crate) fn close(self) {
        let _ = self.writer.shutdown(Shutdown::Both);
    }
}
