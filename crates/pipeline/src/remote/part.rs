//! [`Parts`]: a pipeline cut where it may cross processes, and what runs
//! one part in a member: its deployment between two cut edges.

use std::any::Any;
use std::marker::PhantomData;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::edge::{Arrival, EdgeStats, StopFlag};
use super::split::{In, Out, Router};
use super::wire::{EncodedState, Msg, WireError, WireFailure};
use crate::branch::shard_of;
use crate::failure::StageState;
use crate::pipeline::Pipeline;
use crate::runtime::checkpointing::shape_of;
use crate::runtime::config::Config;
use crate::runtime::io::Event;
use crate::state::StageCell;

/// Items that cross a cut edge: encoded with serde's postcard format.
pub trait Wire: Serialize + DeserializeOwned + Send + 'static {}

impl<T: Serialize + DeserializeOwned + Send + 'static> Wire for T {}

/// A pipeline from `I` to `O` cut into parts: each part a
/// [`Pipeline`], made afresh by its function wherever it runs (in each
/// member, and again after a restore), the items between parts crossing
/// a TCP connection when the parts run in different processes.
///
/// Every process of a run builds the same `Parts` (the same program,
/// or the same build of it: the coordinator compares a hash of every
/// part's shape and stage names). The meaning is that of the whole
/// pipeline, [`Parts::pipeline`]: its
/// [`run_sequential`](Pipeline::run_sequential).
///
/// ```
/// use statepipe_pipeline::remote::Parts;
/// use statepipe_pipeline::{machine, Pipeline};
///
/// let parts = Parts::new(|| Pipeline::map("parse", |x: u64| x * 2))
///     .then(|| Pipeline::durable_stage("sum", 0u64, machine::step(|s: &mut u64, x: u64| {
///         *s += x;
///         *s
///     })));
/// assert_eq!(parts.len(), 2);
/// let run = parts.pipeline().run_sequential(1..=3);
/// assert_eq!(run.outputs, [2, 6, 12]);
/// ```
pub struct Parts<I, O> {
    pub(crate) stages: Vec<Stage>,
    whole: Arc<dyn Fn() -> Pipeline<I, O> + Send + Sync>,
    _types: PhantomData<fn(I) -> O>,
}

impl<I: Wire, O: Wire> Parts<I, O> {
    /// One part, made by `make`.
    pub fn new(make: impl Fn() -> Pipeline<I, O> + Send + Sync + 'static) -> Self {
        let make = Arc::new(make);
        let whole = Arc::clone(&make);
        Parts {
            stages: vec![Stage {
                copies: vec![Arc::new(PartOf { make })],
                router: None,
            }],
            whole: Arc::new(move || whole()),
            _types: PhantomData,
        }
    }

    /// Another part after the others: a cut edge carries `O` to it.
    pub fn then<P: Wire>(
        self,
        make: impl Fn() -> Pipeline<O, P> + Send + Sync + 'static,
    ) -> Parts<I, P> {
        let make = Arc::new(make);
        let next = Arc::clone(&make);
        let before = self.whole;
        let mut stages = self.stages;
        stages.push(Stage {
            copies: vec![Arc::new(PartOf { make })],
            router: None,
        });
        Parts {
            stages,
            whole: Arc::new(move || before().then(next())),
            _types: PhantomData,
        }
    }

    /// A keyed stage after the others, as
    /// [`Pipeline::shard_by_key`]`(copies, key, make)`, whose copies are
    /// parts of their own: each may run in another process. The part
    /// before sends each item to its key's copy and a route log to the
    /// part after (or the output), which merges the copies' outputs back
    /// into the sequential order.
    ///
    /// # Panics
    /// With no copies, or right after another keyed stage (put a part
    /// between them).
    pub fn then_keyed<K, P>(
        self,
        copies: usize,
        key: impl Fn(&O) -> K + Clone + Send + Sync + 'static,
        make: impl Fn(usize) -> Pipeline<O, P> + Send + Sync + 'static,
    ) -> Parts<I, P>
    where
        K: std::hash::Hash + 'static,
        P: Wire,
    {
        assert!(copies > 0, "a keyed stage needs at least one copy");
        assert!(
            self.stages.last().is_some_and(|s| s.router.is_none()),
            "a keyed stage must follow a part that is not keyed"
        );
        let make = Arc::new(make);
        let (before, m, k) = (self.whole, Arc::clone(&make), key.clone());
        let router: Router = Arc::new(move |x: &dyn Any| {
            let x = x
                .downcast_ref::<O>()
                .expect("a keyed stage routes its own input type");
            shard_of(&key(x), copies)
        });
        let mut stages = self.stages;
        stages.push(Stage {
            copies: (0..copies)
                .map(|c| {
                    let make = Arc::clone(&make);
                    Arc::new(PartOf {
                        make: Arc::new(move || make(c)),
                    }) as Arc<dyn Part>
                })
                .collect(),
            router: Some(router),
        });
        Parts {
            stages,
            whole: Arc::new(move || {
                let (m, k) = (Arc::clone(&m), k.clone());
                before().then(Pipeline::shard_by_key(copies, k, move |c| m(c)))
            }),
            _types: PhantomData,
        }
    }

    /// How many parts (a keyed stage's copies each count).
    pub fn len(&self) -> usize {
        self.stages.iter().map(|s| s.copies.len()).sum()
    }

    /// Whether there are none (never: a `Parts` starts with one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole pipeline, the parts joined in one process: what a
    /// distributed run must compute.
    pub fn pipeline(&self) -> Pipeline<I, O> {
        (self.whole)()
    }

    /// The build hash members must match: every part's shape and stage
    /// names, and the types on its cut edges.
    pub fn build(&self) -> String {
        let mut text = String::new();
        for s in &self.stages {
            for p in &s.copies {
                text.push_str(&p.shape());
                text.push('\n');
            }
        }
        format!("{:08x}", crc32c::crc32c(text.as_bytes()))
    }
}

/// One stage of a distributed pipeline: a part, or a keyed stage's copies.
pub(crate) struct Stage {
    pub(crate) copies: Vec<Arc<dyn Part>>,
    /// How a keyed stage picks the copy of an item.
    pub(crate) router: Option<Router>,
}

impl<I, O> Parts<I, O> {
    /// Every part with its stage's number: unit `u` is the `u`th.
    pub(crate) fn units(&self) -> Vec<(usize, Arc<dyn Part>)> {
        self.stages
            .iter()
            .enumerate()
            .flat_map(|(k, s)| s.copies.iter().map(move |p| (k, Arc::clone(p))))
            .collect()
    }

    /// The first unit of each stage, and one past the last.
    pub(crate) fn starts(&self) -> Vec<usize> {
        let mut v = vec![0];
        for s in &self.stages {
            v.push(v.last().copied().unwrap_or(0) + s.copies.len());
        }
        v
    }
}

/// Sends control messages to the coordinator from a part's threads.
pub(crate) type Reporter = Arc<dyn Fn(Msg) + Send + Sync>;

/// What a part needs to run in one attempt.
pub(crate) struct PartCtx {
    pub(crate) epoch: u64,
    pub(crate) part: u32,
    pub(crate) config: Config,
    /// One, or a keyed stage's copies and then its route log.
    pub(crate) upstreams: Vec<TcpStream>,
    /// One, or the next keyed stage's copies and then its merge.
    pub(crate) downstreams: Vec<TcpStream>,
    /// The next stage's router, when it is keyed.
    pub(crate) router: Option<Router>,
    /// Whether this part is a keyed stage's copy (its outputs go as groups).
    pub(crate) grouped: bool,
    pub(crate) window: u64,
    pub(crate) stop: StopFlag,
    pub(crate) stats_in: Arc<EdgeStats>,
    pub(crate) stats_out: Arc<EdgeStats>,
    pub(crate) report: Reporter,
}

/// One part with its types erased.
pub(crate) trait Part: Send + Sync {
    /// Its units' kinds and stage names, and its edges' types.
    fn shape(&self) -> String;
    /// Deploys it and runs it until its input ends (its final states) or
    /// it is stopped.
    fn run(&self, cx: PartCtx) -> Result<Vec<EncodedState>, String>;
    /// Final states as they crossed the wire, typed again.
    fn decode_states(&self, states: &[EncodedState]) -> Result<Vec<StageState>, String>;
}

struct PartOf<A, B> {
    make: Arc<dyn Fn() -> Pipeline<A, B> + Send + Sync>,
}

fn wire_err(e: WireError) -> String {
    e.to_string()
}

impl<A: Wire, B: Wire> Part for PartOf<A, B> {
    fn shape(&self) -> String {
        let p = (self.make)();
        format!(
            "{} {} -> {}",
            shape_of(&p.units()),
            std::any::type_name::<A>(),
            std::any::type_name::<B>()
        )
    }

    fn run(&self, cx: PartCtx) -> Result<Vec<EncodedState>, String> {
        let d = (self.make)()
            .deploy(&cx.config)
            .map_err(|e| format!("deploying: {e}"))?;
        let (input, output, running) = (d.input, d.output.with_events(), Arc::new(d.running));
        let receiver = {
            let running = Arc::clone(&running);
            let (upstream, window, stats) = (cx.upstreams, cx.window, Arc::clone(&cx.stats_in));
            let (report, epoch, part) = (Arc::clone(&cx.report), cx.epoch, cx.part);
            std::thread::Builder::new()
                .name(format!("part {part} in"))
                .spawn(move || {
                    let r = receive::<A>(
                        upstream, window, stats, input, &running, &report, epoch, part,
                    );
                    if r.is_err() {
                        running.stop();
                    }
                    r
                })
                .map_err(|e| e.to_string())?
        };
        let out = Out::new(
            cx.downstreams,
            cx.router,
            cx.grouped,
            &cx.stop,
            &cx.stats_out,
        );
        let sent = match out {
            Ok(out) => send::<B>(out, &cx.stop, output, &cx.report, cx.epoch, cx.part),
            Err(e) => Err(e.to_string()),
        };
        if sent.is_err() {
            running.stop();
        }
        let received = receiver
            .join()
            .map_err(|_| "the receiving thread panicked".to_string())?;
        let running = Arc::into_inner(running).ok_or("the deployment is still shared")?;
        let finished = running.join().map_err(|e| e.to_string());
        sent?;
        received?;
        let finished = finished?;
        encode_states((self.make)(), finished.states)
    }

    fn decode_states(&self, states: &[EncodedState]) -> Result<Vec<StageState>, String> {
        let mut fresh = (self.make)();
        let mut failed = None;
        fresh.node.visit(&mut |cell: &mut dyn StageCell| {
            if let Some((_, bytes)) = states.iter().find(|(n, _)| n == cell.name()) {
                if let Err(e) = cell.restore(bytes) {
                    failed = Some(format!("stage `{}`: {e}", cell.name()));
                }
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let mut out = Vec::new();
        fresh.states(&mut out);
        out.retain(|s| states.iter().any(|(n, _)| *n == s.name));
        Ok(out)
    }
}

/// Final states, each encoded by its stage's codec (stages without one
/// stay in their process).
fn encode_states<A, B>(
    mut fresh: Pipeline<A, B>,
    states: Vec<StageState>,
) -> Result<Vec<EncodedState>, String> {
    let mut encoders = Vec::new();
    fresh.node.visit(&mut |cell: &mut dyn StageCell| {
        if let Some(s) = cell.snapshot(None) {
            encoders.push((s.stage, s.encode));
        }
    });
    let mut out = Vec::new();
    for s in states {
        if let Some((_, encode)) = encoders.iter().find(|(n, _)| *n == s.name) {
            out.push((
                s.name.clone(),
                encode(&*s.state).map_err(|e| format!("stage `{}`: {e}", s.name))?,
            ));
        }
    }
    Ok(out)
}

/// The receiving thread: the cut edge into the part's input; a barrier
/// becomes the part's checkpoint at the same point (this thread is the
/// one that sends, so the checkpoint is exact).
#[allow(clippy::too_many_arguments)]
fn receive<A: Wire>(
    upstream: Vec<TcpStream>,
    window: u64,
    stats: Arc<EdgeStats>,
    mut input: crate::Input<A>,
    running: &crate::Running,
    report: &Reporter,
    epoch: u64,
    part: u32,
) -> Result<(), String> {
    let edges = In::<A>::new(upstream, window, &stats).map_err(|e| e.to_string())?;
    {
        edges
            .run(|a| match a {
                Arrival::Item(seq, x) => input
                    .send_at(seq, x)
                    .map_err(|_| WireError::Malformed("the part stopped".into())),
                Arrival::Barrier(id) => {
                    let ticket = running
                        .checkpoint()
                        .map_err(|e| WireError::Malformed(format!("checkpoint {id}: {e}")))?;
                    if ticket.id() != id {
                        return Err(WireError::Malformed(format!(
                            "barrier {id} met this part's checkpoint {}: the parts' checkpoints \
                             are numbered differently",
                            ticket.id()
                        )));
                    }
                    let report = Arc::clone(report);
                    std::thread::spawn(move || {
                        // A checkpoint that cannot be written costs only
                        // itself: the part's states go on.
                        report(match ticket.wait() {
                            Ok(_) => Msg::Checkpointed { epoch, part, id },
                            Err(e) => Msg::CheckpointFailed {
                                epoch,
                                part,
                                id,
                                error: e.to_string(),
                            },
                        })
                    });
                    Ok(())
                }
                Arrival::Group(..) | Arrival::Route(_) => Err(WireError::Malformed(
                    "a keyed copy's record on a part's single edge".into(),
                )),
            })
            .map_err(wire_err)?;
    }
    drop(input);
    Ok(())
}

/// The sending thread: the part's outputs and barriers onto the cut edge
/// out, failures to the coordinator.
fn send<B: Wire>(
    mut tx: Out,
    stop: &StopFlag,
    mut output: crate::Output<B>,
    report: &Reporter,
    epoch: u64,
    part: u32,
) -> Result<(), String> {
    let mut failures = Vec::new();
    loop {
        let mut ev = output.recv_event(None);
        if matches!(ev, Ok(None)) {
            // Nothing more now: what is batched goes (latency).
            tx.flush().map_err(wire_err)?;
            report_failures(&output, &mut failures, report, epoch, part);
            if stop.load(Ordering::Relaxed) {
                return Err("stopped".into());
            }
            ev = output.recv_event(Some(Duration::from_millis(20)));
        }
        match ev {
            Ok(Some(Event::Item(seq, x, last))) => tx.item(seq, &x, last).map_err(wire_err)?,
            Ok(Some(Event::Close(seq))) => tx.close::<B>(seq).map_err(wire_err)?,
            Ok(Some(Event::Barrier(id))) => {
                report_failures(&output, &mut failures, report, epoch, part);
                tx.barrier(id).map_err(wire_err)?;
            }
            Ok(None) => {}
            Err(()) => break,
        }
    }
    report_failures(&output, &mut failures, report, epoch, part);
    tx.end().map_err(wire_err)
}

fn report_failures<B: Send + 'static>(
    output: &crate::Output<B>,
    buf: &mut Vec<WireFailure>,
    report: &Reporter,
    epoch: u64,
    part: u32,
) {
    buf.extend(output.failures().map(|f| WireFailure {
        seq: f.seq,
        stage: f.stage.clone(),
        item: format!("{:?}", f.item),
        error: f.error.to_string(),
    }));
    if !buf.is_empty() {
        report(Msg::Failures {
            epoch,
            part,
            failures: std::mem::take(buf),
        });
    }
}
