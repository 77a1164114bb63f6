//! Unit tests of the pipeline combinators, the error output, the final states
//! and the drawing, through the sequential interpreter.

use statepipe_pipeline::machine::{self, Machine};
use statepipe_pipeline::{shard_of, Either, Pipeline};

fn counter(name: &str) -> Pipeline<u32, (u32, u32)> {
    Pipeline::stage(
        name,
        0u32,
        machine::step(|n: &mut u32, x: u32| {
            *n += 1;
            (x, *n)
        }),
    )
}

#[test]
fn a_failed_item_skips_later_stages_and_the_pipeline_goes_on() {
    let p = Pipeline::try_map("odd only", |x: u32| {
        if x % 2 == 1 {
            Ok(x)
        } else {
            Err(format!("{x} is even"))
        }
    })
    .then(counter("after"));
    let run = p.run_sequential(0..6);
    assert_eq!(run.outputs, [(1, 1), (3, 2), (5, 3)]);
    assert_eq!(run.seqs, [1, 3, 5]);
    let failed: Vec<_> = run
        .failures
        .iter()
        .map(|f| (f.seq, *f.item::<u32>().unwrap()))
        .collect();
    assert_eq!(failed, [(0, 0), (2, 2), (4, 4)]);
    assert!(run.failures.iter().all(|f| f.stage == "odd only"));
    assert_eq!(
        run.failures[1].to_string(),
        "stage `odd only` failed on input #2 (2): 2 is even"
    );
    // The later stage saw only the three good items.
    assert_eq!(run.state::<u32>("after"), Some(&3));
}

#[test]
fn a_failing_item_inside_a_multi_output_stage_keeps_the_good_outputs() {
    let p = Pipeline::try_stage(
        "split",
        (),
        machine::flat(|_: &mut (), x: i32| [Ok(x), if x < 0 { Err("negative") } else { Ok(-x) }]),
    );
    let run = p.run_sequential([2, -1]);
    assert_eq!(run.outputs, [2, -2, -1]);
    assert_eq!(run.failures.len(), 1);
    assert_eq!(run.failures[0].error.to_string(), "negative");
}

#[test]
fn fan_out_pairs_every_output_of_both_branches() {
    let twice = Pipeline::stage("twice", (), machine::flat(|_: &mut (), x: u32| [x, x]));
    let dup = Pipeline::map("tag", |x: u32| x * 10);
    let run = twice.fan_out(dup).run_sequential([1, 2]);
    assert_eq!(run.outputs, [(1, 10), (1, 10), (2, 20), (2, 20)]);
}

#[test]
fn fan_out_drops_the_item_when_a_branch_rejects_it() {
    let ok = Pipeline::map("ok", |x: u32| x);
    let picky = Pipeline::try_map("picky", |x: u32| if x == 2 { Err("no 2") } else { Ok(x) });
    let run = ok.fan_out(picky).run_sequential([1, 2, 3]);
    assert_eq!(run.outputs, [(1, 1), (3, 3)]);
    assert_eq!(run.failures[0].seq, 1);
}

#[test]
fn par_runs_one_branch_per_half() {
    let p = Pipeline::map("len", |s: &'static str| s.len()).par(counter("count"));
    let run = p.run_sequential([("ab", 7), ("", 9)]);
    assert_eq!(run.outputs, [(2, (7, 1)), (0, (9, 2))]);
}

#[test]
fn choice_and_merge_route_on_the_side() {
    let inc = || Pipeline::map("inc", |x: u32| x + 1);
    let shout = || Pipeline::map("shout", |s: String| s.to_uppercase());
    let items = || {
        [
            Either::Left(1),
            Either::Right("a".to_owned()),
            Either::Left(5),
        ]
    };
    let run = inc().choice(shout()).run_sequential(items());
    assert_eq!(
        run.outputs,
        [
            Either::Left(2),
            Either::Right("A".to_owned()),
            Either::Left(6)
        ]
    );

    let len = Pipeline::map("len", |s: String| s.len() as u32);
    let run = inc().merge(len).run_sequential(items());
    assert_eq!(run.outputs, [2, 1, 6]);
}

#[test]
fn fan_out_n_emits_one_vector_per_combination() {
    let branches = vec![
        Pipeline::map("id", |x: u32| x),
        Pipeline::stage(
            "both",
            (),
            machine::flat(|_: &mut (), x: u32| [x + 1, x + 2]),
        ),
        Pipeline::map("sq", |x: u32| x * x),
    ];
    let run = Pipeline::fan_out_n(branches).run_sequential([3]);
    assert_eq!(run.outputs, [vec![3, 4, 9], vec![3, 5, 9]]);
}

#[test]
fn shard_keeps_input_order_and_one_state_per_copy() {
    let p = Pipeline::shard(3, |k| counter(&format!("copy {k}")));
    let run = p.run_sequential(0..7);
    let inputs: Vec<u32> = run.outputs.iter().map(|o| o.0).collect();
    assert_eq!(inputs, (0..7).collect::<Vec<_>>());
    let names: Vec<_> = run.states.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["copy 0", "copy 1", "copy 2"]);
    let counts: Vec<u32> = run
        .states
        .iter()
        .map(|s| *s.get::<u32>().unwrap())
        .collect();
    assert_eq!(counts, [3, 2, 2]);
}

#[test]
fn shard_counts_the_items_that_reach_it_not_the_inputs() {
    // The filter drops odd inputs: the shard's item i is input 2i.
    let p = Pipeline::stage("evens", (), machine::filter(|x: &u32| x % 2 == 0))
        .then(Pipeline::shard(2, |k| counter(&format!("copy {k}"))));
    let run = p.run_sequential(0..8);
    assert_eq!(run.outputs, [(0, 1), (2, 1), (4, 2), (6, 2)]);
}

#[test]
fn shard_by_key_keeps_state_per_key() {
    let totals = |k: usize| {
        Pipeline::stage(
            &format!("totals {k}"),
            std::collections::HashMap::<&'static str, u32>::new(),
            machine::step(
                |t: &mut std::collections::HashMap<&'static str, u32>,
                 (who, n): (&'static str, u32)| {
                    let total = t.entry(who).or_default();
                    *total += n;
                    (who, *total)
                },
            ),
        )
    };
    let p = Pipeline::shard_by_key(4, |item: &(&'static str, u32)| item.0, totals);
    let items = [("ann", 1), ("bob", 10), ("ann", 2), ("cy", 5), ("bob", 1)];
    let run = p.run_sequential(items);
    assert_eq!(
        run.outputs,
        [("ann", 1), ("bob", 10), ("ann", 3), ("cy", 5), ("bob", 11)]
    );
    let ann = shard_of(&"ann", 4);
    let state = run.states[ann]
        .get::<std::collections::HashMap<&str, u32>>()
        .unwrap();
    assert_eq!(state.get("ann"), Some(&3));
}

#[test]
fn stage_states_come_back_in_description_order() {
    let p = counter("a")
        .then(Pipeline::map("drop", |(x, _)| x))
        .then(counter("b").fan_out(counter("c")));
    let run = p.run_sequential([5, 6]);
    let names: Vec<_> = run.states.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["a", "drop", "b", "c"]);
    let mut states = run.states.into_iter();
    let a = states.next().unwrap();
    let a = a.into_inner::<String>().expect_err("a counts in u32");
    assert_eq!(a.into_inner::<u32>().unwrap(), 2);
}

#[test]
fn the_interpreter_can_be_stepped() {
    let mut run = counter("n").sequential();
    run.push(7);
    assert_eq!(run.outputs(), [(7, 1)]);
    run.push(8);
    assert!(run.failures().is_empty());
    let done = run.finish();
    assert_eq!(done.outputs, [(7, 1), (8, 2)]);
    assert_eq!(done.state::<u32>("n"), Some(&2));
}

#[test]
fn a_fused_stage_is_one_node_of_the_graph() {
    let fused = machine::step(|n: &mut u64, x: u64| {
        *n += x;
        *n
    })
    .fanout(machine::map(|x: u64| x * 2))
    .map(|(a, b)| a + b);
    let p = Pipeline::stage("fused", 0u64, fused);
    let dot = p.to_dot();
    assert_eq!(dot.matches("shape=box").count(), 1, "{dot}");
    assert_eq!(p.run_sequential([1, 2]).outputs, [3, 7]);
}

#[test]
fn to_dot_draws_every_stage_shard_and_the_error_output() {
    let p = Pipeline::map("parse", |s: &'static str| s.len() as u32)
        .then(Pipeline::shard(2, |k| {
            Pipeline::try_map(&format!("check {k}"), |x: u32| {
                if x > 0 {
                    Ok(x)
                } else {
                    Err("empty")
                }
            })
        }))
        .then(Pipeline::choose(
            "route",
            |x: &u32| (*x % 2) as usize,
            vec![counter("even"), counter("odd")],
        ));
    let dot = p.to_dot();
    for label in [
        "input", "output", "parse", "check 0", "check 1", "route", "even", "odd", "errors",
    ] {
        assert!(
            dot.contains(&format!("label=\"{label}\"")),
            "{label} missing:\n{dot}"
        );
    }
    assert_eq!(dot.matches("subgraph cluster_").count(), 2, "{dot}");
    // Both checks and the router can reject items.
    assert_eq!(dot.matches("style=dashed").count(), 3, "{dot}");
}

#[test]
fn pipelines_can_move_to_other_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<Pipeline<u32, (u32, u32)>>();
    let p = counter("n");
    let run = std::thread::spawn(move || p.run_sequential([1]))
        .join()
        .unwrap();
    assert_eq!(run.outputs, [(1, 1)]);
}

#[test]
fn three_swaps_mean_the_same_fused_or_pipelined() {
    // swap = Snd *** Fst . (Id &&& Id), as in stevana's pipelined-state-machines
    // (https://github.com/stevana/pipelined-state-machines).
    let swap = || {
        machine::id()
            .fanout(machine::id())
            .then(machine::snd().split(machine::fst()))
    };
    let sequential = Pipeline::stage("three swaps", (), swap().then(swap()).then(swap()));
    let stage = |name: &str| Pipeline::stage(name, (), swap());
    let pipelined = stage("first swap")
        .then(stage("second swap"))
        .then(stage("third swap"));
    let sharded = Pipeline::shard(2, |_| stage("first swap"))
        .then(Pipeline::shard(2, |_| stage("second swap")))
        .then(Pipeline::shard(2, |_| stage("third swap")));
    let items: Vec<(u32, u32)> = (1..7).map(|i| (i, i + 1)).collect();
    let want: Vec<(u32, u32)> = items.iter().map(|&(a, b)| (b, a)).collect();
    assert_eq!(sequential.run_sequential(items.clone()).outputs, want);
    assert_eq!(pipelined.run_sequential(items.clone()).outputs, want);
    assert_eq!(sharded.run_sequential(items).outputs, want);
}
