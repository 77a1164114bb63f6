//! Helpers of the tests that start `statepipe` processes: a master, its
//! workers, and their standard error.
#![allow(dead_code)] // each test crate uses some of them

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

pub const EXE: &str = env!("CARGO_BIN_EXE_statepipe");

/// The first line of `child`'s standard error that starts with `prefix`,
/// and the rest of its lines (to drain).
pub fn stderr_line(
    child: &mut std::process::Child,
    prefix: &str,
) -> (String, std::io::Lines<BufReader<std::process::ChildStderr>>) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines
        .find_map(|l| l.ok().filter(|l| l.starts_with(prefix)))
        .unwrap_or_else(|| panic!("no line starting {prefix:?} on stderr"));
    (line, lines)
}

/// Particles of the fault tests' runs: enough that a run on two workers
/// lasts seconds, so that a fault 400 ms in lands mid-run, in a debug
/// build and in an optimised one alike.
pub const FAULT_PARTICLES: &str = if cfg!(debug_assertions) {
    "1000"
} else {
    "10000"
};

pub fn start_master_with(
    secret: &str,
    workers: &str,
    args: &[&str],
) -> (std::process::Child, String) {
    let mut m = Command::new(EXE)
        .args([
            "master",
            "--listen",
            "127.0.0.1:0",
            "--workers",
            workers,
            "--quiet",
        ])
        .args(args)
        .env("STATEPIPE_SECRET", secret)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (line, lines) = stderr_line(&mut m, "listening on ");
    let addr = line["listening on ".len()..]
        .split(';')
        .next()
        .unwrap()
        .to_string();
    std::thread::spawn(move || lines.for_each(drop));
    (m, addr)
}

/// `n` `statepipe worker` processes for the master at `addr`.
pub fn start_workers(addr: &str, secret: &str, n: usize) -> Vec<std::process::Child> {
    (0..n)
        .map(|_| {
            Command::new(EXE)
                .args(["worker", "--connect", addr])
                .env("STATEPIPE_SECRET", secret)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect()
}
/// `GET /health` from `addr` (HOST:PORT): the status code, or None when
/// nothing answers (the process exited).
pub fn health(addr: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(s, "GET /health HTTP/1.1\r\nhost: probe\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    r.split_whitespace().nth(1)?.parse().ok()
}

pub mod remote;
