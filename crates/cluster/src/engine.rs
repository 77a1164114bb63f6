//! The API every engine offers, and the single-process reference engine.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::evolve::{call_rng, child_id, root_id, Evolve, IdHash, IdMap, StateId};
use crate::registry::{decode, encode};
use crate::snapshot::Snapshot;

/// A parent's children's ids and outputs.
type Children<E> = Vec<(StateId, <E as Evolve>::Output)>;

/// What a share of a step gives: each parent's children's ids and outputs,
/// and the children's states.
struct Evolved<E: Evolve> {
    outs: Vec<(StateId, Children<E>)>,
    born: Vec<(StateId, E::State)>,
}

/// Each parent to evolve with its input: what [`Engine::evolve_many`]
/// takes. Collect `(StateId, input)` pairs into it.
pub type Inputs<E> = IdMap<<E as Evolve>::Input>;

/// Children and outputs per evolved parent, children in the order `evolve`
/// returned them.
pub type Outputs<E> = IdMap<Vec<(StateId, <E as Evolve>::Output)>>;

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
}

/// Every state in this process: the reference the distributed engine must
/// match bit for bit.
///
/// # Examples
/// ```
/// use statepipe_cluster::{Engine, Evolve, Inputs, Local, Rng};
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
/// let out = e.evolve_many(Inputs::<Twins>::from_iter([(ids[0], ())])).unwrap();
/// assert_eq!(out[&ids[0]].len(), 2);
/// ```
pub struct Local<E: Evolve> {
    model: E,
    seed: u64,
    step: u64,
    epoch: u64,
    threads: usize,
    states: HashMap<StateId, E::State, IdHash>,
    /// Time spent inside `evolve` calls in the last `evolve_many`, summed
    /// over threads.
    last_calls: Duration,
}

impl<E: Evolve> Local<E> {
    /// An empty engine for `model`, every random number derived from `seed`,
    /// evolving on the calling thread.
    pub fn new(model: E, seed: u64) -> Self {
        Local {
            model,
            seed,
            step: 0,
            epoch: 0,
            threads: 1,
            states: HashMap::default(),
            last_calls: Duration::ZERO,
        }
    }

    /// Evolves on `threads` scoped threads (at least 1) from now on. The
    /// results are the same bits for any number: every call's generator
    /// and every child's id depend on the parent, not on the thread.
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Evolves on `threads` threads (at least 1) from the next step on.
    pub(crate) fn set_threads(&mut self, threads: usize) {
        self.threads = threads.max(1);
    }

    /// The run as it stands, in the form [`Master::resume`] takes up: the
    /// rest of the run on workers gives the same bits as it would here.
    ///
    /// # Errors
    /// [`Error::Codec`] if a state does not serialise.
    ///
    /// [`Master::resume`]: crate::Master::resume
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        let mut states = self
            .states
            .iter()
            .map(|(id, s)| Ok((*id, encode(s)?)))
            .collect::<Result<Vec<_>, postcard::Error>>()?;
        states.sort_unstable_by_key(|(id, _)| *id);
        Ok(Snapshot {
            seed: self.seed,
            step: self.step,
            epoch: self.epoch,
            states,
        })
    }

    /// An engine for `model` that goes on from `snapshot` (taken by
    /// [`Local::snapshot`] or [`Master::snapshot`]): the rest of the run
    /// gives the same bits as if it had never stopped.
    ///
    /// # Errors
    /// [`Error::Codec`] if a state does not deserialise as `E::State`.
    ///
    /// [`Master::snapshot`]: crate::Master::snapshot
    pub fn resume(model: E, snapshot: Snapshot) -> Result<Self, Error> {
        let mut local = Local::new(model, snapshot.seed);
        local.step = snapshot.step;
        local.epoch = snapshot.epoch;
        for (id, bytes) in snapshot.states {
            if local.states.insert(id, decode(&bytes)?).is_some() {
                return Err(Error::IdCollision(id));
            }
        }
        Ok(local)
    }

    /// Time spent inside [`Evolve::evolve`] during the last
    /// [`Engine::evolve_many`], summed over threads.
    pub fn last_call_time(&self) -> Duration {
        self.last_calls
    }

    /// The state `id`, if held.
    pub(crate) fn state(&self, id: StateId) -> Option<&E::State> {
        self.states.get(&id)
    }

    /// The states held now.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether no state is held.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }

    /// Evolves `work` on up to `self.threads` threads; children in the
    /// order `evolve` returned them, and the summed call time.
    fn evolve_all(&self, work: Vec<(StateId, E::State, E::Input)>) -> (Vec<Evolved<E>>, Duration) {
        let (seed, step, model) = (self.seed, self.step, &self.model);
        let share = |part: Vec<(StateId, E::State, E::Input)>| {
            let t0 = Instant::now();
            let mut e = Evolved::<E> {
                outs: Vec::with_capacity(part.len()),
                born: Vec::with_capacity(part.len()),
            };
            for (parent, state, input) in part {
                let mut rng = call_rng(seed, step, parent);
                let kids = model.evolve(&state, &input, &mut rng);
                let mut outs = Vec::with_capacity(kids.len());
                for (i, (s, o)) in kids.into_iter().enumerate() {
                    let id = child_id(seed, step, parent, i as u32);
                    e.born.push((id, s));
                    outs.push((id, o));
                }
                e.outs.push((parent, outs));
            }
            (e, t0.elapsed())
        };
        if self.threads == 1 || work.len() <= 1 {
            let (e, t) = share(work);
            return (vec![e], t);
        }
        let chunk = work.len().div_ceil(self.threads);
        let mut work = work;
        let mut parts = Vec::with_capacity(self.threads);
        while work.len() > chunk {
            let rest = work.split_off(chunk);
            parts.push(std::mem::replace(&mut work, rest));
        }
        parts.push(work);
        // The first share runs on this thread, which would only wait.
        let mut parts = parts.into_iter();
        let first = parts.next().expect("at least one share");
        std::thread::scope(|scope| {
            let handles: Vec<_> = parts.map(|part| scope.spawn(move || share(part))).collect();
            let (e, mut busy) = share(first);
            let mut all = Vec::with_capacity(handles.len() + 1);
            all.push(e);
            for h in handles {
                let (e, t) = match h.join() {
                    Ok(r) => r,
                    Err(panic) => std::panic::resume_unwind(panic),
                };
                all.push(e);
                busy += t;
            }
            (all, busy)
        })
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

    fn evolve_many(&mut self, inputs: Inputs<E>) -> Result<Outputs<E>, Error> {
        // Take each parent out as it is looked up; if one is unknown, put
        // them back and do nothing.
        let mut work = Vec::with_capacity(inputs.len());
        let mut unknown = Vec::new();
        for (parent, input) in inputs {
            match self.states.remove(&parent) {
                Some(state) => work.push((parent, state, input)),
                None => unknown.push(parent),
            }
        }
        if !unknown.is_empty() {
            for (parent, state, _) in work {
                self.states.insert(parent, state);
            }
            return Err(Error::UnknownStates(unknown));
        }
        self.step += 1;
        let n = work.len();
        let (evolved, busy) = self.evolve_all(work);
        self.last_calls = busy;
        let mut out = Outputs::<E>::with_capacity_and_hasher(n, IdHash);
        let mut collision = None;
        for e in evolved {
            for (id, s) in e.born {
                if self.states.insert(id, s).is_some() {
                    collision.get_or_insert(id);
                }
            }
            out.extend(e.outs);
        }
        match collision {
            Some(id) => Err(Error::IdCollision(id)),
            None => Ok(out),
        }
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
