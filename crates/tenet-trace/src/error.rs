//! The crate's error type. Every parse error says where: the line (1-based), the column
//! (1-based, in bytes), the absolute byte offset and, for instruction lines, the index of
//! the instruction; its message is `line L, column C: … at offset 0x…`.

use trace_core::Offset;

use crate::raw::Arch;

/// What is wrong with a line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// An item without `=`.
    MissingEquals,
    /// A key that is neither a register nor `mr`/`mw`/`mrw` (Tenet refuses the line).
    UnknownKey {
        /// The key as written (cut to [`crate::limits::MAX_QUOTED_KEY`] characters).
        key: String,
    },
    /// A register of the other architecture than the trace's.
    OtherArch {
        /// The register, lowercase.
        key: String,
        /// The trace's architecture.
        arch: Arch,
        /// Whether the architecture was given (else detected from earlier names).
        forced: bool,
    },
    /// A character that is not a hex digit.
    BadHexDigit {
        /// What was being read: "register value", "memory address", "memory bytes".
        what: &'static str,
        /// The character.
        found: char,
    },
    /// No hex digits where a value was expected.
    NoHexDigits {
        /// What was being read.
        what: &'static str,
    },
    /// A value wider than the architecture's registers (or than 64 bits for an address).
    TooWide {
        /// What was being read.
        what: &'static str,
        /// The width allowed, in bits.
        bits: u32,
    },
    /// Memory bytes with an odd number of hex digits.
    OddHexDigits {
        /// How many digits there are.
        digits: usize,
    },
    /// A memory item without `:` between address and bytes.
    MissingColon,
    /// More register items on one line than an architecture may have.
    TooManyRegisters,
    /// An instruction line without the pc register.
    MissingPc {
        /// The pc's name (`rip`, `eip`; `rip or eip` when the architecture is not known yet).
        pc: &'static str,
    },
    /// The trace has no instruction line (an empty file, or comments only).
    NoInstructions,
    /// A line longer than [`crate::limits::MAX_LINE_LEN`].
    LineTooLong,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::MissingEquals => f.write_str("item without '='"),
            Problem::UnknownKey { key } => write!(
                f,
                "unknown key {key:?} (Tenet accepts only the architecture's general registers, mr, mw and mrw)"
            ),
            Problem::OtherArch { key, arch, forced } => write!(
                f,
                "register {key} is not a {} register (the trace's architecture, {})",
                arch.name(),
                if *forced {
                    "as given"
                } else {
                    "from the first register name"
                }
            ),
            Problem::BadHexDigit { what, found } => {
                write!(f, "bad hex digit {found:?} in {what}")
            }
            Problem::NoHexDigits { what } => write!(f, "no hex digits in {what}"),
            Problem::TooWide { what, bits } => write!(f, "{what} does not fit {bits} bits"),
            Problem::OddHexDigits { digits } => {
                write!(f, "odd number of hex digits ({digits}) in memory bytes")
            }
            Problem::MissingColon => {
                f.write_str("memory item without ':' between address and bytes")
            }
            Problem::TooManyRegisters => write!(
                f,
                "more than {} register items on one line",
                crate::raw::MAX_REGISTERS
            ),
            Problem::MissingPc { pc } => write!(f, "instruction line without {pc}"),
            Problem::NoInstructions => {
                f.write_str("no instruction lines (the file is empty or only comments)")
            }
            Problem::LineTooLong => {
                write!(f, "line longer than {} bytes", crate::limits::MAX_LINE_LEN)
            }
        }
    }
}

/// Everything that can go wrong reading a Tenet trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A line the format does not allow (all earlier lines were complete and valid).
    #[error("line {line}, column {column}: {problem} at offset {offset}")]
    Syntax {
        /// The line, from 1.
        line: u64,
        /// The column, from 1, in bytes.
        column: u64,
        /// The absolute byte offset of the offending character.
        offset: Offset,
        /// The index of the instruction the line would have been (comment lines do not
        /// count).
        instruction: u64,
        /// What is wrong.
        problem: Problem,
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
    pub fn offset(&self) -> Offset {
        match self {
            Error::Syntax { offset, .. } | Error::Io { offset, .. } => *offset,
        }
    }

    /// The line (from 1) and column (from 1) of a syntax error.
    #[must_use]
    pub fn line_column(&self) -> Option<(u64, u64)> {
        match self {
            Error::Syntax { line, column, .. } => Some((*line, *column)),
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

impl trace_core::Located for Error {
    fn offset(&self) -> Option<Offset> {
        Some(Error::offset(self))
    }

    fn record(&self) -> Option<u64> {
        match self {
            Error::Syntax { instruction, .. } => Some(*instruction),
            Error::Io { .. } => None,
        }
    }
}

/// Everything that can go wrong writing a Tenet trace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// An instruction line must carry the pc (Tenet refuses a line without it).
    #[error("instruction {index}: no pc register")]
    MissingPc {
        /// Index of the instruction.
        index: u64,
    },
    /// The registers are of another architecture than the writer's.
    #[error("instruction {index}: {found} registers given to a {expected} writer")]
    WrongArch {
        /// Index of the instruction.
        index: u64,
        /// The registers' architecture.
        found: &'static str,
        /// The writer's.
        expected: &'static str,
    },
    /// A comment with a LF (it would become a second line) or ending with a CR (it would be
    /// read as part of the line end).
    #[error("a comment cannot hold a line break or end with a carriage return")]
    CommentLineBreak,
    /// The output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
