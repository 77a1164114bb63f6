//! Criterion micro-benchmarks: 1p1c, one publish per event, ours against rtrb and
//! crossbeam, with a harness-overhead baseline.
//!
//! Each measurement builds a fresh ring and consumer thread (untimed), then times
//! `iters` events from the first publish until the consumer has summed them all; the
//! sum is checked. `cargo test --benches` runs each once, to keep them compiling.
//! The full comparison lives in `statepipe bench ring`.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use crossbeam_utils::Backoff;
use statepipe_ring::RingBuilder;

const CAPACITY: usize = 65_536;

fn expected(iters: u64) -> u64 {
    (0..iters).fold(0u64, u64::wrapping_add)
}

/// The harness alone: the producer stores each value into one atomic, the consumer
/// waits for the last one. What every other figure pays on top of the queue.
fn base(iters: u64) -> Duration {
    let cell = Arc::new(AtomicU64::new(u64::MAX));
    let ready = Arc::new(Barrier::new(2));
    let consumer = {
        let (cell, ready) = (Arc::clone(&cell), Arc::clone(&ready));
        thread::spawn(move || {
            ready.wait();
            let backoff = Backoff::new();
            // Acquire: pairs with the producer's Release store of the last value.
            while iters > 0 && cell.load(Ordering::Acquire) != iters - 1 {
                backoff.snooze();
            }
        })
    };
    ready.wait();
    let start = Instant::now();
    for value in 0..iters {
        // Release: pairs with the consumer's Acquire load.
        cell.store(black_box(value), Ordering::Release);
    }
    consumer.join().expect("base consumer");
    start.elapsed()
}

fn statepipe(iters: u64) -> Duration {
    let sum = Arc::new(AtomicU64::new(0));
    let out = Arc::clone(&sum);
    let mut acc = 0u64;
    let (mut producer, ring) = RingBuilder::new(CAPACITY, || 0u64)
        .handler(
            "sum",
            move |event: &u64, _sequence: u64, end_of_batch: bool| {
                acc = acc.wrapping_add(*event);
                if end_of_batch {
                    // Release: pairs with the Acquire load after `join`.
                    out.store(acc, Ordering::Release);
                }
            },
        )
        .build_single();
    let start = Instant::now();
    for value in 0..iters {
        producer.publish(value).expect("ring halted");
    }
    drop(producer);
    ring.join().expect("ring join");
    let elapsed = start.elapsed();
    assert_eq!(
        sum.load(Ordering::Acquire),
        expected(iters),
        "statepipe lost events"
    );
    elapsed
}

fn rtrb(iters: u64) -> Duration {
    let (mut producer, mut consumer) = rtrb::RingBuffer::<u64>::new(CAPACITY);
    let handle = thread::spawn(move || {
        let backoff = Backoff::new();
        let mut sum = 0u64;
        loop {
            let available = consumer.slots();
            if available > 0 {
                let chunk = consumer.read_chunk(available).expect("available");
                let (a, b) = chunk.as_slices();
                sum = a.iter().chain(b).fold(sum, |s, v| s.wrapping_add(*v));
                chunk.commit_all();
                backoff.reset();
            } else if consumer.is_abandoned() {
                if consumer.slots() == 0 {
                    return sum;
                }
            } else {
                backoff.snooze();
            }
        }
    });
    let start = Instant::now();
    let backoff = Backoff::new();
    for value in 0..iters {
        let mut value = value;
        while let Err(rtrb::PushError::Full(back)) = producer.push(value) {
            value = back;
            backoff.snooze();
        }
        backoff.reset();
    }
    drop(producer);
    let sum = handle.join().expect("rtrb consumer");
    let elapsed = start.elapsed();
    assert_eq!(sum, expected(iters), "rtrb lost events");
    elapsed
}

fn crossbeam(iters: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<u64>(CAPACITY);
    let handle = thread::spawn(move || rx.iter().fold(0u64, u64::wrapping_add));
    let start = Instant::now();
    for value in 0..iters {
        tx.send(value).expect("crossbeam receiver gone");
    }
    drop(tx);
    let sum = handle.join().expect("crossbeam consumer");
    let elapsed = start.elapsed();
    assert_eq!(sum, expected(iters), "crossbeam lost events");
    elapsed
}

fn one_to_one_single(c: &mut Criterion) {
    let mut group = c.benchmark_group("1p1c/single");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(300));
    group.measurement_time(Duration::from_secs(2));
    group.bench_function("base", |b| b.iter_custom(base));
    group.bench_function("statepipe", |b| b.iter_custom(statepipe));
    group.bench_function("rtrb", |b| b.iter_custom(rtrb));
    group.bench_function("crossbeam", |b| b.iter_custom(crossbeam));
    group.finish();
}

criterion_group!(benches, one_to_one_single);
criterion_main!(benches);
