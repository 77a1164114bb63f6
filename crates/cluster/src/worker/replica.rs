//! Replicas a worker holds for its buddies (`Recovery::Buddy`).
//!
//! A replication round: the master sends each worker `Replicate { round,
//! origin, to }`; the worker copies every state it holds into `Replica`
//! frames to its buddy `to` (split so that no frame nears the size limit)
//! and answers `Shipped n`. The buddy keeps them as *pending* for that
//! origin and, once all `n` have come, tells the master `Held`. When every
//! worker's replica is held, the master sends `Commit { round }` to all:
//! the pending replicas of that round become the committed ones, and the
//! older committed ones go. Until then the previous round's replicas stay:
//! a loss during a round is recovered from the round before it.
//!
//! Fencing: a replica of an older round (from a worker the master has
//! since declared lost, say) is never committed, because `Commit` names the
//! round and a lost worker is never asked to replicate again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::conn::lock;
use crate::evolve::StateId;

/// A replica on its way: its round, how many states it has, and those
/// that came so far.
type Pending = (u64, u32, Vec<(StateId, Vec<u8>)>);

/// Replicas by origin and round, shared by the worker's threads.
#[derive(Default)]
pub(crate) struct Replicas {
    /// Per origin.
    pending: HashMap<u32, Pending>,
    /// The last committed round's replicas, and the states this worker
    /// gave away since (see [`Replicas::keep_given`]).
    committed: HashMap<StateId, Vec<u8>>,
    /// Whether a round has committed since the last `Setup`: buddy mode.
    rounds: bool,
}

/// [`Replicas`] behind a lock.
pub(crate) type ReplicaStore = Arc<Mutex<Replicas>>;

impl Replicas {
    /// Takes part of `origin`'s replica for `round` (of `total` states);
    /// returns whether it is now complete.
    pub(crate) fn receive(
        &mut self,
        round: u64,
        origin: u32,
        total: u32,
        states: impl Iterator<Item = (StateId, Vec<u8>)>,
    ) -> bool {
        let e = self
            .pending
            .entry(origin)
            .or_insert_with(|| (round, total, Vec::new()));
        if e.0 != round {
            *e = (round, total, Vec::new());
        }
        e.2.extend(states);
        e.2.len() == e.1 as usize
    }

    /// Makes `round`'s complete replicas the committed ones.
    pub(crate) fn commit(&mut self, round: u64) {
        let mut next = HashMap::new();
        self.pending.retain(|_, (r, total, states)| {
            if *r == round && states.len() == *total as usize {
                next.extend(std::mem::take(states));
            }
            *r > round
        });
        self.committed = next;
        self.rounds = true;
    }

    /// Keeps states this worker just gave away (a move) as replicas until
    /// the next commit, in buddy mode: their replicas sit on this worker's
    /// buddies, not on the new holder's, so the copy given away is what
    /// keeps a copy of them among neighbours (the master books this worker
    /// as a holder of theirs). Without rounds (master copies) it keeps
    /// nothing.
    pub(crate) fn keep_given(&mut self, states: &[(StateId, Vec<u8>)]) {
        if self.rounds {
            self.committed
                .extend(states.iter().map(|(id, b)| (*id, b.clone())));
        }
    }

    /// Moves the committed replicas `ids` into `store` as live states.
    ///
    /// # Errors
    /// If a replica is missing or a state is already held (the master's
    /// books and this worker disagree); nothing is moved then.
    pub(crate) fn promote(
        &mut self,
        ids: &[StateId],
        store: &Mutex<HashMap<StateId, Vec<u8>>>,
    ) -> Result<u32, String> {
        let mut held = lock(store);
        if let Some(id) = ids.iter().find(|id| !self.committed.contains_key(id)) {
            return Err(format!("no replica of state {id} to promote"));
        }
        if let Some(id) = ids.iter().find(|id| held.contains_key(id)) {
            return Err(format!("state {id} promoted but already held"));
        }
        for id in ids {
            let b = self.committed.remove(id).expect("checked above");
            held.insert(*id, b);
        }
        Ok(ids.len() as u32)
    }

    /// Forgets everything (a new `Setup`).
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
        self.committed.clear();
        self.rounds = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(id: u64) -> (StateId, Vec<u8>) {
        (StateId(id), vec![id as u8])
    }

    #[test]
    fn a_round_commits_only_when_complete_and_named() {
        let store = Mutex::new(HashMap::new());
        let mut r = Replicas::default();
        assert!(!r.receive(1, 0, 2, [s(1)].into_iter()));
        assert!(r.receive(1, 0, 2, [s(2)].into_iter()));
        assert!(r.receive(1, 3, 0, std::iter::empty()));
        r.commit(1);
        // Round 2 arrives but is not committed: round 1 still serves.
        assert!(r.receive(2, 0, 1, [s(5)].into_iter()));
        assert!(r.promote(&[StateId(5)], &store).is_err());
        assert_eq!(r.promote(&[StateId(1), StateId(2)], &store), Ok(2));
        assert_eq!(lock(&store).len(), 2);
        // A stale round (a fenced origin) never commits.
        assert!(r.receive(1, 7, 1, [s(9)].into_iter()));
        r.commit(2);
        assert!(r.promote(&[StateId(9)], &store).is_err());
        assert_eq!(r.promote(&[StateId(5)], &store), Ok(1));
    }

    #[test]
    fn promoting_a_held_state_moves_nothing() {
        let store = Mutex::new(HashMap::from([s(1)]));
        let mut r = Replicas::default();
        r.receive(1, 0, 2, [s(1), s(2)].into_iter());
        r.commit(1);
        assert!(r.promote(&[StateId(2), StateId(1)], &store).is_err());
        assert_eq!(r.promote(&[StateId(2)], &store), Ok(1));
    }

    #[test]
    fn states_given_away_are_kept_as_replicas_only_once_a_round_committed() {
        let store = Mutex::new(HashMap::new());
        let mut r = Replicas::default();
        // Master copies (no round ever committed): nothing kept.
        r.keep_given(&[s(7)]);
        assert!(r.promote(&[StateId(7)], &store).is_err());
        // Buddy mode: kept until the next commit, and promotable.
        assert!(r.receive(1, 0, 1, [s(1)].into_iter()));
        r.commit(1);
        r.keep_given(&[s(7), s(8)]);
        assert_eq!(r.promote(&[StateId(7)], &store), Ok(1));
        assert_eq!(lock(&store).get(&StateId(7)), Some(&vec![7u8]));
        assert!(r.receive(2, 0, 1, [s(2)].into_iter()));
        r.commit(2);
        assert!(
            r.promote(&[StateId(8)], &store).is_err(),
            "gone with the commit"
        );
        // A new `Setup` forgets the rounds.
        r.clear();
        r.keep_given(&[s(9)]);
        assert!(r.promote(&[StateId(9)], &store).is_err());
    }
}
