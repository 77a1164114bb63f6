//! The pipeline's page: a source over a one-process deployment's
//! [`Observer`], or over a distributed run's [`RemoteMetrics`] at its
//! coordinator.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use statepipe_pipeline::remote::{RemoteMetrics, RestoreInfo, RestoreKind};
use statepipe_pipeline::{CheckpointInfo, Metrics, Observer, UpgradeInfo};

use crate::source::{Kind, Source};

/// What a [`PipelineSource`] reads.
#[derive(Debug, Clone)]
enum Watched {
    /// A deployment in this process.
    Local(Observer),
    /// A distributed run's coordinator.
    Remote(RemoteMetrics),
}

/// A pipeline, as its dashboard shows it: the snapshot is the README's
/// `pipeline` object, the metrics its units' counters (one process) or
/// its cut edges, checkpoints and restores (a coordinator).
///
/// Both read what the run already keeps (counters, bounded histories): the
/// run never waits for it, and it stays valid after the run ended (then
/// reporting `finished: true` and the counters at the end).
///
/// # Examples
///
/// ```
/// use statepipe_dashboard::{PipelineSource, Source};
/// use statepipe_pipeline::{Config, Pipeline};
///
/// let p = Pipeline::map("double", |x: u64| 2 * x);
/// let running = p.deploy_with(&Config::new().workers(1), 0..100u64, |_, _| {}).unwrap();
/// let source = PipelineSource::new(running.observer(), "run: double");
/// // ... Dashboard::start(addr, Arc::new(source), options) ...
/// running.join().unwrap();
/// let s = source.snapshot();
/// assert_eq!(s["finished"], true);
/// assert_eq!(s["units"][0]["items_in"], 100);
/// assert_eq!(s["edges"][0], serde_json::json!(["input", "double"]));
/// assert!(source.metrics().contains("statepipe_pipeline_unit_items_in_total"));
/// ```
#[derive(Debug, Clone)]
pub struct PipelineSource {
    watched: Watched,
    title: String,
    /// The clock of the snapshot's times (`t`): when the source was made,
    /// about when its dashboard starts.
    created: Instant,
}

impl PipelineSource {
    /// A source over a deployment in this process, from
    /// [`Running::observer`](statepipe_pipeline::Running::observer); its
    /// page titled `title`.
    pub fn new(observer: Observer, title: impl Into<String>) -> Self {
        PipelineSource {
            watched: Watched::Local(observer),
            title: title.into(),
            created: Instant::now(),
        }
    }

    /// A source over a distributed run's coordinator, from
    /// [`Coordinator::metrics`](statepipe_pipeline::remote::Coordinator::metrics)
    /// (taken before `Coordinator::run`, which consumes the coordinator);
    /// its page titled `title`. Over a member's metrics
    /// ([`Member::metrics`](statepipe_pipeline::remote::Member::metrics))
    /// it shows that member's cut edges alone.
    pub fn remote(metrics: RemoteMetrics, title: impl Into<String>) -> Self {
        PipelineSource {
            watched: Watched::Remote(metrics),
            title: title.into(),
            created: Instant::now(),
        }
    }

    /// Seconds from the source's start to `at` (negative before it).
    fn t(&self, at: Instant) -> f64 {
        match at.checked_duration_since(self.created) {
            Some(d) => d.as_secs_f64(),
            None => -self.created.duration_since(at).as_secs_f64(),
        }
    }

    fn local(&self, o: &Observer) -> Value {
        let m = o.metrics();
        json!({
            "elapsed_s": m.elapsed.as_secs_f64(),
            "workers": m.workers,
            "finished": o.is_finished(),
            "units": units(&m),
            "edges": m.edges,
            "checkpoints": o.checkpoints().iter().map(|c| self.checkpoint(c)).collect::<Vec<_>>(),
            "upgrades": o.upgrades().iter().map(|u| self.upgrade(u)).collect::<Vec<_>>(),
            "remote": Value::Null,
        })
    }

    fn checkpoint(&self, c: &CheckpointInfo) -> Value {
        json!({
            "id": c.id,
            "t": self.t(c.completed),
            "position": c.position,
            "bytes": c.bytes,
            "duration_s": c.duration.as_secs_f64(),
            "max_stall_s": c.max_stall.as_secs_f64(),
        })
    }

    fn upgrade(&self, u: &UpgradeInfo) -> Value {
        json!({"t": self.t(u.completed), "stage": u.stage, "ok": u.result.is_ok()})
    }

    /// One of the README's `remote.restores`.
    fn restore(&self, x: &RestoreInfo) -> Value {
        json!({
            "t": self.t(x.at),
            "kind": kind_name(x.restore.kind),
            "checkpoint": x.restore.from,
            "members": x.members_left,
            "member": x.restore.lost,
            "why": x.restore.why,
        })
    }

    fn remote_snapshot(&self, r: &RemoteMetrics) -> Value {
        let members = r.members();
        let cut_edges: Vec<Value> = r
            .edges()
            .iter()
            .map(|e| {
                json!({
                    "name": e.name, "items": e.items, "bytes": e.bytes, "frames": e.frames,
                    "stalls": e.stalls, "credits": e.credits,
                })
            })
            .collect();
        let restores: Vec<Value> = r
            .restore_history()
            .iter()
            .map(|x| self.restore(x))
            .collect();
        json!({
            "elapsed_s": r.elapsed().as_secs_f64(),
            "workers": members.len(),
            "finished": r.is_finished(),
            "units": [],
            "edges": [],
            "checkpoints": [],
            "upgrades": [],
            "remote": {
                "members": members
                    .iter()
                    .map(|m| json!({"id": m.id, "addr": m.addr, "alive": m.alive, "left": m.left, "parts": m.parts}))
                    .collect::<Vec<_>>(),
                "parts": r.parts(),
                "cut_edges": cut_edges,
                "checkpoints": r.checkpoints(),
                "skipped_checkpoints": r.skipped_checkpoints(),
                "last_checkpoint_s": r.last_checkpoint_seconds(),
                "restores": restores,
            },
        })
    }
}

/// A restore's `kind`, as the snapshot names it.
fn kind_name(k: RestoreKind) -> &'static str {
    match k {
        RestoreKind::Lost => "lost",
        RestoreKind::Failed => "failed",
        RestoreKind::Left => "left",
        RestoreKind::Joined => "joined",
    }
}

fn units(m: &Metrics) -> Vec<Value> {
    m.units
        .iter()
        .map(|u| {
            json!({
                "name": u.name, "worker": u.worker, "items_in": u.items_in,
                "items_out": u.items_out, "errors": u.errors, "busy": u.busy,
                "blocked": u.blocked, "idle": u.idle, "queue_depth": u.queue_depth,
                "ring_capacity": u.ring_capacity,
            })
        })
        .collect()
}

impl Source for PipelineSource {
    fn kind(&self) -> Kind {
        Kind::Pipeline
    }

    fn title(&self) -> String {
        self.title.clone()
    }

    fn snapshot(&self) -> Value {
        match &self.watched {
            Watched::Local(o) => self.local(o),
            Watched::Remote(r) => self.remote_snapshot(r),
        }
    }

    fn metrics(&self) -> String {
        match &self.watched {
            Watched::Local(o) => render_local(o),
            Watched::Remote(r) => render_remote(r),
        }
    }
}

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

fn encode(r: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String does not fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, r);
    out
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UnitLabels {
    /// Its place in description order (names need not be unique).
    index: String,
    unit: String,
    worker: String,
}

/// A one-process deployment's metrics (prefix `statepipe_pipeline`).
fn render_local(o: &Observer) -> String {
    let m = o.metrics();
    let mut r = Registry::with_prefix("statepipe_pipeline");
    let items_in = Family::<UnitLabels, Counter>::default();
    let items_out = Family::<UnitLabels, Counter>::default();
    let errors = Family::<UnitLabels, Counter>::default();
    let busy = Family::<UnitLabels, FloatGauge>::default();
    let blocked = Family::<UnitLabels, FloatGauge>::default();
    let depth = Family::<UnitLabels, Gauge>::default();
    let capacity = Family::<UnitLabels, Gauge>::default();
    for (k, u) in m.units.iter().enumerate() {
        let l = UnitLabels {
            index: k.to_string(),
            unit: u.name.clone(),
            worker: u.worker.to_string(),
        };
        items_in.get_or_create(&l).inc_by(u.items_in);
        items_out.get_or_create(&l).inc_by(u.items_out);
        errors.get_or_create(&l).inc_by(u.errors);
        busy.get_or_create(&l).set(u.busy);
        blocked.get_or_create(&l).set(u.blocked);
        depth
            .get_or_create(&l)
            .set(i64::try_from(u.queue_depth).unwrap_or(i64::MAX));
        capacity
            .get_or_create(&l)
            .set(i64::try_from(u.ring_capacity).unwrap_or(i64::MAX));
    }
    r.register("unit_items_in", "Items a unit took in", items_in);
    r.register("unit_items_out", "Outputs a unit emitted", items_out);
    r.register(
        "unit_errors",
        "Items a unit rejected (sent to the error output)",
        errors,
    );
    r.register(
        "unit_busy_ratio",
        "Share of the elapsed time the unit's station spent working",
        busy,
    );
    r.register(
        "unit_blocked_ratio",
        "Share of the elapsed time the unit's station spent held back by a full ring",
        blocked,
    );
    r.register(
        "unit_queue_depth",
        "Messages waiting in the unit's station's input ring(s)",
        depth,
    );
    r.register(
        "unit_ring_capacity",
        "Slots of the unit's station's input ring(s)",
        capacity,
    );
    r.register(
        "workers",
        "Workers in the plan",
        int_gauge(m.workers as u64),
    );
    r.register(
        "elapsed_seconds",
        "Time since the deployment started (to its end, once finished)",
        float_gauge(m.elapsed.as_secs_f64()),
    );
    r.register(
        "finished",
        "1 once the deployment has ended",
        int_gauge(u64::from(o.is_finished())),
    );
    let checkpoints = o.checkpoints();
    // The history is bounded; the last one's number counts them all.
    r.register(
        "checkpoints",
        "Checkpoints completed (the last one's number)",
        counter(checkpoints.last().map_or(0, |c| c.id)),
    );
    if let Some(c) = checkpoints.last() {
        r.register(
            "last_checkpoint_seconds",
            "From the last checkpoint's request to its manifest being durable",
            float_gauge(c.duration.as_secs_f64()),
        );
        r.register(
            "last_checkpoint_max_stall_seconds",
            "The longest any unit spent copying its states at the last checkpoint",
            float_gauge(c.max_stall.as_secs_f64()),
        );
        r.register(
            "last_checkpoint_bytes",
            "Bytes of state the last checkpoint wrote",
            int_gauge(c.bytes),
        );
        r.register(
            "last_checkpoint_position",
            "Inputs accepted before the last checkpoint's barrier",
            int_gauge(c.position),
        );
    }
    let upgrades = o.upgrades();
    let failed = upgrades.iter().filter(|u| u.result.is_err()).count() as u64;
    r.register(
        "upgrades",
        "Stage upgrades applied or refused (of the last ones kept)",
        counter(upgrades.len() as u64),
    );
    r.register(
        "upgrade_failures",
        "Stage upgrades refused, the old code kept (of the last ones kept)",
        counter(failed),
    );
    encode(&r)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EdgeLabels {
    edge: String,
}

/// A distributed run's metrics (prefix `statepipe_remote`): its cut
/// edges' counters, checkpoints and restores, and at the coordinator its
/// members and parts. The names are those `statepipe run --coordinator
/// --metrics` and `statepipe member --metrics` serve.
fn render_remote(m: &RemoteMetrics) -> String {
    let mut r = Registry::with_prefix("statepipe_remote");
    let items = Family::<EdgeLabels, Counter>::default();
    let bytes = Family::<EdgeLabels, Counter>::default();
    let frames = Family::<EdgeLabels, Counter>::default();
    let stalls = Family::<EdgeLabels, Counter>::default();
    let credits = Family::<EdgeLabels, Gauge>::default();
    for e in m.edges() {
        let l = EdgeLabels {
            edge: e.name.clone(),
        };
        items.get_or_create(&l).inc_by(e.items);
        bytes.get_or_create(&l).inc_by(e.bytes);
        frames.get_or_create(&l).inc_by(e.frames);
        stalls.get_or_create(&l).inc_by(e.stalls);
        credits
            .get_or_create(&l)
            .set(i64::try_from(e.credits).unwrap_or(i64::MAX));
    }
    r.register("edge_items", "Items that crossed a cut edge", items);
    r.register(
        "edge_bytes",
        "Bytes of item frames that crossed a cut edge",
        bytes,
    );
    r.register("edge_frames", "Frames that crossed a cut edge", frames);
    r.register(
        "edge_stalls",
        "Times a cut edge's sender waited for credits",
        stalls,
    );
    r.register(
        "edge_credits",
        "Credits granted and not yet used: the items a cut edge may still carry (its queue's room)",
        credits,
    );
    r.register(
        "checkpoints",
        "Checkpoints committed by every part",
        counter(m.checkpoints()),
    );
    r.register(
        "skipped_checkpoints",
        "Checkpoints that could not be written (a part's copy or the commit) and were skipped",
        counter(m.skipped_checkpoints()),
    );
    r.register(
        "restores",
        "Restores from a checkpoint: after a member was lost or a part failed, and the rescales",
        counter(m.restores()),
    );
    r.register(
        "rescales",
        "Of the restores, those after a member left or joined",
        counter(m.rescales()),
    );
    r.register(
        "checkpoint_seconds",
        "From the last committed checkpoint's barrier to its commit",
        float_gauge(m.last_checkpoint_seconds()),
    );
    r.register(
        "parts_done",
        "Parts this process ran to their end",
        counter(m.parts_done()),
    );
    let members = m.members();
    if !members.is_empty() {
        let alive = members.iter().filter(|x| x.alive).count() as u64;
        r.register(
            "members_alive",
            "Members connected to the coordinator",
            int_gauge(alive),
        );
        r.register(
            "parts",
            "Parts the run is cut into",
            int_gauge(m.parts() as u64),
        );
    }
    encode(&r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use statepipe_pipeline::{Config, Pipeline};

    /// The README's `pipeline` fields.
    const FIELDS: [&str; 8] = [
        "elapsed_s",
        "workers",
        "finished",
        "units",
        "edges",
        "checkpoints",
        "upgrades",
        "remote",
    ];

    fn keys(v: &Value) -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    }

    fn sorted(fields: &[&str]) -> Vec<String> {
        let mut k: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
        k.sort();
        k
    }

    #[test]
    fn a_local_snapshot_has_the_readmes_fields() {
        let dir = std::env::temp_dir().join(format!("statepipe-dash-{}", std::process::id()));
        let p = Pipeline::map("a", |x: u64| x).then(Pipeline::durable_stage(
            "sum",
            0u64,
            statepipe_pipeline::machine::step(|s: &mut u64, x: u64| {
                *s += x;
                *s
            }),
        ));
        let d = p
            .deploy(
                &Config::new()
                    .plan(vec![0, 1])
                    .pin(false)
                    .checkpoint_dir(&dir),
            )
            .unwrap();
        let (mut input, mut output, running) = (d.input, d.output, d.running);
        let source = PipelineSource::new(running.observer(), "test");
        assert_eq!(source.kind(), Kind::Pipeline);
        assert_eq!(source.title(), "test");
        input.send_all(0..10).unwrap();
        let ticket = running.checkpoint().unwrap();
        drop(input);
        while output.recv().is_some() {}
        ticket.wait().unwrap();
        running.join().unwrap();
        let s = source.snapshot();
        assert_eq!(keys(&s), sorted(&FIELDS));
        assert_eq!(s["finished"], true);
        assert_eq!(s["remote"], Value::Null);
        assert_eq!(
            keys(&s["units"][0]),
            sorted(&[
                "name",
                "worker",
                "items_in",
                "items_out",
                "errors",
                "busy",
                "blocked",
                "idle",
                "queue_depth",
                "ring_capacity"
            ])
        );
        assert_eq!(s["units"][1]["ring_capacity"], 1024);
        assert_eq!(
            s["edges"],
            json!([["input", "a"], ["a", "sum"], ["sum", "output"]])
        );
        assert_eq!(
            keys(&s["checkpoints"][0]),
            sorted(&["id", "t", "position", "bytes", "duration_s", "max_stall_s"])
        );
        assert_eq!(s["checkpoints"][0]["position"], 10);
        let text = source.metrics();
        assert!(
            text.contains(
                "statepipe_pipeline_unit_items_in_total{index=\"1\",unit=\"sum\",worker=\"1\"} 10"
            ),
            "{text}"
        );
        assert!(
            text.contains("statepipe_pipeline_checkpoints_total 1"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_remote_snapshot_has_the_readmes_fields() {
        let source = PipelineSource::remote(RemoteMetrics::default(), "coordinator");
        let s = source.snapshot();
        assert_eq!(keys(&s), sorted(&FIELDS));
        assert_eq!(
            keys(&s["remote"]),
            sorted(&[
                "members",
                "parts",
                "cut_edges",
                "checkpoints",
                "skipped_checkpoints",
                "last_checkpoint_s",
                "restores"
            ])
        );
        assert_eq!(s["finished"], false);
        let text = source.metrics();
        assert!(
            text.contains("statepipe_remote_checkpoints_total 0"),
            "{text}"
        );
        assert!(text.contains("statepipe_remote_restores_total 0"), "{text}");
        assert!(text.contains("statepipe_remote_rescales_total 0"), "{text}");
        assert!(
            text.contains("# TYPE statepipe_remote_rescales counter"),
            "{text}"
        );
    }

    #[test]
    fn a_restore_says_its_kind() {
        let source = PipelineSource::remote(RemoteMetrics::default(), "coordinator");
        let info = |kind, lost: Option<&str>, why: &str| RestoreInfo {
            at: source.created,
            members_left: 2,
            restore: statepipe_pipeline::remote::Restore {
                kind,
                lost: lost.map(str::to_string),
                why: why.to_string(),
                from: Some(3),
                position: 300,
                detected_after: std::time::Duration::from_millis(5),
            },
        };
        let lost = source.restore(&info(
            RestoreKind::Lost,
            Some("2 (10.0.0.3:5000)"),
            "its connection closed",
        ));
        assert_eq!(
            keys(&lost),
            sorted(&["t", "kind", "checkpoint", "members", "member", "why"])
        );
        assert_eq!(lost["kind"], "lost");
        assert_eq!(lost["member"], "2 (10.0.0.3:5000)");
        assert_eq!(lost["checkpoint"], 3);
        assert_eq!(lost["members"], 2);
        assert_eq!(lost["t"], 0.0);
        let failed = source.restore(&info(RestoreKind::Failed, None, "boom"));
        assert_eq!(failed["kind"], "failed");
        assert_eq!(failed["member"], Value::Null);
        assert_eq!(failed["why"], "boom");
        let left = source.restore(&info(
            RestoreKind::Left,
            None,
            "member 2 (10.0.0.3:5000) asked to leave",
        ));
        assert_eq!(left["kind"], "left");
        assert_eq!(left["why"], "member 2 (10.0.0.3:5000) asked to leave");
        let joined = source.restore(&info(RestoreKind::Joined, None, "member 3 joined"));
        assert_eq!(joined["kind"], "joined");
    }
}
