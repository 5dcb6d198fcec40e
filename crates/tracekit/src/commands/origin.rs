//! `tracekit origin FILE --at N REG|ADDR[:LEN]`: where the value of a register or of memory
//! before instruction N came from, one hop per writer, following copies back to a
//! computation, a system call, the trace's start or an unknown source. A line per hop, or
//! JSON Lines with `--json`. The work is `trace_analyses::origin`.

use std::ffi::OsString;
use std::io::Write;

use clap::Args;
use trace_analyses::origin::{DEFAULT_MAX_HOPS, OriginQuery, Target, origin};
use trace_registry::{Handler, Input, Options};

use super::args;
use crate::{CliError, Progress};

/// Arguments of `tracekit origin`.
#[derive(Debug, Clone, Args)]
pub struct OriginArgs {
    /// The x86/x64 trace file (x64dbg, Tenet), or - for stdin.
    pub file: OsString,
    /// The instruction (0-based): the value before it.
    #[arg(long, value_name = "N", value_parser = args::count, allow_negative_numbers = true)]
    pub at: u64,
    /// A register as `state` names it (`rax`, `eax`, `al`, `xmm0`), or memory: ADDR
    /// (8 bytes) or ADDR:LEN (1 to 64 bytes), hex `0x…` or decimal.
    #[arg(value_name = "REG|ADDR[:LEN]", value_parser = parse_target)]
    pub target: Target,
    /// One JSON line per hop:
    /// `{"i":…,"thread":…,"pc":"0x…","asm":"…","from":"rax"|"0x…:8"|null,"kind":"copy"|…,"loc":…}`.
    #[arg(long)]
    pub json: bool,
    /// The most hops to follow.
    #[arg(long, value_name = "K", default_value_t = DEFAULT_MAX_HOPS, value_parser = max_hops)]
    pub max_hops: usize,
}

fn parse_target(s: &str) -> Result<Target, String> {
    s.parse()
}

fn max_hops(s: &str) -> Result<usize, String> {
    let n = args::positive_count(s)?;
    usize::try_from(n).map_err(|_| format!("{n} hops is too many"))
}

/// Prints the hops.
///
/// # Errors
///
/// A trace that is not x86/x64 or has no instruction stream, a register the trace's
/// instruction set does not have, `--at` past the end (exit 2); a damaged file (exit 1);
/// a write error.
pub fn run(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &OriginArgs,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let query = OriginQuery {
        at: args.at,
        target: args.target.clone(),
        max_hops: args.max_hops,
    };
    let mut ctx = super::ctx(options, &mut progress, err);
    let found = origin(handler, &mut input, &mut ctx, &query);
    drop(ctx);
    progress.finish();
    let found = found?;
    if args.json {
        out.write_all(found.to_json_lines().as_bytes())?;
    } else {
        out.write_all(found.to_text().as_bytes())?;
    }
    Ok(())
}
