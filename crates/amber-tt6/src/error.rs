//! The crate's error type. Every parse error carries the absolute file offset (and, where
//! it applies, the record index) and its message ends with `at offset 0x…`.

use trace_core::{BadValue, LimitExceeded, Offset, UnexpectedEof};

/// Everything that can go wrong reading an amber trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input ended inside a fixed part (initial PC, FULL magic).
    #[error(transparent)]
    Eof(#[from] UnexpectedEof),
    /// The input ended inside record `record` (all earlier records were complete).
    #[error(
        "truncated record {record}: needed {needed} bytes, {available} available at offset {offset}"
    )]
    Truncated {
        /// Index of the incomplete record (0 = first instruction).
        record: u64,
        /// Where the incomplete record (or escape record) starts.
        offset: Offset,
        /// Bytes the record needs.
        needed: u64,
        /// Bytes left in the input.
        available: u64,
    },
    /// A count above a reader limit.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// A value the format does not allow (FULL magic, record size option).
    #[error(transparent)]
    BadValue(#[from] BadValue),
    /// A thread file given to [`crate::threads::merge_files`] is not named
    /// `thread_NNN.tt6` / `thread_NNN.tt6e`, or names the same thread as another one.
    #[error("thread file {name:?}: {problem}")]
    ThreadFile {
        /// The file name.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// Reading the underlying stream failed.
    #[error("i/o error: {source} at offset {offset}")]
    Io {
        /// How far the stream had been read.
        offset: Offset,
        /// The error.
        source: std::io::Error,
    },
}

impl Error {
    /// The absolute offset the error refers to.
    #[must_use]
    pub fn offset(&self) -> Option<Offset> {
        match self {
            Error::Eof(e) => Some(e.offset),
            Error::Truncated { offset, .. } | Error::Io { offset, .. } => Some(*offset),
            Error::Limit(e) => Some(e.offset),
            Error::BadValue(e) => Some(e.offset),
            Error::ThreadFile { .. } => None,
        }
    }

    /// The index of the record the error is in, where known.
    #[must_use]
    pub fn record(&self) -> Option<u64> {
        match self {
            Error::Truncated { record, .. } => Some(*record),
            _ => None,
        }
    }
}

impl trace_core::Located for Error {
    fn offset(&self) -> Option<Offset> {
        Error::offset(self)
    }

    fn record(&self) -> Option<u64> {
        Error::record(self)
    }
}

/// Everything that can go wrong writing an amber trace: the record does not fit its
/// opcode's class, or the output fails.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The instruction's fields do not match what its class needs.
    #[error("instruction {index} ({opcode:#010x}, class {class}): {problem} at offset {offset}")]
    Inconsistent {
        /// Index of the instruction.
        index: u64,
        /// Its opcode word.
        opcode: u32,
        /// The class the opcode has under the writer's dialect.
        class: crate::Class,
        /// What is wrong.
        problem: &'static str,
        /// Output offset where the record would have started.
        offset: Offset,
    },
    /// An escape's code or payload cannot be encoded.
    #[error(
        "escape code {code:#x} with {words} words cannot be encoded (code ≤ 0x3ff, ≤ 65535 words) at offset {offset}"
    )]
    BadEscape {
        /// The code.
        code: u16,
        /// The payload length.
        words: usize,
        /// Output offset.
        offset: Offset,
    },
    /// The output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
