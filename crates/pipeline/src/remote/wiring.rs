//! Where a distributed run's parts go and how their edges connect.

use super::part::Parts;

/// The parts `place` puts on member `n`.
pub(crate) fn parts_on(place: &[u32], n: u32) -> Vec<u32> {
    (0..place.len() as u32)
        .filter(|&k| place[k as usize] == n)
        .collect()
}

/// Where each part's edges go, `(part, slot)` per output (one past the
/// last part: the coordinator's output), and how many come in; and how
/// many come into the coordinator's output.
#[allow(clippy::type_complexity)]
pub(crate) fn wiring<I, O>(parts: &Parts<I, O>) -> (Vec<(Vec<(u32, u32)>, u32)>, u32) {
    let starts = parts.starts();
    let stages = parts.stages.len();
    let end = starts[stages] as u32;
    let keyed = |s: usize| parts.stages[s].router.is_some();
    let copies = |s: usize| parts.stages[s].copies.len() as u32;
    // The first part after stage `s` (the coordinator's output at the end).
    let after = |s: usize| {
        if s + 1 < stages {
            starts[s + 1] as u32
        } else {
            end
        }
    };
    let mut out = Vec::new();
    for s in 0..stages {
        for c in 0..copies(s) {
            let outputs = if keyed(s) {
                vec![(after(s), c)]
            } else if s + 1 < stages && keyed(s + 1) {
                let mut v: Vec<_> = (0..copies(s + 1))
                    .map(|k| (starts[s + 1] as u32 + k, 0))
                    .collect();
                v.push((after(s + 1), copies(s + 1)));
                v
            } else {
                vec![(after(s), 0)]
            };
            let inputs = if s > 0 && keyed(s - 1) {
                copies(s - 1) + 1
            } else {
                1
            };
            out.push((outputs, inputs));
        }
    }
    let last = stages - 1;
    (out, if keyed(last) { copies(last) + 1 } else { 1 })
}
