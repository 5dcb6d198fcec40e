//! `tracekit mem`: the memory bytes as known before instruction N, as a hex dump (`??`
//! unknown, `*` inferred) with the instructions they came from or, with `--json`,
//! `{"i":N,"addr":"0x…","len":L,"bytes":[…],"source":[…],"inferred":[…]}` (a tfile's
//! answer adds `"earlier":[…]`: the bytes collected at an earlier frame, marked `~` in the
//! text). The address may be a register's value before N plus an offset (`rsp`,
//! `[rbp-8]`): `state`'s lookup, then the memory. The pass itself is
//! `trace_analyses::mem`.

use std::ffi::OsString;
use std::io::Write;

use clap::Args;
use trace_analyses::mem::{MemQuery, mem};
use trace_analyses::state::state;
use trace_registry::steps::RegValue;
use trace_registry::{Ctx, Handler, Input, Options};

use super::args::{self, Address, MemAddr};
use crate::{CliError, Progress};

/// Arguments of `tracekit mem`.
#[derive(Debug, Clone, Args)]
pub struct MemArgs {
    /// The trace file (x64dbg, gdb-tfile; TT6/TT6E/FULL record no values), or - for stdin.
    pub file: OsString,
    /// The instruction (0-based; a tfile's frame number): the memory before it.
    #[arg(long, value_name = "N", value_parser = args::count, allow_negative_numbers = true)]
    pub at: u64,
    /// The first address: a number, a register (`rsp`: its value before N) or a
    /// register plus an offset (`[rsp+0x10]`, `[rbp-8]`); `ADDR:LEN` also works.
    #[arg(value_name = "ADDR", value_parser = args::mem_addr, allow_negative_numbers = true)]
    pub addr: MemAddr,
    /// How many bytes, at most 1 MiB (default: one word of the trace's ISA); `K` and `M`
    /// count KiB and MiB.
    #[arg(value_name = "LEN", value_parser = args::size, allow_negative_numbers = true)]
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
/// Bad arguments, a format without an instruction stream, `--at` past the end or a
/// register the trace does not have there (exit 2); a file damaged before the
/// instruction (exit 1), or after it while bytes were still unknown (exit 1, after
/// printing what was found); a write error.
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
    let addr = match &args.addr.addr {
        Address::Absolute(a) => *a,
        Address::Register { name, .. } => {
            let mut again = another(&mut input)?;
            let plain = Options {
                disasm: false,
                ..options.clone()
            };
            let s = state(handler, &mut again, &mut Ctx::new(&plain), args.at)
                .map_err(CliError::usage_if_unsupported)?;
            let value = s
                .get(name)
                .or_else(|| s.get(&name.to_ascii_lowercase()))
                .ok_or_else(|| {
                    let known: Vec<&str> = s.regs.iter().map(|r| &*r.name).collect();
                    CliError::Usage(format!(
                        "no register {name:?} before {} {}; it has: {}",
                        s.noun,
                        s.i,
                        known.join(", ")
                    ))
                })?;
            let RegValue::Word(w) = value else {
                return Err(CliError::Usage(format!(
                    "{name} is wider than an address ({value})"
                )));
            };
            let addr = args.addr.addr.resolve(*w).ok_or_else(|| {
                CliError::Usage(format!(
                    "{name} is {w:#x} before {} {}: the offset takes it out of the address space",
                    s.noun, s.i
                ))
            })?;
            if !args.json {
                writeln!(out, "{} = {addr:#x}", describe(&args.addr.addr))?;
            }
            addr
        }
    };
    let query = MemQuery {
        at: args.at,
        addr,
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

/// A second input over the same trace, for the register lookup before the memory pass: the
/// same bytes where they are mapped or in memory, or a stream (stdin, a pipe, a compressed
/// file) read into memory first (or spooled): the path is not opened again, since it may
/// be a pipe that has nothing more to give, or name another file by now.
fn another(input: &mut Input) -> Result<Input, CliError> {
    if let Some(shared) = input.share() {
        return Ok(shared);
    }
    input.bytes()?;
    input
        .share()
        .ok_or_else(|| CliError::Usage("a register address needs the trace read twice".into()))
}

/// `[rsp+0x10]`, as the user may have written it.
fn describe(addr: &Address) -> String {
    match addr {
        Address::Absolute(a) => format!("{a:#x}"),
        Address::Register { name, offset: 0 } => name.clone(),
        Address::Register { name, offset } if *offset < 0 => {
            format!("[{name}-{:#x}]", offset.unsigned_abs())
        }
        Address::Register { name, offset } => format!("[{name}+{offset:#x}]"),
    }
}
