//! `tracekit calls FILE`: the call tree of an x86/x64 instruction stream, as an indented
//! tree, JSON Lines (`--json`: one line per call in the order of its step, then a
//! `{"summary":…}` line) or folded stacks (`--folded`); and `tracekit flame FILE -o OUT.svg`,
//! the flame graph of those stacks. The work is `trace_analyses::calls`, the symbols
//! `trace_analyses::symbols`, the drawing `trace_sinks::flame`.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use trace_analyses::calls::{Abi, CallsOptions, Done, calls};
use trace_analyses::symbols::{self, Symbols};
use trace_registry::{Handler, Input, Options};

use super::args;
use crate::{CliError, Progress};

/// The options `calls` and `flame` share.
#[derive(Debug, Clone, Args)]
pub struct CallOptions {
    /// The trace file (an x86/x64 instruction stream: x64dbg, Tenet, gdb-tfile), or - for
    /// stdin.
    pub file: OsString,
    /// Only this thread (its id in decimal, as `dump` prints it).
    #[arg(long, value_name = "T", value_parser = args::number, allow_negative_numbers = true)]
    pub thread: Option<u64>,
    /// The calling convention the arguments are read by (default: win64 for Windows x64
    /// traces such as x64dbg's, sysv for other x64, cdecl for 32-bit).
    #[arg(long, value_parser = Abi::NAMES)]
    pub abi: Option<String>,
    /// Name targets by the symbols of FILE (ELF, PE, Mach-O: symbol table and exports),
    /// rebased to BASE where the module was loaded; or of FILE.csv (`address,name` lines).
    /// Repeatable.
    #[arg(long, value_name = "FILE[@BASE]")]
    pub symbols: Vec<String>,
}

/// Arguments of `tracekit calls`.
#[derive(Debug, Clone, Args)]
pub struct CallsArgs {
    /// What to read and how.
    #[command(flatten)]
    pub call: CallOptions,
    /// One JSON line per call (in the order of its step), then `{"summary":{…}}`.
    #[arg(long, conflicts_with = "folded")]
    pub json: bool,
    /// Folded stacks (`thread T;frame;frame count`, one line per distinct stack, counts
    /// summing to the instructions): the input of flame-graph tools.
    #[arg(long)]
    pub folded: bool,
    /// Write here instead of stdout.
    #[arg(long, short, alias = "out", value_name = "PATH")]
    pub output: Option<PathBuf>,
}

/// Arguments of `tracekit flame`.
#[derive(Debug, Clone, Args)]
pub struct FlameArgs {
    /// What to read and how.
    #[command(flatten)]
    pub call: CallOptions,
    /// The SVG to write.
    #[arg(long, short, alias = "out", value_name = "OUT.svg")]
    pub output: PathBuf,
    /// The title (default: the trace's name).
    #[arg(long)]
    pub title: Option<String>,
}

/// The symbols of every `--symbols`.
fn load_symbols(specs: &[String]) -> Result<Option<Symbols>, CliError> {
    if specs.is_empty() {
        return Ok(None);
    }
    let mut s = Symbols::default();
    for spec in specs {
        let (path, base) = symbols::parse_spec(spec);
        s.add_file(&path, base)
            .map_err(|e| CliError::Failed(e.to_string()))?;
    }
    Ok(Some(s))
}

/// Runs the pass, handing each call to `on_call`.
#[allow(clippy::too_many_arguments)] // the command's inputs and the pass's
fn pass(
    handler: &dyn Handler,
    input: &mut Input,
    options: &Options,
    call: &CallOptions,
    symbols: Option<&Symbols>,
    progress: &mut Progress,
    err: &mut dyn Write,
    on_call: &mut dyn FnMut(&trace_analyses::calls::Call) -> Result<(), trace_registry::Error>,
) -> Result<Done, CliError> {
    let opts = CallsOptions {
        abi: call.abi.as_deref().and_then(Abi::parse),
        thread: call.thread,
        symbols,
    };
    let mut ctx = super::ctx(options, progress, err);
    let done = calls(handler, input, &mut ctx, &opts, on_call);
    drop(ctx);
    progress.finish();
    Ok(done?)
}

/// Prints the calls: the tree, `--json` lines or `--folded` stacks.
///
/// # Errors
///
/// A stream that is not x86/x64 (exit 2), a symbol file that cannot be read, a damaged
/// trace (after the calls closed before the damage), or a write error.
pub fn run(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &CallsArgs,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let symbols = load_symbols(&args.call.symbols)?;
    let (json, folded) = (args.json, args.folded);
    let done = pass(
        handler,
        &mut input,
        options,
        &args.call,
        symbols.as_ref(),
        &mut progress,
        err,
        &mut |c| {
            if json {
                writeln!(out, "{}", c.to_json())?;
            } else if !folded {
                writeln!(out, "{}", c.to_text())?;
            }
            Ok(())
        },
    )?;
    if folded {
        for (stack, count) in done.stacks.folded(symbols.as_ref()) {
            writeln!(out, "{stack} {count}")?;
        }
    } else if json {
        writeln!(out, "{}", done.summary.to_json())?;
    } else {
        writeln!(out, "{}", done.summary.to_text())?;
    }
    Ok(())
}

/// Writes the flame graph to `args.output` and says on `err` what it drew (unless `quiet`).
///
/// # Errors
///
/// As [`run`]; the SVG cannot be written.
#[allow(clippy::too_many_arguments)] // the command's inputs, as the other commands take them
pub fn flame(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &FlameArgs,
    force: bool,
    mut progress: Progress,
    quiet: bool,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    super::refuse_existing(&args.output, force)?;
    let symbols = load_symbols(&args.call.symbols)?;
    let title = args
        .title
        .clone()
        .unwrap_or_else(|| input.name().to_string());
    let done = pass(
        handler,
        &mut input,
        options,
        &args.call,
        symbols.as_ref(),
        &mut progress,
        err,
        &mut |_| Ok(()),
    )?;
    let folded = done.stacks.folded(symbols.as_ref());
    let path = &args.output;
    let cannot = |what: &str| {
        let what = format!("cannot {what} {}", path.display());
        move |e| CliError::io(what, e)
    };
    let mut file = trace_registry::output::AtomicFile::create(path).map_err(cannot("create"))?;
    let mut w = std::io::BufWriter::new(&mut file);
    trace_sinks::flame::write_svg(&mut w, &folded, &title, "instructions")
        .map_err(cannot("write"))?;
    w.flush().map_err(cannot("write"))?;
    drop(w);
    file.commit().map_err(cannot("write"))?;
    if quiet {
        return Ok(());
    }
    writeln!(
        err,
        "{}: {} stacks, {} calls, {} instructions",
        path.display(),
        folded.len(),
        done.summary.calls,
        done.summary.instructions
    )?;
    Ok(())
}
