//! A master with telemetry: what the snapshot shows of a run, and that
//! recording changes no result.

use super::{stealing, threads, threads_with, Nap, NapInput};
use crate::engine::Engine;
use crate::evolve::{IdMap, StateId};
use crate::master::{MasterConfig, MasterImpl};
use crate::pf::{self, Bootstrap, PfConfig};
use crate::telemetry::{Telemetry, TelemetryEventKind, TelemetryLaneKind};
use crate::Registry;

const WORKERS: usize = 3;
const STEPS: u64 = 3;

/// A step's children and outputs per parent, in id order.
type Step = Vec<(StateId, Vec<(StateId, u64)>)>;

/// Three steps of naps on three workers, every state starting on the
/// first (so that the others steal): each step's outputs, in id order.
fn run(imp: MasterImpl, telemetry: Option<Telemetry>) -> Vec<Step> {
    let cfg = MasterConfig {
        telemetry,
        ..stealing(imp, 7)
    };
    let mut m = threads(&Nap, WORKERS, cfg);
    let mut ids = m.reset_states((0..24).collect()).unwrap();
    let mut steps = Vec::new();
    for _ in 0..STEPS {
        let inputs: IdMap<NapInput> = ids
            .iter()
            .map(|&id| {
                let cost_us = 200 + (id.0 % 5) as u32 * 300;
                (
                    id,
                    NapInput {
                        cost_us,
                        children: 1,
                    },
                )
            })
            .collect();
        let mut out: Vec<_> = m.evolve_many(inputs).unwrap().into_iter().collect();
        out.sort_unstable_by_key(|p| p.0);
        ids = out.iter().flat_map(|p| p.1.iter().map(|c| c.0)).collect();
        steps.push(out);
    }
    m.shutdown();
    steps
}

#[test]
fn a_master_shows_its_run_and_gives_the_same_bits() {
    for imp in [MasterImpl::EventLoop, MasterImpl::Threaded] {
        let t = Telemetry::new();
        let with = run(imp, Some(t.clone()));
        assert_eq!(
            with,
            run(imp, None),
            "{imp:?}: telemetry changed the results"
        );
        let s = t.snapshot();
        assert_eq!(s.step, STEPS, "{imp:?}");
        assert_eq!(s.totals.steps, STEPS);
        let steps: Vec<u64> = s.step_times.iter().map(|x| x.0).collect();
        assert_eq!(steps, (1..=STEPS).collect::<Vec<_>>());
        assert!(s.step_times.iter().all(|x| x.1 > 0.0));
        assert_eq!(s.workers.len(), WORKERS);
        assert!(s.workers.iter().all(|w| w.alive), "{imp:?}");
        assert_eq!(s.workers.iter().map(|w| w.evolved).sum::<u64>(), 24 * STEPS);
        assert_eq!(s.totals.states, 24, "{imp:?}: states held at the end");
        assert!(
            s.totals.bytes > 0 && s.totals.steals > 0,
            "{imp:?}: {:?}",
            s.totals
        );
        let busy = s.lanes.iter().filter(|l| l.kind == TelemetryLaneKind::Busy);
        // A segment per batch, those of a worker less than the merge gap
        // apart taken as one: at least one per worker, at most one per batch.
        let segments = busy.clone().count() as u64;
        assert!(
            segments >= WORKERS as u64
                && segments <= s.workers.iter().map(|w| w.batches).sum::<u64>(),
            "{imp:?}: {segments} busy segments"
        );
        assert!(busy
            .clone()
            .all(|l| l.start_s <= l.end_s && l.end_s <= s.elapsed_s));
        assert!(
            s.lanes
                .iter()
                .any(|l| l.kind == TelemetryLaneKind::Transfer),
            "{imp:?}: the steals' moves"
        );
        let joined = s
            .events
            .iter()
            .filter(|e| e.kind == TelemetryEventKind::Joined);
        assert_eq!(joined.count(), WORKERS);
        assert!(s.finished, "{imp:?}: shut down");
        assert_eq!(s.events.last().unwrap().kind, TelemetryEventKind::Finished);
        assert!(s.pf.is_none() && s.total_steps.is_none());
    }
}

#[test]
fn the_particle_filter_adds_its_likelihood_and_sample_size() {
    let walk = super::resume::Walk {
        y: (0..6).map(|t| (t as f64 * 0.3).sin()).collect(),
    };
    let cfg = PfConfig {
        particles: 200,
        islands: 2,
        seed: 3,
    };
    let registry = Registry::new().with::<Bootstrap<super::resume::Walk>>();
    let model = Bootstrap(walk.clone());
    let t = Telemetry::new();
    let mcfg = MasterConfig {
        seed: 3,
        telemetry: Some(t.clone()),
        ..MasterConfig::default()
    };
    let mut m = threads_with(&model, 2, registry.clone(), mcfg);
    assert!(m.telemetry().is_some());
    let got = pf::run(&mut m, &walk, cfg, |_| {}).unwrap();
    let s = t.snapshot();
    assert_eq!(s.total_steps, Some(6));
    assert_eq!(s.step, 6);
    assert!(s.finished);
    let p = s.pf.expect("the filter's series");
    assert_eq!(p.particles, 200);
    let steps: Vec<u64> = p.loglik.iter().map(|x| x.0).collect();
    assert_eq!(steps, (1..=6).collect::<Vec<_>>());
    assert_eq!(p.loglik.last().unwrap().1, got.loglik);
    assert!(
        p.ess.iter().all(|&(_, e)| e > 1.0 && e <= 200.0 + 1e-9),
        "{:?}",
        p.ess
    );
    // The same bits without it.
    let mut plain = threads_with(
        &model,
        2,
        registry,
        MasterConfig {
            seed: 3,
            ..MasterConfig::default()
        },
    );
    assert_eq!(pf::run(&mut plain, &walk, cfg, |_| {}).unwrap(), got);
}
