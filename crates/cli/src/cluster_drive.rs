//! Driving a filter run: the progress bar, the checkpoints (every
//! `--every` steps, and one when SIGTERM ends the run), and what a run
//! gives back.

use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use statepipe_cluster::pf::{self, Bootstrap, Checkpoints, PfConfig, PfState, Progress, SsModel};
use statepipe_cluster::{Auto, Decision, Joined, Master, Restore, Stats};

use crate::cluster_ckpt::{self, Checkpoint};

/// A filter run's outcome with its cost.
pub(crate) struct Run {
    pub(crate) result: pf::PfResult,
    /// The master's counters, if the run went to workers.
    pub(crate) stats: Option<Stats>,
    /// Where the in-process rule put the run, if it was asked.
    pub(crate) decision: Option<Decision>,
    pub(crate) wall: Duration,
}

/// Set by SIGTERM to `statepipe master`: the run stops after the step in
/// progress, with a checkpoint of it when `--checkpoint` is given.
static TERM: std::sync::LazyLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::LazyLock::new(Default::default);

/// SIGTERM (a Kubernetes pod's end, a drain) stops the run after the step
/// in progress, writes a checkpoint of it if `--checkpoint` is given, lets
/// the workers go and exits non-zero, naming the checkpoint. A second
/// SIGTERM exits at once with status 143 (the last checkpoint written
/// stands).
pub(crate) fn stop_on_sigterm() -> anyhow::Result<()> {
    use signal_hook::consts::SIGTERM;
    // Registered first, so that it sees the flag as it was before this
    // signal: only a second SIGTERM ends the process at once.
    signal_hook::flag::register_conditional_shutdown(SIGTERM, 143, std::sync::Arc::clone(&TERM))
        .context("installing the SIGTERM handler")?;
    signal_hook::flag::register(SIGTERM, std::sync::Arc::clone(&TERM))
        .context("installing the SIGTERM handler")?;
    Ok(())
}

/// What a filter run needs of its engine besides [`Restore`].
pub(crate) trait RunEngine<E: statepipe_cluster::Evolve>: Restore<E> {
    fn stats(&self) -> Option<Stats>;
    fn decision(&self) -> Option<Decision>;
}

impl<E: statepipe_cluster::Evolve> RunEngine<E> for Master<E> {
    fn stats(&self) -> Option<Stats> {
        Some(Master::stats(self))
    }
    fn decision(&self) -> Option<Decision> {
        None
    }
}

impl<E, S> RunEngine<E> for Auto<E, S>
where
    E: statepipe_cluster::Evolve + Clone,
    E::State: Clone,
    S: FnOnce() -> Result<Vec<Joined>, statepipe_cluster::Error>,
{
    fn stats(&self) -> Option<Stats> {
        self.master().map(Master::stats)
    }
    fn decision(&self) -> Option<Decision> {
        Auto::decision(self).cloned()
    }
}

/// Runs the filter on `engine` with the progress bar and checkpoints.
/// What [`drive`] needs of the command's options.
pub(crate) struct DriveOptions {
    /// No progress bar.
    pub(crate) quiet: bool,
    pub(crate) pf: PfConfig,
    /// Where checkpoints go, every `every` steps.
    pub(crate) checkpoint: Option<PathBuf>,
    pub(crate) every: u64,
    /// What must match for a checkpoint to be resumed by this run.
    pub(crate) run_key: String,
}

pub(crate) fn drive<M: SsModel, G: RunEngine<Bootstrap<M>> + Send>(
    engine: &mut G,
    m: &M,
    start: Option<PfState>,
    a: &DriveOptions,
) -> anyhow::Result<Run> {
    let bar = indicatif::ProgressBar::new(m.steps() as u64);
    if a.quiet || !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let cfg = a.pf;
    // Checkpoints are written on a thread of their own (temporary file,
    // fsync, rename, fsync of the folder): a step pays for the snapshot
    // only. A newer checkpoint replaces one still waiting for the write in
    // flight; the last one (after the last step) is on disk before `drive`
    // returns, and a failed write fails the run at the next step or at the
    // end.
    let writer = match &a.checkpoint {
        Some(path) => Some(
            statepipe_sys::durable::Writer::new(path, |c: Checkpoint| cluster_ckpt::encode(&c))
                .with_context(|| format!("cannot write the checkpoint {}", path.display()))?,
        ),
        None => None,
    };
    let mut failed = None;
    // The step after which a SIGTERM ended the run (`statepipe master`).
    let mut terminated: Option<usize> = None;
    let term = || TERM.load(std::sync::atomic::Ordering::Relaxed);
    let mut said = false;
    let mut step = |engine: &mut G, st: &PfState| {
        bar.set_position(st.t as u64);
        if !said {
            if let Some(d) = engine.decision() {
                said = true;
                bar.suspend(|| eprintln!("statepipe pf: evolving {d}"));
            }
        }
    };
    let t0 = Instant::now();
    let result = match &writer {
        // With checkpoints: each one is written as the library records it,
        // and a loss of every copy of some states rolls back to the last.
        Some(w) => {
            let every = Checkpoints {
                every: a.every,
                ..Checkpoints::default()
            };
            pf::run_checkpointed(engine, m, cfg, start, every, |engine, p| {
                match p {
                    Progress::Step { state, checkpoint } => {
                        step(engine, state);
                        let stop = term();
                        // Asked to stop: a checkpoint of this step, whatever
                        // `--every` says, then the end.
                        let snapshot = match checkpoint {
                            Some(s) => Some(s.clone()),
                            None if stop => Some(engine.snapshot()?),
                            None => None,
                        };
                        if let Some(snapshot) = snapshot {
                            let c = Checkpoint {
                                run: a.run_key.clone(),
                                snapshot,
                                filter: state.clone(),
                            };
                            if let Err(e) = w.submit(c) {
                                failed = Some(e);
                                return Err(statepipe_cluster::Error::Config(
                                    "checkpoint failed".into(),
                                ));
                            }
                        }
                        if stop {
                            terminated = Some(state.t);
                            return Err(statepipe_cluster::Error::Interrupted);
                        }
                    }
                    Progress::RolledBack {
                        to,
                        cause,
                        rollbacks,
                    } => bar.suspend(|| {
                        eprintln!("{}", cluster_ckpt::rolled_back(to, cause, rollbacks));
                    }),
                    _ => {}
                }
                Ok(())
            })
        }
        None => pf::run_from(engine, m, cfg, start, |engine, st| {
            step(engine, st);
            if term() {
                terminated = Some(st.t);
                return Err(statepipe_cluster::Error::Interrupted);
            }
            Ok(())
        }),
    };
    let written = writer.map(statepipe_sys::durable::Writer::finish);
    let path = a.checkpoint.as_deref().unwrap_or(Path::new(""));
    if let Some(e) = failed.or_else(|| written.and_then(Result::err)) {
        return Err(
            anyhow::Error::new(e).context(format!("writing the checkpoint {}", path.display()))
        );
    }
    if let Some(t) = terminated {
        bar.finish_and_clear();
        match &a.checkpoint {
            Some(p) => anyhow::bail!(
                "terminated by SIGTERM after step {t} of {}; checkpoint {} written: go on \
                 with --resume {} (the workers were let go)",
                m.steps(),
                p.display(),
                p.display()
            ),
            None => anyhow::bail!(
                "terminated by SIGTERM after step {t} of {}; nothing was saved (with \
                 --checkpoint FILE a SIGTERM writes one to --resume from)",
                m.steps()
            ),
        }
    }
    let result = result?;
    let wall = t0.elapsed();
    bar.finish_and_clear();
    Ok(Run {
        result,
        stats: engine.stats(),
        decision: engine.decision(),
        wall,
    })
}
