//! [`Parts`]: a pipeline cut where it may cross processes, and what runs
//! one part in a member: its deployment between two cut edges.

use std::marker::PhantomData;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::edge::{Arrival, EdgeRx, EdgeStats, EdgeTx, StopFlag};
use super::wire::{EncodedState, Msg, WireError, WireFailure};
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
    pub(crate) parts: Vec<Arc<dyn Part>>,
    whole: Arc<dyn Fn() -> Pipeline<I, O> + Send + Sync>,
    _types: PhantomData<fn(I) -> O>,
}

impl<I: Wire, O: Wire> Parts<I, O> {
    /// One part, made by `make`.
    pub fn new(make: impl Fn() -> Pipeline<I, O> + Send + Sync + 'static) -> Self {
        let make = Arc::new(make);
        let whole = Arc::clone(&make);
        Parts {
            parts: vec![Arc::new(PartOf { make })],
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
        let mut parts = self.parts;
        parts.push(Arc::new(PartOf { make }));
        Parts {
            parts,
            whole: Arc::new(move || before().then(next())),
            _types: PhantomData,
        }
    }

    /// How many parts.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether there are none (never: a `Parts` starts with one).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
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
        for p in &self.parts {
            text.push_str(&p.shape());
            text.push('\n');
        }
        format!("{:08x}", crc32c::crc32c(text.as_bytes()))
    }
}

/// Sends control messages to the coordinator from a part's threads.
pub(crate) type Reporter = Arc<dyn Fn(Msg) + Send + Sync>;

/// What a part needs to run in one attempt.
pub(crate) struct PartCtx {
    pub(crate) epoch: u64,
    pub(crate) part: u32,
    pub(crate) config: Config,
    pub(crate) upstream: TcpStream,
    pub(crate) downstream: TcpStream,
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
        let (input, output, running) = (d.input, d.output.with_barriers(), Arc::new(d.running));
        let receiver = {
            let running = Arc::clone(&running);
            let (upstream, window, stats) = (cx.upstream, cx.window, Arc::clone(&cx.stats_in));
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
        let sent = send::<B>(
            cx.downstream,
            &cx.stop,
            cx.stats_out,
            output,
            &cx.report,
            cx.epoch,
            cx.part,
        );
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
    upstream: TcpStream,
    window: u64,
    stats: Arc<EdgeStats>,
    mut input: crate::Input<A>,
    running: &crate::Running,
    report: &Reporter,
    epoch: u64,
    part: u32,
) -> Result<(), String> {
    let mut rx = EdgeRx::new(upstream, window, stats).map_err(|e| e.to_string())?;
    loop {
        let more = rx
            .next::<A>(|a| match a {
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
                        report(match ticket.wait() {
                            Ok(_) => Msg::Checkpointed { epoch, part, id },
                            Err(e) => Msg::Failed {
                                epoch,
                                part,
                                error: format!("checkpoint {id}: {e}"),
                            },
                        })
                    });
                    Ok(())
                }
            })
            .map_err(wire_err)?;
        if !more {
            break;
        }
    }
    // The input closes first, then the connection: the sender's `end`
    // returns once every item it sent was taken.
    drop(input);
    rx.close();
    Ok(())
}

/// The sending thread: the part's outputs and barriers onto the cut edge
/// out, failures to the coordinator.
fn send<B: Wire>(
    downstream: TcpStream,
    stop: &StopFlag,
    stats: Arc<EdgeStats>,
    mut output: crate::Output<B>,
    report: &Reporter,
    epoch: u64,
    part: u32,
) -> Result<(), String> {
    let mut tx = EdgeTx::new(downstream, Arc::clone(stop), stats).map_err(|e| e.to_string())?;
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
            Ok(Some(Event::Item(seq, x))) => tx.send(seq, &x).map_err(wire_err)?,
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
