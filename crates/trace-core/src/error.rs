//! Error building blocks embedded by the format crates' own error enums.
//!
//! Each carries the absolute [`Offset`] where the problem was found, and its message ends
//! with `at offset 0x…`, so a crate's enum can wrap it with `#[error(transparent)]`.

use crate::Offset;

/// The input ended before a read of `needed` bytes could be satisfied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unexpected end of input: needed {needed} bytes, {available} available at offset {offset}")]
pub struct UnexpectedEof {
    /// Where the read started.
    pub offset: Offset,
    /// How many bytes the read needed.
    pub needed: u64,
    /// How many bytes were left.
    pub available: u64,
}

/// A count or length read from the input is larger than a limit of the format or of the
/// reader (hostile input must not make the reader allocate without bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} is {found}, above the limit of {limit} at offset {offset}")]
pub struct LimitExceeded {
    /// Where the offending value was read.
    pub offset: Offset,
    /// What was counted, e.g. "header length".
    pub what: &'static str,
    /// The value found.
    pub found: u64,
    /// The largest value accepted.
    pub limit: u64,
}

/// A value read from the input is not one the format allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad {what}: found {found:#x}, expected {expected} at offset {offset}")]
pub struct BadValue {
    /// Where the offending value was read.
    pub offset: Offset,
    /// What was read, e.g. "block type".
    pub what: &'static str,
    /// The value found.
    pub found: u64,
    /// What would have been accepted, e.g. "0 or 0x80..=0xff".
    pub expected: &'static str,
}

impl UnexpectedEof {
    /// The offset where the failed read started.
    #[must_use]
    pub fn offset(&self) -> Offset {
        self.offset
    }
}

impl LimitExceeded {
    /// Checks `found <= limit`.
    ///
    /// # Errors
    ///
    /// [`LimitExceeded`] naming `what` when `found` is above `limit`.
    pub fn check(offset: Offset, what: &'static str, found: u64, limit: u64) -> Result<(), Self> {
        if found <= limit {
            Ok(())
        } else {
            Err(LimitExceeded {
                offset,
                what,
                found,
                limit,
            })
        }
    }
}

/// Where in its input an error was found, as far as the error knows: what a program (the
/// CLI's `validate --json`, a script, the Python package) reads instead of parsing the
/// English message. Every format crate's `Error` implements it.
pub trait Located: std::error::Error {
    /// The absolute byte offset in the (decompressed) input, when the error has one.
    fn offset(&self) -> Option<Offset>;

    /// The JSON path of the offending value (`PROCESSES[0].EDGES[12]`), for JSON formats.
    fn path(&self) -> Option<&str> {
        None
    }

    /// The index of the record (instruction, frame, chunk) the error is in, when known.
    fn record(&self) -> Option<u64> {
        None
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn messages_end_with_offset() {
        let e = UnexpectedEof {
            offset: Offset(0x10),
            needed: 4,
            available: 1,
        };
        assert!(e.to_string().ends_with("at offset 0x10"));
        let e = LimitExceeded::check(Offset(8), "header length", 20_000, 16_384).unwrap_err();
        assert_eq!(
            e.to_string(),
            "header length is 20000, above the limit of 16384 at offset 0x8"
        );
        assert!(LimitExceeded::check(Offset(8), "x", 5, 5).is_ok());
        let e = BadValue {
            offset: Offset(0x2a),
            what: "block type",
            found: 7,
            expected: "0 or 0x80..=0xff",
        };
        assert_eq!(
            e.to_string(),
            "bad block type: found 0x7, expected 0 or 0x80..=0xff at offset 0x2a"
        );
    }
}
