//! The user's side: the [`Evolve`] trait, state tokens, and the derivation of
//! every random number and id from `(run seed, step, parent)`.
//!
//! Nothing here depends on which worker runs a call, so a run gives the same
//! bits on one process or on 450.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The random number generator handed to [`Evolve::evolve`]: PCG64, the
/// XSL-RR 128/64 permuted congruential generator (O'Neill, "PCG: A Family
/// of Simple Fast Space-Efficient Statistically Good Algorithms for Random
/// Number Generation", 2014, <https://www.pcg-random.org/>; the same
/// generator as numpy's `PCG64`), its 128-bit state and its stream set by
/// [`call_rng`] from SplitMix64 hashes of (run seed, step, parent).
///
/// Why this one: a call draws a handful of numbers (the particle filter
/// one or two), so what a call pays is setting its generator up. ChaCha8
/// fills a 256-byte buffer on its first draw, about a fifth of a cheap
/// model's step; PCG64 takes the four hashed words as its state and
/// increment, and makes each number with one 128-bit multiply-add. Its
/// output passes BigCrush and PractRand. Every call has its own stream (an
/// odd increment) and starting point, both outputs of a mixing function,
/// so calls with neighbouring seeds, steps or parents get unrelated
/// sequences, not shifted or correlated copies of one another (the known
/// weakness of PCG streams is for increments and states chosen close
/// together). It is not a cryptographic generator; nothing here needs one.
pub type Rng = rand_pcg::Pcg64;

/// A token for a state held by some worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StateId(pub u64);

impl std::fmt::Display for StateId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{:016x}", self.0)
    }
}

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
    /// What lives on a worker between steps.
    type State: Serialize + DeserializeOwned + Send;
    /// What the master sends with each state to evolve.
    type Input: Serialize + DeserializeOwned + Send;
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
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn hash3(a: u64, b: u64, c: u64) -> u64 {
    mix64(mix64(mix64(a) ^ b) ^ c)
}

/// The generator for the call that evolves `parent` at `step` of a run
/// seeded `seed`: what [`Evolve::evolve`] receives. A driver that draws its
/// own numbers between steps (resampling) derives them the same way, so
/// that they too are independent of placement.
pub fn call_rng(seed: u64, step: u64, parent: StateId) -> Rng {
    let k0 = hash3(seed, step, parent.0);
    let k1 = mix64(k0 ^ 0x5DEE_CE66_D1CE_4E5B);
    let (k2, k3) = (mix64(k1), mix64(k0 ^ k1));
    let wide = |hi: u64, lo: u64| (u128::from(hi) << 64) | u128::from(lo);
    Rng::new(wide(k0, k1), wide(k2, k3))
}

/// The id of the `index`-th child of `parent` at `step`.
///
/// A hash, so two live states could in principle collide (about one chance in
/// 2^64 / live² per step); the master checks every new id and fails the step
/// with [`Error::IdCollision`](crate::Error::IdCollision) rather than merge two
/// states.
pub(crate) fn child_id(seed: u64, step: u64, parent: StateId, index: u32) -> StateId {
    StateId(hash3(
        seed ^ 0xC41D,
        hash3(step, parent.0, 1),
        u64::from(index),
    ))
}

/// The id of the `index`-th state given to the `epoch`-th `reset_states`.
pub(crate) fn root_id(seed: u64, epoch: u64, index: u64) -> StateId {
    StateId(hash3(seed ^ 0x2007, hash3(epoch, index, 2), 0))
}
