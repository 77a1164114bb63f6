//! The servers under test as child processes: started pinned, on a fresh
//! data directory, ready once they print `listening on ADDR`; stopped with
//! SIGTERM (SIGKILL if they do not exit).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::load::pinned;
use super::ServeOptions;
use crate::BenchError;

/// A server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `statepipe serve`.
    Statepipe,
    /// `statepipe serve --journal-segment-mib 0`: its journal appending to
    /// segments that grow, as the peers' journals do (a reference row, run
    /// only when named).
    StatepipeAppend,
    /// `statepipe serve --handler-wait adaptive`: its ring's handlers spin
    /// and yield before they sleep (a reference row, run only when named).
    StatepipeAdaptive,
    /// axum on tokio's multi-thread runtime (`None`: its default worker count).
    Axum {
        /// `worker_threads`, if set.
        worker_threads: Option<usize>,
        /// POST bodies through a typed `Json<T>` extractor (axum's documented
        /// way), else parsed into a `serde_json::Value` and checked by hand.
        typed: bool,
    },
    /// actix-web with `workers` workers (`HttpServer::workers`).
    Actix {
        /// Its worker count: the number of CPUs the servers are given.
        workers: usize,
        /// POST bodies through a typed `web::Json<T>` extractor (actix-web's
        /// documented way), else parsed into a `serde_json::Value`.
        typed: bool,
    },
}

impl Kind {
    /// The implementation name in the report.
    pub fn imp(self) -> &'static str {
        match self {
            Kind::Statepipe => "statepipe",
            Kind::StatepipeAppend => "statepipe-append",
            Kind::StatepipeAdaptive => "statepipe-adaptive",
            Kind::Axum { .. } => "axum",
            Kind::Actix { .. } => "actix-web",
        }
    }

    /// Its configuration in the report.
    pub fn config(self) -> String {
        let decode = |typed: bool| if typed { "Json<T>" } else { "Value" };
        match self {
            Kind::Statepipe => "mio I/O + ring, group commit".into(),
            Kind::StatepipeAppend => "mio I/O + ring, group commit, journal appending".into(),
            Kind::StatepipeAdaptive => "mio I/O + ring, group commit, handlers spin first".into(),
            Kind::Axum {
                worker_threads: None,
                typed,
            } => format!(
                "tokio multi-thread (default), {}, Mutex<HashMap>, journal thread",
                decode(typed)
            ),
            Kind::Axum {
                worker_threads: Some(n),
                typed,
            } => format!(
                "tokio worker_threads={n}, {}, Mutex<HashMap>, journal thread",
                decode(typed)
            ),
            Kind::Actix { workers, typed } => format!(
                "{workers} worker{}, {}, Mutex<HashMap>, journal thread",
                if workers == 1 { "" } else { "s" },
                decode(typed)
            ),
        }
    }

    /// The peer's `--decode` argument.
    fn decode_arg(typed: bool) -> &'static str {
        if typed {
            "typed"
        } else {
            "value"
        }
    }

    /// A label for progress lines.
    pub fn label(self) -> String {
        let value = |typed: bool| if typed { "" } else { ", Value" };
        match self {
            Kind::Axum {
                worker_threads: Some(n),
                typed,
            } => format!("axum ({n} workers{})", value(typed)),
            Kind::Axum {
                worker_threads: None,
                typed: false,
            } => "axum (Value)".into(),
            Kind::Actix { typed: false, .. } => "actix-web (Value)".into(),
            k => k.imp().into(),
        }
    }

    /// A name for files.
    pub fn slug(self) -> String {
        let value = |typed: bool| if typed { "" } else { "-value" };
        match self {
            Kind::Axum {
                worker_threads: Some(n),
                typed,
            } => format!("axum{n}{}", value(typed)),
            Kind::Axum {
                worker_threads: None,
                typed,
            } => format!("axum{}", value(typed)),
            Kind::Actix { typed, .. } => format!("actix-web{}", value(typed)),
            Kind::Statepipe => "statepipe".into(),
            Kind::StatepipeAppend => "statepipe-append".into(),
            Kind::StatepipeAdaptive => "statepipe-adaptive".into(),
        }
    }
}

/// Journal counters scraped from statepipe's `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JournalCounters {
    /// Group commits (fsyncs) so far.
    pub fsyncs: f64,
}

/// A running server.
#[derive(Debug)]
pub struct Running {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// How long from spawn to its `listening` line.
    pub ready_after: Duration,
}

impl Running {
    /// Starts `kind` on `data` (created fresh by the server), pinned to the
    /// server CPUs, with `extra` arguments.
    ///
    /// # Errors
    ///
    /// When it cannot start or exits before it listens.
    pub fn start(
        options: &ServeOptions,
        kind: Kind,
        data: &Path,
        extra: &[&str],
    ) -> Result<Running, BenchError> {
        let mut cmd = match kind {
            Kind::Statepipe => {
                let mut c = pinned(&options.server_cpus, &options.statepipe);
                c.arg("serve");
                c
            }
            Kind::StatepipeAppend => {
                let mut c = pinned(&options.server_cpus, &options.statepipe);
                c.args(["serve", "--journal-segment-mib", "0"]);
                c
            }
            Kind::StatepipeAdaptive => {
                let mut c = pinned(&options.server_cpus, &options.statepipe);
                c.args(["serve", "--handler-wait", "adaptive"]);
                c
            }
            Kind::Axum {
                worker_threads,
                typed,
            } => {
                let mut c = pinned(&options.server_cpus, &options.peer);
                c.args(["axum", "--decode", Kind::decode_arg(typed)]);
                if let Some(n) = worker_threads {
                    c.args(["--worker-threads", &n.to_string()]);
                }
                c
            }
            Kind::Actix { workers, typed } => {
                let mut c = pinned(&options.server_cpus, &options.peer);
                c.args(["actix", "--decode", Kind::decode_arg(typed)]);
                c.args(["--workers", &workers.max(1).to_string()]);
                c
            }
        };
        if !options.cgroups.is_empty() {
            // The shell moves itself into the cgroups, then becomes the
            // server: every thread the server starts is in them from the
            // start.
            let program = cmd.get_program().to_owned();
            let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
            let mut wrapped = std::process::Command::new("sh");
            let enter: String = (1..=options.cgroups.len())
                .map(|i| format!("echo $$ > \"${i}\" && "))
                .collect();
            let n = options.cgroups.len();
            wrapped
                .arg("-c")
                .arg(format!("{enter}shift {n} && exec \"$@\""))
                .arg("sh")
                .args(options.cgroups.iter().map(|c| c.join("cgroup.procs")))
                .arg(program)
                .args(args);
            cmd = wrapped;
        }
        cmd.args(["--listen", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| BenchError::failed(kind.label(), format!("starting: {e}")))?;
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .map_err(|e| BenchError::failed(kind.label(), e));
        let ready_after = started.elapsed();
        let addr = read.ok().and_then(|_| {
            line.strip_prefix("listening on ")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        });
        let Some(addr) = addr else {
            let _ = child.kill();
            let status = child.wait();
            return Err(BenchError::failed(
                kind.label(),
                format!("did not start: first line {line:?}, {status:?}"),
            ));
        };
        Ok(Running {
            child,
            addr,
            ready_after,
        })
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// statepipe's journal counters, from `/metrics` (`None` for a peer or
    /// on error).
    pub fn journal_counters(&self) -> Option<JournalCounters> {
        let body = get(self.addr, "/metrics")?.1;
        let fsyncs = body
            .lines()
            .find_map(|l| l.strip_prefix("statepipe_serve_journal_fsync_seconds_count "))?
            .trim()
            .parse()
            .ok()?;
        Some(JournalCounters { fsyncs })
    }

    /// SIGKILL, and wait.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM; waits up to 20 s for exit status 0, then SIGKILLs.
    ///
    /// # Errors
    ///
    /// When it did not exit 0 in time.
    pub fn stop(mut self) -> Result<(), BenchError> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                // A peer has no SIGTERM handler: killed by the signal is its
                // normal end.
                return if status.success() || status.code().is_none() {
                    Ok(())
                } else {
                    Err(BenchError::failed("server", format!("exited {status}")))
                };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err(BenchError::failed(
            "server",
            "did not exit within 20 s of SIGTERM",
        ))
    }
}

/// One `GET path` on a new connection: (status, body).
pub fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).ok()?;
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.get(9..12)?.parse().ok()?;
    Some((status, body.to_string()))
}
