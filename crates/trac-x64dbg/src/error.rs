//! The crate's error type. Every variant read from the input carries the absolute file
//! offset, and its message ends with `at offset 0x…`.

use trace_core::{BadValue, LimitExceeded, Offset, UnexpectedEof};

/// Everything that can go wrong reading or writing an x64dbg trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input ended inside the file prefix or the JSON header.
    #[error(transparent)]
    Eof(#[from] UnexpectedEof),
    /// A length or count is above a limit.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// A value the format does not allow.
    #[error(transparent)]
    BadValue(#[from] BadValue),
    /// The file does not start with `TRAC`.
    #[error("bad magic: found {found:02x?}, expected \"TRAC\" at offset {offset}")]
    BadMagic {
        /// Always 0.
        offset: Offset,
        /// The first 4 bytes.
        found: [u8; 4],
    },
    /// The JSON header is not valid JSON or has a field of the wrong type.
    #[error("JSON header is corrupted: {message} at offset {offset}")]
    BadJson {
        /// Where the JSON parser stopped.
        offset: Offset,
        /// The parser's message.
        message: String,
    },
    /// A JSON header field is missing or has a value this reader cannot handle.
    #[error("JSON header: {what} at offset {offset}")]
    BadHeader {
        /// Offset of the JSON header.
        offset: Offset,
        /// What is wrong, naming the JSON key, e.g. `"arch" is "arm64", expected "x64" or "x86"`.
        what: String,
    },
    /// `ver` is not the integer 1.
    #[error("unsupported version: \"ver\" is {found}, only 1 exists at offset {offset}")]
    UnsupportedVersion {
        /// Offset of the JSON header.
        offset: Offset,
        /// The JSON text of the value found.
        found: String,
    },
    /// A block type other than 0 and `0x80..=0xff`.
    #[error(
        "bad block type {found:#x} in block {block}, expected 0 or 0x80..=0xff at offset {offset}"
    )]
    BadBlockType {
        /// Offset of the block.
        offset: Offset,
        /// Block number (instructions and user blocks, from 0).
        block: u64,
        /// The type byte.
        found: u8,
    },
    /// More register changes than the REGDUMP has words.
    #[error(
        "{found} register changes in block {block}, above the {limit} REGDUMP words at offset {offset}"
    )]
    TooManyRegisters {
        /// Offset of the count byte.
        offset: Offset,
        /// Block number.
        block: u64,
        /// The count.
        found: u8,
        /// 172 (x64) or 216 (x86).
        limit: u16,
    },
    /// A register change whose absolute index is past the end of the REGDUMP.
    #[error(
        "register index {index} in block {block} is outside the {limit} REGDUMP words at offset {offset}"
    )]
    RegisterOutOfRange {
        /// Offset of the position byte.
        offset: Offset,
        /// Block number.
        block: u64,
        /// The absolute word index.
        index: u32,
        /// 172 (x64) or 216 (x86).
        limit: u16,
    },
    /// More than 32 memory accesses.
    #[error("{found} memory accesses in block {block}, above the limit of 32 at offset {offset}")]
    TooManyMemoryAccesses {
        /// Offset of the count byte.
        offset: Offset,
        /// Block number.
        block: u64,
        /// The count.
        found: u8,
    },
    /// An opcode length of 0 (x64dbg: "No opcode").
    #[error("opcode length 0 in block {block}, expected 1..=15 at offset {offset}")]
    EmptyOpcode {
        /// Offset of the flags byte.
        offset: Offset,
        /// Block number.
        block: u64,
    },
    /// The input ends inside a block (a partial last block, e.g. a live recording).
    #[error(
        "truncated block {block}: needs {needed} bytes, {available} available at offset {offset}"
    )]
    TruncatedBlock {
        /// Offset of the block.
        offset: Offset,
        /// Block number.
        block: u64,
        /// Bytes the block needs (as far as the known counts tell).
        needed: u64,
        /// Bytes left in the input.
        available: u64,
    },
    /// A seek past the last instruction.
    #[error(
        "instruction {instruction} is past the end of the trace ({count} instructions) at offset {offset}"
    )]
    SeekOutOfRange {
        /// End of the trace.
        offset: Offset,
        /// The instruction asked for.
        instruction: u64,
        /// Instructions in the trace.
        count: u64,
    },
    /// A record the writer cannot encode.
    #[error("cannot write record {record}: {what}")]
    InvalidRecord {
        /// Record number given to the writer (from 0).
        record: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// Reading or writing failed.
    #[error("I/O error: {source} at offset {offset}")]
    Io {
        /// How far the stream got.
        offset: Offset,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The absolute file offset the error refers to, when it has one.
    #[must_use]
    pub fn offset(&self) -> Option<Offset> {
        match self {
            Error::Eof(e) => Some(e.offset),
            Error::Limit(e) => Some(e.offset),
            Error::BadValue(e) => Some(e.offset),
            Error::BadMagic { offset, .. }
            | Error::BadJson { offset, .. }
            | Error::BadHeader { offset, .. }
            | Error::UnsupportedVersion { offset, .. }
            | Error::BadBlockType { offset, .. }
            | Error::TooManyRegisters { offset, .. }
            | Error::RegisterOutOfRange { offset, .. }
            | Error::TooManyMemoryAccesses { offset, .. }
            | Error::EmptyOpcode { offset, .. }
            | Error::TruncatedBlock { offset, .. }
            | Error::SeekOutOfRange { offset, .. }
            | Error::Io { offset, .. } => Some(*offset),
            Error::InvalidRecord { .. } => None,
        }
    }

    /// The number of the block the error is in (instructions and user blocks, from 0: the
    /// index of the [`Record`](crate::Record) that [`read_records`](crate::read_records)
    /// would have returned next), or of the record given to the writer, when the error knows
    /// it.
    #[must_use]
    pub fn record(&self) -> Option<u64> {
        match self {
            Error::BadBlockType { block, .. }
            | Error::TooManyRegisters { block, .. }
            | Error::RegisterOutOfRange { block, .. }
            | Error::TooManyMemoryAccesses { block, .. }
            | Error::EmptyOpcode { block, .. }
            | Error::TruncatedBlock { block, .. } => Some(*block),
            Error::InvalidRecord { record, .. } => Some(*record),
            _ => None,
        }
    }

    /// Whether this is a truncated last block (every complete block before it was read).
    #[must_use]
    pub fn is_truncation(&self) -> bool {
        matches!(self, Error::TruncatedBlock { .. } | Error::Eof(_))
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
