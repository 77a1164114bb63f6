//! At the sequential level, random pipelines built from every combinator
//! (depth ≤ 4, random shard counts, keys and failing items) give exactly the
//! outputs, failures and final states of a reference written in plain Rust
//! from the same random description; and the same pipelines deployed on
//! 1–4 workers by random plans, with rings small enough to fill, give
//! exactly what the sequential interpreter gives.

mod common;

use common::random::{build, count, desc, fail, pair, side, tuple, Desc};
use common::{cases, random_plan};
use proptest::prelude::*;
use statepipe_pipeline::machine::{self, Machine};
use statepipe_pipeline::{shard_of, Config, Either, Pipeline, Run};
use std::time::Duration;

/// The same description, run by hand.
enum Ref {
    Add(i64),
    Count(String, i64),
    Dup,
    Fail(String, i64),
    Fused(String, i64),
    Then(Box<Ref>, Box<Ref>),
    FanOut(Box<Ref>, Box<Ref>),
    Par(Box<Ref>, Box<Ref>),
    Choice(Box<Ref>, Box<Ref>),
    Merge(Box<Ref>, Box<Ref>),
    FanOutN(Vec<Ref>),
    Choose(String, Vec<Ref>),
    Shard(Vec<Ref>, usize),
    ShardByKey(Vec<Ref>, i64),
}

type Fail = (u64, String, i64, String);

impl Ref {
    fn new(d: &Desc, path: &str) -> Ref {
        let sub = |k: usize, d: &Desc| Box::new(Ref::new(d, &format!("{path}.{k}")));
        let copies = |n: usize, d: &Desc| {
            (0..n)
                .map(|k| Ref::new(d, &format!("{path}/{k}")))
                .collect()
        };
        match d {
            &Desc::Add(c) => Ref::Add(c),
            Desc::Count => Ref::Count(path.into(), 0),
            Desc::Dup => Ref::Dup,
            &Desc::Fail(m) => Ref::Fail(path.into(), m),
            Desc::Fused => Ref::Fused(path.into(), 0),
            Desc::Then(a, b) => Ref::Then(sub(0, a), sub(1, b)),
            Desc::FanOut(a, b) => Ref::FanOut(sub(0, a), sub(1, b)),
            Desc::Par(a, b) => Ref::Par(sub(0, a), sub(1, b)),
            Desc::Choice(a, b) => Ref::Choice(sub(0, a), sub(1, b)),
            Desc::Merge(a, b) => Ref::Merge(sub(0, a), sub(1, b)),
            Desc::FanOutN(ds) => {
                Ref::FanOutN(ds.iter().enumerate().map(|(k, d)| *sub(k, d)).collect())
            }
            Desc::Choose(ds) => Ref::Choose(
                path.into(),
                ds.iter().enumerate().map(|(k, d)| *sub(k, d)).collect(),
            ),
            Desc::Shard(n, d) => Ref::Shard(copies(*n, d), 0),
            &Desc::ShardByKey(n, m, ref d) => Ref::ShardByKey(copies(n, d), m),
        }
    }

    fn apply(&mut self, seq: u64, x: i64, fails: &mut Vec<Fail>) -> Vec<i64> {
        match self {
            Ref::Add(c) => vec![x.wrapping_add(*c)],
            Ref::Count(_, s) => vec![count(s, x)],
            Ref::Dup => (0..x.rem_euclid(3)).map(|k| x.wrapping_add(k)).collect(),
            Ref::Fail(name, m) => match fail(x, *m) {
                Ok(y) => vec![y],
                Err(e) => {
                    fails.push((seq, name.clone(), x, e));
                    vec![]
                }
            },
            Ref::Fused(_, s) => {
                let a = count(s, x);
                if x % 2 == 0 {
                    vec![a.wrapping_sub(x)]
                } else {
                    vec![]
                }
            }
            Ref::Then(a, b) => {
                let ys = a.apply(seq, x, fails);
                ys.into_iter()
                    .flat_map(|y| b.apply(seq, y, fails))
                    .collect()
            }
            Ref::FanOut(a, b) => {
                let ys = a.apply(seq, x, fails);
                let zs = b.apply(seq, x, fails);
                ys.iter()
                    .flat_map(|&y| zs.iter().map(move |&z| pair(y, z)))
                    .collect()
            }
            Ref::Par(a, b) => {
                let ys = a.apply(seq, x, fails);
                let zs = b.apply(seq, x / 2, fails);
                ys.iter()
                    .flat_map(|&y| zs.iter().map(move |&z| y.wrapping_sub(z)))
                    .collect()
            }
            Ref::Choice(a, b) => match side(x) {
                Either::Left(l) => a.apply(seq, l, fails),
                Either::Right(r) => b
                    .apply(seq, r, fails)
                    .into_iter()
                    .map(|y| y.wrapping_add(1000))
                    .collect(),
            },
            Ref::Merge(a, b) => match side(x) {
                Either::Left(l) => a.apply(seq, l, fails),
                Either::Right(r) => b.apply(seq, r, fails),
            },
            Ref::FanOutN(branches) => {
                let lists: Vec<Vec<i64>> = branches
                    .iter_mut()
                    .map(|b| b.apply(seq, x, fails))
                    .collect();
                let mut combos: Vec<Vec<i64>> = vec![vec![]];
                for list in &lists {
                    combos = combos
                        .iter()
                        .flat_map(|prefix| {
                            list.iter()
                                .map(move |&y| [prefix.as_slice(), &[y]].concat())
                        })
                        .collect();
                }
                combos.iter().map(|v| tuple(v)).collect()
            }
            Ref::Choose(name, branches) => {
                let k = x.rem_euclid(branches.len() as i64 + 1) as usize;
                match branches.get_mut(k) {
                    Some(b) => b.apply(seq, x, fails),
                    None => {
                        let e = format!("routed to branch {k} of {}", branches.len());
                        fails.push((seq, name.clone(), x, e));
                        vec![]
                    }
                }
            }
            Ref::Shard(copies, next) => {
                let k = *next % copies.len();
                *next += 1;
                copies[k].apply(seq, x, fails)
            }
            Ref::ShardByKey(copies, m) => {
                let k = shard_of(&x.rem_euclid(*m), copies.len());
                copies[k].apply(seq, x, fails)
            }
        }
    }

    /// The counters' final states, in description order.
    fn states(&self, out: &mut Vec<(String, i64)>) {
        match self {
            Ref::Count(name, s) | Ref::Fused(name, s) => out.push((name.clone(), *s)),
            Ref::Add(_) | Ref::Dup | Ref::Fail(..) => {}
            Ref::Then(a, b)
            | Ref::FanOut(a, b)
            | Ref::Par(a, b)
            | Ref::Choice(a, b)
            | Ref::Merge(a, b) => {
                a.states(out);
                b.states(out);
            }
            Ref::FanOutN(bs) | Ref::Choose(_, bs) | Ref::Shard(bs, _) | Ref::ShardByKey(bs, _) => {
                bs.iter().for_each(|b| b.states(out));
            }
        }
    }
}

fn failures(run: &Run<i64>) -> Vec<Fail> {
    let item = |f: &statepipe_pipeline::Failure| *f.item::<i64>().expect("items are i64");
    run.failures
        .iter()
        .map(|f| (f.seq, f.stage.clone(), item(f), f.error.to_string()))
        .collect()
}

fn counters(run: &Run<i64>) -> Vec<(String, i64)> {
    run.states
        .iter()
        .filter_map(|s| Some((s.name.clone(), *s.get::<i64>()?)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn random_pipelines_match_the_plain_reference(
        d in desc(),
        inputs in prop::collection::vec(-30i64..30, 0..30),
    ) {
        let pipeline = build(&d, "p");
        let dot = pipeline.to_dot();
        let well_formed = dot.starts_with("digraph pipeline {") && dot.ends_with("}\n");
        prop_assert!(well_formed, "{}", dot);

        let run = pipeline.run_sequential(inputs.clone());

        let mut reference = Ref::new(&d, "p");
        let mut want = Vec::new();
        let mut want_seqs = Vec::new();
        let mut want_fails = Vec::new();
        for (seq, &x) in inputs.iter().enumerate() {
            let ys = reference.apply(seq as u64, x, &mut want_fails);
            want_seqs.extend(ys.iter().map(|_| seq as u64));
            want.extend(ys);
        }
        let mut want_states = Vec::new();
        reference.states(&mut want_states);

        prop_assert_eq!(&run.outputs, &want);
        prop_assert_eq!(&run.seqs, &want_seqs);
        // Failures of one input in different stages come out in the order
        // the interpreter meets them (depth-first: each output runs on
        // before its siblings), which the stage-by-stage reference does not
        // model; per input they must be the same set.
        let mut got_fails = failures(&run);
        prop_assert!(
            got_fails.windows(2).all(|w| w[0].0 <= w[1].0),
            "failures come out in input order"
        );
        got_fails.sort();
        want_fails.sort();
        prop_assert_eq!(got_fails, want_fails);
        prop_assert_eq!(counters(&run), want_states);
    }
}

proptest! {
    // 128 cases by default; `PROPTEST_CASES=20000` for a long run.
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn deployed_pipelines_match_the_sequential_interpreter(
        d in desc(),
        inputs in prop::collection::vec(-30i64..30, 0..100),
        workers in 1usize..=4,
        plan_seed in any::<u64>(),
        capacity_log in 1u32..8,
        // Outputs published at once, the default hold, or held as long as
        // the batches and the ring allow (every staging path).
        hold_ns in prop_oneof![Just(0u64), Just(2_000), Just(1_000_000_000)],
    ) {
        let want = build(&d, "p").run_sequential(inputs.clone());
        let pipeline = build(&d, "p");
        let plan = random_plan(pipeline.units().len(), workers, plan_seed);
        let config = Config::new()
            .plan(plan.clone())
            .pin(false)
            .capacity(1 << capacity_log)
            .output_hold(Duration::from_nanos(hold_ns));
        let got = pipeline
            .deploy(&config)
            .expect("a valid plan deploys")
            .run(inputs.clone())
            .expect("no stage panics");

        prop_assert_eq!(&got.outputs, &want.outputs, "plan {:?}", plan);
        prop_assert_eq!(&got.seqs, &want.seqs);
        // Stations report failures as they meet them, so across stations
        // the order is free; per input they are the same set.
        let (mut g, mut w) = (failures(&got), failures(&want));
        g.sort();
        w.sort();
        prop_assert_eq!(g, w);
        prop_assert_eq!(counters(&got), counters(&want));
    }
}

#[test]
fn a_fused_stage_needs_no_state_annotation() {
    // Stateless machines learn the stage's state type from `stage`.
    let m = machine::map(|x: u8| x + 1)
        .fanout(machine::id())
        .map(|(a, b)| a as u16 * b as u16);
    let run = Pipeline::stage("f", (), m).run_sequential([2, 3]);
    assert_eq!(run.outputs, [6, 12]);
}
