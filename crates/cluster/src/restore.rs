//! Engines whose run can be recorded and gone back to: what a driver
//! needs to roll back to a checkpoint instead of failing.

use crate::auto::Auto;
use crate::engine::Engine;
use crate::error::Error;
use crate::evolve::Evolve;
use crate::listen::Joined;
use crate::local::Local;
use crate::master::Master;
use crate::snapshot::Snapshot;

/// An [`Engine`] whose run can be recorded between two operations
/// ([`Restore::snapshot`]) and gone back to ([`Restore::rollback`]), with
/// the same bits from there on: the generators and ids of a step depend on
/// `(seed, step, parent)` only. [`Master`], [`Local`] and [`Auto`] are.
pub trait Restore<E: Evolve>: Engine<E> {
    /// The run as it stands (see [`Master::snapshot`]).
    ///
    /// # Errors
    /// As [`Master::snapshot`].
    fn snapshot(&mut self) -> Result<Snapshot, Error>;

    /// Goes back to `to`, a snapshot of this run (see [`Master::rollback`]).
    ///
    /// # Errors
    /// As [`Master::rollback`].
    fn rollback(&mut self, to: &Snapshot) -> Result<(), Error>;
}

impl<E: Evolve> Restore<E> for Master<E> {
    fn snapshot(&mut self) -> Result<Snapshot, Error> {
        Master::snapshot(self)
    }

    fn rollback(&mut self, to: &Snapshot) -> Result<(), Error> {
        Master::rollback(self, to)
    }
}

impl<E: Evolve> Restore<E> for Local<E>
where
    E::State: Clone,
{
    fn snapshot(&mut self) -> Result<Snapshot, Error> {
        Local::snapshot(self)
    }

    fn rollback(&mut self, to: &Snapshot) -> Result<(), Error> {
        self.restore(to)
    }
}

impl<E, S> Restore<E> for Auto<E, S>
where
    E: Evolve + Clone,
    E::State: Clone,
    S: FnOnce() -> Result<Vec<Joined>, Error>,
{
    fn snapshot(&mut self) -> Result<Snapshot, Error> {
        Auto::snapshot(self)
    }

    fn rollback(&mut self, to: &Snapshot) -> Result<(), Error> {
        Auto::rollback(self, to)
    }
}
