//! On-disk layouts and constants. Everything is big-endian (PowerPC), including the doubles
//! and vector words of FULL records (notes §1). Offsets below are within the structure.

use zerocopy::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// A big-endian 32-bit word: the unit of TT6/TT6E files.
pub type Word = U32;

/// The first word of a FULL trace (bytes `A1 11 8E 17`).
pub const FULL_MAGIC: u32 = 0xA111_8E17;

/// Escape word: the 10-bit code, `(w >> 16) & 0x3FF` (notes §4).
#[inline]
#[must_use]
pub const fn escape_code(w: u32) -> u16 {
    ((w >> 16) & 0x3FF) as u16
}

/// Escape word: the number of payload words that follow, `w & 0xFFFF`.
#[inline]
#[must_use]
pub const fn escape_count(w: u32) -> u16 {
    (w & 0xFFFF) as u16
}

/// Builds an escape word: escape field 0 (bits 26-31), code, count.
#[inline]
#[must_use]
pub const fn escape_word(code: u16, count: u16) -> u32 {
    (((code & 0x3FF) as u32) << 16) | count as u32
}

/// `struct ppc_thread_state` (xnu `mach/ppc/thread_status.h`, flavor 1): 160 bytes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct ThreadState {
    /// Offset 0: SRR0, the program counter.
    pub srr0: U32,
    /// Offset 4: SRR1, the machine state register.
    pub srr1: U32,
    /// Offset 8 + 4·n: general-purpose register rn (r31 at 132).
    pub r: [U32; 32],
    /// Offset 136: condition register.
    pub cr: U32,
    /// Offset 140: fixed-point exception register.
    pub xer: U32,
    /// Offset 144: link register.
    pub lr: U32,
    /// Offset 148: count register.
    pub ctr: U32,
    /// Offset 152: MQ (PowerPC 601 only).
    pub mq: U32,
    /// Offset 156: VRSAVE.
    pub vrsave: U32,
}

/// `struct ppc_float_state` (flavor 2): 264 bytes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct FloatState {
    /// Offset 8·n: fn as IEEE-754 binary64 bits (`f64::from_bits`).
    pub fpregs: [U64; 32],
    /// Offset 256: the unused high half of the 64-bit FPSCR image.
    pub fpscr_pad: U32,
    /// Offset 260: FPSCR.
    pub fpscr: U32,
}

/// `struct ppc_vector_state` (flavor 4, `pack(4)`): 576 bytes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
#[repr(C)]
pub struct VectorState {
    /// Offset 16·n: vn as four words, word 0 most significant.
    pub save_vr: [[U32; 4]; 32],
    /// Offset 512: VSCR image; the value is in word 3 (offset 524).
    pub save_vscr: [U32; 4],
    /// Offset 528: padding.
    pub save_pad5: [U32; 4],
    /// Offset 544: valid-register mask, bit `31 - n` for vn.
    pub save_vrvalid: U32,
    /// Offset 548: padding.
    pub save_pad6: [U32; 7],
}

/// Size of [`ThreadState`].
pub const THREAD_STATE_SIZE: usize = 160;
/// Size of [`FloatState`].
pub const FLOAT_STATE_SIZE: usize = 264;
/// Size of [`VectorState`].
pub const VECTOR_STATE_SIZE: usize = 576;

const _: () = assert!(size_of::<ThreadState>() == THREAD_STATE_SIZE);
const _: () = assert!(size_of::<FloatState>() == FLOAT_STATE_SIZE);
const _: () = assert!(size_of::<VectorState>() == VECTOR_STATE_SIZE);

/// Escape codes named by the spec.
pub mod code {
    /// Segment register.
    pub const SEGMENT_REGISTER: u16 = 0x00;
    /// Optional data address for the next instruction.
    pub const OPTIONAL_DATA_ADDRESS: u16 = 0x01;
    /// Condition register value.
    pub const CONDITION_REGISTER: u16 = 0x02;
    /// Real address of the branch target of the next instruction.
    pub const REAL_BRANCH_TARGET: u16 = 0x03;
    /// Real data address for the next instruction.
    pub const REAL_DATA_ADDRESS: u16 = 0x04;
    /// Real address of the next instruction.
    pub const REAL_NEXT_INSTRUCTION: u16 = 0x05;
    /// `SYNC_SIGNAL`: mutex unlock, condition signal.
    pub const SYNC_SIGNAL: u16 = 0x20;
    /// `SYNC_BROADCAST_SIGNAL`: condition broadcast.
    pub const SYNC_BROADCAST: u16 = 0x21;
    /// `SYNC_WAIT`: mutex lock, condition wait (after it completed).
    pub const SYNC_WAIT: u16 = 0x30;
    /// `SYNC_TRY_WAIT`: a successful trylock.
    pub const SYNC_TRY_WAIT: u16 = 0x31;
}

macro_rules! from_bytes {
    ($($t:ident),*) => {$(
        impl $t {
            /// Copies the structure from exactly `size_of::<Self>()` big-endian bytes.
            #[must_use]
            pub fn from_bytes(bytes: &[u8]) -> Option<$t> {
                <$t as FromBytes>::read_from_bytes(bytes).ok()
            }

            /// The structure's bytes, as on disk.
            #[must_use]
            pub fn to_bytes(&self) -> &[u8] {
                self.as_bytes()
            }
        }
    )*};
}

from_bytes!(ThreadState, FloatState, VectorState);
