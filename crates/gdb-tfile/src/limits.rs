//! Hard limits that keep hostile input from making the reader allocate without bound.

/// Largest register block accepted (`R` line). Real ones are a few KiB (amd64 with
/// AVX-512: 0x970 bytes).
pub const MAX_REGISTER_SIZE: u64 = 1 << 20;

/// Largest description section the streaming reader buffers (lines are at most 999 bytes
/// each; this bounds their number).
pub const MAX_DESCRIPTION_LEN: u64 = 64 << 20;

/// Largest frame the streaming reader buffers (GDB's trace buffers are at most a few
/// hundred MiB; one frame is far smaller).
pub const MAX_STREAM_FRAME_LEN: u64 = 256 << 20;

/// Most registers taken from a target description.
pub const MAX_REGISTERS: usize = 4096;

/// Most XML nodes in a target description (gdbserver's amd64 AVX-512 one has under 2000;
/// the limit also bounds DTD entity expansion).
pub const MAX_TDESC_NODES: u32 = 1 << 18;
