//! Tests of the telemetry books: bounds, the lane window and merging, the
//! workers' rows and the JSON.
use super::*;
use std::time::Duration;

fn addr(port: u16) -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], port))
}

#[test]
fn buffers_are_bounded() {
    let t = Telemetry::new();
    t.joined(0, addr(1));
    let now = Instant::now();
    for i in 0..(STEP_TIMES as u64 + 50) {
        t.step_done(i + 1, 0.5);
        t.record_pf_step(i + 1, -1.0, 10.0, 100);
    }
    // Four workers, each answering a batch every 10 ms (apart enough
    // not to merge), all within the window.
    for i in 0..(LANES + 100) {
        let at = now + Duration::from_millis(10 * (i / 4) as u64);
        t.batch(i % 4, &WorkerStats::default(), 1_000, at);
        if i < EVENTS + 10 {
            t.straggler_rerun(0, String::new());
        }
    }
    let s = t.snapshot();
    assert_eq!(s.step_times.len(), STEP_TIMES);
    assert_eq!(s.step_times[0].0, 51);
    assert_eq!(s.step, STEP_TIMES as u64 + 50);
    assert_eq!(s.totals.steps, STEP_TIMES as u64 + 50);
    let pf = s.pf.expect("pf");
    assert_eq!((pf.loglik.len(), pf.ess.len()), (STEP_TIMES, STEP_TIMES));
    // The closed ones up to the cap, and each worker's open one.
    assert_eq!(s.lanes.len(), LANES + 4);
    assert_eq!(s.events.len(), EVENTS);
    assert_eq!(s.totals.stragglers_rerun, EVENTS as u64 + 10);
}

#[test]
fn lanes_keep_the_last_window() {
    let t = Telemetry::new();
    // A clock 100 s in: segments that ended more than a minute before
    // the newest are forgotten as new ones come.
    let start = t.inner.start;
    let at = |s: u64| start + Duration::from_secs(s);
    let stats = WorkerStats::default();
    t.batch(0, &stats, 1_000_000_000, at(10));
    t.batch(0, &stats, 1_000_000_000, at(30));
    t.transfer(1, &stats, at(20), at(21));
    t.transfer(1, &stats, at(30), at(31));
    t.batch(1, &stats, 500_000_000, at(99));
    t.batch(1, &stats, 500_000_000, at(100));
    let b = t.books();
    let ends: Vec<f64> = b.lanes.iter().map(|l| l.end_s).collect();
    // Closed: worker 1's busy 98.5–99 (the next did not start within
    // the merge gap); the two before it ended over a minute earlier.
    assert_eq!(ends, vec![99.0]);
    let l = b.lanes[0];
    assert_eq!(
        (l.worker, l.kind, l.start_s),
        (1, TelemetryLaneKind::Busy, 98.5)
    );
    drop(b);
    // The snapshot keeps what ended within the last minute of now (a
    // real clock near 0 here: every segment so far), open ones
    // included.
    assert_eq!(t.snapshot().lanes.len(), 4);
}

#[test]
fn segments_close_together_merge() {
    let t = Telemetry::new();
    let start = t.inner.start;
    let ms = |m: u64| start + Duration::from_millis(m);
    let stats = WorkerStats::default();
    // Back-to-back batches, one 3 ms gap (merged) and one 20 ms gap.
    t.batch(0, &stats, 10_000_000, ms(110));
    t.batch(0, &stats, 10_000_000, ms(120));
    t.batch(0, &stats, 10_000_000, ms(133));
    t.batch(0, &stats, 10_000_000, ms(163));
    // Another worker's and another kind's segments stay apart.
    t.batch(1, &stats, 10_000_000, ms(120));
    t.transfer(0, &stats, ms(120), ms(125));
    let mut lanes = t.snapshot().lanes;
    lanes.sort_by(|a, b| {
        (a.worker, a.start_s)
            .partial_cmp(&(b.worker, b.start_s))
            .unwrap()
    });
    let got: Vec<_> = lanes
        .iter()
        .map(|l| {
            (
                l.worker,
                l.kind,
                (l.start_s * 1e3).round(),
                (l.end_s * 1e3).round(),
            )
        })
        .collect();
    use TelemetryLaneKind::*;
    assert_eq!(
        got,
        vec![
            (0, Busy, 100.0, 133.0),
            (0, Transfer, 120.0, 125.0),
            (0, Busy, 153.0, 163.0),
            (1, Busy, 110.0, 120.0),
        ]
    );
}

#[test]
fn workers_wait_and_totals() {
    let t = Telemetry::new();
    t.joined(0, addr(4100));
    t.joined(1, addr(4101));
    let a = WorkerStats {
        busy_ns: 1,
        bytes_in: 10,
        bytes_out: 5,
        steals_in: 2,
        ..WorkerStats::default()
    };
    t.workers([(a.clone(), 7), (a, 3)].into_iter());
    t.lost(1, "connection reset");
    t.recovered(1, 3, 1);
    t.finish();
    t.finish();
    let s = t.snapshot();
    assert!(s.finished);
    assert_eq!(s.workers.len(), 2);
    assert_eq!(s.workers[0].name, "worker 0 (127.0.0.1:4100)");
    assert!(s.workers[0].alive && !s.workers[1].alive);
    assert_eq!((s.workers[0].states, s.workers[1].states), (7, 0));
    assert!(s.workers.iter().all(|w| w.wait_s >= 0.0));
    assert_eq!(s.totals.states, 7);
    assert_eq!(s.totals.bytes, 30);
    assert_eq!(s.totals.steals, 4);
    assert_eq!(s.totals.losses, 1);
    let kinds: Vec<_> = s.events.iter().map(|e| e.kind).collect();
    use TelemetryEventKind::*;
    assert_eq!(kinds, vec![Joined, Joined, Lost, Recovered, Finished]);
    // The clock stopped with the run.
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(t.snapshot().elapsed_s, s.elapsed_s);
}

/// The JSON is the dashboard's `evolve` object, field for field.
#[test]
fn json_matches_the_dashboard_contract() {
    let t = Telemetry::new();
    t.joined(0, addr(4100));
    t.batch(0, &WorkerStats::default(), 1_000, Instant::now());
    t.transfer(0, &WorkerStats::default(), Instant::now(), Instant::now());
    t.step_done(1, 0.5);
    t.rolled_back(0, 3);
    let v = serde_json::to_value(t.snapshot()).expect("serialises");
    let keys = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    let sorted = |k: &[&str]| {
        let mut k: Vec<String> = k.iter().map(|s| s.to_string()).collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(&v),
        sorted(&[
            "step",
            "total_steps",
            "elapsed_s",
            "finished",
            "step_times",
            "workers",
            "lanes",
            "totals",
            "events",
            "pf"
        ])
    );
    assert!(v["total_steps"].is_null() && v["pf"].is_null());
    assert_eq!(v["step_times"], serde_json::json!([[1, 0.5]]));
    assert_eq!(
        keys(&v["workers"][0]),
        sorted(&[
            "id",
            "name",
            "alive",
            "states",
            "bytes_in",
            "bytes_out",
            "busy_s",
            "transfer_s",
            "wait_s",
            "evolved",
            "batches",
            "steals_in",
            "steals_out",
            "recovered_states",
            "left"
        ])
    );
    let lanes = v["lanes"].as_array().expect("lanes");
    assert_eq!(lanes[0][0], 0);
    assert_eq!(lanes[0][1], "busy");
    assert_eq!(lanes[1][1], "transfer");
    assert!(lanes[0][2].is_f64() && lanes[0][3].is_f64());
    assert_eq!(
        keys(&v["totals"]),
        sorted(&[
            "steps",
            "states",
            "bytes",
            "steals",
            "losses",
            "promotions",
            "rollbacks",
            "stragglers_rerun"
        ])
    );
    let ev = &v["events"];
    assert_eq!(keys(&ev[0]), sorted(&["t", "kind", "worker", "detail"]));
    assert_eq!(ev[0]["kind"], "joined");
    assert_eq!(ev[1]["kind"], "rolled_back");
    assert!(ev[1]["worker"].is_null());
    t.set_total_steps(10);
    t.record_pf_step(1, -12.5, 8123.0, 10_000);
    let v = serde_json::to_value(t.snapshot()).expect("serialises");
    assert_eq!(v["total_steps"], 10);
    assert_eq!(
        v["pf"],
        serde_json::json!({"particles": 10000, "loglik": [[1, -12.5]], "ess": [[1, 8123.0]]})
    );
    // Every kind's name.
    let names: Vec<_> = [
        TelemetryEventKind::Joined,
        TelemetryEventKind::Lost,
        TelemetryEventKind::Recovered,
        TelemetryEventKind::Promoted,
        TelemetryEventKind::RolledBack,
        TelemetryEventKind::StragglerRerun,
        TelemetryEventKind::Finished,
    ]
    .iter()
    .map(|k| serde_json::to_value(k).expect("kind"))
    .collect();
    assert_eq!(
        names,
        [
            "joined",
            "lost",
            "recovered",
            "promoted",
            "rolled_back",
            "straggler_rerun",
            "finished"
        ]
    );
}
