//! Tests of the checkpoint cases.

use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::base::*;
use super::groups::*;
use super::run::*;
use super::targets::*;
use crate::report::Report;

#[test]
fn every_checkpoint_case_runs_with_checked_answers() {
    let s = CheckpointSizes::TINY;
    let groups = groups(&s, false, |_| true);
    let host = crate::host::measure(Duration::from_millis(2));
    let rows = crate::harness::run(groups, 2, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let report = Report::new("pipeline", &host, rows);
    let mut cases = report.cases();
    cases.dedup();
    assert_eq!(cases, case_names());
    let t = targets(&report);
    assert_eq!(t.len(), 6, "{t:?}");
    let taken = report
        .results
        .iter()
        .filter(|r| r.case == taken_case("1MiB"))
        .map(|r| r.max)
        .fold(0.0, f64::max);
    assert!(taken >= 1.0, "a checkpoint was taken in {:?}", s.run);
}

/// CPU time of the calling thread (user + system), in ms.
fn thread_cpu_ms() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_THREAD).map_or(f64::NAN, |u| {
        let ms = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e3 + t.tv_usec() as f64 / 1e3;
        ms(u.user_time()) + ms(u.system_time())
    })
}

fn timed<T>(what: &str, runs: usize, mut f: impl FnMut() -> T) {
    let (mut ms, mut cpu): (Vec<f64>, Vec<f64>) = (0..runs)
        .map(|_| {
            let (t0, c0) = (Instant::now(), thread_cpu_ms());
            std::hint::black_box(f());
            (t0.elapsed().as_secs_f64() * 1e3, thread_cpu_ms() - c0)
        })
        .unzip();
    ms.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    println!(
        "{what}: median {:.3} ms, min {:.3}, max {:.3}; this thread's CPU median {:.3} ms \
         ({runs} runs)",
        ms[runs / 2],
        ms[0],
        ms[runs - 1],
        cpu[runs / 2]
    );
}

/// What a checkpoint and a restore of the bench's tables cost, step by step (the
/// steps of the library's writer and restore, measured here on the same data).
#[test]
#[ignore = "a cost breakdown for the results notes: cargo test --release -p statepipe-bench checkpoint::tests::cost_breakdown -- --ignored --nocapture"]
fn cost_breakdown() {
    let dir = SampleDir::new("breakdown").unwrap();
    // The barrier's pattern: a worker thread (new with each deployment) clones
    // the state, the writer thread frees the copy once written.
    for slots in [MIB_SLOTS, 64 * MIB_SLOTS] {
        let table = Arc::new(initial_table(slots));
        for deployment in 0..3 {
            let t = Arc::clone(&table);
            let (tx, rx) = std::sync::mpsc::channel::<Vec<u64>>();
            let writer = thread::spawn(move || rx.into_iter().for_each(drop));
            let us: Vec<u64> = thread::spawn(move || {
                (0..8)
                    .map(|_| {
                        let t0 = Instant::now();
                        let copy = (*t).clone();
                        let took = t0.elapsed().as_micros() as u64;
                        tx.send(copy).unwrap();
                        thread::sleep(Duration::from_millis(20));
                        took
                    })
                    .collect()
            })
            .join()
            .unwrap();
            writer.join().unwrap();
            println!(
                "{}: clone on a new thread, freed on another, deployment {deployment}: {us:?} µs",
                bytes_label(slots)
            );
        }
    }
    for slots in [MIB_SLOTS, 64 * MIB_SLOTS] {
        let label = bytes_label(slots);
        let table = initial_table(slots);
        let runs = if slots > MIB_SLOTS { 5 } else { 50 };
        timed(
            &format!("{label}: clone (a fresh allocation, as at a barrier)"),
            runs,
            || table.clone(),
        );
        let mut reused = table.clone();
        timed(
            &format!("{label}: copy into a buffer already mapped"),
            runs,
            || reused.copy_from_slice(&table),
        );
        timed(&format!("{label}: postcard encode"), runs, || {
            postcard::to_allocvec(&table).unwrap()
        });
        let bytes = postcard::to_allocvec(&table).unwrap();
        println!("{label}: encoded {} bytes", bytes.len());
        let path = dir.0.join(format!("{slots}.state"));
        timed(
            &format!("{label}: write_atomic (temp file, fsync, rename)"),
            runs.min(10),
            || statepipe_sys::durable::write_atomic(&path, &bytes).unwrap(),
        );
        timed(&format!("{label}: fs::read (page cache)"), runs, || {
            std::fs::read(&path).unwrap()
        });
        timed(&format!("{label}: to_vec of the payload"), runs, || {
            bytes.to_vec()
        });
        timed(&format!("{label}: postcard decode"), runs, || {
            postcard::from_bytes::<Vec<u64>>(&bytes).unwrap()
        });
    }
}

#[test]
fn the_filesystem_is_named() {
    let fs = filesystem_of(Path::new("target/surely/not/there"));
    assert!(fs.contains(" on /") || fs == "?", "{fs}");
}

#[test]
fn an_upgrade_changes_the_state_type_and_loses_nothing() {
    let l = upgrade_latency(
        64,
        Duration::from_millis(50),
        10_000,
        Duration::from_millis(10),
        true,
        false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(l.p50 <= l.p99 && l.p99 <= l.max, "{l:?}");
}
