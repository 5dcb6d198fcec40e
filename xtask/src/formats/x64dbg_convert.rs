//! The benchmark rows of the x64dbg conversions (`convert --to tenet|din|tfile`), shared by
//! the Tenet and gdb-tfile hooks: one synthetic x64dbg input, the instruction stream alone
//! (the conversions' input, their own baseline) and each conversion into a counting writer,
//! all from `trace_sinks::testgen` (what the criterion bench `convert` runs too).

use std::sync::Arc;

pub use trace_sinks::testgen::{to_din, to_tenet, to_tfile, x64dbg_input as input};

use crate::bench::BenchCase;

/// A conversion row: its name, its unit and what it runs.
pub type Conversion<'a> = (&'a str, &'static str, fn(&Arc<[u8]>) -> u64);

/// The rows: first the instruction stream alone (named `steps_name`), then each
/// conversion `(name, unit, run)`, all over one input, which each run shares (as
/// `convert` reads a mapped file) rather than copies.
pub fn rows(input: Vec<u8>, steps_name: &str, conversions: &[Conversion]) -> Vec<BenchCase> {
    let input = Arc::new(input);
    let steps: Conversion = (steps_name, "instrs", trace_sinks::testgen::steps);
    std::iter::once(&steps)
        .chain(conversions)
        .map(|&(name, unit, run)| BenchCase::shared(name, &input, unit, run))
        .collect()
}
