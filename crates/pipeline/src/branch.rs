//! What the constructs with branches share between their meaning and their
//! deployment: pairing the branches' outputs, the copy a key is sharded to,
//! and the failure of an item routed past the last branch.

use std::fmt::Debug;
use std::hash::{Hash, Hasher};

use crate::failure::Failure;

/// Emits every pair of `left` × `right`, `left` outermost, and empties both.
pub(crate) fn pairs<C: Clone, D: Clone>(
    left: &mut Vec<C>,
    right: &mut Vec<D>,
    emit: &mut dyn FnMut((C, D)),
) {
    if let Some((last, rest)) = right.split_last() {
        for c in left.drain(..) {
            for d in rest {
                emit((c.clone(), d.clone()));
            }
            emit((c, last.clone()));
        }
    }
    left.clear();
    right.clear();
}

/// Emits every combination of one element per buffer (a vector, element
/// `k` from buffer `k`), the first buffer outermost, and empties them all;
/// nothing if any is empty.
pub(crate) fn combinations<O: Clone>(bufs: &mut [Vec<O>], emit: &mut dyn FnMut(Vec<O>)) {
    if bufs.iter().all(|b| !b.is_empty()) {
        // A mixed-radix counter over the buffers, last fastest.
        let mut idx = vec![0usize; bufs.len()];
        'all: loop {
            emit(
                idx.iter()
                    .zip(bufs.iter())
                    .map(|(&i, b)| b[i].clone())
                    .collect(),
            );
            for k in (0..idx.len()).rev() {
                idx[k] += 1;
                if idx[k] < bufs[k].len() {
                    continue 'all;
                }
                idx[k] = 0;
            }
            break;
        }
    }
    bufs.iter_mut().for_each(Vec::clear);
}

/// The failure of an item that `choose` routed past its last branch.
pub(crate) fn no_such_branch<I: Debug + Send + 'static>(
    name: &str,
    seq: u64,
    item: I,
    chosen: usize,
    branches: usize,
) -> Failure {
    Failure {
        seq,
        stage: name.to_string(),
        item: Box::new(item),
        error: Box::new(NoSuchBranch { chosen, branches }),
    }
}

/// The error of an item routed past the last branch.
#[derive(Debug)]
struct NoSuchBranch {
    chosen: usize,
    branches: usize,
}

impl std::fmt::Display for NoSuchBranch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "routed to branch {} of {}", self.chosen, self.branches)
    }
}

impl std::error::Error for NoSuchBranch {}

/// The copy, of `n`, that `shard_by_key` sends an item with key `key` to.
///
/// The hash is FNV-1a over the key's `Hash` bytes, fixed so that every
/// process and every build routes a key to the same copy.
///
/// # Panics
///
/// If `n` is 0.
///
/// # Examples
///
/// ```
/// use statepipe_pipeline::shard_of;
///
/// assert_eq!(shard_of(&"alice", 4), shard_of(&"alice", 4));
/// assert!(shard_of(&17u32, 3) < 3);
/// ```
pub fn shard_of<K: Hash + ?Sized>(key: &K, n: usize) -> usize {
    assert!(n > 0, "shard_of: no copies");
    let mut h = Fnv1a(0xcbf2_9ce4_8422_2325);
    key.hash(&mut h);
    (h.finish() % n as u64) as usize
}

struct Fnv1a(u64);

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
