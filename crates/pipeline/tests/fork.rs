//! Constructs with branches deployed across workers. Fan-out, par and
//! N-ary fan-out: the branches read one multicast ring, a join pairs their
//! outputs. Choice, merge and choose: a router sends each item to its
//! branch, a merge restores input order. The results must equal the
//! sequential interpreter's, for every split of the units over workers,
//! with rings small enough to fill. No test here asserts a time.

mod common;

use std::thread;

use common::{assert_panicked, cases, panic_of, random_plan, watchdog};
use proptest::prelude::*;
use statepipe_pipeline::{machine, Config, Either, Finished, Pipeline, Run, UnitKind};

/// Counts its items and adds the count.
fn counter(name: &str) -> Pipeline<i64, i64> {
    Pipeline::stage(
        name,
        0i64,
        machine::step(|n: &mut i64, x: i64| {
            *n += 1;
            x * 10 + *n
        }),
    )
}

/// `x mod 3` outputs per item (so 0, 1 or 2).
fn dup(name: &str) -> Pipeline<i64, i64> {
    Pipeline::stage(
        name,
        (),
        machine::flat(|_: &mut (), x: i64| (0..x.rem_euclid(3)).map(move |k| x + k)),
    )
}

/// Rejects multiples of 4.
fn picky(name: &str) -> Pipeline<i64, i64> {
    Pipeline::try_map(name, |x: i64| {
        if x % 4 == 0 {
            Err(format!("{x} is a multiple of 4"))
        } else {
            Ok(x)
        }
    })
}

/// Builds a fresh pipeline of one shape.
type Build = fn() -> Pipeline<i64, i64>;

/// Every shape of fork, with stages before, inside and after it.
fn shapes() -> Vec<(&'static str, Build)> {
    vec![
        ("fan-out", || {
            dup("pre")
                .then(
                    counter("a")
                        .then(dup("a2"))
                        .fan_out(picky("b").then(counter("b2"))),
                )
                .then(Pipeline::map("post", |(a, b): (i64, i64)| a * 1000 + b))
        }),
        ("par", || {
            Pipeline::map("pre", |x: i64| (x, x / 2))
                .then(dup("a").par(counter("b").then(picky("b2"))))
                .then(Pipeline::map("post", |(a, b): (i64, i64)| a - b))
        }),
        ("fan-out-n", || {
            Pipeline::fan_out_n(vec![counter("a"), dup("b"), picky("c"), counter("d")])
                .then(Pipeline::map("post", |v: Vec<i64>| v.iter().sum()))
        }),
        ("nested", || {
            counter("pre")
                .then(
                    counter("a")
                        .fan_out(dup("b").fan_out(counter("c")))
                        .then(Pipeline::map("mid", |(a, (b, c)): (i64, (i64, i64))| {
                            a + 7 * b + 11 * c
                        })),
                )
                .then(Pipeline::shard(2, |k| counter(&format!("s{k}"))))
        }),
        ("choice", || {
            Pipeline::map("pre", side)
                .then(counter("a").then(dup("a2")).choice(picky("b")))
                .then(Pipeline::map("post", |e: Either<i64, i64>| match e {
                    Either::Left(a) => a,
                    Either::Right(b) => b + 100_000,
                }))
        }),
        ("merge", || {
            counter("pre")
                .then(Pipeline::map("side", side))
                .then(counter("a").merge(dup("b").then(counter("b2"))))
                .then(counter("post"))
        }),
        ("choose", || {
            // Route 3 has no branch: those items fail at the router.
            Pipeline::choose(
                "route",
                |x: &i64| x.rem_euclid(4) as usize,
                vec![counter("a"), dup("b").then(counter("b2")), picky("c")],
            )
            .then(counter("post"))
        }),
        ("choice-in-fork", || {
            counter("a")
                .fan_out(
                    Pipeline::map("side", side).then(
                        counter("l")
                            .merge(counter("r"))
                            .then(Pipeline::map("tag", |x: i64| x)),
                    ),
                )
                .then(Pipeline::map("post", |(a, b): (i64, i64)| a * 3 + b))
        }),
    ]
}

/// Even items left, odd right.
fn side(x: i64) -> Either<i64, i64> {
    if x % 2 == 0 {
        Either::Left(x)
    } else {
        Either::Right(x)
    }
}

fn failures<O>(run: &Run<O>) -> Vec<(u64, String)> {
    let mut f: Vec<_> = run
        .failures
        .iter()
        .map(|f| (f.seq, f.stage.clone()))
        .collect();
    f.sort();
    f
}

fn states<O>(run: &Run<O>) -> Vec<(String, Option<i64>)> {
    run.states
        .iter()
        .map(|s| (s.name.clone(), s.get::<i64>().copied()))
        .collect()
}

fn check(name: &str, build: Build, plan: Vec<usize>, capacity: usize) {
    let inputs: Vec<i64> = (-40..160).collect();
    let want = build().run_sequential(inputs.clone());
    let p = plan.clone();
    let got = watchdog(move || {
        build()
            .deploy(&Config::new().plan(p).pin(false).capacity(capacity))
            .expect("the plan deploys")
            .run(inputs)
            .expect("no stage panics")
    });
    assert_eq!(got.outputs, want.outputs, "{name} on {plan:?}");
    assert_eq!(got.seqs, want.seqs, "{name} on {plan:?}");
    assert_eq!(failures(&got), failures(&want), "{name} on {plan:?}");
    assert_eq!(states(&got), states(&want), "{name} on {plan:?}");
}

#[test]
fn a_fork_lists_its_branches_units_then_its_join() {
    let p = Pipeline::map("pre", |x: i64| x).then(counter("a").fan_out(counter("b")));
    let units = p.units();
    let names: Vec<_> = units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["pre", "a", "b", "fan-out(a, b)"]);
    assert_eq!(units[3].kind, UnitKind::Join);
}

#[test]
fn a_choice_lists_its_branches_units_then_where_they_meet() {
    let p = Pipeline::map("pre", side).then(counter("a").choice(counter("b")));
    let units = p.units();
    let names: Vec<_> = units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["pre", "a", "b", "choice(a, b)"]);
    assert_eq!(units[3].kind, UnitKind::Join);
}

/// Deploys `build()` on `plan` (8-slot rings), feeds `0..n` from a thread,
/// checks the outputs against the sequential run, and returns the finished
/// deployment and its deployed graph.
fn feed<O>(build: fn() -> Pipeline<i64, O>, plan: Vec<usize>, n: i64) -> (Finished, String)
where
    O: PartialEq + std::fmt::Debug + Send + 'static,
{
    let (got, finished, dot) = watchdog(move || {
        let config = Config::new().plan(plan).pin(false).capacity(8);
        let d = build().deploy(&config).unwrap();
        let (mut input, mut output, running) = (d.input, d.output, d.running);
        let feeder = thread::spawn(move || input.send_all(0..n).unwrap());
        let mut got = Vec::new();
        while let Some((_, y)) = output.recv() {
            got.push(y);
        }
        feeder.join().unwrap();
        let dot = running.to_dot();
        (got, running.join().unwrap(), dot)
    });
    assert_eq!(got, build().run_sequential(0..n).outputs);
    (finished, dot)
}

#[test]
fn choice_branches_on_two_workers_each_see_their_side() {
    let build = || {
        Pipeline::map("pre", side)
            .then(counter("a").choice(counter("b")))
            .then(Pipeline::map("post", |e: Either<i64, i64>| {
                e.map_right(|b| -b).into_inner()
            }))
    };
    let n = 10_000;
    let (finished, _) = feed(build, vec![0, 0, 1, 1, 1], n);
    let m = &finished.metrics.units;
    assert_eq!((m[1].name.as_str(), m[1].items_in), ("a", n as u64 / 2));
    assert_eq!((m[2].name.as_str(), m[2].items_in), ("b", n as u64 / 2));
    assert_eq!((m[1].worker, m[2].worker), (0, 1));
}

#[test]
fn branches_on_two_workers_each_see_every_item() {
    // pre and branch a on worker 0, branch b, the join and post on 1.
    let build = || {
        Pipeline::map("pre", |x: i64| x)
            .then(counter("a").fan_out(counter("b")))
            .then(Pipeline::map("post", |(a, b): (i64, i64)| a + b))
    };
    let n = 10_000;
    let (finished, dot) = feed(build, vec![0, 0, 1, 1, 1], n);
    let m = &finished.metrics.units;
    // Run split, not whole: each branch's own unit took every item.
    assert_eq!((m[1].name.as_str(), m[1].items_in), ("a", n as u64));
    assert_eq!((m[2].name.as_str(), m[2].items_in), ("b", n as u64));
    assert_eq!((m[1].worker, m[2].worker), (0, 1));
    assert_eq!(m[3].items_in, n as u64, "the join joined every item");
    assert_eq!(m[3].items_out, n as u64);
    // Both branches are fed from pre, and meet at the join.
    for edge in ["u0 -> u1", "u0 -> u2", "u1 -> u3", "u2 -> u3"] {
        assert!(dot.contains(edge), "{edge} missing in\n{dot}");
    }
}

#[test]
fn a_fork_on_one_worker_runs_whole() {
    let (finished, _) = feed(|| counter("a").fan_out(counter("b")), vec![0, 0, 0], 100);
    let m = &finished.metrics.units;
    // The whole fork reports as its join; the branches took nothing apart.
    assert_eq!((m[2].items_in, m[2].items_out), (100, 100));
    assert_eq!((m[0].items_in, m[1].items_in), (0, 0));
}

#[test]
fn every_split_of_every_shape_matches_the_sequential_run() {
    for (name, build) in shapes() {
        let units = build().units().len();
        // All on one worker, all apart, and alternating.
        for plan in [
            vec![0; units],
            (0..units).collect(),
            (0..units).map(|u| u % 2).collect(),
            (0..units).map(|u| (u / 2) % 3).collect(),
        ] {
            for capacity in [1, 2, 64] {
                check(name, build, plan.clone(), capacity);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(48)))]

    #[test]
    fn random_splits_match_the_sequential_run(
        shape in 0usize..8,
        seed in any::<u64>(),
        workers in 1usize..=4,
        cap_pow in 0u32..6,
    ) {
        let (name, build) = shapes()[shape];
        let plan = random_plan(build().units().len(), workers, seed);
        check(name, build, plan, 1 << cap_pow);
    }
}

#[test]
fn a_panic_in_a_branch_on_another_worker_is_named() {
    for plan in [vec![0, 1, 0], vec![0, 1, 1], vec![1, 0, 1]] {
        let boom = Pipeline::map("boom", |x: u32| {
            assert!(x != 500, "five hundred is not allowed");
            x
        });
        let p = Pipeline::map("fine", |x: u32| x).fan_out(boom);
        assert_panicked(panic_of(p, plan), "boom", "five hundred");
    }
}

#[test]
fn a_panic_in_a_route_or_key_function_is_named_after_its_construct() {
    let route = |x: &u32| {
        assert!(*x != 300, "three hundred has no route");
        (x % 2) as usize
    };
    let branches = || vec![Pipeline::map("a", |x: u32| x), Pipeline::map("b", |x| x)];
    // Units: fine, a, b, route(a, b). Whole on one worker, and split.
    for plan in [vec![0, 0, 0, 0], vec![0, 1, 0, 1]] {
        let p =
            Pipeline::map("fine", |x: u32| x).then(Pipeline::choose("route", route, branches()));
        assert_panicked(panic_of(p, plan), "route(a, b)", "three hundred");
    }
    let key = |x: &u32| {
        assert!(*x != 300, "three hundred has no key");
        x % 3
    };
    let p = Pipeline::map("fine", |x: u32| x).then(Pipeline::shard_by_key(2, key, |k| {
        Pipeline::map(&format!("s{k}"), |x: u32| x)
    }));
    assert_panicked(panic_of(p, vec![0, 1, 0, 1]), "merge ×2", "three hundred");
}

#[test]
fn dropping_a_deployment_with_split_branches_stops_its_workers() {
    for (name, build) in shapes() {
        let units = build().units().len();
        watchdog(move || {
            let plan = (0..units).map(|u| u % 3).collect();
            let d = build()
                .deploy(&Config::new().plan(plan).pin(false).capacity(2))
                .unwrap();
            let mut input = d.input;
            for x in 0..50 {
                let _ = input.try_send(x);
            }
            drop(d.running); // output never read, input still open
        });
        eprintln!("{name}: stopped");
    }
}

#[test]
fn par_moves_each_half_without_cloning() {
    /// A value that cannot be cloned: `par` must move each half out of the
    /// shared slot.
    struct Token(u32);
    let p = Pipeline::map("left", |t: Token| t.0 as u64)
        .par(Pipeline::map("right", |t: Token| u64::from(t.0) * 2));
    let got = watchdog(|| {
        p.deploy(&Config::new().plan(vec![0, 1, 1]).pin(false).capacity(2))
            .unwrap()
            .run((0..1000u32).map(|i| (Token(i), Token(i + 1))))
            .unwrap()
    });
    let want: Vec<(u64, u64)> = (0..1000).map(|i| (i, (i + 1) * 2)).collect();
    assert_eq!(got.outputs, want);
}
