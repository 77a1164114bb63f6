//! [`Local`]: every state in this process, in dense segments, evolved on
//! up to one thread per usable CPU.

use std::collections::HashMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::engine::{check_batch, named_twice, Children, Engine, Inputs, Outputs, Part};
use crate::error::Error;
use crate::evolve::{
    child_ids_into, child_key, root_id, step_key, Batch, Evolve, IdHash, IdMap, Offspring, StateId,
};
use crate::registry::{decode, encode};
use crate::snapshot::Snapshot;
use crate::threads::{threads_for, threads_for_first, usable_threads};

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
///
/// States are kept in dense vectors, in segments (one per thread that made
/// them), in the order their parents were named. A step that names every
/// held state in that order (a particle filter's) evolves them where they
/// are: each thread takes a contiguous share, checks its parents' ids
/// against the held ones, calls [`Evolve::evolve_batch`] and writes the
/// children into buffers reused from step to step. Other calls look ids up
/// in a map built once, when first needed after a step or a reset.
///
/// A new id (a child's, or a reset's root) is a hash, so two live states
/// could share one (about one chance in 2^64 / live² per step): such a
/// collision is reported
/// ([`Error::IdCollision`]) when the map is built. A step that names every
/// state in order needs no map and tells the two apart by position.
pub struct Local<E: Evolve> {
    model: E,
    seed: u64,
    step: u64,
    epoch: u64,
    threads: usize,
    /// The states, segment after segment.
    held: Vec<Seg<E>>,
    /// The last step's parents (cleared by the next step's threads), and
    /// the buffers the next step's children go into.
    next: Vec<Seg<E>>,
    /// Each thread's children as `evolve_batch` writes them.
    scratch: Vec<Offspring<E>>,
    /// Where each id is, once built after the last change.
    index: Option<IdMap<(u32, u32)>>,
    /// Time spent inside `evolve` calls in the last `evolve_many`, summed
    /// over threads.
    last_calls: Duration,
    /// The last step's call time per parent: how many threads the next
    /// step's share is worth.
    per_parent: Option<Duration>,
    /// Steps timed so far: `per_parent` is warm from the second on.
    timed: u32,
    /// Use `threads` whatever the calls cost (tests).
    forced: bool,
}

/// A run of held states with their ids (aligned: the segments threads
/// fill side by side share no cache line).
#[repr(align(128))]
struct Seg<E: Evolve> {
    ids: Vec<StateId>,
    states: Vec<E::State>,
}

impl<E: Evolve> Default for Seg<E> {
    fn default() -> Self {
        Seg {
            ids: Vec::new(),
            states: Vec::new(),
        }
    }
}

/// What a thread of a step works on: its parents' inputs, ids, and where
/// their states are held (segment, range).
struct Share<'a, I> {
    parents: &'a [StateId],
    inputs: &'a [I],
    pieces: Vec<(usize, Range<usize>)>,
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
            held: Vec::new(),
            next: Vec::new(),
            scratch: Vec::new(),
            index: Some(IdMap::default()),
            last_calls: Duration::ZERO,
            per_parent: None,
            timed: 0,
            forced: false,
        }
    }

    /// Evolves on up to `threads` threads of rayon's pool (at least 1, at most the
    /// CPUs this process may use: more would only queue) from now on. A
    /// step uses fewer when the last step's calls, timed, say a thread
    /// would get less than 100 µs of work (it would cost more than it
    /// saves); a step with no timing yet first evolves an eighth of one
    /// thread's share on the calling thread, timed, and spreads the rest
    /// as that says. The results are the same bits for any number: every call's
    /// generator and every child's id depend on the parent, not on the
    /// thread.
    #[must_use]
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.set_threads(threads);
        self
    }

    /// Evolves on `threads` threads (at least 1, at most the usable CPUs)
    /// from the next step on.
    pub(crate) fn set_threads(&mut self, threads: usize) {
        self.threads = threads.clamp(1, usable_threads());
    }

    /// As [`Local::set_threads`] without the CPUs' cap (tests check the
    /// bits on more threads than the host has).
    #[cfg(test)]
    pub(crate) fn force_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self.forced = true;
        self
    }

    /// As [`Local::set_threads`] without the CPUs' cap, timing kept: the
    /// first step probes on this thread, as on a machine with `threads`
    /// CPUs (tests).
    #[cfg(test)]
    pub(crate) fn uncapped_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// How many runs of states the engine holds (tests).
    #[cfg(test)]
    pub(crate) fn segments(&self) -> usize {
        self.held.len()
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
            .iter()
            .map(|(id, s)| Ok((id, encode(s)?)))
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
        local.restore(&snapshot)?;
        Ok(local)
    }

    /// Goes back to `snapshot` of this run (its seed): its states and
    /// counters.
    pub(crate) fn restore(&mut self, snapshot: &Snapshot) -> Result<(), Error> {
        if snapshot.seed != self.seed {
            return Err(Error::Config(format!(
                "the snapshot was taken with seed {}, the run has seed {}",
                snapshot.seed, self.seed
            )));
        }
        let mut seg = Seg::default();
        for (id, bytes) in &snapshot.states {
            seg.ids.push(*id);
            seg.states.push(decode(bytes)?);
        }
        self.step = snapshot.step;
        self.epoch = snapshot.epoch;
        self.held = vec![seg];
        self.index = None;
        self.index()?;
        Ok(())
    }

    /// Time spent inside [`Evolve::evolve`] during the last
    /// [`Engine::evolve_many`], summed over threads.
    pub fn last_call_time(&self) -> Duration {
        self.last_calls
    }

    /// The held states with their ids, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (StateId, &E::State)> + '_ {
        self.held
            .iter()
            .flat_map(|s| s.ids.iter().copied().zip(&s.states))
    }

    /// The states held now.
    pub fn len(&self) -> usize {
        self.held.iter().map(|s| s.ids.len()).sum()
    }

    /// Whether no state is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where each id is held; built if a change made it stale.
    fn index(&mut self) -> Result<&IdMap<(u32, u32)>, Error> {
        if self.index.is_none() {
            let mut m = IdMap::with_capacity_and_hasher(self.len(), IdHash);
            for (s, seg) in self.held.iter().enumerate() {
                for (i, id) in seg.ids.iter().enumerate() {
                    if m.insert(*id, (s as u32, i as u32)).is_some() {
                        return Err(Error::IdCollision(*id));
                    }
                }
            }
            self.index = Some(m);
        }
        Ok(self.index.as_ref().expect("just built"))
    }

    /// Whether `ids` are the held states' ids, in order.
    fn names_all(&self, ids: &[StateId]) -> bool {
        ids.len() == self.len() && {
            let mut at = 0;
            self.held.iter().all(|s| {
                let same = s.ids[..] == ids[at..at + s.ids.len()];
                at += s.ids.len();
                same
            })
        }
    }

    /// Cuts `parents[from..]` (held in `src`, in order) into `t`
    /// contiguous shares.
    fn shares<'a, I>(
        src: &[Seg<E>],
        parents: &'a [StateId],
        inputs: &'a [I],
        from: usize,
        t: usize,
    ) -> Vec<Share<'a, I>> {
        let n = parents.len() - from;
        let t = t.min(n).max(1);
        let mut shares = Vec::with_capacity(t);
        // Skip to position `from` of the segments.
        let (mut seg, mut off) = (0usize, from);
        while seg < src.len() && off >= src[seg].ids.len() && off > 0 {
            off -= src[seg].ids.len();
            seg += 1;
        }
        for k in 0..t {
            let (lo, hi) = (from + n * k / t, from + n * (k + 1) / t);
            let mut pieces = Vec::new();
            let mut want = hi - lo;
            while want > 0 {
                let len = src[seg].ids.len();
                let take = want.min(len - off);
                if take > 0 {
                    pieces.push((seg, off..off + take));
                }
                want -= take;
                off += take;
                if off == len {
                    seg += 1;
                    off = 0;
                }
            }
            shares.push(Share {
                parents: &parents[lo..hi],
                inputs: &inputs[lo..hi],
                pieces,
            });
        }
        shares
    }

    /// Threads for a step of `n` parents: as the last step's calls say
    /// ([`threads_for`], or [`threads_for_first`] after the first
    /// step alone), or all allowed.
    fn threads_for_step(&self, n: usize) -> usize {
        match self.per_parent {
            Some(p) if !self.forced && self.timed >= 2 => threads_for(p * n as u32, self.threads),
            Some(p) if !self.forced => threads_for_first(p * n as u32, self.threads),
            _ => self.threads,
        }
    }

    /// Evolves `parents` (with `inputs`), which are the states of `src` in
    /// order, into `self.next` (one segment per share) and `out`; with
    /// `check`, first makes sure they are. Returns false (nothing evolved)
    /// if they are not.
    fn run_step(
        &mut self,
        src: &[Seg<E>],
        parents: &[StateId],
        inputs: &[E::Input],
        out: &mut Children<E>,
        check: bool,
    ) -> bool {
        let n = parents.len();
        // A step with no timing yet (the first, or the first after a
        // restore) starts with a probe on this thread: an eighth of a
        // thread's share, timed, which says how many threads the rest is
        // worth. Without it a cheap model's first step would start the
        // pool's threads for work one thread does faster; with it, an
        // expensive model's first step takes at most an eighth longer.
        let eighth = n / (8 * self.threads);
        let probe = if self.per_parent.is_none() && !self.forced && self.threads > 1 && eighth > 0 {
            eighth
        } else {
            0
        };
        // Without a probe, the threads the last step's timing gives (with
        // one, all allowed until the probe is timed).
        let planned = self.threads_for_step(n - probe);
        let most = usize::from(probe > 0) + planned.min(n).max(1);
        self.next.resize_with(most, Seg::default);
        self.scratch.resize_with(most, Offspring::default);
        let parts = out.reset(most);
        let (seed, step, model) = (self.seed, self.step, &self.model);
        let key = step_key(seed, step);
        let kid_key = child_key(seed, step);
        let work = |share: &Share<'_, E::Input>,
                    next: &mut Seg<E>,
                    off: &mut Offspring<E>,
                    part: &mut Part<E>|
         -> Option<Duration> {
            // The last step's parents go here, on the thread that made them.
            next.ids.clear();
            next.states.clear();
            if check {
                let mut at = 0;
                for (s, r) in &share.pieces {
                    let ids = &src[*s].ids[r.clone()];
                    if ids != &share.parents[at..at + ids.len()] {
                        return None;
                    }
                    at += ids.len();
                }
            }
            let t0 = Instant::now();
            off.clear();
            let mut at = 0;
            for (s, r) in &share.pieces {
                let seg = &src[*s];
                let n = r.len();
                let batch = Batch::<E>::with_key(
                    key,
                    &seg.ids[r.clone()],
                    &seg.states[r.clone()],
                    &share.inputs[at..at + n],
                    Some((kid_key, at)),
                );
                model.evolve_batch(&batch, off);
                at += n;
            }
            let busy = t0.elapsed();
            assert_eq!(
                off.counts.len(),
                share.parents.len(),
                "{}'s evolve_batch closed {} parents of {}",
                E::NAME,
                off.counts.len(),
                share.parents.len()
            );
            assert_eq!(
                off.counts.iter().map(|&c| c as usize).sum::<usize>(),
                off.states.len(),
                "{}'s evolve_batch pushed children after its last parent",
                E::NAME
            );
            // The ids `Batch::child_normals` made beside the draws, if it
            // made them for exactly these children; else hashed here.
            if !off.take_child_ids(share.parents.len(), &mut part.ids) {
                child_ids_into(kid_key, share.parents, &off.counts, &mut part.ids);
            }
            next.ids.extend_from_slice(&part.ids);
            std::mem::swap(&mut next.states, &mut off.states);
            std::mem::swap(&mut part.outputs, &mut off.outputs);
            std::mem::swap(&mut part.counts, &mut off.counts);
            Some(busy)
        };
        let mut done = Vec::with_capacity(most);
        let (mut next, mut scratch, mut parts) = (&mut self.next[..], &mut self.scratch[..], parts);
        if probe > 0 {
            let share = Self::shares(src, &parents[..probe], &inputs[..probe], 0, 1);
            let busy = work(&share[0], &mut next[0], &mut scratch[0], &mut parts[0]);
            let Some(busy) = busy else {
                return false;
            };
            done.push(Some(busy));
            self.per_parent = Some(busy / probe as u32);
            (next, scratch, parts) = (&mut next[1..], &mut scratch[1..], &mut parts[1..]);
        }
        let t = if probe > 0 {
            // Timed by the probe alone: cold.
            match self.per_parent {
                Some(p) => threads_for_first(p * (n - probe) as u32, self.threads),
                None => self.threads,
            }
        } else {
            planned
        };
        let shares = if probe < n {
            Self::shares(src, parents, inputs, probe, t.min(parts.len()))
        } else {
            Vec::new()
        };
        let t = shares.len();
        let used = usize::from(probe > 0) + t;
        let jobs = shares
            .iter()
            .zip(next.iter_mut())
            .zip(scratch.iter_mut().zip(parts.iter_mut()));
        if t <= 1 {
            for ((share, next), (off, part)) in jobs {
                done.push(work(share, next, off, part));
            }
        } else {
            // On the pool's threads (rayon's, started once per process):
            // a thread per share and step would cost more than a cheap
            // model's share on many cores. Each share is its own task, and
            // `collect` keeps the shares' order.
            use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};
            let rest: Vec<_> = jobs
                .collect::<Vec<_>>()
                .into_par_iter()
                .with_max_len(1)
                .map(|((share, next), (off, part))| work(share, next, off, part))
                .collect();
            done.extend(rest);
        }
        if done.iter().any(Option::is_none) {
            return false;
        }
        self.next.truncate(used);
        out.truncate(used);
        self.last_calls = done.into_iter().flatten().sum();
        self.per_parent = Some(self.last_calls / parents.len().max(1) as u32);
        self.timed = self.timed.saturating_add(1);
        true
    }

    /// Evolves `parents` with `inputs` into `out`: in place if they are the
    /// held states in order, else by looking them up.
    fn evolve_dense(
        &mut self,
        parents: &[StateId],
        inputs: &[E::Input],
        out: &mut Children<E>,
    ) -> Result<(), Error> {
        check_batch(parents, inputs)?;
        if !parents.is_empty() && parents.len() == self.len() {
            self.step += 1;
            let held = std::mem::take(&mut self.held);
            if self.run_step(&held, parents, inputs, out, true) {
                // The parents become the buffers of the step after next.
                self.held = std::mem::replace(&mut self.next, held);
                self.index = None;
                return Ok(());
            }
            self.held = held;
            self.step -= 1;
        }
        // Look each parent up; if one is unknown or named twice, do nothing.
        let index = self.index()?;
        let mut at = Vec::with_capacity(parents.len());
        let mut unknown = Vec::new();
        for p in parents {
            match index.get(p) {
                Some(&w) => at.push(w),
                None => unknown.push(*p),
            }
        }
        if !unknown.is_empty() {
            return Err(Error::UnknownStates(unknown));
        }
        let mut seen = std::collections::HashSet::with_capacity_and_hasher(parents.len(), IdHash);
        if !parents.iter().all(|p| seen.insert(*p)) {
            return Err(named_twice());
        }
        drop(seen);
        let mut taken: Vec<Vec<Option<E::State>>> = std::mem::take(&mut self.held)
            .into_iter()
            .map(|s| s.states.into_iter().map(Some).collect())
            .collect();
        let mut work = Seg::<E> {
            ids: parents.to_vec(),
            states: Vec::with_capacity(parents.len()),
        };
        for &(s, i) in &at {
            work.states.extend(taken[s as usize][i as usize].take());
        }
        // What is left, in order.
        let index = self.index.take().expect("built above");
        let mut rest = Seg::<E>::default();
        let mut by_pos: Vec<(u32, u32, StateId)> =
            index.into_iter().map(|(id, (s, i))| (s, i, id)).collect();
        by_pos.sort_unstable();
        for (s, i, id) in by_pos {
            if let Some(st) = taken[s as usize][i as usize].take() {
                rest.ids.push(id);
                rest.states.push(st);
            }
        }
        self.step += 1;
        let src = [work];
        self.run_step(&src, parents, inputs, out, false);
        let mut held = vec![rest];
        held.append(&mut self.next);
        self.held = held;
        Ok(())
    }

    /// Forgets everything and holds `states` under `ids`.
    fn hold(&mut self, ids: Vec<StateId>, states: Vec<E::State>) {
        self.held = vec![Seg { ids, states }];
        self.next.clear();
        // Built when first needed, as after a step: a run whose steps name
        // every state in order never builds it (200,000 inserts were a
        // serial 2 % of a 2-thread filter run).
        self.index = None;
    }
}

/// `Err(UnknownStates)` naming every id of `ids` that `index` lacks.
fn all_known<V>(index: &IdMap<V>, ids: &[StateId]) -> Result<(), Error> {
    let unknown: Vec<_> = ids
        .iter()
        .filter(|i| !index.contains_key(i))
        .copied()
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(Error::UnknownStates(unknown))
    }
}

impl<E: Evolve> Engine<E> for Local<E>
where
    E::State: Clone,
{
    fn reset_states(&mut self, states: Vec<E::State>) -> Result<Vec<StateId>, Error> {
        self.epoch += 1;
        let ids: Vec<_> = (0..states.len() as u64)
            .map(|i| root_id(self.seed, self.epoch, i))
            .collect();
        self.hold(ids.clone(), states);
        Ok(ids)
    }

    fn evolve_many(&mut self, inputs: Inputs<E>) -> Result<Outputs<E>, Error> {
        let (parents, inputs): (Vec<StateId>, Vec<E::Input>) = inputs.into_iter().unzip();
        let mut out = Children::new();
        self.evolve_dense(&parents, &inputs, &mut out)?;
        Ok(out.into_outputs(&parents))
    }

    fn evolve_batch(
        &mut self,
        parents: &[StateId],
        inputs: &[E::Input],
        out: &mut Children<E>,
    ) -> Result<(), Error>
    where
        E::Input: Clone,
    {
        self.evolve_dense(parents, inputs, out)
    }

    fn threads(&self) -> usize {
        self.threads
    }

    fn fetch_states(&mut self, ids: &[StateId]) -> Result<HashMap<StateId, E::State>, Error> {
        let index = self.index()?;
        all_known(index, ids)?;
        let at: Vec<(u32, u32)> = ids.iter().map(|i| index[i]).collect();
        Ok(ids
            .iter()
            .zip(at)
            .map(|(i, (s, k))| (*i, self.held[s as usize].states[k as usize].clone()))
            .collect())
    }

    fn drop_states(&mut self, ids: &[StateId]) -> Result<(), Error> {
        if self.names_all(ids) {
            self.held.clear();
            self.index = Some(IdMap::default());
            return Ok(());
        }
        let index = self.index()?;
        all_known(index, ids)?;
        let gone: std::collections::HashSet<StateId, IdHash> = ids.iter().copied().collect();
        for seg in &mut self.held {
            let (ids, states) = (
                std::mem::take(&mut seg.ids),
                std::mem::take(&mut seg.states),
            );
            for (id, st) in ids.into_iter().zip(states) {
                if !gone.contains(&id) {
                    seg.ids.push(id);
                    seg.states.push(st);
                }
            }
        }
        self.index = None;
        Ok(())
    }
}
