//! One attempt of a run: every part started on its members, the input fed
//! and the output collected until the run ends, a member is lost or a part
//! fails; then everything of the attempt stopped.

use std::collections::{BTreeSet, HashMap};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::RecvTimeoutError;

use super::super::edge::EdgeTx;
use super::super::ends::{feed, receive};
use super::super::error::RemoteError;
use super::super::join::Ev;
use super::super::member::part_dir;
use super::super::part::{Parts, Wire};
use super::super::routes::{self};
use super::super::run::RestoreKind;
use super::super::wire::{self, Assign, EncodedState, Msg, Target, CONNECT_TIMEOUT};
use super::super::wiring::{parts_on, wiring};
use super::{Cause, Driver, Ends};

impl<I: Wire, O: Wire> Driver<'_, I, O> {
    /// One attempt: start every part, feed, collect; `Ok(Err(..))` if a
    /// member was lost or a part failed (everything of the attempt is
    /// stopped by then).
    #[allow(clippy::type_complexity)]
    pub(super) fn attempt(
        &mut self,
        parts: &Parts<I, O>,
        epoch: u64,
    ) -> Result<Result<HashMap<u32, Vec<EncodedState>>, (Cause, Duration)>, RemoteError> {
        let p = parts.len();
        self.epoch = epoch;
        // Failures of inputs from the position on are reported again.
        let from = self.committed.map_or(0, |c| c.position);
        self.failures.retain(|f| f.seq < from);
        if self.live().is_empty() {
            return Err(RemoteError::NoMembers(
                "no member is left to run the parts (the last one left or was lost): resume \
                 from the checkpoint folder with members, or set a minimum of members to wait \
                 for them instead"
                    .into(),
            ));
        }
        self.routes.forget_before(epoch);
        let place = self.placement(p);
        self.co.metrics.placed(&place);
        self.place = place.clone();
        self.joined = None;
        self.checkpoint_now.store(false, Ordering::Relaxed);
        self.note_placement(epoch, &place);
        let restore = self.committed.map(|c| c.id);
        let position = self.committed.map_or(0, |c| c.position);
        let next_checkpoint = self.next_checkpoint(restore, p);
        let (wiring, sink_inputs) = wiring(parts);
        for (&n, m) in &self.members {
            if !m.alive {
                continue;
            }
            let assigned: Vec<Assign> = (0..p)
                .filter(|&k| place[k] == n)
                .map(|k| Assign {
                    part: k as u32,
                    restore,
                    outputs: wiring[k]
                        .0
                        .iter()
                        .map(|&(part, slot)| Target {
                            addr: if (part as usize) < p {
                                self.members[&place[part as usize]].data.clone()
                            } else {
                                self.sink_addr(n)
                            },
                            part,
                            slot,
                        })
                        .collect(),
                    inputs: wiring[k].1,
                    next_checkpoint,
                })
                .collect();
            m.send(&Msg::Start {
                epoch,
                parts: assigned,
                checkpoints: self.root().map(|r| r.display().to_string()),
                credits: self.config.credits,
            });
        }
        let first = Target {
            addr: self.members[&place[0]].data.clone(),
            part: 0,
            slot: 0,
        };
        let ends = self.start_ends(
            epoch,
            p as u32,
            sink_inputs,
            first,
            next_checkpoint,
            position,
        )?;
        let mut states: HashMap<u32, Vec<EncodedState>> = HashMap::new();
        let mut checkpointed: HashMap<u64, usize> = HashMap::new();
        // Checkpoints a part could not write: never committed.
        let mut skipped: BTreeSet<u64> = BTreeSet::new();
        // Checkpoints every part has, not yet committed, and the last
        // barrier the sink has passed: a checkpoint is committed once
        // both hold, so that every output before it has been delivered
        // (a restore from it replays none of them).
        let mut durable: BTreeSet<u64> = BTreeSet::new();
        let mut passed = 0u64;
        let (mut source_done, mut sink_done) = (false, false);
        // A member left or joined: why, and the checkpoint committed then;
        // the parts move once a later one is committed (at once without
        // checkpoints: from the start, the sink dropping what it has).
        let mut rescale: Option<(RestoreKind, String, Option<u64>)> = None;
        let cause = loop {
            if source_done && sink_done && states.len() == p {
                for t in ends.threads {
                    let _ = t.join();
                }
                return Ok(Ok(states));
            }
            // Once every input is out, the run ends instead: the leaver
            // is let go with the others.
            if let Some((kind, why, base)) = rescale.as_ref().filter(|_| !source_done) {
                if self.root().is_none() || self.committed.map(|c| c.id) > *base {
                    break Cause::Rescale(*kind, why.clone());
                }
            }
            if let Some(n) = self.joined.take() {
                // Only when the new member would get parts; without
                // checkpoints it waits as a spare.
                if rescale.is_none() && self.root().is_some() && self.placement(p) != place {
                    self.config.notes.say(&format!(
                        "{} gets parts at the next checkpoint",
                        self.name(n)
                    ));
                    rescale = Some((
                        RestoreKind::Joined,
                        format!("{} joined", self.name(n)),
                        self.committed.map(|c| c.id),
                    ));
                    self.checkpoint_now.store(true, Ordering::Relaxed);
                }
            }
            // Only with no message waiting: a heartbeat queued while a
            // commit was being written (on a slow shared disk, say) is no
            // silence.
            if self.rx.is_empty() {
                if let Some((n, why)) = self.check_silence() {
                    if place.contains(&n) {
                        break Cause::Lost(n, why, parts_on(&place, n));
                    }
                }
            }
            let ev = match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => unreachable!("the driver holds a sender"),
            };
            match self.on_event(ev) {
                Some(Ev::Lost(n, why)) if place.contains(&n) => {
                    break Cause::Lost(n, why, parts_on(&place, n));
                }
                Some(Ev::Msg(n, Msg::Leave)) => {
                    if !matches!(rescale, Some((RestoreKind::Left, ..))) {
                        rescale = Some((
                            RestoreKind::Left,
                            format!("{} asked to leave", self.name(n)),
                            self.committed.map(|c| c.id),
                        ));
                    }
                    // Relaxed: the input's edge only needs to see it soon.
                    self.checkpoint_now.store(true, Ordering::Relaxed);
                }
                Some(Ev::Msg(_, Msg::Checkpointed { epoch: e, id, .. }))
                    if e == epoch && !skipped.contains(&id) =>
                {
                    let c = checkpointed.entry(id).or_insert(0);
                    *c += 1;
                    if *c == p {
                        durable.insert(id);
                        self.commit_passed(&mut durable, passed, p)?;
                    }
                }
                Some(Ev::Msg(
                    _,
                    Msg::CheckpointFailed {
                        epoch: e,
                        part,
                        id,
                        error,
                    },
                )) if e == epoch => {
                    // Only this checkpoint is lost: the parts go on from
                    // their states, and the last committed one stays the
                    // one a restore starts from.
                    checkpointed.remove(&id);
                    if skipped.insert(id) {
                        self.skip(id, Some(part), error);
                    }
                }
                Some(Ev::Seen(e, id)) if e == epoch => {
                    passed = passed.max(id);
                    self.commit_passed(&mut durable, passed, p)?;
                }
                Some(Ev::Msg(
                    _,
                    Msg::Done {
                        epoch: e,
                        part,
                        states: s,
                    },
                )) if e == epoch => {
                    states.insert(part, s);
                }
                Some(Ev::Msg(
                    n,
                    Msg::Failed {
                        epoch: e,
                        part,
                        error,
                    },
                )) if e == epoch => {
                    break Cause::Failed(n, part, error);
                }
                Some(Ev::Source(e, r)) if e == epoch => match r {
                    Ok(()) => source_done = true,
                    Err(err) => {
                        break Cause::Failed(u32::MAX, 0, format!("the input's edge: {err}"))
                    }
                },
                Some(Ev::Sink(e, r)) if e == epoch => match r {
                    Ok(()) => sink_done = true,
                    Err(err) => {
                        break Cause::Failed(
                            u32::MAX,
                            p as u32,
                            format!("the output's edge: {err}"),
                        )
                    }
                },
                _ => {}
            }
        };
        let detected = Instant::now();
        let cause = self.stop_attempt(epoch, &place, ends, cause);
        Ok(Err((cause, detected.elapsed())))
    }

    /// Stops every part of the attempt and the coordinator's ends; a loss
    /// found meanwhile is the cause (a neighbour's broken edge is only its
    /// symptom).
    pub(super) fn stop_attempt(
        &mut self,
        epoch: u64,
        place: &[u32],
        ends: Ends,
        mut cause: Cause,
    ) -> Cause {
        ends.stop.store(true, Ordering::Relaxed);
        for s in ends
            .streams
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        let mut waiting: Vec<u32> = self
            .alive()
            .into_iter()
            .filter(|n| place.contains(n))
            .collect();
        for n in &waiting {
            self.members[n].send(&Msg::Abort { epoch });
        }
        let deadline = Instant::now() + self.config.silence * 2;
        while !waiting.is_empty() && Instant::now() < deadline {
            let Ok(ev) = self.rx.recv_timeout(Duration::from_millis(20)) else {
                continue;
            };
            match self.on_event(ev) {
                Some(Ev::Msg(n, Msg::Aborted { epoch: e })) if e == epoch => {
                    waiting.retain(|&w| w != n)
                }
                Some(Ev::Lost(n, why)) => {
                    waiting.retain(|&w| w != n);
                    if !matches!(cause, Cause::Lost(..)) {
                        cause = Cause::Lost(n, why, parts_on(place, n));
                    }
                }
                _ => {}
            }
        }
        for n in waiting {
            if let Some(k) = self.members.get_mut(&n) {
                k.drop_connection();
            }
            self.co.metrics.member_gone(n);
            if !matches!(cause, Cause::Lost(..)) {
                cause = Cause::Lost(
                    n,
                    "it did not stop its parts when asked".into(),
                    parts_on(place, n),
                );
            }
        }
        for t in ends.threads {
            let _ = t.join();
        }
        cause
    }

    /// The number of the next attempt's first barrier: past the one it
    /// restores, every barrier sent so far, and every checkpoint on disk
    /// (a coordinator that resumes does not know what its predecessor
    /// sent): a lost member may still be writing one of those.
    fn next_checkpoint(&self, restore: Option<u64>, parts: usize) -> u64 {
        let on_disk = self.root().map_or(0, |root| {
            (0..parts as u32)
                .filter_map(|k| crate::checkpoint::list(&part_dir(root, k)).ok())
                .flatten()
                .map(|(id, _)| id)
                .max()
                .unwrap_or(0)
        });
        restore
            .unwrap_or(0)
            .max(self.issued.load(Ordering::Relaxed))
            .max(on_disk)
            + 1
    }

    /// Commits the newest of the `durable` checkpoints whose barrier the
    /// sink has `passed`; those older than it are passed over.
    fn commit_passed(
        &mut self,
        durable: &mut BTreeSet<u64>,
        passed: u64,
        parts: usize,
    ) -> Result<(), RemoteError> {
        let Some(&id) = durable.range(..=passed).next_back() else {
            return Ok(());
        };
        *durable = durable.split_off(&(id + 1));
        self.positions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&k, _| k >= id);
        self.commit(id, parts)
    }

    /// Tells which member runs which parts.
    fn note_placement(&self, epoch: u64, place: &[u32]) {
        let mut on: Vec<String> = Vec::new();
        for n in self.live() {
            let mine: Vec<String> = (0..place.len())
                .filter(|&k| place[k] == n)
                .map(|k| k.to_string())
                .collect();
            if !mine.is_empty() {
                on.push(format!("{} runs part(s) {}", self.name(n), mine.join(", ")));
            }
        }
        let from = self
            .committed
            .map_or("the start".to_string(), |c| format!("checkpoint {}", c.id));
        self.config
            .notes
            .say(&format!("attempt {epoch} from {from}: {}", on.join("; ")));
    }

    fn sink_addr(&self, last: u32) -> String {
        let port = self.co.data.local_addr().map_or(0, |a| a.port());
        // The address the last part's member reached the coordinator at.
        let ip = self.members[&last]
            .writer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .local_addr()
            .map(|a| a.ip());
        match ip {
            Ok(ip) => SocketAddr::new(ip, port).to_string(),
            Err(_) => self
                .co
                .data
                .local_addr()
                .map_or(String::new(), |a| a.to_string()),
        }
    }

    /// Starts the input's and the output's edges of attempt `epoch`.
    fn start_ends(
        &self,
        epoch: u64,
        last: u32,
        inputs: u32,
        first: Target,
        next_checkpoint: u64,
        position: u64,
    ) -> Result<Ends, RemoteError> {
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        // The last barrier the output's edge has seen: once the one after
        // the last input is there, every part has drained.
        let seen = Arc::new(AtomicU64::new(0));
        let spawn_err = |e: std::io::Error| RemoteError::Io(e.to_string());
        {
            let (routes, stop, streams, tx) = (
                Arc::clone(&self.routes),
                Arc::clone(&stop),
                Arc::clone(&streams),
                self.tx.clone(),
            );
            let (sink, stats) = (
                Arc::clone(&self.sink),
                self.co.metrics.edge("output".into()),
            );
            let seen = Arc::clone(&seen);
            threads.push(
                std::thread::Builder::new()
                    .name("coordinator-sink".into())
                    .spawn(move || {
                        let passed = |id| {
                            let _ = tx.send(Ev::Seen(epoch, id));
                        };
                        let r = receive(
                            &routes, epoch, last, inputs, &stop, &streams, stats, &sink, &seen,
                            &passed,
                        );
                        let _ = tx.send(Ev::Sink(epoch, r));
                    })
                    .map_err(spawn_err)?,
            );
        }
        {
            let (secret, first, stop, streams, tx) = (
                self.co.secret.clone(),
                first,
                Arc::clone(&stop),
                Arc::clone(&streams),
                self.tx.clone(),
            );
            let (inputs, stats, every) = (
                Arc::clone(&self.inputs),
                self.co.metrics.edge("input".into()),
                self.config.checkpoint_every,
            );
            let every = self.root().and(every);
            let positions = Arc::clone(&self.positions);
            let issued = Arc::clone(&self.issued);
            let now = Arc::clone(&self.checkpoint_now);
            threads.push(
                std::thread::Builder::new()
                    .name("coordinator-source".into())
                    .spawn(move || {
                        let r = (|| {
                            let s =
                                routes::connect(&first, &secret, epoch, CONNECT_TIMEOUT, &stop)?;
                            if let Ok(c) = s.try_clone() {
                                streams.lock().unwrap_or_else(|p| p.into_inner()).push(c);
                            }
                            let tx = EdgeTx::new(s, Arc::clone(&stop), stats, wire::BATCH)
                                .map_err(|e| e.to_string())?;
                            feed(
                                tx,
                                inputs,
                                position,
                                next_checkpoint,
                                every,
                                (&positions, &issued, &now),
                                &stop,
                                &seen,
                            )
                        })();
                        let _ = tx.send(Ev::Source(epoch, r));
                    })
                    .map_err(spawn_err)?,
            );
        }
        Ok(Ends {
            stop,
            streams,
            threads,
        })
    }
}
