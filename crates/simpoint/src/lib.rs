//! SimPoint's file formats and its clustering method, for the `tracekit bbv`, `simpoint` and
//! `regions` commands.
//!
//! Sources: `specs/notes/bbv-simpoint-notes.md`.
//!
//! - [`bb`]: basic-block vector files (`.bb`): one `T:` line per slice, with `M:` marker lines
//!   between them, as Pin's and LoopPoint's profilers write them.
//! - [`cluster`]: SimPoint 3.2's method (random projection, k-means over k, BIC choice),
//!   implemented from its description, not its code.

pub mod bb;
pub mod cluster;
pub mod regions;
pub mod simpoints;
#[cfg(feature = "testgen")]
pub mod testgen;
