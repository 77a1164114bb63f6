//! The sequential model every run is checked against.

use super::*;

/// Compares what every consumer saw with the sequential model.
pub(crate) fn check_events(
    case: &Case,
    topo: &Topology,
    total: u64,
    multi: bool,
    producer_seqs: &[Vec<u64>],
    logs: &[Vec<Rec>],
) {
    // The model: the producers' sequences number the events 0..total.
    let mut by_seq: Vec<Option<(u32, u64)>> = vec![None; total as usize];
    for (p, seqs) in producer_seqs.iter().enumerate() {
        assert_eq!(seqs.len() as u64, case.producers[p].0, "producer {p} count");
        for (c, &s) in seqs.iter().enumerate() {
            assert!(
                s < total,
                "producer {p} event {c} got sequence {s} >= {total}"
            );
            assert!(
                by_seq[s as usize].is_none(),
                "sequence {s} returned twice (producer {p} event {c} and {:?})",
                by_seq[s as usize]
            );
            by_seq[s as usize] = Some((p as u32, c as u64));
            if c > 0 {
                assert!(seqs[c - 1] < s, "producer {p}: sequences not increasing");
            }
        }
    }
    if !multi {
        assert!(
            producer_seqs[0].iter().copied().eq(0..total),
            "a single producer's sequences are 0, 1, 2, ..."
        );
    }
    let batch_cap = case.max_batch.map_or(case.capacity as u64, |m| {
        (m as u64).min(case.capacity as u64)
    });

    for unit in &topo.units {
        let n = unit.kind.members();
        let mut times_seen = vec![0u32; total as usize];
        for i in 0..n {
            let member = &topo.members[unit.first_member + i];
            let log = &logs[unit.first_member + i];
            let name = &member.name;
            let mut last_seq: Option<u64> = None;
            let mut last_counter: Vec<Option<u64>> = vec![None; producer_seqs.len()];
            let mut in_batch = 0u64;
            let per_batch = match member.partition {
                None => batch_cap,
                Some((_, n)) => batch_cap.div_ceil(n),
            };
            for r in log {
                assert!(
                    r.seq < total,
                    "{name} handled sequence {} >= {total}",
                    r.seq
                );
                if let Some(l) = last_seq {
                    assert!(r.seq > l, "{name} handled {} after {l}", r.seq);
                }
                last_seq = Some(r.seq);
                if let Some((i, n)) = member.partition {
                    assert_eq!(r.seq % n, i, "{name} handled another member's {}", r.seq);
                }
                assert_eq!(
                    Some((r.producer, r.counter)),
                    by_seq[r.seq as usize],
                    "{name} saw the wrong event at sequence {}",
                    r.seq
                );
                let last = &mut last_counter[r.producer as usize];
                assert!(
                    !matches!(*last, Some(l) if l >= r.counter),
                    "{name}: producer {} order broken: {} after {last:?}",
                    r.producer,
                    r.counter
                );
                *last = Some(r.counter);
                assert!(
                    r.deps_done,
                    "{name} handled {} before its dependencies {:?} did",
                    r.seq,
                    unit.deps
                        .iter()
                        .map(|&d| &topo.units[d].name)
                        .collect::<Vec<_>>()
                );
                assert_eq!(
                    r.marks, unit.expected_marks,
                    "{name} at sequence {}: marks of the mutating stages (stage {})",
                    r.seq, unit.stage
                );
                times_seen[r.seq as usize] += 1;
                in_batch += 1;
                if r.end_of_batch {
                    assert!(
                        in_batch <= per_batch,
                        "{name}: a batch of {in_batch} > {per_batch} ending at {}",
                        r.seq
                    );
                    in_batch = 0;
                }
            }
            if let Some(r) = log.last() {
                assert!(r.end_of_batch, "{name}: its last event ends a batch");
            }
        }
        if let Some(s) = times_seen.iter().position(|&t| t != 1) {
            panic!(
                "{} handled sequence {s} {} times (every event exactly once)",
                unit.name, times_seen[s]
            );
        }
    }
}
