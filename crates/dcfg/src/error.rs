//! The crate's error type.

use std::fmt;

use trace_core::json::{self, ErrorKind};
use trace_core::{LimitExceeded, Located, Offset};

/// Everything that can go wrong reading a DCFG.
///
/// Every variant that comes from the input carries the absolute byte offset (in the
/// uncompressed JSON), and its message ends with `at offset 0x…`. Parse failures also name
/// the JSON path of the offending value, in the form validation findings use: keys, data
/// rows counted from 0 after the header row, cells by column name (by position for an
/// unknown column), array elements by position, e.g.
/// `PROCESSES[0].IMAGES[2].BASIC_BLOCKS[5].NUM_INSTRS` or
/// `PROCESSES[0].EDGES[7].COUNT_PER_THREAD[3]`. The keys of a `PROCESS_DATA` or
/// `IMAGE_DATA` object follow its row directly, as in `PROCESSES[0].IMAGES`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The JSON is malformed or does not have the DCFG shape.
    #[error("{}: {message} at offset {offset}", Where(path))]
    Json {
        /// Where the offending value starts (uncompressed byte offset).
        offset: Offset,
        /// The JSON path of the offending value (empty: the top level).
        path: String,
        /// What was expected and what was found.
        message: String,
    },
    /// A size limit of this crate was exceeded.
    #[error("{}: {limit}", Where(path))]
    Limit {
        /// The JSON path of the offending value (empty: the top level).
        path: String,
        /// The limit and the offset.
        limit: LimitExceeded,
    },
    /// Reading (or decompressing) the input failed.
    #[error("{context}: {source} at offset {offset}")]
    Io {
        /// What was being done.
        context: String,
        /// The number of uncompressed bytes read before the failure.
        offset: Offset,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A path for a message: "top level" when empty.
struct Where<'a>(&'a str);

impl fmt::Display for Where<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "top level"
        } else {
            self.0
        })
    }
}

impl Error {
    /// The byte offset in the (uncompressed) input the error refers to.
    #[must_use]
    pub fn offset(&self) -> Option<Offset> {
        match self {
            Error::Json { offset, .. } | Error::Io { offset, .. } => Some(*offset),
            Error::Limit { limit, .. } => Some(limit.offset),
        }
    }

    /// The JSON path of the offending value, for parse errors (`""`: the top level).
    #[must_use]
    pub fn path(&self) -> Option<&str> {
        match self {
            Error::Json { path, .. } | Error::Limit { path, .. } => Some(path),
            Error::Io { .. } => None,
        }
    }
}

impl Located for Error {
    fn offset(&self) -> Option<Offset> {
        Error::offset(self)
    }

    fn path(&self) -> Option<&str> {
        Error::path(self)
    }
}

impl From<json::Error> for Error {
    #[cold]
    fn from(e: json::Error) -> Error {
        let (offset, kind, path) = e.into_parts();
        match kind {
            ErrorKind::Limit(limit) => Error::Limit { path, limit },
            ErrorKind::Io(source) => Error::Io {
                context: "cannot read or decompress the input".to_owned(),
                offset,
                source,
            },
            kind => Error::Json {
                offset,
                path,
                message: kind.to_string(),
            },
        }
    }
}
