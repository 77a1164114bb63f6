//! The `remote-leave` and `remote-join` cases of `statepipe bench pipeline`:
//! what a member leaving (SIGTERM) or joining a running distributed
//! pipeline costs. The coordinator runs in this process (`counts` in two
//! parts, checkpoints every [`EVERY`]); its members are `statepipe member`
//! processes on one worker each. Three runs of the same inputs:
//!
//! - steady: two members all along;
//! - leave: three members (one spare); once a third of the outputs are
//!   in, a member running a part gets SIGTERM; its part moves to the spare;
//! - join: one member; once a third of the outputs are in, a second joins
//!   and gets a part.
//!
//! Each is compared with the steady run: its throughput, the outputs lost
//! or delivered twice (both must be 0, else the command fails), the exit
//! status of the member that left (must be 0), and the time lost: the
//! longest pause between two outputs at the sink, less the steady run's.
//! The target is a lost time of at most one checkpoint interval. The
//! wall-clock difference is printed too; the join run has one member for
//! its first third, so its wall clock also shows that member's capacity.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use statepipe_bench::pipeline::workload::calibrate_iters_for;
use statepipe_pipeline::remote::{Coordinator, RemoteConfig, RestoreKind};
use statepipe_sys::auth::{Secret, SECRET_ENV};

use crate::pipeline_cmd::digest_line;
use crate::remote_cmd::{app, parts_of};

/// The cases, in run order.
pub const CASES: [&str; 2] = ["remote-leave", "remote-join"];

/// The checkpoint interval.
const EVERY: Duration = Duration::from_millis(500);

/// What the sink saw in one run.
#[derive(Default)]
struct Seen {
    outputs: u64,
    /// A sum over every output of a mix of its number and value: equal
    /// sums, equal outputs (with overwhelming likelihood).
    sum: u64,
    /// Outputs numbered below the one before (a replay delivered again).
    backwards: u64,
    last_seq: Option<u64>,
    last_at: Option<Instant>,
    longest_pause: Duration,
}

struct Outcome {
    seen: Seen,
    wall: Duration,
    digest: String,
    rescales: Vec<RestoreKind>,
    /// The exit status of the member that left (leave runs).
    leaver_exit: Option<Option<i32>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Event {
    None,
    Leave,
    Join,
}

/// Runs the cases `filter` names (all without one).
pub fn run(filter: Option<&str>, quick: bool) -> anyhow::Result<()> {
    let cases: Vec<&str> = CASES
        .into_iter()
        .filter(|c| filter.map_or(true, |f| c.contains(f)))
        .collect();
    if cases.is_empty() {
        return Ok(());
    }
    let items: u64 = if quick { 1_000_000 } else { 4_000_000 };
    println!(
        "remote-leave, remote-join: `counts` in 2 parts over `statepipe member` processes \
         (one worker each), {items} inputs, a checkpoint every {:.1} s; this host's other \
         load counts too (rerun to see the spread)",
        EVERY.as_secs_f64()
    );
    let steady = once(items, Event::None)?;
    println!(
        "steady: {:.3} M items/s ({:.2} s), longest pause between outputs {:.3} s",
        rate(items, steady.wall),
        steady.wall.as_secs_f64(),
        steady.seen.longest_pause.as_secs_f64()
    );
    let mut failed = Vec::new();
    for case in cases {
        let event = if case == "remote-leave" {
            Event::Leave
        } else {
            Event::Join
        };
        let o = once(items, event)?;
        let lost = o.seen.outputs.saturating_sub(steady.seen.outputs)
            + steady.seen.outputs.saturating_sub(o.seen.outputs);
        let (lost_n, dup_n) = (
            steady.seen.outputs.saturating_sub(o.seen.outputs),
            o.seen.outputs.saturating_sub(steady.seen.outputs) + o.seen.backwards,
        );
        let same = o.seen.sum == steady.seen.sum && o.digest == steady.digest;
        let pause = o
            .seen
            .longest_pause
            .saturating_sub(steady.seen.longest_pause);
        println!(
            "{case}: {:.3} M items/s ({:.2}x steady, wall {:+.3} s), {} rescale(s) {:?}, longest \
             pause {:.3} s: lost time {:.3} s against a checkpoint interval of {:.1} s: {}; \
             outputs lost {lost_n}, duplicated {dup_n}, {}{}",
            rate(items, o.wall),
            steady.wall.as_secs_f64() / o.wall.as_secs_f64(),
            o.wall.as_secs_f64() - steady.wall.as_secs_f64(),
            o.rescales.len(),
            o.rescales,
            o.seen.longest_pause.as_secs_f64(),
            pause.as_secs_f64(),
            EVERY.as_secs_f64(),
            if pause <= EVERY { "within" } else { "OVER" },
            if same {
                "outputs and states as steady"
            } else {
                "outputs or states DIFFER from steady"
            },
            match o.leaver_exit {
                Some(code) => format!(", the member that left exited {code:?}"),
                None => String::new(),
            }
        );
        if lost > 0 || o.seen.backwards > 0 || !same {
            failed.push(format!("{case}: outputs lost, duplicated or different"));
        }
        if o.rescales.is_empty() {
            failed.push(format!(
                "{case}: no rescale (the run ended before the event?)"
            ));
        }
        if o.leaver_exit.is_some_and(|c| c != Some(0)) {
            failed.push(format!(
                "{case}: the member that left exited {:?}",
                o.leaver_exit
            ));
        }
    }
    anyhow::ensure!(failed.is_empty(), "{}", failed.join("; "));
    Ok(())
}

fn rate(items: u64, wall: Duration) -> f64 {
    items as f64 / wall.as_secs_f64() / 1e6
}

/// A `statepipe member` of `addr`; its number, once it runs.
fn member(addr: &str, secret: &str) -> anyhow::Result<(Child, u32)> {
    let mut c = Command::new(std::env::current_exe().context("finding this executable")?)
        .args(["member", "--connect", addr, "--workers", "1", "--no-pin"])
        .env(SECRET_ENV, secret)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting a member")?;
    let mut lines = BufReader::new(c.stderr.take().context("its stderr")?).lines();
    let number = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.contains(": running")
                .then(|| {
                    l.trim_start_matches("member ")
                        .split(':')
                        .next()?
                        .parse()
                        .ok()
                })
                .flatten()
        })
        .context("a member ended before running")?;
    // Drained, so that it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Ok((c, number))
}

fn once(items: u64, event: Event) -> anyhow::Result<Outcome> {
    let iters = calibrate_iters_for(1000);
    let parts = parts_of("counts", iters, 2)?;
    let secret = format!("bench-elastic-{}", std::process::id());
    let co = Coordinator::bind("127.0.0.1:0", Secret::new(&secret), app("counts", iters, 2))?;
    let addr = co.local_addr().to_string();
    let dir = std::env::temp_dir().join(format!(
        "statepipe-bench-elastic-{}-{}",
        std::process::id(),
        event as u8
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let starting = match event {
        Event::None => 2,
        Event::Leave => 3,
        Event::Join => 1,
    };
    let config = RemoteConfig::new()
        .members(starting)
        .checkpoint_dir(&dir)
        .checkpoint_every(EVERY);
    let seen = Arc::new(Mutex::new(Seen::default()));
    let count = Arc::new(AtomicU64::new(0));
    let (sink, counted) = (Arc::clone(&seen), Arc::clone(&count));
    let start = Instant::now();
    let run = std::thread::spawn(move || {
        co.run(
            &parts,
            &config,
            move |from| from.min(items)..items,
            move |seq, x| {
                let now = Instant::now();
                let mut s = sink.lock().unwrap_or_else(|p| p.into_inner());
                s.outputs += 1;
                s.sum = s
                    .sum
                    .wrapping_add(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ x.rotate_left(17));
                if s.last_seq.is_some_and(|l| seq < l) {
                    s.backwards += 1;
                }
                s.last_seq = Some(seq);
                if let Some(at) = s.last_at {
                    s.longest_pause = s.longest_pause.max(now - at);
                }
                s.last_at = Some(now);
                counted.fetch_add(1, Ordering::Relaxed);
            },
        )
    });
    let mut members = Vec::new();
    for _ in 0..starting {
        members.push(member(&addr, &secret)?);
    }
    let mut leaver_exit = None;
    if event != Event::None {
        let deadline = Instant::now() + Duration::from_secs(600);
        while count.load(Ordering::Relaxed) < items / 3 && !run.is_finished() {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the run made no progress in 600 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        match event {
            Event::Leave => {
                // Member 1 runs the second part; member 2 is the spare.
                let (c, _) = members
                    .iter_mut()
                    .find(|(_, n)| *n == 1)
                    .context("no member 1")?;
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(c.id() as i32),
                    nix::sys::signal::Signal::SIGTERM,
                )?;
                leaver_exit = Some(c.wait()?.code());
            }
            Event::Join => members.push(member(&addr, &secret)?),
            Event::None => {}
        }
    }
    let r = run
        .join()
        .map_err(|_| anyhow::anyhow!("the coordinator panicked"))??;
    let wall = start.elapsed();
    for (mut c, _) in members {
        let _ = c.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let seen = std::mem::take(&mut *seen.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(Outcome {
        seen,
        wall,
        digest: digest_line(&r.states),
        rescales: r.restores.iter().map(|x| x.kind).collect(),
        leaver_exit,
    })
}
