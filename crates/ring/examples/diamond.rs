//! A first ring: a journal → replicate → apply diamond.
//!
//! Each event (a deposit, in cents) is journalled and replicated in
//! parallel; `apply` updates the balance only once both have seen it.
//!
//! Run with `cargo run --example diamond -p statepipe-ring`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use statepipe_ring::{RingBuilder, TryPublishError};

fn main() {
    // What the handlers leave behind, shared with `main` to print at the end.
    let journal = Arc::new(Mutex::new(Vec::<String>::new()));
    let flushes = Arc::new(AtomicU64::new(0));
    let replicated = Arc::new(AtomicU64::new(0));
    let balance = Arc::new(AtomicU64::new(0));

    let (log, flushed) = (Arc::clone(&journal), Arc::clone(&flushes));
    let mut pending = Vec::new(); // the journal's write buffer
    let sent = Arc::clone(&replicated);
    let applied = Arc::clone(&balance);
    // 64 slots, each preallocated as 0; `then()` puts `apply` behind both.
    let (mut producer, ring) = RingBuilder::new(64, || 0u64)
        .handler(
            "journal",
            move |cents: &u64, seq: u64, end_of_batch: bool| {
                pending.push(format!("{seq}: +{cents}"));
                if end_of_batch {
                    // One write per batch, not per event.
                    log.lock().unwrap().append(&mut pending);
                    flushed.fetch_add(1, Ordering::Relaxed);
                }
            },
        )
        .handler("replicate", move |_: &u64, _seq: u64, _eob: bool| {
            sent.fetch_add(1, Ordering::Relaxed); // a real one would send to a peer
        })
        .then()
        .handler("apply", move |cents: &u64, _seq: u64, _eob: bool| {
            applied.fetch_add(*cents, Ordering::Relaxed);
        })
        .build_single();

    // try_publish never waits: a full ring hands the event back.
    let mut refused = 0u64;
    for cents in 1..=10_000u64 {
        let mut event = cents;
        loop {
            match producer.try_publish(event) {
                Ok(_) => break,
                Err(TryPublishError::Full(back)) => {
                    // Back-pressure: the slowest consumer is a ring behind.
                    refused += 1;
                    event = back;
                    std::thread::yield_now();
                }
                Err(TryPublishError::Halted(_)) => panic!("a handler panicked"),
            }
        }
    }
    drop(producer); // closing the producer drains the ring, then stops it

    let report = ring.join().expect("no handler panicked");
    println!("published {} events", report.published);
    for (name, handled) in &report.consumers {
        println!("  {name:>9} handled {handled}");
    }
    println!(
        "journal: {} lines in {} flushes; replicated {}; balance {} cents; {} retries on a full ring",
        journal.lock().unwrap().len(),
        flushes.load(Ordering::Relaxed),
        replicated.load(Ordering::Relaxed),
        balance.load(Ordering::Relaxed),
        refused,
    );
    assert_eq!(balance.load(Ordering::Relaxed), 10_000 * 10_001 / 2);
}
