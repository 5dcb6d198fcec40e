//! The limits this crate's readers enforce beyond the format's own, so that hostile input
//! cannot make them allocate without bound. The format's own bounds (at most
//! [`raw::MAX_MEMORY_ACCESSES`](crate::raw::MAX_MEMORY_ACCESSES) memory accesses, opcodes of
//! at most [`raw::MAX_OPCODE_LEN`](crate::raw::MAX_OPCODE_LEN) bytes, register changes
//! inside the REGDUMP) are in [`raw`](crate::raw) and are checked as well.

/// The largest JSON header length accepted, in bytes. x64dbg itself opens headers up to
/// [`raw::X64DBG_HEADER_LIMIT`](crate::raw::X64DBG_HEADER_LIMIT) (16 KiB) and some forks up
/// to 100 KiB; a header near 1 MiB is certainly not one, and the streaming reader buffers
/// the whole header before parsing it.
pub const MAX_HEADER_LEN: u32 = 1024 * 1024;

/// The largest user block (type `0x80..=0xff`) the streaming reader buffers, in bytes: it
/// holds a whole block in memory, and the 4-byte length field alone would let a file ask
/// for 4 GiB. Real user blocks are a few bytes (x64dbg's own meta blocks) to a few KiB.
///
/// Trial parses of the thread-id decision also take a bigger user block as implausible, for
/// slices and streams alike, so that both readers decide the same.
pub const MAX_STREAM_USER_BLOCK: usize = 256 * 1024 * 1024;
