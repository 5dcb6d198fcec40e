//! `tracekit convert FILE --to tfile -o OUT.tf [--thread T]`: one thread of an instruction
//! stream (an x64dbg trace, or any x86/x64 stream: Tenet, a tfile) as a GDB tracepoint file
//! that `target tfile` replays with no executable: a frame per instruction with the
//! registers before it and the memory it accessed (the rules are those of
//! [`trace_sinks::tfile`]). The file is written under a temporary name and renamed
//! once the whole input has been read, so a failed conversion leaves no file.

use std::io::{BufWriter, Write};
use std::path::Path;

use trace_registry::output::AtomicFile;
use trace_registry::{Ctx, Handler, Input, Options};
use trace_sinks::tfile::{self, TfileError};

use crate::CliError;

/// Converts `thread` (by default the first thread) of `input` into the tfile `path`;
/// prints the file, the thread, the frames and the tracepoint's address on `summary`.
///
/// # Errors
///
/// The input has no instruction stream, is not x86/x64, or has no such thread (usage);
/// it is damaged; the file cannot be written.
pub fn convert(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    thread: Option<u64>,
    path: &Path,
    summary: &mut dyn Write,
) -> Result<(), CliError> {
    let mut steps = handler
        .steps(&mut input, &mut Ctx::new(options))
        .map_err(CliError::usage_if_unsupported)?;
    let cannot = |what: &str| {
        let what = format!("cannot {what} {}", path.display());
        move |e| CliError::io(what, e)
    };
    let file = AtomicFile::create(path).map_err(cannot("create"))?;
    let (done, file) =
        tfile::convert(&mut *steps, thread, BufWriter::new(file)).map_err(|e| match e {
            TfileError::Read(e) => CliError::Trace(e),
            TfileError::Write(gdb_tfile::write::WriteError::Io(e)) => {
                CliError::io(format!("cannot write {}", path.display()), e)
            }
            e @ TfileError::Write(_) => CliError::Failed(e.to_string()),
            e => CliError::Usage(e.to_string()),
        })?;
    let file = file
        .into_inner()
        .map_err(|e| CliError::io(format!("cannot write {}", path.display()), e.into_error()))?;
    file.commit().map_err(cannot("write"))?;
    writeln!(
        summary,
        "{}: thread {}, {} frames, tracepoint 1 at {:#x}",
        path.display(),
        done.thread,
        done.frames,
        done.first_pc
    )?;
    Ok(())
}
