//! `tracekit xref FILE ADDR[:LEN]` and `tracekit xref FILE --pc ADDR`: every access to an
//! address range, or every execution of a pc, as JSON Lines; and `tracekit index FILE`,
//! which writes the sidecar index `xref` (and `state`, `mem`) then answer from. The work
//! is `trace_analyses::xref` and `::index`.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use trace_analyses::xref::{XrefQuery, xref};
use trace_index::{self as index, BuildOptions};
use trace_registry::{Handler, Input, Options};

use super::args::{self, AddrLen};
use crate::{CliError, Progress};

/// Arguments of `tracekit xref`.
#[derive(Debug, Clone, Args)]
pub struct XrefArgs {
    /// The trace file, or - for stdin.
    pub file: OsString,
    /// The addresses: ADDR (one word of the target) or ADDR:LEN; every access that
    /// covers one of their bytes is listed.
    #[arg(value_name = "ADDR[:LEN]", value_parser = args::addr_len, required_unless_present = "pc", conflicts_with = "pc")]
    pub range: Option<AddrLen>,
    /// List the executions of the instruction at ADDR instead.
    #[arg(long, value_name = "ADDR", value_parser = args::number)]
    pub pc: Option<u64>,
}

/// Prints every hit as a JSON line, as it is found.
///
/// # Errors
///
/// A format without an instruction stream (exit 2), a damaged file (after the hits before
/// the damage), or a write error.
pub fn run(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &XrefArgs,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let query = XrefQuery {
        mem: args.range.map(|r| (r.addr, r.len)),
        pc: args.pc,
    };
    let mut ctx = super::ctx(options, &mut progress, err);
    let found = xref(handler, &mut input, &mut ctx, &query, |hit| {
        writeln!(out, "{}", hit.to_json())?;
        Ok(())
    });
    drop(ctx);
    progress.finish();
    found?;
    Ok(())
}

/// Arguments of `tracekit index`.
#[derive(Debug, Clone, Args)]
pub struct IndexArgs {
    /// The trace file (a plain file: the index records its size, time and first bytes).
    pub file: OsString,
    /// Write the index here instead of beside the trace (FILE.tkidx); then pass it to
    /// `xref`, `state` and `mem` with --index.
    #[arg(long, short, alias = "out", value_name = "PATH")]
    pub output: Option<PathBuf>,
}

/// Builds the sidecar index and prints what it holds and its size against the trace's on
/// `err` (unless `quiet`).
///
/// # Errors
///
/// A format without an instruction stream or an input that is not a plain file (exit
/// 2), an index that exists without `force`, a damaged trace (nothing written), or the
/// index cannot be written.
#[allow(clippy::too_many_arguments)] // the command's inputs, as the other commands take them
pub fn build(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &IndexArgs,
    force: bool,
    mut progress: Progress,
    quiet: bool,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let dest = match (&args.output, input.path()) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(trace)) => Some(index::default_path(trace)),
        (None, None) => None,
    };
    if let Some(dest) = &dest {
        super::refuse_existing(dest, force)?;
    }
    let built = {
        let mut ctx = super::ctx(options, &mut progress, err);
        index::build(
            handler,
            &mut input,
            &mut ctx,
            args.output.as_deref(),
            BuildOptions::default(),
        )
    };
    progress.finish();
    let built = built?;
    if quiet {
        return Ok(());
    }
    #[allow(clippy::cast_precision_loss)] // a ratio to print
    let ratio = built.index_bytes as f64 / (built.trace_bytes.max(1) as f64);
    writeln!(
        err,
        "{}: {} steps, {} executions, {} accesses; {} bytes ({:.3} of the trace's {}; seek index {} bytes)",
        built.path.display(),
        built.steps,
        built.executions,
        built.accesses,
        built.index_bytes,
        ratio,
        built.trace_bytes,
        built.seek_bytes
    )?;
    Ok(())
}
