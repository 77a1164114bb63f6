//! Deployment behaviour: plans, back-pressure, drain, panics, metrics.
//! (That deployed results equal the sequential ones is the property test in
//! `random_pipelines.rs`.) No test here asserts a time.

mod common;

use std::thread;
use std::time::Duration;

use common::{assert_panicked, panic_of, watchdog};
use statepipe_pipeline::TrySendError;
use statepipe_pipeline::{machine, Config, Pipeline, UnitKind};

fn chain() -> Pipeline<u64, u64> {
    Pipeline::map("a", |x: u64| x + 1)
        .then(Pipeline::stage(
            "sum",
            0u64,
            machine::step(|s: &mut u64, x: u64| {
                *s += x;
                x * 2
            }),
        ))
        .then(Pipeline::map("c", |x: u64| x + 3))
}

#[test]
fn units_are_listed_in_description_order_with_shard_merges() {
    let p = Pipeline::map("a", |x: u8| x)
        .then(Pipeline::shard(2, |k| {
            Pipeline::map(&format!("s{k}"), |x: u8| x)
        }))
        .then(Pipeline::map("z", |x: u8| x));
    let units = p.units();
    let names: Vec<_> = units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["a", "s0", "s1", "merge ×2", "z"]);
    assert_eq!(units[3].kind, UnitKind::Merge);
}

#[test]
fn every_plan_drains_and_returns_the_final_states() {
    for plan in [vec![0, 0, 0], vec![0, 1, 0], vec![0, 1, 2], vec![2, 1, 0]] {
        let run = watchdog(move || {
            chain()
                .deploy(&Config::new().plan(plan).pin(false).capacity(4))
                .unwrap()
                .run(0..1000u64)
                .unwrap()
        });
        assert_eq!(run.outputs.len(), 1000);
        assert_eq!(run.outputs[999], (999 + 1) * 2 + 3);
        assert_eq!(run.state::<u64>("sum"), Some(&(1..=1000).sum::<u64>()));
    }
}

#[test]
fn thread_per_stage_and_balanced_agree() {
    let want = chain().run_sequential(0..500u64).outputs;
    for config in [
        Config::new().thread_per_stage(),
        Config::new().workers(2).pin(false),
        Config::new().workers(1),
    ] {
        let got = watchdog(move || chain().deploy(&config).unwrap().run(0..500u64).unwrap());
        assert_eq!(got.outputs, want);
    }
}

#[test]
fn try_send_hands_the_item_back_when_the_pipeline_is_full() {
    watchdog(|| {
        let d = Pipeline::map("id", |x: u32| x)
            .deploy(&Config::new().workers(1).pin(false).capacity(2))
            .unwrap();
        let (mut input, mut output, running) = (d.input, d.output, d.running);
        // Nobody reads the output: input ring, station and output ring fill.
        let mut sent = 0u32;
        let refused = loop {
            match input.try_send(sent) {
                Ok(_) => sent += 1,
                Err(TrySendError::Full(x)) => break x,
                Err(TrySendError::Stopped(_)) => panic!("not stopped"),
            }
            if sent > 10_000 {
                panic!("a bounded pipeline took {sent} items without back-pressure");
            }
            thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(refused, sent, "the refused item comes back");
        drop(input);
        let mut got = Vec::new();
        while let Some((_, x)) = output.recv() {
            got.push(x);
        }
        assert_eq!(got, (0..sent).collect::<Vec<_>>(), "nothing lost");
        running.join().unwrap();
    });
}

#[test]
fn a_panicking_stage_stops_the_pipeline_and_join_names_it() {
    for plan in [vec![0, 0], vec![0, 1]] {
        let p = Pipeline::map("fine", |x: u32| x).then(Pipeline::map("boom", |x: u32| {
            assert!(x != 7, "seven is not allowed");
            x
        }));
        assert_panicked(panic_of(p, plan), "boom", "seven");
    }
}

#[test]
fn failures_reach_the_error_output_and_the_pipeline_goes_on() {
    let run = watchdog(|| {
        Pipeline::try_map("parse", |s: String| s.parse::<u32>())
            .then(Pipeline::map("double", |x: u32| x * 2))
            .deploy(&Config::new().plan(vec![0, 1]).pin(false))
            .unwrap()
            .run(["1", "x", "3", "", "5"].map(String::from))
            .unwrap()
    });
    assert_eq!(run.outputs, [2, 6, 10]);
    assert_eq!(run.seqs, [0, 2, 4]);
    let failed: Vec<_> = run
        .failures
        .iter()
        .map(|f| (f.seq, f.stage.as_str()))
        .collect();
    assert_eq!(failed, [(1, "parse"), (3, "parse")]);
}

#[test]
fn metrics_count_items_per_unit_and_the_deployed_graph_is_drawn() {
    watchdog(|| {
        let p = Pipeline::map("a", |x: u64| x)
            .then(Pipeline::try_map("odd", |x: u64| {
                if x % 2 == 1 {
                    Ok(x)
                } else {
                    Err("even")
                }
            }))
            .then(Pipeline::shard(2, |k| {
                Pipeline::map(&format!("s{k}"), |x: u64| x)
            }));
        let d = p
            .deploy(&Config::new().plan(vec![0, 1, 0, 1, 0]).pin(false))
            .unwrap();
        let (mut input, mut output, running) = (d.input, d.output, d.running);
        for x in 0..100 {
            input.send(x).unwrap();
        }
        drop(input);
        let mut n = 0;
        while output.recv().is_some() {
            n += 1;
        }
        assert_eq!(n, 50);
        let dot = running.to_dot();
        assert!(dot.contains("cluster_w1"), "{dot}");
        assert!(dot.contains("depth"), "{dot}");
        let done = running.join().unwrap();
        let m = &done.metrics;
        let by_name = |name: &str| m.units.iter().find(|u| u.name == name).unwrap();
        assert_eq!(by_name("a").items_in, 100);
        assert_eq!(by_name("odd").items_out, 50);
        assert_eq!(by_name("odd").errors, 50);
        assert_eq!(by_name("s0").items_in + by_name("s1").items_in, 50);
        let table = m.to_string();
        assert!(table.contains("odd"), "{table}");
    });
}

#[test]
fn bad_configurations_say_what_to_do() {
    let err = chain().deploy(&Config::new().plan(vec![0])).err().unwrap();
    assert!(err.to_string().contains("Pipeline::units()"), "{err}");
    let err = chain()
        .deploy(&Config::new().place("nope", 1))
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("the units are: a, sum, c"),
        "{err}"
    );
}

#[test]
fn dropping_a_running_deployment_stops_its_workers() {
    watchdog(|| {
        let d = chain()
            .deploy(&Config::new().workers(2).pin(false).capacity(2))
            .unwrap();
        let mut input = d.input;
        for x in 0..10 {
            let _ = input.try_send(x);
        }
        drop(d.running); // output never read, input still open
    });
}

#[test]
fn calibration_measures_visits_per_unit() {
    let p = Pipeline::stage("twice", (), machine::flat(|(), x: u32| [x, x + 1]))
        .then(Pipeline::try_map("odd", |x: u32| {
            if x % 2 == 1 {
                Ok(x)
            } else {
                Err("even")
            }
        }))
        .then(Pipeline::shard(2, |k| {
            Pipeline::map(&format!("s{k}"), |x: u32| x)
        }));
    let costs = watchdog(move || p.calibrate(0..100u32).unwrap());
    let visits: Vec<(&str, f64)> = costs.iter().map(|c| (c.name.as_str(), c.visits)).collect();
    assert_eq!(
        visits,
        [
            ("twice", 1.0),
            ("odd", 2.0),
            ("s0", 0.5),
            ("s1", 0.5),
            ("merge ×2", 1.0)
        ]
    );
    assert!(costs.iter().all(|c| c.cost_ns >= 1.0));
}

/// With `output_hold(ZERO)` a station publishes each output as soon as it
/// is made: here the stage waits, before each item but the first, until
/// the reader has the previous output, so an output held back until the
/// end of the input batch (all 50 items, sent at once) would hang it.
#[test]
fn a_zero_output_hold_publishes_each_output_at_once() {
    watchdog(|| {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let gate = Pipeline::map("gate", move |x: u64| {
            if x > 0 {
                wait.recv().expect("the reader lives");
            }
            x * 10
        });
        let config = Config::new()
            .workers(1)
            .pin(false)
            .output_hold(Duration::ZERO);
        let mut d = gate.deploy(&config).expect("deploys");
        d.input.send_all(0..50).expect("running");
        drop(d.input);
        for k in 0..50 {
            assert_eq!(d.output.recv(), Some((k, k * 10)));
            go.send(()).ok();
        }
        assert_eq!(d.output.recv(), None);
        d.running.join().expect("no stage panics");
    });
}

#[test]
fn the_output_is_an_iterator_of_outputs_in_order() {
    watchdog(|| {
        let config = Config::new().workers(2).pin(false);
        let mut d = chain().deploy(&config).expect("deploys");
        d.input.send_all(0..100u64).expect("running");
        drop(d.input);
        let got: Vec<(u64, u64)> = d.output.by_ref().collect();
        let want: Vec<(u64, u64)> = (0..100).map(|x| (x, (x + 1) * 2 + 3)).collect();
        assert_eq!(got, want);
        assert_eq!(d.output.failures().count(), 0);
        assert!(d.output.is_finished());
        d.running.join().expect("no stage panics");
    });
}

#[test]
fn metrics_name_the_deployed_edges_and_each_stations_ring_capacity() {
    watchdog(|| {
        // a on worker 0; sum and c fused on worker 1 behind one ring.
        let d = chain()
            .deploy(&Config::new().plan(vec![0, 1, 1]).pin(false).capacity(64))
            .unwrap();
        let (mut input, mut output, running) = (d.input, d.output, d.running);
        let observer = running.observer();
        let m = running.metrics();
        let edge = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            m.edges,
            [
                edge("input", "a"),
                edge("a", "sum"),
                edge("sum", "c"),
                edge("c", "output")
            ]
        );
        for u in &m.units {
            assert_eq!(u.ring_capacity, 64, "{u:?}");
            assert!(u.queue_depth <= u.ring_capacity, "{u:?}");
        }
        assert!(!observer.is_finished());
        assert_eq!(observer.metrics().edges, m.edges);
        input.send_all(0..100).unwrap();
        drop(input);
        while output.recv().is_some() {}
        let done = running.join().unwrap();
        // The observer outlives the deployment and reports its end.
        assert!(observer.is_finished());
        assert_eq!(observer.metrics(), done.metrics);
        assert_eq!(observer.metrics().units[0].items_in, 100);
        assert!(observer.checkpoints().is_empty());
        assert!(observer.upgrades().is_empty());
    });
}

#[test]
fn a_merge_reports_the_rings_of_all_its_copies() {
    watchdog(|| {
        let p = Pipeline::map("a", |x: u64| x).then(Pipeline::shard(3, |k| {
            Pipeline::map(&format!("s{k}"), |x: u64| x)
        }));
        // a, s0, s1, s2, merge: every copy and the merge on a worker of its own.
        let running = p
            .deploy_with(
                &Config::new()
                    .plan(vec![0, 1, 2, 3, 0])
                    .pin(false)
                    .capacity(32),
                0..50u64,
                |_, _| {},
            )
            .unwrap();
        let m = running.metrics();
        let by_name = |name: &str| m.units.iter().find(|u| u.name == name).unwrap();
        assert_eq!(
            by_name("a").ring_capacity,
            0,
            "an iterator feeds it: no ring"
        );
        assert_eq!(by_name("s1").ring_capacity, 32);
        assert_eq!(by_name(&m.units[4].name).ring_capacity, 3 * 32);
        for copy in ["s0", "s1", "s2"] {
            assert!(
                m.edges.contains(&("a".into(), copy.into())),
                "{:?}",
                m.edges
            );
        }
        running.join().unwrap();
    });
}
