//! Reader limits: hostile input cannot make a reader allocate without bound.

/// The longest line the readers accept, in bytes (terminator excluded). Bounds the
/// streaming reader's buffer (and keeps a line's offsets within 32 bits); a real line is a few hundred bytes (a full register set and
/// a few memory items), and Tenet's own parser reads whole lines into memory too.
pub const MAX_LINE_LEN: usize = 16 << 20;

/// The most characters of an offending key an error message quotes.
pub const MAX_QUOTED_KEY: usize = 32;
