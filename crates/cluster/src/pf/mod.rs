//! A bootstrap particle filter on any [`Engine`]: the flagship job.
//!
//! Particles are states on workers. Each step the master draws every
//! particle's number of children by systematic resampling from the last
//! weights and sends it as the input; the evolve propagates each child
//! through the transition and returns its log-weight and a summary. A
//! particle with no children dies.
//!
//! The particles are split into `islands` independent filters run in the
//! same `evolve_many` calls; each gives an unbiased likelihood estimate
//! Ẑ_r, the estimate is log(mean Ẑ_r), and its Monte-Carlo standard error
//! comes from the spread of the Ẑ_r (delta method):
//! se ≈ sd(Ẑ_r) / (√R · mean Ẑ_r).
//!
//! [`run_checkpointed`] records checkpoints as the run goes and, when an
//! operation fails because no copy of some state survived
//! ([`Error::WorkerLost`](crate::Error::WorkerLost)), goes back to the last
//! one on the workers left and carries on, ending with the bits of a run
//! without the loss.
//!
//! [`Engine`]: crate::Engine

mod between;
mod filter;
mod particle;
mod rollback;
mod weights;

pub use filter::{run, run_from, systematic, Bootstrap, PfConfig, PfResult, PfState, SsModel};
pub use particle::{PfInput, PfOutput};
pub use rollback::{run_checkpointed, Checkpoints, Progress};
