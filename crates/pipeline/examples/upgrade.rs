//! A word counter that is checkpointed, upgraded while it runs to a new
//! state type, stopped hard, and resumed from its last checkpoint; the
//! result is checked against the sequential meaning with the same upgrade.
//!
//! `cargo run --release -p statepipe-pipeline --example upgrade [DIR]`
//! (checkpoints go to DIR, or to a temporary folder).

use std::collections::BTreeMap;

use statepipe_pipeline::{machine, Checkpoint, Config, Pipeline, StageHandle};

/// Version 1 counts each word.
type V1 = BTreeMap<String, u64>;

/// Version 2 also remembers where each word was last seen.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Seen {
    count: u64,
    last: u64,
}
type V2 = BTreeMap<String, Seen>;

fn v1() -> impl machine::Machine<V1, In = (u64, String), Out = (String, u64)> + Send {
    machine::step(|t: &mut V1, (_, w): (u64, String)| {
        let n = t.entry(w.clone()).or_insert(0);
        *n += 1;
        (w, *n)
    })
}

fn v2() -> impl machine::Machine<V2, In = (u64, String), Out = (String, u64)> + Send {
    machine::step(|t: &mut V2, (at, w): (u64, String)| {
        let s = t.entry(w.clone()).or_default();
        s.count += 1;
        s.last = at;
        (w, s.count)
    })
}

/// `migrate`: the `code_change` from version 1 to 2.
fn migrate(old: &V1) -> Result<V2, String> {
    Ok(old
        .iter()
        .map(|(w, &count)| (w.clone(), Seen { count, last: 0 }))
        .collect())
}

type Handle<S> = StageHandle<S, (u64, String), (String, u64)>;

fn counter_v1() -> (Pipeline<String, (String, u64)>, Handle<V1>) {
    let (count, h) = Pipeline::upgradable("count", V1::new(), v1());
    (stamp().then(count), h)
}

fn counter_v2() -> Pipeline<String, (String, u64)> {
    stamp().then(Pipeline::upgradable("count", V2::new(), v2()).0)
}

/// Numbers the words (a stateful stage, checkpointed too).
fn stamp() -> Pipeline<String, (u64, String)> {
    Pipeline::durable_stage(
        "stamp",
        0u64,
        machine::step(|n: &mut u64, w: String| {
            *n += 1;
            (*n, w.to_lowercase())
        }),
    )
}

fn words(n: usize) -> Vec<String> {
    let text = "the quick brown fox jumps over the lazy dog and the dog sleeps";
    text.split(' ').cycle().take(n).map(String::from).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp = tempfile::tempdir()?;
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| tmp.path().to_path_buf());
    let all = words(3_000);

    // The meaning: the sequential interpreter, upgraded after word 1,000.
    let (p, h) = counter_v1();
    let mut seq = p.sequential();
    for w in &all[..1_000] {
        seq.push(w.clone());
    }
    seq.upgrade(&h, v2(), migrate)?;
    for w in &all[1_000..] {
        seq.push(w.clone());
    }
    let want = seq.finish();

    // Deployed: checkpoint at 1,000, upgrade there, checkpoint at 2,000,
    // then stop hard after 2,500 (the last 500 are lost with the process).
    let (p, h) = counter_v1();
    let d = p.deploy(&Config::new().workers(2).pin(false).checkpoint_dir(&dir))?;
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    let mut got: Vec<(u64, (String, u64))> = Vec::new();
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        let drain = s.spawn(|| {
            let mut v = Vec::new();
            while let Some(x) = output.recv() {
                v.push(x);
            }
            v
        });
        input.send_all(all[..1_000].iter().cloned())?;
        let c1 = running.checkpoint()?;
        let up = running.upgrade(&h, v2(), migrate)?;
        input.send_all(all[1_000..2_000].iter().cloned())?;
        let c2 = running.checkpoint()?;
        println!("checkpoint {} at input {}", c1.id(), c1.wait()?.position);
        up.wait()?;
        println!("upgraded `count` to version 2 at input 1000");
        println!("checkpoint at input {}", c2.wait()?.position);
        input.send_all(all[2_000..2_500].iter().cloned())?;
        running.stop(); // a crash: what was in flight is gone
        drop(input);
        got = drain.join().map_err(|_| "the drain panicked")?;
        Ok(())
    })?;
    let _ = running.join(); // reports the stop
    println!("stopped hard after {} outputs", got.len());

    // Resumed with the new code from the newest complete checkpoint.
    let ckpt = Checkpoint::latest(&dir)?.ok_or("no checkpoint")?;
    let from = ckpt.position();
    println!("resuming from {} at input {from}", ckpt.dir().display());
    let config = Config::new().workers(1).checkpoint_dir(&dir).restore(ckpt);
    let rest = counter_v2()
        .deploy(&config)?
        .run(all[from as usize..].to_vec())?;

    // A sink that drops what it saw: before `from` from the first run.
    let mut outputs: Vec<(u64, (String, u64))> =
        got.into_iter().filter(|(s, _)| *s < from).collect();
    outputs.extend(rest.seqs.iter().copied().zip(rest.outputs.iter().cloned()));
    let expected: Vec<_> = want
        .seqs
        .iter()
        .copied()
        .zip(want.outputs.iter().cloned())
        .collect();
    assert_eq!(
        outputs, expected,
        "resumed outputs differ from the sequential run"
    );
    assert_eq!(rest.state::<V2>("count"), want.state::<V2>("count"));
    let the = &rest.state::<V2>("count").ok_or("no state")?["the"];
    println!(
        "{} outputs as the sequential run gives them; `the` seen {} times, last as word {}",
        outputs.len(),
        the.count,
        the.last
    );
    Ok(())
}
