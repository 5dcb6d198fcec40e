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

/// A key of a line, classified.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Key {
    /// A register of this architecture, at this index of [`Arch::registers`].
    Reg(Arch, usize),
    /// A memory item.
    Mem(MemKind),
}

/// Packs a key of up to 4 bytes into a `u32` (first byte lowest), for [`classify`]. Only
/// evaluated at compile time (a panic would be a compile error).
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
pub(crate) const fn pack(key: &[u8]) -> u32 {
    let mut v = 0u32;
    let mut i = key.len();
    while i > 0 {
        i -= 1;
        v = (v << 8) | key[i] as u32;
    }
    v
}

/// Classifies a lowercase key packed by [`pack`] (keys longer than 4 bytes are none of
/// these). One `match` over integers, which compiles to a few comparisons: this is the hot
/// path of the reader.
pub(crate) fn classify(key: u32) -> Option<Key> {
    use Arch::{Amd64 as A, X86 as X};
    const fn k(s: &str) -> u32 {
        pack(s.as_bytes())
    }
    const RDI: u32 = k("rdi");
    const RSI: u32 = k("rsi");
    const RBP: u32 = k("rbp");
    const RSP: u32 = k("rsp");
    const RBX: u32 = k("rbx");
    const RDX: u32 = k("rdx");
    const RCX: u32 = k("rcx");
    const RAX: u32 = k("rax");
    const R8: u32 = k("r8");
    const R9: u32 = k("r9");
    const R10: u32 = k("r10");
    const R11: u32 = k("r11");
    const R12: u32 = k("r12");
    const R13: u32 = k("r13");
    const R14: u32 = k("r14");
    const R15: u32 = k("r15");
    const RIP: u32 = k("rip");
    const EDI: u32 = k("edi");
    const ESI: u32 = k("esi");
    const EBP: u32 = k("ebp");
    const ESP: u32 = k("esp");
    const EBX: u32 = k("ebx");
    const EDX: u32 = k("edx");
    const ECX: u32 = k("ecx");
    const EAX: u32 = k("eax");
    const EIP: u32 = k("eip");
    const MR: u32 = k("mr");
    const MW: u32 = k("mw");
    const MRW: u32 = k("mrw");
    let k = match key {
        RDI => Key::Reg(A, 0),
        RSI => Key::Reg(A, 1),
        RBP => Key::Reg(A, 2),
        RSP => Key::Reg(A, 3),
        RBX => Key::Reg(A, 4),
        RDX => Key::Reg(A, 5),
        RCX => Key::Reg(A, 6),
        RAX => Key::Reg(A, 7),
        R8 => Key::Reg(A, 8),
        R9 => Key::Reg(A, 9),
        R10 => Key::Reg(A, 10),
        R11 => Key::Reg(A, 11),
        R12 => Key::Reg(A, 12),
        R13 => Key::Reg(A, 13),
        R14 => Key::Reg(A, 14),
        R15 => Key::Reg(A, 15),
        RIP => Key::Reg(A, 16),
        EDI => Key::Reg(X, 0),
        ESI => Key::Reg(X, 1),
        EBP => Key::Reg(X, 2),
        ESP => Key::Reg(X, 3),
        EBX => Key::Reg(X, 4),
        EDX => Key::Reg(X, 5),
        ECX => Key::Reg(X, 6),
        EAX => Key::Reg(X, 7),
        EIP => Key::Reg(X, 8),
        MR => Key::Mem(MemKind::Read),
        MW => Key::Mem(MemKind::Write),
        MRW => Key::Mem(MemKind::ReadWrite),
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
                assert_eq!(classify(pack(name.as_bytes())), Some(Key::Reg(arch, i)));
                assert_eq!(arch.register(name.as_bytes()), Some(i));
            }
            assert_eq!(arch.registers()[arch.pc()], arch.pc_name());
            assert!(arch.registers().len() <= MAX_REGISTERS);
        }
        for k in [MemKind::Read, MemKind::Write, MemKind::ReadWrite] {
            assert_eq!(classify(pack(k.key().as_bytes())), Some(Key::Mem(k)));
        }
        assert_eq!(classify(pack(b"rfla")), None);
        assert_eq!(classify(pack(b"RAX")), None);
    }
}
