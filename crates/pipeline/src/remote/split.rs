//! The ends of a part when a keyed stage's copies sit in other processes:
//! the **split** before them (each item to its key's copy, and a route
//! log of where each went) and the **merge** after them (a group of
//! outputs from the copy the route log names, entry by entry), which
//! gives the outputs back in the sequential order, as the one-process
//! shard's route log and merge do.
//!
//! The merge waits only for the earliest unmerged item's group, which its
//! copy received before any later item: a copy never waits for the merge
//! to read another copy first, so credits cannot deadlock the three.

use std::any::Any;
use std::collections::VecDeque;
use std::net::TcpStream;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::edge::{Arrival, EdgeRx, EdgeStats, EdgeTx, StopFlag};
use super::wire::{self, WireError};

/// A keyed stage's choice of copy for an item (erased: the item is the
/// stage's input type).
pub(crate) type Router = Arc<dyn Fn(&dyn Any) -> usize + Send + Sync>;

/// Where a part's outputs go.
pub(crate) enum Out {
    /// One edge.
    Single(EdgeTx),
    /// The next stage's copies, by key, and the route log to their merge.
    Split {
        copies: Vec<EdgeTx>,
        log: EdgeTx,
        router: Router,
    },
    /// This part is a keyed copy: its groups, to the merge after it.
    Grouped(EdgeTx),
}

fn malformed(m: impl Into<String>) -> WireError {
    WireError::Malformed(m.into())
}

impl Out {
    /// The edges of `streams` (in order: one, or the copies then the
    /// route log's merge), as `router` and `grouped` say.
    pub(crate) fn new(
        mut streams: Vec<TcpStream>,
        router: Option<Router>,
        grouped: bool,
        stop: &StopFlag,
        stats: &Arc<EdgeStats>,
    ) -> std::io::Result<Out> {
        let tx = |s: TcpStream, kind| EdgeTx::new(s, Arc::clone(stop), Arc::clone(stats), kind);
        let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "no downstream edge");
        Ok(match (router, grouped) {
            (Some(router), false) if streams.len() >= 2 => {
                let log = tx(streams.pop().ok_or_else(bad)?, wire::ROUTE)?;
                let copies = streams
                    .into_iter()
                    .map(|s| tx(s, wire::BATCH))
                    .collect::<Result<_, _>>()?;
                Out::Split {
                    copies,
                    log,
                    router,
                }
            }
            (None, true) if streams.len() == 1 => {
                Out::Grouped(tx(streams.pop().ok_or_else(bad)?, wire::GROUPS)?)
            }
            (None, false) if streams.len() == 1 => {
                Out::Single(tx(streams.pop().ok_or_else(bad)?, wire::BATCH)?)
            }
            _ => return Err(bad()),
        })
    }

    /// One output: its input's number, the item, whether it is the input's
    /// last.
    pub(crate) fn item<T: Serialize + 'static>(
        &mut self,
        seq: u64,
        x: &T,
        last: bool,
    ) -> Result<(), WireError> {
        match self {
            Out::Single(tx) => tx.send(seq, x),
            Out::Grouped(tx) => tx.send_group(seq, last, Some(x)),
            Out::Split {
                copies,
                log,
                router,
            } => {
                let k = router(x as &dyn Any);
                let n = copies.len();
                if k >= n {
                    return Err(malformed(format!("copy {k} of {n}")));
                }
                // Before waiting for credits anywhere, everything batched
                // goes: the merge may be waiting for an item this split
                // still holds (its route log entry already went).
                if !copies[k].has_credit() || !log.has_credit() {
                    for tx in copies.iter_mut() {
                        tx.flush()?;
                    }
                    log.flush()?;
                }
                copies[k].send(seq, x)?;
                if !log.has_credit() {
                    copies[k].flush()?;
                }
                log.route(k as u32)
            }
        }
    }

    /// The end of an input's outputs with no output after the last.
    pub(crate) fn close<T: Serialize>(&mut self, seq: u64) -> Result<(), WireError> {
        match self {
            Out::Grouped(tx) => tx.send_group::<T>(seq, true, None),
            _ => Ok(()),
        }
    }

    fn all(&mut self) -> Vec<&mut EdgeTx> {
        match self {
            Out::Single(tx) | Out::Grouped(tx) => vec![tx],
            Out::Split { copies, log, .. } => {
                copies.iter_mut().chain(std::iter::once(log)).collect()
            }
        }
    }

    /// Writes what is batched on every edge.
    pub(crate) fn flush(&mut self) -> Result<(), WireError> {
        self.all().into_iter().try_for_each(EdgeTx::flush)
    }

    /// A barrier on every edge.
    pub(crate) fn barrier(&mut self, id: u64) -> Result<(), WireError> {
        self.all().into_iter().try_for_each(|tx| tx.barrier(id))
    }

    /// The end on every edge, waiting for each receiver to close.
    pub(crate) fn end(self) -> Result<(), WireError> {
        match self {
            Out::Single(tx) | Out::Grouped(tx) => tx.end(),
            Out::Split { copies, log, .. } => {
                for tx in copies {
                    tx.end()?;
                }
                log.end()
            }
        }
    }
}

/// One incoming edge read record by record.
pub(crate) struct Puller<T> {
    rx: EdgeRx,
    queue: VecDeque<Arrival<T>>,
    ended: bool,
}

impl<T: DeserializeOwned> Puller<T> {
    pub(crate) fn new(rx: EdgeRx) -> Self {
        Puller {
            rx,
            queue: VecDeque::new(),
            ended: false,
        }
    }

    /// The next record; `None` at the end.
    fn pull(&mut self) -> Result<Option<Arrival<T>>, WireError> {
        while self.queue.is_empty() && !self.ended {
            let q = &mut self.queue;
            if !self.rx.next::<T>(|a| {
                q.push_back(a);
                Ok(())
            })? {
                self.ended = true;
            }
        }
        Ok(self.queue.pop_front())
    }

    fn close(self) {
        self.rx.close();
    }
}

/// Where a part's inputs come from.
pub(crate) enum In<T> {
    /// One edge.
    Single(EdgeRx),
    /// The copies of the keyed stage before, merged by its route log.
    Merge {
        copies: Vec<Puller<T>>,
        log: Puller<T>,
    },
}

impl<T: DeserializeOwned> In<T> {
    /// The edges of `streams` (one, or the copies then the route log),
    /// each granting `window`.
    pub(crate) fn new(
        mut streams: Vec<TcpStream>,
        window: u64,
        stats: &Arc<EdgeStats>,
    ) -> std::io::Result<In<T>> {
        let rx = |s| EdgeRx::new(s, window, Arc::clone(stats));
        if streams.len() == 1 {
            return Ok(In::Single(rx(streams.pop().expect("one stream"))?));
        }
        let log = Puller::new(rx(streams.pop().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "no upstream edge")
        })?)?);
        let copies = streams
            .into_iter()
            .map(|s| rx(s).map(Puller::new))
            .collect::<Result<_, _>>()?;
        Ok(In::Merge { copies, log })
    }

    /// Hands every item (with its number) and barrier to `f`, in the
    /// sequential order, until the end.
    pub(crate) fn run(
        self,
        mut f: impl FnMut(Arrival<T>) -> Result<(), WireError>,
    ) -> Result<(), WireError> {
        match self {
            In::Single(mut rx) => {
                while rx.next::<T>(&mut f)? {}
                rx.close();
                Ok(())
            }
            In::Merge {
                mut copies,
                mut log,
            } => {
                loop {
                    match log.pull()? {
                        None => break,
                        Some(Arrival::Route(k)) => {
                            let n = copies.len();
                            let copy = copies
                                .get_mut(k as usize)
                                .ok_or_else(|| malformed(format!("a route to copy {k} of {n}")))?;
                            loop {
                                match copy.pull()? {
                                    Some(Arrival::Group(seq, last, x)) => {
                                        if let Some(x) = x {
                                            f(Arrival::Item(seq, x))?;
                                        }
                                        if last {
                                            break;
                                        }
                                    }
                                    _ => {
                                        return Err(malformed(format!(
                                            "copy {k} ended inside a group"
                                        )))
                                    }
                                }
                            }
                        }
                        Some(Arrival::Barrier(b)) => {
                            for (k, c) in copies.iter_mut().enumerate() {
                                match c.pull()? {
                                    Some(Arrival::Barrier(id)) if id == b => {}
                                    _ => {
                                        return Err(malformed(format!(
                                            "copy {k} has no barrier {b} where its route log has"
                                        )))
                                    }
                                }
                            }
                            f(Arrival::Barrier(b))?;
                        }
                        Some(_) => {
                            return Err(malformed("an item where a route log's entry belongs"))
                        }
                    }
                }
                for (k, mut c) in copies.into_iter().enumerate() {
                    if c.pull()?.is_some() {
                        return Err(malformed(format!(
                            "copy {k} goes on after its route log ended"
                        )));
                    }
                    c.close();
                }
                log.close();
                Ok(())
            }
        }
    }
}
