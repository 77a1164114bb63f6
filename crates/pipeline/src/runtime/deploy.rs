//! Starting a deployment, and the handles a running one is driven by.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use statepipe_ring::wait::Adaptive;

use super::barrier::Coordinator;
use super::checkpointing::{self, Checkpointing, Extra};
use super::compile::{Compile, Open};
use super::config::{Config, Layout};
use super::edge::{self, edge, RingSource, UnitStates};
use super::error::DeployError;
use super::graph::INPUT;
use super::inject::Injector;
use super::io::{self, Input, Output};
use super::metrics::{self, Metrics, Observer, Watch};
use super::plan::Plan;
use super::station;
use super::worker::{self, Control};
use crate::failure::{Failure, StageState};
use crate::pipeline::Pipeline;
use crate::sequential::Run;
use crate::unit::UnitInfo;

/// The user's threads at the ends of a [`Pipeline::deploy`]ment, for
/// [`Spin::Auto`]: one feeding the input, one reading the output.
const USER_THREADS_AT_ENDS: usize = 2;

/// A running pipeline: feed [`input`](Self::input), read
/// [`output`](Self::output), then [`join`](crate::Running::join).
pub struct Deployment<I, O> {
    /// Where items go in.
    pub input: Input<I>,
    /// Where outputs and failures come out.
    pub output: Output<O>,
    /// The workers.
    pub running: Running,
}

/// The workers of a deployment, its metrics and its plan.
pub struct Running {
    threads: Vec<std::thread::JoinHandle<UnitStates>>,
    control: Arc<Control>,
    metrics: Arc<metrics::Registry>,
    /// What observers read; told the last counters when the workers end.
    watch: Arc<Watch>,
    plan: Plan,
    /// Where failures go when no [`Output`] takes them (`deploy_with`).
    pub(crate) failures: Option<crossbeam_channel::Receiver<Failure>>,
    pub(crate) ckpt: Checkpointing,
}

/// What a finished deployment hands back.
#[derive(Debug)]
pub struct Finished {
    /// The final state of every stage, in description order.
    pub states: Vec<StageState>,
    /// The counters at the end.
    pub metrics: Metrics,
    /// The failures, for a pipeline started with
    /// [`deploy_with`](Pipeline::deploy_with) (otherwise they went to its
    /// [`Output`]), in input order.
    pub failures: Vec<Failure>,
}

/// What feeds a deployment, as barriers see it.
pub(crate) enum Feed {
    /// An [`Input`]: barriers go in after the inputs it accepted (counted here).
    Input(Arc<AtomicU64>),
    /// An iterator on the first worker: barriers go in after what it read.
    Iter,
    /// A cycle's seeds and its way back: no barriers.
    Cycle,
    /// A cycle whose source saves what waits to go round (a state of this
    /// type, under [`CYCLE_STATE`](super::barrier::CYCLE_STATE)).
    DurableCycle(&'static str),
}

impl<I: Send + 'static, O: Send + 'static> Pipeline<I, O> {
    /// The units a plan places, in description order.
    pub fn units(&self) -> Vec<UnitInfo> {
        let mut out = Vec::new();
        self.node.units(&mut out);
        out
    }

    /// Starts the pipeline on workers, as `config` says.
    ///
    /// # Errors
    /// [`DeployError::Config`] for an unusable configuration,
    /// [`DeployError::Spawn`] if a worker thread cannot start.
    pub fn deploy(self, config: &Config) -> Result<Deployment<I, O>, DeployError> {
        let input = edge::<I, Adaptive>(config.capacity, Adaptive::default());
        let output = edge::<O, Adaptive>(config.capacity, Adaptive::default());
        let (in_producer, in_poller, in_monitor) = (input.producer, input.poller, input.monitor);
        let out_producer = output.producer;
        let mut first = 0;
        let mut last = 0;
        let accepted = Arc::new(AtomicU64::new(0));
        let (running, failures) = self.launch(
            config,
            USER_THREADS_AT_ENDS,
            vec![input.handle, output.handle],
            Feed::Input(Arc::clone(&accepted)),
            |cx, w| {
                first = w;
                let user = edge::Doorbell::new();
                let source = RingSource::new(in_poller, in_monitor, user);
                let _ = cx.co.first.set(Arc::clone(&cx.bells[w]));
                let source = Injector {
                    inner: Box::new(source),
                    co: Arc::clone(&cx.co),
                    next_seq: cx.resume,
                };
                Open::at(w, vec![INPUT], Box::new(source))
            },
            |cx, open| {
                last = open.worker;
                cx.output(open, out_producer);
            },
        )?;
        Ok(Deployment {
            input: Input::new(
                in_producer,
                Arc::clone(&running.control.bells[first]),
                accepted,
            ),
            output: Output::new(
                output.poller,
                Arc::clone(&running.control.bells[last]),
                failures,
            ),
            running,
        })
    }

    /// Starts the pipeline with its input made by `source` on the first
    /// worker and each output handed to `sink(seq, output)` on the last:
    /// no hand-off at either end. [`Running::join`] returns the failures.
    ///
    /// # Examples
    ///
    /// ```
    /// use statepipe_pipeline::{Config, Pipeline};
    ///
    /// let p = Pipeline::map("square", |x: u64| x * x);
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let running = p
    ///     .deploy_with(&Config::new().workers(1), 0..4u64, move |_seq, y| tx.send(y).unwrap())
    ///     .unwrap();
    /// running.join().unwrap();
    /// assert_eq!(rx.iter().collect::<Vec<_>>(), [0, 1, 4, 9]);
    /// ```
    ///
    /// # Errors
    /// As [`deploy`](Self::deploy).
    pub fn deploy_with<It, F>(
        self,
        config: &Config,
        source: It,
        sink: F,
    ) -> Result<Running, DeployError>
    where
        It: IntoIterator<Item = I>,
        It::IntoIter: Send + 'static,
        F: FnMut(u64, O) + Send + 'static,
    {
        let items = source.into_iter();
        let (mut running, failures) = self.launch(
            config,
            0,
            Vec::new(),
            Feed::Iter,
            |cx, w| {
                let source = io::IterSource {
                    items,
                    next_seq: cx.resume,
                    done: false,
                };
                let _ = cx.co.first.set(Arc::clone(&cx.bells[w]));
                let source = Injector {
                    inner: Box::new(source),
                    co: Arc::clone(&cx.co),
                    next_seq: cx.resume,
                };
                Open::at(w, vec![INPUT], Box::new(source))
            },
            |cx, open| cx.output_fn(open, Box::new(io::FnSink(sink))),
        )?;
        running.failures = Some(failures);
        Ok(running)
    }

    /// Compiles the pipeline between `start` and `end` and starts the
    /// workers.
    pub(crate) fn launch(
        self,
        config: &Config,
        user_threads: usize,
        mut handles: Vec<Box<dyn edge::Halt>>,
        feed: Feed,
        start: impl FnOnce(&mut Compile, usize) -> Open<I>,
        end: impl FnOnce(&mut Compile, Open<O>),
    ) -> Result<(Running, crossbeam_channel::Receiver<Failure>), DeployError> {
        let mut me = self;
        let units = me.units();
        let plan = config.plan_for(&units)?;
        let (accepted, extra) = match feed {
            Feed::Input(a) => (Some(a), Extra::None),
            Feed::Iter => (None, Extra::None),
            Feed::Cycle => (None, Extra::Unsupported),
            Feed::DurableCycle(ty) => (None, Extra::Cell(super::barrier::CYCLE_STATE, ty)),
        };
        let supported = !matches!(extra, Extra::Unsupported);
        let mut prepared = checkpointing::prepare(&mut me.node, config, &units, &plan, &extra)?;
        let restored_extra = prepared.extra.take();
        if let Some(a) = &accepted {
            a.store(prepared.resume, std::sync::atomic::Ordering::Relaxed);
        }
        let co = Arc::new(Coordinator::new(
            prepared.first_id,
            accepted,
            prepared.stages.clone(),
            supported,
        ));
        let ckpt = checkpointing::start(config, &co, prepared)?;
        if config.checkpoint_dir.is_some() {
            checkpointing::warm_spares(&mut me.node, &co);
        }
        let resume = ckpt.resumed.unwrap_or(0);
        let cpus = statepipe_sys::cpus::usable_cpus();
        let spin = config.resolved_spin(plan.worker_count, user_threads, cpus.count);
        let (failure_tx, failure_rx) = crossbeam_channel::unbounded();
        let mut cx = Compile::new(
            plan.workers.clone(),
            units,
            plan.worker_count,
            config.capacity,
            failure_tx,
            Arc::clone(&co),
        );
        cx.resume = resume;
        cx.restored_extra = restored_extra;
        cx.isolate = matches!(config.layout, Layout::Isolated);
        cx.hold = config.output_hold;
        let first = cx.next_worker();
        let open = start(&mut cx, first);
        let last = me.node.deploy(&mut cx, open);
        end(&mut cx, last);
        handles.append(&mut cx.handles);
        let names = cx.units.iter().map(|u| u.name.clone()).collect();
        let control = Arc::new(Control::new(handles, cx.bells.clone(), names));
        let registry = Arc::new(metrics::Registry::new(&mut cx, Instant::now()));
        let watch = Arc::new(Watch::new(
            Arc::clone(&registry),
            Arc::clone(&ckpt.history),
            Arc::clone(&co.upgrades),
        ));
        let mut threads = Vec::new();
        for (w, tasks) in std::mem::take(&mut cx.tasks).into_iter().enumerate() {
            let (bell, ctl) = (Arc::clone(&cx.bells[w]), Arc::clone(&control));
            let pin = config.pin.then(|| cpus.ids[w % cpus.ids.len()]);
            let spawned = std::thread::Builder::new()
                .name(format!("statepipe-worker-{w}"))
                .spawn(move || worker::work(tasks, &bell, &ctl, pin, spin));
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    control.fail(DeployError::Spawn(e.to_string()));
                    for t in threads {
                        let _ = t.join();
                    }
                    return Err(DeployError::Spawn(e.to_string()));
                }
            }
        }
        let mut running = Running {
            threads,
            control,
            metrics: registry,
            watch,
            plan,
            failures: None,
            ckpt,
        };
        running.ckpt.start_periodic(config);
        Ok((running, failure_rx))
    }
}

impl<I: Send + 'static, O: Send + 'static> Deployment<I, O> {
    /// Feeds every input (from a second thread), collects every output and
    /// failure, and joins: the deployed counterpart of
    /// [`Pipeline::run_sequential`].
    ///
    /// # Errors
    /// As [`Running::join`].
    pub fn run<It>(self, inputs: It) -> Result<Run<O>, DeployError>
    where
        It: IntoIterator<Item = I>,
        It::IntoIter: Send,
    {
        let Deployment {
            mut input,
            mut output,
            running,
        } = self;
        let inputs = inputs.into_iter();
        let (mut outputs, mut seqs) = (Vec::new(), Vec::new());
        std::thread::scope(|s| {
            s.spawn(move || {
                // An error means the pipeline stopped: join says why.
                let _ = input.send_all(inputs);
            });
            while let Some((seq, o)) = output.recv() {
                seqs.push(seq);
                outputs.push(o);
            }
        });
        let done = running.join()?;
        // Failures wait in their unbounded channel until now.
        let mut failures: Vec<_> = output.failures().collect();
        failures.sort_by_key(|f| f.seq);
        Ok(Run {
            outputs,
            seqs,
            failures,
            states: done.states,
        })
    }
}

impl Running {
    /// The plan the pipeline runs by.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// A snapshot of every unit's counters, read without stopping or
    /// slowing the workers.
    pub fn metrics(&self) -> Metrics {
        self.metrics.snapshot()
    }

    /// A handle that reads this deployment's counters, checkpoints and
    /// upgrades from any thread, and stays valid after [`join`](Self::join)
    /// (then reporting the counters at the end, and
    /// [`is_finished`](Observer::is_finished)).
    pub fn observer(&self) -> Observer {
        Observer::new(Arc::clone(&self.watch))
    }

    /// The deployed graph as Graphviz `dot`: workers are clusters, units
    /// nodes; edges carry their rate so far and, between workers, the depth
    /// of their ring now.
    pub fn to_dot(&self) -> String {
        self.metrics.to_dot()
    }

    /// Whether every worker has finished.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    /// Stops the pipeline now: items in flight are dropped, blocked senders
    /// get their item back, and `join` reports the stop.
    pub fn stop(&self) {
        self.control.fail(DeployError::Config(
            "the pipeline was stopped by Running::stop".to_string(),
        ));
    }

    /// Waits for every worker: returns once the input is closed and every
    /// item in flight went through every stage (or a stage panicked).
    ///
    /// # Errors
    /// [`DeployError::StagePanicked`] naming the stage.
    pub fn join(mut self) -> Result<Finished, DeployError> {
        let mut states = Vec::new();
        for t in self.threads.drain(..) {
            match t.join() {
                Ok(s) => states.extend(s),
                Err(p) => self.control.fail(DeployError::StagePanicked {
                    stage: "(worker)".into(),
                    message: station::panic_message(&*p),
                }),
            }
        }
        self.ckpt
            .finish("the pipeline ended", self.control.stopped());
        let metrics = self.metrics.snapshot();
        self.watch.finish(metrics.clone());
        if let Some(e) = self.control.take_error() {
            return Err(e);
        }
        states.sort_by_key(|(u, _)| *u);
        let mut failures: Vec<_> = self
            .failures
            .take()
            .map_or(Vec::new(), |r| r.try_iter().collect());
        failures.sort_by_key(|f| f.seq);
        Ok(Finished {
            states: states.into_iter().flat_map(|(_, s)| s).collect(),
            metrics,
            failures,
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            // Dropped without join: stop the workers rather than leak them.
            self.control.fail(DeployError::Config("dropped".into()));
            for t in self.threads.drain(..) {
                let _ = t.join();
            }
        }
        self.ckpt
            .finish("the pipeline was dropped", self.control.stopped());
        self.watch.finish(self.metrics.snapshot());
    }
}
