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

/// The multiplier of [`slot`]: it sends the 29 known keys to 29 different slots of 64
/// (found by search; the test `classify_matches_the_tables` checks every key).
const SLOT_MULTIPLIER: u32 = 0x5a82_bb4d;

/// The slot of a packed key in [`KEYS`]: the top 6 bits of a multiplicative hash.
#[inline(always)]
const fn slot(key: u32) -> usize {
    (key.wrapping_mul(SLOT_MULTIPLIER) >> 26) as usize
}

/// Every known key at its [`slot`], packed, with what it is (0 and `None` in free slots).
/// Built at compile time from the name tables; two keys in one slot would be a compile
/// error.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
static KEYS: [(u32, Option<Key>); 64] = {
    let mut t: [(u32, Option<Key>); 64] = [(0, None); 64];
    const fn put(t: &mut [(u32, Option<Key>); 64], name: &str, key: Key) {
        let packed = pack(name.as_bytes());
        let s = slot(packed);
        assert!(t[s].1.is_none(), "two keys in one slot");
        t[s] = (packed, Some(key));
    }
    let mut i = 0;
    while i < AMD64_REGISTERS.len() {
        put(&mut t, AMD64_REGISTERS[i], Key::Reg(Arch::Amd64, i));
        i += 1;
    }
    let mut i = 0;
    while i < X86_REGISTERS.len() {
        put(&mut t, X86_REGISTERS[i], Key::Reg(Arch::X86, i));
        i += 1;
    }
    put(&mut t, "mr", Key::Mem(MemKind::Read));
    put(&mut t, "mw", Key::Mem(MemKind::Write));
    put(&mut t, "mrw", Key::Mem(MemKind::ReadWrite));
    t
};

/// Classifies a lowercase key packed by [`pack`] (keys longer than 4 bytes are none of
/// these): one table slot and one comparison, no branch per key (the hot path of the
/// reader).
#[inline]
pub(crate) fn classify(key: u32) -> Option<Key> {
    match KEYS.get(slot(key)) {
        Some(&(packed, found)) if packed == key => found,
        _ => None,
    }
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
        // Every key of 2 and 3 lowercase letters and digits: known exactly when named.
        let known: Vec<&str> = AMD64_REGISTERS
            .iter()
            .chain(&X86_REGISTERS)
            .copied()
            .chain(["mr", "mw", "mrw"])
            .collect();
        let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
        for &a in alphabet {
            for &b in alphabet {
                for c in alphabet.iter().map(|&c| Some(c)).chain([None]) {
                    let key: Vec<u8> = [a, b].into_iter().chain(c).collect();
                    let name = std::str::from_utf8(&key).unwrap();
                    assert_eq!(
                        classify(pack(&key)).is_some(),
                        known.contains(&name),
                        "{name}"
                    );
                }
            }
        }
        assert_eq!(classify(pack(b"RAX")), None);
    }
}
