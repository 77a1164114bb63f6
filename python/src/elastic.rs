//! Workers added and retired mid-run: an engine's scale-out and scale-in.
//!
//! Only an engine on workers from the start (`placement="workers"` or
//! `listen=`) has a master to change; the others say so. Between steps,
//! added workers are spawned on this machine and admitted (they evolve
//! states from the next step on), and retired ones hand their states to
//! the others and exit 0 (`Master::retire_workers`). Results do not change.

use std::collections::BTreeMap;
use std::time::Duration;

use statepipe_cluster::{Error, LocalCluster, Master, WorkerCommand};

use crate::engine::Inner;
use crate::model::PyModel;

/// What an engine that is not on workers from the start is told.
const NOT_ON_WORKERS: &str = "only an engine on workers from the start adds or retires \
    workers: make it with placement=\"workers\" (or listen=)";

/// The master of an engine on workers.
pub(crate) fn master(inner: &mut Inner) -> Result<&mut Master<PyModel>, Error> {
    match inner {
        Inner::Cluster { master, .. } => Ok(master),
        _ => Err(Error::Config(NOT_ON_WORKERS.into())),
    }
}

/// Starts `n` worker processes with `cmd` (on the caller's thread: each
/// dies with the thread that started it), beside those the engine has.
pub(crate) fn spawn(
    inner: &mut Inner,
    cmd: &WorkerCommand,
    n: usize,
    pins: &[usize],
) -> Result<(), Error> {
    let Inner::Cluster { cluster, .. } = inner else {
        return Err(Error::Config(NOT_ON_WORKERS.into()));
    };
    match cluster {
        Some(c) => c.spawn_more(cmd, n, pins),
        None => {
            // A listening engine's first local workers: a loopback
            // listener of their own.
            *cluster = Some(LocalCluster::spawn(cmd, n, pins)?);
            Ok(())
        }
    }
}

/// Waits for the `n` workers [`spawn`] started to join, and admits them.
pub(crate) fn admit_spawned(inner: &mut Inner, n: usize, timeout: Duration) -> Result<(), Error> {
    let Inner::Cluster {
        master,
        cluster: Some(c),
    } = inner
    else {
        return Err(Error::Config(NOT_ON_WORKERS.into()));
    };
    let joined = c.accept_more(n, timeout)?;
    master.admit(joined)
}

/// The spawned worker processes that exited since the last call: process
/// id and exit code (minus the signal's number for one a signal ended).
pub(crate) fn exited(inner: &mut Inner) -> Vec<(u32, i32)> {
    use std::os::unix::process::ExitStatusExt;
    match inner {
        Inner::Cluster {
            cluster: Some(c), ..
        } => c
            .reap()
            .into_iter()
            .map(|(pid, s)| (pid, s.code().unwrap_or_else(|| -s.signal().unwrap_or(0))))
            .collect(),
        _ => Vec::new(),
    }
}

/// Each worker's counters (in the order they joined), for tests and for
/// the caller to see where work went.
pub(crate) fn worker_stats(inner: &Inner) -> Vec<BTreeMap<&'static str, u64>> {
    let stats = match inner {
        Inner::Cluster { master, .. } => master.stats(),
        Inner::Auto { auto, .. } => match auto.master() {
            Some(m) => m.stats(),
            None => return Vec::new(),
        },
        Inner::Local(_) => return Vec::new(),
    };
    stats
        .workers
        .iter()
        .map(|w| {
            BTreeMap::from([
                ("evolved", w.evolved),
                ("batches", w.batches),
                ("stolen_states", w.stolen_states),
                ("rebalanced_states", w.rebalanced_states),
                ("left", u64::from(w.left)),
            ])
        })
        .collect()
}
