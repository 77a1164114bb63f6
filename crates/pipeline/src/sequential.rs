//! The sequential interpreter: the meaning of a [`Pipeline`].
//!
//! Items enter one at a time, numbered from 0, and each goes through the whole
//! pipeline before the next enters, on the calling thread. Whatever a
//! deployment does (stages on many workers, shards in parallel), it must
//! produce these outputs in this order (per key for `shard_by_key`), these
//! failures and these final states.

use crate::failure::{Failure, StageState};
use std::any::Any;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::machine::Machine;
use crate::pipeline::Pipeline;
use crate::state::UpgradeError;
use crate::upgrade::{command, StageHandle};

/// What a finished run produced.
#[derive(Debug)]
pub struct Run<O> {
    /// Every output, in order.
    pub outputs: Vec<O>,
    /// For each output, the number of the input it came from.
    pub seqs: Vec<u64>,
    /// Every rejected item, in the order the stages rejected them.
    pub failures: Vec<Failure>,
    /// The final state of every stage, in description order.
    pub states: Vec<StageState>,
}

impl<O> Run<O> {
    /// The final state of the first stage named `name`, if it has type `S`.
    pub fn state<S: 'static>(&self, name: &str) -> Option<&S> {
        self.states.iter().find(|s| s.name == name)?.get()
    }
}

/// A pipeline being run sequentially, one item per [`push`](Interpreter::push):
/// a loop a test can step.
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::Pipeline;
///
/// let mut run = Pipeline::map("double", |x: i32| 2 * x).sequential();
/// assert_eq!(run.push(1), 0);
/// assert_eq!(run.push(5), 1);
/// assert_eq!(run.outputs(), [2, 10]);
/// let done = run.finish();
/// assert_eq!(done.seqs, [0, 1]);
/// ```
pub struct Interpreter<I, O> {
    pipeline: Pipeline<I, O>,
    next_seq: u64,
    outputs: Vec<O>,
    seqs: Vec<u64>,
    failures: Vec<Failure>,
}

impl<I, O> Interpreter<I, O> {
    /// Runs one item through the whole pipeline; returns its sequence number.
    pub fn push(&mut self, item: I) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let (outputs, seqs) = (&mut self.outputs, &mut self.seqs);
        self.pipeline
            .push(seq, item, &mut self.failures, &mut |o, _| {
                outputs.push(o);
                seqs.push(seq);
            });
        seq
    }

    /// The outputs so far.
    pub fn outputs(&self) -> &[O] {
        &self.outputs
    }

    /// The failures so far.
    pub fn failures(&self) -> &[Failure] {
        &self.failures
    }

    /// Switches the stage `handle` names to `machine`, its state made by
    /// `migrate` from the old one, between the last push and the next: the
    /// meaning of [`Running::upgrade`](crate::Running::upgrade) at the same
    /// item. Returns the handle for the new state type.
    ///
    /// # Errors
    ///
    /// [`UpgradeError`] if no upgradable stage has that name, its state is
    /// not an `S`, or `migrate` fails; then nothing changed.
    pub fn upgrade<S, S2, M, F, E>(
        &mut self,
        handle: &StageHandle<S, M::In, M::Out>,
        machine: M,
        migrate: F,
    ) -> Result<StageHandle<S2, M::In, M::Out>, UpgradeError>
    where
        S: 'static,
        S2: Serialize + DeserializeOwned + Clone + Send + 'static,
        M: Machine<S2> + Send + 'static,
        M::In: Send + 'static,
        M::Out: Send + 'static,
        F: FnOnce(&S) -> Result<S2, E> + Send + 'static,
        E: std::fmt::Display,
    {
        let mut cmd: Option<Box<dyn Any + Send>> =
            Some(Box::new(command(handle, machine, migrate)));
        let mut result = Err(UpgradeError::NoSuchStage(handle.name().to_string()));
        self.pipeline.node.visit(&mut |cell| {
            if cell.name() == handle.name() {
                if let Some(c) = cmd.take() {
                    result = cell.upgrade(c);
                }
            }
        });
        result.map(|()| StageHandle::new(handle.name()))
    }

    /// Ends the run: everything produced, and the final states.
    pub fn finish(self) -> Run<O> {
        let mut states = Vec::new();
        self.pipeline.states(&mut states);
        Run {
            outputs: self.outputs,
            seqs: self.seqs,
            failures: self.failures,
            states,
        }
    }
}

impl<I: Send + 'static, O: Send + 'static> Pipeline<I, O> {
    /// Starts a sequential run that is fed one item at a time.
    pub fn sequential(self) -> Interpreter<I, O> {
        Interpreter {
            pipeline: self,
            next_seq: 0,
            outputs: Vec::new(),
            seqs: Vec::new(),
            failures: Vec::new(),
        }
    }

    /// Runs every input through the pipeline in order, on this thread: the
    /// reference meaning of the pipeline.
    pub fn run_sequential(self, inputs: impl IntoIterator<Item = I>) -> Run<O> {
        let mut run = self.sequential();
        for x in inputs {
            run.push(x);
        }
        run.finish()
    }
}
