//! What a master's socket driver does for the scheduler.

use std::time::Duration;

use super::sched::Scheduler;

/// Moves frames between the scheduler and the sockets.
pub(crate) trait Driver: Send {
    /// Sends `sched.out` and feeds responses to `sched` until every live
    /// worker has answered, or until the failure grace period has passed
    /// (then calls [`Scheduler::abandon`]).
    fn run(&mut self, sched: &mut Scheduler);
    /// Time spent handling events rather than waiting, if known.
    fn busy(&self) -> Option<Duration>;
    /// Tells workers to exit and closes the connections.
    fn close(&mut self, sched: &mut Scheduler);
    /// Takes over more authenticated connections, numbered after the
    /// existing ones.
    ///
    /// # Errors
    /// If the driver cannot take workers mid-run, or a socket fails.
    fn add(&mut self, streams: Vec<std::net::TcpStream>) -> std::io::Result<()>;
}
