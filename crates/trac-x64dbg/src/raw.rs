//! On-disk layouts and constants of x64dbg trace files (`specs/formats/x64dbg-trace-format.md`,
//! `specs/notes/x64dbg-notes.md` sections 2, 3 and 6). Everything is little-endian and packed.

use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The 4 ASCII bytes every trace file starts with.
pub const MAGIC: [u8; 4] = *b"TRAC";

/// File offset of the JSON header text (after the magic and the length).
pub const HEADER_JSON_OFFSET: u64 = 8;

/// The largest JSON header length x64dbg itself opens ("Header info is too big").
pub const X64DBG_HEADER_LIMIT: u32 = 16 * 1024;

/// Bit 7 of [`BlockHead::flags`]: a 4-byte thread id follows the block head.
pub const FLAG_THREAD_ID: u8 = 0x80;

/// Bits 0-3 of [`BlockHead::flags`]: the opcode length in bytes.
pub const OPCODE_LEN_MASK: u8 = 0x0f;

/// Bits 4-6 of [`BlockHead::flags`]: reserved, written as 0.
pub const FLAGS_RESERVED: u8 = 0x70;

/// Bit 0 of a memory access flag byte: memory was not changed, so no "new" value is stored.
pub const MEM_UNCHANGED: u8 = 0x01;

/// Block type of an executed instruction.
pub const BLOCK_INSTRUCTION: u8 = 0;

/// Smallest user-defined block type (`0x80..=0xff`: type, u32 length, payload).
pub const BLOCK_USER_MIN: u8 = 0x80;

/// Longest x86 instruction; x64dbg never writes a longer (or empty) opcode.
pub const MAX_OPCODE_LEN: u8 = 15;

/// Most memory accesses x64dbg records for one instruction (and its reader accepts).
pub const MAX_MEMORY_ACCESSES: u8 = 32;

/// Words in the stored x64 `REGDUMP` (1376 bytes of 8-byte words).
pub const X64_REGDUMP_WORDS: u16 = 172;

/// Words in the stored x86 `REGDUMP` (864 bytes of 4-byte words).
pub const X86_REGDUMP_WORDS: u16 = 216;

/// x64dbg's full-dump cadence: a block with every register every 512 instructions.
pub const FULL_DUMP_INTERVAL: u32 = 512;

/// The first 8 bytes of a trace file.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FilePrefix {
    /// Offset 0: ASCII `TRAC` ([`MAGIC`]).
    pub magic: [u8; 4],
    /// Offset 4: length of the JSON header that follows (x64dbg writes it as a signed i32).
    pub json_len: U32,
}

/// The first 4 bytes of every block. For an instruction block (type 0) they are followed by
/// the thread id (4 bytes, if bit 7 of `flags` is set), the opcode, `reg_changes` position
/// bytes, `reg_changes` words, `mem_accesses` flag bytes, `mem_accesses` address words,
/// `mem_accesses` old-value words and one new-value word per access whose flag bit 0 is clear.
/// For a user block (type `0x80..=0xff`) the 4 bytes are the type and a u32 payload length.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct BlockHead {
    /// Offset 0: block type, 0 for an instruction.
    pub block_type: u8,
    /// Offset 1: number of register changes (172 on x64 / 216 on x86 = full dump).
    pub reg_changes: u8,
    /// Offset 2: number of memory accesses (at most 32).
    pub mem_accesses: u8,
    /// Offset 3: bit 7 = thread id present, bits 0-3 = opcode length, bits 4-6 reserved.
    pub flags: u8,
}

/// The head of a user-defined block: type and payload length.
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct UserBlockHead {
    /// Offset 0: block type, `0x80..=0xff`.
    pub block_type: u8,
    /// Offset 1: payload length in bytes.
    pub len: U32,
}
