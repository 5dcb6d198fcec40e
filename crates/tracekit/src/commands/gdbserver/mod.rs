//! `tracekit gdbserver FILE [--port N] [--host H] [--stdio]`: a recorded x86/x86-64 trace
//! served to GDB over its remote protocol, forwards and backwards.
//!
//! The position is a step N (the state before instruction N, as `tracekit state --at N`),
//! starting at 0. GDB's `g` is the stopped thread's registers there (`state`), in the
//! layout of an `i386:x86-64` or `i386` target description (general, segment and flags
//! registers, x87, SSE and AVX where the trace has them, `xx` for the rest); `m` is `tracekit
//! mem --at N` (the known prefix of the range, `E0e` when the first byte is unknown, so
//! GDB says "Cannot access memory at address …"), its unknown bytes filled from the
//! opcodes of the instructions executed there (so that GDB disassembles). Writes are refused
//! (`E1e`).
//!
//! Execution: `stepi` moves the thread to its next step, `reverse-stepi` to its previous
//! one; `continue` and `reverse-continue` go to the next or previous execution of a
//! breakpoint's address in any thread (state before it) or access to a watchpoint's range
//! (forwards: after the accessing instruction; backwards: before it), found in the sidecar
//! index (`FILE.tkidx`, built at the start when missing or stale); past either end of the
//! trace GDB stops at the last or first step with "No more reverse-execution history.".
//! Every thread of the trace is a GDB thread, named by its recorded id (plus 1 when a
//! thread is 0, as GDB's ids are not). `monitor when` prints `step N thread T`; `monitor
//! goto N` jumps (GDB's caches are not flushed by a monitor command: `maintenance flush
//! register-cache` after it; `--gdb-commands` prints `tk-goto N`, which does both and
//! selects the thread of step N).
//! A thread other than step N's shows the state before its own next step (else after its
//! last), so every thread's registers are its own.
//!
//! What watchpoints see: x64dbg records the new value of a write only when it changed the
//! memory, and (without `--disasm`) no read/write kind, so an access with a new value is a
//! write and one without a read; GDB itself then ignores a `watch` hit whose value did not
//! change, as on hardware.
//!
//! Every request is answered: with an error reply where the trace cannot (`E0e` memory,
//! `E1e` writes, `E16` a watchpoint past [`target::MAX_WATCHPOINTS`]), and `E01` for a
//! packet gdbstub cannot parse or that does not fit its buffer ([`guard`]).
//!
//! The start reads the sidecar's header, directories and thread table only (the timeline
//! of threads is read from it a block at a time), so that it takes milliseconds on a trace
//! of any size once indexed.
//!
//! The protocol is `gdbstub`'s; this module is the target ([`target::Replay`]), the
//! register layout ([`regs`]); the timeline of threads is the sidecar's ([`trace_index::Timeline`]).

pub mod guard;
pub mod regs;
pub mod target;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;

use clap::Args;
use gdbstub::conn::{Connection, ConnectionExt};
use gdbstub::stub::run_blocking::{BlockingEventLoop, Event, WaitForStopReasonError};
use gdbstub::stub::{DisconnectReason, GdbStub};
use gdbstub::target::Target;
use trace_index::{self as index, BuildOptions, Identity, Sidecar, Timeline};
use trace_registry::{Ctx, Handler, Input, Options};

use self::guard::{Guard, Shared};
use self::target::{Replay, ReplayError, Source, Stop};
use crate::CliError;

/// Arguments of `tracekit gdbserver`.
#[derive(Debug, Clone, Args)]
pub struct GdbserverArgs {
    /// The trace file (x86/x86-64 with an instruction stream: x64dbg, Tenet, gdb-tfile).
    #[arg(required_unless_present = "gdb_commands")]
    pub file: Option<OsString>,
    /// The TCP port; 0 (the default) picks a free one (`listening on 127.0.0.1:PORT` says
    /// which).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Listen on this address instead of 127.0.0.1 (anyone who reaches it can read the
    /// trace).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Speak the protocol on stdin and stdout instead (`target remote | tracekit gdbserver
    /// --stdio FILE`).
    #[arg(long)]
    pub stdio: bool,
    /// Print a GDB command file to `source` (`tk-goto N`, `tk-when`) and exit.
    #[arg(long)]
    pub gdb_commands: bool,
}

/// What `--gdb-commands` prints: GDB does not flush its caches or change its selected
/// thread after a monitor command, so a jump in time is the monitor command, the flushes
/// and a switch to the thread of the step (as rr's `back`/`forward`).
pub const GDB_COMMANDS: &str = r#"# tracekit gdbserver: `source` this file in GDB (it needs GDB's Python).
python
import re

import gdb


class TkGoto(gdb.Command):
    """tk-goto N: jump to step N of the trace (the state before instruction N), in the
thread that executes it."""

    def __init__(self):
        super().__init__("tk-goto", gdb.COMMAND_RUNNING)

    def invoke(self, arg, from_tty):
        said = gdb.execute("monitor goto " + arg, to_string=True)
        gdb.write(said)
        gdb.execute("maintenance flush register-cache")
        gdb.execute("maintenance flush dcache")
        lwp = re.search(r"^gdb thread 1\.(\d+)$", said, re.M)
        for thread in gdb.selected_inferior().threads() if lwp else ():
            if thread.ptid[1] == int(lwp.group(1)):
                thread.switch()
        gdb.execute("frame")


TkGoto()
end
define tk-when
  monitor when
end
document tk-when
tk-when: the current step and its thread, as `step N thread T`.
end
"#;

/// The protocol on stdin and stdout (under `target remote |`, one socket).
struct Stdio {
    input: std::io::Stdin,
    output: std::io::BufWriter<std::io::Stdout>,
}

impl Connection for Stdio {
    type Error = std::io::Error;

    fn write(&mut self, byte: u8) -> Result<(), Self::Error> {
        self.output.write_all(&[byte])
    }

    fn write_all(&mut self, buf: &[u8]) -> Result<(), Self::Error> {
        self.output.write_all(buf)
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        self.output.flush()
    }
}

impl ConnectionExt for Stdio {
    fn read(&mut self) -> Result<u8, Self::Error> {
        let mut b = [0u8];
        self.input.lock().read_exact(&mut b)?;
        Ok(b[0])
    }

    fn peek(&mut self) -> Result<Option<u8>, Self::Error> {
        // Only a running target peeks for Ctrl-C; a replay stops at once.
        Ok(None)
    }
}

/// The packet size announced to GDB (`PacketSize=4800`, as gdbserver's).
pub const PACKET_SIZE: usize = 0x4800;

/// The connection: stdio or one accepted TCP stream.
type Conn = Box<dyn ConnectionExt<Error = std::io::Error>>;

/// The event loop: every resume has stopped by the time it returns.
struct Loop<'a>(std::marker::PhantomData<&'a ()>);

impl<'a> BlockingEventLoop for Loop<'a> {
    type Target = Replay<'a>;
    type Connection = Shared;
    type StopReason = Stop;

    #[allow(clippy::type_complexity)]
    fn wait_for_stop_reason(
        target: &mut Replay<'a>,
        _conn: &mut Shared,
    ) -> Result<Event<Stop>, WaitForStopReasonError<<Replay<'a> as Target>::Error, std::io::Error>>
    {
        Ok(Event::TargetStopped(target.take_stop()))
    }

    fn on_interrupt(target: &mut Replay<'a>) -> Result<Option<Stop>, ReplayError> {
        Ok(Some(Stop::SignalWithThread {
            tid: target.current_tid(),
            signal: gdbstub::common::Signal::SIGINT,
        }))
    }
}

/// Runs `tracekit gdbserver`: opens the trace, its sidecar index (building it when
/// needed, with a note on stderr), then serves one GDB session.
///
/// # Errors
///
/// The trace cannot be opened, has no instruction stream or is not x86/x86-64 (usage); the
/// index cannot be built; the port cannot be listened on; the session ends on a
/// connection or trace read error.
pub fn run(
    args: &GdbserverArgs,
    forced: Option<&str>,
    options: &Options,
    quiet: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    if args.gdb_commands {
        out.write_all(GDB_COMMANDS.as_bytes())?;
        return Ok(());
    }
    let file = match &args.file {
        Some(f) if f != "-" => f,
        _ => {
            return Err(CliError::Usage(
                "`tracekit gdbserver` reads a file, not stdin".into(),
            ));
        }
    };
    let (mut input, handler) = trace_registry::open(file, forced)?;
    input.bytes()?;
    let replay = open_replay(handler, &mut input, options, quiet, err)?;
    let conn: Conn = if args.stdio {
        Box::new(Stdio {
            input: std::io::stdin(),
            output: std::io::BufWriter::new(std::io::stdout()),
        })
    } else {
        let host = args.host.clone().unwrap_or_else(|| "127.0.0.1".into());
        let listener = TcpListener::bind((host.as_str(), args.port))
            .map_err(|e| CliError::io(format!("cannot listen on {host}:{}", args.port), e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| CliError::io("cannot read the port listened on", e))?;
        writeln!(out, "listening on {addr}")?;
        out.flush()?;
        if args.host.is_some() && !addr.ip().is_loopback() {
            writeln!(
                err,
                "warning: serving on {addr}: anyone who can reach it can read the trace"
            )?;
        }
        let (stream, _) = listener
            .accept()
            .map_err(|e| CliError::io("cannot accept a connection", e))?;
        Box::new(stream)
    };
    serve(replay, conn, err)
}

/// The replay of `input` (read into memory or mapped): its sidecar index (built when
/// needed, with notes on `err`), the timeline of its threads, and steps that seek.
fn open_replay<'a>(
    handler: &'static dyn Handler,
    input: &'a mut Input,
    options: &Options,
    quiet: bool,
    err: &mut dyn Write,
) -> Result<Replay<'a>, CliError> {
    // A format without an instruction stream, or a trace of another instruction set, is
    // refused before the index is built for it.
    {
        let mut steps = index::steps_without_notes(handler, input, &mut Ctx::new(options))
            .map_err(CliError::usage_if_unsupported)?;
        if let Some(first) = steps.next_step() {
            first?;
        }
        if regs::Layout::of(steps.isa()).is_none() {
            return Err(CliError::Usage(
                "`tracekit gdbserver` serves x86 and x86-64 traces; this one is of another instruction set".into(),
            ));
        }
    }
    let sidecar = sidecar(handler, input, options, quiet, err)?;
    // For a format whose steps only read on, a second input to open them again from.
    let spare = input.share();
    let name = input.name().to_owned();
    let mut steps = index::steps_without_notes(handler, input, &mut Ctx::new(options))
        .map_err(CliError::usage_if_unsupported)?;
    // The threads from the sidecar: no pass over the trace.
    let timeline = sidecar.timeline()?;
    let isa = steps.isa();
    // Steps that seek back to 0 after a step seek anywhere (a stream that only reads on
    // cannot).
    let read_one = matches!(steps.next_step(), Some(Ok(_)));
    let seeks =
        read_one && steps.seek(0).is_ok() && matches!(steps.next_step(), Some(Ok(s)) if s.i == 0);
    let source = match spare {
        Some(input) if !seeks => {
            drop(steps);
            Source::Reopened { input, handler }
        }
        _ => Source::Seekable(steps),
    };
    let summary = summary(handler, &name, &sidecar, &timeline, isa);
    Replay::new(source, isa, sidecar, options.clone(), timeline, summary)
        .map_err(CliError::usage_if_unsupported)
}

/// A connection that reads `data` and then ends (the fuzz target's GDB).
#[cfg(feature = "fuzzing")]
struct Scripted {
    data: Vec<u8>,
    at: usize,
}

#[cfg(feature = "fuzzing")]
impl Connection for Scripted {
    type Error = std::io::Error;

    fn write(&mut self, _byte: u8) -> Result<(), Self::Error> {
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(feature = "fuzzing")]
impl ConnectionExt for Scripted {
    fn read(&mut self) -> Result<u8, Self::Error> {
        let b = self
            .data
            .get(self.at)
            .copied()
            .ok_or(std::io::ErrorKind::UnexpectedEof)?;
        self.at = self.at.saturating_add(1);
        Ok(b)
    }

    fn peek(&mut self) -> Result<Option<u8>, Self::Error> {
        Ok(self.data.get(self.at).copied())
    }
}

/// Fuzzing entry point: `data` as what GDB sends, to a session over
/// `testdata/x64dbg/basic.trace64` (copied once into a temporary directory with its
/// index): answers, or an error that ends the session, never a panic.
#[cfg(feature = "fuzzing")]
pub fn fuzz_packets(data: &[u8]) {
    use std::path::PathBuf;
    use std::sync::OnceLock;
    static TRACE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let trace = TRACE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tracekit-fuzz-gdb-{}", std::process::id()));
        let path = dir.join("basic.trace64");
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(
            &path,
            include_bytes!("../../../../../testdata/x64dbg/basic.trace64"),
        )
        .ok()?;
        Some(path)
    });
    let Some(trace) = trace else {
        return;
    };
    let Ok((mut input, handler)) = trace_registry::open(trace.as_os_str(), None) else {
        return;
    };
    if input.bytes().is_err() {
        return;
    }
    let options = Options::default();
    let Ok(replay) = open_replay(handler, &mut input, &options, true, &mut std::io::sink()) else {
        return;
    };
    let conn: Conn = Box::new(Scripted {
        data: data.to_vec(),
        at: 0,
    });
    let _ = serve(replay, conn, &mut std::io::sink());
}

/// Serves one session over `conn`, through a [`Guard`]: a packet gdbstub cannot parse
/// ends its run, and is answered `E01` before a new run goes on with the same replay.
fn serve(mut replay: Replay<'_>, conn: Conn, err: &mut dyn Write) -> Result<(), CliError> {
    let guard = Shared(std::rc::Rc::new(std::cell::RefCell::new(Guard::new(
        conn,
        PACKET_SIZE,
    ))));
    loop {
        // gdbserver's size: GDB reads memory in packets of up to half of it.
        let stub = GdbStub::builder(guard.clone())
            .packet_buffer_size(PACKET_SIZE)
            .build()
            .map_err(|e| CliError::Failed(format!("GDB session: {e:?}")))?;
        match stub.run_blocking::<Loop<'_>>(&mut replay) {
            Err(e) if !e.is_connection_error() && !e.is_target_error() => {
                // The packet was read whole: the stream is at the next one.
                guard
                    .0
                    .borrow_mut()
                    .reply("E01")
                    .map_err(|io| CliError::io("GDB session", io))?;
            }
            ended => return session_end(ended, err),
        }
    }
}

/// What a `gdbstub` run that ended means for the session.
fn session_end(
    ended: Result<DisconnectReason, gdbstub::stub::GdbStubError<ReplayError, std::io::Error>>,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    match ended {
        Ok(DisconnectReason::Disconnect | DisconnectReason::Kill) => Ok(()),
        Ok(other) => {
            writeln!(err, "the session ended: {other:?}")?;
            Ok(())
        }
        Err(e) => {
            if e.is_connection_error() {
                return match e.into_connection_error() {
                    // GDB went away without detaching (killed, or its pipe closed).
                    Some((io, _)) if io.kind() == std::io::ErrorKind::UnexpectedEof => Ok(()),
                    Some((io, _)) => Err(CliError::io("GDB session", io)),
                    None => Err(CliError::Failed("GDB session: connection error".into())),
                };
            }
            if e.is_target_error() {
                if let Some(ReplayError(e)) = e.into_target_error() {
                    return Err(CliError::Trace(e));
                }
                return Err(CliError::Failed("the trace could not be read".into()));
            }
            Err(CliError::Failed(format!("GDB session: {e}")))
        }
    }
}

/// What `monitor info` prints: the trace, its format and instruction set, its steps and
/// threads (from the timeline: no pass of its own) and the index used.
fn summary(
    handler: &dyn Handler,
    name: &str,
    sidecar: &Sidecar,
    timeline: &Timeline,
    isa: trace_registry::steps::Isa,
) -> String {
    let mut text = format!(
        "trace: {}\nformat: {}\nisa: {isa:?}\nsteps: {}\nthreads:",
        name,
        handler.name(),
        timeline.count()
    );
    for t in timeline.thread_table() {
        text.push_str(&format!("\n  - id: {}, steps: {}", t.id, t.steps));
    }
    text.push_str(&format!("\nindex: {}", sidecar.path().display()));
    text
}

/// The trace's usable sidecar index: the one beside it (or at `--index`), else one built
/// now, beside it or, where that cannot be written, in a temporary directory (removed once
/// open). `quiet`: no progress lines, only the notes.
fn sidecar(
    handler: &dyn Handler,
    input: &mut Input,
    options: &Options,
    quiet: bool,
    err: &mut dyn Write,
) -> Result<Sidecar, CliError> {
    let explicit = options.index.clone();
    let why = match index::open_for(input, explicit.as_deref(), handler.name()) {
        Ok(s) => return Ok(s),
        Err(why) => why,
    };
    let trace = input
        .path()
        .map(Path::to_owned)
        .ok_or_else(|| CliError::Usage("`tracekit gdbserver` reads a file".into()))?;
    let out = explicit.unwrap_or_else(|| index::default_path(&trace));
    // Why an index there is not used (a missing one needs no note: it is built now).
    if let Some(note) = why.note(&out, false) {
        writeln!(err, "{note}")?;
    }
    if !quiet {
        writeln!(
            err,
            "indexing {} (once: kept as {})…",
            trace.display(),
            out.display()
        )?;
    }
    let progress: Arc<dyn Fn(u64) + Send + Sync> = Arc::new(move |n| {
        if !quiet && n.is_multiple_of(1 << 20) {
            eprintln!("indexed {n} steps");
        }
    });
    let build = |input: &mut Input, out: &Path| {
        let opts = BuildOptions {
            progress: Some(Arc::clone(&progress)),
            ..BuildOptions::default()
        };
        index::build(handler, input, &mut Ctx::new(options), Some(out), opts)
    };
    let mut temp_dir = None;
    let built = match build(input, &out) {
        Ok(b) => b,
        Err(trace_registry::Error::Io { .. }) => {
            let name = out
                .file_name()
                .map_or_else(|| OsString::from("trace.tkidx"), ToOwned::to_owned);
            let temp =
                std::env::temp_dir().join(format!("tracekit-gdbserver-{}", std::process::id()));
            std::fs::create_dir_all(&temp)
                .map_err(|e| CliError::io(format!("cannot create {}", temp.display()), e))?;
            let t = temp.join(name);
            writeln!(
                err,
                "note: {} is not writable: indexing into {}",
                out.display(),
                t.display()
            )?;
            temp_dir = Some(temp);
            build(input, &t)?
        }
        Err(e) => return Err(CliError::usage_if_unsupported(e)),
    };
    if !quiet {
        writeln!(err, "indexed {} steps", built.steps)?;
    }
    let identity = Identity::of_input(input)?;
    let opened = Sidecar::open(&built.path, &identity, handler.name())
        .map_err(|why| CliError::Failed(format!("the index just built cannot be read: {why:?}")));
    if let Some(temp) = temp_dir {
        // The open file stays readable on Unix; elsewhere it stays until the temporary
        // directory is cleaned.
        let _ = std::fs::remove_file(&built.path);
        let _ = std::fs::remove_dir(&temp);
    }
    opened
}
