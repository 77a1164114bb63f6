//! The recovery cases of `statepipe bench cluster`: lost workers (killed or
//! silent), checkpoints, and what the master's copies cost as states grow.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use statepipe_cluster::config::{Recovery, SchedConfig};
use statepipe_cluster::MasterImpl;

use super::chaos::chaos;
use super::{cluster, failed, kills, metric, run_plan, During, Sig, Workload};
use super::{Ballast, ClusterOptions, Sleep};
use crate::harness::{Contender, Group};
use crate::report::ResultRow;
use crate::BenchError;

/// Per contender: signal to recovery, microseconds, over every sample.
#[derive(Default)]
pub(super) struct Recorded {
    reassign: RefCell<HashMap<String, Vec<f64>>>,
    /// Per contender: (time the steps spent on checkpoints, wall), seconds.
    checkpoint: RefCell<HashMap<String, Vec<(f64, f64)>>>,
    /// The bits of the first `faults` run that ended: every other must
    /// end with the same.
    digest: std::cell::Cell<Option<(u64, String)>>,
}

/// What a `faults` contender does to its workers.
#[derive(Clone, Copy, PartialEq)]
enum Faults {
    None,
    /// This share of the workers sent `sig` once each, one at a time at
    /// random steps and moments.
    Each {
        percent: usize,
        sig: Sig,
    },
    /// Half the workers from the start, the other half admitted at this
    /// step.
    ScaleOut {
        at: usize,
    },
    /// Half the workers throughout (what `ScaleOut` is compared with).
    Half,
    /// This share lost in clusters of one or two neighbours at one
    /// moment, some in the last step; with `stops`, every other cluster
    /// SIGSTOPped.
    Chaos {
        percent: usize,
        stops: bool,
    },
}

impl Recorded {
    /// Adds the recovery times and the checkpoint share to the rows' configs.
    pub(super) fn annotate(&self, rows: &mut [ResultRow]) {
        let median = |v: &[f64]| crate::stats::Summary::of(v).map_or(0.0, |s| s.median);
        for (imp, r) in self.reassign.borrow().iter() {
            if r.is_empty() {
                continue;
            }
            let max = r.iter().copied().fold(0.0, f64::max);
            let p50 = median(r);
            let what = if imp.ends_with("stopped") {
                "stop"
            } else {
                "kill"
            };
            for row in rows.iter_mut().filter(|x| &x.imp == imp) {
                row.config += &format!(
                    "; {what} to recovery p50 {:.1} ms, max {:.1} ms (n={})",
                    p50 / 1e3,
                    max / 1e3,
                    r.len()
                );
            }
        }
        for (imp, c) in self.checkpoint.borrow().iter() {
            let share: Vec<f64> = c.iter().map(|(ck, wall)| ck / wall).collect();
            let per: Vec<f64> = c.iter().map(|(ck, _)| *ck).collect();
            for row in rows.iter_mut().filter(|x| &x.imp == imp) {
                row.config += &format!(
                    "; checkpoints cost the steps (snapshots, hand-over, the last write): \
                     median {:.2}% of the run, {:.3} s per run",
                    median(&share) * 100.0,
                    median(&per)
                );
            }
        }
    }
}

/// The default of `statepipe pf|master --every`.
const DEFAULT_EVERY: usize = 10;

/// The `faults`, `checkpoint` and `copies` groups the options ask for.
pub(super) fn groups<'a>(
    a: &'a ClusterOptions,
    plan: &'a Workload,
    shape: &str,
    rec: &'a Recorded,
) -> Vec<Group<'a>> {
    let mut groups = Vec::new();
    if a.fault_workers > 0 {
        groups.push(faults(a, plan, shape, rec));
    }
    if a.checkpoint_workers > 0 {
        groups.push(checkpoint(a, plan, shape, rec));
    }
    for &kib in &a.copy_kib {
        groups.push(copies(a, plan, shape, kib));
    }
    groups
}

fn faults<'a>(
    a: &'a ClusterOptions,
    plan: &'a Workload,
    shape: &str,
    rec: &'a Recorded,
) -> Group<'a> {
    let w = a.fault_workers;
    let case = format!("faults/workers={w}");
    let step_time = Duration::from_secs_f64(a.cost_ms / 1e3 * a.states as f64 / w as f64);
    let mut cases = vec![
        ("no-faults", Recovery::MasterCopy, Faults::None),
        (
            "5%-killed",
            Recovery::MasterCopy,
            Faults::Each {
                percent: 5,
                sig: Sig::Kill,
            },
        ),
        (
            "5%-stopped",
            Recovery::MasterCopy,
            Faults::Each {
                percent: 5,
                sig: Sig::Stop,
            },
        ),
        ("buddy/no-faults", Recovery::Buddy, Faults::None),
        (
            "buddy/5%-killed",
            Recovery::Buddy,
            Faults::Each {
                percent: 5,
                sig: Sig::Kill,
            },
        ),
        (
            "buddy/5%-stopped",
            Recovery::Buddy,
            Faults::Each {
                percent: 5,
                sig: Sig::Stop,
            },
        ),
        (
            "5%-drained",
            Recovery::MasterCopy,
            Faults::Each {
                percent: 5,
                sig: Sig::Term,
            },
        ),
        (
            "buddy/5%-drained",
            Recovery::Buddy,
            Faults::Each {
                percent: 5,
                sig: Sig::Term,
            },
        ),
        ("half", Recovery::MasterCopy, Faults::Half),
        (
            "scale-out",
            Recovery::MasterCopy,
            Faults::ScaleOut {
                at: (plan.len() * 3 / 10).max(1),
            },
        ),
        (
            "buddy/scale-out",
            Recovery::Buddy,
            Faults::ScaleOut {
                at: (plan.len() * 3 / 10).max(1),
            },
        ),
        ("recovery-off", Recovery::Off, Faults::None),
    ];
    if a.chaos {
        cases.extend([
            (
                "10%-killed",
                Recovery::MasterCopy,
                Faults::Each {
                    percent: 10,
                    sig: Sig::Kill,
                },
            ),
            (
                "buddy/10%-killed",
                Recovery::Buddy,
                Faults::Each {
                    percent: 10,
                    sig: Sig::Kill,
                },
            ),
            (
                "chaos/10%",
                Recovery::MasterCopy,
                Faults::Chaos {
                    percent: 10,
                    stops: true,
                },
            ),
            // Buddy mode with kills only, and with every other cluster
            // stopped: a stop in an evolve or in the replication round
            // after it is dropped after 2 × `quiet` of silence, like a
            // straggler.
            (
                "buddy/chaos-killed/10%",
                Recovery::Buddy,
                Faults::Chaos {
                    percent: 10,
                    stops: false,
                },
            ),
            (
                "buddy/chaos/10%",
                Recovery::Buddy,
                Faults::Chaos {
                    percent: 10,
                    stops: true,
                },
            ),
        ]);
    }
    let mut contenders = Vec::new();
    for (name, recovery, faults) in cases {
        let case2 = case.clone();
        let states = a.states;
        let n_of = move |percent: usize| (w * percent / 100).max(1);
        let d = statepipe_cluster::config::Deadlines::default();
        let silent = format!(
            "silent: work started again after {} ms of silence, lost after {:.2} s; \
             heartbeats every {} ms",
            d.quiet().unwrap_or_default().as_millis(),
            d.silence.as_secs_f64(),
            d.heartbeat.unwrap_or_default().as_millis()
        );
        let config = match faults {
            Faults::None => format!("{shape}; nothing killed"),
            Faults::Each {
                percent,
                sig: Sig::Kill,
            } => format!(
                "{shape}; {} of {w} workers SIGKILLed once each, at random steps",
                n_of(percent)
            ),
            Faults::Each {
                percent,
                sig: Sig::Stop,
            } => format!(
                "{shape}; {} of {w} workers SIGSTOPped once each, at random steps ({silent})",
                n_of(percent)
            ),
            Faults::Each {
                percent,
                sig: Sig::Term,
            } => format!(
                "{shape}; {} of {w} workers SIGTERMed once each (asked to leave), at random \
                 steps",
                n_of(percent)
            ),
            Faults::Half => format!("{shape}; {} workers throughout", (w / 2).max(1)),
            Faults::ScaleOut { at } => format!(
                "{shape}; {} workers, {} more joining at step {} of {}",
                (w / 2).max(1),
                w - (w / 2).max(1),
                at + 1,
                plan.len()
            ),
            Faults::Chaos { percent, stops } => format!(
                "{shape}; {} of {w} workers lost in clusters of 1 or 2 neighbours at one \
                 moment (never 3 side by side), every 4th cluster in the last step{}",
                n_of(percent),
                if stops {
                    format!(", every other cluster SIGSTOPped ({silent})")
                } else {
                    ", all SIGKILLed".to_string()
                }
            ),
        };
        let seed = std::cell::Cell::new(0u64);
        let worker = &a.worker;
        contenders.push(Contender::new(name, config, move || {
            let sched = SchedConfig {
                recovery,
                ..SchedConfig::default()
            };
            seed.set(seed.get() + 1);
            let schedule = match faults {
                Faults::None | Faults::Half | Faults::ScaleOut { .. } => Vec::new(),
                Faults::Each { percent, sig } => {
                    let mut k = kills(w, n_of(percent), plan.len(), step_time, seed.get());
                    k.iter_mut().for_each(|x| x.3 = sig);
                    k
                }
                Faults::Chaos { percent, stops } => {
                    chaos(w, n_of(percent), plan.len(), step_time, seed.get(), stops)
                }
            };
            let start = match faults {
                Faults::Half | Faults::ScaleOut { .. } => (w / 2).max(1),
                _ => w,
            };
            let (m, mut c) = cluster(worker, &Sleep, start, MasterImpl::EventLoop, sched)
                .map_err(|e| failed(&case2, &e))?;
            // The joiners start and connect before the run (off the clock),
            // and are admitted at their step (on it).
            let join = match faults {
                Faults::ScaleOut { at } => {
                    let err = |e: statepipe_cluster::Error| failed(&case2, &e.into());
                    c.spawn_more(worker, w - start, &[]).map_err(err)?;
                    let joined = c
                        .accept_more(w - start, Duration::from_secs(120))
                        .map_err(err)?;
                    Some((at, RefCell::new(Some(joined))))
                }
                _ => None,
            };
            let during = During {
                kill: &schedule,
                digest: true,
                checkpoint: None,
                join,
            };
            let s = run_plan(m, c, plan, (0..states as u64).collect(), &during)
                .map_err(|e| failed(&case2, &e))?;
            // More losses than signals are a loaded host's false silences
            // (recovered like the others); fewer than one, with a worker
            // killed, would mean the schedule never ran.
            let killed = schedule.iter().filter(|k| k.3 == Sig::Kill).count();
            let termed = schedule.iter().filter(|k| k.3 == Sig::Term).count();
            if termed > 0 && (s.lost_workers > 0 || s.left_workers < termed) {
                eprintln!(
                    "{name}: {} of {termed} workers asked to leave left, {} lost (a SIGTERM \
                     after the run's last operation leaves at the end; a loss is a loaded \
                     host's false silence)",
                    s.left_workers, s.lost_workers
                );
            }
            if s.lost_workers > schedule.len() {
                eprintln!(
                    "{name}: {} workers lost of {} signalled: the rest fell silent on a \
                     loaded host",
                    s.lost_workers,
                    schedule.len()
                );
            }
            if s.lost_workers < killed.min(1) {
                return Err(BenchError::failed(
                    &case2,
                    format!(
                        "{} workers recovered of {} signalled ({killed} killed)",
                        s.lost_workers,
                        schedule.len()
                    ),
                ));
            }
            match rec.digest.take() {
                Some((d, who)) if d != s.digest => {
                    return Err(BenchError::failed(
                        &case2,
                        format!("{name} ended with other bits than {who}"),
                    ));
                }
                Some(x) => rec.digest.set(Some(x)),
                None => rec.digest.set(Some((s.digest, name.to_string()))),
            }
            rec.reassign
                .borrow_mut()
                .entry(name.to_string())
                .or_default()
                .extend(s.reassign_us.iter().copied());
            if let Some(path) = &a.step_log {
                log_steps(path, &case2, name, seed.get(), &s.step_ms, &schedule)
                    .map_err(|e| BenchError::failed(&case2, format!("{}: {e}", path.display())))?;
            }
            Ok(vec![s.wall_s, s.mb_in_per_step])
        }));
    }
    wall_and_ingress(case, contenders)
}

/// Appends one sample's line to the step log: its case, contender and
/// sample number, each step's wall time in ms, and the signals sent
/// (`step:worker` with `K` for SIGKILL or `S` for SIGSTOP, `@` the delay
/// into the step in ms).
fn log_steps(
    path: &std::path::Path,
    case: &str,
    name: &str,
    sample: u64,
    step_ms: &[f64],
    schedule: &[super::Kill],
) -> std::io::Result<()> {
    use std::io::Write;
    let steps: Vec<String> = step_ms.iter().map(|ms| format!("{ms:.0}")).collect();
    let signals: Vec<String> = schedule
        .iter()
        .map(|&(w, step, delay, sig)| format!("{step}:{w}{}@{}", sig.letter(), delay.as_millis()))
        .collect();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)?;
    writeln!(
        f,
        "{case} {name} #{sample}: steps ms {}; signalled {}",
        steps.join(","),
        if signals.is_empty() {
            "none".to_string()
        } else {
            signals.join(",")
        }
    )
}

fn checkpoint<'a>(
    a: &'a ClusterOptions,
    plan: &'a Workload,
    shape: &str,
    rec: &'a Recorded,
) -> Group<'a> {
    let w = a.checkpoint_workers;
    let case = format!("checkpoint/workers={w}");
    let mut contenders = Vec::new();
    // None, after every step, and every `DEFAULT_EVERY` steps (the default
    // of `statepipe pf|master --every`), each with one after the last step.
    for every in [None, Some(1), Some(DEFAULT_EVERY)] {
        let (name, config) = match every {
            Some(k) => (
                if k == 1 {
                    "every-step".to_string()
                } else {
                    format!("every-{k}")
                },
                format!(
                    "{shape}; every {k} step(s) and after the last the master's snapshot, \
                     postcard, written atomically (temporary file, fsync, rename, fsync of \
                     the folder) on a writer thread; the last one waited for"
                ),
            ),
            None => ("none".to_string(), format!("{shape}; no checkpoint")),
        };
        let (case2, states, worker) = (case.clone(), a.states, &a.worker);
        let imp = name.clone();
        contenders.push(Contender::new(name, config, move || {
            let dir = std::env::temp_dir()
                .join(format!("statepipe-bench-checkpoint-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| BenchError::failed(&case2, e))?;
            let path = dir.join("run.ckpt");
            let (m, c) = cluster(
                worker,
                &Sleep,
                w,
                MasterImpl::EventLoop,
                SchedConfig::default(),
            )
            .map_err(|e| failed(&case2, &e))?;
            let during = During {
                checkpoint: every.map(|k| (path.as_path(), k)),
                ..During::default()
            };
            let s = run_plan(m, c, plan, (0..states as u64).collect(), &during)
                .map_err(|e| failed(&case2, &e))?;
            let _ = std::fs::remove_dir_all(&dir);
            if every.is_some() {
                rec.checkpoint
                    .borrow_mut()
                    .entry(imp.clone())
                    .or_default()
                    .push((s.checkpoint_s, s.wall_s));
            }
            Ok(vec![s.wall_s])
        }));
    }
    Group {
        name: case.clone(),
        metrics: vec![metric(format!("{case}/wall"), "s", false)],
        contenders,
    }
}

fn copies<'a>(a: &'a ClusterOptions, plan: &'a Workload, shape: &str, kib: usize) -> Group<'a> {
    let w = a.copy_workers;
    let case = format!("copies/kib={kib}");
    let mut contenders = Vec::new();
    for recovery in [Recovery::MasterCopy, Recovery::Buddy, Recovery::Off] {
        let name = match recovery {
            Recovery::MasterCopy => "master-copy",
            Recovery::Buddy => "buddy",
            Recovery::Auto => "auto",
            Recovery::Off => "recovery-off",
        };
        let config = format!("{shape}; {kib} KiB states; {w} workers");
        let (case2, states, worker) = (case.clone(), a.states, &a.worker);
        contenders.push(Contender::new(name, config, move || {
            let sched = SchedConfig {
                recovery,
                ..SchedConfig::default()
            };
            let (m, c) = cluster(worker, &Ballast, w, MasterImpl::EventLoop, sched)
                .map_err(|e| failed(&case2, &e))?;
            let init = (0..states).map(|i| vec![i as u8; kib * 1024]).collect();
            let s =
                run_plan(m, c, plan, init, &During::default()).map_err(|e| failed(&case2, &e))?;
            Ok(vec![s.wall_s, s.mb_in_per_step])
        }));
    }
    wall_and_ingress(case, contenders)
}

/// A group of `contenders` each reporting the run's wall time and the
/// master's ingress per step.
fn wall_and_ingress(case: String, contenders: Vec<Contender<'_>>) -> Group<'_> {
    Group {
        name: case.clone(),
        metrics: vec![
            metric(format!("{case}/wall"), "s", false),
            metric(format!("{case}/from-workers"), "MB/step", false),
        ],
        contenders,
    }
}
