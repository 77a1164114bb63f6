//! The coordinator's own edges: the input, fed from the caller's
//! iterator with the checkpoints' barriers, and the output, which merges
//! the last keyed stage's copies if there is one and delivers each output
//! to the sink once.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::edge::{Arrival, EdgeTx};
use super::part::Wire;
use super::routes::Routes;
use super::split::In;
use super::wire::{WireError, CONNECT_TIMEOUT};

/// The sink's side of exactly-once: outputs replayed after a restore
/// were delivered already, and are recognised by their number and their
/// place among the outputs of the same input.
pub(crate) struct Dedup<O> {
    pub(crate) delivered: Option<(u64, u64)>,
    pub(crate) count: u64,
    pub(crate) sink: Box<dyn FnMut(u64, O) + Send>,
}

pub(crate) type Positions = Arc<Mutex<HashMap<u64, (u64, Instant)>>>;

/// The caller's inputs from a position on.
pub(crate) type Inputs<I> = Arc<dyn Fn(u64) -> Box<dyn Iterator<Item = I>> + Send + Sync>;

/// The periodic barriers that may be on their way to the sink at once: a
/// due one waits while this many have not reached it.
const MAX_UNSEEN: u64 = 2;

/// Sends the inputs from `position`, a barrier every `every` (or later,
/// while [`MAX_UNSEEN`] have not reached the output; or sooner, once
/// `now` is set). With
/// barriers, the end goes only once a barrier sent after the last input
/// reached the output (`seen`): the parts still draining go on taking
/// checkpoints until then.
#[allow(clippy::too_many_arguments)]
pub(crate) fn feed<I: Wire>(
    mut tx: EdgeTx,
    inputs: Inputs<I>,
    position: u64,
    mut next_id: u64,
    every: Option<Duration>,
    (positions, issued, now): (&Positions, &AtomicU64, &AtomicBool),
    stop: &AtomicBool,
    seen: &AtomicU64,
) -> Result<(), String> {
    // The inputs come through a bounded channel from a thread of their
    // own, so that when they are slow to come the batch goes at once. It
    // is not waited for: a source with nothing to give (a live one, idle)
    // would hold up the stop of the attempt, and with it the restore,
    // until its next input; it ends at its next input, or its end.
    let (items, from) = crossbeam_channel::bounded::<I>(4096);
    std::thread::Builder::new()
        .name("coordinator-input".into())
        .spawn(move || {
            for x in inputs(position) {
                if items.send(x).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| e.to_string())?;
    let first = next_id.max(1);
    // Barriers sent before `next` that the output has not passed yet.
    // Relaxed: only the number matters; the output's edge is what
    // carries the items.
    let unseen = |next: u64| {
        (next - first).saturating_sub(seen.load(Ordering::Relaxed).saturating_sub(first - 1))
    };
    let mut seq = position;
    let mut due = every.map(|e| Instant::now() + e);
    let mut n = 0u32;
    loop {
        let mut waited = false;
        let x = match from.try_recv() {
            Ok(x) => Some(x),
            Err(crossbeam_channel::TryRecvError::Empty) => {
                tx.flush().map_err(|e| e.to_string())?;
                waited = true;
                match from.recv_timeout(Duration::from_millis(50)) {
                    Ok(x) => Some(x),
                    // An idle source: `stop` and the barriers are seen
                    // all the same.
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                }
            }
            Err(crossbeam_channel::TryRecvError::Disconnected) => break,
        };
        n = n.wrapping_add(1);
        // The clock is read every 64 items, after every wait for an
        // input, and before every wait for credits (a slow pipeline gets
        // its barriers on time too).
        if waited || n % 64 == 0 || !tx.has_credit() {
            if stop.load(Ordering::Relaxed) {
                return Err("stopped".to_string());
            }
            // A checkpoint asked for now (a member leaving) is due at once.
            if now.swap(false, Ordering::Relaxed) {
                due = due.map(|_| Instant::now());
            }
            if let (Some(d), Some(e)) = (due, every) {
                // A barrier is committed once the sink has passed it: with
                // a slow sink, more in flight would only be checkpoint
                // folders waiting on disk.
                if Instant::now() >= d && unseen(next_id) < MAX_UNSEEN {
                    positions
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(next_id, (seq, Instant::now()));
                    issued.fetch_max(next_id, Ordering::Relaxed);
                    tx.barrier(next_id).map_err(|e| e.to_string())?;
                    next_id += 1;
                    due = Some(Instant::now() + e);
                }
            }
        }
        if let Some(x) = x {
            tx.send(seq, &x).map_err(|e| e.to_string())?;
            seq += 1;
        }
    }
    drop(from);
    if let Some(e) = every {
        let barrier = |id: u64, tx: &mut EdgeTx| {
            positions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, (seq, Instant::now()));
            issued.fetch_max(id, Ordering::Relaxed);
            tx.barrier(id).map_err(|e| e.to_string())
        };
        let last = next_id;
        barrier(last, &mut tx)?;
        next_id += 1;
        let mut due = Instant::now() + e;
        while seen.load(Ordering::Relaxed) < last {
            if stop.load(Ordering::Relaxed) {
                return Err("stopped".to_string());
            }
            if Instant::now() >= due && unseen(next_id) < MAX_UNSEEN {
                barrier(next_id, &mut tx)?;
                next_id += 1;
                due = Instant::now() + e;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    tx.end().map_err(|e| e.to_string())
}

/// Receives the last part's outputs (or merges the last keyed stage's
/// copies) into the sink, once each.
#[allow(clippy::too_many_arguments)]
pub(crate) fn receive<O: Wire>(
    routes: &Routes,
    epoch: u64,
    last: u32,
    inputs: u32,
    stop: &AtomicBool,
    streams: &Mutex<Vec<TcpStream>>,
    stats: Arc<super::edge::EdgeStats>,
    sink: &Mutex<Dedup<O>>,
    seen: &AtomicU64,
    passed: &dyn Fn(u64),
) -> Result<(), String> {
    let mut ss = Vec::new();
    for slot in 0..inputs {
        let s = routes
            .take(epoch, last, slot, CONNECT_TIMEOUT, stop)
            .ok_or_else(|| format!("the last part did not connect{}", routes.refusals()))?;
        if let Ok(c) = s.try_clone() {
            streams.lock().unwrap_or_else(|p| p.into_inner()).push(c);
        }
        ss.push(s);
    }
    let edges = In::<O>::new(ss, 1 << 16, &stats).map_err(|e| e.to_string())?;
    let mut sink = sink.lock().unwrap_or_else(|p| p.into_inner());
    let mut current: Option<(u64, u64)> = None;
    edges
        .run(|a| {
            match a {
                Arrival::Barrier(id) => {
                    // Every output before the barrier is in the sink: the
                    // checkpoint may now be committed (a restore from it
                    // replays none of them, so none may still be on the
                    // way).
                    seen.fetch_max(id, Ordering::Relaxed);
                    passed(id);
                }
                Arrival::Item(seq, x) => {
                    // A stopped attempt delivers no more: what it holds is
                    // replayed from the committed checkpoint.
                    if stop.load(Ordering::Relaxed) {
                        return Err(WireError::Malformed("stopped".into()));
                    }
                    let idx = match current {
                        Some((s, i)) if s == seq => i + 1,
                        _ => 0,
                    };
                    current = Some((seq, idx));
                    let fresh = match sink.delivered {
                        None => true,
                        Some((s, count)) => seq > s || (seq == s && idx >= count),
                    };
                    if fresh {
                        (sink.sink)(seq, x);
                        sink.delivered = Some((seq, idx + 1));
                        sink.count += 1;
                    }
                }
                Arrival::Group(..) | Arrival::Route(_) => {
                    return Err(WireError::Malformed(
                        "a keyed copy's record where outputs belong".into(),
                    ))
                }
            }
            Ok(())
        })
        .map_err(|e| e.to_string())
}
