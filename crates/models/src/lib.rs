//! State-space models for the particle filter of `statepipe-cluster`
//! ([`statepipe_cluster::pf`]), as an application keeps its models: outside
//! the engine, registered with the workers that run them.
//!
//! - [`Nile`]: the local-level model of the Nile's annual flow, whose exact
//!   log-likelihood the Kalman filter ([`kalman::local_level`]) gives, so a
//!   distributed run can be checked against the truth.
//! - [`Pk`]: a one-compartment pharmacokinetic model integrated by RK4, whose
//!   cost per call is set by its number of substeps.
//!
//! ```
//! use statepipe_cluster::{pf, Local};
//! use statepipe_models::Nile;
//!
//! let nile = Nile::bundled();
//! let mut engine = Local::new(pf::Bootstrap(nile.clone()), 1);
//! let cfg = pf::PfConfig { particles: 400, islands: 4, seed: 1 };
//! let r = pf::run(&mut engine, &nile, cfg, |_| {}).unwrap();
//! let (exact, _) = nile.exact();
//! assert!((r.loglik - exact).abs() < 5.0);
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod kalman;
mod nile;
mod pk;

pub use nile::{CsvError, Nile, NILE_CSV};
pub use pk::{Pk, PkState};
