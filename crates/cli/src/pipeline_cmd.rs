//! `statepipe run` and `statepipe plan`: deploy an example pipeline and
//! watch it; predict a plan's throughput and compare with the measurement.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use statepipe_bench::pipeline::workload::calibrate_iters_for;
use statepipe_pipeline::WORKERS_ENV;
use statepipe_pipeline::{
    fit_fused, machine, simulate, Checkpoint, Config, Finished, Pipeline, Plan, Running,
    StageState, UnitInfo,
};

use crate::demos;

/// `statepipe run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The example pipeline: scaling, skewed, sharded, fanout, trivial3, laundry or counts.
    #[arg(default_value = "sharded")]
    pub pipeline: String,
    /// Items to send.
    #[arg(long, default_value_t = 200_000)]
    pub items: u64,
    /// Workers (default: the CPUs this process may use, or
    /// STATEPIPE_WORKERS; with --coordinator, give it to each member).
    #[arg(long, value_parser = crate::arg_values::at_least_one::<usize>, conflicts_with = "coordinator")]
    pub workers: Option<usize>,
    /// One thread per stage instead of the balanced plan.
    #[arg(long, conflicts_with = "coordinator")]
    pub thread_per_stage: bool,
    /// Do not pin workers to CPUs (with --coordinator, give it to each
    /// member).
    #[arg(long, conflicts_with = "coordinator")]
    pub no_pin: bool,
    /// Redraw a table of per-unit metrics every half second while it runs.
    #[arg(long, conflicts_with = "coordinator")]
    pub watch: bool,
    /// Close the pipeline into a cycle (`deploy_cycle`): the items go round
    /// until an output is divisible by N (about N laps each), over a ring
    /// from the last worker back to the first.
    #[arg(long, value_name = "N", value_parser = crate::arg_values::at_least_one::<u64>, conflicts_with = "coordinator")]
    pub cycle: Option<u64>,
    /// Write the deployed graph (workers, units, rates, ring depths) as dot.
    #[arg(long, value_name = "FILE", conflicts_with = "coordinator")]
    pub dot: Option<PathBuf>,
    /// Also render it as SVG through Graphviz `dot`.
    #[arg(long, value_name = "FILE", conflicts_with = "coordinator")]
    pub svg: Option<PathBuf>,
    /// Write checkpoints under DIR (a folder per checkpoint; a newer one
    /// replaces the older once it is complete).
    #[arg(long, value_name = "DIR")]
    pub checkpoint_dir: Option<PathBuf>,
    /// Take a checkpoint every SECONDS (with --checkpoint-dir; default 1).
    #[arg(long, value_name = "SECONDS", requires = "checkpoint_dir")]
    pub checkpoint_every: Option<f64>,
    /// Resume from the newest complete checkpoint under DIR (or start from
    /// the first input if there is none yet), feeding the inputs from its
    /// position; give the same DIR to --checkpoint-dir to keep checkpointing.
    #[arg(long, value_name = "DIR")]
    pub resume: Option<PathBuf>,
    /// Run the pipeline cut into parts over member processes: listen at
    /// ADDR for `statepipe member --connect ADDR` (STATEPIPE_SECRET set
    /// alike everywhere); with --checkpoint-dir, a lost member is recovered
    /// from the last checkpoint.
    #[arg(long, value_name = "ADDR")]
    pub coordinator: Option<String>,
    /// Members to wait for (with --coordinator; default 1).
    #[arg(long, requires = "coordinator", value_parser = crate::arg_values::at_least_one::<usize>)]
    pub members: Option<usize>,
    /// Never run on fewer members (with --coordinator): below it, the
    /// coordinator waits for members to join, saying so, then goes on
    /// from the last checkpoint. Without it, the run goes on with the
    /// members left.
    #[arg(long, value_name = "N", requires = "coordinator", value_parser = crate::arg_values::at_least_one::<usize>)]
    pub min_members: Option<usize>,
    /// Parts to cut the pipeline into (with --coordinator; default: one
    /// per member waited for, at most one per stage); members that join
    /// later get parts while there are more parts than members.
    #[arg(long, value_name = "N", requires = "coordinator", value_parser = crate::arg_values::at_least_one::<usize>)]
    pub parts: Option<usize>,
    /// Items each cut edge's receiver grants its sender (with
    /// --coordinator; default 65,536).
    #[arg(long, requires = "coordinator", value_parser = crate::arg_values::at_least_one::<u64>)]
    pub credits: Option<u64>,
    /// Serve the coordinator's Prometheus metrics (its edges, checkpoints,
    /// restores) at http://ADDR/metrics (with --coordinator).
    #[arg(long, value_name = "ADDR", requires = "coordinator")]
    pub metrics: Option<String>,
    /// Serve a live dashboard of the run at ADDR (HOST:PORT, loopback:
    /// 127.0.0.1:8787; port 0 takes any free one): the deployed graph
    /// coloured by busy share and ring fill, rates, checkpoints; with
    /// --coordinator, its members, cut edges and restores. Read-only; the
    /// URL is printed at the start. With STATEPIPE_DASHBOARD_TOKEN set,
    /// every request must carry it.
    #[arg(long, value_name = "ADDR")]
    pub dashboard: Option<String>,
}

/// `statepipe plan`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The example pipeline, or `all`.
    #[arg(default_value = "all")]
    pub pipeline: String,
    /// Items per calibration and per measured run (default: enough for a
    /// run of tens of milliseconds: 2,000,000 for trivial3, 30 for laundry,
    /// 100,000 for the others).
    #[arg(long)]
    pub items: Option<u64>,
    /// Workers (default: the CPUs this process may use, or STATEPIPE_WORKERS).
    #[arg(long, value_parser = crate::arg_values::at_least_one::<usize>)]
    pub workers: Option<usize>,
}

fn config(workers: Option<usize>, no_pin: bool) -> Config {
    let mut c = Config::new().pin(!no_pin);
    if let Some(n) = workers {
        c = c.workers(n);
    }
    c
}

fn build(name: &str, iters: u32) -> anyhow::Result<Pipeline<u64, u64>> {
    demos::build(name, iters).ok_or_else(|| demos::unknown(name))
}

/// `statepipe plan`'s items for `name`: a measured run long enough that
/// starting the workers is noise (trivial3 does 50 M items/s).
fn plan_items(name: &str, items: Option<u64>) -> u64 {
    match (items, name) {
        (Some(n), _) => items_for(name, n),
        (None, "trivial3") => 2_000_000,
        (None, _) => items_for(name, 100_000),
    }
}

pub(crate) fn items_for(name: &str, items: u64) -> u64 {
    // The laundry sleeps 60 ms per item: keep it to a few dozen.
    if name == "laundry" {
        items.min(30)
    } else {
        items
    }
}

/// Prints to stderr the CPUs this process may use and the worker count they
/// give (see [`statepipe_sys::cpus::Cpus`]'s `Display`), and what overrides
/// that count.
fn print_cpus(workers: Option<usize>, thread_per_stage: bool) {
    let cpus = statepipe_sys::cpus::usable_cpus();
    let from_env = statepipe_sys::cpus::workers_from_env(WORKERS_ENV);
    let overridden = match (thread_per_stage, workers, from_env) {
        (true, _, _) => "; --thread-per-stage starts one worker per stage instead".to_string(),
        (false, Some(n), _) => format!("; --workers {n} overrides it"),
        (false, None, Ok(Some(n))) => format!("; {WORKERS_ENV}={n} overrides it"),
        (false, None, _) => String::new(),
    };
    eprintln!("cpus: {cpus}{overridden}");
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    print_cpus(args.workers, args.thread_per_stage);
    let iters = calibrate_iters_for(1000);
    let p = build(&args.pipeline, iters)?;
    let mut cfg = config(args.workers, args.no_pin);
    if args.thread_per_stage {
        cfg = cfg.thread_per_stage();
    }
    let items = items_for(&args.pipeline, args.items);
    if let Some(laps) = args.cycle {
        if args.checkpoint_dir.is_some() || args.resume.is_some() {
            anyhow::bail!(
                "a cycle cannot be checkpointed (the items on its way back are not saved): \
                 drop --cycle, or --checkpoint-dir and --resume"
            );
        }
        return run_cycle(p, &cfg, &args, items, laps);
    }
    let cfg = checkpoint_config(cfg, &args)?;
    // The digest is a stage of the pipeline, so checkpoints save it with
    // the other states and a resumed run goes on counting exactly once.
    let d = p.then(digest_stage()).deploy(&cfg)?;
    // Serves until the command returns: after the run, its last state.
    let _board = dashboard(&args, || d.running.observer())?;
    let first = d.running.resumed_from().unwrap_or(0);
    eprintln!(
        "run: `{}`, {items} items, plan: {}",
        args.pipeline,
        d.running.plan()
    );
    if let Some(p) = d.running.resumed_from() {
        println!("resumed at input {p} of {items}");
    }
    let (mut input, mut output, running) = (d.input, d.output, d.running);
    let start = Instant::now();
    let feeder = std::thread::spawn(move || {
        input
            .send_all(first.min(items)..items)
            .map_err(|e| e.to_string())
    });
    let mut received = 0u64;
    let mut last_draw = Instant::now();
    let mut drawn_lines = 0;
    loop {
        match output.try_recv() {
            Some(_) => received += 1,
            None if output.is_finished() => break,
            None => std::thread::sleep(Duration::from_micros(200)),
        }
        if args.watch && last_draw.elapsed() >= Duration::from_millis(500) {
            drawn_lines = redraw(&running.metrics().to_string(), drawn_lines);
            last_draw = Instant::now();
        }
    }
    let wall = start.elapsed();
    let sent = feeder
        .join()
        .map_err(|_| anyhow::anyhow!("the feeding thread panicked"))?
        .map_err(anyhow::Error::msg)?;
    let last = running.last_checkpoint();
    let (dot, done) = finish(running, args.watch, drawn_lines)?;
    println!(
        "{received} outputs from {sent} inputs in {:.3} s: {:.3} M items/s",
        wall.as_secs_f64(),
        sent as f64 / wall.as_secs_f64() / 1e6
    );
    if let Some(c) = last {
        println!(
            "last checkpoint: {} at input {} ({} bytes, longest stall {:?})",
            c.dir.display(),
            c.position,
            c.bytes,
            c.max_stall
        );
    }
    println!("{}", digest_line(&done.states));
    write_graph(&dot, args.dot.as_deref(), args.svg.as_deref())
}

/// Starts `--dashboard` over the deployment `observer` gives, if asked.
fn dashboard(
    args: &RunArgs,
    observer: impl FnOnce() -> statepipe_pipeline::Observer,
) -> anyhow::Result<Option<statepipe_dashboard::Dashboard>> {
    let Some(addr) = &args.dashboard else {
        return Ok(None);
    };
    let title = format!("statepipe run {}", args.pipeline);
    let source = statepipe_dashboard::PipelineSource::new(observer(), title);
    crate::dashboard_cmd::start(addr, Arc::new(source)).map(Some)
}

/// The checkpoint and restore settings of `statepipe run`.
fn checkpoint_config(mut cfg: Config, args: &RunArgs) -> anyhow::Result<Config> {
    if let Some(dir) = &args.checkpoint_dir {
        cfg = cfg.checkpoint_dir(dir);
        let every = args.checkpoint_every.unwrap_or(1.0);
        if !(every.is_finite() && every > 0.0) {
            anyhow::bail!("--checkpoint-every must be a positive number of seconds, not {every}");
        }
        cfg = cfg.checkpoint_every(Duration::from_secs_f64(every));
    }
    if let Some(dir) = &args.resume {
        match Checkpoint::latest(dir)
            .with_context(|| format!("reading the checkpoints under {}", dir.display()))?
        {
            Some(c) => {
                eprintln!(
                    "resuming from {} (checkpoint {}, input {})",
                    c.dir().display(),
                    c.id(),
                    c.position()
                );
                cfg = cfg.restore(c);
            }
            None => eprintln!(
                "no complete checkpoint under {}: starting from the first input",
                dir.display()
            ),
        }
    }
    Ok(cfg)
}

/// The running digest of a run: outputs counted and hashed in input order.
#[derive(Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct Digest {
    outputs: u64,
    hash: u64,
}

/// FNV-1a over the bytes of `x`, continuing from `h`.
fn fnv(mut h: u64, x: u64) -> u64 {
    for b in x.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// The last stage of every `statepipe run`: folds each output, with the
/// number of the input it came from, into the digest.
pub(crate) fn digest_stage() -> Pipeline<u64, u64> {
    let start = Digest {
        outputs: 0,
        hash: FNV_START,
    };
    Pipeline::durable_stage(
        DIGEST,
        start,
        machine::step(|d: &mut Digest, x: u64| {
            d.outputs += 1;
            d.hash = fnv(d.hash, x);
            x
        }),
    )
}

const DIGEST: &str = "(digest)";

/// `digest: N outputs, H`: H hashes the outputs in input order and every
/// stage's final state, so a killed and resumed run can be compared with
/// an uninterrupted one.
pub(crate) fn digest_line(states: &[StageState]) -> String {
    let mut outputs = 0;
    let mut h = FNV_START;
    for s in states {
        for b in s.name.bytes() {
            h = fnv(h, u64::from(b));
        }
        if let Some(d) = s.get::<Digest>() {
            outputs = d.outputs;
            h = fnv(h, d.hash);
        } else if let Some(v) = s.get::<u64>() {
            h = fnv(h, *v);
        } else if let Some(m) = s.get::<BTreeMap<u64, u64>>() {
            for (k, v) in m {
                h = fnv(fnv(h, *k), *v);
            }
        }
    }
    format!("digest: {outputs} outputs, {h:016x}")
}

/// `statepipe run --cycle N`: the pipeline closed on itself; each output
/// goes round again unless it is divisible by `laps`.
fn run_cycle(
    p: Pipeline<u64, u64>,
    cfg: &Config,
    args: &RunArgs,
    items: u64,
    laps: u64,
) -> anyhow::Result<()> {
    let retired = Arc::new(AtomicU64::new(0));
    let (out, start) = (Arc::clone(&retired), Instant::now());
    let running = p.deploy_cycle(cfg, 0..items, move |_, y: u64| {
        if y % laps == 0 {
            // Relaxed: a progress count, read for display only.
            out.fetch_add(1, Ordering::Relaxed);
            None
        } else {
            Some(y)
        }
    })?;
    let _board = dashboard(args, || running.observer())?;
    eprintln!(
        "run: `{}` as a cycle, {items} items, each round until its value is divisible by \
         {laps}, plan: {}",
        args.pipeline,
        running.plan()
    );
    let mut drawn_lines = 0;
    while !running.is_finished() {
        std::thread::sleep(Duration::from_millis(if args.watch { 500 } else { 5 }));
        if args.watch {
            let table = format!(
                "{}\nretired {} of {items}",
                running.metrics(),
                retired.load(Ordering::Relaxed)
            );
            drawn_lines = redraw(&table, drawn_lines);
        }
    }
    let wall = start.elapsed();
    let (dot, done) = finish(running, args.watch, drawn_lines)?;
    let passes = done.metrics.units.first().map_or(0, |u| u.items_in);
    println!(
        "{} items retired after {passes} passes ({:.2} laps each) in {:.3} s: {:.3} M passes/s",
        retired.load(Ordering::Relaxed),
        passes as f64 / items.max(1) as f64,
        wall.as_secs_f64(),
        passes as f64 / wall.as_secs_f64() / 1e6
    );
    write_graph(&dot, args.dot.as_deref(), args.svg.as_deref())
}

/// Joins a run, shows its final metrics (in place of the live table when
/// `watch` drew one of `drawn_lines`), and returns its graph and result.
fn finish(running: Running, watch: bool, drawn_lines: usize) -> anyhow::Result<(String, Finished)> {
    let dot = running.to_dot();
    let done = running.join()?;
    if watch {
        redraw(&done.metrics.to_string(), drawn_lines);
    } else {
        println!("{}", done.metrics);
    }
    Ok((dot, done))
}

/// Redraws `table` in place of the `previous` lines drawn; returns its lines.
fn redraw(table: &str, previous: usize) -> usize {
    let mut err = std::io::stderr().lock();
    if previous > 0 {
        // Up `previous` lines, then clear to the end of the screen.
        let _ = write!(err, "\x1b[{previous}A\x1b[J");
    }
    let _ = writeln!(err, "{table}");
    table.lines().count()
}

fn write_graph(dot: &str, dot_path: Option<&Path>, svg: Option<&Path>) -> anyhow::Result<()> {
    if let Some(p) = dot_path {
        std::fs::write(p, dot).with_context(|| format!("writing {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = svg {
        render_svg(dot, p)?;
    }
    Ok(())
}

/// Renders `dot` to `path` through Graphviz.
pub fn render_svg(dot: &str, path: &Path) -> anyhow::Result<()> {
    let child = Command::new("dot")
        .arg("-Tsvg")
        .arg("-o")
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
            "--svg needs Graphviz's `dot`, which is not installed \
             (Debian/Ubuntu: `apt-get install graphviz`); \
             --dot FILE writes the graph as text meanwhile"
        ),
        Err(e) => return Err(e).context("starting Graphviz `dot`"),
    };
    child
        .stdin
        .take()
        .context("dot's stdin")?
        .write_all(dot.as_bytes())?;
    let status = child.wait()?;
    anyhow::ensure!(status.success(), "Graphviz `dot` failed ({status})");
    eprintln!("wrote {}", path.display());
    Ok(())
}

pub fn plan(args: PlanArgs) -> anyhow::Result<()> {
    print_cpus(args.workers, false);
    let iters = calibrate_iters_for(1000);
    let names: Vec<&str> = if args.pipeline == "all" {
        demos::NAMES.to_vec()
    } else {
        vec![args.pipeline.as_str()]
    };
    let cfg = config(args.workers, false);
    let workers = cfg.resolved_workers()?;
    println!(
        "plan: {workers} worker(s); each pipeline calibrated (every unit a station of its own, \
         one worker; scaled to the whole pipeline's cost fused on one worker), planned by \
         measured cost, predicted, then run"
    );
    println!(
        "{:<10} {:>8} {:<28} {:>12} {:>12} {:>8}  bottleneck",
        "pipeline", "items", "plan (unit→worker)", "predicted/s", "measured/s", "error"
    );
    for name in names {
        let items = plan_items(name, args.items);
        let mut costs = build(name, iters)?.calibrate(0..items)?;
        fit_fused(&mut costs, build(name, iters)?.fused_cost(0..items)?);
        let mut units: Vec<UnitInfo> = build(name, iters)?.units();
        for (u, c) in units.iter_mut().zip(&costs) {
            u.cost_ns = c.cost_ns * c.visits;
        }
        let plan = Plan::balanced(&units, workers);
        let prediction = simulate(&units, &costs, &plan);
        let start = Instant::now();
        let got = Arc::new(AtomicU64::new(0));
        let mut count = CountOnDrop {
            n: 0,
            out: Arc::clone(&got),
        };
        let running = build(name, iters)?.deploy_with(
            &cfg.clone().plan(plan.workers.clone()),
            0..items,
            move |_, _| count.add(),
        )?;
        running.join()?;
        let wall = start.elapsed().as_secs_f64();
        let got = got.load(Ordering::Relaxed);
        anyhow::ensure!(got == items, "`{name}` lost outputs: {got} of {items}");
        let predicted = items as f64 / prediction.makespan_s(items);
        let measured = items as f64 / wall;
        let placed: Vec<String> = plan.workers.iter().map(|w| w.to_string()).collect();
        println!(
            "{:<10} {:>8} {:<28} {:>12} {:>12} {:>7.1}%  {} (w{})",
            name,
            items,
            placed.join(","),
            per_s(predicted),
            per_s(measured),
            (predicted / measured - 1.0) * 100.0,
            prediction.bottleneck,
            prediction.bottleneck_worker
        );
    }
    println!(
        "error = predicted/measured − 1; inputs are made on the first worker and outputs \
         consumed on the last (deploy_with), as the model assumes"
    );
    Ok(())
}

/// Counts outputs in a plain field and hands the count over when the
/// runtime drops the sink, so the measured run pays no atomic per output
/// (the model has none).
struct CountOnDrop {
    n: u64,
    out: Arc<AtomicU64>,
}

impl CountOnDrop {
    /// A method, so that the closure calling it moves the whole counter in.
    #[inline]
    fn add(&mut self) {
        self.n += 1;
    }
}

impl Drop for CountOnDrop {
    fn drop(&mut self) {
        self.out.store(self.n, Ordering::Relaxed);
    }
}

fn per_s(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.1}")
    }
}
