//! A worker stopped for good (SIGSTOP) at any delivery of a run — its
//! reset, the replication rounds, a step, the final fetch — in either
//! recovery mode, with heartbeats: the others keep beating, and time
//! passes only while nothing else can move, as `overdue` sees it. The
//! stopped worker is dropped for its silence (or its work is started
//! again elsewhere and it is fenced), never waited for until the silence
//! deadline (set out of reach here), and the run ends with the
//! single-process engine's bits.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::straggle::{heartbeats, recovering};
use super::{decoded, model, state, Cluster, SEED};
use crate::engine::Engine;
use crate::local::Local;
use crate::master::sched::{Io, Recovery};
use crate::protocol::Kind;
use crate::registry::encode;

/// Six workers, of which `stopped` stops at delivery `at` of the whole run
/// and stays stopped; `picks` orders the deliveries.
struct Run {
    c: Cluster,
    stopped: usize,
    at: usize,
    delivered: usize,
    now: Instant,
    quiet: Duration,
    picks: Vec<usize>,
}

impl Run {
    fn stops(&self) -> bool {
        self.delivered >= self.at && self.c.alive[self.stopped]
    }

    /// Delivers until the operation is quiet. When only the stopped
    /// worker's frames wait, time passes (a tenth of `quiet` at a time),
    /// the others beating, and `overdue` acts: it drops the stopped
    /// worker or starts its work elsewhere.
    fn settle_op(&mut self) -> Result<(), TestCaseError> {
        let mut stalls = 0;
        loop {
            let ready: Vec<usize> = (0..6)
                .filter(|&w| !self.c.queues[w].is_empty())
                .filter(|&w| !(self.stops() && w == self.stopped))
                .collect();
            if let Some(&w) =
                ready.get(self.picks[self.delivered % self.picks.len()] % ready.len().max(1))
            {
                self.c.deliver(w);
                self.delivered += 1;
                continue;
            }
            if self.c.sched.is_quiet() {
                return Ok(());
            }
            prop_assert!(self.stops(), "nothing moves and no worker is stopped");
            stalls += 1;
            prop_assert!(stalls < 400, "the stopped worker held the operation");
            self.now += self.quiet / 10;
            let (now, stopped) = (self.now, self.stopped);
            let others = move |w: usize| Io {
                read: (w != stopped).then_some(now),
                any: None,
                bulk: None,
            };
            let late = self.c.sched.overdue(now, &others).0;
            self.c.collect();
            for (w, why) in late {
                prop_assert_eq!(w, stopped, "a worker that beats was dropped: {}", why);
                prop_assert!(
                    why.contains("taken for stopped") || why.contains("straggler"),
                    "{}",
                    why
                );
                self.c.lose(w, &why);
            }
        }
    }

    /// The operation, then its replication rounds (buddy mode), as
    /// `Master::settle` runs them before the operation is finished.
    fn settle(&mut self) -> Result<(), TestCaseError> {
        loop {
            self.settle_op()?;
            if !self.c.sched.begin_replicate() {
                return Ok(());
            }
            self.c.collect();
        }
    }
}

fn stopped_at_any_delivery(
    recovery: Recovery,
    stopped: usize,
    at: usize,
    picks: Vec<usize>,
) -> Result<(), TestCaseError> {
    let cfg = heartbeats(recovering(recovery));
    let quiet = cfg.deadlines.quiet().unwrap();
    let mut run = Run {
        c: Cluster::new(6, cfg),
        stopped,
        at,
        delivered: 0,
        now: Instant::now(),
        quiet,
        picks,
    };
    let mut local = Local::new(model(), SEED);
    for w in 0..6 {
        run.c.sched.on_frame(w, Kind::Heartbeat, &[]).unwrap();
    }
    run.now = Instant::now();
    let states: Vec<Vec<u8>> = (0..18).map(|i| encode(&state(i)).unwrap()).collect();
    let mut ids = run.c.sched.begin_reset(states).unwrap();
    run.c.collect();
    local.reset_states((0..18).map(state).collect()).unwrap();
    run.settle()?;
    run.c.sched.finish().unwrap();
    for _ in 0..2 {
        run.c
            .begin(&ids.iter().map(|&id| (id, 0u32, 1.0)).collect::<Vec<_>>());
        run.settle()?;
        let got = decoded(run.c.sched.finish_evolve().unwrap());
        let want = local
            .evolve_many(ids.iter().map(|&id| (id, 0)).collect())
            .unwrap();
        prop_assert_eq!(&got, &want, "other bits than the single-process engine");
        ids = got.values().flatten().map(|x| x.0).collect();
        ids.sort_unstable();
    }
    let want = local.fetch_states(&ids).unwrap();
    run.c.sched.begin_fetch(&ids).unwrap();
    run.c.collect();
    run.settle()?;
    prop_assert_eq!(run.c.fetched(), want);
    // In buddy mode nothing can end while the stopped worker owes an
    // answer: it was dropped, or its frames all came before the stop.
    if recovery == Recovery::Buddy && run.stops() {
        prop_assert!(
            run.c.queues[stopped].is_empty(),
            "stopped at delivery {} of {}, owing answers, never dropped",
            run.at,
            run.delivered
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_worker_stopped_at_any_delivery_is_dropped_and_changes_no_bit(
        buddy in any::<bool>(),
        stopped in 0usize..6,
        at in 0usize..160,
        picks in prop::collection::vec(any::<usize>(), 32),
    ) {
        let recovery = if buddy { Recovery::Buddy } else { Recovery::MasterCopy };
        stopped_at_any_delivery(recovery, stopped, at, picks)?;
    }
}

#[test]
fn every_delivery_of_a_run_can_be_the_stop() {
    // The whole range, in order, for one delivery order.
    for at in 0..160 {
        for recovery in [Recovery::MasterCopy, Recovery::Buddy] {
            stopped_at_any_delivery(recovery, at % 6, at, vec![0]).unwrap();
        }
    }
}
