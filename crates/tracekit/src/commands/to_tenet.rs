//! `tracekit convert FILE --to tenet -o PREFIX`: an instruction stream (x64dbg, or any x86/x64
//! stream) as Tenet traces, one per thread, `PREFIX.<thread>.log` (the thread id in
//! decimal), as Tenet's reference Pin tracer names them. The line rules are those of
//! [`trace_sinks::tenet`]. Each file is written under a temporary name and renamed
//! once the whole input has been read, so a failed conversion leaves no partial trace.

use std::io::Write;
use std::path::{Path, PathBuf};

use trace_registry::{Ctx, Handler, Input, Options};

use crate::CliError;

/// Converts `input` into `PREFIX.<thread>.log` files; prints each file and its line count
/// on `summary`.
///
/// # Errors
///
/// The input has no instruction stream or is not x86/x64 (usage), a file exists without
/// `force`, the input is damaged, or a file cannot be written.
pub fn convert(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    prefix: &Path,
    force: bool,
    summary: &mut dyn Write,
) -> Result<(), CliError> {
    let mut steps = handler
        .steps(&mut input, &mut Ctx::new(options))
        .map_err(CliError::usage_if_unsupported)?;
    let final_path = |thread: u64| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(format!(".{thread}.log"));
        PathBuf::from(p)
    };
    let mut existing = None;
    let threads = trace_sinks::tenet::convert(&mut *steps, |thread| {
        let path = final_path(thread);
        super::create_output(&path, force, &mut existing)
    });
    let threads = match (threads, existing) {
        (Err(_), Some(e)) => return Err(e),
        (t, _) => t.map_err(CliError::usage_if_unsupported)?,
    };
    // Every file is renamed only once the whole input has been read.
    for t in threads {
        let file = t
            .output
            .into_inner()
            .map_err(|e| CliError::io("cannot write a Tenet file".to_owned(), e.into_error()))?;
        let to = file.dest().to_owned();
        file.commit()
            .map_err(|e| CliError::io(format!("cannot write {}", to.display()), e))?;
        writeln!(summary, "{}: {} lines", to.display(), t.lines)?;
    }
    Ok(())
}
