//! `tracekit state`: every named register before instruction N (or those `--regs` names),
//! as an aligned table or, with `--json`, `{"i":N,"thread":T,"regs":{"rax":"0x…",…}}`;
//! with `--disasm`, the instruction at N too (`"asm"` in the JSON). The lookup itself is
//! `trace_analyses::state`.

use std::ffi::OsString;
use std::io::Write;

use clap::Args;
use trace_analyses::state::state;
use trace_registry::{Handler, Input, Options};

use super::args;
use crate::{CliError, Progress};

/// Arguments of `tracekit state`.
#[derive(Debug, Clone, Args)]
pub struct StateArgs {
    /// The trace file (x64dbg, gdb-tfile, amber FULL), or - for stdin.
    pub file: OsString,
    /// The instruction (0-based; a tfile's frame number): the registers before it.
    #[arg(long, value_name = "N", value_parser = args::count, allow_negative_numbers = true)]
    pub at: u64,
    /// Only these registers, in this order (`--regs rax,rsp,rip`; a name `state` prints).
    #[arg(long, value_name = "REG,…", value_delimiter = ',')]
    pub regs: Vec<String>,
    /// One JSON line: `{"i":N,"thread":T,"regs":{"rax":"0x…",…}}` (with `--disasm`,
    /// `"asm"` after `"thread"`).
    #[arg(long)]
    pub json: bool,
}

/// Prints the registers before instruction `--at`.
///
/// # Errors
///
/// A format without registers, `--at` past the end or a register in `--regs` the trace
/// does not have (exit 2), a file damaged before the instruction (exit 1), or a write
/// error.
pub fn run(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &StateArgs,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let mut ctx = super::ctx(options, &mut progress, err);
    let found = state(handler, &mut input, &mut ctx, args.at);
    drop(ctx);
    progress.finish();
    let mut found = found?;
    if !args.regs.is_empty() {
        found = found.only(&args.regs).map_err(CliError::Usage)?;
    }
    if args.json {
        writeln!(out, "{}", found.to_json())?;
    } else {
        out.write_all(found.to_text().as_bytes())?;
    }
    Ok(())
}
