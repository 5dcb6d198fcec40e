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
//! tracekit state FILE --at N [--regs R,…]  the registers before instruction N
//! tracekit mem FILE --at N ADDR|[REG+OFF] [LEN]  memory as known before instruction N
//! tracekit xref FILE ADDR[:LEN]   every access to the range (--pc ADDR: executions)
//! tracekit origin FILE --at N REG|ADDR[:LEN]  where the value came from, copy by copy
//! tracekit index FILE [-o PATH]   the sidecar index xref, state and mem answer from
//! tracekit calls FILE [--json|--folded]  the call tree (args, returns, symbols)
//! tracekit flame FILE -o OUT.svg  the flame graph of the call stacks
//! tracekit dot FILE               Graphviz drawing of a DCFG
//! tracekit loops FILE             loop statistics of a DCFG (CSV)
//! tracekit convert FILE --to din  any trace with instructions → Dinero IV din
//! tracekit convert FILE --to tenet -o PREFIX  x64dbg trace → Tenet, one file per thread
//! tracekit convert FILE --to tfile -o OUT.tf [--thread T]  one thread → GDB tracepoint file
//! tracekit encode EDGES --dcfg F  JSON Lines edge lists → DCFG-Trace
//! tracekit diff A B               where two traces part and join again (exit 0/1/2)
//! tracekit bbv FILE --slice N -o OUT.bb  basic-block vectors for SimPoint, per thread
//! tracekit simpoint F.bb --max-k K [-o PREFIX]  SimPoint clustering → F.simpoints, F.weights
//! tracekit regions F.bb [-o OUT]  simulation points as LoopPoint-style region CSV
//! tracekit serve FILE [--port N]  trace explorer in the browser (prints its URL)
//! tracekit record -- PROG ARGS    run PROG under ptrace and record it (Linux x86-64)
//! ```
//!
//! FILE is a path or `-` for stdin; `.bz2` and `.gz` inputs are decompressed on the fly.
//! The format is detected from the content (or the `.tt6`/`.tt6e` extension) unless
//! `--format NAME` says otherwise. The input options (`--format`, `--dcfg`, `-q`, …) may
//! come before or after the command, which takes only those that apply to it ([`Cli::resolve`]);
//! a format's own option (`--arch` for Tenet, `--big-endian` for tfiles, …) is an error for
//! input of another format ([`open`]).
//! Every output is `-o/--output` (`--out` too); a command that writes files refuses an
//! existing one unless `--force`, and says what it wrote on stderr (not with `-q`). Counts
//! take `K`/`M`/`G` suffixes (thousands, millions, billions), byte sizes too (KiB, MiB,
//! GiB). Errors print `error: … at offset 0x…` and exit 1; usage errors exit 2.

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
    about = "Inspect, query, compare, dump, validate and convert CPU execution traces",
    after_help = "The input options may come before or after the command; each command takes \
                  those that apply to it (`tracekit COMMAND --help` lists them)."
)]
pub struct Cli {
    /// Input options given before the command, as earlier versions took them: each must be
    /// one the command takes (it is then as if given after it).
    #[command(flatten)]
    pub early: Early,
    /// What to do.
    #[command(subcommand)]
    pub command: Cmd,
}

/// The input options, accepted before the command too (`tracekit --format tenet info F`).
#[derive(Debug, Default, Clone, Args)]
pub struct Early {
    /// How to read the trace.
    #[command(flatten)]
    pub input: InputArgs,
    /// `--disasm`.
    #[command(flatten)]
    pub disasm: DisasmArg,
    /// `--index`.
    #[command(flatten)]
    pub index: IndexArg,
}

/// How to read the input trace: the options of every command that reads one, listed
/// under their own heading. Each applies to one format; the others ignore it.
#[derive(Debug, Default, Clone, Args)]
#[command(next_help_heading = "Input options")]
pub struct InputArgs {
    /// No progress line (nor summary) on stderr: only warnings and errors.
    #[arg(long, short)]
    pub quiet: bool,
    /// Read the input as this format instead of detecting it.
    #[arg(long, value_parser = format_names())]
    pub format: Option<String>,
    /// dcfg-trace: the DCFG of the traced run, to map edges to blocks and check counts.
    #[arg(long, value_name = "FILE")]
    pub dcfg: Option<PathBuf>,
    /// gdb-tfile: the target is big-endian (the file does not say; little by default).
    #[arg(long)]
    pub big_endian: bool,
    /// amber FULL: the record size (1004 or 1008) instead of detecting it.
    #[arg(long, value_name = "BYTES")]
    pub record_size: Option<u32>,
    /// dcfg-trace: lenient decoding (cut an overshooting multi-edge group, ignore "" next to
    /// other codes) instead of strict errors.
    #[arg(long)]
    pub lenient: bool,
    /// tenet: the architecture instead of detecting it from the register names.
    #[arg(long, value_name = "ARCH", value_parser = ["amd64", "x86"])]
    pub arch: Option<String>,
}

/// `--disasm`, for the commands that show or size instructions.
#[derive(Debug, Default, Clone, Args)]
#[command(next_help_heading = "Input options")]
pub struct DisasmArg {
    /// Disassemble: x64dbg instructions, tfile frames (x86/x64, with the bytes at pc
    /// collected) and amber records get `asm`; x64dbg memory accesses get `size` and
    /// `access` (read, write, readwrite or unknown) from the instruction's operands.
    #[arg(long)]
    pub disasm: bool,
}

/// `--index`, for the commands that answer from the sidecar index.
#[derive(Debug, Default, Clone, Args)]
#[command(next_help_heading = "Input options")]
pub struct IndexArg {
    /// The sidecar index (`tracekit index`) to use instead of FILE.tkidx beside the trace.
    #[arg(long, value_name = "PATH")]
    pub index: Option<PathBuf>,
}

/// `-q`, for the commands that print progress or a summary on stderr.
#[derive(Debug, Default, Clone, Copy, Args)]
pub struct QuietArg {
    /// Nothing on stderr but warnings and errors: no progress line, no summary.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--force`, for the commands that write files.
#[derive(Debug, Default, Clone, Copy, Args)]
pub struct ForceArg {
    /// Replace the output if it exists (without it, an existing output is an error).
    #[arg(long)]
    pub force: bool,
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
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Print every record as one JSON line (JSON Lines).
    Dump {
        /// The trace file, or - for stdin.
        file: OsString,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
    },
    /// Check the whole file; print "ok" or the first error with its offset.
    Validate {
        /// The trace file, or - for stdin.
        file: OsString,
        /// Machine-readable JSON: `{"ok":true,…}` or `{"ok":false,"error":…,"offset":…}`.
        #[arg(long)]
        json: bool,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Merge an amber threads directory (`thread_NNN.tt6`/`.tt6e`) into one timeline, one
    /// JSON line per instruction with its `thread` and `seq`.
    Merge {
        /// The directory.
        dir: OsString,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Draw a DCFG (or part of it) as Graphviz DOT.
    Dot {
        /// The command's own arguments.
        #[command(flatten)]
        args: DotArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Loop statistics of a DCFG as CSV.
    Loops {
        /// The DCFG file, or - for stdin.
        file: OsString,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
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
        #[arg(long, short, alias = "out")]
        output: Option<PathBuf>,
        /// `--to tfile`: the thread to convert (its id in decimal, as `dump` prints it);
        /// default the first thread of the file.
        #[arg(long, value_name = "T", value_parser = commands::args::number, allow_negative_numbers = true)]
        thread: Option<u64>,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
    },
    /// Encode JSON Lines edge lists into a DCFG-Trace file.
    Encode {
        /// The command's own arguments.
        #[command(flatten)]
        args: EncodeArgs,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
        /// `-q`.
        #[command(flatten)]
        quiet: QuietArg,
    },
    /// Find the frames of a GDB tracepoint file by pc, tracepoint, pc range or collected
    /// memory (GDB's `tfind`, all at once): frame numbers, or JSON Lines with `--json`.
    Find {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::find::FindArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Every access to an address range (ADDR or ADDR:LEN), or with --pc every execution
    /// of an address, as JSON Lines; from the sidecar index when there is one.
    Xref {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::xref::XrefArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
        /// `--index`.
        #[command(flatten)]
        index: IndexArg,
    },
    /// Where the value of a register or memory before instruction N came from (x86/x64):
    /// its last writer, and through copies (mov, push/pop, xchg, movs/stos, SSE moves) the
    /// writers of their sources, to a computation, a system call, the trace's start or an
    /// unknown source; a line per hop, or JSON Lines with `--json`.
    Origin {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::origin::OriginArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--index`.
        #[command(flatten)]
        index: IndexArg,
    },
    /// The call tree of an x86/x64 trace (x64dbg, Tenet, gdb-tfile): each call's thread,
    /// depth, target, entry and return steps, arguments and return value, as an indented
    /// tree, JSON Lines (`--json`) or folded stacks (`--folded`).
    Calls {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::calls::CallsArgs,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// The flame graph of an x86/x64 trace's call stacks (instructions per stack), drawn as
    /// an SVG.
    Flame {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::calls::FlameArgs,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Write the sidecar index (FILE.tkidx): address and pc lists for `xref`, seek points
    /// for `state` and `mem`.
    Index {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::xref::IndexArgs,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// Export every record as a Parquet dataset (a folder per table) for DuckDB and Spark.
    #[command(after_long_help = EXPORT_TABLES)]
    Export {
        /// The command's own arguments.
        #[command(flatten)]
        args: ExportArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
    },
    /// Every named register before instruction N (x64dbg, gdb-tfile frames, amber FULL):
    /// an aligned table, or one JSON line with `--json`.
    State {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::state::StateArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
        /// `--index`.
        #[command(flatten)]
        index: IndexArg,
    },
    /// The memory bytes as known before instruction N: from the latest access before it,
    /// else inferred from the first at or after it (`*`), else unknown (`??`); a hex dump,
    /// or one JSON line with `--json`.
    Mem {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::mem::MemArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
        /// `--index`.
        #[command(flatten)]
        index: IndexArg,
    },
    /// Compare two traces of the same format: where they part and join again. Exit 0 when
    /// equal, 1 when different, 2 on any error (as `diff`).
    Diff {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::diff::DiffArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
    },
    /// Basic-block vectors for SimPoint (`.bb`), one file per thread or one over the merged
    /// timeline (`--global`), with LoopPoint's markers and, with `--loop-bounded`, its
    /// loop-entry boundaries.
    Bbv {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::bbv::BbvArgs,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
    },
    /// SimPoint's clustering of a `.bb` file: writes F.simpoints and F.weights (the
    /// simulation point and weight of each cluster) beside it, or PREFIX.* with -o.
    Simpoint {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::simpoint::SimpointArgs,
        /// `-q`.
        #[command(flatten)]
        quiet: QuietArg,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
    },
    /// The simulation points of a `.bb` file as a LoopPoint-style region CSV: start and end
    /// (pc, count) markers, length, weight and multiplier of each region.
    Regions {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::regions::RegionsArgs,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
        /// `-q`.
        #[command(flatten)]
        quiet: QuietArg,
    },
    /// A trace explorer in the browser: serves the trace and a page on 127.0.0.1 (the URL,
    /// with its access token, is printed) until killed.
    Serve {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::serve::ServeArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
        /// `--index`.
        #[command(flatten)]
        index: IndexArg,
    },
    /// Serve an x86/x86-64 trace to GDB over its remote protocol, forwards and backwards
    /// (`target remote 127.0.0.1:PORT`, or `target remote | tracekit gdbserver --stdio
    /// FILE`): registers and memory at any step, stepi, continue and their reverses to
    /// breakpoints and watchpoints.
    Gdbserver {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::gdbserver::GdbserverArgs,
        /// How to read the trace.
        #[command(flatten)]
        input: InputArgs,
        /// `--disasm`.
        #[command(flatten)]
        disasm: DisasmArg,
        /// `--index`.
        #[command(flatten)]
        index: IndexArg,
    },
    /// Run a program under ptrace and record every instruction of every thread (Linux
    /// x86-64), or only those in `--range`s and `--module`s: `tracekit record [-o OUT]
    /// [--format x64dbg|tenet] [--range A:B]… [--module NAME]… [--max N] -- PROG ARGS…`.
    /// Exits with the program's exit status.
    Record {
        /// The command's own arguments.
        #[command(flatten)]
        args: commands::record::RecordArgs,
        /// `-q`.
        #[command(flatten)]
        quiet: QuietArg,
        /// `--force`.
        #[command(flatten)]
        force: ForceArg,
    },
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
    #[arg(long, short, alias = "out", value_name = "DIR")]
    pub output: PathBuf,
    /// The output format.
    #[arg(long, value_name = "FORMAT", default_value = "parquet", value_parser = ["parquet"])]
    pub to: String,
    /// Page compression.
    #[arg(long, default_value = "zstd", value_parser = ["zstd", "snappy", "none"])]
    pub compression: String,
    /// Start a new file every N rows (default: files of about 128 MiB); `K`, `M`, `G`
    /// suffixes count thousands, millions, billions.
    #[arg(long, value_name = "N", value_parser = commands::args::positive_count, allow_negative_numbers = true)]
    pub rows_per_file: Option<u64>,
    /// Rows per row group (the unit engines skip by their min/max statistics); every
    /// table's row groups also end after every N records, so a child table's row group
    /// holds rows of one of its parent's; `K`, `M`, `G` suffixes as for --rows-per-file.
    #[arg(long, value_name = "N", default_value = "1048576", value_parser = commands::args::positive_count, allow_negative_numbers = true)]
    pub row_group_rows: u64,
    /// On a damaged input keep every complete record before the error (the manifest says
    /// "complete": false, with the error and its offset); the exit code is still 1.
    #[arg(long)]
    pub partial: bool,
    /// Replace DIR if it exists.
    #[arg(long)]
    pub force: bool,
    /// Threads that read stretches of the trace (where its format seeks by index, as
    /// x64dbg) and encode its tables; the same files on any number (default: every core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub threads: Option<u64>,
    /// Also write the `calls` table (the rows of `tracekit calls --json`, joining
    /// `instructions` on `i`): x86/x64 traces read from a file, in a second pass.
    #[arg(long)]
    pub calls: bool,
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
    /// Only this routine: its name (the symbol at its entry block) or its entry block id.
    #[arg(long, value_name = "NAME|ID")]
    pub routine: Option<String>,
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
    /// The DCFG of the run: each edge counts its source block's instructions (without it,
    /// one each).
    #[arg(long, value_name = "FILE")]
    pub dcfg: Option<PathBuf>,
    /// Write the DCFG-Trace here instead of stdout.
    #[arg(long, short, alias = "out")]
    pub output: Option<PathBuf>,
    /// Instructions per chunk (`K`, `M`, `G`: thousands, millions, billions).
    #[arg(long, value_name = "N", default_value = "1000000", value_parser = commands::args::positive_count, allow_negative_numbers = true)]
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

/// The options a command runs with: its own, and those given before it.
#[derive(Debug, Default, Clone)]
pub struct Resolved {
    /// How to read the trace (and `-q`).
    pub input: InputArgs,
    /// `--disasm`.
    pub disasm: DisasmArg,
    /// `--index`.
    pub index: IndexArg,
}

impl Resolved {
    /// The registry's options.
    #[must_use]
    pub fn options(&self) -> trace_registry::Options {
        self.input.to_options(&self.disasm, &self.index)
    }
}

impl Cmd {
    /// The option groups this command takes: input options (with `-q`), `--disasm`,
    /// `--index`, and a `-q` of its own (the commands that read no trace).
    fn groups(
        &self,
    ) -> (
        Option<&InputArgs>,
        Option<&DisasmArg>,
        Option<&IndexArg>,
        Option<&QuietArg>,
    ) {
        match self {
            Cmd::Info { input, .. }
            | Cmd::Validate { input, .. }
            | Cmd::Merge { input, .. }
            | Cmd::Dot { input, .. }
            | Cmd::Loops { input, .. }
            | Cmd::Find { input, .. }
            | Cmd::Index { input, .. }
            | Cmd::Calls { input, .. }
            | Cmd::Flame { input, .. }
            | Cmd::Bbv { input, .. } => (Some(input), None, None, None),
            Cmd::Dump { input, disasm, .. }
            | Cmd::Convert { input, disasm, .. }
            | Cmd::Export { input, disasm, .. }
            | Cmd::Diff { input, disasm, .. } => (Some(input), Some(disasm), None, None),
            Cmd::Xref {
                input,
                disasm,
                index,
                ..
            }
            | Cmd::State {
                input,
                disasm,
                index,
                ..
            }
            | Cmd::Mem {
                input,
                disasm,
                index,
                ..
            }
            | Cmd::Serve {
                input,
                disasm,
                index,
                ..
            }
            | Cmd::Gdbserver {
                input,
                disasm,
                index,
                ..
            } => (Some(input), Some(disasm), Some(index), None),
            Cmd::Origin { input, index, .. } => (Some(input), None, Some(index), None),
            Cmd::Encode { quiet, .. } | Cmd::Regions { quiet, .. } => {
                (None, None, None, Some(quiet))
            }
            Cmd::Record { quiet, .. } | Cmd::Simpoint { quiet, .. } => {
                (None, None, None, Some(quiet))
            }
            Cmd::Traceme(_) => (None, None, None, None),
        }
    }

    /// The command's name, for messages.
    fn name(&self) -> &'static str {
        match self {
            Cmd::Info { .. } => "info",
            Cmd::Dump { .. } => "dump",
            Cmd::Validate { .. } => "validate",
            Cmd::Merge { .. } => "merge",
            Cmd::Dot { .. } => "dot",
            Cmd::Loops { .. } => "loops",
            Cmd::Convert { .. } => "convert",
            Cmd::Encode { .. } => "encode",
            Cmd::Find { .. } => "find",
            Cmd::Xref { .. } => "xref",
            Cmd::Origin { .. } => "origin",
            Cmd::Index { .. } => "index",
            Cmd::Calls { .. } => "calls",
            Cmd::Flame { .. } => "flame",
            Cmd::Export { .. } => "export",
            Cmd::State { .. } => "state",
            Cmd::Mem { .. } => "mem",
            Cmd::Diff { .. } => "diff",
            Cmd::Bbv { .. } => "bbv",
            Cmd::Simpoint { .. } => "simpoint",
            Cmd::Regions { .. } => "regions",
            Cmd::Serve { .. } => "serve",
            Cmd::Gdbserver { .. } => "gdbserver",
            Cmd::Record { .. } => "record",
            Cmd::Traceme(_) => "__traceme",
        }
    }
}

impl Cli {
    /// The command's options merged with those given before it.
    ///
    /// # Errors
    ///
    /// An option given before the command that the command does not take (usage).
    pub fn resolve(&self) -> Result<Resolved, CliError> {
        let (input, disasm, index, quiet) = self.command.groups();
        let e = &self.early;
        let mut stray: Vec<&str> = Vec::new();
        let r = Resolved {
            input: match input {
                Some(i) => InputArgs {
                    quiet: i.quiet || e.input.quiet,
                    format: i.format.clone().or_else(|| e.input.format.clone()),
                    dcfg: i.dcfg.clone().or_else(|| e.input.dcfg.clone()),
                    big_endian: i.big_endian || e.input.big_endian,
                    record_size: i.record_size.or(e.input.record_size),
                    lenient: i.lenient || e.input.lenient,
                    arch: i.arch.clone().or_else(|| e.input.arch.clone()),
                },
                None => {
                    // `encode --dcfg` is its own option, also taken before the command.
                    let encode = matches!(self.command, Cmd::Encode { .. });
                    stray.extend(e.input.given().into_iter().filter(|&n| {
                        !(n == "--quiet" && quiet.is_some() || n == "--dcfg" && encode)
                    }));
                    InputArgs {
                        quiet: quiet.is_some_and(|q| q.quiet) || e.input.quiet,
                        ..InputArgs::default()
                    }
                }
            },
            disasm: DisasmArg {
                disasm: disasm.is_some_and(|d| d.disasm) || e.disasm.disasm,
            },
            index: IndexArg {
                index: index
                    .and_then(|i| i.index.clone())
                    .or_else(|| e.index.index.clone()),
            },
        };
        if disasm.is_none() && e.disasm.disasm {
            stray.push("--disasm");
        }
        if index.is_none() && e.index.index.is_some() {
            stray.push("--index");
        }
        match stray.as_slice() {
            [] => Ok(r),
            names => Err(CliError::Usage(format!(
                "{} does not apply to `tracekit {}`",
                names.join(", "),
                self.command.name()
            ))),
        }
    }
}

impl InputArgs {
    /// The long names of the options given.
    fn given(&self) -> Vec<&'static str> {
        let flags = [
            ("--quiet", self.quiet),
            ("--format", self.format.is_some()),
            ("--dcfg", self.dcfg.is_some()),
            ("--big-endian", self.big_endian),
            ("--record-size", self.record_size.is_some()),
            ("--lenient", self.lenient),
            ("--arch", self.arch.is_some()),
        ];
        flags
            .iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect()
    }

    /// The registry's options: these, with `--disasm` and `--index` where the command
    /// takes them.
    #[must_use]
    pub fn to_options(&self, disasm: &DisasmArg, index: &IndexArg) -> trace_registry::Options {
        trace_registry::Options {
            dcfg: self.dcfg.clone(),
            big_endian: self.big_endian,
            record_size: self.record_size,
            lenient: self.lenient,
            disasm: disasm.disasm,
            arch: self.arch.clone(),
            index: index.index.clone(),
        }
    }
}

/// Opens `file` and picks its handler (`forced` by name, or detected), which must read
/// every format option given in `options` ([`trace_registry::Offers::reads`]).
///
/// # Errors
///
/// The file cannot be read, or its format is unknown; an option its format does not read
/// (usage).
pub fn open(
    file: &OsStr,
    forced: Option<&str>,
    options: &trace_registry::Options,
) -> Result<(Input, &'static dyn Handler), CliError> {
    let (input, handler) = trace_registry::open(file, forced)?;
    let unread = options.unread(handler.offers());
    if !unread.is_empty() {
        // Each flag with the formats that read it: `--arch (for tenet input)`.
        let flags: Vec<String> = unread
            .iter()
            .map(|name| {
                let readers: Vec<&str> = trace_registry::HANDLERS
                    .iter()
                    .filter(|h| h.offers().reads.contains(name))
                    .map(|h| h.name())
                    .collect();
                format!(
                    "--{} (for {} input)",
                    name.replace('_', "-"),
                    readers.join("/")
                )
            })
            .collect();
        return Err(CliError::Usage(format!(
            "{} {} not apply to {} input {}",
            flags.join(", "),
            if flags.len() == 1 { "does" } else { "do" },
            handler.name(),
            input.name(),
        )));
    }
    Ok((input, handler))
}

/// Fails with a usage error (exit 2) naming the formats that offer what `cmd` needs
/// (`wanted` of their [`Handler::offers`]), unless `got` is one.
fn expect_offer(
    got: &dyn Handler,
    wanted: fn(trace_registry::Offers) -> bool,
    cmd: &str,
) -> Result<(), CliError> {
    if wanted(got.offers()) {
        return Ok(());
    }
    let names: Vec<&str> = trace_registry::offering(wanted).map(|h| h.name()).collect();
    Err(CliError::Usage(format!(
        "`tracekit {cmd}` works on {} files, not {}",
        names.join("/"),
        got.name()
    )))
}

/// What `convert --to` writes, one row per sink: the one list the checks of `-o` and
/// `--thread` and the "supported" message come from.
const TARGETS: &[Target] = &[
    Target {
        name: "din",
        sink: Sink::Din,
        output: Output::Optional,
        thread: false,
    },
    Target {
        name: "tenet",
        sink: Sink::Tenet,
        output: Output::Prefix("convert --to tenet writes one file per thread: give -o PREFIX"),
        thread: false,
    },
    Target {
        name: "tfile",
        sink: Sink::Tfile,
        output: Output::File("convert --to tfile writes a file: give -o OUT.tf"),
        thread: true,
    },
];

/// One target of `convert --to`.
struct Target {
    /// The name `--to` takes.
    name: &'static str,
    /// The sink that writes it.
    sink: Sink,
    /// What `-o` names.
    output: Output,
    /// Whether it takes `--thread` (one thread of the trace).
    thread: bool,
}

/// The sinks of `convert`.
#[derive(Clone, Copy)]
enum Sink {
    /// Dinero IV lines (`trace_sinks::din`).
    Din,
    /// Tenet traces, one per thread (`trace_sinks::tenet`).
    Tenet,
    /// One thread as a GDB tracepoint file (`trace_sinks::tfile`).
    Tfile,
}

/// What `-o` names for a target.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    /// A file, or stdout without `-o`.
    Optional,
    /// A file, which must be given (the message when it is not).
    File(&'static str),
    /// The prefix of one file per thread, which must be given (the message when it is
    /// not); each file is refused or replaced as it is created.
    Prefix(&'static str),
}

impl Output {
    /// The message when `-o` is missing (empty where it may be).
    fn needed(self) -> &'static str {
        match self {
            Output::Optional => "",
            Output::File(m) | Output::Prefix(m) => m,
        }
    }
}

/// Runs a parsed command line, writing results to `out` and warnings and summaries to
/// `err`.
///
/// # Errors
///
/// Whatever the command fails with.
pub fn run(cli: &Cli, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), CliError> {
    let r = cli.resolve()?;
    let progress = |input: &Input| Progress::new(input.file_len(), !r.input.quiet);
    let mut sink = io::sink();
    match &cli.command {
        Cmd::Info { file, json, .. } => {
            let (opened, h) = open(file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            commands::info(h, opened, &r.options(), *json, p, out, err)
        }
        Cmd::Dump { file, .. } => {
            let (opened, h) = open(file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            commands::dump(h, opened, &o, p, out, err)
        }
        Cmd::Merge { dir, .. } => {
            let (opened, h) = open(dir, r.input.format.as_deref(), &r.options())?;
            if !opened.is_dir() {
                return Err(CliError::Usage(format!(
                    "`tracekit merge` takes an amber threads directory (thread_NNN.tt6 or .tt6e files), not {}",
                    opened.name()
                )));
            }
            expect_offer(h, |o| o.thread_files, "merge")?;
            let o = r.options();
            commands::dump(h, opened, &o, Progress::hidden(), out, err)
        }
        Cmd::Validate { file, json, .. } => {
            let opened = trace_registry::open(file, r.input.format.as_deref());
            commands::validate(opened, &r.options(), *json, !r.input.quiet, out, err)
        }
        Cmd::Dot { args, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            expect_offer(h, |o| o.graph, "dot")?;
            commands::dot(opened, &r.options(), args, out)
        }
        Cmd::Loops { file, .. } => {
            let (opened, h) = open(file, r.input.format.as_deref(), &r.options())?;
            expect_offer(h, |o| o.graph, "loops")?;
            commands::loops(opened, &r.options(), out)
        }
        Cmd::Convert {
            file,
            to,
            output,
            thread,
            force,
            ..
        } => {
            let o = r.options();
            let (opened, h) = open(file, r.input.format.as_deref(), &r.options())?;
            let target = TARGETS.iter().find(|t| t.name == to.as_str());
            if let Some(path) = output
                && !target.is_some_and(|t| matches!(t.output, Output::Prefix(_)))
            {
                commands::refuse_existing(path, force.force)?;
            }
            if thread.is_some() && !target.is_some_and(|t| t.thread) {
                let with: Vec<&str> = TARGETS
                    .iter()
                    .filter(|t| t.thread)
                    .map(|t| t.name)
                    .collect();
                return Err(CliError::Usage(format!(
                    "--thread goes with --to {}",
                    with.join("/")
                )));
            }
            let Some(target) = target else {
                let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
                return Err(CliError::Usage(format!(
                    "cannot convert {} to {to:?}; supported: {}",
                    h.name(),
                    names.join(", ")
                )));
            };
            match (target.sink, output) {
                (Sink::Tfile, Some(path)) => {
                    let summary = summary(err, &mut sink, r.input.quiet);
                    commands::to_tfile::convert(h, opened, &o, *thread, path, summary)
                }
                (Sink::Tenet, Some(prefix)) => {
                    let summary = summary(err, &mut sink, r.input.quiet);
                    commands::to_tenet::convert(h, opened, &o, prefix, force.force, summary)
                }
                (Sink::Tfile | Sink::Tenet, None) => {
                    Err(CliError::Usage(target.output.needed().into()))
                }
                (Sink::Din, output) => {
                    let mut lines = 0u64;
                    with_output(output.as_ref(), out, |w| {
                        let mut counted = CountLines::new(w);
                        commands::convert_din(h, opened, &o, &mut counted, err)?;
                        lines = counted.lines;
                        Ok(())
                    })?;
                    if let Some(path) = output {
                        writeln!(
                            summary(err, &mut sink, r.input.quiet),
                            "{}: {lines} din lines",
                            path.display()
                        )?;
                    }
                    Ok(())
                }
            }
        }
        Cmd::Encode { args, force, .. } => {
            if let Some(path) = &args.output {
                commands::refuse_existing(path, force.force)?;
            }
            let mut done = None;
            with_output(args.output.as_ref(), out, |w| {
                let dcfg = args.dcfg.as_ref().or(cli.early.input.dcfg.as_ref());
                done = Some(commands::encode(args, dcfg, w, err)?);
                Ok(())
            })?;
            if let (Some(path), Some(d)) = (&args.output, done) {
                writeln!(
                    summary(err, &mut sink, r.input.quiet),
                    "{}: {} process(es), {} thread(s), {} edges",
                    path.display(),
                    d.processes,
                    d.threads,
                    d.edges
                )?;
            }
            Ok(())
        }
        Cmd::Find { args, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            commands::find::run(h, opened, &r.options(), args, p, out, err)
        }
        Cmd::Xref { args, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            commands::xref::run(h, opened, &o, args, p, out, err)
        }
        Cmd::Origin { args, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            commands::origin::run(h, opened, &o, args, p, out, err)
        }
        Cmd::Index { args, force, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            commands::xref::build(h, opened, &o, args, force.force, p, r.input.quiet, err)
        }
        Cmd::Calls { args, force, .. } => {
            let (opened, h) = open(&args.call.file, r.input.format.as_deref(), &r.options())?;
            if let Some(path) = &args.output {
                commands::refuse_existing(path, force.force)?;
            }
            let p = progress(&opened);
            let o = r.options();
            with_output(args.output.as_ref(), out, |w| {
                commands::calls::run(h, opened, &o, args, p, w, err)
            })
        }
        Cmd::Flame { args, force, .. } => {
            let (opened, h) = open(&args.call.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            let quiet = r.input.quiet;
            commands::calls::flame(h, opened, &o, args, force.force, p, quiet, err)
        }
        Cmd::Export { args, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            commands::export(h, opened, &o, args, p, r.input.quiet, err)
        }
        Cmd::State { args, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            commands::state::run(h, opened, &o, args, p, out, err)
        }
        Cmd::Mem { args, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let p = progress(&opened);
            let o = r.options();
            commands::mem::run(h, opened, &o, args, p, out, err)
        }
        Cmd::Diff { args, .. } => {
            let o = r.options();
            commands::diff::run(r.input.format.as_deref(), &o, args, out)
                .map_err(CliError::for_diff)
        }
        Cmd::Bbv { args, force, .. } => {
            let (opened, h) = open(&args.file, r.input.format.as_deref(), &r.options())?;
            let o = r.options();
            commands::bbv::run(
                h,
                opened,
                &o,
                args,
                force.force,
                summary(err, &mut sink, r.input.quiet),
            )
        }
        Cmd::Simpoint { args, force, .. } => {
            commands::simpoint::run(args, force.force, r.input.quiet, out, err)
        }
        Cmd::Regions { args, force, .. } => {
            if let Some(path) = &args.output {
                commands::refuse_existing(path, force.force)?;
            }
            let mut rows = 0;
            with_output(args.output.as_ref(), out, |w| {
                rows = commands::regions::run(args, w)?;
                Ok(())
            })?;
            if let Some(path) = &args.output {
                writeln!(
                    summary(err, &mut sink, r.input.quiet),
                    "{}: {rows} regions",
                    path.display()
                )?;
            }
            Ok(())
        }
        Cmd::Serve { args, .. } => {
            let o = r.options();
            commands::serve::run(args, r.input.format.as_deref(), &o, out, err)
        }
        Cmd::Gdbserver { args, .. } => {
            let o = r.options();
            commands::gdbserver::run(args, r.input.format.as_deref(), &o, r.input.quiet, out, err)
        }
        Cmd::Record { args, quiet, force } => {
            commands::record::run(args, force.force, quiet.quiet, err)
        }
        Cmd::Traceme(args) => commands::record::traceme(args),
    }
}

/// Where the summary of a command that writes files goes: stderr, unless `--quiet`.
fn summary<'a>(err: &'a mut dyn Write, sink: &'a mut io::Sink, quiet: bool) -> &'a mut dyn Write {
    if quiet { sink } else { err }
}

/// A writer that counts the lines written through it.
struct CountLines<'a> {
    inner: &'a mut dyn Write,
    lines: u64,
}

impl<'a> CountLines<'a> {
    fn new(inner: &'a mut dyn Write) -> Self {
        CountLines { inner, lines: 0 }
    }
}

impl Write for CountLines<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        let newlines = buf
            .get(..n)
            .unwrap_or_default()
            .iter()
            .filter(|&&b| b == b'\n');
        self.lines = self.lines.saturating_add(newlines.count() as u64);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
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
    // An input cut short under the command: whatever it made of the zeros read past the
    // cut is not a result (and no output was committed).
    let result = trace_registry::check_unchanged()
        .map_err(CliError::Trace)
        .and(result);
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
    ("gdb_packet", commands::gdbserver::fuzz_packets),
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
/// file, read and looked up every way `xref` and the steps do; then the same with its
/// hashes made to match ([`index::rehash`](trace_index::rehash)), so
/// that changed bytes reach the decoding of the directories and lists (a random change
/// otherwise stops at the first hash check). No trace is matched against (its identity
/// is not checked by [`Sidecar::read`](trace_index::Sidecar::read)).
/// Must never panic.
#[cfg(feature = "fuzzing")]
pub fn fuzz_sidecar(data: &[u8]) {
    use trace_index::{Sidecar, rehash};
    let mut fixed = data.to_vec();
    rehash(&mut fixed);
    for bytes in [data, &fixed] {
        let reader = std::io::Cursor::new(bytes);
        let Ok(mut sidecar) = Sidecar::read("input".as_ref(), reader, bytes.len() as u64) else {
            continue;
        };
        if let Ok(seek) = sidecar.seek_index() {
            let _ = trac_x64dbg::Index::from_bytes(&seek);
        }
        // Keys before, inside and past the testdata traces' pcs and stacks: each lookup
        // decodes the entries of the group its key falls in.
        for key in [
            0,
            1,
            0x40_1000,
            0x40_1010,
            0x14_fe00,
            0x7ff6_a1b2_1000,
            u64::MAX,
        ] {
            let _ = sidecar.executions(key);
            let _ = sidecar.accesses(key, key.saturating_add(0x100));
        }
    }
}
