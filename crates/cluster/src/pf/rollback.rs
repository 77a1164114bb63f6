//! A filter run with checkpoints that rolls back to the last one instead of
//! failing when no copy of some state survives.
//!
//! A checkpoint is the engine's [`Snapshot`] and the filter's [`PfState`]
//! after the same step, kept in memory (and handed to the caller, who may
//! write it to a file). When an operation fails with
//! [`Error::WorkerLost`] (with `Recovery::Buddy`, a worker lost together
//! with every holder of a replica of its states; with any recovery, the
//! last usable worker), the engine goes back to the snapshot on the workers
//! it has left ([`Restore::rollback`]) and the filter to its state, and the
//! run goes on from there. Every id and random number derives from
//! `(seed, step, parent)`, so the steps run again give the bits they gave
//! the first time, and the run ends as one without the loss.
//!
//! Not rolled back: a worker that reported a failed request (its evolve
//! panicked; it would fail again anywhere), [`Error::EvolveHung`],
//! [`Error::NoWorkers`] (nothing is left to go on with), any other error.
//! A run that keeps losing states before its next checkpoint stops after
//! [`Checkpoints::max_rollbacks`] rollbacks to the same one, with the last
//! loss: each rollback costs at least one worker, so it cannot loop for
//! ever, but a cluster that loses workers faster than the run progresses
//! is better told so.

use super::filter::{run_from, Bootstrap, PfConfig, PfResult, PfState, SsModel};
use crate::error::{Error, WorkerLost};
use crate::restore::Restore;
use crate::snapshot::Snapshot;

/// When a run records checkpoints, and how often it may go back to one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoints {
    /// Steps between checkpoints (0 counts as 1); one is also recorded
    /// after the last step. Until the first, the run goes back to its
    /// start.
    pub every: u64,
    /// Rollbacks to one checkpoint, in a row, before the run gives up and
    /// returns the loss that caused the last one (0: checkpoints are
    /// recorded, never rolled back to).
    pub max_rollbacks: u32,
}

impl Default for Checkpoints {
    /// Every 10 steps; up to 3 rollbacks to the same checkpoint.
    fn default() -> Self {
        Checkpoints {
            every: 10,
            max_rollbacks: 3,
        }
    }
}

/// What a run with checkpoints tells its caller as it goes.
#[derive(Debug)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// A step is done.
    Step {
        /// The filter after it.
        state: &'a PfState,
        /// The engine's snapshot, if a checkpoint was recorded after this
        /// step: with `state`, what a later run resumes from
        /// ([`Master::resume`](crate::Master::resume) and [`run_from`]).
        checkpoint: Option<&'a Snapshot>,
    },
    /// The run went back to the checkpoint after step `to` and goes on
    /// from there.
    RolledBack {
        /// The step of the checkpoint: before the first, where the run
        /// started (0, or the step of the state it resumed from).
        to: usize,
        /// What was lost.
        cause: &'a WorkerLost,
        /// Rollbacks to this checkpoint so far, this one included.
        rollbacks: u32,
    },
}

/// Runs the filter on `engine` from the start, or from `start` (with the
/// engine resumed from the snapshot taken with it), recording a checkpoint
/// every [`Checkpoints::every`] steps and after the last, and rolling back
/// to the last checkpoint when an operation fails with
/// [`Error::WorkerLost`] (see the module's documentation). `progress` is
/// told of every step, with the checkpoint recorded after it if any, and
/// of every rollback. The result is the bits of a run without the losses.
///
/// A checkpoint costs a snapshot (with `Recovery::MasterCopy` a copy of the
/// master's copies; with `Recovery::Buddy` a fetch of every state), and
/// the last one is kept in memory: one more copy of every state's bytes.
///
/// # Errors
/// Whatever the engine or `progress` returns, except the losses rolled
/// back from; [`Error::NoWorkers`] when no worker is left to roll back on;
/// the last [`Error::WorkerLost`] after `max_rollbacks` rollbacks in a row
/// to one checkpoint.
///
/// # Panics
/// As [`run_from`].
pub fn run_checkpointed<M: SsModel, G: Restore<Bootstrap<M>> + Send>(
    engine: &mut G,
    model: &M,
    cfg: PfConfig,
    start: Option<PfState>,
    checkpoints: Checkpoints,
    mut progress: impl FnMut(&mut G, Progress<'_>) -> Result<(), Error> + Send,
) -> Result<PfResult, Error> {
    let every = checkpoints.every.max(1);
    let steps = model.steps();
    // The checkpoint to go back to; until the first, the run as it starts.
    let mut last: (Snapshot, Option<PfState>) = (engine.snapshot()?, start);
    // Rollbacks to `last` so far.
    let mut tries = 0u32;
    loop {
        let from = last.1.clone();
        let r = run_from(engine, model, cfg, from, |g, st| {
            if st.t as u64 % every == 0 || st.t == steps {
                last = (g.snapshot()?, Some(st.clone()));
                tries = 0;
                progress(
                    g,
                    Progress::Step {
                        state: st,
                        checkpoint: Some(&last.0),
                    },
                )
            } else {
                progress(
                    g,
                    Progress::Step {
                        state: st,
                        checkpoint: None,
                    },
                )
            }
        });
        let lost = match r {
            Err(Error::WorkerLost(l)) if !l.reported_failure() => l,
            r => return r,
        };
        let to = last.1.as_ref().map_or(0, |s| s.t);
        if tries >= checkpoints.max_rollbacks {
            tracing::error!(
                to,
                tries,
                "states lost again; not rolling back to the checkpoint after step {to} more \
                 than {tries} times"
            );
            return Err(Error::WorkerLost(lost));
        }
        // A rollback that loses workers itself is tried again, within the
        // same bound.
        loop {
            tries += 1;
            match engine.rollback(&last.0) {
                Ok(()) => break,
                Err(Error::WorkerLost(l))
                    if !l.reported_failure() && tries < checkpoints.max_rollbacks =>
                {
                    tracing::warn!(
                        worker = l.worker,
                        reason = %l.reason,
                        "a worker lost while rolling back; rolling back again"
                    );
                }
                Err(e) => return Err(e),
            }
        }
        tracing::warn!(
            to,
            lost = lost.lost.len(),
            unfinished = lost.unfinished.len(),
            "no copy of some states survived ({}); rolled back to the checkpoint after step {to}",
            lost.reason
        );
        progress(
            engine,
            Progress::RolledBack {
                to,
                cause: &lost,
                rollbacks: tries,
            },
        )?;
    }
}
