//! Building a random case's ring and driving it: producers and pollers on
//! threads, then the checks.

use super::*;

pub(crate) fn run_case(case: Case) {
    let topo = Topology::new(&case.units);
    let threads = case.producers.len() + topo.members.len();
    match case.wait {
        Wait::Adaptive => run_with(&case, topo, Adaptive::default()),
        Wait::AdaptiveEagerPark => run_with(&case, topo, common::adaptive_eager_park()),
        // Busy-spinning threads that outnumber the 2 cores of CI would turn
        // a case into seconds of time slices: spin only on small rings.
        Wait::BusySpin if threads <= 3 => run_with(&case, topo, BusySpin),
        Wait::BusySpin | Wait::SpinYield => run_with(&case, topo, SpinYield::default()),
        Wait::Blocking => run_with(&case, topo, Blocking::new()),
        Wait::BlockingWithTimeout => run_with(
            &case,
            topo,
            Blocking::with_timeout(Duration::from_micros(500)),
        ),
    }
}

fn run_with<W: WaitStrategy>(case: &Case, topo: Topology, wait: W) {
    let total: u64 = case.producers.iter().map(|p| p.0).sum();
    let multi = case.producers.len() > 1;
    let ctx = Ctx {
        flags: Arc::new(Flags {
            total: total as usize,
            handled: (0..topo.units.len() * total as usize)
                .map(|_| AtomicBool::new(false))
                .collect(),
        }),
        sink: Arc::new(Mutex::new(vec![None; topo.members.len()])),
    };

    let mut builder = RingBuilder::new(case.capacity, Ev::default).wait_strategy(wait);
    if let Some(max) = case.max_batch {
        builder = builder.max_batch(max);
    }
    let mut b = B::Empty(builder);
    for (si, stage) in topo.stages.iter().enumerate() {
        if si > 0 {
            b = match b {
                B::Shared(x) => B::New(x.then()),
                B::Excl(x) => B::New(x.then()),
                _ => unreachable!("stages are never empty"),
            };
        }
        for &u in stage {
            let unit = &topo.units[u];
            let name = unit.name.as_str();
            b = match unit.kind {
                Kind::Handler => add_shared!(b, x => x.handler(name, ctx.recorder(&topo, u, 0))),
                Kind::Poller => add_shared!(b, x => x.poller(name)),
                Kind::Group(n) => add_shared!(b, x => x.worker_group(name, n, |i| {
                    ctx.recorder(&topo, u, i)
                })),
                Kind::HandlerMut => add_exclusive!(b, x => {
                    x.handler_mut(name, ctx.recorder(&topo, u, 0))
                }),
                Kind::GroupMut(n) => add_exclusive!(b, x => x.worker_group_mut(name, n, |i| {
                    ctx.recorder(&topo, u, i)
                })),
            };
        }
    }
    match (b, multi) {
        (B::Shared(x), false) if case.stamped => {
            let (p, r) = x.build_stamped();
            drive(case, &topo, &ctx, total, vec![p], r);
        }
        (B::Excl(x), false) if case.stamped => {
            let (p, r) = x.build_stamped();
            drive(case, &topo, &ctx, total, vec![p], r);
        }
        (B::Shared(x), false) => {
            let (p, r) = x.build_single();
            drive(case, &topo, &ctx, total, vec![p], r);
        }
        (B::Excl(x), false) => {
            let (p, r) = x.build_single();
            drive(case, &topo, &ctx, total, vec![p], r);
        }
        (B::Shared(x), true) => {
            let (p, r) = x.build_multi();
            let handles = case.producers.iter().map(|_| p.clone()).collect();
            // The handles on the threads keep the ring open.
            drop(p);
            drive(case, &topo, &ctx, total, handles, r);
        }
        (B::Excl(x), true) => {
            let (p, r) = x.build_multi();
            let handles = case.producers.iter().map(|_| p.clone()).collect();
            drop(p);
            drive(case, &topo, &ctx, total, handles, r);
        }
        _ => unreachable!("at least one consumer"),
    }
}

/// Runs a built case: pollers on threads, one thread per producer handle,
/// then checks everything against the sequential model.
fn drive<W: WaitStrategy, K: Staging>(
    case: &Case,
    topo: &Topology,
    ctx: &Ctx,
    total: u64,
    producers: Vec<Producer<Ev, W, K>>,
    mut ring: Ring<Ev, W, K>,
) {
    assert_eq!(ring.capacity(), case.capacity as u64);
    let monitor = ring.monitor();

    // Pollers are taken before anything is published, each driven by a
    // thread that hands it back once the ring is closed and drained.
    let poller_threads: Vec<_> = topo
        .pollers()
        .map(|unit| {
            let mut poller = ring
                .take_poller(&unit.name)
                .unwrap_or_else(|| panic!("poller {} was declared", unit.name));
            assert_eq!(poller.name(), unit.name);
            assert!(ring.take_poller(&unit.name).is_none(), "taken twice");
            let u = topo
                .units
                .iter()
                .position(|x| x.name == unit.name)
                .expect("the unit exists");
            let mut rec = ctx.recorder(topo, u, 0);
            let name = unit.name.clone();
            thread::spawn(move || {
                let mut round = 0u64;
                let outcome = loop {
                    round += 1;
                    let result = if round % 3 == 0 {
                        poller.poll_timeout(Duration::from_micros(300), |e, s, eob| {
                            rec.see(e, s, eob);
                            rec.done(s);
                        })
                    } else {
                        poller.poll(|e, s, eob| {
                            rec.see(e, s, eob);
                            rec.done(s);
                        })
                    };
                    match result {
                        Ok(0) => thread::yield_now(),
                        Ok(_) => {}
                        Err(PollError::Closed) => break Ok(()),
                        Err(PollError::Halted) => {
                            break Err(format!("poller {name}: the ring halted"));
                        }
                    }
                };
                drop(rec);
                (poller, outcome)
            })
        })
        .collect();

    let producer_threads: Vec<thread::JoinHandle<Result<Vec<u64>, String>>> = producers
        .into_iter()
        .enumerate()
        .map(|(id, p)| {
            let (count, seed) = case.producers[id];
            thread::spawn(move || produce(p, id as u32, count, seed))
        })
        .collect();

    let join_producers = |threads: Vec<thread::JoinHandle<Result<Vec<u64>, String>>>| {
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Vec<_>>()
    };
    let (joined, produced, pollers) = if case.join_early && poller_threads.is_empty() {
        // `join` from another thread than the producers', while they run.
        let joined = ring.join();
        (joined, join_producers(producer_threads), Vec::new())
    } else {
        let produced = join_producers(producer_threads);
        let mut pollers = Vec::new();
        let mut poller_errors = Vec::new();
        for t in poller_threads {
            let (poller, outcome) = t.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            pollers.push(poller);
            if let Err(e) = outcome {
                poller_errors.push(e);
            }
        }
        let joined = ring.join();
        assert!(poller_errors.is_empty(), "{poller_errors:?} ({joined:?})");
        (joined, produced, pollers)
    };
    let report = joined.unwrap_or_else(|e| panic!("join failed: {e}"));
    let producer_seqs: Vec<Vec<u64>> = produced
        .into_iter()
        .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let logs: Vec<Vec<Rec>> = std::mem::take(&mut *ctx.sink.lock().expect("no panics"))
        .into_iter()
        .enumerate()
        .map(|(m, log)| {
            log.unwrap_or_else(|| panic!("consumer {} never handed its log", topo.members[m].name))
        })
        .collect();

    check_events(case, topo, total, K::MULTI, &producer_seqs, &logs);

    // `join` and the monitor agree with the model.
    let expected = JoinReport {
        published: total,
        consumers: topo
            .members
            .iter()
            .map(|m| (m.name.clone(), total))
            .collect(),
    };
    assert_eq!(report, expected, "join report");
    let stats = monitor.stats();
    assert_eq!(stats.capacity, case.capacity as u64);
    assert_eq!(stats.published, total, "monitor: published");
    assert_eq!(stats.fill, 0, "monitor: fill after the drain");
    assert!(stats.closed && !stats.halted, "monitor: {stats:?}");
    let names: Vec<&str> = stats.consumers.iter().map(|c| c.name.as_str()).collect();
    let expected_names: Vec<&str> = topo.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names, expected_names,
        "monitor: consumers in declaration order"
    );
    for c in &stats.consumers {
        assert_eq!(
            (c.handled, c.lag, c.detached),
            (total, 0, false),
            "monitor: {c:?}"
        );
    }
    // Dropped pollers detach.
    let poller_names: Vec<String> = pollers.iter().map(|p| p.name().to_string()).collect();
    drop(pollers);
    for c in monitor.stats().consumers {
        if poller_names.contains(&c.name) {
            assert!(c.detached, "dropped poller {c:?}");
            assert_eq!(
                c.handled, total,
                "a dropped poller keeps where it stopped: {c:?}"
            );
        }
    }
}

/// Publishes `count` events `(id, 0..count)`, picking the call for each
/// event with `seed`; returns the sequence of each event. Drops the handle
/// at the end: the producer's close point.
fn produce<W: WaitStrategy, K: Staging>(
    mut p: Producer<Ev, W, K>,
    id: u32,
    count: u64,
    seed: u64,
) -> Result<Vec<u64>, String> {
    let cap = p.capacity();
    let mut rng = common::Rng::new(seed);
    let mut seqs: Vec<u64> = Vec::with_capacity(count as usize);
    let ev = |counter: u64| Ev {
        producer: id,
        counter,
        marks: 0,
    };
    let halted = |call: &str, c: u64| format!("producer {id}: {call} of event {c}: ring halted");
    while (seqs.len() as u64) < count {
        let c = seqs.len() as u64;
        match rng.below(9) {
            0 | 1 => {
                let s = p.publish(ev(c)).map_err(|_| halted("publish", c))?;
                seqs.push(s);
            }
            2 => {
                let s = p
                    .publish_with(|e| *e = ev(c))
                    .map_err(|_| halted("publish_with", c))?;
                seqs.push(s);
            }
            3 => {
                let mut v = ev(c);
                loop {
                    match p.try_publish(v) {
                        Ok(s) => break seqs.push(s),
                        Err(TryPublishError::Full(back)) => {
                            assert_eq!(back, ev(c), "try_publish hands the value back");
                            v = back;
                            thread::yield_now();
                        }
                        Err(TryPublishError::Halted(_)) => return Err(halted("try_publish", c)),
                    }
                }
            }
            4 => {
                let mut f = |e: &mut Ev| *e = ev(c);
                loop {
                    match p.try_publish_with(f) {
                        Ok(s) => break seqs.push(s),
                        Err(TryPublishError::Full(back)) => {
                            f = back;
                            thread::yield_now();
                        }
                        Err(TryPublishError::Halted(_)) => {
                            return Err(halted("try_publish_with", c));
                        }
                    }
                }
            }
            5 => {
                let mut v = ev(c);
                let timeout = Duration::from_micros(rng.below(300));
                loop {
                    match p.publish_timeout(v, timeout) {
                        Ok(s) => break seqs.push(s),
                        Err(PublishTimeoutError::Timeout(back)) => v = back,
                        Err(PublishTimeoutError::Halted(_)) => {
                            return Err(halted("publish_timeout", c));
                        }
                    }
                }
            }
            6 => {
                let k = 1 + rng.below(cap.min(count - c));
                let range = p
                    .publish_batch(k as usize, |i, e| *e = ev(c + i as u64))
                    .map_err(|_| halted("publish_batch", c))?;
                assert_eq!(range.end - range.start, k, "publish_batch range");
                seqs.extend(range);
            }
            7 => {
                let k = 1 + rng.below(cap.min(count - c));
                K::stage(&mut p, &mut rng, (c..c + k).map(ev), &mut seqs)
                    .map_err(|call| halted(call, c))?;
            }
            _ => {
                let k = 1 + rng.below(cap.min(count - c));
                let mut f = |i: usize, e: &mut Ev| *e = ev(c + i as u64);
                loop {
                    match p.try_publish_batch(k as usize, f) {
                        Ok(range) => {
                            assert_eq!(range.end - range.start, k, "try_publish_batch range");
                            break seqs.extend(range);
                        }
                        Err(TryPublishError::Full(back)) => {
                            f = back;
                            thread::yield_now();
                        }
                        Err(TryPublishError::Halted(_)) => {
                            return Err(halted("try_publish_batch", c));
                        }
                    }
                }
            }
        }
    }
    Ok(seqs)
}

/// Staging events one at a time (a single producer's `try_stage_with`,
/// `stage_with`, `publish_staged`); many producers, which cannot stage,
/// publish them one by one instead.
pub(crate) trait Staging: ProducerKind + Sized {
    /// Stages `events`, pushing their sequences; may leave some staged for
    /// the next publish (or the handle's drop) to publish.
    fn stage<W: WaitStrategy>(
        p: &mut Producer<Ev, W, Self>,
        rng: &mut common::Rng,
        events: impl Iterator<Item = Ev>,
        seqs: &mut Vec<u64>,
    ) -> Result<(), &'static str>;
}

/// The sole producers stage for real (`stage_sole`).
macro_rules! sole_staging {
    ($($kind:ty),*) => {$(
        impl Staging for $kind {
            fn stage<W: WaitStrategy>(
                p: &mut Producer<Ev, W, $kind>,
                rng: &mut common::Rng,
                events: impl Iterator<Item = Ev>,
                seqs: &mut Vec<u64>,
            ) -> Result<(), &'static str> {
                stage_sole(p, rng, events, seqs)
            }
        }
    )*};
}
sole_staging!(Single, Stamped);

/// A sole producer stages for real, by a random mix of calls.
fn stage_sole<W: WaitStrategy, K: SoleProducer>(
    p: &mut Producer<Ev, W, K>,
    rng: &mut common::Rng,
    events: impl Iterator<Item = Ev>,
    seqs: &mut Vec<u64>,
) -> Result<(), &'static str> {
    for e in events {
        let before = p.staged();
        if rng.below(2) == 0 {
            let s = p.stage_with(|slot| *slot = e).map_err(|_| "stage_with")?;
            seqs.push(s);
        } else {
            let mut f = |slot: &mut Ev| *slot = e;
            loop {
                match p.try_stage_with(f) {
                    Ok(s) => break seqs.push(s),
                    Err(TryPublishError::Full(back)) => {
                        assert_eq!(p.staged(), 0, "a full ring publishes the staged");
                        f = back;
                        thread::yield_now();
                    }
                    Err(TryPublishError::Halted(_)) => return Err("try_stage_with"),
                }
            }
        }
        assert!(p.staged() >= 1 && p.staged() <= before + 1, "staged count");
    }
    if rng.below(2) == 0 {
        let n = p.staged();
        let range = p.publish_staged();
        assert_eq!(range.end - range.start, n, "publish_staged range");
        assert_eq!(p.staged(), 0);
    }
    Ok(())
}

impl Staging for Multi {
    fn stage<W: WaitStrategy>(
        p: &mut Producer<Ev, W, Multi>,
        _: &mut common::Rng,
        events: impl Iterator<Item = Ev>,
        seqs: &mut Vec<u64>,
    ) -> Result<(), &'static str> {
        for e in events {
            seqs.push(p.publish(e).map_err(|_| "publish")?);
        }
        Ok(())
    }
}
