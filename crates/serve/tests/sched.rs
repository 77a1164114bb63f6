//! The priorities the service gives its threads, read back from
//! `/proc/self/task`: alone in its test binary, so that no other test's
//! server threads are in the process.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::thread;

use statepipe_serve::{Config, Server};

const SCHED_OTHER: i64 = 0;
const SCHED_BATCH: i64 = 3;

/// (name, nice, scheduling policy) of each of this process's threads
/// whose name starts with `prefix`, from `/proc/self/task/*/stat`.
fn threads_named(prefix: &str) -> Vec<(String, i64, i64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap();
        // Fields after the name's closing parenthesis start at field 3.
        let rest: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let field = |n: usize| rest[n - 3].parse::<i64>().unwrap();
        out.push((comm.to_string(), field(19), field(41)));
    }
    out
}

#[test]
fn lowered_handlers_and_the_snapshot_thread_are_batch_threads() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), dir.path());
    config.pin = false;
    config.io_threads = Some(1);
    config.pipeline_nice = Some(10);
    let server = Server::bind(config).unwrap();
    let addr = server.local_addr().unwrap();
    let stop = server.shutdown_handle();
    let t = thread::spawn(move || server.run().unwrap());

    // One write answered: every handler and the snapshot thread started.
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"POST /item HTTP/1.1\r\nContent-Length: 22\r\n\r\n{\"name\":\"n\",\"price\":1}")
        .unwrap();
    let mut status = String::new();
    BufReader::new(&s).read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 201"), "{status:?}");

    let handlers = threads_named("ring-");
    let names: Vec<&str> = handlers.iter().map(|(n, _, _)| n.as_str()).collect();
    for stage in ["ring-journal", "ring-decode", "ring-apply", "ring-reply"] {
        assert!(names.contains(&stage), "no {stage} thread in {names:?}");
    }
    for (name, nice, policy) in &handlers {
        assert_eq!((*nice, *policy), (10, SCHED_BATCH), "{name}");
    }
    let snapshot = threads_named("serve-snapshot");
    assert_eq!(snapshot.len(), 1, "{snapshot:?}");
    assert_eq!((snapshot[0].1, snapshot[0].2), (19, SCHED_BATCH));
    let io = threads_named("serve-io");
    assert_eq!(io.len(), 1, "{io:?}");
    assert_eq!((io[0].1, io[0].2), (0, SCHED_OTHER));

    stop.shutdown();
    t.join().unwrap();
}
