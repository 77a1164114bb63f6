//! `statepipe bench pf`: the Nile particle filter in process against
//! `particles` (N. Chopin's numpy library, one Python process, warm) and
//! against a floor: the same filter as a hand-written loop with no engine.
//!
//! Every contender runs the same algorithm: a bootstrap filter of the
//! local-level model, systematic resampling at every step, 100 steps.
//! statepipe and the floors split the particles into the command's 20
//! islands (the same per-particle work; `particles` runs one filter).
//! Samples are interleaved: each round runs every contender once, each
//! round starting with the next contender (so that none always follows
//! the Python process), and each is timed warm: statepipe's runs and the
//! floors run twice back to back and the second counts, as `particles`'
//! script runs its filter twice in one process and times the second. The
//! figure is nanoseconds per particle and step of the filter's own time,
//! plus the whole `statepipe pf` command's wall time
//! at 2,000 particles (process start to exit) against `particles`' warm
//! filter time.
//!
//! The engine's runs are also split in two (rows `nile/N evolve` and
//! `nile/N between`): the engine's evolve, timed around each
//! `evolve_batch`, and the rest, the weights, likelihood and resampling
//! between evolves, so that a thread count that does not pay says which
//! part does not scale. With more than one thread, `pool hand-off`
//! measures what rayon's pool (the one the engine and the filter use)
//! takes to start one 20 µs task on each thread and join them, with its
//! threads busy just before and after a millisecond idle. The keyed floor
//! also runs on all threads at once, each on its own share of the
//! particles with nothing shared (`floor-keyed-threads`): its speed-up is
//! what the machine gives this work on that many threads, the ceiling
//! for the engine's.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use rand::{Rng as _, SeedableRng as _};
use rand_distr::StandardNormal;
use statepipe_bench::host;
use statepipe_bench::report::{svg, table, Report, ResultRow};
use statepipe_bench::stats::Summary;
use statepipe_cluster::pf::{self, Bootstrap, PfConfig};
use statepipe_cluster::{
    call_rng, Children, Engine, Error, Evolve, Inputs, Local, Outputs, StateId,
};
use statepipe_models::Nile;

/// Options of `statepipe bench pf`.
#[derive(Args, Debug)]
pub struct PfBenchArgs {
    /// Particle counts.
    #[arg(long, value_delimiter = ',', default_value = "2000,20000,200000")]
    pub particles: Vec<usize>,
    /// Islands (as `statepipe pf`'s default).
    #[arg(long, default_value_t = 20)]
    pub islands: usize,
    /// Rounds of samples (each runs every contender once).
    #[arg(long, default_value_t = 5, value_parser = crate::arg_values::at_least_one::<u16>)]
    pub samples: u16,
    /// Skip `particles` (no Python environment).
    #[arg(long)]
    pub no_peer: bool,
    /// The Python with `particles` installed (default: target/peers-venv,
    /// set up as bench/peers/pf_vs_particles.sh does).
    #[arg(long)]
    pub python: Option<PathBuf>,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write a bar chart of the ratios ours/peer as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

const SEED: u64 = 1;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The venv's Python, set up with `particles` if missing.
fn peer_python(a: &PfBenchArgs) -> anyhow::Result<PathBuf> {
    if let Some(p) = &a.python {
        return Ok(p.clone());
    }
    let venv = root().join("target/peers-venv");
    let py = venv.join("bin/python");
    let ok = py.exists()
        && Command::new(&py)
            .args(["-c", "import particles"])
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("installing particles==0.4 into {}", venv.display());
        let st = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()?;
        anyhow::ensure!(st.success(), "python3 -m venv failed");
        let st = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check"])
            .args(["particles==0.4", "numpy", "scipy"])
            .status()?;
        anyhow::ensure!(
            st.success(),
            "cannot install particles into {}",
            venv.display()
        );
    }
    Ok(py)
}

/// `particles`' warm filter time for `n` particles: a process runs the
/// filter twice and the second run counts. Returns (seconds, loglik).
fn run_particles(py: &Path, n: usize) -> anyhow::Result<(f64, f64)> {
    let out = Command::new(py)
        .current_dir(root())
        .args(["bench/peers/particles_nile.py", "data/nile.csv"])
        .arg(n.to_string())
        .arg("2")
        .output()
        .context("running bench/peers/particles_nile.py")?;
    anyhow::ensure!(
        out.status.success(),
        "particles_nile.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout)?;
    let last = text
        .lines()
        .last()
        .context("no output from particles_nile.py")?;
    let v: serde_json::Value = serde_json::from_str(last)?;
    Ok((
        v["wall_s"].as_f64().context("wall_s")?,
        v["loglik"].as_f64().context("loglik")?,
    ))
}

/// An engine that times its `evolve_batch` calls: what a step spends in
/// the engine's evolve, the rest of the filter's time being the weights,
/// likelihood and resampling between them.
struct Timed<G> {
    inner: G,
    evolve: Duration,
}

impl<E: Evolve, G: Engine<E>> Engine<E> for Timed<G> {
    fn reset_states(&mut self, states: Vec<E::State>) -> Result<Vec<StateId>, Error> {
        self.inner.reset_states(states)
    }

    fn evolve_many(&mut self, inputs: Inputs<E>) -> Result<Outputs<E>, Error> {
        self.inner.evolve_many(inputs)
    }

    fn fetch_states(&mut self, ids: &[StateId]) -> Result<HashMap<StateId, E::State>, Error> {
        self.inner.fetch_states(ids)
    }

    fn drop_states(&mut self, ids: &[StateId]) -> Result<(), Error> {
        self.inner.drop_states(ids)
    }

    fn evolve_batch(
        &mut self,
        parents: &[StateId],
        inputs: &[E::Input],
        out: &mut Children<E>,
    ) -> Result<(), Error>
    where
        E::Input: Clone,
    {
        let t0 = Instant::now();
        let r = self.inner.evolve_batch(parents, inputs, out);
        self.evolve += t0.elapsed();
        r
    }

    fn threads(&self) -> usize {
        self.inner.threads()
    }
}

/// One run of the engine's filter: its wall time and the part of it spent
/// in the engine's evolve, in seconds, and the log-likelihood.
struct EngineRun {
    wall: f64,
    evolve: f64,
    loglik: f64,
}

/// The engine's filter on `threads` threads.
fn run_engine(nile: &Nile, n: usize, islands: usize, threads: usize) -> anyhow::Result<EngineRun> {
    let mut engine = Timed {
        inner: Local::new(Bootstrap(nile.clone()), SEED).with_threads(threads),
        evolve: Duration::ZERO,
    };
    let cfg = PfConfig {
        particles: n,
        islands,
        seed: SEED,
    };
    let t0 = Instant::now();
    let r = pf::run(&mut engine, nile, cfg, |_| {})?;
    Ok(EngineRun {
        wall: t0.elapsed().as_secs_f64(),
        evolve: engine.evolve.as_secs_f64(),
        loglik: r.loglik,
    })
}

/// The busy time of each task of [`fork_join_us`].
const TASK: Duration = Duration::from_micros(20);

/// What rayon's pool takes to hand work out and join it, as the filter's
/// steps use it (twice a step, from a pool thread): the wall time of
/// `threads` tasks of 20 µs of busy work each, one task per thread,
/// started together from a pool thread, each round `gap` after the last
/// (the calling thread busy meanwhile, the others idle: long enough, and
/// the pool puts them to sleep); the median of `rounds`, in µs. 20 µs is
/// the ideal; a pool whose idle threads take long to start leaves more of
/// the tasks to the threads already running, up to `threads` × 20 µs.
fn fork_join_us(threads: usize, gap: Duration, rounds: usize) -> f64 {
    use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};
    let busy = |d: Duration| {
        let start = Instant::now();
        while start.elapsed() < d {
            std::hint::spin_loop();
        }
    };
    let mut times = Vec::with_capacity(rounds);
    rayon::scope(|_| {
        for _ in 0..rounds {
            busy(gap);
            let t0 = Instant::now();
            (0..threads)
                .into_par_iter()
                .with_max_len(1)
                .for_each(|_| busy(TASK));
            times.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    });
    Summary::of(&times).map_or(f64::NAN, |s| s.median)
}

/// The whole `statepipe pf` command (auto engine) at `n` particles: the
/// process's wall time, start to exit.
fn run_command(n: usize) -> anyhow::Result<f64> {
    let exe = std::env::current_exe()?;
    let t0 = Instant::now();
    let st = Command::new(exe)
        .args(["pf", "--quiet", "--particles"])
        .arg(n.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    anyhow::ensure!(st.success(), "statepipe pf failed ({st})");
    Ok(t0.elapsed().as_secs_f64())
}

/// The floor: the same filter written as one loop over vectors, with no
/// engine. `keyed`: each parent's draws from its own counter-based
/// generator (`call_rng`, as the engine's); otherwise one sequential
/// generator (xoshiro256++) for the whole run, the cheapest draws there
/// are. Returns (seconds, loglik).
fn run_floor(nile: &Nile, n: usize, islands: usize, keyed: bool) -> (f64, f64) {
    let t0 = Instant::now();
    let m = n / islands;
    let (sd0, sd) = (nile.p0.sqrt(), nile.var_eta.sqrt());
    let c = (2.0 * std::f64::consts::PI * nile.var_eps).ln();
    let mut x = vec![0.0f64; n];
    let mut xn = vec![0.0f64; n];
    let mut w = vec![0.0f64; n];
    let mut total = vec![0.0f64; islands];
    let mut log_z = vec![0.0f64; islands];
    let mut means = Vec::with_capacity(nile.y.len());
    let mut seq = rand::rngs::SmallRng::seed_from_u64(SEED);
    for (t, &y) in nile.y.iter().enumerate() {
        let (mut num, mut den, mut top) = (0.0, 0.0, f64::NEG_INFINITY);
        let mut parts = Vec::with_capacity(islands);
        for r in 0..islands {
            let lo = r * m;
            // Propagate: the prior, or each parent's systematic share.
            if t == 0 {
                for (i, xi) in xn[lo..lo + m].iter_mut().enumerate() {
                    let z: f64 = if keyed {
                        call_rng(SEED, 0, StateId((lo + i) as u64)).sample(StandardNormal)
                    } else {
                        seq.sample(StandardNormal)
                    };
                    *xi = nile.m0 + sd0 * z;
                }
            } else {
                let u: f64 = call_rng(SEED, t as u64, StateId(r as u64)).random();
                let (mut cum, mut k) = (0.0f64, lo);
                let mf = m as f64;
                for i in lo..lo + m {
                    cum += w[i] / total[r] * mf;
                    let v = cum - u;
                    let f = v.max(0.0) as usize;
                    let below = lo + (f + usize::from((f as f64) < v)).min(m);
                    let below = below.max(k);
                    let mut rng = keyed.then(|| call_rng(SEED, t as u64, StateId(i as u64)));
                    for slot in &mut xn[k..below] {
                        let z: f64 = match &mut rng {
                            Some(g) => g.sample(StandardNormal),
                            None => seq.sample(StandardNormal),
                        };
                        *slot = x[i] + sd * z;
                    }
                    k = below;
                }
                for slot in &mut xn[k..lo + m] {
                    let z: f64 = seq.sample(StandardNormal);
                    *slot = x[lo + m - 1] + sd * z;
                }
            }
            // Weigh.
            let lw = &mut w[lo..lo + m];
            let mut max = f64::NEG_INFINITY;
            for (wi, xi) in lw.iter_mut().zip(&xn[lo..lo + m]) {
                let d = y - xi;
                *wi = -0.5 * (c + d * d / nile.var_eps);
                max = max.max(*wi);
            }
            let mut sum = 0.0;
            let mut s = 0.0;
            for (wi, xi) in lw.iter_mut().zip(&xn[lo..lo + m]) {
                *wi = (*wi - max).exp();
                sum += *wi;
                s += *wi * xi;
            }
            total[r] = sum;
            log_z[r] += max + sum.ln() - (m as f64).ln();
            top = f64::max(top, max);
            parts.push((max, sum, s));
        }
        for (max, sum, s) in parts {
            let scale = (max - top).exp();
            num += scale * s;
            den += scale * sum;
        }
        means.push(num / den);
        std::mem::swap(&mut x, &mut xn);
    }
    let top = log_z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let ll = top + (log_z.iter().map(|l| (l - top).exp()).sum::<f64>() / islands as f64).ln();
    std::hint::black_box(&means);
    (t0.elapsed().as_secs_f64(), ll)
}

/// A row of `case` for `imp`, lower is better, from its samples `v`.
pub(crate) fn row(case: &str, imp: &str, config: &str, unit: &str, v: &[f64]) -> ResultRow {
    let s = Summary::of(v).expect("at least one sample");
    ResultRow {
        case: case.to_string(),
        imp: imp.to_string(),
        config: config.to_string(),
        unit: unit.to_string(),
        higher_is_better: false,
        median: s.median,
        min: s.min,
        max: s.max,
        samples: s.samples,
    }
}

/// The keyed floor on `threads` threads with nothing shared: each thread
/// runs [`run_floor`] on its own `n / threads` particles (in
/// `islands / threads` islands, at least one), all started together.
/// What the machine gives this work on that many threads with no
/// synchronisation at all (frequency, shared caches and memory, sibling
/// hyperthreads): the ceiling for the engine's own speed-up. Returns
/// (seconds, particles run in all).
fn run_floor_threads(nile: &Nile, n: usize, islands: usize, threads: usize) -> (f64, usize) {
    let isl = (islands / threads).max(1);
    let each = (n / threads / isl * isl).max(isl);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| run_floor(nile, each, isl, true));
        }
    });
    (t0.elapsed().as_secs_f64(), each * threads)
}

/// Runs the benchmark and prints its table.
pub fn run(a: &PfBenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let host = host::measure(Duration::from_millis(200));
    println!("{}", host.describe());
    let threads = statepipe_sys::cpus::usable_cpus().count.max(1);
    let nile = Nile::bundled();
    let steps = nile.y.len();
    let py = if a.no_peer {
        None
    } else {
        Some(peer_python(a)?)
    };
    println!(
        "Nile local-level filter, {steps} steps, systematic resampling every step; \
         statepipe and the floors in {} islands; {} rounds, interleaved; \
         all threads = {threads}",
        a.islands, a.samples
    );
    let mut rows = Vec::new();
    let mut checks = Vec::new();
    for &n in &a.particles {
        anyhow::ensure!(n % a.islands == 0, "--islands must divide {n}");
        let ps = (n * steps) as f64 / 1e9; // seconds → ns per particle-step
        let names = [
            "engine1",
            "engineT",
            "floor_keyed",
            "floor_seq",
            "floor_keyed_threads",
            "particles",
        ];
        let mut v: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        let mut lls = Vec::new();
        // The engine's runs (1 thread, all threads) split: the evolve, and
        // the weights, likelihood and resampling between.
        let (mut evolve, mut between) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
        for round in 0..a.samples {
            // Each round in another order, so that no contender always
            // runs right after the Python process (whose exit and cache
            // footprint slowed the next run here by up to a sixth).
            let (mut ll1, mut llt) = (0.0, 0.0);
            let k = if py.is_some() {
                names.len()
            } else {
                names.len() - 1
            };
            let peer = names.len() - 1;
            for i in 0..k {
                match (i + usize::from(round)) % k {
                    // Each of these runs twice back to back and the
                    // second counts, as `particles`' script times its
                    // second run: a run right after another contender's
                    // meets CPUs in that one's state (on the VM, a second
                    // thread after single-threaded runs took 6.0-7.1 ns
                    // against 5.6-6.1 right after a run of its own kind).
                    c @ (0 | 1) => {
                        let t = if c == 0 { 1 } else { threads };
                        run_engine(&nile, n, a.islands, t)?;
                        let r = run_engine(&nile, n, a.islands, t)?;
                        v[c].push(r.wall / ps);
                        evolve[c].push(r.evolve / ps);
                        between[c].push((r.wall - r.evolve) / ps);
                        *(if c == 0 { &mut ll1 } else { &mut llt }) = r.loglik;
                    }
                    c @ (2 | 3) => {
                        let keyed = c == 2;
                        run_floor(&nile, n, a.islands, keyed);
                        v[c].push(run_floor(&nile, n, a.islands, keyed).0 / ps);
                    }
                    4 => {
                        run_floor_threads(&nile, n, a.islands, threads);
                        let (secs, run) = run_floor_threads(&nile, n, a.islands, threads);
                        v[4].push(secs / ((run * steps) as f64 / 1e9));
                    }
                    _ => {
                        let py = py
                            .as_ref()
                            .expect("k counts the peer only when there is one");
                        v[peer].push(run_particles(py, n)?.0 / ps);
                    }
                }
            }
            lls.push((ll1, llt));
            let last = |i: usize| *v[i].last().expect("ran this round");
            let (t1, tt, tk, ts) = (last(0) * ps, last(1) * ps, last(2) * ps, last(3) * ps);
            let split = |k: usize| {
                format!(
                    "{:.1} + {:.1}",
                    evolve[k].last().expect("ran this round"),
                    between[k].last().expect("ran this round")
                )
            };
            eprintln!(
                "  {n} particles, round {}: engine {:.1} / {:.1} ns (1 / {threads} threads; \
                 evolve + between: {} / {}), floor {:.1} keyed / {:.1} sequential, \
                 keyed on {threads} threads {:.1}{}",
                round + 1,
                t1 / ps,
                tt / ps,
                split(0),
                split(1),
                tk / ps,
                ts / ps,
                last(4),
                v[peer]
                    .last()
                    .map_or(String::new(), |p| format!(", particles {p:.1}")),
            );
        }
        let same = lls.iter().all(|(a, b)| a.to_bits() == b.to_bits());
        checks.push(format!(
            "{n}: log-likelihood {:.6} on 1 and {threads} threads, same bits: {same}",
            lls[0].0
        ));
        let case = format!("nile/{n}");
        let unit = "ns/particle-step";
        rows.push(row(&case, "statepipe", "in process, 1 thread", unit, &v[0]));
        rows.push(row(
            &case,
            "statepipe-threads",
            &format!("in process, {threads} threads"),
            unit,
            &v[1],
        ));
        for (k, t) in [(0, 1), (1, threads)] {
            let imp = if k == 0 {
                "statepipe"
            } else {
                "statepipe-threads"
            };
            rows.push(row(
                &format!("{case} evolve"),
                imp,
                &format!("in process, {t} thread(s): the engine's evolve"),
                unit,
                &evolve[k],
            ));
            rows.push(row(
                &format!("{case} between"),
                imp,
                &format!("in process, {t} thread(s): weights, likelihood, resampling"),
                unit,
                &between[k],
            ));
        }
        rows.push(row(
            &case,
            "floor-keyed",
            "hand-written loop, per-parent Philox",
            unit,
            &v[2],
        ));
        rows.push(row(
            &case,
            "floor-seq",
            "hand-written loop, one xoshiro256++",
            unit,
            &v[3],
        ));
        rows.push(row(
            &case,
            "floor-keyed-threads",
            &format!("the keyed floor on {threads} threads, nothing shared"),
            unit,
            &v[4],
        ));
        let med = |i: usize| Summary::of(&v[i]).map_or(f64::NAN, |s| s.median);
        checks.push(format!(
            "{n}: {threads} threads against 1: statepipe {:.2}x, the keyed floor {:.2}x \
             (the machine's ceiling for this work: no synchronisation at all)",
            med(0) / med(1),
            med(2) / med(4)
        ));
        if !v[5].is_empty() {
            rows.push(row(
                &case,
                "particles",
                "numpy, one process, warm",
                unit,
                &v[5],
            ));
        }
    }
    // The pool's hand-off at all threads: what each of a step's two
    // parallel parts pays at least.
    if threads > 1 {
        for (gap, how) in [
            (Duration::ZERO, "back to back"),
            (
                Duration::from_millis(1),
                "each after 1 ms with the pool idle",
            ),
        ] {
            let us: Vec<f64> = (0..a.samples)
                .map(|_| fork_join_us(threads, gap, 200))
                .collect();
            rows.push(row(
                "pool hand-off",
                "rayon",
                &format!("{threads} tasks of 20 µs on {threads} threads, {how}"),
                "µs",
                &us,
            ));
        }
    }
    // The whole command at 2,000 particles against particles' warm filter.
    if let Some(py) = &py {
        let mut cmd = Vec::new();
        let mut peer = Vec::new();
        run_command(2000)?;
        for _ in 0..a.samples {
            cmd.push(run_command(2000)? * 1e3);
            peer.push(run_particles(py, 2000)?.0 * 1e3);
        }
        rows.push(row(
            "command/2000",
            "statepipe",
            "`statepipe pf`, whole process",
            "ms",
            &cmd,
        ));
        rows.push(row(
            "command/2000",
            "particles",
            "filter only, warm",
            "ms",
            &peer,
        ));
    }
    let report = Report::new("pf", &host, rows);
    print!("{}", table::render(&report));
    for c in &checks {
        println!("{c}");
    }
    print!(
        "{}",
        crate::bench_pf_targets::targets(&report.results, threads)
    );
    println!("(run took {:.1} s)", started.elapsed().as_secs_f64());
    if let Some(p) = &a.json {
        std::fs::write(p, report.to_json() + "\n")
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &a.svg {
        std::fs::write(p, svg::render(&report))
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
