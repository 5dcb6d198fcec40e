//! The crate's error type. Every variant that comes from the input carries the absolute byte
//! offset where the problem was found, and its message ends with `at offset 0x…`.

use core::fmt;

use trace_core::json::{self, ErrorKind, Found};
use trace_core::{LimitExceeded, Located, Offset, UnexpectedEof};

/// Where in the trace a sequence (or a dictionary value) comes from, for error messages.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Context {
    /// A chunk of a thread's trace data.
    Chunk {
        /// `PROCESS_ID`.
        pid: u64,
        /// `THREAD_ID`.
        thread: u64,
        /// Index of the chunk (row) in the thread's `TRACE_DATA` table, from 0.
        chunk: u64,
    },
    /// The value of a `STRING_DICTIONARY` entry.
    Dictionary {
        /// `PROCESS_ID`.
        pid: u64,
        /// The key.
        key: String,
    },
    /// A sequence given directly to the API, outside any file.
    Standalone,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Context::Chunk { pid, thread, chunk } => {
                write!(f, "process {pid} thread {thread} chunk {chunk}")
            }
            Context::Dictionary { pid, key } => {
                write!(f, "process {pid} dictionary entry {key:?}")
            }
            Context::Standalone => f.write_str("the sequence"),
        }
    }
}

/// What is wrong in an edge-id sequence string (section 3.7.1 of the specification).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SequenceErrorKind {
    /// A character that is neither modified Base64, `(`, `)`, `*`, `<`, `>` nor whitespace.
    BadCharacter(u8),
    /// A `(` without its matching `)`.
    UnclosedRepeat,
    /// A `)` without a `(`.
    UnmatchedClose,
    /// `(` not followed by digits and `*`.
    MissingStar,
    /// `(*`: no repeat count.
    EmptyCount,
    /// A repeat count that does not fit in 64 bits.
    CountOverflow,
    /// `<` without `>`.
    UnclosedKey,
    /// `<>`, or a key with a character outside the key alphabet.
    BadKey(String),
    /// `<key>` naming no `STRING_DICTIONARY` entry.
    UnknownKey(String),
    /// Repeats and references nested deeper than [`crate::limits::MAX_NESTING`].
    TooDeep,
}

impl fmt::Display for SequenceErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequenceErrorKind::BadCharacter(c) if c.is_ascii_graphic() => {
                write!(f, "bad character {:?}", char::from(*c))
            }
            SequenceErrorKind::BadCharacter(c) => write!(f, "bad character 0x{c:02x}"),
            SequenceErrorKind::UnclosedRepeat => {
                f.write_str("unbalanced parentheses: `(` never closed")
            }
            SequenceErrorKind::UnmatchedClose => {
                f.write_str("unbalanced parentheses: `)` without `(`")
            }
            SequenceErrorKind::MissingStar => f.write_str("repeat count not followed by `*`"),
            SequenceErrorKind::EmptyCount => f.write_str("empty repeat count in `(*`"),
            SequenceErrorKind::CountOverflow => f.write_str("repeat count does not fit in 64 bits"),
            SequenceErrorKind::UnclosedKey => f.write_str("`<` without `>`"),
            SequenceErrorKind::BadKey(k) => write!(f, "bad dictionary key {k:?}"),
            SequenceErrorKind::UnknownKey(k) => write!(f, "unknown dictionary key {k:?}"),
            SequenceErrorKind::TooDeep => f.write_str("repeats and references nested too deep"),
        }
    }
}

/// Why a chunk's bits do not decode with the transition table (section 3.7.2).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// `FIRST_EDGE_ID` is missing although `EDGE_COUNT` is not 0.
    MissingFirstEdge,
    /// No `TRANSITION_CODE` of the current edge matches the next bits.
    NoTransition {
        /// The current edge.
        edge: u64,
        /// The next bits (up to 32), as `0`/`1` characters.
        bits: String,
    },
    /// The current edge has no row in the transition table at all.
    NoSuccessor {
        /// The current edge.
        edge: u64,
    },
    /// The bit string ended inside a transition code, before `EDGE_COUNT` edges.
    OutOfBits {
        /// The current edge.
        edge: u64,
    },
    /// A multi-edge `NEXT_EDGE_IDS` group goes past `EDGE_COUNT` (strict mode).
    Overshoot {
        /// The current edge.
        edge: u64,
        /// Edges in the group.
        group: u64,
        /// Edges still expected.
        remaining: u64,
    },
}

impl fmt::Display for DecodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeErrorKind::MissingFirstEdge => {
                f.write_str("FIRST_EDGE_ID missing although EDGE_COUNT is not 0")
            }
            DecodeErrorKind::NoTransition { edge, bits } => {
                write!(
                    f,
                    "no transition from edge {edge} matches the bits {bits:?}"
                )
            }
            DecodeErrorKind::NoSuccessor { edge } => {
                write!(f, "edge {edge} has no transition in the TRANSITION_TABLE")
            }
            DecodeErrorKind::OutOfBits { edge } => {
                write!(
                    f,
                    "the bit string ends inside a transition code from edge {edge}"
                )
            }
            DecodeErrorKind::Overshoot {
                edge,
                group,
                remaining,
            } => write!(
                f,
                "the {group}-edge group after edge {edge} overshoots EDGE_COUNT ({remaining} edge(s) left)"
            ),
        }
    }
}

/// Any error of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input ended early.
    #[error(transparent)]
    Eof(#[from] UnexpectedEof),
    /// A count or size above a limit of the reader.
    #[error(transparent)]
    Limit(#[from] LimitExceeded),
    /// Not the JSON (or not the DCFG-Trace structure) that was expected.
    #[error("expected {expected}, found {found} at offset {offset}")]
    Syntax {
        /// Where.
        offset: Offset,
        /// What was expected.
        expected: &'static str,
        /// What was there (a short excerpt).
        found: String,
    },
    /// A table lacks a column the reader needs, or has it in an order a one-pass reader
    /// cannot follow.
    #[error("{what} at offset {offset}")]
    Structure {
        /// Where.
        offset: Offset,
        /// What is wrong.
        what: String,
    },
    /// An integer that is not a `u64` (a float, a negative number, a bad hex string).
    #[error("bad integer for {what}: {found} at offset {offset}")]
    Integer {
        /// Where.
        offset: Offset,
        /// Which field.
        what: &'static str,
        /// The text found.
        found: String,
    },
    /// A bad edge-id sequence string or dictionary value.
    #[error("{kind} at position {position} of {context} at offset {offset}")]
    Sequence {
        /// What is wrong.
        kind: SequenceErrorKind,
        /// Which sequence.
        context: Context,
        /// Character index in that sequence string.
        position: u64,
        /// Absolute offset of the character (exact unless the JSON string has escapes).
        offset: Offset,
    },
    /// Dictionary entries that refer to each other in a cycle.
    #[error("STRING_DICTIONARY of process {pid} has a reference cycle {cycle} at offset {offset}")]
    DictionaryCycle {
        /// `PROCESS_ID`.
        pid: u64,
        /// The keys of the cycle, e.g. `<a> -> <b> -> <a>`.
        cycle: String,
        /// Offset of the dictionary.
        offset: Offset,
    },
    /// Transition codes of one current edge that are not unique and prefix-free (section
    /// 3.5: codes compared as 32-bit integers padded on the right with zeros).
    #[error(
        "TRANSITION_TABLE of process {pid}: codes {codes} of edge {edge} {reason} at offset {offset}"
    )]
    Codes {
        /// `PROCESS_ID`.
        pid: u64,
        /// The `CURRENT_EDGE_ID`.
        edge: u64,
        /// The offending codes, quoted.
        codes: String,
        /// "are equal as 32-bit values", "are not prefix-free", …
        reason: &'static str,
        /// Offset of the later of the two rows.
        offset: Offset,
    },
    /// The bits of a chunk do not decode.
    #[error("{kind} at bit {bit} of {context} at offset {offset}")]
    Decode {
        /// What is wrong.
        kind: DecodeErrorKind,
        /// Which chunk.
        context: Context,
        /// Bit position in the chunk's bit string.
        bit: u64,
        /// Offset of the chunk's `EDGE_ID_SEQUENCE` string.
        offset: Offset,
    },
    /// An I/O error of the streaming reader.
    #[error("I/O error: {source} at offset {offset}")]
    Io {
        /// The error.
        source: std::io::Error,
        /// Bytes read before it.
        offset: Offset,
    },
}

impl Error {
    /// The absolute byte offset the error refers to.
    #[must_use]
    pub fn offset(&self) -> Option<Offset> {
        Some(match self {
            Error::Eof(e) => e.offset,
            Error::Limit(e) => e.offset,
            Error::Syntax { offset, .. }
            | Error::Structure { offset, .. }
            | Error::Integer { offset, .. }
            | Error::Sequence { offset, .. }
            | Error::DictionaryCycle { offset, .. }
            | Error::Codes { offset, .. }
            | Error::Decode { offset, .. }
            | Error::Io { offset, .. } => *offset,
        })
    }

    /// The error of a JSON integer that [`json::Lexer::u64`] refused, for the value `what`
    /// (a column or key name): [`Error::Integer`] for a number or string that is not a
    /// `u64`, [`Error::Syntax`] expecting `what` for anything else.
    #[cold]
    pub(crate) fn integer(e: json::Error, what: &'static str) -> Error {
        let offset = e.offset();
        match e.kind() {
            ErrorKind::NotU64 { text, string, .. } => Error::Integer {
                offset,
                what,
                found: if *string {
                    format!("{text:?}")
                } else {
                    text.clone()
                },
            },
            ErrorKind::Unexpected {
                found: Found::Number(text),
                ..
            } => Error::Integer {
                offset,
                what,
                found: text.clone(),
            },
            ErrorKind::Unexpected { found, .. } => Error::Syntax {
                offset,
                expected: what,
                found: describe(found),
            },
            _ => e.into(),
        }
    }

    #[cold]
    pub(crate) fn structure(offset: u64, what: impl Into<String>) -> Error {
        Error::Structure {
            offset: Offset(offset),
            what: what.into(),
        }
    }
}

/// What the lexer found, in this crate's words: the byte, or "end of input".
fn describe(found: &Found) -> String {
    match found.first_byte() {
        None => "end of input".into(),
        Some(b) if b.is_ascii_graphic() => format!("`{}`", char::from(b)),
        Some(b) => format!("byte 0x{b:02x}"),
    }
}

impl From<json::Error> for Error {
    #[cold]
    fn from(e: json::Error) -> Error {
        let (offset, kind, _) = e.into_parts();
        match kind {
            ErrorKind::Unexpected { expected, found } => Error::Syntax {
                offset,
                expected,
                found: describe(&found),
            },
            ErrorKind::Limit(limit) => Error::Limit(limit),
            ErrorKind::Io(source) => Error::Io { source, offset },
            kind => Error::Structure {
                offset,
                what: kind.to_string(),
            },
        }
    }
}

impl Located for Error {
    fn offset(&self) -> Option<Offset> {
        Error::offset(self)
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = core::result::Result<T, E>;
