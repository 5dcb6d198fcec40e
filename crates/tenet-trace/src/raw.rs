//! The vocabulary of the text format: architectures and their register names, the memory
//! item keys, the separators. A Tenet trace has no binary layout; this module is what
//! `raw.rs` is to the other format crates, the constants a reader and a writer share.
//!
//! Register names are listed in the order Tenet's reference Pin tracer (`pintenet`) writes
//! them (Pin's register numbering: `rdi rsi rbp rsp rbx rdx rcx rax r8…r15`, then the pc),
//! which is the order of the canonical form ([`crate::Writer`]).

/// Separates the items of a line.
pub const ITEM_SEPARATOR: u8 = b',';
/// Separates an item's key from its value.
pub const KEY_SEPARATOR: u8 = b'=';
/// Separates a memory item's address from its bytes.
pub const MEMORY_SEPARATOR: u8 = b':';
/// Starts a comment line (forks' headers such as `# SO: <module> @ <base>`).
pub const COMMENT: u8 = b'#';

/// The most registers an architecture may have: Tenet keeps a line's registers as a 32-bit
/// mask, so a line naming more than this many registers describes no state it can hold.
pub const MAX_REGISTERS: usize = 32;

/// AMD64 registers, in canonical (Pin) order, the pc last.
pub const AMD64_REGISTERS: [&str; 17] = [
    "rdi", "rsi", "rbp", "rsp", "rbx", "rdx", "rcx", "rax", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip",
];

/// x86 registers, in canonical (Pin) order, the pc last.
pub const X86_REGISTERS: [&str; 9] = [
    "edi", "esi", "ebp", "esp", "ebx", "edx", "ecx", "eax", "eip",
];

/// What a memory item says the previous instruction did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemKind {
    /// `mr=`: read.
    Read,
    /// `mw=`: written.
    Write,
    /// `mrw=`: read and written.
    ReadWrite,
}

impl MemKind {
    /// The item key, lowercase: `mr`, `mw`, `mrw`.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            MemKind::Read => "mr",
            MemKind::Write => "mw",
            MemKind::ReadWrite => "mrw",
        }
    }

    /// The name used in JSON output: `read`, `write`, `readwrite`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            MemKind::Read => "read",
            MemKind::Write => "write",
            MemKind::ReadWrite => "readwrite",
        }
    }
}

/// The architecture of a trace: which register names it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Arch {
    /// x86-64: `rax`…`r15`, `rip`; 8-byte registers.
    Amd64,
    /// 32-bit x86: `eax`…`edi`, `eip`; 4-byte registers.
    X86,
}

impl Arch {
    /// The register names, in canonical order, the pc last.
    #[must_use]
    pub fn registers(self) -> &'static [&'static str] {
        match self {
            Arch::Amd64 => &AMD64_REGISTERS,
            Arch::X86 => &X86_REGISTERS,
        }
    }

    /// The index of the pc in [`Arch::registers`].
    #[must_use]
    pub fn pc(self) -> usize {
        self.registers().len().saturating_sub(1)
    }

    /// The pc's name: `rip` or `eip`.
    #[must_use]
    pub fn pc_name(self) -> &'static str {
        match self {
            Arch::Amd64 => "rip",
            Arch::X86 => "eip",
        }
    }

    /// The size of a register (and of a pointer) in bytes.
    #[must_use]
    pub fn word_size(self) -> u32 {
        match self {
            Arch::Amd64 => 8,
            Arch::X86 => 4,
        }
    }

    /// The largest register value.
    #[must_use]
    pub fn max_value(self) -> u64 {
        match self {
            Arch::Amd64 => u64::MAX,
            Arch::X86 => u64::from(u32::MAX),
        }
    }

    /// The name users give: `amd64` or `x86`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::X86 => "x86",
        }
    }

    /// The architecture named `name` (`amd64`, `x64`, `x86-64`, `intel64`, `x86`, `i386`,
    /// `ia32`; any case).
    #[must_use]
    pub fn from_name(name: &str) -> Option<Arch> {
        match name.to_ascii_lowercase().as_str() {
            "amd64" | "x64" | "x86-64" | "x86_64" | "intel64" => Some(Arch::Amd64),
            "x86" | "i386" | "ia32" => Some(Arch::X86),
            _ => None,
        }
    }

    /// The index of register `name` (lowercase) in [`Arch::registers`].
    #[must_use]
    pub fn register(self, name: &[u8]) -> Option<usize> {
        self.registers().iter().position(|r| r.as_bytes() == name)
    }
}

/// A key of a line, classified (the lowercase key bytes, at most 3 long for known keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// A register of this architecture, at this index of [`Arch::registers`].
    Reg(Arch, usize),
    /// A memory item.
    Mem(MemKind),
}

/// Classifies a lowercase key. Written as one `match` over the bytes so that it compiles
/// to a few comparisons (the hot path of the reader).
pub(crate) fn classify(key: &[u8]) -> Option<Key> {
    use Arch::{Amd64 as A, X86 as X};
    let k = match key {
        b"rdi" => Key::Reg(A, 0),
        b"rsi" => Key::Reg(A, 1),
        b"rbp" => Key::Reg(A, 2),
        b"rsp" => Key::Reg(A, 3),
        b"rbx" => Key::Reg(A, 4),
        b"rdx" => Key::Reg(A, 5),
        b"rcx" => Key::Reg(A, 6),
        b"rax" => Key::Reg(A, 7),
        b"r8" => Key::Reg(A, 8),
        b"r9" => Key::Reg(A, 9),
        b"r10" => Key::Reg(A, 10),
        b"r11" => Key::Reg(A, 11),
        b"r12" => Key::Reg(A, 12),
        b"r13" => Key::Reg(A, 13),
        b"r14" => Key::Reg(A, 14),
        b"r15" => Key::Reg(A, 15),
        b"rip" => Key::Reg(A, 16),
        b"edi" => Key::Reg(X, 0),
        b"esi" => Key::Reg(X, 1),
        b"ebp" => Key::Reg(X, 2),
        b"esp" => Key::Reg(X, 3),
        b"ebx" => Key::Reg(X, 4),
        b"edx" => Key::Reg(X, 5),
        b"ecx" => Key::Reg(X, 6),
        b"eax" => Key::Reg(X, 7),
        b"eip" => Key::Reg(X, 8),
        b"mr" => Key::Mem(MemKind::Read),
        b"mw" => Key::Mem(MemKind::Write),
        b"mrw" => Key::Mem(MemKind::ReadWrite),
        _ => return None,
    };
    Some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `classify` agrees with the name tables (which the writer uses).
    #[test]
    fn classify_matches_the_tables() {
        for arch in [Arch::Amd64, Arch::X86] {
            for (i, name) in arch.registers().iter().enumerate() {
                assert_eq!(classify(name.as_bytes()), Some(Key::Reg(arch, i)));
                assert_eq!(arch.register(name.as_bytes()), Some(i));
            }
            assert_eq!(arch.registers()[arch.pc()], arch.pc_name());
            assert!(arch.registers().len() <= MAX_REGISTERS);
        }
        for k in [MemKind::Read, MemKind::Write, MemKind::ReadWrite] {
            assert_eq!(classify(k.key().as_bytes()), Some(Key::Mem(k)));
        }
        assert_eq!(classify(b"rflags"), None);
        assert_eq!(classify(b"RAX"), None);
    }
}
