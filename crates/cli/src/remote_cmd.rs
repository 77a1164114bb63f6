//! `statepipe run EXAMPLE --coordinator ADDR --members N` and `statepipe
//! member --connect ADDR`: an example pipeline cut into parts over
//! processes (`statepipe_pipeline::remote`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use statepipe_bench::pipeline::workload::calibrate_iters_for;
use statepipe_pipeline::remote::{
    Coordinator, Member, Parts, RemoteConfig, RemoteError, RestoreKind,
};
use statepipe_pipeline::Config;
use statepipe_sys::auth::Secret;

use crate::demos;
use crate::pipeline_cmd::{digest_line, digest_stage, RunArgs};

/// `statepipe member`.
#[derive(Args, Debug)]
pub struct MemberArgs {
    /// The coordinator's address (`statepipe run EXAMPLE --coordinator ADDR`).
    #[arg(long, value_name = "ADDR")]
    pub connect: String,
    /// Where this member's parts take their incoming edges (any port by
    /// default, on the interface that reaches the coordinator).
    #[arg(long, value_name = "HOST:PORT", default_value = "0.0.0.0:0")]
    pub listen: String,
    /// Workers, shared by this member's parts (default: the CPUs this
    /// process may use).
    #[arg(long, value_parser = crate::arg_values::at_least_one::<usize>)]
    pub workers: Option<usize>,
    /// Do not pin workers to CPUs.
    #[arg(long)]
    pub no_pin: bool,
    /// Serve Prometheus metrics (cut edges' items, bytes, credits) at
    /// http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Serve `GET /health` on HOST:PORT for a readiness probe: 200 once
    /// the coordinator has accepted this member, 503 before, from its
    /// SIGTERM on and after its run.
    #[arg(long, value_name = "HOST:PORT")]
    pub health: Option<String>,
    /// For a launcher that starts the member again whatever its exit (a
    /// Kubernetes Deployment): a member whose run ended, or whose
    /// coordinator was lost, writes FILE; started again with FILE there
    /// and no coordinator to join within 10 s, it exits 0, as the run it
    /// took part in is over (the coordinator's own exit says how it
    /// ended). A coordinator that is up (restarted with --resume, or a new
    /// run) it joins as usual. FILE must outlive the process (a pod's
    /// `emptyDir`).
    #[arg(long, value_name = "FILE")]
    pub served_file: Option<PathBuf>,
}

/// The app string a coordinator sends: what the members build.
pub(crate) fn app(pipeline: &str, iters: u32, parts: usize) -> String {
    format!("{pipeline} {iters} {parts}")
}

/// The example `name` cut into `parts` parts (contiguous stages; the
/// digest is the last part's last stage).
pub(crate) fn parts_of(name: &str, iters: u32, parts: usize) -> anyhow::Result<Parts<u64, u64>> {
    let stages = demos::stages(name, iters).ok_or_else(|| demos::unknown(name))?;
    let mut groups: Vec<Vec<demos::Maker>> = Vec::new();
    let n = stages.len();
    let parts = parts.clamp(1, n);
    for (k, s) in stages.into_iter().enumerate() {
        if k * parts / n == groups.len() {
            groups.push(Vec::new());
        }
        groups.last_mut().expect("one group at least").push(s);
    }
    let last = groups.len() - 1;
    let mut out: Option<Parts<u64, u64>> = None;
    for (g, group) in groups.into_iter().enumerate() {
        let group = Arc::new(group);
        let make = move || {
            let mut p = group[0]();
            for s in &group[1..] {
                p = p.then(s());
            }
            if g == last {
                p = p.then(digest_stage());
            }
            p
        };
        out = Some(match out {
            None => Parts::new(make),
            Some(o) => o.then(make),
        });
    }
    out.context("an example has one stage at least")
}

fn secret() -> anyhow::Result<Secret> {
    Secret::from_env().map_err(|e| anyhow::anyhow!("{e}; the members need the same value"))
}

/// `statepipe run EXAMPLE --coordinator ADDR --members N`.
pub fn coordinate(args: &RunArgs, addr: &str) -> anyhow::Result<()> {
    if let (Some(dir), Some(from)) = (&args.checkpoint_dir, &args.resume) {
        if dir != from {
            anyhow::bail!(
                "--checkpoint-dir {} and --resume {} differ: a distributed run resumes \
                 from and goes on checkpointing in one folder; name the same one",
                dir.display(),
                from.display()
            );
        }
    }
    let members = args.members.unwrap_or(1).max(args.min_members.unwrap_or(1));
    let iters = calibrate_iters_for(1000);
    let stages =
        demos::stages(&args.pipeline, iters).ok_or_else(|| demos::unknown(&args.pipeline))?;
    let n_parts = args.parts.unwrap_or(members).clamp(1, stages.len());
    let parts = parts_of(&args.pipeline, iters, n_parts)?;
    let co = Coordinator::bind(addr, secret()?, app(&args.pipeline, iters, n_parts))
        .context("starting the coordinator")?;
    eprintln!(
        "coordinator: `{}` in {} parts, {} items; waiting for {members} member(s): \
         statepipe member --connect {}",
        args.pipeline,
        parts.len(),
        crate::pipeline_cmd::items_for(&args.pipeline, args.items),
        co.local_addr()
    );
    if let Some(addr) = &args.metrics {
        crate::remote_metrics::serve(addr, co.metrics())?;
    }
    // Serves until the command returns: after the run, its last state.
    let _board = match &args.dashboard {
        Some(addr) => {
            let title = format!(
                "statepipe run {} --coordinator {} ({} parts)",
                args.pipeline,
                co.local_addr(),
                parts.len()
            );
            let source = statepipe_dashboard::PipelineSource::remote(co.metrics(), title);
            Some(crate::dashboard_cmd::start(addr, Arc::new(source))?)
        }
        None => None,
    };
    let mut config = RemoteConfig::new()
        .members(members)
        .on_note(|n| eprintln!("coordinator: {n}"));
    if let Some(n) = args.min_members {
        config = config.min_members(n);
    }
    if let Some(c) = args.credits {
        config = config.credits(c);
    }
    if let Some(dir) = args.checkpoint_dir.as_ref().or(args.resume.as_ref()) {
        config = config.checkpoint_dir(dir).resume(args.resume.is_some());
        if let Some(s) = args.checkpoint_every {
            config = config.checkpoint_every(Duration::from_secs_f64(s));
        }
    }
    let items = crate::pipeline_cmd::items_for(&args.pipeline, args.items);
    let received = Arc::new(AtomicU64::new(0));
    let r = Arc::clone(&received);
    let start = Instant::now();
    let run = co.run(
        &parts,
        &config,
        move |from| from.min(items)..items,
        move |_, _| {
            r.fetch_add(1, Ordering::Relaxed);
        },
    )?;
    let wall = start.elapsed();
    if let Some(id) = run.resumed_from {
        println!("resumed from checkpoint {id}");
    }
    for s in &run.skipped_checkpoints {
        println!(
            "checkpoint {} skipped ({}): {}",
            s.id,
            s.part
                .map_or("its commit".to_string(), |p| format!("part {p}")),
            s.error
        );
    }
    for r in &run.restores {
        let after = match (r.kind, &r.lost) {
            (RestoreKind::Left | RestoreKind::Joined, _) => "rescaled".to_string(),
            (_, Some(m)) => format!("restored after member {m}"),
            (_, None) => "restored after a failure".to_string(),
        };
        println!(
            "{after}: {} (stopped within {:.3} s), from {} at input {}",
            r.why,
            r.detected_after.as_secs_f64(),
            r.from
                .map_or("the start".to_string(), |c| format!("checkpoint {c}")),
            r.position
        );
    }
    println!(
        "{} outputs from {items} inputs over {members} member(s) in {:.3} s: {:.3} M items/s",
        run.outputs,
        wall.as_secs_f64(),
        items as f64 / wall.as_secs_f64() / 1e6
    );
    if let Some((id, position)) = run.last_checkpoint {
        println!("last checkpoint: {id} at input {position}");
    }
    println!("{}", digest_line(&run.states));
    Ok(())
}

/// `statepipe member`.
pub fn member(args: MemberArgs) -> anyhow::Result<()> {
    eprintln!(
        "member: joining the coordinator at {} (retrying while it starts)",
        args.connect
    );
    // Installed before joining: a SIGTERM while it joins asks to leave too.
    let leave = crate::worker_cmd::leave_on_sigterm()?;
    let ready = Arc::new(AtomicBool::new(false));
    if let Some(addr) = &args.health {
        crate::health::serve(addr, Arc::clone(&ready), Arc::clone(&leave))?;
    }
    let record = args.served_file.as_deref();
    let m = match Member::join(&args.connect, secret()?, &args.listen) {
        Ok(m) => m,
        Err(e @ RemoteError::NoCoordinator(_)) if record.is_some_and(|f| f.exists()) => {
            eprintln!(
                "member: {e}; this member took part in a run before ({} exists): that run is \
                 over, nothing left to do",
                record.map_or(String::new(), |f| f.display().to_string())
            );
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let m = m
        .leave_when(Arc::clone(&leave))
        .ready_when_admitted(Arc::clone(&ready));
    let app: Vec<&str> = m.app().split(' ').collect();
    let [name, iters, parts] = app[..] else {
        anyhow::bail!(
            "the coordinator runs `{}`, which this build cannot read",
            m.app()
        );
    };
    let parts = parts_of(name, iters.parse()?, parts.parse()?)?;
    let mut cfg = Config::new().pin(!args.no_pin);
    if let Some(n) = args.workers {
        cfg = cfg.workers(n);
    }
    if let Some(addr) = &args.metrics {
        crate::remote_metrics::serve(addr, m.metrics())?;
    }
    eprintln!(
        "member {}: running `{name}` for {}",
        m.number(),
        args.connect
    );
    let number = m.number();
    {
        let leave = Arc::clone(&leave);
        std::thread::Builder::new()
            .name("sigterm".into())
            .spawn(move || {
                while !leave.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                eprintln!(
                    "member {number}: SIGTERM: asking the coordinator to let it go once its \
                     parts run elsewhere (a second SIGTERM ends it at once, status 143)"
                );
            })?;
    }
    let result = m.run(&parts, &cfg);
    if let (Some(f), Ok(()) | Err(RemoteError::CoordinatorLost(_))) = (record, &result) {
        std::fs::write(f, format!("{}\n", args.connect))
            .with_context(|| format!("member {number}: writing {}", f.display()))?;
    }
    result?;
    if leave.load(Ordering::Relaxed) {
        eprintln!("member {number}: left; its parts run on the other members");
    }
    Ok(())
}
