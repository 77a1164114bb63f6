//! The ring's event and its handlers: `journal ∥ decode → apply → reply`.
//! Only writes (`POST /item`, `DELETE /item/{id}`) go on the ring; the
//! I/O threads answer reads from the view `apply` publishes.
//!
//! * `journal` appends a record for each write and, at the end of each
//!   batch, writes and fsyncs them at once (group commit). The ring makes
//!   its progress visible only after the batch, so `apply` never sees a
//!   write before it is durable.
//! * `decode` parses `POST /item` bodies, in parallel with `journal`.
//! * `apply` owns the items (`&mut`, alone in its stage, no lock), answers
//!   each write, publishes the read view at the end of each batch (before
//!   the ring shows the batch to `reply`), and now and then hands the
//!   snapshot thread a copy of the items (O(1): a persistent map) to
//!   encode, write and fsync, so the ring waits neither on the disk nor on
//!   a pass over the items; once it is durable, `journal` drops the
//!   segments the snapshot covers.
//! * `reply` hands each answer to the I/O thread that owns the connection
//!   (a bounded queue per I/O thread plus its `mio::Waker`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crossbeam_channel::{Sender, TrySendError};
use statepipe_ring::{EventHandler, EventHandlerMut};

use crate::admission::Admission;
use crate::http::{Response, Route};
use crate::journal::{Op, Writer};
use crate::metrics::Metrics;
use crate::store::{decode_item, write_snapshot, BadItem, Item, Store};
use crate::view::{Change, Publisher};

/// Where an answer goes: I/O thread, connection slot, and the connection's
/// generation (a slot reused by a newer connection never gets an old answer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Origin {
    /// The I/O thread.
    pub io: usize,
    /// The connection's slot there.
    pub slot: usize,
    /// The connection's generation.
    pub generation: u64,
}

/// One request on the ring.
#[derive(Debug, Default)]
pub struct Event {
    /// Who asked.
    pub origin: Origin,
    /// What; `None` only in slots never published.
    pub route: Option<Route>,
    /// Set by `journal` for a write: its lsn, or 0 if it was not journalled.
    /// Relaxed suffices: `apply` reads it after the ring's Acquire of
    /// `journal`'s sequence, which `journal` stores with Release after its
    /// batch.
    lsn: AtomicU64,
    /// Set by `decode` for a create.
    decoded: OnceLock<Result<Item, BadItem>>,
    /// Set by `apply`, taken by `reply`.
    response: Option<Response>,
}

impl Event {
    /// A write from `origin`.
    pub fn new(origin: Origin, route: Route) -> Self {
        Event {
            origin,
            route: Some(route),
            ..Event::default()
        }
    }
}

/// What the handlers share with each other and the I/O threads.
#[derive(Debug)]
pub struct Shared {
    /// The metrics (the server's, which it hands out).
    pub metrics: Arc<Metrics>,
    /// Lsn ranges whose batch failed to reach the disk.
    failed: Mutex<Vec<(u64, u64)>>,
    /// Whether `failed` may have an entry (so `apply` skips the lock
    /// while it has none).
    any_failed: AtomicBool,
    /// The lsn the latest snapshot covers; `journal` compacts up to it.
    /// Relaxed: `journal` only needs to see it eventually, and the snapshot
    /// file it relies on was fsynced and renamed before the store.
    snapshot_lsn: AtomicU64,
    /// The nice value of the ring's handlers (0: as the I/O threads).
    handler_nice: i32,
    /// Admission of writes by queueing delay.
    pub admission: Admission,
}

impl Shared {
    /// Counting into `metrics`; handlers at nice value `nice`.
    pub fn new(admission: Admission, nice: i32, metrics: Arc<Metrics>) -> Self {
        Shared {
            admission,
            metrics,
            failed: Mutex::new(Vec::new()),
            any_failed: AtomicBool::new(false),
            snapshot_lsn: AtomicU64::new(0),
            handler_nice: nice,
        }
    }

    /// Records that the writes at lsns `first..=last` did not reach the disk.
    fn record_failed(&self, first: u64, last: u64) {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        failed.push((first, last));
        // Release: pairs with the Acquire load in `Shared::failed`.
        self.any_failed.store(true, Ordering::Release);
    }

    /// Whether the write at `lsn` failed to reach the disk. `apply` asks
    /// in lsn order, so ranges wholly below `lsn` are never asked about
    /// again and are dropped: the list holds only failures `apply` has not
    /// reached (a ring's worth at most), however long the disk stays full.
    fn failed(&self, lsn: u64) -> bool {
        // Acquire: pairs with the Release store in `record_failed`.
        if !self.any_failed.load(Ordering::Acquire) {
            return false;
        }
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        failed.retain(|&(_, last)| last >= lsn);
        if failed.is_empty() {
            // Under the lock, as `record_failed`'s store is: a failure
            // recorded after this sets it again before `apply` can reach
            // its events (the ring orders them after `journal`'s batch).
            // Relaxed: the lock orders it with that store, and a
            // stale `true` only costs the lock.
            self.any_failed.store(false, Ordering::Relaxed);
        }
        failed.iter().any(|&(a, b)| (a..=b).contains(&lsn))
    }
}

/// Pins the calling handler thread to `cpu` and sets its nice value.
fn pin(cpu: Option<usize>, nice: i32) {
    if let Some(cpu) = cpu {
        if !statepipe_sys::pin::pin_current_thread(cpu) {
            tracing::debug!(cpu, "could not pin a ring handler");
        }
    }
    if nice != 0 {
        // A lowered thread is also a batch one: woken, it waits for the
        // I/O thread on its CPU to sleep instead of preempting it, so the
        // I/O thread finishes the events it polled and the handlers take
        // larger batches with fewer switches (POST at k = 1: about 10 %
        // faster, a third fewer context switches a request;
        // bench/results/serve-run10/sched-batch.txt).
        if !statepipe_sys::pin::set_current_thread_batch() {
            tracing::debug!("could not make a ring handler a batch thread");
        }
        if !statepipe_sys::pin::set_current_thread_nice(nice) {
            tracing::debug!(nice, "could not lower a ring handler's priority");
        }
    }
}

/// The nice value of the snapshot thread.
const SNAPSHOT_NICE: i32 = 19;

/// The `journal` handler.
pub struct Journal {
    /// `None` once the journal cannot be trusted (a failed write could not
    /// be cut back): every later write is answered 503.
    writer: Option<Writer>,
    shared: Arc<Shared>,
    batch_first: Option<u64>,
    batch_last: u64,
    batch_events: u64,
    compacted: u64,
    cpu: Option<usize>,
}

impl Journal {
    /// Appends through `writer`.
    pub fn new(writer: Writer, shared: Arc<Shared>, cpu: Option<usize>) -> Self {
        Journal {
            writer: Some(writer),
            shared,
            batch_first: None,
            batch_last: 0,
            batch_events: 0,
            compacted: 0,
            cpu,
        }
    }

    fn end_batch(&mut self) {
        self.shared
            .metrics
            .batch_size
            .observe(self.batch_events as f64);
        self.batch_events = 0;
        let Some(writer) = self.writer.as_mut() else {
            return;
        };
        if let Some(first) = self.batch_first.take() {
            let started = Instant::now();
            let result = writer.commit();
            self.shared
                .metrics
                .fsync_seconds
                .observe(started.elapsed().as_secs_f64());
            self.shared
                .metrics
                .zero_filled
                .set(i64::from(writer.zero_filled()));
            if result.is_ok() {
                // Lsns are consecutive: the batch's writes, first to last.
                let events = self.batch_last.saturating_sub(first) + 1;
                self.shared.metrics.committed(events);
            }
            if let Err(e) = result {
                tracing::error!(error = %e, "journal write failed; answering this batch's writes 503");
                let last = self.batch_last;
                self.shared.record_failed(first, last);
                if e.broken {
                    tracing::error!(
                        "the journal could not be cut back; every later write gets 503"
                    );
                    self.writer = None;
                    return;
                }
            }
        }
        let covered = self.shared.snapshot_lsn.load(Ordering::Relaxed);
        if covered > self.compacted {
            if let Some(writer) = self.writer.as_mut() {
                match writer.rotate_and_compact(covered) {
                    Ok(()) => self.compacted = covered,
                    Err(e) => {
                        tracing::warn!(error = %e, "journal compaction failed; retrying later")
                    }
                }
            }
        }
    }
}

impl EventHandler<Event> for Journal {
    fn on_event(&mut self, event: &Event, _seq: u64, end_of_batch: bool) {
        self.batch_events += 1;
        if end_of_batch {
            self.shared.metrics.stage_events[0].inc_by(self.batch_events);
        }
        let op = match &event.route {
            Some(Route::Create(body)) => Some(Op::Create(body.clone())),
            Some(Route::Delete(id)) => Some(Op::Delete(*id)),
            _ => None,
        };
        if let (Some(op), Some(writer)) = (op, self.writer.as_mut()) {
            let lsn = writer.append(&op);
            event.lsn.store(lsn, Ordering::Relaxed);
            self.batch_first.get_or_insert(lsn);
            self.batch_last = lsn;
        }
        if end_of_batch {
            self.end_batch();
        }
    }

    fn on_start(&mut self) {
        pin(self.cpu, self.shared.handler_nice);
    }

    fn on_shutdown(&mut self) {
        self.end_batch();
    }
}

/// The `decode` handler.
pub struct Decode {
    cpu: Option<usize>,
    shared: Arc<Shared>,
    batch: u64,
}

impl Decode {
    /// Pinned to `cpu`, if any.
    pub fn new(shared: Arc<Shared>, cpu: Option<usize>) -> Self {
        Decode {
            cpu,
            shared,
            batch: 0,
        }
    }
}

impl EventHandler<Event> for Decode {
    fn on_event(&mut self, event: &Event, _seq: u64, end_of_batch: bool) {
        if let Some(Route::Create(body)) = &event.route {
            let _ = event.decoded.set(decode_item(body));
        }
        self.batch += 1;
        if end_of_batch {
            self.shared.metrics.stage_events[1].inc_by(std::mem::take(&mut self.batch));
        }
    }

    fn on_start(&mut self) {
        pin(self.cpu, self.shared.handler_nice);
    }
}

/// The `apply` handler: owns the items.
pub struct Apply {
    store: Store,
    view: Publisher,
    shared: Arc<Shared>,
    snapshots: Snapshots,
    snapshot_every: u64,
    writes_since_snapshot: u64,
    /// Items in the last snapshot (or the recovered store).
    snapshot_items: u64,
    /// Events in the current batch (for the stage counter).
    batch: u64,
    cpu: Option<usize>,
}

/// The snapshot thread: encodes, writes, fsyncs and renames the copies of
/// the store `apply` hands it, then tells `journal` which lsn each covers.
struct Snapshots {
    dir: PathBuf,
    /// `None` until `on_start` starts the thread.
    queue: Option<Sender<Store>>,
    /// Set by `apply` when it queues a snapshot, cleared by the thread once
    /// it is written (or failed): at most one snapshot in flight.
    busy: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Snapshots {
    fn start(&mut self, shared: &Arc<Shared>, cpu: Option<usize>) {
        let (tx, rx) = crossbeam_channel::bounded::<Store>(1);
        let dir = self.dir.clone();
        let busy = Arc::clone(&self.busy);
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("serve-snapshot".into())
            .spawn(move || {
                // The lowest priority: a snapshot takes what the I/O
                // threads and the handlers leave.
                pin(cpu, SNAPSHOT_NICE);
                for store in rx {
                    let began = Instant::now();
                    match write_snapshot(&dir, &store) {
                        Ok(()) => {
                            // Relaxed: see `Shared::snapshot_lsn`.
                            shared.snapshot_lsn.store(store.last_lsn, Ordering::Relaxed);
                            shared
                                .metrics
                                .snapshot_seconds
                                .observe(began.elapsed().as_secs_f64());
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "snapshot failed; the journal keeps growing")
                        }
                    }
                    // The copy's nodes that `apply` has not changed since
                    // are shared with the live store: dropped here, off
                    // the ring.
                    drop(store);
                    // Release: pairs with the Acquire in `offer`, so the next
                    // snapshot starts after this one's file work.
                    busy.store(false, Ordering::Release);
                }
            });
        match spawned {
            Ok(t) => {
                self.queue = Some(tx);
                self.thread = Some(t);
            }
            Err(e) => tracing::warn!(error = %e, "no snapshot thread; the journal keeps growing"),
        }
    }

    /// Queues a snapshot of `store` unless one is still being written;
    /// whether it was queued.
    fn offer(&mut self, store: &Store) -> bool {
        let Some(queue) = &self.queue else {
            return false;
        };
        // Acquire: pairs with the Release in the snapshot thread.
        if self.busy.load(Ordering::Acquire) {
            return false;
        }
        self.busy.store(true, Ordering::Relaxed);
        queue.send(store.clone()).is_ok()
    }

    fn stop(&mut self) {
        self.queue = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Apply {
    /// Over the recovered `store`, publishing to `view`; snapshots to
    /// `dir` (see [`Apply::maybe_snapshot`] for when).
    pub fn new(
        store: Store,
        view: Publisher,
        shared: Arc<Shared>,
        dir: PathBuf,
        snapshot_every: u64,
        cpu: Option<usize>,
    ) -> Self {
        Apply {
            snapshot_items: store.items.len() as u64,
            store,
            view,
            shared,
            snapshots: Snapshots {
                dir,
                queue: None,
                busy: Arc::new(AtomicBool::new(false)),
                thread: None,
            },
            snapshot_every: snapshot_every.max(1),
            writes_since_snapshot: 0,
            batch: 0,
            cpu,
        }
    }

    fn durable(&self, lsn: u64) -> bool {
        lsn != 0 && !self.shared.failed(lsn)
    }

    fn answer(&mut self, event: &mut Event) -> Response {
        let lsn = *event.lsn.get_mut();
        match event.route.take() {
            Some(Route::Create(_)) => {
                if !self.durable(lsn) {
                    return Response::unavailable(
                        "the journal is unavailable; the item was not stored",
                    );
                }
                self.writes_since_snapshot += 1;
                match event.decoded.take() {
                    Some(Ok(item)) => {
                        let id = self.store.create(lsn, item);
                        if let Some(item) = self.store.items.get(&id) {
                            self.view.change(Change::Put(id, Arc::clone(item)));
                        }
                        Response::json(201, format!("{{\"id\":{id}}}").into_bytes())
                    }
                    Some(Err(bad)) => {
                        self.store.last_lsn = lsn;
                        match bad.field {
                            Some(field) => Response::field_error(field, &bad.message),
                            None => Response::error(400, &bad.message),
                        }
                    }
                    None => Response::error(500, "the body was not decoded"),
                }
            }
            Some(Route::Delete(id)) => {
                if !self.durable(lsn) {
                    return Response::unavailable(
                        "the journal is unavailable; nothing was deleted",
                    );
                }
                self.writes_since_snapshot += 1;
                if self.store.delete(lsn, id) {
                    self.view.change(Change::Remove(id));
                    Response::json(204, Vec::new())
                } else {
                    Response::error(404, "no such item")
                }
            }
            Some(Route::Get(_) | Route::List { .. }) => {
                Response::error(500, "reads are answered by the I/O threads")
            }
            Some(Route::Health) | Some(Route::Metrics) | None => {
                Response::error(500, "not a ring request")
            }
        }
    }

    /// Once there have been `snapshot_every` writes since the last
    /// snapshot, and at least as many as that snapshot had items, hands
    /// the snapshot thread a copy of the items; if it is still writing the
    /// previous one, tries again at the end of the next batch.
    ///
    /// The second rule (Redis's AOF rewrite at 100 % growth does the same)
    /// keeps the bytes snapshots write below the journal's, however large
    /// the store grows, instead of a whole store's pass and write every
    /// `snapshot_every` writes; a restart still replays no more records
    /// than the snapshot it loads holds items (or `snapshot_every`).
    fn maybe_snapshot(&mut self) {
        if self.writes_since_snapshot < self.snapshot_every.max(self.snapshot_items) {
            return;
        }
        if self.snapshots.offer(&self.store) {
            self.writes_since_snapshot = 0;
            self.snapshot_items = self.store.items.len() as u64;
        }
    }
}

impl EventHandlerMut<Event> for Apply {
    fn on_event(&mut self, event: &mut Event, _seq: u64, end_of_batch: bool) {
        event.response = Some(self.answer(event));
        self.batch += 1;
        if end_of_batch {
            // Before this returns, so before the ring shows the batch to
            // `reply` (its sequence store, Release, comes after): every
            // answer of the batch leaves after the view holds its write.
            self.view.publish();
            self.shared.metrics.stage_events[2].inc_by(std::mem::take(&mut self.batch));
            self.maybe_snapshot();
        }
    }

    fn on_start(&mut self) {
        pin(self.cpu, self.shared.handler_nice);
        self.snapshots.start(&self.shared, self.cpu);
    }

    fn on_shutdown(&mut self) {
        self.snapshots.stop();
    }
}

/// What `reply` sends an I/O thread: the connection and its answer.
pub type Reply = (usize, u64, Response);

/// The `reply` handler.
pub struct ReplyHandler {
    queues: Vec<Sender<Reply>>,
    wakers: Vec<Arc<mio::Waker>>,
    to_wake: Vec<bool>,
    shared: Arc<Shared>,
    /// Events in the current batch (for the stage counter).
    batch: u64,
    cpu: Option<usize>,
}

impl ReplyHandler {
    /// One queue and waker per I/O thread.
    pub fn new(
        queues: Vec<Sender<Reply>>,
        wakers: Vec<Arc<mio::Waker>>,
        shared: Arc<Shared>,
        cpu: Option<usize>,
    ) -> Self {
        let n = queues.len();
        ReplyHandler {
            queues,
            wakers,
            to_wake: vec![false; n],
            shared,
            batch: 0,
            cpu,
        }
    }
}

impl EventHandlerMut<Event> for ReplyHandler {
    fn on_event(&mut self, event: &mut Event, _seq: u64, end_of_batch: bool) {
        let response = event
            .response
            .take()
            .unwrap_or_else(|| Response::error(500, "no answer"));
        let Origin {
            io,
            slot,
            generation,
        } = event.origin;
        self.shared.metrics.ring_depth.dec();
        let mut reply = (slot, generation, response);
        // The queue holds one answer per connection the I/O thread may
        // have, and a connection has at most one request on the ring, so it
        // is full only for a moment; wake the I/O thread and retry.
        loop {
            match self.queues[io].try_send(reply) {
                Ok(()) => break,
                Err(TrySendError::Full(back)) => {
                    let _ = self.wakers[io].wake();
                    reply = back;
                    std::thread::yield_now();
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
        }
        self.to_wake[io] = true;
        self.batch += 1;
        if end_of_batch {
            self.shared.metrics.stage_events[3].inc_by(std::mem::take(&mut self.batch));
            for (io, wake) in self.to_wake.iter_mut().enumerate() {
                if std::mem::take(wake) {
                    let _ = self.wakers[io].wake();
                }
            }
        }
    }

    fn on_start(&mut self) {
        pin(self.cpu, self.shared.handler_nice);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn failures_apply_has_passed_are_forgotten() {
        let shared = Shared::new(
            Admission::new(1, Duration::from_millis(20)),
            0,
            Arc::new(Metrics::new()),
        );
        assert!(!shared.failed(1));
        // A disk full for a long time: every batch of ten fails, and apply
        // asks about each write in order.
        for batch in 0..10_000u64 {
            let first = batch * 10 + 1;
            shared.record_failed(first, first + 9);
            for lsn in first..first + 10 {
                assert!(shared.failed(lsn), "lsn {lsn}");
            }
            assert!(shared.failed.lock().unwrap().len() <= 1);
        }
        // Past the last failure, writes are durable again, and the lock is
        // skipped.
        assert!(!shared.failed(100_001));
        assert!(!shared.any_failed.load(Ordering::Relaxed));
        // A failure ahead of apply is kept until apply reaches it.
        shared.record_failed(100_010, 100_020);
        assert!(!shared.failed(100_002));
        assert!(shared.failed(100_015));
        assert!(!shared.failed(100_021));
    }
}
