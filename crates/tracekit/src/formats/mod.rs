//! One module per format: `info`, `dump` and `validate` (and the format's own commands).
//! Each receives the opened [`Input`] and a [`Ctx`] and writes to `ctx.out`.

pub mod amber;
pub mod dcfg;
pub mod dcfg_trace;
pub mod gdb_tfile;
pub mod x64dbg;

use std::io::Write;

use crate::{CliError, Format, FormatOptions, Input, Progress};

/// What a format's command gets besides its input.
pub struct Ctx<'a> {
    /// Standard output (buffered). Write errors propagate; a closed pipe ends quietly.
    pub out: &'a mut dyn Write,
    /// Standard error, for warnings and diagnostics (not for the final error).
    pub err: &'a mut dyn Write,
    /// `info --json`.
    pub json: bool,
    /// Format-specific options from the command line.
    pub opts: &'a FormatOptions,
    /// Progress through the input (bytes).
    pub progress: Progress,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("json", &self.json)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// The commands every format answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Summary of the file (`--json` for machine-readable output).
    Info,
    /// One JSON line per record.
    Dump,
    /// Full check; `ok` or the first error.
    Validate,
}

/// Runs `cmd` on `input` read as `format`.
///
/// # Errors
///
/// Whatever the format's command fails with.
pub fn run(format: Format, cmd: Command, input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    match (format, cmd) {
        (Format::X64dbg, Command::Info) => x64dbg::info(input, ctx),
        (Format::X64dbg, Command::Dump) => x64dbg::dump(input, ctx),
        (Format::X64dbg, Command::Validate) => x64dbg::validate(input, ctx),
        (Format::GdbTfile, Command::Info) => gdb_tfile::info(input, ctx),
        (Format::GdbTfile, Command::Dump) => gdb_tfile::dump(input, ctx),
        (Format::GdbTfile, Command::Validate) => gdb_tfile::validate(input, ctx),
        (Format::Dcfg, Command::Info) => dcfg::info(input, ctx),
        (Format::Dcfg, Command::Dump) => dcfg::dump(input, ctx),
        (Format::Dcfg, Command::Validate) => dcfg::validate(input, ctx),
        (Format::DcfgTrace, Command::Info) => dcfg_trace::info(input, ctx),
        (Format::DcfgTrace, Command::Dump) => dcfg_trace::dump(input, ctx),
        (Format::DcfgTrace, Command::Validate) => dcfg_trace::validate(input, ctx),
        (Format::Tt6 | Format::Tt6e | Format::AmberFull, Command::Info) => {
            amber::info(format, input, ctx)
        }
        (Format::Tt6 | Format::Tt6e | Format::AmberFull, Command::Dump) => {
            amber::dump(format, input, ctx)
        }
        (Format::Tt6 | Format::Tt6e | Format::AmberFull, Command::Validate) => {
            amber::validate(format, input, ctx)
        }
    }
}
