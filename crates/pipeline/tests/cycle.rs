//! Cycles (`deploy_cycle`): every seed goes round until `step` retires it,
//! whatever the plan, the ring sizes or how items multiply; failures retire
//! their item; a panicking `step` is named; nothing hangs.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proptest::prelude::*;
use statepipe_pipeline::STEP_NAME;
use statepipe_pipeline::{machine, Checkpoint, Config, DeployError, Finished, Pipeline};

/// Runs `f` on a thread; a hang fails the test instead of stalling CI.
fn watchdog<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(f()).ok());
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the cycle hung")
}

/// An item of the test cycles: a value, its laps so far, and the seed it
/// descends from.
type Item = (u64, u32, u64);

/// One lap: `split` outputs per item (a tree of descendants), each value
/// mixed; items whose value is divisible by `fail_mod` fail at "check".
fn lap(stages: usize, split: u64, fail_mod: u64) -> Pipeline<Item, Item> {
    let mix = |s: usize| {
        Pipeline::durable_stage(
            &format!("mix {s}"),
            0u64,
            machine::step(move |seen: &mut u64, (v, laps, seed): Item| {
                *seen += 1;
                (
                    v.wrapping_mul(6364136223846793005)
                        .wrapping_add(s as u64 + 1)
                        >> 1,
                    laps,
                    seed,
                )
            }),
        )
    };
    let body = (1..stages).fold(mix(0), |p, s| p.then(mix(s)));
    // A shard in the loop: merges must restore order lap after lap.
    let body = body.then(Pipeline::shard(2, |k| {
        Pipeline::map(&format!("copy {k}"), |(v, laps, seed): Item| {
            (v.rotate_left(7), laps, seed)
        })
    }));
    body.then(Pipeline::try_map("check", move |(v, laps, seed): Item| {
        if fail_mod > 1 && v % fail_mod == 0 {
            Err(format!("{v} is divisible by {fail_mod}"))
        } else {
            Ok((v, laps + 1, seed))
        }
    }))
    .then(Pipeline::stage(
        "split",
        (),
        machine::flat(move |_: &mut (), (v, laps, seed): Item| {
            (0..split).map(move |k| (v ^ k, laps, seed))
        }),
    ))
}

/// What a sequential interpreter retires: every descendant after `laps`
/// laps, and how many items failed, computed by running the same lap
/// pipeline sequentially, generation by generation.
fn model(seeds: &[u64], laps: u32, stages: usize, split: u64, fail_mod: u64) -> (Vec<Item>, usize) {
    let mut gen: Vec<Item> = seeds.iter().map(|&s| (s, 0, s)).collect();
    let mut retired = Vec::new();
    let mut failed = 0;
    while !gen.is_empty() {
        let run = lap(stages, split, fail_mod).run_sequential(gen);
        failed += run.failures.len();
        gen = Vec::new();
        for item in run.outputs {
            if item.1 >= laps {
                retired.push(item);
            } else {
                gen.push(item);
            }
        }
    }
    retired.sort_unstable();
    (retired, failed)
}

struct Case {
    seeds: Vec<u64>,
    laps: u32,
    stages: usize,
    split: u64,
    fail_mod: u64,
    plan: Vec<usize>,
    capacity: usize,
}

fn deployed(case: Case) -> (Vec<Item>, Finished) {
    let retired = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&retired);
    let laps = case.laps;
    let seeds: Vec<Item> = case.seeds.iter().map(|&s| (s, 0, s)).collect();
    let config = Config::new()
        .workers(case.plan.iter().max().map_or(1, |w| w + 1))
        .plan(case.plan)
        .capacity(case.capacity)
        .pin(false);
    let running = lap(case.stages, case.split, case.fail_mod)
        .deploy_cycle(&config, seeds, move |_, item: Item| {
            if item.1 >= laps {
                out.lock().unwrap().push(item);
                None
            } else {
                Some(item)
            }
        })
        .expect("deploys");
    let finished = running.join().expect("joins");
    let mut retired = std::mem::take(&mut *retired.lock().unwrap());
    retired.sort_unstable();
    (retired, finished)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the plan and ring sizes, a cycle retires exactly what the
    /// sequential model does, reports every failure, and every stage saw
    /// every lap of every item.
    #[test]
    fn cycles_retire_what_the_model_retires(
        seeds in proptest::collection::vec(any::<u64>(), 0..40),
        laps in 1u32..6,
        stages in 1usize..5,
        split in 1u64..3,
        fail_mod in prop_oneof![Just(0u64), 3u64..9],
        workers in 1usize..4,
        cap_pow in 0u32..8,
        plan_seed in any::<u64>(),
    ) {
        let split = if laps > 4 { 1 } else { split };
        // The mix stages, two shard copies and their merge, check, split.
        let units = stages + 5;
        // A random monotone plan over `workers` workers.
        let plan = monotone_plan(units, workers, plan_seed);
        let (expected, failed) = model(&seeds, laps, stages, split, fail_mod);
        let case = Case { seeds, laps, stages, split, fail_mod, plan, capacity: 1 << cap_pow };
        let (retired, finished) = watchdog(move || deployed(case));
        prop_assert_eq!(&retired, &expected);
        prop_assert_eq!(finished.failures.len(), failed);
        prop_assert!(finished.failures.iter().all(|f| f.stage == "check"));
        let mix0 = finished.states.iter().find(|s| s.name == "mix 0").unwrap();
        let entered = finished.metrics.units[0].items_in;
        prop_assert_eq!(*mix0.get::<u64>().unwrap(), entered);
    }
}

#[test]
fn a_cycle_with_no_seeds_finishes() {
    let (retired, finished) = watchdog(|| {
        deployed(Case {
            seeds: vec![],
            laps: 3,
            stages: 2,
            split: 1,
            fail_mod: 0,
            plan: vec![0, 0, 0, 1, 1, 1, 1],
            capacity: 4,
        })
    });
    assert!(retired.is_empty());
    assert_eq!(finished.metrics.units[0].items_in, 0);
}

#[test]
fn items_that_multiply_past_every_ring_do_not_deadlock() {
    // 1 seed doubling for 10 laps: 1024 leaves through rings of 1 slot.
    let (retired, _) = watchdog(|| {
        deployed(Case {
            seeds: vec![7],
            laps: 10,
            stages: 1,
            split: 2,
            fail_mod: 0,
            plan: vec![0, 1, 0, 1, 1, 1],
            capacity: 1,
        })
    });
    assert_eq!(retired.len(), 1024);
}

#[test]
fn a_panicking_step_is_named_and_nothing_hangs() {
    let err = watchdog(|| {
        let p = Pipeline::map("inc", |x: u64| x + 1);
        let config = Config::new().workers(2).plan(vec![1]).pin(false);
        let running = p
            .deploy_cycle(&config, 0..100u64, |_, x| {
                assert!(x < 50, "step saw {x}");
                Some(x)
            })
            .expect("deploys");
        running.join().expect_err("the step panicked")
    });
    match err {
        DeployError::StagePanicked { stage, message } => {
            assert_eq!(stage, STEP_NAME);
            assert!(message.contains("step saw"), "{message}");
        }
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn the_dot_graph_draws_the_feedback_edge() {
    let p = Pipeline::map("a", |x: u64| x).then(Pipeline::map("b", |x: u64| x));
    let config = Config::new().workers(2).plan(vec![0, 1]).pin(false);
    let running = p
        .deploy_cycle(&config, 0..10u64, |_, _| None::<u64>)
        .expect("deploys");
    let dot = running.to_dot();
    running.join().expect("joins");
    assert!(dot.contains("output -> input"), "{dot}");
}

#[test]
fn a_stage_panicking_mid_cycle_on_two_workers_is_named_and_nothing_hangs() {
    let err = watchdog(|| {
        let p = Pipeline::map("inc", |x: u64| x + 1).then(Pipeline::map("boom", |x: u64| {
            assert!(x < 500, "boom at {x}");
            x
        }));
        let config = Config::new()
            .workers(2)
            .plan(vec![0, 1])
            .capacity(4)
            .pin(false);
        let running = p
            .deploy_cycle(&config, 0..64u64, |_, x| Some(x))
            .expect("deploys");
        running.join().expect_err("a stage panicked")
    });
    match err {
        DeployError::StagePanicked { stage, message } => {
            assert_eq!(stage, "boom");
            assert!(message.contains("boom at"), "{message}");
        }
        other => panic!("unexpected error {other}"),
    }
}

/// The monotone plan of the property tests: `units` units over `workers`.
fn monotone_plan(units: usize, workers: usize, seed: u64) -> Vec<usize> {
    let mut plan: Vec<usize> = (0..units)
        .map(|u| ((seed >> (u % 64)) as usize & 1) + u * workers / units)
        .map(|w| w.min(workers - 1))
        .collect();
    for u in 1..units {
        plan[u] = plan[u].max(plan[u - 1]);
    }
    plan
}

/// Runs a durable cycle to its end; `gate` holds the seeds back after the
/// first half until the caller has asked for a checkpoint. Returns what it
/// retired, by group number, and how it finished.
fn durable_run(
    case: &Case,
    config: &Config,
    seeds: Box<dyn Iterator<Item = Item> + Send>,
    checkpoint_then: Option<mpsc::Sender<()>>,
) -> (Vec<(u64, Item)>, Finished, Option<u64>) {
    let retired = Arc::new(Mutex::new(Vec::new()));
    let out = Arc::clone(&retired);
    let laps = case.laps;
    let running = lap(case.stages, case.split, case.fail_mod)
        .deploy_durable_cycle(config, seeds, move |seq, item: Item| {
            if item.1 >= laps {
                out.lock().unwrap().push((seq, item));
                None
            } else {
                Some(item)
            }
        })
        .expect("deploys");
    let position = checkpoint_then.map(|go| {
        let ticket = running.checkpoint().expect("a durable cycle checkpoints");
        go.send(()).unwrap();
        ticket
            .wait()
            .expect("the checkpoint completes before the cycle ends")
            .position
    });
    let finished = running.join().expect("joins");
    let retired = std::mem::take(&mut *retired.lock().unwrap());
    (retired, finished, position)
}

fn mix_states(f: &Finished) -> Vec<(String, u64)> {
    f.states
        .iter()
        .filter(|s| s.name.starts_with("mix"))
        .map(|s| (s.name.clone(), *s.get::<u64>().unwrap()))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// A durable cycle checkpointed while it runs, restored on another
    /// plan and fed the same seeds: what the first run retired from
    /// groups before the checkpoint's position and all the second run
    /// retired is what the model retires; the failures likewise; every
    /// stage ends in the state of the uninterrupted run.
    #[test]
    fn a_restored_cycle_retires_what_the_model_retires(
        seeds in proptest::collection::vec(any::<u64>(), 1..60),
        laps in 1u32..5,
        stages in 1usize..4,
        split in 1u64..3,
        fail_mod in prop_oneof![Just(0u64), 3u64..9],
        (w1, w2) in (1usize..4, 1usize..4),
        (seed1, seed2) in (any::<u64>(), any::<u64>()),
        cap_pow in 0u32..6,
    ) {
        let split = if laps > 3 { 1 } else { split };
        let units = stages + 5;
        let (expected, failed) = model(&seeds, laps, stages, split, fail_mod);
        let dir = tempfile::tempdir().unwrap();
        let case = Case {
            seeds: seeds.clone(),
            laps,
            stages,
            split,
            fail_mod,
            plan: monotone_plan(units, w1, seed1),
            capacity: 1 << cap_pow,
        };
        let items: Vec<Item> = seeds.iter().map(|&s| (s, 0, s)).collect();
        let path = dir.path().to_path_buf();
        let (first, first_done, position) = watchdog(move || {
            let config = Config::new()
                .workers(w1)
                .plan(case.plan.clone())
                .capacity(case.capacity)
                .pin(false)
                .checkpoint_dir(&path);
            // Half the seeds, then wait for the checkpoint's request.
            let (go, wait) = mpsc::channel::<()>();
            let half = items.len() / 2;
            let (before, after) = (items[..half].to_vec(), items[half..].to_vec());
            let gate = std::iter::once_with(move || wait.recv().ok())
                .flatten()
                .flat_map(|()| Vec::<Item>::new());
            let gated = before.into_iter().chain(gate).chain(after);
            durable_run(&case, &config, Box::new(gated), Some(go))
        });
        let position = position.unwrap();
        let ckpt = Checkpoint::latest(dir.path()).unwrap().expect("a complete checkpoint");
        prop_assert_eq!(ckpt.position(), position);

        let case = Case {
            seeds: seeds.clone(),
            laps,
            stages,
            split,
            fail_mod,
            plan: monotone_plan(units, w2, seed2),
            capacity: 1 << cap_pow,
        };
        let items: Vec<Item> = seeds.iter().map(|&s| (s, 0, s)).collect();
        let (second, second_done, _) = watchdog(move || {
            let config = Config::new()
                .workers(w2)
                .plan(case.plan.clone())
                .capacity(case.capacity)
                .pin(false)
                .restore(ckpt);
            durable_run(&case, &config, Box::new(items.into_iter()), None)
        });
        prop_assert!(second.iter().all(|&(s, _)| s >= position), "the new run numbers on");
        let mut retired: Vec<Item> = first
            .iter()
            .filter(|&&(s, _)| s < position)
            .chain(&second)
            .map(|&(_, item)| item)
            .collect();
        retired.sort_unstable();
        prop_assert_eq!(retired, expected);
        let before = first_done.failures.iter().filter(|f| f.seq < position).count();
        prop_assert_eq!(before + second_done.failures.len(), failed);
        prop_assert_eq!(mix_states(&second_done), mix_states(&first_done));
    }
}

#[test]
fn a_plain_cycle_refuses_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new().workers(1).checkpoint_dir(dir.path());
    let err = lap(1, 1, 0)
        .deploy_cycle(&config, Vec::<Item>::new(), |_, _| None)
        .err()
        .expect("refused");
    assert!(err.to_string().contains("deploy_durable_cycle"), "{err}");
}
