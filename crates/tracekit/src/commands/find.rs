//! `tracekit find`: the frames of a GDB tracepoint file that match `--pc`, `--tracepoint`,
//! `--range`, `--outside` and `--mem` (all given must hold; none: every frame), as frame
//! numbers one per line, or JSON Lines with `--json`. The search itself is
//! `trace_registry::formats::gdb_tfile::find`.

use std::ffi::OsString;
use std::io::Write;
use std::ops::Range;

use clap::Args;
use trace_registry::formats::gdb_tfile::find::{FindQuery, MemQuery, find};
use trace_registry::{Handler, Input, Options};

use super::args::{self, AddrLen};
use crate::{CliError, Progress};

/// Arguments of `tracekit find`.
#[derive(Debug, Clone, Args)]
pub struct FindArgs {
    /// The GDB tracepoint file (tfile), or - for stdin.
    pub file: OsString,
    /// Frames whose pc (the collected pc register; for a frame without registers, its
    /// tracepoint's address) is ADDR.
    #[arg(long, value_name = "ADDR", value_parser = args::number)]
    pub pc: Option<u64>,
    /// Frames of tracepoint N (the file's numbering).
    #[arg(long, value_name = "N", value_parser = args::number)]
    pub tracepoint: Option<u64>,
    /// Frames whose pc is in A:B (end-exclusive).
    #[arg(long, value_name = "A:B", value_parser = args::range)]
    pub range: Option<Range<u64>>,
    /// Frames whose pc is outside A:B (end-exclusive).
    #[arg(long, value_name = "A:B", value_parser = args::range)]
    pub outside: Option<Range<u64>>,
    /// Frames whose collected memory covers any byte of ADDR:LEN (a bare ADDR: one word
    /// of the target).
    #[arg(long, value_name = "ADDR[:LEN]", value_parser = args::addr_len)]
    pub mem: Option<AddrLen>,
    /// One JSON line per frame: `{"frame":N,"tracepoint":T,"pc":"0x…"}`.
    #[arg(long)]
    pub json: bool,
}

/// Prints the matching frames as they are found.
///
/// # Errors
///
/// A non-tfile input (exit 2), a damaged file (after the matches before the damage), or
/// a write error.
pub fn run(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &FindArgs,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let query = FindQuery {
        pc: args.pc,
        tracepoint: args.tracepoint,
        range: args.range.clone(),
        outside: args.outside.clone(),
        mem: args.mem.map(|m| MemQuery {
            addr: m.addr,
            len: m.len,
        }),
    };
    let mut ctx = super::ctx(options, &mut progress, err);
    let found = find(handler, &mut input, &mut ctx, &query, |m| {
        if args.json {
            writeln!(out, "{}", m.to_json())?;
        } else {
            writeln!(out, "{}", m.frame)?;
        }
        Ok(())
    });
    drop(ctx);
    progress.finish();
    found?;
    Ok(())
}
