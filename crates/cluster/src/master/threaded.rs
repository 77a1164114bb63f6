//! The baseline master, the first design of "Speeding up a distributed
//! computation in Haskell" (FP Complete, 2017,
//! <https://www.fpcomplete.com/blog/2017/01/speeding-up-distributed-computation>):
//! a reader thread per worker,
//! each taking a shared lock around the [`Scheduler`] for every response.
//! A writer thread per worker sends what the scheduler decided, in the
//! order it decided it (frames are queued under the lock), so no thread
//! ever blocks on a socket while holding the lock.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::driver::Driver;
use super::sched::{Io, SchedConfig, Scheduler, WorkerId, BULK, CHECK_EVERY};
use crate::protocol::Kind;
use crate::wire;

enum Event {
    Frame(WorkerId, Kind, Vec<u8>),
    Closed(WorkerId, String),
}

struct Inner {
    /// The scheduler while an operation runs; frames arriving between
    /// operations wait in `backlog`.
    sched: Option<Scheduler>,
    backlog: Vec<Event>,
    writers: Vec<Option<mpsc::Sender<Vec<u8>>>>,
    streams: Vec<TcpStream>,
}

struct Shared {
    inner: Mutex<Inner>,
    cv: Condvar,
    /// Per worker, when bytes last moved on its socket, and when they last
    /// came from the worker, in nanoseconds since `base` (for the
    /// hung-worker deadlines).
    io: Vec<AtomicU64>,
    read: Vec<AtomicU64>,
    /// When bytes of a large frame last moved, either way (`Io::bulk`);
    /// 0: never.
    bulk: Vec<AtomicU64>,
    base: Instant,
}

impl Shared {
    /// `len`: the bytes the transfer was asked to move (at least
    /// [`BULK`] only within a large frame: a frame is read and written
    /// whole, its header apart).
    fn touch(&self, w: WorkerId, read: bool, len: usize) {
        // At least 1: 0 is never.
        let t = (self.base.elapsed().as_nanos() as u64).max(1);
        self.io[w].store(t, Ordering::Relaxed);
        if read {
            self.read[w].store(t, Ordering::Relaxed);
        }
        if len >= BULK {
            self.bulk[w].store(t, Ordering::Relaxed);
        }
    }

    fn last_io(&self, w: WorkerId) -> Io {
        let at = |v: &[AtomicU64]| {
            let ns = v.get(w)?.load(Ordering::Relaxed);
            Some(self.base + Duration::from_nanos(ns))
        };
        Io {
            any: at(&self.io),
            read: at(&self.read),
            bulk: at(&self.bulk).filter(|&t| t > self.base),
        }
    }
}

/// A socket half that reports every transfer to `Shared::touch`.
struct Tracked<S> {
    inner: S,
    shared: Arc<Shared>,
    w: WorkerId,
}

impl<S: std::io::Read> std::io::Read for Tracked<S> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n > 0 {
            self.shared.touch(self.w, true, buf.len());
        }
        Ok(n)
    }
}

impl<S: Write> Write for Tracked<S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        if n > 0 {
            self.shared.touch(self.w, false, buf.len());
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The thread-per-worker master driver.
pub(super) struct Threaded {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    grace: Duration,
}

fn lock(s: &Shared) -> MutexGuard<'_, Inner> {
    s.inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl Inner {
    fn handle(&mut self, ev: Event) {
        let Some(s) = self.sched.as_mut() else {
            // Between operations the silence clock stands still (it
            // restarts with the next operation), but a worker's first
            // heartbeat says that it heartbeats at all: keep one per worker.
            if let Event::Frame(w, Kind::Heartbeat, _) = ev {
                let kept = self
                    .backlog
                    .iter()
                    .any(|e| matches!(e, Event::Frame(v, Kind::Heartbeat, _) if *v == w));
                if kept {
                    return;
                }
            }
            self.backlog.push(ev);
            return;
        };
        let closed = match ev {
            Event::Frame(w, kind, p) => s.on_frame(w, kind, &p).err().map(|r| (w, r)),
            Event::Closed(w, r) => Some((w, r)),
        };
        if let Some((w, reason)) = closed {
            self.close_worker(w, &reason);
        }
        self.dispatch();
    }

    /// Drops `w`: its states are lost, its threads end.
    fn close_worker(&mut self, w: WorkerId, reason: &str) {
        if let Some(s) = self.sched.as_mut() {
            s.on_disconnect(w, reason);
        }
        self.writers[w] = None;
        let _ = self.streams[w].shutdown(Shutdown::Both);
    }

    fn dispatch(&mut self) {
        if let Some(s) = self.sched.as_mut() {
            for (w, f) in s.out.drain(..) {
                if let Some(tx) = &self.writers[w] {
                    let _ = tx.send(f);
                }
            }
        }
    }
}

impl Threaded {
    /// Starts two threads per authenticated connection.
    ///
    /// # Errors
    /// If a socket cannot be cloned.
    pub(super) fn new(
        streams: Vec<TcpStream>,
        max_frame: u32,
        grace: Duration,
    ) -> std::io::Result<Self> {
        let n = streams.len();
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                sched: None,
                backlog: Vec::new(),
                writers: Vec::with_capacity(n),
                streams: Vec::with_capacity(n),
            }),
            cv: Condvar::new(),
            io: (0..n).map(|_| AtomicU64::new(0)).collect(),
            read: (0..n).map(|_| AtomicU64::new(0)).collect(),
            bulk: (0..n).map(|_| AtomicU64::new(0)).collect(),
            base: Instant::now(),
        });
        let mut threads = Vec::with_capacity(2 * n);
        let mut g = lock(&shared);
        for (w, s) in streams.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel::<Vec<u8>>();
            let mut ws = Tracked {
                inner: s.try_clone()?,
                shared: shared.clone(),
                w,
            };
            g.streams.push(s.try_clone()?);
            g.writers.push(Some(tx));
            threads.push(std::thread::spawn(move || {
                for f in rx {
                    if ws.write_all(&f).is_err() {
                        break;
                    }
                }
            }));
            let sh = shared.clone();
            let mut rs = Tracked {
                inner: s,
                shared: shared.clone(),
                w,
            };
            threads.push(std::thread::spawn(move || {
                let mut buf = Vec::new();
                loop {
                    let ev = match wire::read_frame(&mut rs, &mut buf, max_frame) {
                        Ok(Some(kind)) => Event::Frame(w, kind, std::mem::take(&mut buf)),
                        Ok(None) => Event::Closed(w, "connection closed by the worker".into()),
                        Err(e) => Event::Closed(w, format!("read error: {e}")),
                    };
                    let last = matches!(ev, Event::Closed(..));
                    lock(&sh).handle(ev);
                    sh.cv.notify_all();
                    if last {
                        return;
                    }
                }
            }));
        }
        drop(g);
        Ok(Threaded {
            shared,
            threads,
            grace,
        })
    }
}

impl Driver for Threaded {
    fn add(&mut self, _streams: Vec<TcpStream>) -> std::io::Result<()> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "the threaded master takes no workers mid-run (use the event-loop master)",
        ))
    }

    fn run(&mut self, sched: &mut Scheduler) {
        let placeholder = Scheduler::new(&[], 0, SchedConfig::default());
        let mut g = lock(&self.shared);
        g.sched = Some(std::mem::replace(sched, placeholder));
        for ev in std::mem::take(&mut g.backlog) {
            g.handle(ev);
        }
        g.dispatch();
        let mut next_check = Instant::now() + CHECK_EVERY;
        loop {
            let s = g.sched.as_mut().expect("the scheduler is ours during run");
            if s.is_quiet() || s.stopped() {
                break;
            }
            let now = Instant::now();
            if now >= next_check {
                let sh = &self.shared;
                let (late, next) = s.overdue(now, &|w| sh.last_io(w));
                next_check = next.map_or(now + CHECK_EVERY, |t| t.min(now + CHECK_EVERY));
                if !late.is_empty() {
                    for (w, reason) in late {
                        g.close_worker(w, &reason);
                    }
                    g.dispatch();
                    continue;
                }
                // A straggler's work may have been started elsewhere.
                g.dispatch();
                continue;
            }
            let mut wait = next_check.saturating_duration_since(now);
            if let Some(t) = s.failed_at() {
                match (t + self.grace).checked_duration_since(now) {
                    Some(d) => wait = wait.min(d),
                    None => {
                        s.abandon();
                        break;
                    }
                }
            }
            g = self
                .shared
                .cv
                .wait_timeout(g, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        *sched = g.sched.take().expect("the scheduler is ours during run");
    }

    fn busy(&self) -> Option<Duration> {
        None
    }

    fn close(&mut self, sched: &mut Scheduler) {
        sched.shutdown_frames();
        let mut g = lock(&self.shared);
        for (w, f) in sched.out.drain(..) {
            if let Some(tx) = &g.writers[w] {
                let _ = tx.send(f);
            }
        }
        g.writers.clear();
        for s in &g.streams {
            let _ = s.shutdown(Shutdown::Read);
        }
        drop(g);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
