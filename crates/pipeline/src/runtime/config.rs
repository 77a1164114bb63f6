//! How to deploy a pipeline: workers, pinning, ring sizes, the plan, and
//! how long idle workers spin.

use std::time::Duration;

use super::error::DeployError;
use super::plan::Plan;
use crate::checkpoint::Checkpoint;
use crate::unit::UnitInfo;

/// The environment variable that overrides the number of workers.
pub const WORKERS_ENV: &str = "STATEPIPE_WORKERS";

/// How long an idle worker spins (watching its rings) before it yields and
/// then sleeps on its doorbell.
///
/// Spinning keeps hand-offs at tens of nanoseconds; sleeping costs the
/// waker a system call and the sleeper microseconds to wake. Spinning is
/// only right when the spinning thread has a CPU to itself: otherwise it
/// takes the CPU from the very thread it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spin {
    /// [`SPIN_FREE`] when every worker, and every user thread at the ends
    /// of the deployment (two for [`deploy`](crate::Pipeline::deploy): one
    /// feeding the input, one reading the output; none for `deploy_with`
    /// and `deploy_cycle`), can have a usable CPU of its own; otherwise a
    /// few dozen rounds (well under a microsecond).
    Auto,
    /// Spin this long (zero: a few dozen rounds only).
    For(Duration),
}

/// How long a station holds its outputs back by default (see
/// [`Config::output_hold`]).
pub const DEFAULT_OUTPUT_HOLD: Duration = Duration::from_micros(2);

/// How long [`Spin::Auto`] spins when there are CPUs enough.
pub const SPIN_FREE: Duration = Duration::from_micros(50);

/// How to deploy a pipeline.
#[derive(Debug, Clone)]
pub struct Config {
    workers: Option<usize>,
    pub(crate) pin: bool,
    pub(crate) capacity: usize,
    pub(crate) layout: Layout,
    places: Vec<(String, usize)>,
    pub(crate) spin: Spin,
    pub(crate) output_hold: Duration,
    /// Where checkpoints are written (none: no checkpoints).
    pub(crate) checkpoint_dir: Option<std::path::PathBuf>,
    /// How often checkpoints are taken without being asked for.
    pub(crate) checkpoint_every: Option<Duration>,
    /// The checkpoint every stage starts from.
    pub(crate) restore: Option<Checkpoint>,
    /// Keep the older checkpoints when a new one completes (a distributed
    /// pipeline's member: its coordinator says when they may go).
    pub(crate) keep_older_checkpoints: bool,
    /// Hold the checkpoint folder's lock while deployed (not for a
    /// distributed pipeline's part, whose folder its coordinator's epochs
    /// pass from member to member: a member declared lost may live on, cut
    /// off, holding it).
    pub(crate) lock_checkpoint_dir: bool,
    /// The lowest number the next checkpoint may take (a distributed
    /// pipeline's part: its coordinator numbers barriers across attempts,
    /// so that a checkpoint a lost member may still be writing never has
    /// the number of one its successor writes).
    pub(crate) first_checkpoint: Option<u64>,
    /// Drop the checkpoints still being written when the deployment is
    /// stopped, rather than finish them (a distributed pipeline's part: an
    /// aborted attempt's checkpoints are never committed, and its member
    /// answers the abort only once its writer is done, within a deadline
    /// after which the coordinator counts it as lost).
    pub(crate) drop_checkpoints_on_stop: bool,
}

#[derive(Debug, Clone)]
pub(crate) enum Layout {
    Balanced,
    ThreadPerStage,
    Fixed(Vec<usize>),
    /// Every unit a station of its own, all on worker 0.
    Isolated,
}

impl Default for Config {
    fn default() -> Self {
        Config::new()
    }
}

impl Config {
    /// The defaults: one worker per CPU this process may use (affinity mask
    /// ∩ cgroup `cpu.max`, or `STATEPIPE_WORKERS`), each pinned to its CPU,
    /// rings of 1024 slots, a cost-balanced plan.
    pub fn new() -> Config {
        Config {
            workers: None,
            pin: true,
            capacity: 1024,
            layout: Layout::Balanced,
            places: Vec::new(),
            spin: Spin::Auto,
            output_hold: DEFAULT_OUTPUT_HOLD,
            checkpoint_dir: None,
            checkpoint_every: None,
            restore: None,
            keep_older_checkpoints: false,
            lock_checkpoint_dir: true,
            first_checkpoint: None,
            drop_checkpoints_on_stop: false,
        }
    }

    /// How long idle workers spin before they sleep (see [`Spin`]).
    pub fn spin(mut self, spin: Spin) -> Config {
        self.spin = spin;
        self
    }

    /// The spin of this configuration for `workers` workers with
    /// `user_threads` threads of the user's at the deployment's ends, on
    /// `cpus` usable CPUs.
    pub(crate) fn resolved_spin(
        &self,
        workers: usize,
        user_threads: usize,
        cpus: usize,
    ) -> Duration {
        match self.spin {
            Spin::For(d) => d,
            Spin::Auto if workers + user_threads <= cpus => SPIN_FREE,
            Spin::Auto => Duration::ZERO,
        }
    }

    /// How long a station may hold its outputs back to publish them to
    /// the next ring together (default [`DEFAULT_OUTPUT_HOLD`], 2 µs).
    /// A station publishes what it holds at the end of each input batch
    /// anyway; within a batch it holds as many outputs as its measured
    /// time per output says fit in `hold`, so cheap stages pay one publish
    /// per few dozen outputs and stages of a microsecond or more publish
    /// each at once. The measure is an average: a stage whose cost jumps
    /// (a cheap run, then a call that blocks) can hold the outputs before
    /// the jump for as long as it lasts, up to one batch of them.
    /// `Duration::ZERO` publishes every output as soon as it is made.
    pub fn output_hold(mut self, hold: Duration) -> Config {
        self.output_hold = hold;
        self
    }

    /// Writes checkpoints under `dir` (one `ckpt-NNNNNNNNNN` folder each),
    /// taken by [`Running::checkpoint`](crate::Running::checkpoint) and, with
    /// [`checkpoint_every`](Config::checkpoint_every), periodically. Every
    /// stage's state must then be durable
    /// ([`Pipeline::durable_stage`](crate::Pipeline::durable_stage), or
    /// stateless) and every stage's name unique, or `deploy` refuses,
    /// naming the stage. One deployment per folder: a newer checkpoint
    /// removes the older ones once it is complete.
    pub fn checkpoint_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Config {
        self.checkpoint_dir = Some(dir.into());
        self
    }

    /// Takes a checkpoint every `period` (needs
    /// [`checkpoint_dir`](Config::checkpoint_dir)); a request that finds
    /// the previous checkpoint still being written is skipped.
    pub fn checkpoint_every(mut self, period: Duration) -> Config {
        self.checkpoint_every = Some(period.max(Duration::from_millis(1)));
        self
    }

    /// Starts every stage from its state in `checkpoint` (matched by stage
    /// name; the plan, worker count and placement may differ from the
    /// ones it was taken under), and numbers the inputs from the
    /// checkpoint's position: send the source's items from
    /// [`Checkpoint::position`](crate::Checkpoint::position) on. Stages the
    /// checkpoint does not know start from their initial state; a state in
    /// the checkpoint that no stage takes is refused.
    pub fn restore(mut self, checkpoint: Checkpoint) -> Config {
        self.restore = Some(checkpoint);
        self
    }

    /// Uses `n` workers (at least 1), whatever the CPUs.
    pub fn workers(mut self, n: usize) -> Config {
        self.workers = Some(n.max(1));
        self
    }

    /// Whether to pin each worker to one CPU of the affinity mask.
    pub fn pin(mut self, pin: bool) -> Config {
        self.pin = pin;
        self
    }

    /// Slots per ring (rounded up to a power of two, at least 2): the
    /// bound of every queue.
    pub fn capacity(mut self, slots: usize) -> Config {
        self.capacity = slots.max(2).next_power_of_two();
        self
    }

    /// One unpinned thread per unit, the layout of most hand-written
    /// pipelines: for comparison.
    pub fn thread_per_stage(mut self) -> Config {
        self.layout = Layout::ThreadPerStage;
        self.pin = false;
        self
    }

    /// Every unit a station of its own, all on one worker, so that each
    /// unit's time can be read from the metrics without units competing
    /// for cores: the layout of [`Pipeline::calibrate`](crate::Pipeline::calibrate).
    pub fn isolated(mut self) -> Config {
        self.layout = Layout::Isolated;
        self.workers = Some(1);
        self
    }

    /// Places unit `u` on worker `workers[u]` (see [`Pipeline::units`](crate::Pipeline::units)).
    pub fn plan(mut self, workers: Vec<usize>) -> Config {
        self.layout = Layout::Fixed(workers);
        self
    }

    /// Puts the unit named `stage` on `worker`, whatever the plan says.
    pub fn place(mut self, stage: &str, worker: usize) -> Config {
        self.places.push((stage.to_string(), worker));
        self
    }

    /// The number of workers this configuration asks for, resolved:
    /// explicit, else `STATEPIPE_WORKERS`, else the usable CPUs.
    ///
    /// # Errors
    /// [`DeployError::Config`] if `STATEPIPE_WORKERS` is not a positive
    /// integer.
    pub fn resolved_workers(&self) -> Result<usize, DeployError> {
        if let Some(n) = self.workers {
            return Ok(n);
        }
        match statepipe_sys::cpus::workers_from_env(WORKERS_ENV) {
            Ok(Some(n)) => Ok(n),
            Ok(None) => Ok(statepipe_sys::cpus::usable_cpus().count),
            Err(e) => Err(DeployError::Config(e)),
        }
    }

    /// The plan this configuration gives for `units`.
    ///
    /// # Errors
    /// [`DeployError::Config`] for a fixed plan of the wrong length, or a
    /// placement naming no unit.
    pub fn plan_for(&self, units: &[UnitInfo]) -> Result<Plan, DeployError> {
        let workers = self.resolved_workers()?;
        let mut plan = match &self.layout {
            Layout::Balanced => Plan::balanced(units, workers),
            Layout::ThreadPerStage => Plan::thread_per_stage(units.len()),
            Layout::Isolated => Plan::single(units.len()),
            Layout::Fixed(w) => {
                if w.len() != units.len() {
                    return Err(DeployError::Config(format!(
                        "the plan places {} units but the pipeline has {}; \
                         list them with Pipeline::units()",
                        w.len(),
                        units.len()
                    )));
                }
                Plan {
                    workers: w.clone(),
                    worker_count: w.iter().max().map_or(1, |m| m + 1),
                }
            }
        };
        for (name, w) in &self.places {
            let mut found = false;
            for (u, info) in units.iter().enumerate() {
                if &info.name == name {
                    plan.workers[u] = *w;
                    found = true;
                }
            }
            if !found {
                return Err(DeployError::Config(format!(
                    "no unit is named `{name}`; the units are: {}",
                    units
                        .iter()
                        .map(|u| u.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            plan.worker_count = plan.worker_count.max(w + 1);
        }
        if plan.workers.is_empty() {
            plan.worker_count = 1;
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_spins_only_when_every_thread_has_a_cpu() {
        let cpus = 2;
        let auto = Config::new();
        assert_eq!(auto.resolved_spin(cpus, 0, cpus), SPIN_FREE);
        assert_eq!(auto.resolved_spin(cpus, 1, cpus), Duration::ZERO);
        assert_eq!(auto.resolved_spin(cpus + 1, 0, cpus), Duration::ZERO);
        let fixed = Config::new().spin(Spin::For(Duration::from_micros(7)));
        assert_eq!(
            fixed.resolved_spin(cpus * 4, 2, cpus),
            Duration::from_micros(7)
        );
    }
}
