//! The analyses users open traces for, written once over the instruction-stream view
//! ([`Steps`](crate::steps::Steps)): the register state and memory at any instruction,
//! cross-references, the diff of two runs, and tfile frame search. Each answer is a value
//! that serialises to the JSON the matching `tracekit` command prints with `--json`.
pub mod bbv;
pub mod diff;
pub mod find;
pub mod index;
pub mod mem;
pub mod state;
pub mod xref;
