//! The two processes of a remote sample: what the parent asks each child
//! ([`ChildRequest`], as JSON on its command line), how a child answers (a `ready` line
//! once the sender may start, then one JSON [`ChildReport`] line on stdout), and the
//! parent's side ([`Children::run_pair`]).
//!
//! The children are the `statepipe` binary itself, started with a hidden subcommand
//! (`statepipe bench remote-child REQUEST`, which calls [`child_main`]); the parent
//! knows that command as [`Children::command`].

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};

use serde::{Deserialize, Serialize};

use super::wire::{Load, Received};
use super::{peer_named, Peer};
use crate::BenchError;

/// The line a receiver prints when the sender may start.
pub const READY: &str = "ready";

/// Which end of the edge a child plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Sends the items (process 0 where the peer numbers its processes).
    Send,
    /// Receives and counts them (process 1).
    Recv,
}

/// What one child is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildRequest {
    /// The contender, [`Peer::name`].
    pub peer: String,
    /// Its end.
    pub role: Role,
    /// What the sender sends.
    pub load: Load,
    /// Loopback `host:port` addresses reserved for the sample: `[sender's, receiver's]`.
    /// A peer that needs one listening end binds the receiver's; timely binds both.
    pub addresses: [String; 2],
    /// The CPU the child pins itself to before it starts any thread (all of its
    /// threads inherit it), or none.
    pub cpu: Option<usize>,
}

/// What a child prints as its last line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChildReport {
    /// The sender's count.
    Sent {
        /// Items it handed to the transport.
        items: u64,
    },
    /// The receiver's tally.
    Received(Received),
}

/// Runs one child's role: parses `request`, pins, plays the role; prints [`READY`]
/// (flushed) when a receiver is listening. Returns the JSON line to print last.
///
/// # Errors
///
/// A malformed request, an unknown or unavailable peer, a failed transport.
pub fn child_main(request: &str) -> Result<String, BenchError> {
    let req: ChildRequest = serde_json::from_str(request)
        .map_err(|e| BenchError::failed("remote child", format!("request {request:?}: {e}")))?;
    let who = format!("remote child {} {:?}", req.peer, req.role);
    let peer = peer_named(&req.peer)
        .ok_or_else(|| BenchError::failed(&who, format!("no peer named {:?}", req.peer)))?;
    peer.available()
        .map_err(|why| BenchError::failed(&who, why))?;
    if let Some(cpu) = req.cpu {
        if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
            return Err(BenchError::failed(&who, format!("cannot pin to CPU {cpu}")));
        }
    }
    let mut ready = || {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{READY}");
        let _ = out.flush();
    };
    let report = peer.child(&req, &mut ready)?;
    serde_json::to_string(&report).map_err(|e| BenchError::failed(&who, e))
}

/// How the parent starts children, and where it pins them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Children {
    /// The command that runs [`child_main`] on its last argument, program first (the
    /// `statepipe` binary and `bench remote-child`).
    pub command: Vec<OsString>,
    /// CPUs of the sender and the receiver; `None` where the host has fewer than two.
    pub cpus: Option<[usize; 2]>,
}

impl Children {
    /// Children run by `command`, pinned to the first two CPUs this process may use
    /// (sender on the first, receiver on the second), if there are two.
    pub fn new(command: Vec<OsString>) -> Children {
        let ids = core_affinity::get_core_ids().unwrap_or_default();
        let cpus = match ids.as_slice() {
            [a, b, ..] => Some([a.id, b.id]),
            _ => None,
        };
        Children { command, cpus }
    }

    /// Runs one sample of `peer`: starts the receiver, waits for its `ready`, starts the
    /// sender, waits for both, checks every item arrived once and intact, and returns
    /// the receiver's tally.
    ///
    /// # Errors
    ///
    /// A child that fails, says something unreadable, or miscounts.
    pub fn run_pair(&self, peer: &dyn Peer, load: Load) -> Result<Received, BenchError> {
        let who = format!("{} remote", peer.name());
        let addresses = reserve_ports(&who)?;
        let request = |role, cpu| ChildRequest {
            peer: peer.name().into(),
            role,
            load,
            addresses: addresses.clone(),
            cpu,
        };
        let mut receiver = Running::start(self, &request(Role::Recv, self.cpus.map(|c| c[1])))?;
        let mut lines = BufReader::new(receiver.stdout()?);
        let mut line = String::new();
        loop {
            line.clear();
            let read = lines
                .read_line(&mut line)
                .map_err(|e| BenchError::failed(&who, format!("reading the receiver: {e}")))?;
            if read == 0 {
                return Err(BenchError::failed(
                    &who,
                    format!(
                        "the receiver ended before it was ready ({})",
                        receiver.status()
                    ),
                ));
            }
            if line.trim() == READY {
                break;
            }
        }
        let sender = Running::start(self, &request(Role::Send, self.cpus.map(|c| c[0])))?;
        let sent = match sender.finish()? {
            ChildReport::Sent { items } => items,
            other => {
                return Err(BenchError::failed(
                    &who,
                    format!("the sender answered {other:?}"),
                ))
            }
        };
        if sent != load.items() {
            return Err(BenchError::failed(
                &who,
                format!("the sender sent {sent} of {} items", load.items()),
            ));
        }
        let mut rest = String::new();
        lines
            .read_to_string(&mut rest)
            .map_err(|e| BenchError::failed(&who, format!("reading the receiver: {e}")))?;
        receiver.stdout_text = rest;
        let received = match receiver.finish()? {
            ChildReport::Received(r) => r,
            other => {
                return Err(BenchError::failed(
                    &who,
                    format!("the receiver answered {other:?}"),
                ))
            }
        };
        received.check(&who, load.items())?;
        Ok(received)
    }
}

/// Two free loopback addresses (bound to port 0, read, released: another process could
/// take one in between, which fails the sample loudly rather than skewing it).
fn reserve_ports(who: &str) -> Result<[String; 2], BenchError> {
    let bind = || {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| BenchError::failed(who, format!("reserving a loopback port: {e}")))
    };
    let (a, b) = (bind()?, bind()?);
    // Both were held at once, so they differ; they are released here.
    Ok([a.to_string(), b.to_string()])
}

/// A started child, killed if dropped before it finished.
struct Running {
    who: String,
    child: Option<Child>,
    stdout_text: String,
}

impl Running {
    fn start(children: &Children, request: &ChildRequest) -> Result<Running, BenchError> {
        let who = format!("{} remote {:?}", request.peer, request.role);
        let (program, args) = children
            .command
            .split_first()
            .ok_or_else(|| BenchError::failed(&who, "no child command"))?;
        let json = serde_json::to_string(request).map_err(|e| BenchError::failed(&who, e))?;
        let child = Command::new(program)
            .args(args)
            .arg(json)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| BenchError::failed(&who, format!("starting {program:?}: {e}")))?;
        Ok(Running {
            who,
            child: Some(child),
            stdout_text: String::new(),
        })
    }

    fn stdout(&mut self) -> Result<std::process::ChildStdout, BenchError> {
        self.child
            .as_mut()
            .and_then(|c| c.stdout.take())
            .ok_or_else(|| BenchError::failed(&self.who, "no stdout"))
    }

    fn status(&mut self) -> String {
        match self.child.as_mut().map(Child::wait) {
            Some(Ok(st)) => st.to_string(),
            Some(Err(e)) => e.to_string(),
            None => "gone".into(),
        }
    }

    /// Waits for the child and reads its last stdout line as a [`ChildReport`].
    fn finish(mut self) -> Result<ChildReport, BenchError> {
        let mut child = self
            .child
            .take()
            .ok_or_else(|| BenchError::failed(&self.who, "already finished"))?;
        if let Some(mut out) = child.stdout.take() {
            out.read_to_string(&mut self.stdout_text)
                .map_err(|e| BenchError::failed(&self.who, format!("reading stdout: {e}")))?;
        }
        let status = child
            .wait()
            .map_err(|e| BenchError::failed(&self.who, format!("waiting: {e}")))?;
        if !status.success() {
            return Err(BenchError::failed(
                &self.who,
                format!("exited with {status} (its stderr is above)"),
            ));
        }
        let last = self.stdout_text.lines().last().unwrap_or_default();
        serde_json::from_str(last)
            .map_err(|e| BenchError::failed(&self.who, format!("result {last:?}: {e}")))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            // Our own child, by its handle: a failed sample leaves no process behind.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
