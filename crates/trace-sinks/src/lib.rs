//! The outputs of tracekit, each written once over the model (`trace-model`) and so
//! working for every format:
//!
//! - over typed rows (a [`Visitor`](trace_model::Visitor) of each
//!   [`Record`](trace_model::Record)): [`JsonLines`] (`tracekit dump`), [`native`] values
//!   (the Python package's dicts) and, with the `parquet` feature, `parquet`'s datasets
//!   (`tracekit export`) and Arrow batches (Python's `to_arrow`);
//! - over the instruction stream ([`Steps`](trace_model::steps::Steps)): the conversions
//!   [`din`], [`tenet`] and [`tfile`] (`tracekit convert --to …`);
//! - over folded stacks (`calls --folded`): [`flame`] graphs as SVG (`tracekit flame`).
//!
//! Every file is written under a temporary name and appears only when complete
//! ([`trace_model::output::AtomicFile`]).
//!
//! # Example
//!
//! A trace's records as JSON Lines, what `tracekit dump` prints:
//!
//! ```
//! use trace_registry::{Ctx, Input, Options};
//! use trace_sinks::JsonLines;
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! let options = Options::default();
//! let mut records = handler.records(&mut input, &mut Ctx::new(&options))?;
//! let mut out = JsonLines::new(Vec::new(), records.tables());
//! while let Some(record) = records.next_record() {
//!     let record = record?;
//!     out.write(record.table, record.row())?;
//! }
//! out.flush()?;
//! assert!(out.into_inner().starts_with(b"{\"i\":0,"));
//! # Ok::<(), trace_model::Error>(())
//! ```

pub mod din;
pub mod flame;
mod jsonl;
pub mod native;
pub mod tenet;
pub mod tfile;

pub use jsonl::JsonLines;
#[cfg(feature = "parquet")]
pub mod parquet;
#[cfg(feature = "testgen")]
pub mod testgen;
