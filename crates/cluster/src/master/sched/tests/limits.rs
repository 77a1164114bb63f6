//! States too large for a frame: refused before anything is sent, and
//! batches that keep their answers within a frame.

use super::{cfg, encode, state, Cluster};
use crate::config::Recovery;
use crate::error::Error;
use crate::evolve::StateId;
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
