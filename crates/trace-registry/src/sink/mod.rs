//! Outputs over typed rows: each works for every format.

pub mod din;
mod jsonl;
pub mod native;
pub mod tenet;
pub mod tfile;

pub use jsonl::JsonLines;
#[cfg(feature = "parquet")]
pub mod parquet;
