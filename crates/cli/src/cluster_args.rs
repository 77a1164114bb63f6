//! The cluster commands' choices as the command line names them, and what
//! each means to `statepipe-cluster`.

use statepipe_cluster::config::{Recovery, StealVia};
use statepipe_cluster::MasterImpl;

/// The master implementation, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MasterArg {
    /// One thread, one `mio` event loop (the default).
    EventLoop,
    /// A thread per worker around a shared lock.
    Threaded,
}

impl From<MasterArg> for MasterImpl {
    fn from(m: MasterArg) -> Self {
        match m {
            MasterArg::EventLoop => MasterImpl::EventLoop,
            MasterArg::Threaded => MasterImpl::Threaded,
        }
    }
}

/// Recovery from lost workers, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RecoveryArg {
    /// Fail the run.
    Off,
    /// Keep copies on the master; rerun elsewhere.
    MasterCopy,
    /// Keep each worker's states on another worker (its buddy); promote
    /// them and rerun there.
    Buddy,
    /// Buddy for large states, master copies otherwise (by mean state size).
    Auto,
}

impl From<RecoveryArg> for Recovery {
    fn from(r: RecoveryArg) -> Self {
        match r {
            RecoveryArg::Off => Recovery::Off,
            RecoveryArg::MasterCopy => Recovery::MasterCopy,
            RecoveryArg::Buddy => Recovery::Buddy,
            RecoveryArg::Auto => Recovery::Auto,
        }
    }
}

/// The route of stolen states, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StealViaArg {
    /// Victim → master → thief.
    Master,
    /// Victim → thief directly.
    Peer,
}

impl From<StealViaArg> for StealVia {
    fn from(s: StealViaArg) -> Self {
        match s {
            StealViaArg::Master => StealVia::Master,
            StealViaArg::Peer => StealVia::Peer,
        }
    }
}
