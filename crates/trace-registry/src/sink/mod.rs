//! Outputs over typed rows: each works for every format.

mod jsonl;

pub use jsonl::JsonLines;
