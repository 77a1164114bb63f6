//! Real worker processes: `statepipe worker` processes under a master of
//! this test, and the `statepipe pf` command with its own workers.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use statepipe_bench::cluster::{Sleep, SleepInput};
use statepipe_cluster::{
    Engine, IdMap, Local, LocalCluster, Master, MasterConfig, StateId, WorkerCommand,
};

mod common;

use common::{start_master_with, start_workers, stderr_line, EXE, FAULT_PARTICLES};

/// Whether `pid` is gone (or a zombie nobody will run again).
fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let dead = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(s) => s
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with(['Z', 'X'])),
        };
        if dead || Instant::now() > deadline {
            return dead;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn start_pf(args: &[&str]) -> (std::process::Child, Vec<u32>) {
    let mut pf = Command::new(EXE)
        .args(["pf", "--engine", "workers"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (line, lines) = stderr_line(&mut pf, "statepipe pf: ");
    let pids = line[line.find('[').unwrap() + 1..line.find(']').unwrap()]
        .split(',')
        .map(|p| p.trim().parse().unwrap())
        .collect();
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || lines.for_each(drop));
    (pf, pids)
}

#[test]
fn pf_on_two_worker_processes_matches_kalman_and_writes_json() {
    let json = std::env::temp_dir().join(format!("statepipe-pf-{}.json", std::process::id()));
    let out = Command::new(EXE)
        .args([
            "pf",
            "--engine",
            "workers",
            "--workers",
            "2",
            "--particles",
            "1000",
            "--islands",
            "10",
            "--quiet",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let (ll, se, exact) = (
        j["loglik"].as_f64().unwrap(),
        j["loglik_se"].as_f64().unwrap(),
        j["exact_loglik"].as_f64().unwrap(),
    );
    assert!(((ll - exact) / se).abs() < 3.0, "{j}");
    assert_eq!(j["filtered_means"].as_array().unwrap().len(), 100);
    assert_eq!(
        (j["particles"].as_u64(), j["workers"].as_u64()),
        (Some(1000), Some(2))
    );
    assert!(j["wall_s"].as_f64().unwrap() > 0.0 && j["efficiency"].as_f64().is_some());
}

#[test]
fn ctrl_c_leaves_no_worker_behind() {
    let (mut pf, pids) = start_pf(&["--workers", "2", "--model", "pk", "--pk-substeps", "200000"]);
    std::thread::sleep(Duration::from_millis(300));
    kill(Pid::from_raw(pf.id() as i32), Signal::SIGINT).unwrap();
    let status = pf.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    for p in pids {
        assert!(gone(p), "worker {p} outlived its master");
    }
}

/// What happens to the first worker while `pf` runs.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    None,
    /// SIGKILL after this long.
    Kill(Duration),
    /// SIGSTOP after this long (a partition without a reset), SIGCONT 4 s
    /// later.
    Stop(Duration),
}

#[test]
fn pf_keeps_a_cheap_model_in_process_and_gives_the_workers_bits() {
    let run = |engine: &str| {
        let json =
            std::env::temp_dir().join(format!("statepipe-pf-{engine}-{}.json", std::process::id()));
        let out = Command::new(EXE)
            .args([
                "pf",
                "--engine",
                engine,
                "--particles",
                "400",
                "--islands",
                "4",
            ])
            .args(["--quiet", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let _ = std::fs::remove_file(&json);
        (j, stderr)
    };
    // As many workers as threads: shipping can only add to a step.
    let (auto, said) = run("auto");
    let (workers, _) = run("workers");
    assert!(
        said.contains("statepipe pf: evolving in process on "),
        "{said}"
    );
    assert_eq!(auto["engine"], "in-process", "{auto}");
    assert_eq!(workers["engine"], "workers", "{workers}");
    assert_eq!(auto["loglik"], workers["loglik"]);
    assert_eq!(auto["filtered_means"], workers["filtered_means"]);
}

/// `statepipe pf`'s JSON result, run to the end.
fn pf_json(args: &[&str], fault: Fault) -> serde_json::Value {
    // One file per call: the tests of this binary run side by side, and
    // two of them run a clean filter each.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let json = std::env::temp_dir().join(format!(
        "statepipe-pf-{}-{call}-{}.json",
        std::process::id(),
        match fault {
            Fault::None => "clean",
            Fault::Kill(_) => "kill",
            Fault::Stop(_) => "stop",
        }
    ));
    let mut a: Vec<&str> = args.to_vec();
    let path = json.to_str().unwrap().to_string();
    a.extend(["--json", &path]);
    let (mut pf, pids) = start_pf(&a);
    let victim = Pid::from_raw(pids[0] as i32);
    match fault {
        Fault::None => {}
        Fault::Kill(d) => {
            std::thread::sleep(d);
            kill(victim, Signal::SIGKILL).unwrap();
        }
        Fault::Stop(d) => {
            std::thread::sleep(d);
            kill(victim, Signal::SIGSTOP).unwrap();
            // Woken well after its deadline (while the run may still go
            // on): the master closed its connection, so whatever it sends
            // now is never read.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(4));
                let _ = kill(victim, Signal::SIGCONT);
            });
        }
    }
    let status = pf.wait().unwrap();
    assert!(status.success(), "pf failed: {status}");
    for p in pids {
        assert!(gone(p), "worker {p} outlived its master");
    }
    let j: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    j
}

/// Each of `ids` evolved into one child by a sleep of `cost_us`.
fn sleeps(ids: &[StateId], cost_us: u32) -> IdMap<SleepInput> {
    ids.iter()
        .map(|&i| {
            (
                i,
                SleepInput {
                    cost_us,
                    children: 1,
                },
            )
        })
        .collect()
}

#[test]
fn a_killed_worker_costs_time_not_the_result() {
    // Kill -9 one of two workers mid-run: the master places its states on
    // the other from its copies and runs its unfinished evolves again; the
    // filter ends with the same bits as a run without the loss.
    let args = [
        "--workers",
        "2",
        "--particles",
        FAULT_PARTICLES,
        "--islands",
        "10",
    ];
    let clean = pf_json(&args, Fault::None);
    let hurt = pf_json(&args, Fault::Kill(Duration::from_millis(400)));
    assert_eq!(clean["lost_workers"].as_u64(), Some(0));
    for key in ["loglik", "loglik_se", "filtered_means"] {
        assert_eq!(clean[key], hurt[key], "{key} differs after a lost worker");
    }
    // The run takes seconds here, so the kill lands mid-run: recovered.
    assert_eq!(hurt["lost_workers"].as_u64(), Some(1), "{hurt}");
}

#[test]
fn a_silent_worker_is_declared_lost_and_its_late_answers_ignored() {
    // SIGSTOP one of two workers mid-run: no reset, just silence (its
    // heartbeat thread stops too). Its batch, far past its expected time,
    // is started again on the other worker from the master's copies and
    // the stopped one is fenced (no step waits for it); if an operation
    // lasts the default silence (1.5 s; a heartbeat every second) the
    // master also declares it lost and closes its connection. Either way
    // the result is the clean run's. The stopped worker is woken later:
    // nothing it sends counts, and it leaves no process behind.
    let args = [
        "--workers",
        "2",
        "--particles",
        FAULT_PARTICLES,
        "--islands",
        "10",
    ];
    let clean = pf_json(&args, Fault::None);
    let stopped = pf_json(&args, Fault::Stop(Duration::from_millis(400)));
    for key in ["loglik", "loglik_se", "filtered_means"] {
        assert_eq!(
            clean[key], stopped[key],
            "{key} differs after a silent worker"
        );
    }
    assert!(stopped["lost_workers"].as_u64() <= Some(1), "{stopped}");
}

#[test]
fn real_processes_match_local_and_recover_from_a_killed_worker() {
    let worker = WorkerCommand::new(EXE).arg("worker");
    let mut cluster = LocalCluster::spawn(&worker, 3, &[]).unwrap();
    let joined = cluster.accept(Duration::from_secs(30)).unwrap();
    let cfg = MasterConfig {
        seed: 4,
        ..MasterConfig::default()
    };
    let mut m = Master::new(&Sleep, joined, cfg).unwrap();
    let mut local = Local::new(Sleep, 4);
    let states: Vec<u64> = (0..12).collect();
    let ids = m.reset_states(states.clone()).unwrap();
    assert_eq!(local.reset_states(states).unwrap(), ids);
    let step = |i: u64| SleepInput {
        cost_us: 0,
        children: (i % 3) as u32,
    };
    let inputs: IdMap<_> = ids
        .iter()
        .enumerate()
        .map(|(k, &i)| (i, step(k as u64)))
        .collect();
    let out = m.evolve_many(inputs.clone()).unwrap();
    assert_eq!(out, local.evolve_many(inputs).unwrap());
    // Kill one worker while every state sleeps 300 ms.
    let kids: Vec<_> = out.values().flatten().map(|c| c.0).collect();
    let slow = sleeps(&kids, 300_000);
    let victim = cluster.pids()[0];
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        let _ = kill(Pid::from_raw(victim as i32), Signal::SIGKILL);
    });
    let t0 = Instant::now();
    let got = m.evolve_many(slow.clone()).unwrap();
    eprintln!("step with a killed worker took {:?}", t0.elapsed());
    assert_eq!(got, local.evolve_many(slow).unwrap());
    assert_eq!(m.stats().lost_workers(), 1);
    drop(m);
    cluster.kill_all();
}

/// Starts `statepipe master` on a free loopback port; returns it and its
/// address (read from its first line on stderr).
fn start_master(secret: &str, workers: &str, wait_s: &str) -> (std::process::Child, String) {
    start_master_with(
        secret,
        workers,
        &["--wait-s", wait_s, "--particles", "100", "--islands", "2"],
    )
}

#[test]
fn a_refused_worker_says_why_and_fails() {
    // A worker with the wrong secret: the master refuses it (and logs the
    // refusal); the worker prints why and exits non-zero, not 0.
    let (mut master, addr) = start_master("right", "1", "20");
    let out = Command::new(EXE)
        .args(["worker", "--connect", &addr])
        .env("STATEPIPE_SECRET", "wrong")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a refused worker exited 0: {err}");
    assert!(err.contains("wrong secret"), "{err}");
    // A worker with the right secret runs the filter; the master ends well.
    let ok = Command::new(EXE)
        .args(["worker", "--connect", &addr])
        .env("STATEPIPE_SECRET", "right")
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(master.wait().unwrap().success());
}

#[test]
fn a_master_that_gives_up_waiting_says_why_and_fails() {
    let (mut master, _addr) = start_master("s", "2", "1");
    // Nobody joins within its 1 s: it gives up with an error, not 0.
    let status = master.wait().unwrap();
    assert!(!status.success(), "a master with no workers exited 0");
}

#[test]
fn a_killed_master_resumes_from_its_checkpoint_with_the_same_result() {
    let dir = std::env::temp_dir().join(format!("statepipe-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ckpt, out) = (dir.join("run.ckpt"), dir.join("resumed.json"));
    let filter = ["--particles", "1000", "--islands", "10"];
    let clean = pf_json(
        &["--workers", "2", filter[0], filter[1], filter[2], filter[3]],
        Fault::None,
    );
    // The first master checkpoints every 20 steps and is SIGKILLed once a
    // checkpoint exists; its workers end with its connections.
    let mut args: Vec<&str> = filter.to_vec();
    let c = ckpt.to_str().unwrap().to_string();
    args.extend(["--checkpoint", &c, "--every", "20"]);
    let (mut first, addr) = start_master_with("k", "2", &args);
    let ws = start_workers(&addr, "k", 2);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ckpt.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ckpt.exists(), "no checkpoint was written");
    kill(Pid::from_raw(first.id() as i32), Signal::SIGKILL).unwrap();
    let _ = first.wait();
    // Its workers, served and then cut off without a `Shutdown`, fail
    // saying so (a worker exiting 0 would tell a launcher all went well).
    for w in ws {
        let o = w.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "a cut-off worker exited 0: {err}");
        assert!(
            err.contains("closed the connection without telling this worker to exit"),
            "{err}"
        );
    }
    // A new master, three new workers, the same options: it goes on.
    let o = out.to_str().unwrap().to_string();
    let mut args: Vec<&str> = filter.to_vec();
    args.extend(["--resume", &c, "--json", &o]);
    let (mut second, addr) = start_master_with("k", "3", &args);
    let ws = start_workers(&addr, "k", 3);
    assert!(
        second.wait().unwrap().success(),
        "the resumed master failed"
    );
    // A master that ends well tells its workers to exit: they exit 0.
    for w in ws {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let resumed: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for key in ["loglik", "loglik_se", "filtered_means"] {
        assert_eq!(clean[key], resumed[key], "{key} differs after a resume");
    }
    // A checkpoint of another run is refused at once, saying why.
    let other = Command::new(EXE)
        .args(["master", "--listen", "127.0.0.1:0", "--workers", "1"])
        .args(["--particles", "500", "--resume", &c])
        .env("STATEPIPE_SECRET", "k")
        .output()
        .unwrap();
    assert!(!other.status.success());
    let err = String::from_utf8_lossy(&other.stderr);
    assert!(err.contains("of another run"), "{err}");
    // A damaged one (a byte flipped in a particle's state) is refused at
    // once, naming the file and why, not resumed with other numbers.
    let mut bytes = std::fs::read(&ckpt).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x10;
    let damaged = dir.join("damaged.ckpt");
    std::fs::write(&damaged, &bytes).unwrap();
    let d = damaged.to_str().unwrap();
    let out = Command::new(EXE)
        .args(["master", "--listen", "127.0.0.1:0", "--workers", "1"])
        .args(filter)
        .args(["--resume", d])
        .env("STATEPIPE_SECRET", "k")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(d) && err.contains("checksum mismatch"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_last_checkpoint_on_disk_is_the_runs_end() {
    // Checkpoints go to disk on a writer thread; the one after the last
    // step is complete and durable before the command exits 0, so resuming
    // from it takes no step and gives the run's result.
    let dir = std::env::temp_dir().join(format!("statepipe-final-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ckpt, out) = (dir.join("run.ckpt"), dir.join("resumed.json"));
    let (c, o) = (ckpt.to_str().unwrap(), out.to_str().unwrap());
    let filter = ["--particles", "400", "--islands", "4"];
    let mut args = vec!["--workers", "2", "--checkpoint", c, "--every", "7"];
    args.extend(filter);
    let run = pf_json(&args, Fault::None);
    let resumed = Command::new(EXE)
        .args(["pf", "--engine", "workers", "--workers", "1", "--quiet"])
        .args(filter)
        .args(["--resume", c, "--json", o])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{err}");
    assert!(err.contains("resuming after step 100 "), "{err}");
    let resumed: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    for key in ["loglik", "loglik_se", "filtered_means"] {
        assert_eq!(run[key], resumed[key], "{key} differs");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_checkpoint_that_cannot_be_written_fails_the_run_saying_why() {
    // Its folder is a file: refused before any worker starts, non-zero.
    let file = std::env::temp_dir().join(format!("statepipe-notadir-{}", std::process::id()));
    std::fs::write(&file, b"not a folder").unwrap();
    let path = file.join("run.ckpt");
    let out = Command::new(EXE)
        .args(["pf", "--engine", "workers", "--workers", "1", "--quiet"])
        .args(["--particles", "100", "--islands", "2"])
        .args(["--checkpoint", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exited 0: {err}");
    assert!(
        err.contains("checkpoint") && err.contains("run.ckpt"),
        "{err}"
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn the_bench_numbers_workers_in_the_order_it_started_them() {
    // The bench kills `pids[k]` and means the master's worker k (whose
    // buddies are k + 1 and k + 2): the joined workers are put back in
    // start order. Kill the third one started, with recovery off: the
    // master must name worker 2.
    let worker = WorkerCommand::new(EXE).arg("worker");
    let mut cluster = LocalCluster::spawn(&worker, 5, &[]).unwrap();
    let pids = cluster.pids();
    // Whatever order they joined in (turned by one here, so that the order
    // to undo is never the identity).
    let mut joined = cluster.accept(Duration::from_secs(30)).unwrap();
    joined.rotate_left(1);
    let joined = statepipe_bench::cluster::in_start_order(joined, &pids);
    let mut cfg = MasterConfig {
        seed: 4,
        ..MasterConfig::default()
    };
    cfg.sched.recovery = statepipe_cluster::config::Recovery::Off;
    let mut m = Master::new(&Sleep, joined, cfg).unwrap();
    let ids = m.reset_states((0..20).collect()).unwrap();
    kill(Pid::from_raw(pids[2] as i32), Signal::SIGKILL).unwrap();
    assert!(gone(pids[2]));
    let inputs = sleeps(&ids, 1000);
    match m.evolve_many(inputs) {
        Err(statepipe_cluster::Error::WorkerLost(l)) => {
            assert_eq!(l.worker, 2, "{l:?}");
        }
        other => panic!("expected worker 2 lost, got {other:?}"),
    }
    cluster.kill_all();
}

/// `statepipe worker --served-file`, for launchers that start a failed
/// worker again in place (a Kubernetes Job's `restartPolicy: OnFailure`):
/// a worker cut off by its master records it and fails; started again
/// with the record there and no master to reach, it exits 0 (its run is
/// over); without a record, it fails saying the master cannot be reached.
#[test]
fn a_worker_started_again_after_its_run_ended_exits_0() {
    let dir = std::env::temp_dir().join(format!("statepipe-served-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ckpt, served) = (dir.join("run.ckpt"), dir.join("served"));
    let c = ckpt.to_str().unwrap().to_string();
    // A run of seconds (the ODE model), checkpointed after every step, so
    // the master is killed long before its end.
    let args = [
        "--model",
        "pk",
        "--pk-substeps",
        "20000",
        "--particles",
        "200",
        "--islands",
        "2",
        "--checkpoint",
        &c,
        "--every",
        "1",
    ];
    let (mut master, addr) = start_master_with("s", "1", &args);
    let worker = |record: &std::path::Path| {
        Command::new(EXE)
            .args(["worker", "--connect", &addr, "--connect-timeout-s", "1"])
            .arg("--served-file")
            .arg(record)
            .env("STATEPIPE_SECRET", "s")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let w = worker(&served);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ckpt.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ckpt.exists(), "no checkpoint was written");
    kill(Pid::from_raw(master.id() as i32), Signal::SIGKILL).unwrap();
    let _ = master.wait();
    let o = w.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a cut-off worker exited 0: {err}");
    assert_eq!(std::fs::read_to_string(&served).unwrap().trim(), addr);
    // Started again: no master, and the record says the run is over.
    let o = worker(&served).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("that run is over"), "{err}");
    // A worker with no record: the master is not up yet, as far as it
    // knows, so it fails (and its launcher starts it again).
    let o = worker(&dir.join("none")).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains(&addr), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
