//! Every machine combinator against its plain-function meaning: the fused
//! machine, run over random inputs from a random state, gives the outputs and
//! the final state of the plain fold written out by hand.

use proptest::prelude::*;
use statepipe_pipeline::machine::{self, Machine};
use statepipe_pipeline::Either;

/// A stateful function with 0..=2 outputs that depend on the state.
fn fa(s: &mut i64, x: i64) -> Vec<i64> {
    *s = s.wrapping_mul(3).wrapping_add(x);
    (0..x.rem_euclid(3)).map(|k| s.wrapping_add(k)).collect()
}

/// Another one, with 0..=3 outputs.
fn fb(s: &mut i64, x: i64) -> Vec<i64> {
    *s = s.wrapping_sub(x);
    (0..x.rem_euclid(4))
        .map(|k| x.wrapping_mul(*s).wrapping_sub(k))
        .collect()
}

/// A fallible one.
fn fe(s: &mut i64, x: i64) -> Vec<Result<i64, String>> {
    *s = s.wrapping_add(1);
    match x.rem_euclid(5) {
        0 => vec![Err(format!("e{x}"))],
        1 => vec![],
        2 => vec![Ok(x), Err("late".into())],
        _ => vec![Ok(x.wrapping_add(*s))],
    }
}

fn a() -> impl Machine<i64, In = i64, Out = i64> {
    machine::flat(fa)
}

fn b() -> impl Machine<i64, In = i64, Out = i64> {
    machine::flat(fb)
}

fn e() -> impl Machine<i64, In = i64, Out = Result<i64, String>> {
    machine::flat(fe)
}

/// The plain meaning of running `f` over `xs` from `s0`.
fn fold<X, Y>(s0: i64, xs: Vec<X>, mut f: impl FnMut(&mut i64, X) -> Vec<Y>) -> (Vec<Y>, i64) {
    let mut s = s0;
    let mut out = Vec::new();
    for x in xs {
        out.extend(f(&mut s, x));
    }
    (out, s)
}

/// Runs `m` over `xs` from `s0`.
fn run<M: Machine<i64>>(mut m: M, s0: i64, xs: Vec<M::In>) -> (Vec<M::Out>, i64) {
    let mut s = s0;
    let out = m.run(&mut s, xs);
    (out, s)
}

fn product<C: Clone, D: Clone>(cs: Vec<C>, ds: &[D]) -> Vec<(C, D)> {
    cs.into_iter()
        .flat_map(|c| ds.iter().map(move |d| (c.clone(), d.clone())))
        .collect()
}

fn ints() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(-20i64..20, 0..30)
}

fn pairs() -> impl Strategy<Value = Vec<(i64, i64)>> {
    prop::collection::vec((-20i64..20, -20i64..20), 0..30)
}

fn eithers() -> impl Strategy<Value = Vec<Either<i64, i64>>> {
    prop::collection::vec(
        prop_oneof![
            (-20i64..20).prop_map(Either::Left),
            (-20i64..20).prop_map(Either::Right)
        ],
        0..30,
    )
}

proptest! {
    #[test]
    fn leaves(s0 in -5i64..5, xs in ints()) {
        prop_assert_eq!(run(machine::id(), s0, xs.clone()), (xs.clone(), s0));
        prop_assert_eq!(run(machine::map(|x: i64| x * 2), s0, xs.clone()), fold(s0, xs.clone(), |_, x| vec![x * 2]));
        let step = machine::step(|s: &mut i64, x: i64| { *s += x; *s });
        prop_assert_eq!(run(step, s0, xs.clone()), fold(s0, xs.clone(), |s, x| { *s += x; vec![*s] }));
        prop_assert_eq!(run(a(), s0, xs.clone()), fold(s0, xs.clone(), fa));
        let even = machine::filter(|x: &i64| x % 2 == 0);
        prop_assert_eq!(run(even, s0, xs.clone()), fold(s0, xs, |_, x| if x % 2 == 0 { vec![x] } else { vec![] }));
    }

    #[test]
    fn projections(s0 in -5i64..5, xs in pairs()) {
        prop_assert_eq!(run(machine::fst(), s0, xs.clone()).0, xs.iter().map(|p| p.0).collect::<Vec<_>>());
        prop_assert_eq!(run(machine::snd(), s0, xs.clone()).0, xs.iter().map(|p| p.1).collect::<Vec<_>>());
    }

    #[test]
    fn then_is_composition(s0 in -5i64..5, xs in ints()) {
        let want = fold(s0, xs.clone(), |s, x| {
            let ys = fa(s, x);
            ys.into_iter().flat_map(|y| fb(s, y)).collect()
        });
        prop_assert_eq!(run(a().then(b()), s0, xs), want);
    }

    #[test]
    fn map_maps_every_output(s0 in -5i64..5, xs in ints()) {
        let want = fold(s0, xs.clone(), |s, x| fa(s, x).into_iter().map(|y| y - 1).collect());
        prop_assert_eq!(run(a().map(|y| y - 1), s0, xs), want);
    }

    #[test]
    fn first_and_second_act_on_one_half(s0 in -5i64..5, xs in pairs()) {
        let want = fold(s0, xs.clone(), |s, (x, t)| fa(s, x).into_iter().map(|y| (y, t)).collect());
        prop_assert_eq!(run(a().first(), s0, xs.clone()), want);
        let want = fold(s0, xs.clone(), |s, (t, x)| fa(s, x).into_iter().map(|y| (t, y)).collect());
        prop_assert_eq!(run(a().second(), s0, xs), want);
    }

    #[test]
    fn fanout_pairs_every_output(s0 in -5i64..5, xs in ints()) {
        let want = fold(s0, xs.clone(), |s, x| {
            let ys = fa(s, x);
            let zs = fb(s, x);
            product(ys, &zs)
        });
        prop_assert_eq!(run(a().fanout(b()), s0, xs), want);
    }

    #[test]
    fn split_pairs_every_output(s0 in -5i64..5, xs in pairs()) {
        let want = fold(s0, xs.clone(), |s, (x, y)| {
            let cs = fa(s, x);
            let ds = fb(s, y);
            product(cs, &ds)
        });
        prop_assert_eq!(run(a().split(b()), s0, xs), want);
    }

    #[test]
    fn choice_keeps_the_side(s0 in -5i64..5, xs in eithers()) {
        let want = fold(s0, xs.clone(), |s, x| match x {
            Either::Left(l) => fa(s, l).into_iter().map(Either::Left).collect(),
            Either::Right(r) => fb(s, r).into_iter().map(Either::Right).collect(),
        });
        prop_assert_eq!(run(a().choice(b()), s0, xs), want);
    }

    #[test]
    fn merge_forgets_the_side(s0 in -5i64..5, xs in eithers()) {
        let want = fold(s0, xs.clone(), |s, x| match x {
            Either::Left(l) => fa(s, l),
            Either::Right(r) => fb(s, r),
        });
        prop_assert_eq!(run(a().merge(b()), s0, xs), want);
    }

    #[test]
    fn try_then_stops_at_the_first_error(s0 in -5i64..5, xs in ints()) {
        let want = fold(s0, xs.clone(), |s, x| {
            let mut out = Vec::new();
            for r in fe(s, x) {
                match r {
                    Ok(y) => out.extend(fe(s, y.wrapping_add(2))),
                    Err(err) => out.push(Err(err)),
                }
            }
            out
        });
        let second = machine::map(|y: i64| y.wrapping_add(2)).then(e());
        prop_assert_eq!(run(e().try_then(second), s0, xs), want);
    }

    #[test]
    fn swap_is_a_swap(xs in pairs()) {
        // swap = Snd *** Fst . (Id &&& Id), as in stevana's pipelined-state-machines.
        let swap = || machine::id().fanout(machine::id()).then(machine::snd().split(machine::fst()));
        let out = run(swap().then(swap()).then(swap()), 0, xs.clone()).0;
        prop_assert_eq!(out, xs.iter().map(|&(x, y)| (y, x)).collect::<Vec<_>>());
    }
}
