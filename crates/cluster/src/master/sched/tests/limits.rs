//! States too large for a frame: refused before anything is sent, and
//! batches that keep their answers within a frame.

use super::{cfg, encode, model, state, Cluster, SEED};
use crate::config::Recovery;
use crate::engine::Engine;
use crate::error::Error;
use crate::evolve::StateId;
use crate::local::Local;
use crate::master::sched::{Batch, Placement};
use crate::protocol::{Kind, MAX_STATE_BYTES};

#[test]
fn a_state_over_the_limit_is_refused_before_anything_is_sent() {
    let mut c = Cluster::new(2, cfg(Placement::Spread, true, true));
    let ids = c.reset(2);
    // Zeroed pages that are never touched: the refusal reads lengths only.
    let too_large = MAX_STATE_BYTES + 1;
    let states = vec![encode(&state(0)).unwrap(), vec![0u8; too_large]];
    let err = c.sched.begin_reset(states).unwrap_err();
    assert!(
        matches!(err, Error::StateTooLarge { bytes, limit, .. }
            if bytes == too_large && limit == MAX_STATE_BYTES),
        "{err}"
    );
    let err = c
        .sched
        .begin_restore(1, 9, vec![(StateId(3), vec![0u8; too_large])])
        .unwrap_err();
    assert!(
        matches!(err, Error::StateTooLarge { id: StateId(3), .. }),
        "{err}"
    );
    assert!(c.sched.out.is_empty());
    // The states placed before are where they were.
    assert_eq!(c.held().len(), ids.len());
}

#[test]
fn with_master_copies_a_batch_carries_at_most_a_frame_of_parent_bytes() {
    let mut cfg = cfg(Placement::First, false, false);
    cfg.batch = Batch::Fixed(64);
    cfg.recovery = Recovery::MasterCopy;
    let mut c = Cluster::new(1, cfg);
    // 4 MiB parents: their children come back in the batch's one `Evolved`
    // frame, so a batch holds three (16 MiB of state bytes, with the
    // states' own fields), not all twelve.
    let states: Vec<Vec<u8>> = (0..12u64)
        .map(|i| encode(&(i, vec![i as u8; 4 << 20])).unwrap())
        .collect();
    let ids = c.sched.begin_reset(states).unwrap();
    c.pump(&mut |_| 0);
    c.sched.finish().unwrap();
    c.begin(&ids.iter().map(|&id| (id, 1, 1.0)).collect::<Vec<_>>());
    c.pump(&mut |_| 0);
    assert_eq!(c.sched.finish_evolve().unwrap().len(), ids.len());
    let batches: Vec<usize> = c.log[0]
        .iter()
        .filter(|(k, _)| *k == Kind::Evolve)
        .map(|(_, ids)| ids.len())
        .collect();
    assert_eq!(batches, vec![3; 4]);
}

/// `Branchy` states, as given to `reset_states`.
type States = Vec<(u64, Vec<u8>)>;

/// Six 9 MiB states, all on worker 0 of two, no rebalance, and a step
/// begun with costs 6 … 1: worker 1 steals the two longest pending (5
/// and 4, as in the steal test of `sched/tests.rs`), 18 MiB between
/// them. Returns the states and the inputs.
fn a_large_steal(c: &mut Cluster) -> (States, Vec<(StateId, u32, f64)>) {
    let states: States = (0..6u64).map(|i| (i, vec![i as u8; 9 << 20])).collect();
    let ids = c
        .sched
        .begin_reset(states.iter().map(|s| encode(s).unwrap()).collect())
        .unwrap();
    c.pump(&mut |_| 0);
    c.sched.finish().unwrap();
    let inputs: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(k, &id)| (id, 1u32, (6 - k) as f64))
        .collect();
    c.begin(&inputs);
    (states, inputs)
}

/// What the single-process engine gives for the step, as the
/// scheduler's raw results.
fn local_step(
    states: States,
    inputs: &[(StateId, u32, f64)],
) -> std::collections::HashMap<StateId, Vec<(StateId, Vec<u8>)>> {
    let mut local = Local::new(model(), SEED);
    local.reset_states(states).unwrap();
    let want = local
        .evolve_many(inputs.iter().map(|&(id, i, _)| (id, i)).collect())
        .unwrap();
    want.into_iter()
        .map(|(id, kids)| {
            let kids = kids
                .into_iter()
                .map(|(c, o)| (c, encode(&o).unwrap()))
                .collect();
            (id, kids)
        })
        .collect()
}

#[test]
fn a_move_over_a_frame_of_states_comes_in_several_frames_and_lands_whole() {
    // Worker 0 answers the steal in two `Removed` frames, each forwarded
    // to the thief as an `Add`.
    let mut c = Cluster::new(2, cfg(Placement::First, false, true));
    let (states, inputs) = a_large_steal(&mut c);
    c.pump(&mut |_| 0);
    let got = c.sched.finish_evolve().unwrap();
    let adds: Vec<usize> = c.log[1]
        .iter()
        .filter(|(k, _)| *k == Kind::Add)
        .map(|(_, ids)| ids.len())
        .collect();
    assert_eq!(
        adds,
        vec![1, 1],
        "the stolen states' frames: {:?}",
        c.log[1]
    );
    assert!(c.sched.worker_stats()[1].stolen_states >= 2);
    let want = local_step(states, &inputs);
    assert!(got == want, "the step's results differ from one process's");
    assert_eq!(c.held().len(), want.values().map(Vec::len).sum::<usize>());
}

#[test]
fn a_victim_lost_between_the_parts_of_a_move_is_recovered_from_the_copies() {
    // With master copies: worker 0 sends the first `Removed` part and is
    // lost before the second; the thief has the first state from it and
    // the other from the copies, and the step ends with one process's
    // bits.
    let mut cfg = cfg(Placement::First, false, true);
    cfg.recovery = Recovery::MasterCopy;
    let mut c = Cluster::new(2, cfg);
    let (states, inputs) = a_large_steal(&mut c);
    // Worker 0's queue: its first batch, then the steal's `Remove`.
    c.deliver(0);
    let f = c.queues[0].pop_front().expect("the Remove waits");
    let (kind, p, _) = crate::protocol::decode(&f, u32::MAX).unwrap().unwrap();
    assert_eq!(kind, Kind::Remove);
    let mut out = Vec::new();
    c.cores[0].handle(kind, p, &mut out).unwrap();
    let (k, first, _) = crate::protocol::decode(&out, u32::MAX).unwrap().unwrap();
    assert_eq!(k, Kind::Removed);
    c.sched.on_frame(0, k, first).unwrap();
    c.lose(0, "killed between the parts");
    c.pump(&mut |_| 0);
    let got = c.sched.finish_evolve().unwrap();
    assert!(
        got == local_step(states, &inputs),
        "the step's results differ from one process's"
    );
}
