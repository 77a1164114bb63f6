//! The event-loop master: one thread, one `mio::Poll` over every worker
//! socket, a preallocated read buffer per connection that reassembles
//! partial frames, and a write buffer per connection for what the kernel
//! did not take at once.
//!
//! The loop owns every connection (`&mut self`); the [`Scheduler`] decides,
//! this file only moves bytes.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::driver::Driver;
use super::sched::{Io, Scheduler, WorkerId, BULK, CHECK_EVERY};
use crate::protocol::{self, HEADER_LEN};

/// Initial read buffer per connection; grows as a longer frame arrives.
const READ_BUF: usize = 64 << 10;
/// A read buffer grown past this by a large frame shrinks back once the
/// frame is handled.
const SHRINK_OVER: usize = 64 << 20;

struct Conn {
    stream: TcpStream,
    /// When bytes last moved either way, and last came from the worker
    /// (for the hung-worker deadlines).
    io_at: Instant,
    read_at: Instant,
    /// When bytes of a large frame last moved, either way (`Io::bulk`).
    bulk_at: Option<Instant>,
    rbuf: Vec<u8>,
    rlen: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    want_write: bool,
}

/// The single-threaded master driver.
pub(super) struct EventLoop {
    poll: Poll,
    events: Events,
    conns: Vec<Option<Conn>>,
    ready: Vec<(WorkerId, bool, bool)>,
    dirty: Vec<WorkerId>,
    max_frame: u32,
    grace: Duration,
    busy: Duration,
}

impl EventLoop {
    /// Takes over authenticated, blocking connections.
    ///
    /// # Errors
    /// If a socket cannot be made non-blocking or registered.
    pub(super) fn new(
        streams: Vec<std::net::TcpStream>,
        max_frame: u32,
        grace: Duration,
    ) -> io::Result<Self> {
        let mut el = EventLoop {
            poll: Poll::new()?,
            events: Events::with_capacity(1024),
            ready: Vec::with_capacity(1024),
            dirty: Vec::new(),
            conns: Vec::with_capacity(streams.len()),
            max_frame,
            grace,
            busy: Duration::ZERO,
        };
        el.register(streams)?;
        Ok(el)
    }

    /// Registers connections under the next worker numbers.
    fn register(&mut self, streams: Vec<std::net::TcpStream>) -> io::Result<()> {
        for s in streams {
            let w = self.conns.len();
            s.set_nonblocking(true)?;
            let mut stream = TcpStream::from_std(s);
            self.poll
                .registry()
                .register(&mut stream, Token(w), Interest::READABLE)?;
            self.conns.push(Some(Conn {
                stream,
                io_at: Instant::now(),
                read_at: Instant::now(),
                bulk_at: None,
                rbuf: vec![0; READ_BUF],
                rlen: 0,
                wbuf: Vec::with_capacity(READ_BUF),
                wpos: 0,
                want_write: false,
            }));
        }
        Ok(())
    }

    fn drop_conn(&mut self, w: WorkerId, sched: &mut Scheduler, reason: &str) {
        if let Some(mut c) = self.conns[w].take() {
            let _ = self.poll.registry().deregister(&mut c.stream);
        }
        sched.on_disconnect(w, reason);
    }

    /// Reads what `w` has sent and hands every complete frame to `sched`.
    fn read(&mut self, w: WorkerId, sched: &mut Scheduler) {
        loop {
            let Some(c) = self.conns[w].as_mut() else {
                return;
            };
            if c.rlen == c.rbuf.len() {
                // A frame longer than the buffer: grow towards holding it
                // whole, doubling as its bytes arrive (not to the length its
                // header claims at once).
                let need = match protocol::parse_header(&c.rbuf[..c.rlen], self.max_frame) {
                    Ok(Some(h)) => h.frame_len(),
                    _ => c.rbuf.len() * 2,
                };
                let cap = self.max_frame as usize + HEADER_LEN;
                c.rbuf
                    .resize((c.rbuf.len() * 2).min(need.max(c.rlen + 1)).min(cap), 0);
            }
            let res = match c.stream.read(&mut c.rbuf[c.rlen..]) {
                Ok(0) => Err("connection closed by the worker".to_string()),
                Ok(n) => {
                    c.rlen += n;
                    c.io_at = Instant::now();
                    c.read_at = c.io_at;
                    // Part of a large frame: the one these bytes continue,
                    // whole now or not.
                    if n >= BULK || Self::large_at(&c.rbuf[..c.rlen], self.max_frame) {
                        c.bulk_at = Some(c.io_at);
                    }
                    Self::dispatch(c, w, sched, self.max_frame)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
                Err(e) => Err(format!("read error: {e}")),
            };
            if let Err(reason) = res {
                self.drop_conn(w, sched, &reason);
                return;
            }
        }
    }

    /// Whether the frame that starts `buf` is at least [`BULK`] long.
    fn large_at(buf: &[u8], max: u32) -> bool {
        matches!(protocol::parse_header(buf, max), Ok(Some(h)) if h.frame_len() >= BULK)
    }

    fn dispatch(c: &mut Conn, w: WorkerId, sched: &mut Scheduler, max: u32) -> Result<(), String> {
        let mut pos = 0;
        while let Some((kind, payload, used)) = protocol::decode(&c.rbuf[pos..c.rlen], max)
            .map_err(|e| format!("malformed frame: {e}"))?
        {
            sched.on_frame(w, kind, payload)?;
            pos += used;
        }
        c.rbuf.copy_within(pos..c.rlen, 0);
        c.rlen -= pos;
        if c.rbuf.len() > SHRINK_OVER && c.rlen <= READ_BUF {
            // Left large by a large frame (a large state): given back.
            c.rbuf.truncate(READ_BUF);
            c.rbuf.shrink_to_fit();
        }
        Ok(())
    }

    /// Moves the scheduler's frames into the write buffers and writes them.
    fn flush_out(&mut self, sched: &mut Scheduler) {
        for (w, f) in sched.out.drain(..) {
            if let Some(c) = self.conns[w].as_mut() {
                if c.wbuf.is_empty() {
                    self.dirty.push(w);
                }
                c.wbuf.extend_from_slice(&f);
            }
        }
        let dirty = std::mem::take(&mut self.dirty);
        for &w in &dirty {
            self.write(w, sched);
        }
        self.dirty = dirty;
        self.dirty.clear();
    }

    fn write(&mut self, w: WorkerId, sched: &mut Scheduler) {
        let Some(c) = self.conns[w].as_mut() else {
            return;
        };
        while c.wpos < c.wbuf.len() {
            let left = c.wbuf.len() - c.wpos;
            match c.stream.write(&c.wbuf[c.wpos..]) {
                Ok(n) => {
                    c.wpos += n;
                    c.io_at = Instant::now();
                    if left >= BULK {
                        c.bulk_at = Some(c.io_at);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !c.want_write {
                        c.want_write = true;
                        let i = Interest::READABLE | Interest::WRITABLE;
                        let _ = self.poll.registry().reregister(&mut c.stream, Token(w), i);
                    }
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let reason = format!("write error: {e}");
                    self.drop_conn(w, sched, &reason);
                    return;
                }
            }
        }
        c.wbuf.clear();
        c.wpos = 0;
        if c.want_write {
            c.want_write = false;
            let _ = self
                .poll
                .registry()
                .reregister(&mut c.stream, Token(w), Interest::READABLE);
        }
    }
}

impl EventLoop {
    fn overdue(
        &self,
        sched: &mut Scheduler,
        now: Instant,
    ) -> (Vec<(WorkerId, String)>, Option<Instant>) {
        sched.overdue(now, &|w| {
            self.conns[w].as_ref().map_or(Io::default(), |c| Io {
                any: Some(c.io_at),
                read: Some(c.read_at),
                bulk: c.bulk_at,
            })
        })
    }
}

impl Driver for EventLoop {
    fn add(&mut self, streams: Vec<std::net::TcpStream>) -> io::Result<()> {
        self.register(streams)
    }

    fn run(&mut self, sched: &mut Scheduler) {
        let start = Instant::now();
        let mut waited = Duration::ZERO;
        let mut next_check = start + CHECK_EVERY;
        self.flush_out(sched);
        while !sched.is_quiet() && !sched.stopped() {
            let now = Instant::now();
            if now >= next_check {
                let (late, next) = self.overdue(sched, now);
                next_check = next.map_or(now + CHECK_EVERY, |t| t.min(now + CHECK_EVERY));
                if !late.is_empty() {
                    // Frames may have waited in the kernel while this loop
                    // was busy: read them before judging anyone silent.
                    for &(w, _) in &late {
                        self.read(w, sched);
                    }
                    let (late, _) = self.overdue(sched, Instant::now());
                    for (w, reason) in late {
                        self.drop_conn(w, sched, &reason);
                    }
                    self.flush_out(sched);
                    continue;
                }
                // A straggler's work may have been started elsewhere.
                self.flush_out(sched);
            }
            let mut timeout = next_check.saturating_duration_since(now);
            if let Some(t) = sched.failed_at() {
                match (t + self.grace).checked_duration_since(now) {
                    Some(d) => timeout = timeout.min(d),
                    None => {
                        sched.abandon();
                        break;
                    }
                }
            }
            let t0 = Instant::now();
            if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!("poll failed: {e}");
                    for w in 0..self.conns.len() {
                        self.drop_conn(w, sched, "poll failed");
                    }
                }
            }
            waited += t0.elapsed();
            self.ready.clear();
            for ev in self.events.iter() {
                let r = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                self.ready.push((ev.token().0, r, ev.is_writable()));
            }
            for i in 0..self.ready.len() {
                let (w, r, wr) = self.ready[i];
                if wr {
                    self.write(w, sched);
                }
                if r {
                    self.read(w, sched);
                }
            }
            self.flush_out(sched);
        }
        self.busy += start.elapsed().saturating_sub(waited);
    }

    fn busy(&self) -> Option<Duration> {
        Some(self.busy)
    }

    fn close(&mut self, sched: &mut Scheduler) {
        sched.shutdown_frames();
        self.flush_out(sched);
        self.conns.clear();
    }
}
