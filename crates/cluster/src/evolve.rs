//! The user's side: the [`Evolve`] trait, its batches, and the derivation
//! of every random number from `(run seed, step, parent)` (the ids' in
//! `ids.rs`).
//!
//! Nothing here depends on which worker runs a call, so a run gives the same
//! bits on one process or on 450.

use serde::de::DeserializeOwned;
use serde::Serialize;

pub(crate) use crate::ids::{child_id, child_ids_into, child_key, root_id, step_key};
pub use crate::ids::{IdHash, IdHasher, IdMap, StateId};
use crate::philox::fill_normals;
use crate::rng::{Rng, Rngs};

/// A computation on states that live on workers.
///
/// The value itself (a model and its parameters) is serialised once and sent
/// to every worker at setup; workers find the code by [`Evolve::NAME`] in
/// their [`Registry`](crate::Registry).
///
/// # Examples
/// ```
/// use rand::Rng as _;
/// use serde::{Deserialize, Serialize};
/// use statepipe_cluster::{Evolve, Rng};
///
/// #[derive(Serialize, Deserialize)]
/// struct Split;
/// impl Evolve for Split {
///     const NAME: &'static str = "doc-split";
///     type State = u64;
///     type Input = u32;
///     type Output = u64;
///     fn evolve(&self, s: &u64, n: &u32, rng: &mut Rng) -> Vec<(u64, u64)> {
///         (0..*n).map(|_| { let c = s + rng.random_range(0..10); (c, c) }).collect()
///     }
/// }
/// ```
pub trait Evolve: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The name workers know this computation by.
    const NAME: &'static str;
    /// What lives on a worker between steps (`Sync`: an engine's threads
    /// read a step's states where they are held).
    type State: Serialize + DeserializeOwned + Send + Sync;
    /// What the master sends with each state to evolve.
    type Input: Serialize + DeserializeOwned + Send + Sync;
    /// What comes back to the master with each child.
    type Output: Serialize + DeserializeOwned + Send;

    /// Children of `state` given `input`, each with an output; may be empty.
    /// `rng` is determined by the run seed, the step and the parent's id.
    fn evolve(
        &self,
        state: &Self::State,
        input: &Self::Input,
        rng: &mut Rng,
    ) -> Vec<(Self::State, Self::Output)>;

    /// The expected cost of evolving a state with `input`, on any scale
    /// (only ratios matter). The master places and orders work by it:
    /// each step it evens out expected work per worker and starts the
    /// longest calls first, which is what bounds a step's duration when a
    /// few calls are much slower than the rest. The default, 1, treats all
    /// calls alike; a cost that is not finite or is negative counts as 1.
    fn expected_cost(&self, input: &Self::Input) -> f64 {
        let _ = input;
        1.0
    }

    /// Whether the model, just deserialised on a worker, can run there;
    /// `Err` says why not (a model that loads code or data when it is
    /// deserialised keeps what failed here, since a deserialiser's own
    /// message does not survive every format). The worker then fails its
    /// `Setup` with the message, and the master's constructor returns it.
    /// The default is `Ok`.
    ///
    /// # Errors
    /// A message saying what the worker lacks.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// Evolves every parent of `batch` for one step, appending each one's
    /// children to `out` in order and closing each parent with
    /// [`Offspring::end_parent`] (exactly `batch.len()` times). Parent `i`'s
    /// children must be the bits [`Evolve::evolve`] gives for
    /// `batch.states()[i]` and `batch.inputs()[i]` with the generator
    /// `batch.rng(i)`: engines call this method on each share of a step,
    /// and a run gives the same bits whichever engine runs it.
    ///
    /// The default calls `evolve` on each parent. A model whose calls cost
    /// nanoseconds overrides it to hoist its per-call set-up out of the
    /// loop and write children straight into `out`'s reused buffers.
    fn evolve_batch(&self, batch: &Batch<'_, Self>, out: &mut Offspring<Self>) {
        for (i, (s, input)) in batch.states().iter().zip(batch.inputs()).enumerate() {
            let mut rng = batch.rng(i);
            for (c, o) in self.evolve(s, input, &mut rng) {
                out.push(c, o);
            }
            out.end_parent();
        }
    }
}

/// A share of a step for [`Evolve::evolve_batch`]: parents' ids, states
/// and inputs in matching order, and the step's generators.
pub struct Batch<'a, E: Evolve> {
    ids: &'a [StateId],
    states: &'a [E::State],
    inputs: &'a [E::Input],
    key: [u32; 2],
    /// In a batch an engine made: the key of the step's child ids, and
    /// the position of the first parent in the engine's share of the step
    /// ([`Batch::child_normals`] then makes the children's ids too).
    kids: Option<(u64, usize)>,
}

impl<E: Evolve> std::fmt::Debug for Batch<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("ids", &self.ids)
            .finish_non_exhaustive()
    }
}

impl<E: Evolve> std::fmt::Debug for Offspring<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offspring")
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl<'a, E: Evolve> Batch<'a, E> {
    /// The parents `ids` with their `states` and `inputs`, at `step` of a run
    /// seeded `seed` (for testing a model's `evolve_batch`; engines make
    /// their own).
    ///
    /// # Panics
    /// If the three slices differ in length.
    pub fn new(
        seed: u64,
        step: u64,
        ids: &'a [StateId],
        states: &'a [E::State],
        inputs: &'a [E::Input],
    ) -> Self {
        assert!(
            ids.len() == states.len() && ids.len() == inputs.len(),
            "a batch of {} ids, {} states and {} inputs",
            ids.len(),
            states.len(),
            inputs.len()
        );
        Batch {
            ids,
            states,
            inputs,
            key: step_key(seed, step),
            kids: None,
        }
    }

    /// As [`Batch::new`] with the step's key already derived, and with
    /// `kids`: the child ids' key and the position of `ids[0]` in the
    /// engine's share (see [`Offspring::take_child_ids`]).
    pub(crate) fn with_key(
        key: [u32; 2],
        ids: &'a [StateId],
        states: &'a [E::State],
        inputs: &'a [E::Input],
        kids: Option<(u64, usize)>,
    ) -> Self {
        debug_assert!(ids.len() == states.len() && ids.len() == inputs.len());
        Batch {
            ids,
            states,
            inputs,
            key,
            kids,
        }
    }

    /// The parents at positions `range` of this batch, as a batch of
    /// their own (with the same generators: [`Batch::rng`]`(i)` of the
    /// part is `rng(range.start + i)` of the whole). A model that makes a
    /// step in several passes over its children goes through a large
    /// batch in parts, so that its buffers stay in cache.
    ///
    /// # Panics
    /// If `range` is out of bounds.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Batch<'a, E> {
        Batch {
            ids: &self.ids[range.clone()],
            states: &self.states[range.clone()],
            kids: self.kids.map(|(k, at)| (k, at + range.start)),
            inputs: &self.inputs[range],
            key: self.key,
        }
    }

    /// Parents in the batch.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The parents' ids.
    pub fn ids(&self) -> &'a [StateId] {
        self.ids
    }

    /// The parents' states.
    pub fn states(&self) -> &'a [E::State] {
        self.states
    }

    /// The parents' inputs.
    pub fn inputs(&self) -> &'a [E::Input] {
        self.inputs
    }

    /// Parent `i`'s generator: [`call_rng`](crate::call_rng) of the run's seed, the step and
    /// the parent's id.
    #[inline]
    pub fn rng(&self, i: usize) -> Rng {
        Rng::keyed(self.key, self.ids[i].0)
    }

    /// Every parent's generator in order ([`Batch::rng`] of 0, 1, …): the
    /// same numbers, with the first block of sixteen parents' generators
    /// made at once (vectorised), which is most of a cheap model's draws.
    #[inline]
    pub fn rngs(&self) -> Rngs<'a> {
        Rngs::new(self.key, self.ids)
    }
}

impl<E: Evolve> Batch<'_, E> {
    /// Each child's parent and normal draw, parent `i` having `counts[i]`
    /// children (one count per parent, in order): child `k` of parent `i`
    /// gets the `k`-th [`Rng::normal`] of [`Batch::rng`]`(i)`, the bits a
    /// model that draws one normal per child, and nothing else, gets by
    /// drawing them one by one. Made sixteen children at a time in vector
    /// registers, with no branch per child. In an engine's batch the
    /// children's ids are made in the same pass (the parents' ids are in
    /// registers already), and the engine takes them instead of hashing
    /// the ids again when the calls covered its whole share in order with
    /// the counts the model then closed its parents with.
    ///
    /// # Panics
    /// If `counts` does not have one count per parent.
    pub fn child_normals(&self, counts: impl Iterator<Item = u32> + Clone, out: &mut ChildNormals) {
        let n: usize = counts.clone().map(|c| c as usize).sum();
        let counted = counts.clone();
        let (parent, index) = (&mut out.parent, &mut out.index);
        // Four slots per parent whatever its count: the next parent's
        // overwrite those past this one's children (no branch per count).
        // The buffers only grow: what they hold is overwritten, not
        // cleared first.
        parent.resize(parent.len().max(n + 4), 0);
        index.resize(index.len().max(n + 4), 0);
        let (mut at, mut parents) = (0, 0);
        for (i, c) in counts.enumerate() {
            let (c, i) = (c as usize, i as u32);
            parent[at..at + 4].copy_from_slice(&[i; 4]);
            index[at..at + 4].copy_from_slice(&[0, 1, 2, 3]);
            for k in 4..c {
                parent[at + k] = i;
                index[at + k] = k as u32;
            }
            at += c;
            parents += 1;
        }
        assert_eq!(
            parents,
            self.len(),
            "counts for {parents} parents, a batch of {}",
            self.len()
        );
        parent.truncate(n);
        index.truncate(n);
        out.z.resize(n, 0.0);
        let kids = match self.kids {
            Some((kid_key, at)) => out
                .kids
                .follow(at, self.ids.len(), counted)
                .map(|ids| (kid_key, ids)),
            None => None,
        };
        match kids {
            Some((kid_key, ids)) => {
                let start = ids.len();
                ids.resize(start + n, StateId(0));
                let kids = Some((kid_key, &mut ids[start..]));
                fill_normals(self.key, self.ids, parent, index, &mut out.z, kids);
            }
            None => fill_normals(self.key, self.ids, parent, index, &mut out.z, None),
        }
    }
}

/// What [`Batch::child_normals`] writes: each child's parent (its index
/// in the batch) and normal draw. Keep one and reuse its buffers.
#[derive(Debug, Clone, Default)]
pub struct ChildNormals {
    parent: Vec<u32>,
    index: Vec<u32>,
    z: Vec<f64>,
    kids: Kids,
}

/// The children's ids that [`Batch::child_normals`] makes beside their
/// draws in an engine's batches, call after call through the engine's
/// share of a step: what the engine would otherwise hash again
/// ([`Offspring::take_child_ids`] says when it may use them).
#[derive(Debug, Clone, Default)]
struct Kids {
    ids: Vec<StateId>,
    /// The counts they were made for, parent after parent.
    counts: Vec<u32>,
    /// The share's position the next call must start at to be appended.
    next: usize,
    /// Whether the calls so far tiled the share from its start.
    ok: bool,
}

impl Kids {
    /// Where a call for the parents at `at .. at + len` of the share with
    /// `counts` appends its children's ids: a call at 0 starts again, one
    /// that does not follow the last leaves none usable.
    fn follow(
        &mut self,
        at: usize,
        len: usize,
        counts: impl Iterator<Item = u32>,
    ) -> Option<&mut Vec<StateId>> {
        if at == 0 {
            self.clear();
            self.ok = true;
        }
        if !self.ok || at != self.next {
            self.ok = false;
            return None;
        }
        self.next += len;
        self.counts.extend(counts);
        Some(&mut self.ids)
    }

    fn clear(&mut self) {
        self.ids.clear();
        self.counts.clear();
        self.next = 0;
        self.ok = false;
    }
}

impl ChildNormals {
    /// An empty one.
    pub fn new() -> Self {
        Self::default()
    }

    /// Each child's parent, as an index into the batch.
    pub fn parents(&self) -> &[u32] {
        &self.parent
    }

    /// Each child's standard normal draw.
    pub fn normals(&self) -> &[f64] {
        &self.z
    }

    /// [`ChildNormals::parents`], and the draws to overwrite (with what a
    /// model makes of them: its children's values, say).
    pub fn parents_and_normals_mut(&mut self) -> (&[u32], &mut [f64]) {
        (&self.parent, &mut self.z)
    }

    /// Children in all.
    pub fn len(&self) -> usize {
        self.z.len()
    }

    /// Whether there are no children.
    pub fn is_empty(&self) -> bool {
        self.z.is_empty()
    }
}

/// Children written by [`Evolve::evolve_batch`]: states and outputs in
/// order, and how many each parent had. An engine keeps one per thread and
/// clears it each step, so a step in its steady state allocates nothing.
/// Aligned to 128 bytes: threads' buffers side by side share no cache line.
#[repr(align(128))]
pub struct Offspring<E: Evolve> {
    pub(crate) states: Vec<E::State>,
    pub(crate) outputs: Vec<E::Output>,
    pub(crate) counts: Vec<u32>,
    open: u32,
    /// Buffers lent to the model ([`Offspring::take_draws`]).
    draws: ChildNormals,
}

impl<E: Evolve> Default for Offspring<E> {
    fn default() -> Self {
        Offspring {
            states: Vec::new(),
            outputs: Vec::new(),
            counts: Vec::new(),
            open: 0,
            draws: ChildNormals::default(),
        }
    }
}

impl<E: Evolve> Offspring<E> {
    /// An empty one.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a child of the current parent.
    #[inline]
    pub fn push(&mut self, state: E::State, output: E::Output) {
        self.states.push(state);
        self.outputs.push(output);
        self.open += 1;
    }

    /// Closes the current parent: the children pushed since the last call
    /// are its (possibly none).
    #[inline]
    pub fn end_parent(&mut self) {
        self.counts.push(self.open);
        self.open = 0;
    }

    /// Adds whole parents at once: one per count in `counts`, closed with
    /// that many children (as [`Offspring::end_parent`] would), and the
    /// children's `states` and `outputs` in order (as [`Offspring::push`]
    /// would). Plain extends of the buffers, which vectorise where a loop
    /// of pushes does not.
    ///
    /// # Panics
    /// If a parent is open, or the counts, states and outputs do not agree.
    pub fn extend_parents(
        &mut self,
        counts: impl IntoIterator<Item = u32>,
        states: impl IntoIterator<Item = E::State>,
        outputs: impl IntoIterator<Item = E::Output>,
    ) {
        assert_eq!(self.open, 0, "extend_parents with a parent open");
        let (p, s, o) = (self.counts.len(), self.states.len(), self.outputs.len());
        self.counts.extend(counts);
        self.states.extend(states);
        self.outputs.extend(outputs);
        let n: usize = self.counts[p..].iter().map(|&c| c as usize).sum();
        assert!(
            self.states.len() - s == n && self.outputs.len() - o == n,
            "extend_parents: counts for {n} children, {} states and {} outputs",
            self.states.len() - s,
            self.outputs.len() - o
        );
    }

    /// The buffers of a [`ChildNormals`] kept with this one, for
    /// [`Batch::child_normals`]: an engine keeps an `Offspring` per thread
    /// from step to step, so a model that gives them back
    /// ([`Offspring::keep_draws`]) allocates nothing in its steady state.
    pub fn take_draws(&mut self) -> ChildNormals {
        std::mem::take(&mut self.draws)
    }

    /// Gives back what [`Offspring::take_draws`] lent.
    pub fn keep_draws(&mut self, draws: ChildNormals) {
        self.draws = draws;
    }

    /// Makes room for `children` more children and `parents` more parents.
    pub fn reserve(&mut self, parents: usize, children: usize) {
        self.states.reserve(children);
        self.outputs.reserve(children);
        self.counts.reserve(parents);
    }

    /// The children's states, in order.
    pub fn states(&self) -> &[E::State] {
        &self.states
    }

    /// The children's outputs, in order.
    pub fn outputs(&self) -> &[E::Output] {
        &self.outputs
    }

    /// Each closed parent's number of children.
    pub fn counts(&self) -> &[u32] {
        &self.counts
    }

    /// Forgets everything, keeping the buffers.
    pub fn clear(&mut self) {
        self.states.clear();
        self.outputs.clear();
        self.counts.clear();
        self.open = 0;
        self.draws.kids.clear();
    }

    /// The ids of all the children, if [`Batch::child_normals`] made them
    /// for exactly these: calls through the engine's `parents` in order
    /// from the first, with the counts the model closed its parents with.
    /// Swapped into `ids` (which must be empty); false leaves `ids` as is.
    pub(crate) fn take_child_ids(&mut self, parents: usize, ids: &mut Vec<StateId>) -> bool {
        let kids = &mut self.draws.kids;
        if !(kids.ok && kids.next == parents && kids.counts == self.counts) {
            return false;
        }
        debug_assert!(ids.is_empty());
        std::mem::swap(ids, &mut kids.ids);
        kids.clear();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{child_id_keyed, mix64};
    use crate::rng::call_rng;
    use rand::RngCore as _;

    #[test]
    fn child_normals_and_ids_are_the_one_by_one_bits() {
        use crate::tests::kid_ids::Unit;
        let n = 45;
        let ids: Vec<StateId> = (0..n).map(|i| StateId(mix64(i as u64))).collect();
        let counts: Vec<u32> = (0..n).map(|i| [0, 1, 2, 7, 3, 0, 5, 1, 4][i % 9]).collect();
        let (states, inputs) = (vec![(); n], vec![(); n]);
        let batch = Batch::<Unit>::new(5, 6, &ids, &states, &inputs);
        let mut draws = ChildNormals::new();
        batch.child_normals(counts.iter().copied(), &mut draws);
        let mut j = 0;
        for (i, &c) in counts.iter().enumerate() {
            let mut rng = call_rng(5, 6, ids[i]);
            for _ in 0..c {
                assert_eq!(draws.parents()[j], i as u32);
                assert_eq!(draws.normals()[j].to_bits(), rng.normal().to_bits());
                j += 1;
            }
        }
        assert_eq!(j, draws.len());
        // The widest vector unit gives the baseline's bits.
        let parent: Vec<u32> = draws.parents().to_vec();
        let index: Vec<u32> = (0..j as u32).map(|k| k % 5).collect();
        let mut want = vec![0.0; j];
        crate::philox::fill_normals_any(step_key(5, 6), &ids, &parent, &index, &mut want, None);
        let mut got = vec![0.0; j];
        crate::philox::fill_normals(step_key(5, 6), &ids, &parent, &index, &mut got, None);
        assert_eq!(got, want);
        // A normal skips the rest of a block partly read.
        let mut a = call_rng(1, 2, StateId(3));
        a.next_u32();
        let mut b = call_rng(1, 2, StateId(3));
        b.normal();
        assert_eq!(a.normal().to_bits(), b.normal().to_bits());
        // Children's ids, appended.
        let mut got = vec![StateId(9)];
        child_ids_into(77, &ids, &counts, &mut got);
        let want: Vec<StateId> = std::iter::once(StateId(9))
            .chain(
                ids.iter()
                    .zip(&counts)
                    .flat_map(|(&p, &c)| (0..c).map(move |k| child_id_keyed(77, p, k))),
            )
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_batch_hands_out_each_parents_call_rng() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Draw;
        impl Evolve for Draw {
            const NAME: &'static str = "draw";
            type State = ();
            type Input = ();
            type Output = u64;
            fn evolve(&self, _: &(), _: &(), rng: &mut Rng) -> Vec<((), u64)> {
                vec![((), rng.next_u64())]
            }
        }
        let ids: Vec<StateId> = (0..40).map(|i| StateId(mix64(i))).collect();
        let (states, inputs) = (vec![(); 40], vec![(); 40]);
        let batch = Batch::<Draw>::new(5, 6, &ids, &states, &inputs);
        let mut seen = Vec::new();
        for (i, mut rng) in batch.rngs().enumerate() {
            let mut reference = call_rng(5, 6, ids[i]);
            let mut again = batch.rng(i);
            for _ in 0..5 {
                let x = rng.next_u64();
                assert_eq!(x, reference.next_u64());
                assert_eq!(x, again.next_u64());
            }
            seen.push(i);
        }
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
        // The default `evolve_batch` gives `evolve`'s children.
        let mut out = Offspring::new();
        Draw.evolve_batch(&batch, &mut out);
        assert_eq!(out.counts(), &[1; 40][..]);
        for (i, o) in out.outputs().iter().enumerate() {
            assert_eq!(*o, call_rng(5, 6, ids[i]).next_u64());
        }
    }
}
