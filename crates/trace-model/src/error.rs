//! The registry's error: what went wrong, and where, as values a program can read.

use std::io;

use trace_core::{Located, Offset};

/// Everything opening, reading or checking a trace through the registry can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading the input or writing an output failed.
    #[error("{}{source}", if .context.is_empty() { String::new() } else { format!("{}: ", .context) })]
    Io {
        /// What was being done, e.g. "cannot open trace.bin".
        context: String,
        /// The underlying error.
        source: io::Error,
    },
    /// The input is not valid for its format; the format crate's own error, with where.
    #[error("{source}")]
    Format {
        /// The format's name.
        format: &'static str,
        /// The absolute byte offset, when the error has one.
        offset: Option<Offset>,
        /// The JSON path, for JSON formats.
        path: Option<String>,
        /// The record index, when known.
        record: Option<u64>,
        /// The format crate's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The file reads, but its content is inconsistent (validation findings).
    #[error("{message}")]
    Invalid {
        /// What is wrong (the first finding, and how many there are).
        message: String,
        /// The absolute byte offset of the first finding, when known.
        offset: Option<Offset>,
        /// The JSON path of the first finding, when known.
        path: Option<String>,
    },
    /// The format of the input could not be detected.
    #[error("{0}")]
    Detect(String),
    /// The operation does not apply to this input or these options.
    #[error("{0}")]
    Unsupported(String),
    /// The input file was cut short (truncated or rewritten) by another process while it
    /// was read: what was read past `offset` is not the file's.
    #[error("{file} changed while it was read (at offset {offset:#x})")]
    Changed {
        /// The input's name.
        file: String,
        /// The first offset read past the file's new end.
        offset: u64,
    },
}

impl Error {
    /// A format crate's error, keeping where it happened.
    pub fn format<E: Located + Send + Sync + 'static>(format: &'static str, e: E) -> Error {
        Error::Format {
            format,
            offset: e.offset(),
            path: e.path().map(str::to_owned),
            record: e.record(),
            source: Box::new(e),
        }
    }

    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            context: context.into(),
            source,
        }
    }

    /// Whether this is a write to a closed pipe (`tracekit dump big | head`).
    #[must_use]
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, Error::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe)
    }
}

impl From<io::Error> for Error {
    fn from(source: io::Error) -> Error {
        Error::Io {
            context: String::new(),
            source,
        }
    }
}

impl Located for Error {
    fn offset(&self) -> Option<Offset> {
        match self {
            Error::Format { offset, .. } | Error::Invalid { offset, .. } => *offset,
            Error::Changed { offset, .. } => Some(Offset(*offset)),
            _ => None,
        }
    }

    fn path(&self) -> Option<&str> {
        match self {
            Error::Format { path, .. } | Error::Invalid { path, .. } => path.as_deref(),
            _ => None,
        }
    }

    fn record(&self) -> Option<u64> {
        match self {
            Error::Format { record, .. } => *record,
            _ => None,
        }
    }
}
