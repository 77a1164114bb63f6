//! Classic parallel workloads on statepipe's pinned workers.
//!
//! - [`fasta`]: the DNA generator of the Computer Language Benchmarks Game;
//! - [`kmer`]: its k-nucleotide benchmark (k-mer frequencies and counts);
//! - [`graph500`]: the Graph500 breadth-first search benchmark (Kronecker
//!   generator, compressed sparse rows, direction-optimizing BFS, the
//!   specification's validation and statistics).
//!
//! Workers are threads pinned one per usable CPU
//! ([`statepipe_sys::cpus::usable_cpus`]); the number is a parameter of
//! every parallel function, so results can be checked to be independent of
//! it. This crate has no command line: `statepipe fasta`, `statepipe
//! knucleotide` and `statepipe graph500` (crates/cli) drive it.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod fasta;
pub mod graph500;
pub mod kmer;
mod mem;

/// The number of workers to start: one per CPU this process may use.
pub fn default_workers() -> usize {
    statepipe_sys::cpus::usable_cpus().count.max(1)
}
