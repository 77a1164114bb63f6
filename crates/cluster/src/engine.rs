//! The API every engine offers ([`Engine`], [`Children`]); the
//! single-process reference engine is [`Local`](crate::Local).

use std::collections::HashMap;
use std::ops::Range;

use crate::error::Error;
use crate::evolve::{Evolve, IdHash, IdMap, StateId};
use crate::telemetry::Telemetry;

/// Each parent to evolve with its input: what [`Engine::evolve_many`]
/// takes. Collect `(StateId, input)` pairs into it.
pub type Inputs<E> = IdMap<<E as Evolve>::Input>;

/// Children and outputs per evolved parent, children in the order `evolve`
/// returned them.
pub type Outputs<E> = IdMap<Vec<(StateId, <E as Evolve>::Output)>>;

/// What [`Engine::evolve_batch`] gives: each parent's number of children,
/// in the order the parents were named, and the children's ids and
/// outputs, parent after parent. They are kept in parts (one per thread
/// that made them), so that no thread waits to copy another's; the
/// accessors read them as one sequence. Reuse one across steps: its
/// buffers are kept.
pub struct Children<E: Evolve> {
    parts: Vec<Part<E>>,
    used: usize,
}

impl<E: Evolve> std::fmt::Debug for Children<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Children")
            .field("parents", &self.parents())
            .field("children", &self.len())
            .finish()
    }
}

/// A thread's share of [`Children`] (aligned: threads' parts side by side
/// share no cache line).
#[repr(align(128))]
pub(crate) struct Part<E: Evolve> {
    pub(crate) counts: Vec<u32>,
    pub(crate) ids: Vec<StateId>,
    pub(crate) outputs: Vec<E::Output>,
}

impl<E: Evolve> Default for Part<E> {
    fn default() -> Self {
        Part {
            counts: Vec::new(),
            ids: Vec::new(),
            outputs: Vec::new(),
        }
    }
}

impl<E: Evolve> Part<E> {
    fn clear(&mut self) {
        self.counts.clear();
        self.ids.clear();
        self.outputs.clear();
    }
}

impl<E: Evolve> Default for Children<E> {
    fn default() -> Self {
        Children {
            parts: Vec::new(),
            used: 0,
        }
    }
}

impl<E: Evolve> Children<E> {
    /// An empty one.
    pub fn new() -> Self {
        Self::default()
    }

    fn used(&self) -> &[Part<E>] {
        &self.parts[..self.used]
    }

    /// Children in all.
    pub fn len(&self) -> usize {
        self.used().iter().map(|p| p.ids.len()).sum()
    }

    /// Whether there are no children.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Parents evolved.
    pub fn parents(&self) -> usize {
        self.used().iter().map(|p| p.counts.len()).sum()
    }

    /// Each parent's number of children, in the parents' order.
    pub fn counts(&self) -> impl Iterator<Item = u32> + '_ {
        self.used().iter().flat_map(|p| p.counts.iter().copied())
    }

    /// Every child's id and output, parent after parent.
    pub fn iter(&self) -> impl Iterator<Item = (StateId, &E::Output)> + '_ {
        self.used()
            .iter()
            .flat_map(|p| p.ids.iter().copied().zip(&p.outputs))
    }

    /// The children at positions `range` of [`Children::iter`]'s order,
    /// as runs of ids with their outputs.
    ///
    /// # Panics
    /// If `range` goes past the last child.
    pub fn slices(
        &self,
        range: Range<usize>,
    ) -> impl Iterator<Item = (&[StateId], &[E::Output])> + '_ {
        assert!(
            range.end <= self.len(),
            "children {range:?} of {}",
            self.len()
        );
        let mut at = 0;
        self.used().iter().filter_map(move |p| {
            let (lo, hi) = (at, at + p.ids.len());
            at = hi;
            let (a, b) = (range.start.max(lo), range.end.min(hi));
            (a < b).then(|| (&p.ids[a - lo..b - lo], &p.outputs[a - lo..b - lo]))
        })
    }

    /// Makes `n` parts, empty, keeping their buffers.
    pub(crate) fn reset(&mut self, n: usize) -> &mut [Part<E>] {
        if self.parts.len() < n {
            self.parts.resize_with(n, Part::default);
        }
        self.used = n;
        for p in &mut self.parts[..n] {
            p.clear();
        }
        &mut self.parts[..n]
    }

    /// Keeps the first `n` parts.
    pub(crate) fn truncate(&mut self, n: usize) {
        self.used = self.used.min(n);
    }

    /// Each parent's children, taken out, with the parents named in order.
    pub(crate) fn into_outputs(mut self, parents: &[StateId]) -> Outputs<E> {
        let mut out = Outputs::<E>::with_capacity_and_hasher(parents.len(), IdHash);
        let mut parents = parents.iter();
        for p in self.parts.drain(..self.used) {
            let mut kids = p.ids.into_iter().zip(p.outputs);
            for c in p.counts {
                let parent = parents.next().expect("a count per parent");
                out.insert(*parent, kids.by_ref().take(c as usize).collect());
            }
        }
        out
    }
}

/// States held somewhere, evolved by `E`: `resetStates` and `evolveMany` of
/// "Speeding up a distributed computation in Haskell" (FP Complete, 2017),
/// plus fetch and drop.
pub trait Engine<E: Evolve> {
    /// Forgets every state and holds `states`; returns their ids in order.
    ///
    /// # Errors
    /// If a state does not serialise or a worker is lost.
    fn reset_states(&mut self, states: Vec<E::State>) -> Result<Vec<StateId>, Error>;

    /// Evolves each named state with its input. Each parent is consumed and
    /// replaced by its children (a parent with no children dies); states not
    /// named are untouched.
    ///
    /// # Errors
    /// [`Error::UnknownStates`] (nothing done) or [`Error::WorkerLost`]
    /// (which says what became of each state).
    fn evolve_many(&mut self, inputs: Inputs<E>) -> Result<Outputs<E>, Error>;

    /// Copies of the named states.
    ///
    /// # Errors
    /// As `evolve_many`.
    fn fetch_states(&mut self, ids: &[StateId]) -> Result<HashMap<StateId, E::State>, Error>;

    /// Forgets the named states.
    ///
    /// # Errors
    /// As `evolve_many`.
    fn drop_states(&mut self, ids: &[StateId]) -> Result<(), Error>;

    /// Evolves `parents[i]` with `inputs[i]`, as [`Engine::evolve_many`]
    /// does, writing the children into `out` in the parents' order: the
    /// dense form of a step, for drivers that keep their particles in
    /// vectors. An engine that holds its states in that order evolves them
    /// where they are, without looking an id up. The default goes through
    /// `evolve_many`.
    ///
    /// # Errors
    /// As `evolve_many`; [`Error::Config`] if the slices differ in length
    /// or a parent is named twice.
    fn evolve_batch(
        &mut self,
        parents: &[StateId],
        inputs: &[E::Input],
        out: &mut Children<E>,
    ) -> Result<(), Error>
    where
        E::Input: Clone,
    {
        check_batch(parents, inputs)?;
        let map: Inputs<E> = parents
            .iter()
            .copied()
            .zip(inputs.iter().cloned())
            .collect();
        if map.len() != parents.len() {
            return Err(named_twice());
        }
        let mut got = self.evolve_many(map)?;
        let part = &mut out.reset(1)[0];
        for p in parents {
            let kids = got.remove(p).unwrap_or_default();
            part.counts.push(kids.len() as u32);
            for (id, o) in kids {
                part.ids.push(id);
                part.outputs.push(o);
            }
        }
        Ok(())
    }

    /// Threads this engine evolves on in this process: a driver may use as
    /// many for its own work between steps. The default is 1.
    fn threads(&self) -> usize {
        1
    }

    /// Where this engine shows its run as it goes, if anywhere: a driver
    /// adds its own series there (the particle filter its likelihood and
    /// effective sample size). A [`Master`](crate::Master) gives its
    /// [`MasterConfig::telemetry`](crate::MasterConfig::telemetry); the
    /// default is `None`.
    fn telemetry(&self) -> Option<Telemetry> {
        None
    }
}

pub(crate) fn check_batch<I>(parents: &[StateId], inputs: &[I]) -> Result<(), Error> {
    if parents.len() == inputs.len() {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "evolve_batch: {} parents and {} inputs",
            parents.len(),
            inputs.len()
        )))
    }
}

pub(crate) fn named_twice() -> Error {
    Error::Config("evolve_batch: a parent is named twice".into())
}
