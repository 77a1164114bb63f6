//! Where work goes when it must start again, and what waits behind a long
//! call, without sockets: a lost worker's long call goes behind the
//! shortest queue, a batch is not queued behind a long call while a thief
//! could take it, and a worker silent for a few heartbeats has its work
//! started again, then is dropped, long before the silence deadline; every step ends with the single-process
//! engine's bits.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{cfg, decoded, model, state, Cluster, SEED};
use crate::engine::Engine;
use crate::evolve::StateId;
use crate::local::Local;
use crate::master::sched::config::{HEARTBEAT, QUIET_BEATS};
use crate::master::sched::{Batch, Io, Placement, Recovery, SchedConfig};
use crate::protocol::Kind;

fn master_copies(placement: Placement, pipeline: usize, steal: bool) -> SchedConfig {
    SchedConfig {
        batch: Batch::Fixed(1),
        pipeline,
        recovery: Recovery::MasterCopy,
        ..cfg(placement, false, steal)
    }
}

/// A cluster of `n` workers holding `states` states, and the
/// single-process engine holding the same.
fn start(
    cfg: SchedConfig,
    n: usize,
    states: u64,
) -> (Cluster, Local<super::Branchy>, Vec<StateId>) {
    let mut c = Cluster::new(n, cfg);
    let mut local = Local::new(model(), SEED);
    let ids = c.reset(states);
    local
        .reset_states((0..states).map(state).collect())
        .unwrap();
    (c, local, ids)
}

/// Runs the step on `c` to its end (skipping workers not alive) and checks
/// it against `local`.
fn finish(c: &mut Cluster, local: &mut Local<super::Branchy>, ids: &[StateId]) {
    while let Some(w) = (0..c.queues.len()).find(|&w| c.alive[w] && !c.queues[w].is_empty()) {
        c.deliver(w);
    }
    let got = decoded(c.sched.finish_evolve().unwrap());
    let want = local
        .evolve_many(ids.iter().map(|&id| (id, 0)).collect())
        .unwrap();
    assert_eq!(got, want, "other bits than the single-process engine");
}

#[test]
fn a_lost_workers_long_call_starts_again_behind_the_shortest_queue() {
    // Three workers, two states each, one call in flight each: worker 0
    // runs a call of cost 9, worker 1 one of cost 1, worker 2 one of cost
    // 5. Worker 2 is lost: its call of 5 and its pending call of 1 go,
    // longest first, where the least work is ahead (worker 1: 1, then 6,
    // still below worker 0's 9), not one to each in id order.
    let (mut c, mut local, ids) = start(master_copies(Placement::Spread, 1, false), 3, 6);
    let at = c.held();
    let on = |w: usize| {
        let mut v: Vec<StateId> = ids.iter().copied().filter(|id| at[id] == w).collect();
        v.sort_unstable();
        v
    };
    let (on0, on2) = (on(0), on(2));
    assert_eq!((on0.len(), on(1).len(), on2.len()), (2, 2, 2));
    let cost = |id: &StateId| match () {
        () if *id == on0[0] => 9.0,
        () if *id == on2[0] => 5.0,
        () => 1.0,
    };
    let inputs: Vec<_> = ids.iter().map(|id| (*id, 0u32, cost(id))).collect();
    c.begin(&inputs);
    c.alive[2] = false;
    c.queues[2].clear();
    c.sched.on_disconnect(2, "test: killed");
    c.collect();
    let held = c.held();
    assert_eq!(
        held[&on2[0]], 1,
        "the long call goes behind the shortest queue"
    );
    assert_eq!(held[&on2[1]], 1);
    finish(&mut c, &mut local, &ids);
}

#[test]
fn no_batch_waits_behind_a_long_call_while_a_thief_could_take_it() {
    // Everything on worker 0: one call far above the step's mean cost and
    // four cheap ones. With two batches per worker in flight it would get
    // the long call and a cheap one queued behind it; it gets the long
    // call alone, and worker 1, idle, steals cheap ones from its pending.
    let (mut c, mut local, ids) = start(master_copies(Placement::First, 2, true), 2, 5);
    // As if measured: 1 µs per unit of cost.
    c.sched.ns_per_cost = Some(1e3);
    let costs = [1e6, 1.0, 1.0, 1.0, 1.0];
    let cost: HashMap<StateId, f64> = ids.iter().copied().zip(costs).collect();
    let inputs: Vec<_> = ids
        .iter()
        .zip(costs)
        .map(|(&id, k)| (id, 0u32, k))
        .collect();
    c.begin(&inputs);
    let sent: Vec<(Kind, Vec<f64>)> = c.log[0]
        .iter()
        .map(|(k, ids)| (*k, ids.iter().map(|i| cost[i]).collect()))
        .collect();
    assert_eq!(
        sent,
        vec![(Kind::Evolve, vec![1e6]), (Kind::Remove, vec![1.0, 1.0])],
        "the long call alone, and a steal of the cheap ones"
    );
    finish(&mut c, &mut local, &ids);
    assert_eq!(c.evolved_by(0)[0], ids[0]);
    assert!(c.evolved_by(1).len() >= 2, "the thief ran the stolen calls");
}

#[test]
fn a_worker_silent_for_a_few_heartbeats_is_a_straggler_then_lost_long_before_the_silence() {
    // Everything on worker 0, which heartbeats; worker 1 idle (no
    // stealing). Worker 0 falls silent for longer than `quiet`: its call
    // and its pending states start again on worker 1; silent for twice
    // that (far less than the silence that loses a worker that owes
    // nothing), it is dropped, and the step ends with the same bits.
    let (mut c, mut local, ids) = start(master_copies(Placement::First, 1, false), 2, 4);
    let inputs: Vec<_> = ids.iter().map(|&id| (id, 0u32, 1.0)).collect();
    c.begin(&inputs);
    c.sched.on_frame(0, Kind::Heartbeat, &[]).unwrap();
    let quiet = HEARTBEAT * QUIET_BEATS;
    assert!(quiet < crate::config::SILENCE);
    // Within `quiet`: nothing happens, and the driver is told when to look.
    let early = Instant::now() + quiet / 2;
    let (late, next) = c.sched.overdue(early, &|_| Io::default());
    assert!(late.is_empty() && c.sched.slots[0].fenced == 0);
    assert!(next.is_some_and(|t| t <= Instant::now() + quiet + Duration::from_millis(1)));
    // Past it: taken for stopped, not lost; its work starts on worker 1.
    let (late, _) = c
        .sched
        .overdue(Instant::now() + quiet * 3 / 2, &|_| Io::default());
    assert!(late.is_empty(), "silent for `quiet` is not lost: {late:?}");
    c.collect();
    assert!(c.sched.slots[0].fenced > 0, "worker 0 is a straggler");
    let mut again: Vec<StateId> = c.log[1]
        .iter()
        .filter(|(k, _)| *k == Kind::Add)
        .flat_map(|(_, ids)| ids.iter().copied())
        .collect();
    again.sort_unstable();
    let mut all = ids.clone();
    all.sort_unstable();
    assert_eq!(again, all, "all its states start again on worker 1");
    // Twice as long: dropped, long before the silence that loses a worker.
    let (late, _) = c
        .sched
        .overdue(Instant::now() + quiet * 3, &|_| Io::default());
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0].0, 0);
    assert!(late[0].1.contains("taken for stopped"), "{}", late[0].1);
    c.alive[0] = false;
    c.queues[0].clear();
    c.sched.on_disconnect(0, &late[0].1);
    c.collect();
    finish(&mut c, &mut local, &ids);
}

#[test]
fn after_a_long_pause_a_silence_must_be_twice_as_long_to_drop_a_worker() {
    // As above, but a worker lately paused for four times `quiet`: a
    // silence of three `quiet`s still starts worker 0's work again on
    // worker 1 (that costs idle time only), but drops it only past twice
    // that pause; the step ends with the same bits.
    let (mut c, mut local, ids) = start(master_copies(Placement::First, 1, false), 2, 4);
    let inputs: Vec<_> = ids.iter().map(|&id| (id, 0u32, 1.0)).collect();
    c.begin(&inputs);
    c.sched.on_frame(0, Kind::Heartbeat, &[]).unwrap();
    // The gap before each frame of a heartbeating worker is noted.
    std::thread::sleep(Duration::from_millis(2));
    c.sched.on_frame(0, Kind::Heartbeat, &[]).unwrap();
    assert!(c.sched.hiccups.longest(Instant::now()) >= Duration::from_millis(2));
    let quiet = HEARTBEAT * QUIET_BEATS;
    let pause = quiet * 4;
    c.sched.hiccups.note(pause, Instant::now());
    let bound = c.sched.hiccups.stop_bound(quiet * 2, Instant::now());
    assert!(bound >= pause * 2);
    assert!(bound * 2 < crate::config::SILENCE, "{bound:?}");
    let (late, _) = c
        .sched
        .overdue(Instant::now() + quiet * 3, &|_| Io::default());
    assert!(late.is_empty(), "within twice the pause: {late:?}");
    c.collect();
    assert!(c.sched.slots[0].fenced > 0, "worker 0 is a straggler");
    let (late, _) = c
        .sched
        .overdue(Instant::now() + bound + quiet, &|_| Io::default());
    assert_eq!(late.len(), 1, "{late:?}");
    let why = format!("taken for stopped after {:.3} s", bound.as_secs_f64());
    assert!(late[0].1.contains(&why), "{}", late[0].1);
    c.alive[0] = false;
    c.queues[0].clear();
    c.sched.on_disconnect(0, &late[0].1);
    c.collect();
    finish(&mut c, &mut local, &ids);
}
