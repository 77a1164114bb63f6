//! State ids and their derivation: every child's id is a hash of (run seed,
//! step, parent, index), so it is the same whichever worker made it; and the
//! keys a step's random numbers are drawn under (`step_key`).

use serde::{Deserialize, Serialize};

/// A token for a state held by some worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StateId(pub u64);

impl std::fmt::Display for StateId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{:016x}", self.0)
    }
}

/// Hashes a [`StateId`] to itself: ids are already the output of a mixing
/// function (SplitMix64 of the run seed, step, parent and index), so hashing
/// them again with the standard library's SipHash buys nothing and costs a
/// fifth of a cheap model's step. The hasher of [`IdMap`], the maps the
/// [`Engine`](crate::Engine) API takes and returns. Keys other than a
/// `StateId` are hashed byte by byte with SplitMix64 (correct, not fast).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdHash;

/// A map keyed by state id, hashed by [`IdHash`]. Make one with
/// `IdMap::default()`, `with_capacity_and_hasher(n, IdHash)`, or by
/// collecting `(StateId, V)` pairs.
pub type IdMap<V> = std::collections::HashMap<StateId, V, IdHash>;

/// The hasher of [`IdHash`]: the last `u64` written.
#[derive(Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not reached for `StateId` (one `write_u64`); stay correct anyway.
        for &b in bytes {
            self.0 = mix64(self.0 ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// SplitMix64's finaliser: a bijection on u64 with good avalanche.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn hash3(a: u64, b: u64, c: u64) -> u64 {
    mix64(mix64(mix64(a) ^ b) ^ c)
}

/// The Philox key of `step` of a run seeded `seed`: a hash of both, so
/// steps and runs get unrelated keys.
#[inline]
pub(crate) fn step_key(seed: u64, step: u64) -> [u32; 2] {
    let k = mix64(mix64(seed ^ 0x5DEE_CE66_D1CE_4E5B) ^ step);
    [k as u32, (k >> 32) as u32]
}

/// The key of the children's ids at `step` of a run seeded `seed`.
#[inline]
pub(crate) fn child_key(seed: u64, step: u64) -> u64 {
    hash3(seed ^ 0xC41D, step, 1)
}

/// [`child_id`] with the step's key from [`child_key`].
#[inline]
pub(crate) fn child_id_keyed(key: u64, parent: StateId, index: u32) -> StateId {
    // A bijection of `parent` for each index; parents are themselves
    // hashes, so two (parent, index) pairs meet with chance 2^-64.
    StateId(mix64(
        parent.0 ^ key ^ u64::from(index).wrapping_mul(0xD6E8_FEB8_6659_FD93),
    ))
}

/// Appends to `ids` the ids of the children of `parents`, `counts[i]` of
/// parent `i`, in order: [`child_id_keyed`] of each parent and child
/// index. Without a branch per count: each parent's position and child
/// index are written to four slots whatever its count (the next parent's
/// overwrite the ones past its children), then hashed in place.
pub(crate) fn child_ids_into(
    key: u64,
    parents: &[StateId],
    counts: &[u32],
    ids: &mut Vec<StateId>,
) {
    // In parts, so that each part's slots are hashed while in cache.
    for (p, c) in parents.chunks(1024).zip(counts.chunks(1024)) {
        child_ids_part(key, p, c, ids);
    }
}

/// [`child_ids_into`] of one part.
fn child_ids_part(key: u64, parents: &[StateId], counts: &[u32], ids: &mut Vec<StateId>) {
    let n: usize = counts.iter().map(|&c| c as usize).sum();
    let start = ids.len();
    ids.resize(start + n + 4, StateId(0));
    let slots = &mut ids[start..];
    let mut at = 0;
    for (i, &c) in counts.iter().enumerate() {
        let (c, i) = (c as usize, (i as u64) << 32);
        slots[at..at + 4].copy_from_slice(&[
            StateId(i),
            StateId(i | 1),
            StateId(i | 2),
            StateId(i | 3),
        ]);
        for k in 4..c {
            slots[at + k] = StateId(i | k as u64);
        }
        at += c;
    }
    ids.truncate(start + n);
    hash_slots(key, parents, &mut ids[start..]);
}

crate::math::widest! {
    /// [`hash_slots_any`] on the widest vector unit.
    fn hash_slots(key: u64, parents: &[StateId], slots: &mut [StateId]) = hash_slots_any;
}

/// Each slot's (parent position, child index) replaced by the child's id.
#[inline(always)]
fn hash_slots_any(key: u64, parents: &[StateId], slots: &mut [StateId]) {
    for id in slots {
        let (i, k) = ((id.0 >> 32) as usize, id.0 as u32);
        *id = child_id_keyed(key, parents[i], k);
    }
}

/// The id of the `index`-th child of `parent` at `step`.
///
/// A hash, so two live states could in principle collide (about one chance in
/// 2^64 / live² per step); the master checks every new id and fails the step
/// with [`Error::IdCollision`](crate::Error::IdCollision) rather than merge two
/// states.
pub(crate) fn child_id(seed: u64, step: u64, parent: StateId, index: u32) -> StateId {
    child_id_keyed(child_key(seed, step), parent, index)
}

/// The id of the `index`-th state given to the `epoch`-th `reset_states`.
pub(crate) fn root_id(seed: u64, epoch: u64, index: u64) -> StateId {
    StateId(hash3(seed ^ 0x2007, hash3(epoch, index, 2), 0))
}
