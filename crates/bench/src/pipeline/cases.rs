//! The groups of `statepipe bench pipeline`, one builder per case: who runs, how each
//! sample is turned into figures, and the `config` each row carries.

use std::time::Duration;

use statepipe_pipeline::Spin;

use super::peers::{self, chain, logger, message_ring, one_thread, thread_ring};
use super::statepipe::{self, Laundry, NAME};
use super::workload::{message_ring_sends, FanOut, Scaling};
use super::{
    Sizes, CAPACITY, FAN_OUT_CASES, FORCED_WORKERS, MESSAGE_RING_CASE, RING_IN_FLIGHT, RING_STAGES,
    SCALING_CASES, SIZING_CASES, THREAD_RING_CASE, TRIVIAL3_CASE,
};
use crate::harness::{Contender, Group, Metric};
use crate::BenchError;

fn metric(case: &str, unit: &str, higher_is_better: bool) -> Metric {
    Metric {
        case: case.to_string(),
        unit: unit.to_string(),
        higher_is_better,
    }
}

/// Millions of `count` per second of `elapsed`.
fn mega_rate(count: u64, elapsed: Duration) -> f64 {
    count as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6
}

pub(super) fn laundry(layout: Laundry, case: &str, stage: Duration, pin: bool) -> Group<'static> {
    let ideal = layout.ideal(stage).as_secs_f64();
    let ms = stage.as_millis();
    let copies = match layout {
        Laundry::Sequential => "3 stages x 6 loads".to_string(),
        Laundry::Pipelined => "6 loads + 2".to_string(),
        Laundry::Shard(k) => format!("6/{k} loads + 2"),
    };
    Group {
        name: case.to_string(),
        metrics: vec![metric(case, "s", false)],
        contenders: vec![
            Contender::new(NAME, layout.config(), move || {
                Ok(vec![statepipe::laundry(layout, stage, pin)?.as_secs_f64()])
            }),
            // Not a sample: the bound the layout allows, the same in every column.
            Contender::new(
                "ideal",
                format!("computed bound, not measured: ({copies}) x {ms} ms"),
                move || Ok(vec![ideal]),
            ),
        ],
    }
}

pub(super) fn thread_ring_group(s: &Sizes, pin: bool) -> Group<'static> {
    let per_hop = |elapsed: Duration, hops: u64| elapsed.as_nanos() as f64 / hops.max(1) as f64;
    let (hops, threads_hops) = (s.thread_ring_hops, s.threads_hops);
    Group {
        name: THREAD_RING_CASE.into(),
        metrics: vec![metric(THREAD_RING_CASE, "ns/hop", false)],
        contenders: vec![
            Contender::new(
                NAME,
                "503 stages fused on workers(1), closed by deploy_cycle: a hop is a direct call, \
                 no scheduler; stage 503 feeds stage 1 through the feedback ring",
                move || {
                    let (_, elapsed) = statepipe::rings::thread_ring_on_worker(hops, pin)?;
                    Ok(vec![per_hop(elapsed, hops)])
                },
            ),
            Contender::new(
                NAME,
                "the same through Input/Output: the caller re-sends the token every 503 hops",
                move || {
                    let (_, elapsed) = statepipe::thread_ring(hops, pin)?;
                    Ok(vec![per_hop(elapsed, hops)])
                },
            ),
            Contender::new(
                thread_ring::TOKIO_NAME,
                thread_ring::TOKIO_CONFIG,
                move || {
                    let (_, elapsed) = peers::tokio_thread_ring(hops)?;
                    Ok(vec![per_hop(elapsed, hops)])
                },
            ),
            Contender::new(
                thread_ring::THREADS_NAME,
                format!("{}; {threads_hops} hops", thread_ring::THREADS_CONFIG),
                move || {
                    let (_, elapsed) = peers::threads_thread_ring(threads_hops)?;
                    Ok(vec![per_hop(elapsed, threads_hops)])
                },
            ),
            Contender::new(one_thread::NAME, one_thread::CONFIG, move || {
                let (_, elapsed) = peers::one_thread_thread_ring(hops)?;
                Ok(vec![per_hop(elapsed, hops)])
            }),
        ],
    }
}

pub(super) fn message_ring_group(s: &Sizes, pin: bool) -> Group<'static> {
    let laps = s.ring_laps;
    let sends = message_ring_sends(RING_STAGES, RING_IN_FLIGHT, laps);
    let half = RING_STAGES / 2;
    Group {
        name: MESSAGE_RING_CASE.into(),
        metrics: vec![metric(MESSAGE_RING_CASE, "M msg/s", true)],
        contenders: vec![
            Contender::new(
                NAME,
                format!(
                    "workers(2), stages 0-{} | {half}-{}, capacity {RING_IN_FLIGHT}; \
                     deploy_cycle: a feedback ring closes the loop",
                    half - 1,
                    RING_STAGES - 1
                ),
                move || {
                    let elapsed = statepipe::message_ring(RING_STAGES, RING_IN_FLIGHT, laps, pin)?;
                    Ok(vec![mega_rate(sends, elapsed)])
                },
            ),
            Contender::new(
                NAME,
                "the same, the calling thread re-injecting through Input/Output",
                move || {
                    let elapsed = statepipe::rings::message_ring_via_caller(
                        RING_STAGES,
                        RING_IN_FLIGHT,
                        laps,
                        pin,
                    )?;
                    Ok(vec![mega_rate(sends, elapsed)])
                },
            ),
            Contender::new(
                message_ring::NAME,
                format!("{RING_STAGES} threads, crossbeam bounded({RING_IN_FLIGHT})"),
                move || {
                    let elapsed = peers::crossbeam_message_ring(RING_STAGES, RING_IN_FLIGHT, laps)?;
                    Ok(vec![mega_rate(sends, elapsed)])
                },
            ),
            Contender::new(one_thread::NAME, one_thread::CONFIG, move || {
                let elapsed = peers::one_thread_message_ring(RING_STAGES, RING_IN_FLIGHT, laps)?;
                Ok(vec![mega_rate(sends, elapsed)])
            }),
        ],
    }
}

pub(super) fn trivial3_group(s: &Sizes, pin: bool) -> Group<'static> {
    let items = s.trivial3_items;
    let ours = |config: String, run: fn(u64, usize, bool) -> Result<Duration, BenchError>| {
        Contender::new(NAME, config, move || {
            Ok(vec![mega_rate(items, run(items, CAPACITY, pin)?)])
        })
    };
    Group {
        name: TRIVIAL3_CASE.into(),
        metrics: vec![metric(TRIVIAL3_CASE, "M items/s", true)],
        contenders: vec![
            ours(
                format!(
                    "3 stages .cost({}) -> fused on 1 worker; deploy_with: the range made and \
                     the outputs summed on the worker",
                    statepipe::TRIVIAL_COST_NS
                ),
                statepipe::trivial3_on_worker,
            ),
            ours(
                format!(
                    "the same through Input/Output: send_all from a thread, the outputs \
                     read by another, capacity {CAPACITY}"
                ),
                statepipe::trivial3,
            ),
            Contender::new(chain::NAME, chain::config(CAPACITY), move || {
                let elapsed = peers::thread_per_stage_trivial3(items, CAPACITY)?;
                Ok(vec![mega_rate(items, elapsed)])
            }),
            Contender::new(one_thread::NAME, one_thread::CONFIG, move || {
                Ok(vec![mega_rate(items, peers::one_thread_trivial3(items)?)])
            }),
        ],
    }
}

/// Runs `a` and `b` in an order that alternates from one call to the next (so neither
/// always runs on a cooler or warmer host); returns their results in `(a, b)` order.
fn alternate<T>(
    flip: &mut bool,
    a: impl FnOnce() -> Result<T, BenchError>,
    b: impl FnOnce() -> Result<T, BenchError>,
) -> Result<(T, T), BenchError> {
    *flip = !*flip;
    if *flip {
        let x = a()?;
        Ok((x, b()?))
    } else {
        let y = b()?;
        Ok((a()?, y))
    }
}

pub(super) fn scaling_group(case: Scaling, pin: bool) -> Group<'static> {
    let cpu = statepipe::sizing_cpu();
    one_and_two_workers(
        "scaling",
        SCALING_CASES,
        case.items,
        (
            format!(
                "workers(1 | 2), stages .cost({}) -> plan [0,0,1,1]; deploy_with: inputs made \
                 and outputs summed on the workers",
                statepipe::SCALING_COST_NS
            ),
            move |workers| statepipe::scaling(&case, workers, pin),
        ),
        (
            format!(
                "{}; 1w: 4 threads confined to CPU {cpu}, 2w: OS-scheduled",
                chain::config(CAPACITY)
            ),
            move || peers::thread_per_stage_scaling(&case, CAPACITY),
        ),
    )
}

pub(super) fn fan_out_group(case: FanOut, pin: bool) -> Group<'static> {
    let cpu = statepipe::sizing_cpu();
    one_and_two_workers(
        "fan-out",
        FAN_OUT_CASES,
        case.items,
        (
            format!(
                "workers(1 | 2), fan_out(s0.then(s1), s2.then(s3)) .cost({}) each, then post \
                 .cost({}) -> plan [0,0,1,1,1,1]: one branch per worker, both reading one \
                 multicast ring slot; deploy_with: inputs made and outputs summed on the \
                 workers",
                statepipe::SCALING_COST_NS,
                statepipe::FAN_OUT_POST_COST_NS
            ),
            move |workers| statepipe::fan_out(&case, workers, pin),
        ),
        (
            format!(
                "{}; a fork thread copying each item to both branches, a join thread \
                 pairing and summing; 1w: 6 threads confined to CPU {cpu}, 2w: OS-scheduled",
                chain::config(CAPACITY)
            ),
            move || peers::thread_per_stage_fan_out(&case, CAPACITY),
        ),
    )
}

/// A group whose cases are `[1w, 2w, speed-up]` over `items` items: ours
/// (`run(workers)`) on 1 and 2 workers, the crossbeam peer (`run()`) with
/// its threads confined to one CPU and OS-scheduled, each pair of runs in
/// alternating order.
fn one_and_two_workers<F, G>(
    name: &str,
    [one, two, speed_up]: [&str; 3],
    items: u64,
    (ours_config, ours): (String, F),
    (peer_config, peer): (String, G),
) -> Group<'static>
where
    F: Fn(usize) -> Result<Duration, BenchError> + 'static,
    G: Fn() -> Result<Duration, BenchError> + Clone + Send + 'static,
{
    let cpu = statepipe::sizing_cpu();
    let (mut flip, mut peer_flip) = (false, false);
    let rates = move |(t1, t2): (Duration, Duration)| {
        let (r1, r2) = (mega_rate(items, t1), mega_rate(items, t2));
        vec![r1, r2, r2 / r1]
    };
    Group {
        name: name.into(),
        metrics: vec![
            metric(one, "M items/s", true),
            metric(two, "M items/s", true),
            metric(speed_up, "x (2w/1w)", true),
        ],
        contenders: vec![
            Contender::new(NAME, ours_config, move || {
                alternate(&mut flip, || ours(1), || ours(2)).map(rates)
            }),
            Contender::new(chain::NAME, peer_config, move || {
                let confined_peer = peer.clone();
                alternate(&mut peer_flip, || confined(cpu, confined_peer), &peer).map(rates)
            }),
        ],
    }
}

/// Runs `f` on a new thread pinned to `cpu` (threads it starts inherit the mask).
fn confined<T: Send + 'static>(
    cpu: usize,
    f: impl FnOnce() -> Result<T, BenchError> + Send + 'static,
) -> Result<T, BenchError> {
    std::thread::spawn(move || {
        if !statepipe_sys::pin::pin_current_thread(cpu) {
            return Err(BenchError::failed(
                "confined run",
                format!("could not pin to CPU {cpu}"),
            ));
        }
        f()
    })
    .join()
    .map_err(|_| BenchError::failed("confined run", "panicked"))?
}

pub(super) fn logger_group(producers: usize, lines: u64) -> Group<'static> {
    let case = format!("logger/{producers}p");
    let total = producers as u64 * lines;
    let tag = format!("{producers}p");
    let rate = move |elapsed: Duration| vec![mega_rate(total, elapsed)];
    let (t1, t2, t3) = (tag.clone(), tag.clone(), tag);
    Group {
        name: case.clone(),
        metrics: vec![metric(&case, "M lines/s", true)],
        contenders: vec![
            Contender::new(NAME, statepipe::logger::config(), move || {
                let path = logger::temp_log_path(&format!("statepipe-{t1}"));
                let (elapsed, _writes) = statepipe::ring_logger(producers, lines, &path)?;
                Ok(rate(elapsed))
            }),
            Contender::new(logger::TRACING_NAME, logger::TRACING_CONFIG, move || {
                let path = logger::temp_log_path(&format!("tracing-{t2}"));
                Ok(rate(peers::tracing_appender_logger(
                    producers, lines, &path,
                )?))
            }),
            Contender::new(logger::MUTEX_NAME, logger::MUTEX_CONFIG, move || {
                let path = logger::temp_log_path(&format!("mutex-{t3}"));
                Ok(rate(peers::mutex_bufwriter_logger(
                    producers, lines, &path,
                )?))
            }),
        ],
    }
}

pub(super) fn sizing_group(
    case: Scaling,
    auto_workers: Option<usize>,
    pin: bool,
) -> Group<'static> {
    let [auto, forced, ratio] = SIZING_CASES;
    let items = case.items;
    let auto_workers = auto_workers.map_or("?".to_string(), |n| n.to_string());
    let (mut flip, mut spin_flip) = (false, false);
    Group {
        name: "sizing".into(),
        metrics: vec![
            metric(auto, "M items/s", true),
            metric(forced, "M items/s", true),
            metric(ratio, "x (auto/forced4)", true),
        ],
        contenders: vec![
            Contender::new(
                NAME,
                format!(
                    "in a thread on CPU {}: Config::new() -> {auto_workers} worker(s) | \
                 .workers({FORCED_WORKERS})",
                    statepipe::sizing_cpu()
                ),
                move || {
                    let (ta, tf) = alternate(
                        &mut flip,
                        || statepipe::sizing(&case, None, Spin::Auto, pin),
                        || statepipe::sizing(&case, Some(FORCED_WORKERS), Spin::Auto, pin),
                    )?;
                    let (ra, rf) = (mega_rate(items, ta), mega_rate(items, tf));
                    Ok(vec![ra, rf, ra / rf])
                },
            ),
            Contender::new(
                SPINNING_NAME,
                format!(
                    "the same deployments, idle workers busy-spinning {} ms before they sleep \
                 (Spin::For), as a runtime that spins does",
                    SPINNING.as_millis()
                ),
                move || {
                    let spin = Spin::For(SPINNING);
                    let (ta, tf) = alternate(
                        &mut spin_flip,
                        || statepipe::sizing(&case, None, spin, pin),
                        || statepipe::sizing(&case, Some(FORCED_WORKERS), spin, pin),
                    )?;
                    let (ra, rf) = (mega_rate(items, ta), mega_rate(items, tf));
                    Ok(vec![ra, rf, ra / rf])
                },
            ),
        ],
    }
}

/// The sizing peer: our own workers made to busy-spin, to show the trap the default
/// idling avoids.
const SPINNING_NAME: &str = "spinning-workers";
/// How long the sizing peer's idle workers spin.
const SPINNING: Duration = Duration::from_millis(2);
