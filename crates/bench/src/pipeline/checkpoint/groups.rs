//! The harness groups of the cases, each contender a sample of `run.rs`.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::base::*;
use super::run::*;
use crate::harness::{Contender, Group, Metric};
use crate::pipeline::statepipe::NAME;
use crate::BenchError;

pub(super) fn metric(case: &str, unit: &str, higher_is_better: bool) -> Metric {
    Metric {
        case: case.to_string(),
        unit: unit.to_string(),
        higher_is_better,
    }
}

type Replay = Rc<RefCell<VecDeque<Throughput>>>;

/// The groups of state size `k` (`SIZE_LABELS[k]`): its throughput, then the stalls
/// and checkpoint counts of the same samples (replayed, not run again).
pub fn size_groups(s: &CheckpointSizes, k: usize, pin: bool) -> Vec<Group<'static>> {
    let (label, slots, run) = (SIZE_LABELS[k], s.slots[k], s.run);
    let bytes = bytes_label(slots);
    let replays: [Replay; 2] = Default::default();
    // The rates without checkpoints, one per round, for the paired ratios.
    let nones: Rc<RefCell<Vec<f64>>> = Rc::default();
    let record = Rc::clone(&nones);
    let mut contenders = vec![Contender::new(
        NAME,
        format!("{NONE}; table of {bytes}"),
        move || {
            let rate = throughput(slots, run, None, pin)?.rate;
            record.borrow_mut().push(rate);
            Ok(vec![rate])
        },
    )];
    for (period, replay) in s.periods.into_iter().zip(&replays) {
        let replay = Rc::clone(replay);
        contenders.push(Contender::new(
            NAME,
            format!("every {}; table of {bytes}", period_label(period)),
            move || {
                let t = throughput(slots, run, Some(period), pin)?;
                replay.borrow_mut().push_back(t);
                Ok(vec![t.rate])
            },
        ));
    }
    let case = throughput_case(label);
    let mut groups = vec![Group {
        name: case.clone(),
        metrics: vec![metric(&case, "M items/s", true)],
        contenders,
    }];
    let contenders = s
        .periods
        .into_iter()
        .zip(replays)
        .map(|(period, replay)| {
            let nones = Rc::clone(&nones);
            let mut round = 0;
            Contender::new(
                NAME,
                format!(
                    "every {}; the samples of {case}: longest stall of the run's checkpoints | \
                     checkpoints completed | rate / the same round's rate without",
                    period_label(period)
                ),
                move || {
                    let missing =
                        || BenchError::failed("checkpoint stalls", "no throughput sample to read");
                    let t = replay.borrow_mut().pop_front().ok_or_else(missing)?;
                    let none = *nones.borrow().get(round).ok_or_else(missing)?;
                    round += 1;
                    Ok(vec![t.max_stall_us, t.taken as f64, t.rate / none])
                },
            )
        })
        .collect();
    groups.push(Group {
        name: stall_case(label),
        metrics: vec![
            metric(&stall_case(label), "µs", false),
            metric(&taken_case(label), "checkpoints", true),
            metric(&vs_none_case(label), "x (same round)", true),
        ],
        contenders,
    });
    groups
}

/// The upgrade group: the same window without and with an upgrade.
pub fn upgrade_group(s: &CheckpointSizes, pin: bool) -> Group<'static> {
    let s = *s;
    let contender = |label: &str, upgrade: bool| {
        Contender::new(
            NAME,
            format!(
                "{label}; {} items/s, table of {}, items sent within ±{} of the middle",
                s.upgrade_rate,
                bytes_label(s.upgrade_slots),
                period_label(s.upgrade_window)
            ),
            move || {
                let l = upgrade_latency(
                    s.upgrade_slots,
                    s.upgrade_run,
                    s.upgrade_rate,
                    s.upgrade_window,
                    upgrade,
                    pin,
                )?;
                Ok(vec![l.p50, l.p99, l.max])
            },
        )
    };
    Group {
        name: "checkpoint/upgrade".into(),
        metrics: UPGRADE_CASES
            .iter()
            .map(|c| metric(c, "µs", false))
            .collect(),
        contenders: vec![contender(NO_UPGRADE, false), contender(UPGRADE, true)],
    }
}

/// The restore group.
pub fn restore_group(s: &CheckpointSizes, pin: bool) -> Group<'static> {
    let (slots, items) = (s.restore_slots, s.restore_items);
    Group {
        name: "checkpoint/restore".into(),
        metrics: vec![
            metric(RESTORE_CASES[0], "s", false),
            metric(RESTORE_CASES[1], "s", false),
        ],
        contenders: vec![Contender::new(
            NAME,
            format!(
                "table of {}: Checkpoint::latest + deploy(restore) | the checkpoint's duration",
                bytes_label(slots)
            ),
            move || {
                let r = restore(slots, items, pin)?;
                Ok(vec![r.restore, r.write])
            },
        )],
    }
}

/// Every wanted group, given which cases pass the filter.
pub fn groups(
    s: &CheckpointSizes,
    pin: bool,
    wants: impl Fn(&[&str]) -> bool,
) -> Vec<Group<'static>> {
    let mut groups = Vec::new();
    for (k, label) in SIZE_LABELS.into_iter().enumerate() {
        let cases = [
            throughput_case(label),
            stall_case(label),
            taken_case(label),
            vs_none_case(label),
        ];
        if wants(&cases.each_ref().map(String::as_str)) {
            groups.extend(size_groups(s, k, pin));
        }
    }
    if wants(&UPGRADE_CASES) {
        groups.push(upgrade_group(s, pin));
    }
    if wants(&RESTORE_CASES) {
        groups.push(restore_group(s, pin));
    }
    groups
}

// ---------------------------------------------------------------------------------------
// The targets.
