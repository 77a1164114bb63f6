//! The children's ids that `Batch::child_normals` makes beside the draws
//! in an engine's batches: the ids the engine would hash, and used only
//! when the calls covered exactly the children the model closed.
#![allow(clippy::single_range_in_vec_init)] // lists of parts, some of one

use crate::evolve::{Batch, ChildNormals, Evolve, Offspring, StateId};
use crate::ids::{child_ids_into, child_key, mix64, step_key};
use crate::rng::Rng;

/// A model with no state, input or output: batches of it test what the
/// engine does around a model (also `evolve.rs`'s tests).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Unit;

impl Evolve for Unit {
    const NAME: &'static str = "unit";
    type State = ();
    type Input = ();
    type Output = ();
    fn evolve(&self, _: &(), _: &(), _: &mut Rng) -> Vec<((), ())> {
        Vec::new()
    }
}

const N: usize = 45;

fn parents() -> (Vec<StateId>, Vec<u32>) {
    let ids = (0..N).map(|i| StateId(mix64(i as u64 + 100))).collect();
    let counts = (0..N).map(|i| [0, 1, 2, 7, 3, 0, 5, 1, 4][i % 9]).collect();
    (ids, counts)
}

/// What a model does: draws for the parts in `parts` (in that order),
/// then closes every parent with `closed` children.
fn step(
    off: &mut Offspring<Unit>,
    batch: &Batch<'_, Unit>,
    counts: &[u32],
    parts: &[std::ops::Range<usize>],
    closed: &[u32],
) {
    off.clear();
    let mut draws = off.take_draws();
    for r in parts {
        let part = batch.slice(r.clone());
        part.child_normals(counts[r.clone()].iter().copied(), &mut draws);
    }
    off.keep_draws(draws);
    for &c in closed {
        for _ in 0..c {
            off.push((), ());
        }
        off.end_parent();
    }
}

#[test]
fn ids_made_with_the_draws_are_the_hashed_ones_and_used_only_when_they_fit() {
    let (ids, counts) = parents();
    let (states, inputs) = (vec![(); N], vec![(); N]);
    let kid_key = child_key(5, 6);
    let mut want = Vec::new();
    child_ids_into(kid_key, &ids, &counts, &mut want);
    let batch = Batch::<Unit>::with_key(step_key(5, 6), &ids, &states, &inputs, Some((kid_key, 0)));
    let mut off = Offspring::<Unit>::new();
    let take = |off: &mut Offspring<Unit>| {
        let mut got = Vec::new();
        off.take_child_ids(N, &mut got).then_some(got)
    };

    // In parts, in order: the hashed ids.
    step(&mut off, &batch, &counts, &[0..20, 20..33, 33..N], &counts);
    assert_eq!(take(&mut off), Some(want.clone()));
    // Taken once: the next step starts empty.
    assert_eq!(take(&mut off), None);

    // Parts out of order, a part missing, or other counts closed: none.
    step(&mut off, &batch, &counts, &[20..N, 0..20], &counts);
    assert_eq!(take(&mut off), None);
    step(&mut off, &batch, &counts, &[0..20], &counts);
    assert_eq!(take(&mut off), None);
    let mut other = counts.clone();
    other.swap(1, 2);
    step(&mut off, &batch, &counts, &[0..N], &other);
    assert_eq!(take(&mut off), None);

    // A step that draws nothing after one that did: none (cleared).
    step(&mut off, &batch, &counts, &[0..N], &counts);
    step(&mut off, &batch, &counts, &[], &counts);
    assert_eq!(take(&mut off), None);

    // A batch that is not an engine's makes none.
    let plain = Batch::<Unit>::new(5, 6, &ids, &states, &inputs);
    step(&mut off, &plain, &counts, &[0..N], &counts);
    assert_eq!(take(&mut off), None);

    // A model's own draws' buffers: the engine's stay empty.
    off.clear();
    let mut own = ChildNormals::new();
    batch.child_normals(counts.iter().copied(), &mut own);
    for &c in &counts {
        for _ in 0..c {
            off.push((), ());
        }
        off.end_parent();
    }
    assert_eq!(take(&mut off), None);
}
