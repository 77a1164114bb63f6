//! The type-erased parts a [`Pipeline`](crate::Pipeline) is made of.
//!
//! A [`Node`](common::Node) is one construct of the description (a stage, a sequence, a
//! fan-out, a shard, ...) with its input and output types visible and
//! everything else (machine, state, branch types) hidden behind `dyn`. The
//! sequential interpreter pushes one item at a time, depth first; the drawing
//! walks the same tree. The deployment walks it too, to place and lower each part
//! (`runtime::lower`).

pub(crate) mod common;
pub(crate) mod fork;
pub(crate) mod route;
pub(crate) mod stage;
