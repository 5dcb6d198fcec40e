//! The crate's error type.

use trace_core::Offset;

/// Everything that can go wrong reading a DCFG.
///
/// Every variant that comes from the input carries the absolute byte offset (in the
/// uncompressed JSON) and its message ends with `at offset 0x…`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The JSON is malformed or does not have the DCFG shape. `message` names the JSON path
    /// (keys, and table rows and columns) of the offending value.
    #[error("{message} at offset {offset}")]
    Json {
        /// Where the JSON parser stopped (uncompressed byte offset).
        offset: Offset,
        /// What was wrong, with the path to the value.
        message: String,
    },
    /// A size limit of this crate was exceeded.
    #[error(transparent)]
    Limit(#[from] trace_core::LimitExceeded),
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

impl Error {
    /// The byte offset in the (uncompressed) input the error refers to.
    #[must_use]
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Json { offset, .. } | Error::Io { offset, .. } => Some(offset.0),
            Error::Limit(l) => Some(l.offset.0),
        }
    }
}
