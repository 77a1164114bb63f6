//! The API every engine offers, and the single-process reference engine.

use std::collections::HashMap;

use crate::error::Error;
use crate::evolve::{call_rng, child_id, root_id, Evolve, StateId};

/// Children and outputs per evolved parent, children in the order `evolve`
/// returned them.
pub type Outputs<E> = HashMap<StateId, Vec<(StateId, <E as Evolve>::Output)>>;

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
    fn evolve_many(&mut self, inputs: HashMap<StateId, E::Input>) -> Result<Outputs<E>, Error>;

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
}

/// Every state in this process: the reference the distributed engine must
/// match bit for bit.
///
/// # Examples
/// ```
/// use std::collections::HashMap;
/// use statepipe_cluster::{Engine, Evolve, Local, Rng};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Twins;
/// impl Evolve for Twins {
///     const NAME: &'static str = "twins";
///     type State = u32;
///     type Input = ();
///     type Output = u32;
///     fn evolve(&self, s: &u32, _: &(), _: &mut Rng) -> Vec<(u32, u32)> {
///         vec![(s + 1, s + 1), (s + 1, s + 1)]
///     }
/// }
/// let mut e = Local::new(Twins, 7);
/// let ids = e.reset_states(vec![1, 2]).unwrap();
/// let out = e.evolve_many(HashMap::from([(ids[0], ())])).unwrap();
/// assert_eq!(out[&ids[0]].len(), 2);
/// ```
pub struct Local<E: Evolve> {
    model: E,
    seed: u64,
    step: u64,
    epoch: u64,
    states: HashMap<StateId, E::State>,
}

impl<E: Evolve> Local<E> {
    /// An empty engine for `model`, every random number derived from `seed`.
    pub fn new(model: E, seed: u64) -> Self {
        Local {
            model,
            seed,
            step: 0,
            epoch: 0,
            states: HashMap::new(),
        }
    }

    fn check(&self, ids: impl Iterator<Item = StateId>) -> Result<(), Error> {
        let unknown: Vec<_> = ids.filter(|i| !self.states.contains_key(i)).collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(Error::UnknownStates(unknown))
        }
    }
}

impl<E: Evolve> Engine<E> for Local<E>
where
    E::State: Clone,
{
    fn reset_states(&mut self, states: Vec<E::State>) -> Result<Vec<StateId>, Error> {
        self.epoch += 1;
        self.states.clear();
        let ids: Vec<_> = (0..states.len() as u64)
            .map(|i| root_id(self.seed, self.epoch, i))
            .collect();
        for (id, s) in ids.iter().zip(states) {
            if self.states.insert(*id, s).is_some() {
                return Err(Error::IdCollision(*id));
            }
        }
        Ok(ids)
    }

    fn evolve_many(&mut self, inputs: HashMap<StateId, E::Input>) -> Result<Outputs<E>, Error> {
        self.check(inputs.keys().copied())?;
        self.step += 1;
        let mut born = Vec::new();
        let mut out = HashMap::with_capacity(inputs.len());
        for (parent, input) in inputs {
            let state = self.states.remove(&parent).expect("checked above");
            let mut rng = call_rng(self.seed, self.step, parent);
            let kids = self.model.evolve(&state, &input, &mut rng);
            let mut outs = Vec::with_capacity(kids.len());
            for (i, (s, o)) in kids.into_iter().enumerate() {
                let id = child_id(self.seed, self.step, parent, i as u32);
                born.push((id, s));
                outs.push((id, o));
            }
            out.insert(parent, outs);
        }
        for (id, s) in born {
            if self.states.insert(id, s).is_some() {
                return Err(Error::IdCollision(id));
            }
        }
        Ok(out)
    }

    fn fetch_states(&mut self, ids: &[StateId]) -> Result<HashMap<StateId, E::State>, Error> {
        self.check(ids.iter().copied())?;
        Ok(ids.iter().map(|i| (*i, self.states[i].clone())).collect())
    }

    fn drop_states(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.check(ids.iter().copied())?;
        for i in ids {
            self.states.remove(i);
        }
        Ok(())
    }
}
