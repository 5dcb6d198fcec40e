//! `tracekit`: inspect, query, compare, dump, validate and convert CPU execution traces.
//!
//! The binary is a thin layer over `trace-registry`, which opens any trace and walks its
//! records as typed rows; `info`, `dump` and `validate` are written once, for every format,
//! in [`commands`]. The few format-specific commands (`dot`, `loops`, `convert`, `encode`)
//! are in [`commands`] too. This library half exists so that tests and the fuzzer can drive
//! every command in-process; see [`main_with_args`] and [`run_on_bytes`].
//!
//! ```text
//! tracekit info FILE [--json]     summary of the trace
//! tracekit dump FILE              one JSON line per record
//! tracekit validate FILE [--json]  "ok" (exit 0) or the first error and its offset (exit 1)
//! tracekit merge DIR              amber thread directory → one timeline (JSON Lines)
//! tracekit find FILE --pc ADDR …  frames of a GDB tracepoint file (GDB's tfind)
//! tracekit state FILE --at N      every register before instruction N
//! tracekit mem FILE --at N ADDR [LEN]  memory as known before instruction N (hex dump)
//! tracekit xref FILE ADDR[:LEN]   every access to the range (--pc ADDR: executions)
//! tracekit index FILE [-o PATH]   the sidecar index xref, state and mem answer from
//! tracekit dot FILE               Graphviz drawing of a DCFG
//! tracekit loops FILE             loop statistics of a DCFG (CSV)
//! tracekit convert FILE --to din  any trace with instructions → Dinero IV din
//! tracekit convert FILE --to tenet -o PREFIX  x64dbg trace → Tenet, one file per thread
//! tracekit convert FILE --to tfile -o OUT.tf [--thread T]  one thread → GDB tracepoint file
//! tracekit encode EDGES --dcfg F  JSON Lines edge lists → DCFG-Trace
//! tracekit diff A B               where two traces part and join again (exit 0/1/2)
//! tracekit bbv FILE --slice N -o OUT.bb  basic-block vectors for SimPoint, per thread
//! tracekit simpoint F.bb --max-k K  SimPoint clustering → F.simpoints, F.weights
//! tracekit regions F.bb [-o OUT]  simulation points as LoopPoint-style region CSV
//! tracekit serve FILE [--port N]  trace explorer in the browser (prints its URL)
//! tracekit record -- PROG ARGS    run PROG under ptrace and record it (Linux x86-64)
//! ```
//!
//! FILE is a path or `-` for stdin; `.bz2` and `.gz` inputs are decompressed on the fly.
//! The format is detected from the content (or the `.tt6`/`.tt6e` extension) unless
//! `--format NAME` says otherwise. Errors print `error: … at offset 0x…` and exit 1; usage
//! errors exit 2.

pub mod commands;
mod error;
mod progress;

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};

pub use commands::Command;
pub use error::CliError;
pub use progress::Progress;
pub use trace_registry::{HANDLERS, Handler, Input};

/// The names `--format` accepts: every handler's name and aliases.
fn format_names() -> PossibleValuesParser {
    PossibleValuesParser::new(
        HANDLERS
            .iter()
            .flat_map(|h| std::iter::once(h.name()).chain(h.aliases().iter().copied())),
    )
}

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "tracekit",
    version,
    about = "Inspect, query, compare, dump, validate and convert CPU execution traces"
)]
pub struct Cli {
    /// Read the input as this format instead of detecting it.
    #[arg(long, global = true, value_parser = format_names())]
    pub format: Option<String>,
    /// No progress line on stderr.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Format-specific options.
    #[command(flatten)]
    pub opts: FormatOptions,
    /// What to do.
    #[command(subcommand)]
    pub command: Cmd,
}

/// Options that only some formats use; the others ignore them.
#[derive(Debug, Default, Clone, Args)]
pub struct FormatOptions {
    /// dcfg-trace: the DCFG of the traced run, to map edges to blocks and check counts.
    #[arg(long, global = true, value_name = "FILE")]
    pub dcfg: Option<PathBuf>,
    /// gdb-tfile: the target is big-endian (the file does not say; little by default).
    #[arg(long, global = true)]
    pub big_endian: bool,
    /// amber FULL: the record size (1004 or 1008) instead of detecting it.
    #[arg(long, global = true, value_name = "BYTES")]
    pub record_size: Option<u32>,
    /// dcfg-trace: lenient decoding (cut an overshooting multi-edge group, ignore "" next to
    /// other codes) instead of strict errors.
    #[arg(long, global = true)]
    pub lenient: bool,
    /// Disassemble: x64dbg instructions, tfile frames (x86/x64, with the bytes at pc
    /// collected) and amber records get `asm`; x64dbg memory accesses get `size` and
    /// `access` (read, write, readwrite or unknown) from the instruction's operands.
    #[arg(long, global = true)]
    pub disasm: bool,
    /// tenet: the architecture instead of detecting it from the register names.
    #[arg(long, global = true, value_name = "ARCH", value_parser = ["amd64", "x86"])]
    pub arch: Option<String>,
    /// The sidecar index (`tracekit index`) to use instead of FILE.tkidx beside the trace.
    #[arg(long, global = true, value_name = "PATH")]
    pub index: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Print a summary of a trace file.
    Info {
        /// The trace file, or - for stdin.
        file: OsString,
        /// Machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print every record as one JSON line (JSON Lines).
    Dump {
        /// The trace file, or - for stdin.
        file: OsString,
    },
    /// Check the whole file; print "ok" or the first error with its offset.
    Validate {
        /// The trace file, or - for stdin.
        file: OsString,
        /// Machine-readable JSON: `{"ok":true,…}` or `{"ok":false,"error":…,"offset":…}`.
        #[arg(long)]
        json: bool,
    },
    /// Merge an amber threads directory (`thread_NNN.tt6`/`.tt6e`) into one timeline, one
    /// JSON line per instruction with its `thread` and `seq`.
    Merge {
        /// The directory.
        dir: OsString,
    },
    /// Draw a DCFG (or part of it) as Graphviz DOT.
    Dot(DotArgs),
    /// Loop statistics of a DCFG as CSV.
    Loops {
        /// The DCFG file, or - for stdin.
        file: OsString,
    },
    /// Convert a trace to another format: any trace with an instruction stream (amber,
    /// x64dbg, Tenet, gdb-tfile) to `din`; an x64dbg trace (or any x86/x64 instruction
    /// stream) to `tenet`, one file per thread `PREFIX.<thread>.log`, or to `tfile`, one
    /// thread as a GDB tracepoint file (`-o OUT.tf [--thread T]`).
    Convert {
        /// The trace file, or - for stdin.
        file: OsString,
        /// The output format: `din` (Dinero IV), `tenet` (with `-o PREFIX`) or `tfile` (with
        /// `-o OUT.tf`).
        #[arg(long, value_name = "FORMAT")]
        to: String,
        /// Write here instead of stdout.
        #[arg(long, short)]
        output: Option<PathBuf>,
        /// `--to tfile`: the thread to convert (its id in decimal, as `dump` prints it);
        /// default the first thread of the file.
        #[arg(long, value_name = "T")]
        thread: Option<u64>,
    },
    /// Encode JSON Lines edge lists into a DCFG-Trace file.
    Encode(EncodeArgs),
    /// Find the frames of a GDB tracepoint file by pc, tracepoint, pc range or collected
    /// memory (GDB's `tfind`, all at once): frame numbers, or JSON Lines with `--json`.
    Find(commands::find::FindArgs),
    /// Every access to an address range (ADDR or ADDR:LEN), or with --pc every execution
    /// of an address, as JSON Lines; from the sidecar index when there is one.
    Xref(commands::xref::XrefArgs),
    /// Write the sidecar index (FILE.tkidx): address and pc lists for `xref`, seek points
    /// for `state` and `mem`.
    Index(commands::xref::IndexArgs),
    /// Export every record as a Parquet dataset (a folder per table) for DuckDB and Spark.
    #[command(after_long_help = EXPORT_TABLES)]
    Export(ExportArgs),
    /// Every named register before instruction N (x64dbg, gdb-tfile frames, amber FULL):
    /// an aligned table, or one JSON line with `--json`.
    State(commands::state::StateArgs),
    /// The memory bytes as known before instruction N: from the latest access before it,
    /// else inferred from the first at or after it (`*`), else unknown (`??`); a hex dump,
    /// or one JSON line with `--json`.
    Mem(commands::mem::MemArgs),
    /// Compare two traces of the same format: where they part and join again. Exit 0 when
    /// equal, 1 when different, 2 on any error (as `diff`).
    Diff(commands::diff::DiffArgs),
    /// Basic-block vectors for SimPoint (`.bb`), one file per thread or one over the merged
    /// timeline (`--global`), with LoopPoint's markers and, with `--loop-bounded`, its
    /// loop-entry boundaries.
    Bbv(commands::bbv::BbvArgs),
    /// SimPoint's clustering of a `.bb` file: writes F.simpoints and F.weights (the
    /// simulation point and weight of each cluster) beside it, or PREFIX.* with --out.
    Simpoint(commands::simpoint::SimpointArgs),
    /// The simulation points of a `.bb` file as a LoopPoint-style region CSV: start and end
    /// (pc, count) markers, length, weight and multiplier of each region.
    Regions(commands::regions::RegionsArgs),
    /// A trace explorer in the browser: serves the trace and a page on 127.0.0.1 (the URL,
    /// with its access token, is printed) until killed.
    Serve(commands::serve::ServeArgs),
    /// Run a program under ptrace and record every instruction of every thread (Linux
    /// x86-64): `tracekit record [-o OUT] [--format x64dbg|tenet] [--max N] -- PROG ARGS…`.
    /// Exits with the program's exit status.
    Record(commands::record::RecordArgs),
    /// The helper `record` starts the program through (traceme, then exec).
    #[command(name = "__traceme", hide = true)]
    Traceme(commands::record::TracemeArgs),
}

/// The tables `tracekit export` writes, for `tracekit export --help` (the README's "Query
/// with SQL" section says the same; a test compares both with real exports).
pub const EXPORT_TABLES: &str = include_str!("export_tables.txt");

/// Arguments of `tracekit export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// The trace file, a directory of amber threads, or - for stdin.
    pub file: OsString,
    /// The dataset folder to create (and its missing parents): `DIR/<table>/part-NNNNN.parquet`
    /// and `DIR/_tracekit.json`.
    #[arg(long, short, value_name = "DIR")]
    pub output: PathBuf,
    /// The output format.
    #[arg(long, value_name = "FORMAT", default_value = "parquet", value_parser = ["parquet"])]
    pub to: String,
    /// Page compression.
    #[arg(long, default_value = "zstd", value_parser = ["zstd", "snappy", "none"])]
    pub compression: String,
    /// Start a new file every N rows (default: files of about 128 MiB).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub rows_per_file: Option<u64>,
    /// Rows per row group (the unit engines skip by their min/max statistics).
    #[arg(long, value_name = "N", default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub row_group_rows: u64,
    /// On a damaged input keep every complete record before the error (the manifest says
    /// "complete": false, with the error and its offset); the exit code is still 1.
    #[arg(long)]
    pub partial: bool,
    /// Replace DIR if it exists.
    #[arg(long)]
    pub force: bool,
    /// Threads: one reads the trace while the others encode (default: every core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub threads: Option<u64>,
}

/// Arguments of `tracekit dot`.
#[derive(Debug, Clone, Args)]
pub struct DotArgs {
    /// The DCFG file, or - for stdin.
    pub file: OsString,
    /// Only this process.
    #[arg(long)]
    pub process: Option<u64>,
    /// Only this image.
    #[arg(long)]
    pub image: Option<u64>,
    /// Only the routine with this entry block id.
    #[arg(long)]
    pub routine: Option<u64>,
    /// Only the routine containing this loop (a loop-head block id), as `dcfg-to-dot` does.
    #[arg(long = "loop")]
    pub loop_id: Option<u64>,
    /// Leave out edges that were never executed.
    #[arg(long)]
    pub hide_zero: bool,
    /// Leave out images other than the main one (the first image listed).
    #[arg(long)]
    pub hide_libraries: bool,
}

/// Arguments of `tracekit encode`.
#[derive(Debug, Clone, Args)]
pub struct EncodeArgs {
    /// JSON Lines input: one object per thread, e.g. `{"pid":0,"thread":0,"edges":[1,5,7]}`,
    /// or - for stdin.
    pub edges: OsString,
    /// Write the DCFG-Trace here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Instructions per chunk.
    #[arg(long, default_value_t = 1_000_000)]
    pub chunk_instrs: u64,
    /// Fold deterministic chains into multi-edge transitions.
    #[arg(long)]
    pub fold_chains: bool,
    /// Compress runs with `(N*…)` repeats.
    #[arg(long)]
    pub repeats: bool,
    /// Substitute frequent substrings with `<key>` dictionary references.
    #[arg(long)]
    pub dictionary: bool,
}

impl FormatOptions {
    /// The registry's options.
    #[must_use]
    pub fn to_options(&self) -> trace_registry::Options {
        trace_registry::Options {
            dcfg: self.dcfg.clone(),
            big_endian: self.big_endian,
            record_size: self.record_size,
            lenient: self.lenient,
            disasm: self.disasm,
            arch: self.arch.clone(),
            index: self.index.clone(),
        }
    }
}

/// Opens `file` and picks its handler (`forced` by name, or detected).
///
/// # Errors
///
/// The file cannot be read, or its format is unknown.
pub fn open(file: &OsStr, forced: Option<&str>) -> Result<(Input, &'static dyn Handler), CliError> {
    Ok(trace_registry::open(file, forced)?)
}

/// Fails with a usage error (exit 2) naming the formats `cmd` accepts, unless `got` is one.
fn expect_format(got: &dyn Handler, allowed: &[&str], cmd: &str) -> Result<(), CliError> {
    if allowed.contains(&got.name()) {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "`tracekit {cmd}` works on {} files, not {}",
            allowed.join("/"),
            got.name()
        )))
    }
}

/// Runs a parsed command line, writing results to `out` and warnings to `err`.
///
/// # Errors
///
/// Whatever the command fails with.
pub fn run(cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    let options = cli.opts.to_options();
    let forced = cli.format.as_deref();
    let progress = |input: &Input| Progress::new(input.file_len(), !cli.quiet);
    match &cli.command {
        Cmd::Info { file, json } => {
            let (input, h) = open(file, forced)?;
            let p = progress(&input);
            commands::info(h, input, &options, *json, p, out, err)
        }
        Cmd::Dump { file } => {
            let (input, h) = open(file, forced)?;
            let p = progress(&input);
            commands::dump(h, input, &options, p, out, err)
        }
        Cmd::Merge { dir } => {
            let (input, h) = open(dir, forced)?;
            if !input.is_dir() {
                return Err(CliError::Usage(format!(
                    "`tracekit merge` takes an amber threads directory (thread_NNN.tt6 or .tt6e files), not {}",
                    input.name()
                )));
            }
            expect_format(h, &["tt6", "tt6e"], "merge")?;
            commands::dump(h, input, &options, Progress::hidden(), out, err)
        }
        Cmd::Validate { file, json } => {
            let opened = trace_registry::open(file, forced);
            commands::validate(opened, &options, *json, !cli.quiet, out, err)
        }
        Cmd::Dot(args) => {
            let (input, h) = open(&args.file, forced)?;
            expect_format(h, &["dcfg"], "dot")?;
            commands::dot(input, &options, args, out)
        }
        Cmd::Loops { file } => {
            let (input, h) = open(file, forced)?;
            expect_format(h, &["dcfg"], "loops")?;
            commands::loops(input, &options, out)
        }
        Cmd::Convert {
            file,
            to,
            output,
            thread,
        } => {
            let (input, h) = open(file, forced)?;
            if to == "tfile" {
                let Some(path) = output else {
                    return Err(CliError::Usage(
                        "convert --to tfile writes a file: give -o OUT.tf".into(),
                    ));
                };
                return commands::to_tfile::convert(h, input, &options, *thread, path, out);
            }
            if thread.is_some() {
                return Err(CliError::Usage("--thread goes with --to tfile".into()));
            }
            if to == "tenet" {
                let Some(prefix) = output else {
                    return Err(CliError::Usage(
                        "convert --to tenet writes one file per thread: give -o PREFIX".into(),
                    ));
                };
                return commands::to_tenet::convert(h, input, &options, prefix, out);
            }
            if to != "din" {
                return Err(CliError::Usage(format!(
                    "cannot convert {} to {to:?}; supported: din, tenet, tfile",
                    h.name()
                )));
            }
            with_output(output.as_ref(), out, |out| {
                commands::convert_din(h, input, &options, out, err)
            })
        }
        Cmd::Encode(args) => with_output(args.output.as_ref(), out, |out| {
            commands::encode(args, &options, out, err)
        }),
        Cmd::Find(args) => {
            let (input, h) = open(&args.file, forced)?;
            let p = progress(&input);
            commands::find::run(h, input, &options, args, p, out, err)
        }
        Cmd::Xref(args) => {
            let (input, h) = open(&args.file, forced)?;
            let p = progress(&input);
            commands::xref::run(h, input, &options, args, p, out, err)
        }
        Cmd::Index(args) => {
            let (input, h) = open(&args.file, forced)?;
            let p = progress(&input);
            commands::xref::build(h, input, &options, args, p, out, err)
        }
        Cmd::Export(args) => {
            let (input, h) = open(&args.file, forced)?;
            let p = progress(&input);
            commands::export(h, input, &options, args, p, out, err)
        }
        Cmd::State(args) => {
            let (input, h) = open(&args.file, forced)?;
            let p = progress(&input);
            commands::state::run(h, input, &options, args, p, out, err)
        }
        Cmd::Mem(args) => {
            let (input, h) = open(&args.file, forced)?;
            let p = progress(&input);
            commands::mem::run(h, input, &options, args, p, out, err)
        }
        Cmd::Diff(args) => {
            commands::diff::run(forced, &options, args, out).map_err(CliError::for_diff)
        }
        Cmd::Bbv(args) => {
            let (input, h) = open(&args.file, forced)?;
            commands::bbv::run(h, input, &options, args, out)
        }
        Cmd::Simpoint(args) => commands::simpoint::run(args, out, err),
        Cmd::Regions(args) => with_output(args.output.as_ref(), out, |out| {
            commands::regions::run(args, out)
        }),
        Cmd::Serve(args) => commands::serve::run(args, forced, &options, out, err),
        Cmd::Record(args) => commands::record::run(args, forced, &options, cli.quiet, err),
        Cmd::Traceme(args) => commands::record::traceme(args),
    }
}

/// Runs `f` with `-o FILE` (buffered) or stdout as its output. The file is written under a
/// temporary name and renamed when `f` succeeds, so a failed command leaves no partial output.
fn with_output<F>(path: Option<&PathBuf>, stdout: &mut dyn Write, f: F) -> Result<(), CliError>
where
    F: FnOnce(&mut dyn Write) -> Result<(), CliError>,
{
    let Some(p) = path else {
        return f(stdout);
    };
    let cannot = |what: &str| {
        let what = format!("cannot {what} {}", p.display());
        move |e| CliError::io(what, e)
    };
    let mut file = trace_registry::output::AtomicFile::create(p).map_err(cannot("create"))?;
    let mut w = io::BufWriter::new(&mut file);
    f(&mut w)?;
    w.flush().map_err(cannot("write"))?;
    drop(w);
    file.commit().map_err(cannot("write"))
}

/// Runs one command over bytes in memory, as `tracekit --format F CMD -` would on them.
/// Used by the never-panics property tests and the fuzzer.
///
/// # Errors
///
/// Whatever the command fails with.
pub fn run_on_bytes(
    format: Option<&str>,
    cmd: Command,
    bytes: Vec<u8>,
    out: &mut Vec<u8>,
) -> Result<(), CliError> {
    let input = Input::from_bytes("input", bytes)?;
    let handler = match format {
        Some(name) => trace_registry::by_name(name)
            .ok_or_else(|| CliError::Usage(format!("unknown format {name:?}")))?,
        None => trace_registry::detect(&input)
            .ok_or_else(|| trace_registry::detection_error(input.name()))?,
    };
    let options = trace_registry::Options::default();
    let mut err = Vec::new();
    let hidden = Progress::hidden();
    match cmd {
        Command::Info => commands::info(handler, input, &options, false, hidden, out, &mut err),
        Command::Dump => commands::dump(handler, input, &options, hidden, out, &mut err),
        Command::Validate => {
            commands::validate(Ok((input, handler)), &options, false, false, out, &mut err)
        }
    }
}

/// The whole program: parses `args`, runs the command with stdout and stderr, prints an
/// error as `error: …`, and returns the exit code (0 ok, 1 error, 2 usage).
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(256 * 1024, stdout.lock());
    let mut err = io::stderr();
    let result = run(&cli, &mut out, &mut err).and_then(|()| out.flush().map_err(CliError::from));
    match result {
        Ok(()) => 0,
        Err(e) if e.is_broken_pipe() => 0,
        Err(CliError::Different) => 1,
        Err(CliError::ProgramExit(code)) => code,
        Err(e) => {
            // What was written before the error stays written (e.g. every complete record).
            let _ = out.flush();
            let _ = writeln!(err, "error: {e}");
            e.exit_code()
        }
    }
}

/// A fuzzing entry point: runs everything one target covers on `data`; panics on a bug.
#[cfg(feature = "fuzzing")]
pub type FuzzFn = fn(&[u8]);

/// The fuzz targets of `fuzz/`, by name: each runs one crate's fuzzing entry point.
#[cfg(feature = "fuzzing")]
pub const FUZZ_TARGETS: &[(&str, FuzzFn)] = &[
    ("cli_any", fuzz_cli),
    ("amber_read", amber_tt6::fuzz_read),
    ("amber_roundtrip", amber_tt6::fuzz_roundtrip),
    ("tfile_read", gdb_tfile::fuzz_frames),
    ("tfile_desc", gdb_tfile::fuzz_description),
    ("dcfg_read", dcfg::fuzz_read),
    ("dcfg_roundtrip", |data| assert!(dcfg::fuzz_roundtrip(data))),
    ("x64dbg_read", trac_x64dbg::fuzz_read),
    ("dcfg_trace_read", dcfg_trace::fuzz_read),
    ("dcfg_trace_expand", dcfg_trace::fuzz_expand),
    ("dcfg_trace_bits", dcfg_trace::fuzz_bits),
    ("dcfg_trace_roundtrip", dcfg_trace::fuzz_roundtrip),
    ("tenet", tenet_trace::fuzz_read),
    ("sidecar_read", fuzz_sidecar),
    ("bb_read", simpoint::bb::fuzz_read),
    ("simpoints_read", simpoint::simpoints::fuzz_read),
    ("http_request", commands::serve::http::fuzz_request),
];

/// Runs the fuzz target `name` (see [`FUZZ_TARGETS`]) on `data`; `false` if there is none
/// of that name. Panics exactly where the target would.
#[cfg(feature = "fuzzing")]
pub fn fuzz_target(name: &str, data: &[u8]) -> bool {
    let Some((_, run)) = FUZZ_TARGETS.iter().find(|(n, _)| *n == name) else {
        return false;
    };
    run(data);
    true
}

/// Fuzzing and property-test entry point: runs `info`, `dump` and `validate` on `data` with
/// detection and with every forced format. Must never panic.
#[cfg(feature = "fuzzing")]
pub fn fuzz_cli(data: &[u8]) {
    let formats = std::iter::once(None).chain(HANDLERS.iter().map(|h| Some(h.name())));
    for format in formats {
        for cmd in [Command::Info, Command::Dump, Command::Validate] {
            let mut out = Vec::new();
            let _ = run_on_bytes(format, cmd, data.to_vec(), &mut out);
        }
    }
}

/// Fuzzing and property-test entry point for the sidecar index reader: `data` as an index
/// file, read and looked up every way `xref` and the steps do. Must never panic.
#[cfg(feature = "fuzzing")]
pub fn fuzz_sidecar(data: &[u8]) {
    use trace_registry::analyses::index::Sidecar;
    let reader = std::io::Cursor::new(data);
    let Ok(mut sidecar) = Sidecar::read("input".as_ref(), reader, data.len() as u64) else {
        return;
    };
    if let Ok(seek) = sidecar.seek_index() {
        let _ = trac_x64dbg::Index::from_bytes(&seek);
    }
    for key in [0, 1, 0x14_fe00, 0x7ff6_a1b2_1000, u64::MAX] {
        let _ = sidecar.executions(key);
        let _ = sidecar.accesses(key, key.saturating_add(0x100));
    }
}
