//! Real worker processes: `statepipe worker` processes under a master of
//! this test, and the `statepipe pf` command with its own workers.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use statepipe_bench::cluster::{Sleep, SleepInput};
use statepipe_cluster::{Engine, Local, LocalCluster, Master, MasterConfig, WorkerCommand};

const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

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
        .arg("pf")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(pf.stderr.take().unwrap()).lines();
    let line = lines
        .find_map(|l| l.ok().filter(|l| l.contains("worker processes")))
        .unwrap();
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

/// `statepipe pf`'s JSON result, run to the end.
fn pf_json(args: &[&str], fault: Fault) -> serde_json::Value {
    let json = std::env::temp_dir().join(format!(
        "statepipe-pf-{}-{}.json",
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

#[test]
fn a_killed_worker_costs_time_not_the_result() {
    // Kill -9 one of two workers mid-run: the master places its states on
    // the other from its copies and runs its unfinished evolves again; the
    // filter ends with the same bits as a run without the loss.
    let args = ["--workers", "2", "--particles", "1000", "--islands", "10"];
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
    // SIGSTOP one of two workers mid-run: no reset, just silence. After the
    // deadline (2 s here) the master declares it lost, closes its
    // connection and reruns its share on the other; the result is the
    // clean run's. The stopped worker is woken later: nothing it sends is
    // read, and it leaves no process behind.
    let args = [
        "--workers",
        "2",
        "--particles",
        "1000",
        "--islands",
        "10",
        "--deadline-s",
        "2",
    ];
    let clean = pf_json(&args, Fault::None);
    let stopped = pf_json(&args, Fault::Stop(Duration::from_millis(400)));
    for key in ["loglik", "loglik_se", "filtered_means"] {
        assert_eq!(
            clean[key], stopped[key],
            "{key} differs after a silent worker"
        );
    }
    assert_eq!(stopped["lost_workers"].as_u64(), Some(1), "{stopped}");
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
    let inputs: HashMap<_, _> = ids
        .iter()
        .enumerate()
        .map(|(k, &i)| (i, step(k as u64)))
        .collect();
    let out = m.evolve_many(inputs.clone()).unwrap();
    assert_eq!(out, local.evolve_many(inputs).unwrap());
    // Kill one worker while every state sleeps 300 ms.
    let kids: Vec<_> = out.values().flatten().map(|c| c.0).collect();
    let slow: HashMap<_, _> = kids
        .iter()
        .map(|&k| {
            (
                k,
                SleepInput {
                    cost_us: 300_000,
                    children: 1,
                },
            )
        })
        .collect();
    let victim = cluster.pids()[0];
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        let _ = kill(Pid::from_raw(victim as i32), Signal::SIGKILL);
    });
    let t0 = Instant::now();
    let got = m.evolve_many(slow.clone()).unwrap();
    eprintln!("step with a killed worker took {:?}", t0.elapsed());
    assert_eq!(got, local.evolve_many(slow).unwrap());
    assert_eq!(m.stats().lost_workers, 1);
    drop(m);
    cluster.kill_all();
}
