//! The CLI's error type and its exit codes.

use std::fmt;
use std::io;

/// Everything that can end a `tracekit` command.
#[derive(Debug)]
#[non_exhaustive]
pub enum CliError {
    /// Reading the input or writing the output failed.
    Io {
        /// What was being done, e.g. "cannot open trace.bin".
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// Opening, reading or checking the trace failed: the registry's error, with the offset,
    /// JSON path or record where it happened.
    Trace(trace_registry::Error),
    /// The command line makes no sense for this input (exit code 2).
    Usage(String),
    /// Any other failure, with its message.
    Failed(String),
    /// `tracekit diff`: the traces differ (exit code 1, nothing printed).
    Different,
    /// `tracekit diff`: any error, which exits 2 as `diff`'s errors do.
    DiffFailed(Box<CliError>),
    /// `tracekit record`: the recorded program's exit code, not 0 (nothing printed).
    ProgramExit(u8),
}

impl CliError {
    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> CliError {
        CliError::Io {
            context: context.into(),
            source,
        }
    }

    /// An error of `tracekit diff`: "different" stays, anything else exits 2.
    #[must_use]
    pub fn for_diff(self) -> CliError {
        match self {
            CliError::Different | CliError::DiffFailed(_) => self,
            e => CliError::DiffFailed(Box::new(e)),
        }
    }

    /// The process exit code for this error: 2 for usage errors, 1 otherwise (`diff`: 1
    /// for different, 2 for any error).
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_)
            | CliError::Trace(trace_registry::Error::Unsupported(_))
            | CliError::DiffFailed(_) => 2,
            CliError::ProgramExit(c) => *c,
            _ => 1,
        }
    }

    /// Whether this is a write to a closed pipe (`tracekit dump big | head`), which ends the
    /// command quietly and successfully.
    #[must_use]
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            CliError::Io { source, .. } => source.kind() == io::ErrorKind::BrokenPipe,
            CliError::Trace(e) => e.is_broken_pipe(),
            CliError::DiffFailed(e) => e.is_broken_pipe(),
            _ => false,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Io { context, source } if context.is_empty() => write!(f, "{source}"),
            CliError::Io { context, source } => write!(f, "{context}: {source}"),
            CliError::Trace(e) => write!(f, "{e}"),
            CliError::Usage(m) | CliError::Failed(m) => f.write_str(m),
            CliError::Different => f.write_str("the traces differ"),
            CliError::ProgramExit(c) => write!(f, "the program exited with {c}"),
            CliError::DiffFailed(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CliError {}

impl CliError {
    /// A registry error of a command that needs what the format lacks (an instruction
    /// stream, block executions): usage (exit 2); any other, the trace's (exit 1).
    pub fn usage_if_unsupported(e: trace_registry::Error) -> CliError {
        match e {
            trace_registry::Error::Unsupported(m) => CliError::Usage(m),
            e => CliError::Trace(e),
        }
    }
}

impl From<trace_registry::Error> for CliError {
    fn from(e: trace_registry::Error) -> CliError {
        match e {
            trace_registry::Error::Io { context, source } => CliError::Io { context, source },
            e => CliError::Trace(e),
        }
    }
}

impl From<io::Error> for CliError {
    fn from(source: io::Error) -> CliError {
        CliError::Io {
            context: String::new(),
            source,
        }
    }
}
