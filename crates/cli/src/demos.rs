//! Example pipelines for `statepipe run` and `statepipe plan`: the shapes of
//! the pipeline benchmark, on `u64` items, with the same stage work
//! (`statepipe_bench::pipeline::workload`).

use std::collections::BTreeMap;
use std::time::Duration;

use statepipe_bench::pipeline::workload::{spin_work, trivial_a, trivial_b, trivial_c};
use statepipe_pipeline::{machine, Pipeline};

/// The example pipelines, by name.
pub const NAMES: [&str; 7] = [
    "scaling", "skewed", "sharded", "fanout", "trivial3", "laundry", "counts",
];

/// A stage that spins for about `ns` nanoseconds of work per item.
fn spin(name: &str, iters_per_us: u32, ns: u64) -> Pipeline<u64, u64> {
    let iters = ((iters_per_us as u64 * ns) / 1000).max(1) as u32;
    // The work is kept (black_box) but the item passes through unchanged,
    // so outputs do not depend on this machine's calibration: a run's
    // digest is the same on any machine, resumed or not.
    Pipeline::map(name, move |x: u64| {
        std::hint::black_box(spin_work(x, iters));
        x
    })
    .cost(ns as f64)
}

/// A stage that sleeps `ms` per item (`SlowIO` in stevana's
/// pipelined-state-machines, <https://github.com/stevana/pipelined-state-machines>).
fn slow(name: &str, ms: u64) -> Pipeline<u64, u64> {
    Pipeline::map(name, move |x: u64| {
        std::thread::sleep(Duration::from_millis(ms));
        x
    })
    .cost(ms as f64 * 1e6)
}

/// A stage of an example, made afresh on each call.
pub type Maker = Box<dyn Fn() -> Pipeline<u64, u64> + Send + Sync>;

/// Builds the example `name`; `iters_per_us` calibrates `spin_work`.
pub fn build(name: &str, iters_per_us: u32) -> Option<Pipeline<u64, u64>> {
    let stages = stages(name, iters_per_us)?;
    let mut it = stages.iter();
    let first = it.next()?();
    Some(it.fold(first, |p, s| p.then(s())))
}

/// The example `name` as its top-level stages, in order: where a
/// distributed run may cut it.
pub fn stages(name: &str, iters_per_us: u32) -> Option<Vec<Maker>> {
    let s =
        move |n: &'static str, ns: u64| -> Maker { Box::new(move || spin(n, iters_per_us, ns)) };
    let durable = |n: &'static str, step: fn(&mut u64, u64) -> u64| -> Maker {
        Box::new(move || Pipeline::durable_stage(n, 0u64, machine::step(step)).cost(10.0))
    };
    let slow = |n: &'static str| -> Maker { Box::new(move || slow(n, 20)) };
    Some(match name {
        // Four stages of ~1 µs: the `scaling` benchmark.
        "scaling" => vec![s("s1", 1000), s("s2", 1000), s("s3", 1000), s("s4", 1000)],
        // Uneven stages: where the balanced plan cuts matters.
        "skewed" => vec![
            s("parse", 500),
            s("enrich", 2000),
            s("score", 500),
            s("format", 1000),
        ],
        // A heavy stage sharded over two copies, merged back in order.
        "sharded" => vec![
            s("parse", 300),
            Box::new(move || {
                Pipeline::shard(2, move |k| spin(&format!("model {k}"), iters_per_us, 2000))
            }),
            Box::new(|| {
                Pipeline::durable_stage(
                    "total",
                    0u64,
                    machine::step(|t: &mut u64, x: u64| {
                        *t = t.wrapping_add(x);
                        *t
                    }),
                )
            }),
        ],
        // Two branches of two ~1 µs stages reading every item, paired: the
        // `fan-out` benchmark.
        "fanout" => vec![Box::new(move || {
            let s = |n: &str| spin(n, iters_per_us, 1000);
            s("a1")
                .then(s("a2"))
                .fan_out(s("b1").then(s("b2")))
                .then(Pipeline::map("post", |(a, b): (u64, u64)| a ^ b.rotate_left(17)).cost(20.0))
        })],
        // Three cheap stateful stages: the `trivial3` benchmark.
        "trivial3" => vec![
            durable("a", trivial_a),
            durable("b", trivial_b),
            durable("c", trivial_c),
        ],
        // The laundry of stevana's pipelined-state-machines, 20 ms per stage instead of 200.
        "laundry" => vec![slow("wash"), slow("dry"), slow("fold")],
        // Counts per key (64 keys), sharded by key over two copies, each
        // with its own table: the stateful pipeline checkpoints are for.
        "counts" => vec![s("parse", 300), Box::new(counts)],
        _ => return None,
    })
}

/// `counts`' second stage: counts per key over two copies by key.
fn counts() -> Pipeline<u64, u64> {
    Pipeline::shard_by_key(
        2,
        |x: &u64| key_of(*x),
        |k| {
            Pipeline::durable_stage(
                &format!("count {k}"),
                BTreeMap::<u64, u64>::new(),
                machine::step(|seen: &mut BTreeMap<u64, u64>, x: u64| {
                    let n = seen.entry(key_of(x)).or_insert(0);
                    *n += 1;
                    (key_of(x) << 32) | *n
                }),
            )
            .cost(200.0)
        },
    )
}

/// The key of an item of `counts`: one of 64, spread by a multiplicative hash.
fn key_of(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58
}

/// A clear error for an unknown name.
pub fn unknown(name: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "no example pipeline is named `{name}`; try one of: {}",
        NAMES.join(", ")
    )
}
