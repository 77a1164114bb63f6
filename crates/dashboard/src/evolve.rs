//! The evolve engine's page: a source over the master's
//! [`Telemetry`](statepipe_cluster::Telemetry).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use statepipe_cluster::{Telemetry, TelemetrySnapshot};
use std::sync::atomic::AtomicU64;

use crate::source::{Kind, Source};

/// The evolve engine's master, as its dashboard shows it: the snapshot is
/// the README's `evolve` object, read from the [`Telemetry`] the master
/// writes into.
///
/// # Examples
///
/// ```
/// use statepipe_cluster::Telemetry;
/// use statepipe_dashboard::{EvolveSource, Source};
///
/// let telemetry = Telemetry::new();
/// // ... give `telemetry.clone()` to the master (MasterConfig::telemetry) ...
/// let source = EvolveSource::new(telemetry, "pf: nile");
/// assert_eq!(source.snapshot()["step"], 0);
/// assert!(source.metrics().contains("statepipe_evolve_steps_total 0"));
/// ```
#[derive(Debug, Clone)]
pub struct EvolveSource {
    telemetry: Telemetry,
    title: String,
}

impl EvolveSource {
    /// A source over `telemetry`, its page titled `title`.
    pub fn new(telemetry: Telemetry, title: impl Into<String>) -> Self {
        EvolveSource {
            telemetry,
            title: title.into(),
        }
    }
}

impl Source for EvolveSource {
    fn kind(&self) -> Kind {
        Kind::Evolve
    }

    fn title(&self) -> String {
        self.title.clone()
    }

    fn snapshot(&self) -> serde_json::Value {
        // Plain data: nothing in it fails to serialise (a non-finite
        // number becomes null).
        serde_json::to_value(self.telemetry.snapshot()).unwrap_or(serde_json::Value::Null)
    }

    fn metrics(&self) -> String {
        render(&self.telemetry.snapshot())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkerLabel {
    worker: String,
}

type FloatCounter = Counter<f64, AtomicU64>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn counter(v: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(v);
    c
}

fn int_gauge(v: u64) -> Gauge {
    let g = Gauge::default();
    g.set(i64::try_from(v).unwrap_or(i64::MAX));
    g
}

fn float_gauge(v: f64) -> FloatGauge {
    let g = FloatGauge::default();
    g.set(v);
    g
}

/// The snapshot as Prometheus text (prefix `statepipe_evolve`).
fn render(s: &TelemetrySnapshot) -> String {
    let mut r = Registry::with_prefix("statepipe_evolve");
    r.register("steps", "Evolve steps done", counter(s.totals.steps));
    r.register(
        "step",
        "The master's step counter (as a snapshot or rollback set it)",
        int_gauge(s.step),
    );
    let last = s.step_times.last().map_or(0.0, |x| x.1);
    r.register(
        "last_step_seconds",
        "Wall time of the last step",
        float_gauge(last),
    );
    let total = FloatCounter::default();
    total.inc_by(s.step_seconds);
    r.register("step_seconds", "Wall time of every step, added up", total);
    if let Some(n) = s.total_steps {
        r.register("total_steps", "Steps the run will take", int_gauge(n));
    }
    let alive = s.workers.iter().filter(|w| w.alive).count() as u64;
    r.register(
        "workers_alive",
        "Workers still part of the run",
        int_gauge(alive),
    );

    let busy = Family::<WorkerLabel, FloatCounter>::default();
    let transfer = Family::<WorkerLabel, FloatCounter>::default();
    let wait = Family::<WorkerLabel, FloatGauge>::default();
    let states = Family::<WorkerLabel, Gauge>::default();
    let bytes_in = Family::<WorkerLabel, Counter>::default();
    let bytes_out = Family::<WorkerLabel, Counter>::default();
    let evolved = Family::<WorkerLabel, Counter>::default();
    let steals_in = Family::<WorkerLabel, Counter>::default();
    let steals_out = Family::<WorkerLabel, Counter>::default();
    for w in &s.workers {
        let l = WorkerLabel {
            worker: w.id.to_string(),
        };
        busy.get_or_create(&l).inc_by(w.busy_s);
        transfer.get_or_create(&l).inc_by(w.transfer_s);
        wait.get_or_create(&l).set(w.wait_s);
        states
            .get_or_create(&l)
            .set(i64::try_from(w.states).unwrap_or(i64::MAX));
        bytes_in.get_or_create(&l).inc_by(w.bytes_in);
        bytes_out.get_or_create(&l).inc_by(w.bytes_out);
        evolved.get_or_create(&l).inc_by(w.evolved);
        steals_in.get_or_create(&l).inc_by(w.steals_in);
        steals_out.get_or_create(&l).inc_by(w.steals_out);
    }
    r.register("busy_seconds", "Time a worker reported evolving", busy);
    r.register(
        "transfer_seconds",
        "Time of moves to a worker, from the decision to the states being evolvable there",
        transfer,
    );
    r.register(
        "wait_seconds",
        "A worker's time in the run neither busy nor transferring",
        wait,
    );
    r.register(
        "states",
        "States a worker held at the end of the last operation",
        states,
    );
    r.register(
        "bytes_in",
        "Bytes the master received from a worker",
        bytes_in,
    );
    r.register("bytes_out", "Bytes the master sent a worker", bytes_out);
    r.register("evolved", "States a worker evolved", evolved);
    r.register("steals_in", "Steals a worker received", steals_in);
    r.register("steals_out", "Steals taken from a worker", steals_out);

    let t = &s.totals;
    r.register("steals", "Steals in all", counter(t.steals));
    r.register("losses", "Workers lost", counter(t.losses));
    r.register(
        "promotions",
        "Replicas promoted to live states",
        counter(t.promotions),
    );
    r.register("rollbacks", "Rollbacks to a snapshot", counter(t.rollbacks));
    r.register(
        "stragglers_rerun",
        "Stragglers whose work was started again on other workers",
        counter(t.stragglers_rerun),
    );
    if let Some(pf) = &s.pf {
        if let Some(&(_, v)) = pf.loglik.last() {
            r.register(
                "pf_loglik",
                "The particle filter's log-likelihood estimate so far",
                float_gauge(v),
            );
        }
        if let Some(&(_, v)) = pf.ess.last() {
            r.register(
                "pf_ess",
                "Effective sample size of the particle filter's last weights",
                float_gauge(v),
            );
        }
    }
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, &r);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use statepipe_cluster::{Engine, Evolve, Master, MasterConfig, Registry, Rng};

    #[test]
    fn snapshot_and_metrics_of_fresh_telemetry() {
        let t = Telemetry::new();
        let src = EvolveSource::new(t.clone(), "pf: walk");
        assert_eq!(src.kind(), Kind::Evolve);
        assert_eq!(src.title(), "pf: walk");
        let v = src.snapshot();
        for k in [
            "step",
            "total_steps",
            "elapsed_s",
            "finished",
            "step_times",
            "workers",
            "lanes",
            "totals",
            "events",
            "pf",
        ] {
            assert!(v.get(k).is_some(), "{k} missing in {v}");
        }
        assert!(v.get("step_seconds").is_none());
        let m = src.metrics();
        assert!(m.contains("statepipe_evolve_steps_total 0"), "{m}");
        assert!(m.contains("statepipe_evolve_workers_alive 0"), "{m}");
        assert!(!m.contains("pf_loglik"), "{m}");
        t.set_total_steps(4);
        t.record_pf_step(1, -3.5, 90.0, 100);
        let m = src.metrics();
        assert!(m.contains("statepipe_evolve_total_steps 4"), "{m}");
        assert!(m.contains("statepipe_evolve_pf_loglik -3.5"), "{m}");
        assert!(m.contains("statepipe_evolve_pf_ess 90.0"), "{m}");
        assert_eq!(src.snapshot()["pf"]["particles"], 100);
    }

    /// One child, its parent plus one.
    #[derive(Clone, serde::Serialize, serde::Deserialize)]
    struct Inc;

    impl Evolve for Inc {
        const NAME: &'static str = "dashboard-inc";
        type State = u64;
        type Input = ();
        type Output = u64;
        fn evolve(&self, s: &u64, _: &(), _: &mut Rng) -> Vec<(u64, u64)> {
            vec![(s + 1, s + 1)]
        }
    }

    #[test]
    fn a_running_master_shows_per_worker_metrics() {
        let t = Telemetry::new();
        let cfg = MasterConfig {
            telemetry: Some(t.clone()),
            ..MasterConfig::default()
        };
        let mut m = Master::on_threads(&Inc, 2, Registry::new().with::<Inc>(), cfg).unwrap();
        let mut ids = m.reset_states((0..40).collect()).unwrap();
        for _ in 0..2 {
            let out = m
                .evolve_many(ids.iter().map(|&id| (id, ())).collect())
                .unwrap();
            ids = out.values().flat_map(|k| k.iter().map(|c| c.0)).collect();
        }
        let src = EvolveSource::new(t, "master: inc");
        let v = src.snapshot();
        assert_eq!(v["step"], 2);
        assert_eq!(v["workers"].as_array().unwrap().len(), 2);
        assert_eq!(v["totals"]["states"], 40);
        let text = src.metrics();
        for w in ["0", "1"] {
            for name in [
                "busy_seconds_total",
                "evolved_total",
                "bytes_in_total",
                "states",
            ] {
                let line = format!("statepipe_evolve_{name}{{worker=\"{w}\"}}");
                assert!(text.contains(&line), "{line} missing in\n{text}");
            }
        }
        assert!(text.contains("statepipe_evolve_steps_total 2"), "{text}");
        assert!(text.contains("statepipe_evolve_workers_alive 2"), "{text}");
        m.shutdown();
        assert_eq!(src.snapshot()["finished"], true);
    }
}
