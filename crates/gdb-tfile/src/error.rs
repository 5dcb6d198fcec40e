//! The crate's error type: every variant that comes from the input carries the absolute byte
//! offset where the problem was found, and its message ends `at offset 0x…`.

use trace_core::{BadValue, LimitExceeded, Offset, UnexpectedEof};

/// Everything that can go wrong reading a GDB trace file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input ended inside a read (the header, a line, a frame header or a block).
    #[error(transparent)]
    Eof(#[from] UnexpectedEof),
    /// A length or count is above one of the reader's limits.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// A value is not one the format allows.
    #[error(transparent)]
    BadValue(#[from] BadValue),
    /// The first 8 bytes are not `\x7fTRACE0\n` (GDB: "File is not a valid trace file.").
    #[error("not a GDB trace file: the header is not \"\\x7fTRACE0\\n\" at offset {offset}")]
    BadMagic {
        /// Always 0.
        offset: Offset,
    },
    /// The description section ended (end of input) before its empty line.
    #[error(
        "the description section has no ending empty line (premature end of file) at offset {offset}"
    )]
    UnterminatedDescription {
        /// Where the unterminated line starts.
        offset: Offset,
    },
    /// A description line of 1000 bytes or more (GDB: "Excessively long lines in trace file").
    #[error(
        "description line of {len} bytes is longer than GDB's 999-byte limit at offset {offset}"
    )]
    LineTooLong {
        /// Where the line starts.
        offset: Offset,
        /// Its length without the newline.
        len: u64,
    },
    /// No `R` line, or `R 0` (GDB: "No register block size recorded in trace file").
    #[error("no register block size recorded (no `R` line, or `R 0`) at offset {offset}")]
    NoRegisterSize {
        /// Where the frame section starts.
        offset: Offset,
    },
    /// A field of a description line is malformed.
    #[error("malformed {what} in description line {line:?}: {problem} at offset {offset}")]
    BadLine {
        /// Where the problem is (inside the line).
        offset: Offset,
        /// The kind of line, e.g. "status".
        what: &'static str,
        /// What is wrong.
        problem: &'static str,
        /// The line (cut to 120 characters).
        line: String,
    },
    /// A character that is not a hex digit in a hex-encoded field (GDB: "Invalid hex digit").
    #[error("invalid hex digit {found:?} in {what} at offset {offset}")]
    BadHex {
        /// Where the bad character is.
        offset: Offset,
        /// The field, e.g. "status username".
        what: &'static str,
        /// The character.
        found: char,
    },
    /// A block of a frame has an unknown type (GDB: "Unknown block type … in trace frame").
    /// Blocks carry no length, so the rest of the frame cannot be read.
    #[error("unknown block type {found:?} ({code:#04x}) in trace frame {frame} at offset {offset}")]
    UnknownBlock {
        /// Where the block's type byte is.
        offset: Offset,
        /// The frame's 0-based number.
        frame: u64,
        /// The type byte.
        code: u8,
        /// The type byte as a character.
        found: char,
    },
    /// A block runs past the end of its frame's data.
    #[error(
        "{block} block of {needed} bytes does not fit in the {available} bytes left of frame {frame} at offset {offset}"
    )]
    BlockOverrun {
        /// Where the block starts.
        offset: Offset,
        /// The frame's 0-based number.
        frame: u64,
        /// The block type, e.g. "M".
        block: &'static str,
        /// The bytes the block needs (type byte included).
        needed: u64,
        /// The bytes left in the frame.
        available: u64,
    },
    /// The file ends inside a frame (GDB: "Premature end of file while reading trace file").
    #[error(
        "trace frame {frame} is truncated: needed {needed} bytes, {available} available at offset {offset}"
    )]
    TruncatedFrame {
        /// Where the frame starts.
        offset: Offset,
        /// The frame's 0-based number.
        frame: u64,
        /// Bytes needed for the header and data.
        needed: u64,
        /// Bytes left in the input.
        available: u64,
    },
    /// The frames end (end of input) without the 2-byte zero tracepoint number that must
    /// follow the last frame (GDB: "Premature end of file while reading trace file", when it
    /// scans past the last frame). Every complete frame was yielded before this error.
    #[error(
        "the trace frames end without the 2-byte zero terminator after {frames} complete frames (premature end of file) at offset {offset}"
    )]
    MissingTerminator {
        /// Where the terminator should be: the end of the last complete frame.
        offset: Offset,
        /// How many complete frames came before (the number the next frame would have).
        frames: u64,
    },
    /// The target description XML cannot be used.
    #[error("target description: {message} at offset {offset}")]
    Tdesc {
        /// Where the `tdesc` lines start.
        offset: Offset,
        /// What is wrong.
        message: String,
    },
    /// Reading from an `io::Read` failed (streaming reader only).
    #[error("read error: {source} at offset {offset}")]
    Io {
        /// How far the stream had been read.
        offset: Offset,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The absolute byte offset of the problem.
    #[must_use]
    pub fn offset(&self) -> Option<Offset> {
        Some(match self {
            Error::Eof(e) => e.offset,
            Error::Limit(e) => e.offset,
            Error::BadValue(e) => e.offset,
            Error::BadMagic { offset }
            | Error::UnterminatedDescription { offset }
            | Error::LineTooLong { offset, .. }
            | Error::NoRegisterSize { offset }
            | Error::BadLine { offset, .. }
            | Error::BadHex { offset, .. }
            | Error::UnknownBlock { offset, .. }
            | Error::BlockOverrun { offset, .. }
            | Error::TruncatedFrame { offset, .. }
            | Error::MissingTerminator { offset, .. }
            | Error::Tdesc { offset, .. }
            | Error::Io { offset, .. } => *offset,
        })
    }

    /// The 0-based number of the frame the error is in, where it is about a frame (for
    /// [`Error::MissingTerminator`]: the number the next frame would have).
    #[must_use]
    pub fn frame(&self) -> Option<u64> {
        match self {
            Error::UnknownBlock { frame, .. }
            | Error::BlockOverrun { frame, .. }
            | Error::TruncatedFrame { frame, .. }
            | Error::MissingTerminator { frames: frame, .. } => Some(*frame),
            _ => None,
        }
    }
}

impl trace_core::Located for Error {
    fn offset(&self) -> Option<Offset> {
        Error::offset(self)
    }

    fn record(&self) -> Option<u64> {
        self.frame()
    }
}

/// A problem GDB only warns about; reading goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Where the problem is.
    pub offset: Offset,
    /// What GDB would say (or what we noticed).
    pub message: String,
}

impl core::fmt::Display for Warning {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} at offset {}", self.message, self.offset)
    }
}
