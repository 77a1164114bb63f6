//! Random pipelines from `i64` to `i64` built from every combinator
//! (depth ≤ 4, random shard counts, keys and failing items), shared by the
//! property tests. Stateful stages are durable, so the same pipelines can
//! be checkpointed.

use proptest::prelude::*;
use statepipe_pipeline::machine::{self, Machine};
use statepipe_pipeline::{Either, Pipeline};

/// A random pipeline from `i64` to `i64`.
#[derive(Clone, Debug)]
pub enum Desc {
    /// `x + c`.
    Add(i64),
    /// Counts its items: `x + count`.
    Count,
    /// `x mod 3` outputs: `x, x + 1, ...`.
    Dup,
    /// Rejects multiples of `m`.
    Fail(i64),
    /// One stage of fused machines: count, fanout with a filter, map.
    Fused,
    Then(Box<Desc>, Box<Desc>),
    FanOut(Box<Desc>, Box<Desc>),
    Par(Box<Desc>, Box<Desc>),
    Choice(Box<Desc>, Box<Desc>),
    Merge(Box<Desc>, Box<Desc>),
    FanOutN(Vec<Desc>),
    /// Routes by `x mod (n + 1)`, so branch `n` does not exist and fails.
    Choose(Vec<Desc>),
    Shard(usize, Box<Desc>),
    /// Keyed by `x mod m`.
    ShardByKey(usize, i64, Box<Desc>),
}

pub fn desc() -> impl Strategy<Value = Desc> {
    let leaf = prop_oneof![
        (-3i64..3).prop_map(Desc::Add),
        Just(Desc::Count),
        Just(Desc::Dup),
        (2i64..6).prop_map(Desc::Fail),
        Just(Desc::Fused),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        let two = || (inner.clone(), inner.clone()).prop_map(|(a, b)| (Box::new(a), Box::new(b)));
        prop_oneof![
            two().prop_map(|(a, b)| Desc::Then(a, b)),
            two().prop_map(|(a, b)| Desc::FanOut(a, b)),
            two().prop_map(|(a, b)| Desc::Par(a, b)),
            two().prop_map(|(a, b)| Desc::Choice(a, b)),
            two().prop_map(|(a, b)| Desc::Merge(a, b)),
            prop::collection::vec(inner.clone(), 1..4).prop_map(Desc::FanOutN),
            prop::collection::vec(inner.clone(), 1..4).prop_map(Desc::Choose),
            (1usize..5, inner.clone()).prop_map(|(n, d)| Desc::Shard(n, Box::new(d))),
            (1usize..5, 1i64..6, inner).prop_map(|(n, m, d)| Desc::ShardByKey(n, m, Box::new(d))),
        ]
    })
}

pub fn count(s: &mut i64, x: i64) -> i64 {
    *s += 1;
    x.wrapping_add(*s)
}

pub fn fail(x: i64, m: i64) -> Result<i64, String> {
    if x.rem_euclid(m) == 0 {
        Err(format!("{x} is a multiple of {m}"))
    } else {
        Ok(x)
    }
}

pub fn pair(a: i64, b: i64) -> i64 {
    a.wrapping_mul(3).wrapping_add(b)
}

pub fn tuple(v: &[i64]) -> i64 {
    v.iter()
        .fold(0i64, |acc, &y| acc.wrapping_mul(7).wrapping_add(y))
}

pub fn side(x: i64) -> Either<i64, i64> {
    if x % 2 == 0 {
        Either::Left(x)
    } else {
        Either::Right(x)
    }
}

/// The pipeline for `d`; stage names are paths in the description.
pub fn build(d: &Desc, path: &str) -> Pipeline<i64, i64> {
    let sub = |k: usize, d: &Desc| build(d, &format!("{path}.{k}"));
    let pre = format!("{path}:pre");
    let post = format!("{path}:post");
    match d {
        &Desc::Add(c) => Pipeline::map(path, move |x: i64| x.wrapping_add(c)),
        Desc::Count => Pipeline::durable_stage(path, 0i64, machine::step(count)),
        Desc::Dup => Pipeline::stage(
            path,
            (),
            machine::flat(|_: &mut (), x: i64| {
                (0..x.rem_euclid(3)).map(move |k| x.wrapping_add(k))
            }),
        ),
        &Desc::Fail(m) => Pipeline::try_map(path, move |x: i64| fail(x, m)),
        Desc::Fused => {
            let m = machine::step(count)
                .fanout(machine::filter(|x: &i64| x % 2 == 0))
                .map(|(a, b): (i64, i64)| a.wrapping_sub(b));
            Pipeline::durable_stage(path, 0i64, m)
        }
        Desc::Then(a, b) => sub(0, a).then(sub(1, b)),
        Desc::FanOut(a, b) => sub(0, a)
            .fan_out(sub(1, b))
            .then(Pipeline::map(&post, |(a, b)| pair(a, b))),
        Desc::Par(a, b) => Pipeline::map(&pre, |x: i64| (x, x / 2))
            .then(sub(0, a).par(sub(1, b)))
            .then(Pipeline::map(&post, |(a, b): (i64, i64)| a.wrapping_sub(b))),
        Desc::Choice(a, b) => Pipeline::map(&pre, side)
            .then(sub(0, a).choice(sub(1, b)))
            .then(Pipeline::map(&post, |e: Either<i64, i64>| match e {
                Either::Left(a) => a,
                Either::Right(b) => b.wrapping_add(1000),
            })),
        Desc::Merge(a, b) => Pipeline::map(&pre, side).then(sub(0, a).merge(sub(1, b))),
        Desc::FanOutN(ds) => {
            let branches = ds.iter().enumerate().map(|(k, d)| sub(k, d)).collect();
            Pipeline::fan_out_n(branches).then(Pipeline::map(&post, |v: Vec<i64>| tuple(&v)))
        }
        Desc::Choose(ds) => {
            let n = ds.len() as i64;
            let branches = ds.iter().enumerate().map(|(k, d)| sub(k, d)).collect();
            Pipeline::choose(path, move |x: &i64| x.rem_euclid(n + 1) as usize, branches)
        }
        Desc::Shard(n, d) => Pipeline::shard(*n, |k| build(d, &format!("{path}/{k}"))),
        &Desc::ShardByKey(n, m, ref d) => Pipeline::shard_by_key(
            n,
            move |x: &i64| x.rem_euclid(m),
            |k| build(d, &format!("{path}/{k}")),
        ),
    }
}
