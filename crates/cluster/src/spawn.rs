//! Local worker processes for the embedded cluster: spawning one pinned
//! worker per usable CPU (counted by `statepipe_sys::cpus`), and making sure
//! none outlives the master.
//!
//! Four layers keep workers from becoming orphans:
//! 1. [`LocalCluster`]'s `Drop` kills and reaps every child (success, error,
//!    panic unwinding);
//! 2. [`kill_on_ctrlc`] kills them from a Ctrl-C / SIGTERM handler, then exits;
//! 3. a worker exits when its connection to the master closes;
//! 4. workers spawned here ask the kernel for SIGKILL when their parent dies
//!    (`PR_SET_PDEATHSIG`), which covers a master killed by SIGKILL.

use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::auth::{Secret, SECRET_ENV};

/// Pids of live children, for the signal handler.
static CHILDREN: Mutex<Vec<i32>> = Mutex::new(Vec::new());

fn children() -> std::sync::MutexGuard<'static, Vec<i32>> {
    CHILDREN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Worker processes of this process; killed and reaped on drop.
pub struct LocalCluster {
    children: Vec<Child>,
}

impl LocalCluster {
    /// Starts `n` workers `exe worker --connect addr`, the k-th pinned to
    /// `pins[k % pins.len()]` if `pins` is not empty.
    ///
    /// # Errors
    /// If a process cannot be started (those already started are killed).
    pub fn spawn(
        exe: &Path,
        n: usize,
        addr: &str,
        secret: &Secret,
        pins: &[usize],
    ) -> io::Result<Self> {
        let mut c = LocalCluster {
            children: Vec::with_capacity(n),
        };
        for k in 0..n {
            let mut cmd = Command::new(exe);
            cmd.args(["worker", "--connect", addr, "--die-with-parent"])
                .env(SECRET_ENV, secret.as_text())
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            if !pins.is_empty() {
                cmd.args(["--pin", &pins[k % pins.len()].to_string()]);
            }
            let child = cmd.spawn()?;
            children().push(child.id() as i32);
            c.children.push(child);
        }
        Ok(c)
    }

    /// The workers' process ids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Kills and reaps every worker.
    pub fn kill_all(&mut self) {
        let mut reg = children();
        for mut ch in self.children.drain(..) {
            let _ = ch.kill();
            let _ = ch.wait();
            let pid = ch.id() as i32;
            reg.retain(|&p| p != pid);
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// On Ctrl-C or SIGTERM: SIGKILL every worker spawned here, then exit 130.
/// Installing twice is harmless (the second call does nothing).
pub fn kill_on_ctrlc() {
    let _ = ctrlc::set_handler(|| {
        for &pid in children().iter() {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        std::process::exit(130);
    });
}

/// For a worker: die with SIGKILL when the parent process dies.
///
/// # Errors
/// If the kernel refuses, or the parent is already gone.
pub fn die_with_parent() -> anyhow::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
    if nix::unistd::getppid() == Pid::from_raw(1) {
        anyhow::bail!("the parent is already gone");
    }
    Ok(())
}

/// A master over `n` workers running as threads of this process, connected
/// over loopback TCP like remote ones (tests, and machines with one process).
///
/// # Errors
/// If binding, joining or setup fails.
pub fn in_process<E: crate::evolve::Evolve>(
    model: &E,
    n: usize,
    registry: crate::registry::Registry,
    cfg: crate::master::MasterConfig,
) -> Result<crate::master::Master<E>, crate::Error> {
    let secret = Secret::random();
    let l = crate::master::listen::Listener::bind("127.0.0.1:0", secret.clone())?;
    let addr = l.local_addr()?;
    for _ in 0..n {
        // Detached: each thread ends when the master closes its connection.
        let _ = crate::worker::spawn_thread(addr, secret.clone(), registry.clone());
    }
    let joined = l.accept(n, std::time::Duration::from_secs(30))?;
    crate::master::Master::new(model, joined, cfg)
}
