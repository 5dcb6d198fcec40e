//! On-disk layouts and constants of GDB trace files (no logic).
//!
//! Layout (`specs/formats/gdb-trace-file-format.md`, `specs/notes/gdb-tfile-notes.md` §1, §6):
//!
//! ```text
//! offset 0   "\x7fTRACE0\n"            8 bytes
//!            definition lines          ASCII, each ended by '\n', at most 999 bytes each
//!            "\n"                      an empty line ends the description section
//!            frame*                    FrameHeader + blocks, in target byte order
//!            00 00 [00 00 …]           a frame header with tracepoint number 0 ends the data
//! ```
//!
//! The file does not record its byte order, so the integer layouts are generic over
//! [`zerocopy::byteorder::ByteOrder`] and the reader picks [`LittleEndian`] or [`BigEndian`] at
//! run time.

use zerocopy::byteorder::{ByteOrder, I16, I32, I64, U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub use zerocopy::byteorder::{BigEndian, LittleEndian};

/// Offset 0: the 8-byte header, `0x7f` then `TRACE0\n` (`0` is the only format version).
pub const MAGIC: &[u8; 8] = b"\x7fTRACE0\n";

/// The longest description line GDB accepts, without its `\n` (its line buffer is 1000
/// bytes; storing a 1000th byte fails with "Excessively long lines in trace file").
pub const MAX_LINE_LEN: usize = 999;

/// Block type of a register block: `'R'`, then exactly the `R`-line size of register bytes
/// (the `g` packet layout, target byte order), no length field.
pub const BLOCK_REGISTERS: u8 = b'R';
/// Block type of a memory block: `'M'`, a [`MemoryBlockHeader`], then `length` bytes.
pub const BLOCK_MEMORY: u8 = b'M';
/// Block type of a trace-state-variable block: `'V'`, then a [`TsvBlock`].
pub const BLOCK_TSV: u8 = b'V';

/// What `tsave` writes after the last frame: a `u32` zero. GDB stops reading at the first
/// 2-byte zero tracepoint number, so GDB's testsuite's 6-byte marker works as well.
pub const GDB_TERMINATOR: [u8; 4] = [0; 4];

/// Size of a [`FrameHeader`].
pub const FRAME_HEADER_LEN: usize = 6;
/// Size of an `M` block before its data: type byte + [`MemoryBlockHeader`].
pub const MEMORY_BLOCK_HEADER_LEN: usize = 11;
/// Size of a whole `V` block: type byte + [`TsvBlock`].
pub const TSV_BLOCK_LEN: usize = 13;

/// The 6-byte header of every trace frame (packed, target byte order).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct FrameHeader<O: ByteOrder> {
    /// Offset 0: the tracepoint number (the file's numbering; signed, 0 ends the frames).
    pub tracepoint: I16<O>,
    /// Offset 2: the number of bytes of blocks that follow.
    pub data_size: U32<O>,
}

/// An `M` block after its type byte (10 bytes, then `length` bytes of memory).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct MemoryBlockHeader<O: ByteOrder> {
    /// Offset 0: the start address, always 8 bytes (also for 32-bit targets).
    pub address: U64<O>,
    /// Offset 8: the number of memory bytes that follow (gdbserver splits larger ranges).
    pub length: U16<O>,
}

/// A `V` block after its type byte (12 bytes).
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct TsvBlock<O: ByteOrder> {
    /// Offset 0: the trace state variable's number.
    pub number: I32<O>,
    /// Offset 4: its value.
    pub value: I64<O>,
}
