//! Outputs over typed rows: each works for every format.

mod jsonl;
pub mod tenet;
pub mod tfile;

pub use jsonl::JsonLines;
#[cfg(feature = "parquet")]
pub mod parquet;
