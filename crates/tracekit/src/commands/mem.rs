//! `tracekit mem`: the memory bytes as known before instruction N, as a hex dump (`??`
//! unknown, `*` inferred) with the instructions they came from or, with `--json`,
//! `{"i":N,"addr":"0x…","len":L,"bytes":[…],"source":[…],"inferred":[…]}`. The pass itself
//! is `trace_registry::analyses::mem`.

use std::ffi::OsString;
use std::io::Write;

use clap::Args;
use trace_registry::analyses::mem::{MemQuery, mem};
use trace_registry::{Handler, Input, Options};

use super::args::{self, AddrLen};
use crate::{CliError, Progress};

/// Arguments of `tracekit mem`.
#[derive(Debug, Clone, Args)]
pub struct MemArgs {
    /// The trace file (x64dbg, gdb-tfile; TT6/TT6E/FULL record no values), or - for stdin.
    pub file: OsString,
    /// The instruction (0-based; a tfile's frame number): the memory before it.
    #[arg(long, value_name = "N", value_parser = args::number)]
    pub at: u64,
    /// The first address (`ADDR:LEN` also works).
    #[arg(value_name = "ADDR", value_parser = args::addr_len)]
    pub addr: AddrLen,
    /// How many bytes, at most 1 MiB (default: one word of the trace's ISA).
    #[arg(value_name = "LEN", value_parser = args::number)]
    pub len: Option<u64>,
    /// One JSON line:
    /// `{"i":N,"addr":"0x…","len":L,"bytes":[…],"source":[…],"inferred":[…]}`.
    #[arg(long)]
    pub json: bool,
}

/// Prints the memory before instruction `--at`.
///
/// # Errors
///
/// Bad arguments, a format without an instruction stream or `--at` past the end (exit 2);
/// a file damaged before the instruction (exit 1), or after it while bytes were still
/// unknown (exit 1, after printing what was found); a write error.
pub fn run(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &MemArgs,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let len = match (args.addr.len, args.len) {
        (Some(_), Some(_)) => {
            return Err(CliError::Usage(
                "give the length once: `ADDR LEN` or `ADDR:LEN`".into(),
            ));
        }
        (a, b) => a.or(b),
    };
    let query = MemQuery {
        at: args.at,
        addr: args.addr.addr,
        len,
    };
    let mut ctx = super::ctx(options, &mut progress, err);
    let found = mem(handler, &mut input, &mut ctx, &query);
    drop(ctx);
    progress.finish();
    let (memory, damage) = found?;
    if args.json {
        writeln!(out, "{}", memory.to_json())?;
    } else {
        out.write_all(memory.to_text().as_bytes())?;
    }
    match damage {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
