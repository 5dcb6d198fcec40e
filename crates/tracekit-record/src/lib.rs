//! Record x64dbg traces (`.trace64`) of Linux x86-64 programs: the program runs under
//! ptrace and every instruction of every thread is single-stepped, from the first
//! user-space instruction after `execve` to the exit.
//!
//! Each step is written through trac-x64dbg's [`Recorder`](trac_x64dbg::Recorder),
//! in x64dbg's format: the thread id, the instruction bytes, the registers before it as the
//! words that changed since the previous block (without x64dbg's extra entries for words
//! about to change: `RecorderOptions::lookahead`), a full `REGDUMP` every 512 blocks (general
//! registers, flags, segments, debug registers, x87, MXCSR, SSE and AVX from
//! `NT_X86_XSTATE`; see [`regs::regdump`]), and every memory word it accesses (iced-x86's
//! operands, see [`operands`]) with its value before and after. System calls that write
//! user memory (`read`, `fstat`, `clock_gettime`, …, see [`syscalls`]) get the words the
//! kernel wrote as memory writes of the `syscall` instruction's step.
//!
//! With [`Options::ranges`] or [`Options::modules`] only the instructions inside those
//! address ranges are stepped and recorded; outside them the program runs at full speed
//! until a breakpoint at an entry point or a return address brings a thread back (see
//! [`scope`] and the README's "Ranges").
//!
//! The recorder is Linux x86-64 only; elsewhere [`record`] returns
//! [`Error::Unsupported`]. The program is started through a *helper*: a process that calls
//! [`exec_traced`] (`PTRACE_TRACEME`, no address-space randomisation, `execvp`), so that
//! no `unsafe` code runs between `fork` and `exec`. The `tracekit` binary is its own helper
//! (`tracekit record` re-executes itself).
//!
//! ```no_run
//! use std::ffi::OsString;
//! use tracekit_record::{Launch, Options};
//!
//! // A helper that calls `tracekit_record::exec_traced(PROG, ARGS)` with its arguments.
//! let launch = Launch {
//!     helper: "/usr/local/bin/tracekit".into(),
//!     helper_args: vec![OsString::from("__traceme"), OsString::from("--")],
//! };
//! let out = std::fs::File::create("true.trace64")?;
//! let opts = Options { path: "/bin/true".into(), ..Options::default() };
//! let (_, summary) = tracekit_record::record(&launch, "/bin/true".as_ref(), &[], out, &opts, Box::new(|note| eprintln!("{note}")))?;
//! println!("{} instructions, exit {:?}", summary.instructions, summary.exit);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod operands;
pub mod regs;
pub mod scope;
pub mod syscalls;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod linux;

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// How to start the program: `helper HELPER_ARGS… PROG ARGS…`, where the helper calls
/// [`exec_traced`] with `PROG ARGS…`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    /// The helper executable.
    pub helper: PathBuf,
    /// Its arguments before the program's.
    pub helper_args: Vec<OsString>,
}

/// What to record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Stop after this many instructions (the program then runs on untraced).
    pub max: Option<u64>,
    /// The header's `path` (the program).
    pub path: String,
    /// Zero the 16 `AT_RANDOM` bytes the kernel gives the program and the bytes
    /// `getrandom` returns, so that the stack canary, pointer guard and malloc's random
    /// seeds glibc derives from them are the same in every run. Thread ids, `cpuid`'s APIC
    /// id, time and `rdtsc` still differ. The canary is then predictable: for tracing only.
    pub fixed_random: bool,
    /// Address ranges `(start, end)`, `end` exclusive: when any range or module is given,
    /// only instructions inside them are single-stepped and recorded; outside them the
    /// program runs at full speed (see [`scope`]).
    pub ranges: Vec<(u64, u64)>,
    /// Modules (images mapped in the process, by path or file name) whose executable
    /// mappings are ranges to record, found once the program reaches its entry point.
    pub modules: Vec<String>,
}

/// How the program ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
    /// Not known (the recording did not end normally).
    #[default]
    Unknown,
}

impl Exit {
    /// The exit code a shell reports: the status, or 128 + the signal.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            Exit::Code(c) => (c & 0xff) as u8,
            Exit::Signal(s) => (128i32.saturating_add(s) & 0xff) as u8,
            Exit::Unknown => 1,
        }
    }
}

/// What a recording did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Instructions recorded (blocks written).
    pub instructions: u64,
    /// Threads seen, the main one included.
    pub threads: u64,
    /// Wall time from the start of the program to its end.
    pub elapsed: Duration,
    /// How the program ended.
    pub exit: Exit,
    /// Memory words left out: past the 32 a block holds, or of operands whose address is
    /// not computed (gathers, scatters).
    pub cut_words: u64,
    /// Memory words written by system calls that were recorded.
    pub kernel_words: u64,
    /// Forked child processes, detached (they ran untraced).
    pub forks: Vec<u32>,
    /// The program called `execve`: the trace ends there and the new image ran untraced.
    pub execed: bool,
    /// Recording stopped at [`Options::max`].
    pub stopped_at_max: bool,
    /// Times a thread left the ranges and ran at full speed (0 without ranges).
    pub gaps: u64,
    /// The ranges recorded, the modules' resolved (empty without ranges).
    pub ranges: Vec<(u64, u64)>,
}

/// Why a recording failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Not Linux x86-64.
    #[error("tracekit record is not supported on this platform (Linux x86-64 only)")]
    Unsupported,
    /// The helper could not be started.
    #[error("cannot start {helper}: {source}")]
    Spawn {
        /// The helper.
        helper: String,
        /// Why.
        source: std::io::Error,
    },
    /// The helper exited before the program's first instruction (it printed why: the
    /// program was not found, or ptrace is not allowed).
    #[error(
        "the program did not start under ptrace (exit status {code}); ptrace may be refused: see /proc/sys/kernel/yama/ptrace_scope and the container's seccomp profile"
    )]
    NotStarted {
        /// The helper's exit status.
        code: i32,
    },
    /// A ptrace request (or waitpid) failed.
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[error("{what} failed: {errno}")]
    Ptrace {
        /// The request.
        what: &'static str,
        /// The error number.
        errno: nix::errno::Errno,
    },
    /// `execvp` of the program failed (in the helper).
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    #[error("cannot execute {program}: {errno}")]
    Exec {
        /// The program.
        program: String,
        /// The error number.
        errno: nix::errno::Errno,
    },
    /// A `--module` was not mapped in the process when the program reached its entry
    /// point (the program is killed; nothing of its own code ran).
    #[error(
        "module {name:?} is not mapped in the process at its entry point; mapped images: {mapped}"
    )]
    ModuleNotFound {
        /// The name given.
        name: String,
        /// The file names of the images mapped then.
        mapped: String,
    },
    /// An argument holds a NUL byte.
    #[error("an argument contains a NUL byte")]
    BadArgument,
    /// Something the tracer did not expect.
    #[error("unexpected: {0}")]
    Unexpected(String),
    /// Writing the trace failed.
    #[error("writing the trace: {0}")]
    Write(trac_x64dbg::Error),
}

/// Runs `program` with `args` (stdin, stdout and stderr inherited) under ptrace through
/// `launch`'s helper, and writes its trace to `out`: an x64dbg trace (x64) whose header
/// `path` is [`Options::path`]. `notes` gets one line per event worth telling (a forked
/// child left untraced, an `execve`). Returns `out` and what happened; the program's exit
/// is [`Summary::exit`].
///
/// # Errors
///
/// [`Error::Unsupported`] off Linux x86-64; the helper or program cannot start; a ptrace
/// request fails; the output cannot be written. The program is killed on an error.
pub fn record<W: Write>(
    launch: &Launch,
    program: &OsStr,
    args: &[OsString],
    out: W,
    opts: &Options,
    notes: Box<dyn FnMut(&str)>,
) -> Result<(W, Summary), Error> {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        linux::record(launch, program, args, out, opts, notes)
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        let _ = (launch, program, args, out, opts, notes);
        Err(Error::Unsupported)
    }
}

/// The helper's side: `PTRACE_TRACEME`, address-space randomisation off (as GDB runs
/// programs, so that two recordings match), then `execvp(program, [program, args…])`.
/// Returns only on failure, with the reason.
#[must_use]
pub fn exec_traced(program: &OsStr, args: &[OsString]) -> Error {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        linux::exec_traced(program, args)
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        let _ = (program, args);
        Error::Unsupported
    }
}

/// The baseline of the benchmark: a bare `PTRACE_SINGLESTEP` + `waitpid` +
/// `PTRACE_GETREGS` loop over `program` (one thread) until it exits, recording nothing.
/// Returns the steps and the seconds they took.
///
/// # Errors
///
/// As [`record`].
pub fn bare_step_loop(
    launch: &Launch,
    program: &OsStr,
    args: &[OsString],
) -> Result<(u64, f64), Error> {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        linux::bare_step_loop(launch, program, args)
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        let _ = (launch, program, args);
        Err(Error::Unsupported)
    }
}
