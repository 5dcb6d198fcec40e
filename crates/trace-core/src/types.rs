//! Small value types shared by the format crates.

use core::fmt;

/// An absolute byte offset in a file (or in the decompressed stream of a compressed file).
///
/// Displays as `0x…` lowercase hex, the way every error message of the workspace ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(pub u64);

impl Offset {
    /// The offset `n` bytes further on, saturating at `u64::MAX` (offsets come from lengths
    /// of real slices, so saturation never happens in practice but cannot panic either).
    #[must_use]
    pub const fn add(self, n: u64) -> Offset {
        Offset(self.0.saturating_add(n))
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl From<Offset> for u64 {
    fn from(o: Offset) -> u64 {
        o.0
    }
}

/// A virtual address in the traced program. Displays as `0x…` lowercase hex.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Address(pub u64);

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::LowerHex for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

impl From<u64> for Address {
    fn from(v: u64) -> Address {
        Address(v)
    }
}

/// A thread identifier as the trace records it: an OS thread id (x64dbg), a thread index
/// (DCFG, amber), and so on. Displays in decimal.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct ThreadId(pub u64);

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl From<u64> for ThreadId {
    fn from(v: u64) -> ThreadId {
        ThreadId(v)
    }
}

impl From<u32> for ThreadId {
    fn from(v: u32) -> ThreadId {
        ThreadId(u64::from(v))
    }
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    #[test]
    fn display() {
        assert_eq!(Offset(0x1a).to_string(), "0x1a");
        assert_eq!(Address(0x7ff6_a1b2_1000).to_string(), "0x7ff6a1b21000");
        assert_eq!(format!("{:016x}", Address(0x10)), "0000000000000010");
        assert_eq!(ThreadId(4660).to_string(), "4660");
        assert_eq!(Offset(u64::MAX).add(5), Offset(u64::MAX));
    }
}
