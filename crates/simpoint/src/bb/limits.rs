//! Reader and writer limits: hostile input cannot make the reader allocate without bound.

/// The longest line the reader accepts, in bytes (terminator excluded). Bounds the line
/// buffer and, since a pair takes at least 4 bytes (`:1:1`), the entries of one slice.
/// SimPoint 3.2 itself reads lines of at most 1 MiB ([`SIMPOINT_MAX_LINE`]); a slice over
/// many distinct blocks can exceed that, so the reader takes longer ones.
pub const MAX_LINE_LEN: usize = 64 << 20;

/// The longest line SimPoint 3.2 reads whole (its `fgets` buffer): a longer `T:` line is cut
/// there and the rest is read as a line of its own (and skipped).
pub const SIMPOINT_MAX_LINE: usize = 1 << 20;

/// The largest block id: SimPoint reads ids as C `int`.
pub const MAX_ID: u32 = i32::MAX.unsigned_abs();
