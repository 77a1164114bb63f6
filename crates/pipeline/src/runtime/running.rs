//! What a running deployment offers beyond its ends: checkpoints and hot
//! upgrades, both sent as barriers (see `barrier.rs`).

use std::any::Any;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::checkpointing::UpgradeTicket;
use super::deploy::Running;
use crate::checkpoint::{CheckpointError, CheckpointInfo, CheckpointTicket};
use crate::machine::Machine;
use crate::state::UpgradeError;
use crate::state::UpgradeInfo;
use crate::upgrade::{command, StageHandle};

impl Running {
    /// Takes a checkpoint: a barrier goes into the input after the inputs
    /// accepted so far; each unit copies its stages' states as the barrier
    /// passes, and a background thread writes them. The ticket says when
    /// the checkpoint is durable.
    ///
    /// # Errors
    ///
    /// [`CheckpointError::NotConfigured`] without
    /// [`Config::checkpoint_dir`](crate::Config::checkpoint_dir), or on a cycle.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::{machine, Checkpoint, Config, Pipeline};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let sum = || Pipeline::durable_stage("sum", 0u64, machine::step(|s: &mut u64, x: u64| {
    ///     *s += x;
    ///     *s
    /// }));
    /// let d = sum().deploy(&Config::new().workers(1).checkpoint_dir(dir.path())).unwrap();
    /// let (mut input, mut output, running) = (d.input, d.output, d.running);
    /// input.send_all(1..=10).unwrap();
    /// let ticket = running.checkpoint().unwrap(); // after the 10 inputs sent
    /// input.send_all(11..=20).unwrap();
    /// drop(input);
    /// while output.recv().is_some() {}
    /// assert_eq!(ticket.wait().unwrap().position, 10);
    /// running.join().unwrap();
    ///
    /// // Later, or after a crash: from the checkpoint, resend 11..=20.
    /// let ckpt = Checkpoint::latest(dir.path()).unwrap().unwrap();
    /// let run = sum().deploy(&Config::new().workers(1).restore(ckpt)).unwrap().run(11..=20).unwrap();
    /// assert_eq!(run.outputs.last(), Some(&210));
    /// assert_eq!(run.seqs[0], 10); // outputs carry their input's number
    /// ```
    pub fn checkpoint(&self) -> Result<CheckpointTicket, CheckpointError> {
        self.ckpt.checkpoint()
    }

    /// The last checkpoint this deployment completed.
    pub fn last_checkpoint(&self) -> Option<CheckpointInfo> {
        self.ckpt.last()
    }

    /// The checkpoints this deployment completed, oldest first: the last
    /// [`CHECKPOINTS_KEPT`](crate::CHECKPOINTS_KEPT) of them.
    pub fn checkpoints(&self) -> Vec<CheckpointInfo> {
        self.ckpt.all()
    }

    /// The upgrades this deployment applied, oldest first (one per stage
    /// upgraded, refused ones included): the last
    /// [`UPGRADES_KEPT`](crate::UPGRADES_KEPT) of them.
    pub fn upgrades(&self) -> Vec<UpgradeInfo> {
        self.ckpt.upgrades()
    }

    /// The input position this deployment resumed from, if it was restored
    /// from a checkpoint.
    pub fn resumed_from(&self) -> Option<u64> {
        self.ckpt.resumed
    }

    /// Replaces the code of the stage `handle` names at a barrier: items
    /// accepted before this call meet the old machine, items after it the
    /// new one; `migrate` makes the new state from the old at the barrier
    /// (on the stage's worker). If it fails, the old code keeps running.
    ///
    /// # Errors
    ///
    /// [`UpgradeError::NoSuchStage`] at once if the pipeline has no stage
    /// of that name; later ones from [`UpgradeTicket::wait`].
    #[allow(clippy::type_complexity)] // a ticket for the new stage's typed handle
    pub fn upgrade<S, S2, M, F, E>(
        &self,
        handle: &StageHandle<S, M::In, M::Out>,
        machine: M,
        migrate: F,
    ) -> Result<UpgradeTicket<StageHandle<S2, M::In, M::Out>>, UpgradeError>
    where
        S: 'static,
        S2: Serialize + DeserializeOwned + Clone + Send + 'static,
        M: Machine<S2> + Send + 'static,
        M::In: Send + 'static,
        M::Out: Send + 'static,
        F: FnOnce(&S) -> Result<S2, E> + Send + 'static,
        E: std::fmt::Display,
    {
        let cmd = command::<S, S2, _, _, M, F, E>(handle, machine, migrate);
        let (done, expected) = self
            .ckpt
            .send_upgrades(vec![(handle.name().to_string(), Box::new(cmd))])?;
        Ok(UpgradeTicket {
            done,
            expected,
            value: StageHandle::new(handle.name()),
        })
    }

    /// Upgrades several stages at one barrier — every copy of a shard,
    /// say: stage `k` of `handles` gets `make(k)` and its state from
    /// `migrate`. Each copy migrates on its own worker; one whose
    /// migration fails keeps its old code, and the ticket reports it.
    ///
    /// # Errors
    ///
    /// As [`upgrade`](Running::upgrade).
    #[allow(clippy::type_complexity)] // a ticket for the new stages' typed handles
    pub fn upgrade_all<S, S2, M, F, E>(
        &self,
        handles: &[StageHandle<S, M::In, M::Out>],
        mut make: impl FnMut(usize) -> M,
        migrate: F,
    ) -> Result<UpgradeTicket<Vec<StageHandle<S2, M::In, M::Out>>>, UpgradeError>
    where
        S: 'static,
        S2: Serialize + DeserializeOwned + Clone + Send + 'static,
        M: Machine<S2> + Send + 'static,
        M::In: Send + 'static,
        M::Out: Send + 'static,
        F: Fn(&S) -> Result<S2, E> + Clone + Send + 'static,
        E: std::fmt::Display,
    {
        let cmds: Vec<(String, Box<dyn Any + Send>)> = handles
            .iter()
            .enumerate()
            .map(|(k, h)| {
                let m = migrate.clone();
                let cmd = command::<S, S2, _, _, M, _, E>(h, make(k), move |s: &S| m(s));
                (h.name().to_string(), Box::new(cmd) as Box<dyn Any + Send>)
            })
            .collect();
        let (done, expected) = self.ckpt.send_upgrades(cmds)?;
        Ok(UpgradeTicket {
            done,
            expected,
            value: handles.iter().map(|h| StageHandle::new(h.name())).collect(),
        })
    }
}
