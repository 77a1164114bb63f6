//! Deploying a pipeline: stations on workers, rings between them.
//!
//! [`Pipeline::deploy`] cuts the pipeline into *units* (stages, constructs
//! run whole, shard merges), places them on workers by a [`Plan`] (by
//! default [`Plan::balanced`] over the CPUs this process may use), fuses
//! neighbours on the same worker into one *station* (direct calls, no queue,
//! no atomic), and connects stations on different workers with
//! `statepipe-ring` rings. Shard copies run on their own stations; a merge
//! restores input order. Everything it computes equals
//! [`Pipeline::run_sequential`]: the same outputs in the same order, the
//! same failures, the same final states.
//!
//! ```
//! use statepipe_pipeline::{machine, Config, Pipeline};
//!
//! let p = Pipeline::map("parse", |s: String| s.len() as u64)
//!     .then(Pipeline::shard(2, |k| Pipeline::map(&format!("square {k}"), |n: u64| n * n)))
//!     .then(Pipeline::stage("total", 0u64, machine::step(|t: &mut u64, n: u64| {
//!         *t += n;
//!         *t
//!     })));
//! let run = p.deploy(&Config::new().workers(2)).unwrap()
//!     .run(["a", "bb", "ccc"].map(String::from))
//!     .unwrap();
//! assert_eq!(run.outputs, [1, 5, 14]);
//! assert_eq!(run.state::<u64>("total"), Some(&14));
//! ```

pub(crate) mod barrier;
pub(crate) mod checkpointing;
pub(crate) mod compile;
pub(crate) mod config;
pub(crate) mod cycle;
pub(crate) mod deploy;
pub(crate) mod doorbell;
pub(crate) mod edge;
pub(crate) mod error;
pub(crate) mod fork;
pub(crate) mod graph;
pub(crate) mod inject;
pub(crate) mod io;
pub(crate) mod lower;
pub(crate) mod metrics;
pub(crate) mod plan;
pub(crate) mod ring_sink;
pub(crate) mod route;
pub(crate) mod running;
pub(crate) mod simulate;
pub(crate) mod station;
pub(crate) mod worker;
