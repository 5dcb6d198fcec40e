//! `tracekit record [-o OUT] [--format x64dbg|tenet] [--range A:B]… [--module NAME]…
//! [--max N] -- PROG ARGS…`: runs PROG
//! under ptrace and writes its trace (`tracekit_record`), then exits with PROG's exit
//! status (128 + the signal that killed it). The program starts through this binary
//! itself, re-executed as `tracekit __traceme -- PROG ARGS…` ([`traceme`]). The trace is
//! written under a temporary name and renamed when complete; `--format tenet` converts
//! the x64dbg trace to one Tenet file per thread (`OUT.<thread>.log`) as `convert --to
//! tenet` does.

use std::ffi::OsString;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use trace_registry::Options;
use trace_registry::output::AtomicFile;
use tracekit_record::{Error, Launch, Summary};

use super::args;
use crate::CliError;

/// Arguments of `tracekit record`.
#[derive(Debug, Clone, Args)]
pub struct RecordArgs {
    /// The trace to write (default: PROG's file name + `.trace64`, or for `--format tenet`
    /// the prefix of the `PREFIX.<thread>.log` files, default PROG's file name).
    #[arg(long, short, value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// The format to write: `x64dbg` (one `.trace64` file) or `tenet` (one
    /// `PREFIX.<thread>.log` file per thread).
    #[arg(long, value_name = "FORMAT", value_parser = ["x64dbg", "tenet"], default_value = "x64dbg")]
    pub format: String,
    /// Stop recording after N recorded instructions (the program then runs on untraced).
    #[arg(long, value_name = "N", value_parser = args::number)]
    pub max: Option<u64>,
    /// Record only instructions at addresses A (inclusive) to B (exclusive), decimal or hex
    /// (0x…); repeatable; A must be an instruction's address. Outside the ranges the
    /// program runs at full speed; a thread comes back into the recording at a range's
    /// start A, or where a call out of a range returns.
    #[arg(long = "range", value_name = "A:B", value_parser = range)]
    pub ranges: Vec<(u64, u64)>,
    /// Record only the code of an image mapped in the process: a path or file name as
    /// /proc/PID/maps shows it (the program's, `libc.so.6`, `[vdso]`); repeatable. Found
    /// when the program reaches its entry point (after the loader mapped its libraries); a
    /// thread comes back into the recording at any of its function symbols or where a call
    /// out of it returns.
    #[arg(long = "module", value_name = "NAME")]
    pub modules: Vec<String>,
    /// Zero the program's AT_RANDOM bytes and what getrandom returns (the seeds of glibc's
    /// stack canary, pointer guard and malloc), so that two runs differ less (`diff`).
    #[arg(long)]
    pub fixed_random: bool,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "PROG ARGS")]
    pub command: Vec<OsString>,
}

/// Arguments of the hidden helper `tracekit __traceme -- PROG ARGS…`.
#[derive(Debug, Clone, Args)]
pub struct TracemeArgs {
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
}

/// The helper: becomes a tracee and executes the program; returns only on failure.
///
/// # Errors
///
/// Why the program could not be executed (exit 1 before its first instruction, which
/// the recorder reports).
pub fn traceme(args: &TracemeArgs) -> Result<(), CliError> {
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| CliError::Usage("no program given".into()))?;
    Err(CliError::Failed(
        tracekit_record::exec_traced(program, rest).to_string(),
    ))
}

/// `A:B`: two [`args::number`]s, A below B.
fn range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not a range A:B"))?;
    let (a, b) = (args::number(a)?, args::number(b)?);
    if a < b {
        Ok((a, b))
    } else {
        Err(format!(
            "{s:?}: the end must be above the start (B is exclusive)"
        ))
    }
}

fn record_error(e: Error) -> CliError {
    match e {
        Error::Unsupported => CliError::Usage(e.to_string()),
        e => CliError::Failed(e.to_string()),
    }
}

/// Records the program; prints the summary to `err`; the program's exit status becomes
/// [`CliError::ProgramExit`] when it is not 0.
///
/// # Errors
///
/// The output exists and `force` is not set; the recording or a write fails.
pub fn run(
    args: &RecordArgs,
    force: bool,
    quiet: bool,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let tenet = args.format == "tenet";
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| CliError::Usage("no program given".into()))?;
    let name = Path::new(program)
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
    let helper = std::env::current_exe()
        .map_err(|e| CliError::io("cannot find the tracekit executable", e))?;
    let launch = Launch {
        helper,
        helper_args: vec!["__traceme".into(), "--".into()],
    };
    let opts = tracekit_record::Options {
        max: args.max,
        fixed_random: args.fixed_random,
        path: program.to_string_lossy().into_owned(),
        ranges: args.ranges.clone(),
        modules: args.modules.clone(),
    };
    let trace_path = match (&args.output, tenet) {
        (Some(o), false) => o.clone(),
        (None, false) => PathBuf::from(format!("{name}.trace64")),
        // Tenet: an x64dbg trace first, beside the Tenet files, converted then removed.
        (o, true) => {
            let mut p = o
                .clone()
                .unwrap_or_else(|| PathBuf::from(&name))
                .into_os_string();
            p.push(format!(".record-{}.trace64", std::process::id()));
            PathBuf::from(p)
        }
    };
    if !tenet {
        super::refuse_existing(&trace_path, force)?;
    }
    let cannot = |what: &str, p: &Path| {
        let what = format!("cannot {what} {}", p.display());
        move |e| CliError::io(what, e)
    };
    let file = AtomicFile::create(&trace_path).map_err(cannot("create", &trace_path))?;
    let notes: Box<dyn FnMut(&str)> = Box::new(|line| eprintln!("{line}"));
    let (out, summary) =
        tracekit_record::record(&launch, program, rest, BufWriter::new(file), &opts, notes)
            .map_err(record_error)?;
    let file = out.into_inner().map_err(|e| {
        CliError::io(
            format!("cannot write {}", trace_path.display()),
            e.into_error(),
        )
    })?;
    file.commit().map_err(cannot("write", &trace_path))?;
    if !quiet {
        print_summary(&summary, &trace_path, tenet, err)?;
    }
    if tenet {
        let prefix = args.output.clone().unwrap_or_else(|| PathBuf::from(&name));
        let converted = trace_registry::open(trace_path.as_os_str(), Some("x64dbg"))
            .map_err(CliError::from)
            .and_then(|(input, h)| {
                super::to_tenet::convert(h, input, &Options::default(), &prefix, force, err)
            });
        let _ = std::fs::remove_file(&trace_path);
        converted?;
    }
    match summary.exit.code() {
        0 => Ok(()),
        c => Err(CliError::ProgramExit(c)),
    }
}

fn print_summary(
    s: &Summary,
    path: &Path,
    tenet: bool,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let secs = s.elapsed.as_secs_f64();
    let rate = if secs > 0.0 {
        s.instructions as f64 / secs
    } else {
        0.0
    };
    let exit = match s.exit {
        tracekit_record::Exit::Code(c) => format!("exit status {c}"),
        tracekit_record::Exit::Signal(sig) => format!("killed by signal {sig}"),
        tracekit_record::Exit::Unknown => "exit unknown".into(),
    };
    let to = if tenet {
        String::new()
    } else {
        format!(" -> {}", path.display())
    };
    writeln!(
        err,
        "tracekit record: {} instructions, {} thread(s), {secs:.2} s, {rate:.0} instructions/s, {exit}{to}",
        s.instructions, s.threads
    )?;
    if s.stopped_at_max {
        writeln!(
            err,
            "tracekit record: stopped at --max; the program ran on untraced"
        )?;
    }
    if !s.ranges.is_empty() {
        writeln!(
            err,
            "tracekit record: {} range(s); left them {} time(s), running at full speed outside",
            s.ranges.len(),
            s.gaps
        )?;
    }
    if s.cut_words > 0 {
        writeln!(
            err,
            "tracekit record: {} memory words not recorded (a block holds 32 words)",
            s.cut_words
        )?;
    }
    Ok(())
}
