//! Errors of the `.bb` reader and writer. A syntax error says where: the line (from 1), the
//! column (from 1, in bytes), the absolute byte offset, what was expected and what was found.

/// What is wrong with a line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// Something else than what the grammar allows here; the text says what it allows
    /// ("':' before a block id", "a block count", …).
    Expected(&'static str),
    /// Block id 0: SimPoint numbers dimensions from 1 and refuses 0.
    ZeroId,
    /// A block id above [`super::limits::MAX_ID`] (SimPoint reads ids as C `int`).
    IdTooLarge,
    /// A number that does not fit: a marker's pc or count above `u64::MAX`, a block count
    /// that overflows `f64`. Says which.
    TooLarge(&'static str),
    /// A `T` line without any `:id:count` pair (SimPoint would stop reading there).
    EmptySlice,
    /// A line longer than [`super::limits::MAX_LINE_LEN`].
    LineTooLong,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Expected(what) => write!(f, "expected {what}"),
            Problem::ZeroId => f.write_str("block id 0 (SimPoint numbers blocks from 1)"),
            Problem::IdTooLarge => {
                write!(f, "block id above {}", super::limits::MAX_ID)
            }
            Problem::TooLarge(what) => write!(f, "{what} is too large"),
            Problem::EmptySlice => {
                f.write_str("a T line without any :id:count pair (SimPoint stops reading there)")
            }
            Problem::LineTooLong => {
                write!(f, "line longer than {} bytes", super::limits::MAX_LINE_LEN)
            }
        }
    }
}

/// Everything that can go wrong reading a `.bb` file. After an error the reader is fused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A line the format does not allow (every item before it was complete and valid).
    #[error("line {line}, column {column}: {problem}{} at offset {offset:#x}", Found(*.found))]
    Syntax {
        /// The line, from 1.
        line: u64,
        /// The column, from 1, in bytes.
        column: u64,
        /// The absolute byte offset of the offending byte.
        offset: u64,
        /// The offending byte (`None` at the end of the line).
        found: Option<u8>,
        /// What is wrong.
        problem: Problem,
    },
    /// Reading the input failed.
    #[error("i/o error on line {line}: {source} at offset {offset:#x}")]
    Io {
        /// The line being read, from 1.
        line: u64,
        /// How far the input had been read.
        offset: u64,
        /// The error.
        source: std::io::Error,
    },
}

/// `, found 'x'` / `, found the end of the line` in a syntax error's message.
struct Found(Option<u8>);

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(b) if b.is_ascii_graphic() || b == b' ' => {
                write!(f, ", found {:?}", char::from(b))
            }
            Some(b) => write!(f, ", found byte 0x{b:02x}"),
            None => f.write_str(", found the end of the line"),
        }
    }
}

impl Error {
    /// The absolute byte offset the error refers to.
    #[must_use]
    pub fn offset(&self) -> u64 {
        match self {
            Error::Syntax { offset, .. } | Error::Io { offset, .. } => *offset,
        }
    }

    /// The line (from 1) the error is on.
    #[must_use]
    pub fn line(&self) -> u64 {
        match self {
            Error::Syntax { line, .. } | Error::Io { line, .. } => *line,
        }
    }

    /// The column (from 1, in bytes) of a syntax error.
    #[must_use]
    pub fn column(&self) -> Option<u64> {
        match self {
            Error::Syntax { column, .. } => Some(*column),
            Error::Io { .. } => None,
        }
    }

    /// What is wrong, for a syntax error.
    #[must_use]
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Error::Syntax { problem, .. } => Some(problem),
            Error::Io { .. } => None,
        }
    }
}

/// Everything that can go wrong writing a `.bb` file. Nothing of a refused slice is written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// A block id of 0 (SimPoint refuses it) or above [`super::limits::MAX_ID`].
    #[error("slice {slice}: block id {id} outside 1..={max}", max = super::limits::MAX_ID)]
    BadId {
        /// The slice's index, from 0.
        slice: u64,
        /// The id.
        id: u32,
    },
    /// Ids not strictly ascending.
    #[error("slice {slice}: block id {id} after {previous} (ids must be strictly ascending)")]
    NotAscending {
        /// The slice's index, from 0.
        slice: u64,
        /// The id before.
        previous: u32,
        /// The id.
        id: u32,
    },
    /// A slice whose counts are all zero (SimPoint stops reading at an empty `T` line).
    #[error("slice {slice}: no block with a count above zero")]
    EmptySlice {
        /// The slice's index, from 0.
        slice: u64,
    },
    /// The output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
