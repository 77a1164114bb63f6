//! Local worker processes: the caller's program, started once per worker,
//! connecting back to a loopback listener; and making sure none outlives
//! the master.
//!
//! Four layers keep workers from becoming orphans:
//! 1. [`LocalCluster`]'s `Drop` kills and reaps every child (success, error,
//!    panic unwinding);
//! 2. [`kill_spawned_workers`], for the application's Ctrl-C / SIGTERM
//!    handler, kills them from any thread;
//! 3. a worker exits when its connection to the master closes;
//! 4. workers started here ask the kernel for SIGKILL when their parent dies
//!    (`PR_SET_PDEATHSIG`, [`WorkerOptions::die_with_parent`]), which covers
//!    a master killed by SIGKILL.
//!
//! [`WorkerOptions::die_with_parent`]: crate::worker::WorkerOptions::die_with_parent

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use crate::auth::{Secret, SECRET_ENV};
use crate::error::Error;
use crate::listen::{Joined, Listener};
use crate::worker::{CONNECT_ENV, DIE_WITH_PARENT_ENV, PIN_ENV};

/// Pids of live children, for [`kill_spawned_workers`].
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn children() -> std::sync::MutexGuard<'static, Vec<u32>> {
    CHILDREN.lock().unwrap_or_else(|p| p.into_inner())
}

/// How to start one worker process: a program and its arguments.
///
/// [`LocalCluster::spawn`] adds what the worker needs to find its master to
/// the environment ([`CONNECT_ENV`], [`SECRET_ENV`], and [`PIN_ENV`] and
/// [`DIE_WITH_PARENT_ENV`]); the program calls
/// [`worker::serve`](crate::worker::serve) with its registry.
///
/// # Examples
/// ```no_run
/// use statepipe_cluster::WorkerCommand;
/// // This same binary, re-executed; its `main` checks `worker::launched()`.
/// let same = WorkerCommand::current_exe()?;
/// // Another program, with arguments.
/// let other = WorkerCommand::new("/usr/local/bin/my-model").arg("--quiet");
/// # Ok::<(), statepipe_cluster::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    program: PathBuf,
    args: Vec<OsString>,
}

impl WorkerCommand {
    /// Runs `program` (a path, or a name looked up in `PATH`).
    pub fn new(program: impl Into<PathBuf>) -> Self {
        WorkerCommand {
            program: program.into(),
            args: Vec::new(),
        }
    }

    /// Re-executes the running program (`std::env::current_exe`).
    ///
    /// # Errors
    /// [`Error::Io`] if the running program's path cannot be found.
    pub fn current_exe() -> Result<Self, Error> {
        Ok(Self::new(std::env::current_exe()?))
    }

    /// Adds an argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<OsString>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
}

/// Worker processes of this process, connected to a loopback listener with
/// a fresh secret; killed and reaped on drop.
///
/// # Examples
/// ```no_run
/// use std::time::Duration;
/// use statepipe_cluster::{LocalCluster, Master, MasterConfig, WorkerCommand};
/// # use statepipe_cluster::{Evolve, Rng};
/// # #[derive(serde::Serialize, serde::Deserialize)] struct M;
/// # impl Evolve for M { const NAME: &'static str = "m"; type State = u8; type Input = u8;
/// #   type Output = u8; fn evolve(&self, _: &u8, _: &u8, _: &mut Rng) -> Vec<(u8, u8)> { vec![] } }
/// let cluster = LocalCluster::spawn(&WorkerCommand::current_exe()?, 4, &[])?;
/// let workers = cluster.accept(Duration::from_secs(30))?;
/// let master = Master::new(&M, workers, MasterConfig::default())?;
/// # Ok::<(), statepipe_cluster::Error>(())
/// ```
#[derive(Debug)]
pub struct LocalCluster {
    children: Vec<Child>,
    listener: Listener,
    secret: Secret,
}

impl LocalCluster {
    /// Starts `n` workers with `cmd`, the k-th pinned to `pins[k % pins.len()]`
    /// if `pins` is not empty. Their standard input and output are closed;
    /// their standard error is this process's.
    ///
    /// # Errors
    /// [`Error::Spawn`] if a process cannot be started (those already
    /// started are killed), [`Error::Io`] if the listener cannot be bound.
    pub fn spawn(cmd: &WorkerCommand, n: usize, pins: &[usize]) -> Result<Self, Error> {
        let secret = Secret::random();
        let listener = Listener::bind("127.0.0.1:0", secret.clone())?;
        let mut c = LocalCluster {
            children: Vec::with_capacity(n),
            listener,
            secret,
        };
        c.start(cmd, n, pins)?;
        Ok(c)
    }

    /// Starts `n` more workers with `cmd` on the same listener and secret
    /// (workers that join a running master: take them with
    /// [`accept_more`](Self::accept_more) and give them to
    /// [`Master::admit`](crate::Master::admit)).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn).
    pub fn spawn_more(
        &mut self,
        cmd: &WorkerCommand,
        n: usize,
        pins: &[usize],
    ) -> Result<(), Error> {
        self.start(cmd, n, pins)
    }

    fn start(&mut self, cmd: &WorkerCommand, n: usize, pins: &[usize]) -> Result<(), Error> {
        let addr = self.listener.local_addr()?.to_string();
        let (c, secret) = (&mut self.children, &self.secret);
        for k in 0..n {
            let mut p = Command::new(&cmd.program);
            p.args(&cmd.args)
                .env(CONNECT_ENV, &addr)
                .env(SECRET_ENV, secret.as_text())
                .env(DIE_WITH_PARENT_ENV, "1")
                .env_remove(PIN_ENV)
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            if !pins.is_empty() {
                p.env(PIN_ENV, pins[k % pins.len()].to_string());
            }
            let child = p.spawn().map_err(|source| Error::Spawn {
                program: cmd.program.clone(),
                source,
            })?;
            children().push(child.id());
            c.push(child);
        }
        Ok(())
    }

    /// Waits until every worker has joined.
    ///
    /// # Errors
    /// [`Error::JoinTimeout`] if not all joined within `timeout`;
    /// [`Error::WorkerFailed`] as soon as a worker exits before it joined
    /// (one that failed to start says why on standard error).
    pub fn accept(&self, timeout: Duration) -> Result<Vec<Joined>, Error> {
        self.accept_more(self.children.len(), timeout)
    }

    /// Waits until `n` more workers have joined (those of
    /// [`spawn_more`](Self::spawn_more)).
    ///
    /// # Errors
    /// As [`accept`](Self::accept).
    pub fn accept_more(&self, n: usize, timeout: Duration) -> Result<Vec<Joined>, Error> {
        // A worker that exits before it joins (it could not start, or was
        // killed: a Ctrl-C) never will: no use waiting out the timeout.
        // Only the newest `n` are waited for: an earlier one may have
        // exited meanwhile (retired: `Master::retire_workers`).
        let newest = &self.children[self.children.len().saturating_sub(n)..];
        self.listener.accept_while(n, timeout, || {
            match newest.iter().find(|c| exited(c.id())) {
                Some(c) => Err(Error::WorkerFailed(format!(
                    "worker process {} exited before it joined (its standard error says why)",
                    c.id()
                ))),
                None => Ok(()),
            }
        })
    }

    /// The workers' process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Reaps the workers that have exited (one retired by
    /// [`Master::retire_workers`](crate::Master::retire_workers), or that
    /// asked to leave, exits 0): their process ids and exit statuses. They
    /// are this cluster's no more ([`pids`](Self::pids)).
    pub fn reap(&mut self) -> Vec<(u32, std::process::ExitStatus)> {
        let mut gone = Vec::new();
        let mut reg = children();
        self.children.retain_mut(|ch| match ch.try_wait() {
            Ok(Some(status)) => {
                let pid = ch.id();
                reg.retain(|&p| p != pid);
                gone.push((pid, status));
                false
            }
            _ => true,
        });
        gone
    }

    /// Kills and reaps every worker.
    pub fn kill_all(&mut self) {
        let mut reg = children();
        for mut ch in self.children.drain(..) {
            let _ = ch.kill();
            let _ = ch.wait();
            let pid = ch.id();
            reg.retain(|&p| p != pid);
        }
    }
}

/// Whether child `pid` has exited (a zombie, not reaped yet: `Child` still
/// owns the reaping).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Kills (SIGKILL) every worker process a [`LocalCluster`] of this process
/// started and has not reaped: for an application's Ctrl-C or SIGTERM
/// handler, which then exits. Safe to call from any thread.
pub fn kill_spawned_workers() {
    for &pid in children().iter() {
        #[cfg(unix)]
        {
            use nix::sys::signal::{kill, Signal};
            use nix::unistd::Pid;
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
        #[cfg(not(unix))]
        let _ = pid;
    }
}
