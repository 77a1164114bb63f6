//! An I/O thread: one `mio::Poll` over the listener, its connections and a
//! waker; gives each connection it accepts to the I/O thread with the
//! fewest open ([`Handoff`]); parses requests, answers reads from the read
//! view, admits writes by their expected queueing delay and publishes them
//! on the ring (never waiting: a write expected to wait too long, or a
//! full ring, is a 429), and writes the answers `reply` queues for it.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use prometheus_client::metrics::gauge::Gauge;
use statepipe_ring::wait::WaitStrategy;
use statepipe_ring::{Multi, Producer, TryPublishError};

use crate::admission::{InFlight, Refusal};
use crate::business::{Event, Origin, Reply, Shared};
use crate::http::{self, Parsed, Response, Route};
use crate::metrics::Tally;
use crate::view::Reader;

const LISTENER: Token = Token(0);
/// The token of each I/O thread's waker.
pub const WAKER: Token = Token(1);
const FIRST_CONN: usize = 2;
/// Unread bytes a connection may hold while its request is on the ring.
const MAX_BUFFERED: usize = http::MAX_HEADER_BYTES + http::MAX_BODY_BYTES + 4096;
/// The most bytes of answers a connection may have waiting to be sent
/// before it answers no more of its pipelined requests (about one
/// largest answer: a page of items).
const MAX_UNSENT: usize = 1 << 20;
/// How long a connection the server closed may wait for its peer's close.
const LINGER: Duration = Duration::from_secs(2);
/// The most one `recv` reads.
const READ_CHUNK: usize = 16 * 1024;
/// How long shutdown waits for in-flight requests.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// Limits every I/O thread applies.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Open connections at most (over all I/O threads); newcomers get 503.
    pub max_connections: usize,
    /// A request's headers must arrive within this.
    pub header_timeout: Duration,
    /// A keep-alive connection with nothing to read, write or answer is
    /// closed after this long.
    pub idle_timeout: Duration,
}

/// How the I/O threads share out new connections. Every I/O thread
/// watches the one listener, and the first one awake accepts all that is
/// waiting: a client opening its connections in a burst would find most
/// of them on one thread, whose connections then wait behind one CPU
/// while the others idle. So each accepted connection goes to the I/O
/// thread with the fewest open (the one that accepted it on a tie), handed
/// over through that thread's inbox and waker when it is another.
pub struct Handoff {
    /// Open connections, per I/O thread (also `/metrics`' `connections`).
    pub counts: Vec<Gauge>,
    /// Each I/O thread's inbox of connections accepted for it.
    pub inboxes: Vec<Sender<TcpStream>>,
    /// Each I/O thread's waker.
    pub wakers: Vec<Arc<Waker>>,
    /// Held while a connection's thread is chosen and counted, so that two
    /// threads accepting at once do not both give theirs to the same
    /// thread (while none closes, the counts then differ by one at most).
    pub choosing: Mutex<()>,
}

impl Handoff {
    /// Chooses the I/O thread for a connection `me` accepted, the one with
    /// the fewest open (`me` on a tie with it), and counts it there; `None`
    /// when `max` connections are open already (those handed over and not
    /// yet taken in included).
    fn take(&self, me: usize, max: usize) -> Option<usize> {
        let _choosing = self.choosing.lock().unwrap_or_else(|p| p.into_inner());
        let open: i64 = self.counts.iter().map(Gauge::get).sum();
        if open >= i64::try_from(max).unwrap_or(i64::MAX) {
            return None;
        }
        let to = self.least_loaded(me);
        self.counts[to].inc();
        Some(to)
    }

    /// The thread with the fewest open connections; `me` on a tie with it,
    /// else the first of them.
    fn least_loaded(&self, me: usize) -> usize {
        let mut best = me;
        let mut fewest = self.counts[me].get();
        for (i, c) in self.counts.iter().enumerate() {
            if c.get() < fewest {
                (best, fewest) = (i, c.get());
            }
        }
        best
    }
}

/// What an I/O thread owns.
pub struct IoThread<W: WaitStrategy> {
    /// Its index (the `io` of the answers meant for it).
    pub index: usize,
    /// Its poll (its waker is registered with [`WAKER`]).
    pub poll: Poll,
    /// The listener, shared by every I/O thread.
    pub listener: TcpListener,
    /// Its producer on the ring.
    pub producer: Producer<Event, W, Multi>,
    /// Answers for its connections.
    pub replies: Receiver<Reply>,
    /// Its handle on the read view.
    pub view: Reader,
    /// Its writes on the ring, oldest first (for admission).
    pub in_flight: InFlight,
    /// Handlers, admission and metrics.
    pub shared: Arc<Shared>,
    /// How new connections are shared out.
    pub handoff: Arc<Handoff>,
    /// Connections another I/O thread accepted for this one.
    pub inbox: Receiver<TcpStream>,
    /// Set to stop.
    pub stop: Arc<AtomicBool>,
    /// Limits.
    pub limits: Limits,
    /// The `Date` header, refreshed once per loop.
    pub date: http::Date,
    /// Its answered requests, by route and status, and their latencies.
    pub tally: Tally,
}

struct Conn {
    stream: TcpStream,
    generation: u64,
    inbuf: Vec<u8>,
    /// The last read stopped at [`MAX_BUFFERED`]: the socket may hold more,
    /// and no new readiness event will say so.
    capped: bool,
    /// `100 Continue` went for the request at the front of `inbuf`.
    continued: bool,
    /// The server closed its side after its last answer (a refused body,
    /// `Connection: close`) and reads on, discarding, until the peer
    /// closes too or [`LINGER`] passes: closing with bytes unread would
    /// reset the connection, and the peer could lose the answer.
    lingering: Option<Instant>,
    /// The request at the front of `inbuf` has all its headers, and waits
    /// for its body.
    awaiting_body: bool,
    /// An event said the peer closed its sending half: reads go on to the
    /// end of the stream (no later event will announce the close again).
    read_closed: bool,
    out: Vec<u8>,
    /// The route label of the request on the ring, if one is, and when
    /// it was parsed.
    in_flight: Option<(&'static str, Instant)>,
    close_after: bool,
    /// Its last request was HTTP/1.0 with `Connection: keep-alive`: its
    /// answers say the connection stays open, or the client would wait
    /// for the server to close it.
    keep_alive_1_0: bool,
    peer_closed: bool,
    /// When the unanswered bytes in `inbuf` started arriving.
    since: Option<Instant>,
    /// When it last received bytes or was answered.
    active: Instant,
}

impl<W: WaitStrategy> IoThread<W> {
    /// Runs until stopped and drained.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut chunk = vec![0u8; READ_CHUNK];
        let mut conns: Vec<Option<Conn>> = Vec::new();
        let mut free: Vec<usize> = Vec::new();
        let mut generation = 0u64;
        let mut listening = true;
        let mut stopping_since: Option<Instant> = None;
        let mut last_sweep = Instant::now();
        loop {
            if let Err(e) = self
                .poll
                .poll(&mut events, Some(Duration::from_millis(100)))
            {
                if e.kind() != io::ErrorKind::Interrupted {
                    tracing::error!(error = %e, "poll failed; the I/O thread stops");
                    break;
                }
            }
            self.date.refresh();
            // Relaxed: a flag polled every loop; the waker makes it prompt.
            if self.stop.load(Ordering::Relaxed) && stopping_since.is_none() {
                stopping_since = Some(Instant::now());
                if listening {
                    let _ = self.poll.registry().deregister(&mut self.listener);
                    listening = false;
                }
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER if listening => self.accept(&mut conns, &mut free, &mut generation),
                    LISTENER | WAKER => {}
                    Token(t) => {
                        let slot = t - FIRST_CONN;
                        if let Some(conn) = conns.get_mut(slot).and_then(Option::as_mut) {
                            conn.read_closed |= event.is_read_closed();
                            if event.is_readable() || event.is_read_closed() {
                                fill(conn, &mut chunk);
                            }
                            self.process(slot, conn, &mut chunk);
                        }
                        self.maybe_close(&mut conns, &mut free, slot);
                    }
                }
            }
            while let Ok(stream) = self.inbox.try_recv() {
                self.adopt(stream, &mut conns, &mut free, &mut generation);
            }
            while let Ok((slot, generation, response)) = self.replies.try_recv() {
                self.in_flight.answered(&self.shared.admission);
                let Some(conn) = conns.get_mut(slot).and_then(Option::as_mut) else {
                    continue;
                };
                if conn.generation != generation {
                    continue;
                }
                let (label, parsed) = conn.in_flight.take().unwrap_or(("other", conn.active));
                self.respond(conn, label, response, parsed);
                self.process(slot, conn, &mut chunk);
                self.maybe_close(&mut conns, &mut free, slot);
            }
            let now = Instant::now();
            if now.duration_since(last_sweep) >= Duration::from_millis(100)
                || stopping_since.is_some()
            {
                last_sweep = now;
                for slot in 0..conns.len() {
                    let Some(conn) = conns[slot].as_mut() else {
                        continue;
                    };
                    // Headers must be whole within the limit; a body, once
                    // they are, may take as long as its bytes keep coming
                    // (a slow uploader), but not stall for the limit.
                    let limit = self.limits.header_timeout;
                    let late = conn.since.is_some_and(|s| now.duration_since(s) > limit)
                        && (!conn.awaiting_body || now.duration_since(conn.active) > limit);
                    let idle = conn.in_flight.is_none() && conn.out.is_empty();
                    let idle_too_long = idle
                        && conn.inbuf.is_empty()
                        && now.duration_since(conn.active) > self.limits.idle_timeout;
                    if (late && conn.in_flight.is_none())
                        || idle_too_long
                        || (stopping_since.is_some() && idle)
                    {
                        conn.close_after = true;
                        conn.out.clear();
                        conn.peer_closed = true;
                    }
                    self.maybe_close(&mut conns, &mut free, slot);
                }
            }
            if let Some(since) = stopping_since {
                let busy = conns
                    .iter()
                    .flatten()
                    .filter(|c| c.lingering.is_none())
                    .count();
                if busy == 0 || since.elapsed() > DRAIN_LIMIT {
                    break;
                }
            }
        }
        // Dropping `self.producer` here is this thread's part in closing the
        // ring: once every I/O thread's is dropped, the ring drains and stops.
    }

    fn accept(
        &mut self,
        conns: &mut Vec<Option<Conn>>,
        free: &mut Vec<usize>,
        generation: &mut u64,
    ) {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    return;
                }
            };
            let Some(to) = self.handoff.take(self.index, self.limits.max_connections) else {
                let mut out = Vec::new();
                let mut r = Response::unavailable("too many connections");
                r.close = true;
                // `date` was refreshed at the top of this loop iteration.
                r.write_to(&mut out, self.date.as_str());
                let _ = stream.write(&out);
                self.tally.answered("other", 503);
                self.shared.metrics.refused(Refusal::Connections);
                continue;
            };
            let _ = stream.set_nodelay(true);
            if to != self.index {
                match self.handoff.inboxes[to].try_send(stream) {
                    Ok(()) => {
                        if let Err(e) = self.handoff.wakers[to].wake() {
                            tracing::warn!(error = %e, io = to, "waking an I/O thread failed");
                        }
                        continue;
                    }
                    // Its thread has stopped (or its inbox is full, which
                    // the connection cap rules out): this one keeps it.
                    Err(e) => {
                        self.handoff.counts[to].dec();
                        self.handoff.counts[self.index].inc();
                        stream = e.into_inner();
                    }
                }
            }
            self.adopt(stream, conns, free, generation);
        }
    }

    /// Takes `stream` (accepted here or handed over, and counted as this
    /// thread's) into this thread's poll.
    fn adopt(
        &mut self,
        mut stream: TcpStream,
        conns: &mut Vec<Option<Conn>>,
        free: &mut Vec<usize>,
        generation: &mut u64,
    ) {
        let slot = free.pop().unwrap_or_else(|| {
            conns.push(None);
            conns.len() - 1
        });
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(slot + FIRST_CONN),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            tracing::warn!(error = %e, "register failed");
            free.push(slot);
            self.handoff.counts[self.index].dec();
            return;
        }
        *generation += 1;
        conns[slot] = Some(Conn {
            stream,
            generation: *generation,
            inbuf: Vec::new(),
            capped: false,
            continued: false,
            lingering: None,
            awaiting_body: false,
            read_closed: false,
            out: Vec::new(),
            in_flight: None,
            close_after: false,
            keep_alive_1_0: false,
            peer_closed: false,
            since: None,
            active: Instant::now(),
        });
        // Bytes that came with the connection are reported by the
        // registration: epoll queues a socket that is ready when added.
    }

    /// Answers or publishes whatever whole requests `conn` has, one at a
    /// time (a connection has at most one request on the ring), then
    /// writes; while the answers waiting to be sent are fewer than
    /// [`MAX_UNSENT`] bytes, and reading on where the last read stopped
    /// at [`MAX_BUFFERED`] (the socket raises no new event for bytes it
    /// already held).
    fn process(&mut self, slot: usize, conn: &mut Conn, chunk: &mut [u8]) {
        if conn.lingering.is_some() {
            // What comes now is discarded, however much.
            loop {
                conn.inbuf.clear();
                fill(conn, chunk);
                if !conn.capped {
                    break;
                }
            }
            conn.inbuf.clear();
            return;
        }
        loop {
            let before = (conn.inbuf.len(), conn.out.len());
            self.answer(slot, conn);
            flush(conn);
            let idle = conn.in_flight.is_none() && !conn.close_after;
            if idle && conn.capped && conn.inbuf.len() < MAX_BUFFERED {
                fill(conn, chunk);
            }
            // Again only if something moved: a request still incomplete,
            // or answers the socket does not take yet, wait for an event.
            if (conn.inbuf.len(), conn.out.len()) == before
                || !idle
                || conn.inbuf.is_empty()
                || conn.out.len() >= MAX_UNSENT
            {
                break;
            }
        }
    }

    /// Answers or publishes the whole requests at the front of
    /// `conn.inbuf`, until one goes on the ring, the connection is to
    /// close, or [`MAX_UNSENT`] bytes of answers wait to be sent (a
    /// client that pipelines reads and never reads the answers holds no
    /// more than that); removes them from `inbuf` at once, at the end.
    fn answer(&mut self, slot: usize, conn: &mut Conn) {
        let mut used = 0;
        conn.awaiting_body = false;
        while conn.in_flight.is_none()
            && !conn.close_after
            && used < conn.inbuf.len()
            && conn.out.len() < MAX_UNSENT
        {
            conn.since.get_or_insert_with(Instant::now);
            match http::parse(&conn.inbuf[used..]) {
                Parsed::Incomplete => break,
                Parsed::AwaitingBody { expects_continue } => {
                    conn.awaiting_body = true;
                    // Once per request: a client that asked waits for it
                    // before it sends the body.
                    if expects_continue && !conn.continued {
                        conn.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                        conn.continued = true;
                    }
                    break;
                }
                Parsed::Reject(mut response) => {
                    response.close = true;
                    used = conn.inbuf.len();
                    self.respond(conn, "other", response, Instant::now());
                }
                Parsed::Answer { consumed, response } => {
                    used += consumed;
                    self.respond(conn, "other", response, Instant::now());
                }
                Parsed::Request {
                    consumed,
                    route,
                    close,
                    keep_alive,
                    head,
                } => {
                    used += consumed;
                    conn.close_after |= close;
                    conn.keep_alive_1_0 = keep_alive;
                    let label = route.label();
                    // The request's clock (its latency), and admission's.
                    let parsed = Instant::now();
                    // Reads are answered here; a `HEAD` gets the same
                    // headers without the body.
                    let read = match route {
                        Route::Health => Some(Response::json(200, br#"{"status":"ok"}"#.to_vec())),
                        Route::Metrics => Some(Response {
                            content_type:
                                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                            ..Response::json(200, self.shared.metrics.encode().into_bytes())
                        }),
                        Route::Get(id) => Some(self.view.get(id)),
                        Route::List { after, limit } => Some(self.view.list(after, limit)),
                        route => {
                            if !self.shared.admission.admits(parsed) {
                                self.shared.metrics.refused(Refusal::QueueDelay);
                                self.respond(conn, label, Response::busy(), parsed);
                            } else {
                                self.publish(slot, conn, route, parsed);
                            }
                            None
                        }
                    };
                    if let Some(read) = read {
                        self.respond(conn, label, Response { head, ..read }, parsed);
                    }
                }
            }
            conn.continued = false;
            if used == conn.inbuf.len() {
                conn.since = None;
            } else if conn.in_flight.is_none() {
                // Pipelined bytes: their own clock starts now.
                conn.since = Some(Instant::now());
            }
        }
        conn.inbuf.drain(..used);
    }

    /// Puts an admitted write (parsed at `now`) on the ring, or answers it
    /// at once if the ring is full or stopping.
    fn publish(&mut self, slot: usize, conn: &mut Conn, route: Route, now: Instant) {
        let label = route.label();
        let origin = Origin {
            io: self.index,
            slot,
            generation: conn.generation,
        };
        match self.producer.try_publish(Event::new(origin, route)) {
            Ok(_) => {
                self.shared.metrics.ring_depth.inc();
                self.shared.metrics.published.inc();
                self.in_flight.published(&self.shared.admission, now);
                conn.in_flight = Some((label, now));
            }
            Err(TryPublishError::Full(_)) => {
                self.shared.metrics.refused(Refusal::RingFull);
                self.respond(conn, label, Response::busy(), now);
            }
            Err(TryPublishError::Halted(_)) => {
                let mut r = Response::unavailable("the service is stopping");
                r.close = true;
                self.respond(conn, label, r, now);
            }
        }
    }

    /// Queues `response` on `conn` for the request parsed at `parsed`,
    /// counting it and its latency. Every caller goes on to
    /// [`Self::process`], which sends what is queued once it has answered
    /// every request it can: the answers to pipelined requests leave in
    /// one `send`.
    fn respond(
        &self,
        conn: &mut Conn,
        label: &'static str,
        mut response: Response,
        parsed: Instant,
    ) {
        // The one clock read an answer costs (it was here before the
        // latency was measured: `active`).
        let now = Instant::now();
        self.tally.answered(label, response.status);
        self.tally.took(now.saturating_duration_since(parsed));
        if conn.close_after {
            response.close = true;
        }
        response.keep_alive |= conn.keep_alive_1_0;
        conn.close_after |= response.close;
        conn.active = now;
        response.write_to(&mut conn.out, self.date.as_str());
    }

    fn maybe_close(&mut self, conns: &mut [Option<Conn>], free: &mut Vec<usize>, slot: usize) {
        let Some(conn) = conns[slot].as_mut() else {
            return;
        };
        let done_writing = conn.out.is_empty();
        let nothing_pending = conn.in_flight.is_none();
        let close = nothing_pending
            && ((conn.close_after && done_writing)
                || (conn.peer_closed && (done_writing || conn.close_after)));
        if close && !conn.peer_closed && conn.lingering.is_none() {
            // Our answers are out: say so, and wait for the peer's close.
            let _ = conn.stream.shutdown(std::net::Shutdown::Write);
            conn.lingering = Some(Instant::now());
            conn.inbuf.clear();
            return;
        }
        let lingered = conn.lingering.is_some_and(|t| t.elapsed() > LINGER);
        if close && (conn.peer_closed || conn.lingering.is_none() || lingered) {
            let mut conn = conns[slot].take().expect("checked");
            let _ = self.poll.registry().deregister(&mut conn.stream);
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
            free.push(slot);
            self.handoff.counts[self.index].dec();
        }
    }
}

/// Reads what the socket has, up to [`MAX_BUFFERED`] bytes held, through
/// `chunk` (the thread's, reused).
///
/// A read that returns less than it was given has emptied the socket's
/// queue, and bytes that come later raise a new edge-triggered event, so
/// the loop stops there instead of reading again for a `WouldBlock`: one
/// `recv` a request, not two. Once the peer has closed its sending half,
/// it reads on to the end of the stream, so that the close is seen.
fn fill(conn: &mut Conn, chunk: &mut [u8]) {
    conn.capped = false;
    while !conn.peer_closed {
        if conn.inbuf.len() >= MAX_BUFFERED {
            conn.capped = true;
            break;
        }
        match conn.stream.read(chunk) {
            Ok(0) => conn.peer_closed = true,
            Ok(n) => {
                conn.inbuf.extend_from_slice(&chunk[..n]);
                conn.active = Instant::now();
                if n < chunk.len() && !conn.read_closed {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => conn.peer_closed = true,
        }
    }
}

/// Writes what the socket takes.
fn flush(conn: &mut Conn) {
    while !conn.out.is_empty() {
        match conn.stream.write(&conn.out) {
            Ok(0) => {
                conn.peer_closed = true;
                conn.out.clear();
            }
            Ok(n) => {
                conn.out.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                conn.peer_closed = true;
                conn.out.clear();
            }
        }
    }
}
