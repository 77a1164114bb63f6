//! Checkpoints, restores and upgrades against the sequential meaning.
//!
//! A random pipeline (every construct) is deployed on a random plan, a
//! checkpoint is taken after a random number of inputs, the run goes on to
//! a random later input and ends; a new deployment, on another random
//! plan, restores the checkpoint and is fed the inputs from its position.
//! The outputs before the position from the first run and all of the
//! second's, by input number, and the second run's final states, must be
//! those of `run_sequential` over the whole input. An upgrade after input
//! `k` must equal the interpreter's upgrade between inputs `k - 1` and `k`.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use common::random::{build, count, desc};
use common::{cases, random_plan, watchdog};
use proptest::prelude::*;
use statepipe_pipeline::machine;
use statepipe_pipeline::{
    Checkpoint, CheckpointError, Config, DeployError, Failure, Pipeline, Run, StageState,
};

type Fail = (u64, String, i64, String);

fn fails(fs: &[Failure]) -> Vec<Fail> {
    let mut v: Vec<Fail> = fs
        .iter()
        .map(|f| {
            let item = *f.item::<i64>().expect("items are i64");
            (f.seq, f.stage.clone(), item, f.error.to_string())
        })
        .collect();
    v.sort();
    v
}

fn counters(states: &[StageState]) -> Vec<(String, i64)> {
    states
        .iter()
        .filter_map(|s| Some((s.name.clone(), *s.get::<i64>()?)))
        .collect()
}

/// What a run up to a checkpoint left: outputs `(seq, out)`, failures, and
/// the checkpoint's position.
struct FirstRun {
    outputs: Vec<(u64, i64)>,
    failures: Vec<Failure>,
    position: u64,
}

/// Deploys `p` on `config`, sends `inputs[..k]`, takes a checkpoint, sends
/// `inputs[k..m]`, and ends the run.
fn run_with_checkpoint(
    p: Pipeline<i64, i64>,
    config: &Config,
    inputs: &[i64],
    k: usize,
    m: usize,
) -> FirstRun {
    let d = p.deploy(config).expect("a durable pipeline deploys");
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    let (outputs, ticket) = std::thread::scope(|s| {
        let drain = s.spawn(move || {
            let mut got = Vec::new();
            while let Some(x) = output.recv() {
                got.push(x);
            }
            (got, output.failures().collect::<Vec<_>>())
        });
        input.send_all(inputs[..k].iter().copied()).unwrap();
        let ticket = running.checkpoint().expect("checkpoints are configured");
        input.send_all(inputs[k..m].iter().copied()).unwrap();
        drop(input);
        (drain.join().unwrap(), ticket)
    });
    let info = ticket.wait().expect("the checkpoint completes");
    let done = running.join().expect("no stage panics");
    let (outputs, mut failures) = outputs;
    failures.extend(done.failures);
    FirstRun {
        outputs,
        failures,
        position: info.position,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

    #[test]
    fn restore_and_replay_equal_the_sequential_run(
        d in desc(),
        inputs in prop::collection::vec(-30i64..30, 0..80),
        (k_pick, m_pick) in (any::<u16>(), any::<u16>()),
        (w1, w2) in (1usize..=3, 1usize..=3),
        (seed1, seed2) in (any::<u64>(), any::<u64>()),
        capacity_log in 1u32..6,
    ) {
        let n = inputs.len();
        let k = k_pick as usize % (n + 1);
        let m = k + m_pick as usize % (n - k + 1);
        let want = build(&d, "p").run_sequential(inputs.clone());
        let dir = tempfile::tempdir().unwrap();

        let p = build(&d, "p");
        let plan1 = random_plan(p.units().len(), w1, seed1);
        let config = Config::new()
            .plan(plan1.clone())
            .pin(false)
            .capacity(1 << capacity_log)
            .checkpoint_dir(dir.path());
        let (inputs1, config1) = (inputs.clone(), config.clone());
        let first = watchdog(move || run_with_checkpoint(p, &config1, &inputs1, k, m));
        prop_assert_eq!(first.position, k as u64);

        let ckpt = Checkpoint::latest(dir.path()).unwrap().expect("a complete checkpoint");
        prop_assert_eq!(ckpt.position(), k as u64);
        let p = build(&d, "p");
        let plan2 = random_plan(p.units().len(), w2, seed2);
        let config2 = Config::new()
            .plan(plan2.clone())
            .pin(false)
            .capacity(1 << capacity_log)
            .restore(ckpt);
        let rest = inputs[k..].to_vec();
        let second: Run<i64> = watchdog(move || {
            p.deploy(&config2).expect("the checkpoint restores").run(rest).unwrap()
        });

        // A sink that drops what it saw: before the position from the
        // first run, from the position on from the second.
        let mut outputs: Vec<(u64, i64)> =
            first.outputs.iter().copied().filter(|&(s, _)| s < k as u64).collect();
        outputs.extend(second.seqs.iter().copied().zip(second.outputs.iter().copied()));
        let want_pairs: Vec<(u64, i64)> =
            want.seqs.iter().copied().zip(want.outputs.iter().copied()).collect();
        prop_assert_eq!(outputs, want_pairs, "plans {:?} then {:?}", plan1, plan2);

        let mut got_fails: Vec<Fail> =
            fails(&first.failures).into_iter().filter(|f| f.0 < k as u64).collect();
        got_fails.extend(fails(&second.failures));
        got_fails.sort();
        prop_assert_eq!(got_fails, fails(&want.failures));
        prop_assert_eq!(counters(&second.states), counters(&want.states));
    }

    #[test]
    fn an_upgrade_at_item_k_equals_the_interpreter_switching_at_k(
        d in desc(),
        inputs in prop::collection::vec(-30i64..30, 0..60),
        k_pick in any::<u16>(),
        copies in 1usize..4,
        workers in 1usize..=3,
        seed in any::<u64>(),
    ) {
        let k = k_pick as usize % (inputs.len() + 1);
        // A counter in front, and a sharded counter behind the random part;
        // both are upgraded to count in hundreds, with a new state type.
        let make = || {
            let (front, h) = Pipeline::upgradable("front", 0i64, machine::step(count));
            let mut hs = Vec::new();
            let back = Pipeline::shard(copies, |c| {
                let (p, h) = Pipeline::upgradable(&format!("back {c}"), 0i64, machine::step(count));
                hs.push(h);
                p
            });
            (front.then(build(&d, "p")).then(back), h, hs)
        };
        let hundreds = || machine::step(|s: &mut (i64, u32), x: i64| {
            s.0 += 100;
            s.1 += 1;
            x.wrapping_add(s.0)
        });
        let migrate = |old: &i64| Ok::<_, String>((*old, 0u32));

        let (p, h, hs) = make();
        let mut seq = p.sequential();
        for &x in &inputs[..k] {
            seq.push(x);
        }
        seq.upgrade(&h, hundreds(), migrate).unwrap();
        for hb in &hs {
            seq.upgrade(hb, hundreds(), migrate).unwrap();
        }
        for &x in &inputs[k..] {
            seq.push(x);
        }
        let want = seq.finish();

        let (p, h, hs) = make();
        let plan = random_plan(p.units().len(), workers, seed);
        let config = Config::new().plan(plan.clone()).pin(false).capacity(4);
        let inputs2 = inputs.clone();
        let (outputs, failures, states) = watchdog(move || {
            let dep = p.deploy(&config).unwrap();
            let (mut input, mut output, running) = (dep.input, dep.output, dep.running);
            let got = std::thread::scope(|s| {
                let drain = s.spawn(move || {
                    let mut got = Vec::new();
                    while let Some(x) = output.recv() {
                        got.push(x);
                    }
                    (got, output.failures().collect::<Vec<_>>())
                });
                input.send_all(inputs2[..k].iter().copied()).unwrap();
                let t1 = running.upgrade(&h, hundreds(), migrate).unwrap();
                let t2 = running.upgrade_all(&hs, |_| hundreds(), migrate).unwrap();
                input.send_all(inputs2[k..].iter().copied()).unwrap();
                drop(input);
                let got = drain.join().unwrap();
                t1.wait().unwrap();
                t2.wait().unwrap();
                got
            });
            let done = running.join().unwrap();
            let (got, failures) = got;
            (got, failures, done.states)
        });
        let want_pairs: Vec<(u64, i64)> =
            want.seqs.iter().copied().zip(want.outputs.iter().copied()).collect();
        prop_assert_eq!(outputs, want_pairs, "plan {:?}", plan);
        prop_assert_eq!(fails(&failures), fails(&want.failures));
        let upgraded = |states: &[StageState]| -> Vec<(String, (i64, u32))> {
            states.iter().filter_map(|s| Some((s.name.clone(), *s.get::<(i64, u32)>()?))).collect()
        };
        prop_assert_eq!(upgraded(&states), upgraded(&want.states));
        prop_assert_eq!(upgraded(&states).len(), 1 + copies);
        prop_assert_eq!(counters(&states), counters(&want.states));
    }
}

/// A durable word counter: the pipeline the file tests checkpoint.
fn words() -> Pipeline<String, (String, u64)> {
    Pipeline::map("lower", |w: String| w.to_lowercase()).then(Pipeline::durable_stage(
        "count",
        BTreeMap::<String, u64>::new(),
        machine::step(|seen: &mut BTreeMap<String, u64>, w: String| {
            let n = seen.entry(w.clone()).or_insert(0);
            *n += 1;
            (w, *n)
        }),
    ))
}

/// A checkpoint of `words` after "a b a" in a fresh folder.
fn checkpointed() -> (tempfile::TempDir, Checkpoint) {
    let dir = tempfile::tempdir().unwrap();
    let first = run_words(
        &Config::new().workers(1).checkpoint_dir(dir.path()),
        &["a", "b", "a"],
    );
    assert_eq!(first, 3);
    let ckpt = Checkpoint::latest(dir.path()).unwrap().unwrap();
    (dir, ckpt)
}

fn run_words(config: &Config, ws: &[&str]) -> u64 {
    let d = words().deploy(config).unwrap();
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    input.send_all(ws.iter().map(|w| w.to_string())).unwrap();
    let t = running.checkpoint().unwrap();
    drop(input);
    while output.recv().is_some() {}
    let info = t.wait().unwrap();
    running.join().unwrap();
    info.position
}

fn restore_err(ckpt_dir: &std::path::Path) -> CheckpointError {
    let ckpt = match Checkpoint::open(ckpt_dir) {
        Ok(c) => c,
        Err(e) => return e,
    };
    match words().deploy(&Config::new().workers(1).restore(ckpt)) {
        Err(DeployError::Checkpoint(e)) => e,
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a bad checkpoint restored"),
    }
}

#[test]
fn a_restored_counter_goes_on_from_its_state() {
    let (_dir, ckpt) = checkpointed();
    assert_eq!(ckpt.manifest().stages.len(), 2);
    let run = words()
        .deploy(&Config::new().workers(2).pin(false).restore(ckpt))
        .unwrap()
        .run(["A", "c"].map(String::from))
        .unwrap();
    assert_eq!(run.outputs, [("a".to_string(), 3), ("c".to_string(), 1)]);
    assert_eq!(run.seqs, [3, 4]);
}

#[test]
fn damaged_checkpoints_are_refused_naming_the_file() {
    let (_dir, ckpt) = checkpointed();
    let d = ckpt.dir().to_path_buf();
    let manifest = d.join("MANIFEST");
    let original = fs::read(&manifest).unwrap();
    let state = d.join(
        &ckpt
            .manifest()
            .stages
            .iter()
            .find(|s| s.name == "count")
            .unwrap()
            .file,
    );
    let original_state = fs::read(&state).unwrap();

    // A truncated manifest.
    fs::write(&manifest, &original[..original.len() / 2]).unwrap();
    match restore_err(&d) {
        CheckpointError::Damaged { file, .. } => assert!(file.ends_with("MANIFEST")),
        e => panic!("{e}"),
    }
    // A flipped byte in the manifest.
    let mut bad = original.clone();
    bad[10] ^= 0x20;
    fs::write(&manifest, &bad).unwrap();
    let e = restore_err(&d);
    assert!(e.to_string().contains("checksum"), "{e}");
    // Another format version, with a valid checksum.
    let text = String::from_utf8(original.clone()).unwrap();
    let body = &text[..text.trim_end().rfind('\n').unwrap() + 1];
    let v2 = body.replace("\"version\": 1", "\"version\": 2");
    let with_crc = |b: &str| format!("{b}crc32c {:08x}\n", crc32c(b.as_bytes()));
    fs::write(&manifest, with_crc(&v2)).unwrap();
    assert!(
        restore_err(&d).to_string().contains("version 2"),
        "wrong version"
    );
    // Not a statepipe manifest at all.
    fs::write(
        &manifest,
        with_crc("{\"format\": \"something-else\", \"version\": 1}\n"),
    )
    .unwrap();
    assert!(restore_err(&d)
        .to_string()
        .contains("not a statepipe-checkpoint"));
    // A foreign checkpoint: a stage this pipeline lacks.
    let foreign = body.replace("\"name\": \"count\"", "\"name\": \"tally\"");
    fs::write(&manifest, with_crc(&foreign)).unwrap();
    match restore_err(&d) {
        CheckpointError::Mismatch(m) => assert!(m.contains("tally"), "{m}"),
        e => panic!("{e}"),
    }
    fs::write(&manifest, &original).unwrap();

    // A corrupted, then a truncated state file.
    let mut bad = original_state.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    fs::write(&state, &bad).unwrap();
    match restore_err(&d) {
        CheckpointError::Damaged { file, what } => {
            assert!(file.ends_with(".state"), "{file}");
            assert!(what.contains("checksum"), "{what}");
        }
        e => panic!("{e}"),
    }
    fs::write(&state, &original_state[..original_state.len() - 3]).unwrap();
    assert!(restore_err(&d).to_string().contains("truncated"));
    fs::write(&state, &original_state).unwrap();
    // Nothing was overwritten by the refusals: it restores now.
    assert!(words()
        .deploy(
            &Config::new()
                .workers(1)
                .restore(Checkpoint::open(&d).unwrap())
        )
        .is_ok());
    // A folder without its manifest was never completed.
    fs::remove_file(&manifest).unwrap();
    assert!(matches!(
        restore_err(&d),
        CheckpointError::Incomplete { .. }
    ));
}

#[test]
fn the_previous_checkpoint_stays_until_a_newer_one_is_complete() {
    let (dir, first) = checkpointed();
    // A crash while the next one was written: a folder without manifest.
    let partial = dir.path().join(format!("ckpt-{:010}", first.id() + 1));
    fs::create_dir(&partial).unwrap();
    fs::write(partial.join("0000.state"), b"half").unwrap();
    assert_eq!(Checkpoint::latest(dir.path()).unwrap().unwrap(), first);
    // The next deployment completes a newer one and removes both.
    let config = Config::new()
        .workers(1)
        .restore(first.clone())
        .checkpoint_dir(dir.path());
    assert_eq!(run_words(&config, &["b"]), 4);
    let newest = Checkpoint::latest(dir.path()).unwrap().unwrap();
    assert!(newest.id() > first.id() + 1);
    assert!(!first.dir().exists() && !partial.exists());
}

#[test]
fn a_stage_that_cannot_be_saved_is_refused_at_deploy() {
    let p = Pipeline::stage(
        "opaque",
        0u32,
        machine::step(|s: &mut u32, x: u32| {
            *s += x;
            *s
        }),
    );
    let dir = tempfile::tempdir().unwrap();
    match p.deploy(&Config::new().workers(1).checkpoint_dir(dir.path())) {
        Err(DeployError::Checkpoint(CheckpointError::NotDurable { stage })) => {
            assert_eq!(stage, "opaque")
        }
        other => panic!("{:?}", other.err()),
    }
    let twice = Pipeline::map("same", |x: u32| x).then(Pipeline::map("same", |x: u32| x));
    match twice.deploy(&Config::new().workers(1).checkpoint_dir(dir.path())) {
        Err(DeployError::Checkpoint(CheckpointError::DuplicateStage(s))) => assert_eq!(s, "same"),
        other => panic!("{:?}", other.err()),
    }
    // Without checkpoints, nothing is asked of the states.
    let d = Pipeline::map("m", |x: u32| x)
        .deploy(&Config::new().workers(1))
        .unwrap();
    assert!(matches!(
        d.running.checkpoint(),
        Err(CheckpointError::NotConfigured(_))
    ));
}

#[test]
fn periodic_checkpoints_keep_one_complete_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new()
        .workers(1)
        .checkpoint_dir(dir.path())
        .checkpoint_every(Duration::from_millis(2));
    let d = words().deploy(&config).unwrap();
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    for i in 0..2_000u32 {
        input.send(format!("w{}", i % 7)).unwrap();
        while output.try_recv().is_some() {}
        if i % 100 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // Wait until a periodic checkpoint completed after the last input.
    let last = loop {
        if let Some(c) = running.last_checkpoint().filter(|c| c.position == 2_000) {
            break c;
        }
        while output.try_recv().is_some() {}
        std::thread::sleep(Duration::from_millis(1));
    };
    drop(input);
    while output.recv().is_some() {}
    running.join().unwrap();
    let on_disk = Checkpoint::latest(dir.path()).unwrap().unwrap();
    assert!(on_disk.id() >= last.id);
    // Checkpoint folders, and the writer's `LOCK`.
    let folders = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name() != "LOCK")
        .count();
    assert_eq!(folders, 1, "older checkpoints are removed");
}

fn crc32c(b: &[u8]) -> u32 {
    // The manifest's checksum (Castagnoli), bit by bit: the tests need no
    // crate of their own for it.
    let mut crc = !0u32;
    for &byte in b {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82f6_3b78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn a_checkpoint_folder_takes_one_deployment_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new().workers(1).checkpoint_dir(dir.path());
    let first = words().deploy(&config).unwrap();
    // A second writer would mix its checkpoints with the first's.
    match words().deploy(&config).map(|_| ()) {
        Err(DeployError::Checkpoint(CheckpointError::InUse { holder, .. })) => {
            assert_eq!(holder, Some(std::process::id()));
        }
        other => panic!("expected InUse, got {other:?}"),
    }
    let (input, mut output, running) = (first.input, first.output, first.running);
    drop(input);
    while output.recv().is_some() {}
    running.join().unwrap();
    // Once the first has ended, the folder is free.
    let again = words().deploy(&config).unwrap();
    drop(again.input);
    let mut output = again.output;
    while output.recv().is_some() {}
    again.running.join().unwrap();
}

#[test]
fn checkpoints_and_upgrades_are_remembered_in_order() {
    watchdog(|| {
        let dir = tempfile::tempdir().unwrap();
        let (front, h) = Pipeline::upgradable("front", 0i64, machine::step(count));
        let d = front
            .deploy(
                &Config::new()
                    .workers(1)
                    .pin(false)
                    .checkpoint_dir(dir.path()),
            )
            .unwrap();
        let (mut input, mut output, running) = (d.input, d.output, d.running);
        let observer = running.observer();
        let drain = std::thread::spawn(move || while output.recv().is_some() {});
        let mut infos = Vec::new();
        for k in 0..3 {
            input.send_all(k * 10..k * 10 + 10).unwrap();
            infos.push(running.checkpoint().unwrap().wait().unwrap());
            assert_eq!(running.checkpoints(), infos, "one more per checkpoint");
        }
        assert_eq!(running.last_checkpoint().as_ref(), infos.last());
        let positions: Vec<u64> = infos.iter().map(|c| c.position).collect();
        assert_eq!(positions, [10, 20, 30]);
        assert!(infos.windows(2).all(|w| w[0].completed <= w[1].completed));
        let hundreds = machine::step(|s: &mut i64, x: i64| {
            *s += 100;
            x + *s
        });
        running
            .upgrade(&h, hundreds, |old: &i64| Ok::<_, String>(*old))
            .unwrap()
            .wait()
            .unwrap();
        let ups = running.upgrades();
        assert_eq!(ups.len(), 1);
        assert_eq!(ups[0].stage, "front");
        assert_eq!(ups[0].result, Ok(()));
        assert!(ups[0].completed >= observer.started());
        drop(input);
        drain.join().unwrap();
        running.join().unwrap();
        // The observer keeps the history after the deployment ended.
        assert_eq!(observer.checkpoints(), infos);
        assert_eq!(observer.upgrades(), ups);
    });
}
