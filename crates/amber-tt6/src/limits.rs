//! Reader limits: hostile input cannot make a reader allocate without bound.

/// Escape words (headers and payloads) before one instruction. Bounds the TT6/TT6E
/// streaming reader's buffer (about 4 MiB); real traces carry a few escapes per
/// instruction at most.
pub const MAX_ESCAPE_WORDS: usize = 1 << 20;

/// Bytes the FULL streaming reader reads ahead to detect the record size when none is
/// given: the magic and 33 records of the larger size, enough for [`crate::RecordSize::detect`]
/// to check its 32 records under both sizes.
pub const FULL_DETECT_BYTES: usize = 4 + 33 * 1008;
