//! PowerPC opcode classification exactly as the spec's `tt6_is*` / `tt6e_is*` macros, and the
//! instruction facts derived from the opcode word: mnemonic, load/store, operand size, traps.
//!
//! Fields (notes §6.1, IBM bit 0 = most significant): the major opcode is `w >> 26`, the
//! minor opcode the macros test is always the 10-bit `(w >> 1) & 0x3FF`. Classification is
//! two table lookups (one by major, one by minor for majors 19 and 31), built at compile
//! time from one list of instructions (`OPS` in the source), so the tables and the facts cannot
//! disagree.

use core::fmt;

/// Which class macros to use: TT6, or TT6E (which adds the cache-block operations to the
/// MEMORY class).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Dialect {
    /// The original TT6 tables.
    #[default]
    Tt6 = 0,
    /// TT6E: `dcba`, `dcbf`, `dcbi`, `dcbst`, `dcbt`, `dcbtst`, `dcbz`, `icbi` are MEMORY.
    Tt6e = 1,
}

impl Dialect {
    /// `"tt6"` or `"tt6e"`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Tt6 => "tt6",
            Dialect::Tt6e => "tt6e",
        }
    }
}

/// The record class of an instruction, which decides the record's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Class {
    /// One word: the opcode.
    Compute = 0,
    /// Two words: opcode, next PC (branches, `rfi`, `rfid`, `sc`).
    Flow = 1,
    /// Two words: opcode, data effective address.
    Memory = 2,
    /// Three words: opcode, effective address, XER (`lswx`/`stswx`) or rB (`dst*`).
    MemoryExtended = 3,
}

impl Class {
    /// Every class, in `repr` order.
    pub const ALL: [Class; 4] = [
        Class::Compute,
        Class::Flow,
        Class::Memory,
        Class::MemoryExtended,
    ];

    /// The name used in dumps: `compute`, `flow`, `memory`, `memory_extended`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Class::Compute => "compute",
            Class::Flow => "flow",
            Class::Memory => "memory",
            Class::MemoryExtended => "memory_extended",
        }
    }

    /// How many words follow the opcode word in a record of this class.
    #[inline]
    #[must_use]
    pub fn extra_words(self) -> usize {
        // 0, 1, 1, 2 for discriminants 0..=3: arithmetic, no memory load on the decoder's
        // critical path (the next record's position depends on it).
        ((self as u32).wrapping_add(1) >> 1) as usize
    }

    #[inline]
    const fn from_bits(b: u8) -> Class {
        match b & 3 {
            0 => Class::Compute,
            1 => Class::Flow,
            2 => Class::Memory,
            _ => Class::MemoryExtended,
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a memory-class instruction does with its effective address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Reads data.
    Load,
    /// Writes data.
    Store,
    /// A cache-block operation (`dcb*`, `icbi`; TT6E only): not a data transfer.
    CacheBlock,
    /// An AltiVec data-stream prefetch hint (`dst*`): the third word is rB.
    Stream,
}

impl Access {
    /// `load`, `store`, `cache_block` or `stream`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Access::Load => "load",
            Access::Store => "store",
            Access::CacheBlock => "cache_block",
            Access::Stream => "stream",
        }
    }
}

/// How the operand size of a memory instruction is found (notes §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SizeRule {
    /// A fixed number of bytes.
    Fixed(u8),
    /// `lmw`/`stmw`: `(32 - rT) * 4`.
    Multiple,
    /// `lswi`/`stswi`: NB, 0 meaning 32.
    StringImmediate,
    /// `lswx`/`stswx`: the third word (XER) `& 0x7F`.
    StringIndexed,
    /// A cache block of the reader's cache-line size (`dcbz` and the other block ops).
    CacheLine,
    /// `dst*`: no data size; the third word is the stream-control word rB.
    Stream,
}

/// The facts about one instruction of the classification tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// The mnemonic (the base form; [`mnemonic`] refines it from the word's other bits).
    pub mnemonic: &'static str,
    /// Its class under the TT6 macros.
    pub tt6: Class,
    /// Its class under the TT6E macros.
    pub tt6e: Class,
    /// What it does with memory (`None` for compute and flow instructions).
    pub access: Option<Access>,
    /// How its operand size is found (`None` when it has no memory operand).
    pub size: Option<SizeRule>,
}

impl OpInfo {
    /// Its class under `dialect`.
    #[must_use]
    pub fn class(&self, dialect: Dialect) -> Class {
        match dialect {
            Dialect::Tt6 => self.tt6,
            Dialect::Tt6e => self.tt6e,
        }
    }
}

/// "No minor opcode": the entry matches on the major opcode alone.
const ANY: u16 = u16::MAX;

/// One row of the instruction list: major opcode, 10-bit minor opcode (or [`ANY`]), facts.
#[derive(Clone, Copy, Debug)]
struct Entry {
    major: u8,
    minor: u16,
    info: OpInfo,
}

const fn e(
    major: u8,
    minor: u16,
    mnemonic: &'static str,
    tt6: Class,
    tt6e: Class,
    access: Option<Access>,
    size: Option<SizeRule>,
) -> Entry {
    Entry {
        major,
        minor,
        info: OpInfo {
            mnemonic,
            tt6,
            tt6e,
            access,
            size,
        },
    }
}

/// Flow-altering in both dialects.
const fn flow(major: u8, minor: u16, m: &'static str) -> Entry {
    e(major, minor, m, Class::Flow, Class::Flow, None, None)
}
/// MEMORY in both dialects.
const fn mem(major: u8, minor: u16, m: &'static str, a: Access, s: SizeRule) -> Entry {
    e(
        major,
        minor,
        m,
        Class::Memory,
        Class::Memory,
        Some(a),
        Some(s),
    )
}
/// MEMORY_EXTENDED in both dialects.
const fn ext(minor: u16, m: &'static str, a: Access, s: SizeRule) -> Entry {
    e(
        31,
        minor,
        m,
        Class::MemoryExtended,
        Class::MemoryExtended,
        Some(a),
        Some(s),
    )
}
/// COMPUTE in TT6, MEMORY in TT6E (the cache-block operations).
const fn blk(minor: u16, m: &'static str) -> Entry {
    e(
        31,
        minor,
        m,
        Class::Compute,
        Class::Memory,
        Some(Access::CacheBlock),
        Some(SizeRule::CacheLine),
    )
}
/// COMPUTE in both dialects (listed for its mnemonic only).
const fn cmp(major: u8, minor: u16, m: &'static str) -> Entry {
    e(major, minor, m, Class::Compute, Class::Compute, None, None)
}

use Access::{Load as L, Store as S};
use SizeRule::{Fixed, Multiple, StringImmediate, StringIndexed};

/// Every instruction of the spec's class macros (in the macros' order), then the compute
/// instructions that get a mnemonic. `(major, minor)` pairs are unique (checked by a test).
static OPS: [Entry; 135] = [
    // tt6_isFlowAltering / tt6e_isFlowAltering
    flow(18, ANY, "b"),
    flow(16, ANY, "bc"),
    flow(19, 528, "bcctr"),
    flow(19, 16, "bclr"),
    flow(19, 50, "rfi"),
    flow(17, ANY, "sc"),
    flow(19, 18, "rfid"),
    // tt6_isMemory / tt6e_isMemory (lswi is listed twice in the spec: once here)
    mem(34, ANY, "lbz", L, Fixed(1)),
    mem(35, ANY, "lbzu", L, Fixed(1)),
    mem(50, ANY, "lfd", L, Fixed(8)),
    mem(51, ANY, "lfdu", L, Fixed(8)),
    mem(48, ANY, "lfs", L, Fixed(4)),
    mem(49, ANY, "lfsu", L, Fixed(4)),
    mem(42, ANY, "lha", L, Fixed(2)),
    mem(43, ANY, "lhau", L, Fixed(2)),
    mem(40, ANY, "lhz", L, Fixed(2)),
    mem(41, ANY, "lhzu", L, Fixed(2)),
    mem(46, ANY, "lmw", L, Multiple),
    mem(32, ANY, "lwz", L, Fixed(4)),
    mem(33, ANY, "lwzu", L, Fixed(4)),
    mem(31, 597, "lswi", L, StringImmediate),
    mem(31, 119, "lbzux", L, Fixed(1)),
    mem(31, 87, "lbzx", L, Fixed(1)),
    mem(31, 631, "lfdux", L, Fixed(8)),
    mem(31, 599, "lfdx", L, Fixed(8)),
    mem(31, 567, "lfsux", L, Fixed(4)),
    mem(31, 535, "lfsx", L, Fixed(4)),
    mem(31, 375, "lhaux", L, Fixed(2)),
    mem(31, 343, "lhax", L, Fixed(2)),
    mem(31, 790, "lhbrx", L, Fixed(2)),
    mem(31, 311, "lhzux", L, Fixed(2)),
    mem(31, 279, "lhzx", L, Fixed(2)),
    mem(31, 20, "lwarx", L, Fixed(4)),
    mem(31, 534, "lwbrx", L, Fixed(4)),
    mem(31, 55, "lwzux", L, Fixed(4)),
    mem(31, 23, "lwzx", L, Fixed(4)),
    mem(31, 7, "lvebx", L, Fixed(1)),
    mem(31, 39, "lvehx", L, Fixed(2)),
    mem(31, 71, "lvewx", L, Fixed(4)),
    mem(31, 103, "lvx", L, Fixed(16)),
    mem(31, 359, "lvxl", L, Fixed(16)),
    mem(31, 310, "eciwx", L, Fixed(4)),
    mem(31, 438, "ecowx", S, Fixed(4)),
    mem(38, ANY, "stb", S, Fixed(1)),
    mem(39, ANY, "stbu", S, Fixed(1)),
    mem(54, ANY, "stfd", S, Fixed(8)),
    mem(55, ANY, "stfdu", S, Fixed(8)),
    mem(52, ANY, "stfs", S, Fixed(4)),
    mem(53, ANY, "stfsu", S, Fixed(4)),
    mem(44, ANY, "sth", S, Fixed(2)),
    mem(45, ANY, "sthu", S, Fixed(2)),
    mem(47, ANY, "stmw", S, Multiple),
    mem(36, ANY, "stw", S, Fixed(4)),
    mem(37, ANY, "stwu", S, Fixed(4)),
    mem(31, 247, "stbux", S, Fixed(1)),
    mem(31, 215, "stbx", S, Fixed(1)),
    mem(31, 759, "stfdux", S, Fixed(8)),
    mem(31, 727, "stfdx", S, Fixed(8)),
    mem(31, 983, "stfiwx", S, Fixed(4)),
    mem(31, 695, "stfsux", S, Fixed(4)),
    mem(31, 663, "stfsx", S, Fixed(4)),
    mem(31, 918, "sthbrx", S, Fixed(2)),
    mem(31, 439, "sthux", S, Fixed(2)),
    mem(31, 407, "sthx", S, Fixed(2)),
    mem(31, 725, "stswi", S, StringImmediate),
    mem(31, 662, "stwbrx", S, Fixed(4)),
    mem(31, 150, "stwcx.", S, Fixed(4)),
    mem(31, 183, "stwux", S, Fixed(4)),
    mem(31, 151, "stwx", S, Fixed(4)),
    mem(31, 135, "stvebx", S, Fixed(1)),
    mem(31, 167, "stvehx", S, Fixed(2)),
    mem(31, 199, "stvewx", S, Fixed(4)),
    mem(31, 231, "stvx", S, Fixed(16)),
    mem(31, 487, "stvxl", S, Fixed(16)),
    // DS-form: the size depends on `w & 3` (see `operand_size`); 8 is the ld/std size.
    mem(58, ANY, "ld", L, Fixed(8)),
    mem(62, ANY, "std", S, Fixed(8)),
    mem(31, 21, "ldx", L, Fixed(8)),
    mem(31, 53, "ldux", L, Fixed(8)),
    mem(31, 84, "ldarx", L, Fixed(8)),
    mem(31, 341, "lwax", L, Fixed(4)),
    mem(31, 373, "lwaux", L, Fixed(4)),
    mem(31, 149, "stdx", S, Fixed(8)),
    mem(31, 181, "stdux", S, Fixed(8)),
    mem(31, 214, "stdcx.", S, Fixed(8)),
    // tt6e_isMemory only: the cache-block operations.
    blk(758, "dcba"),
    blk(86, "dcbf"),
    blk(470, "dcbi"),
    blk(54, "dcbst"),
    blk(278, "dcbt"),
    blk(246, "dcbtst"),
    blk(1014, "dcbz"),
    blk(982, "icbi"),
    // tt6_isMemoryExtended / tt6e_isMemoryExtended
    ext(533, "lswx", L, StringIndexed),
    ext(661, "stswx", S, StringIndexed),
    ext(342, "dst", Access::Stream, SizeRule::Stream),
    ext(374, "dstst", Access::Stream, SizeRule::Stream),
    // Compute instructions with a mnemonic (not exhaustive; traps first).
    cmp(3, ANY, "twi"),
    cmp(2, ANY, "tdi"),
    cmp(31, 4, "tw"),
    cmp(31, 68, "td"),
    cmp(7, ANY, "mulli"),
    cmp(8, ANY, "subfic"),
    cmp(10, ANY, "cmplwi"),
    cmp(11, ANY, "cmpwi"),
    cmp(12, ANY, "addic"),
    cmp(13, ANY, "addic."),
    cmp(14, ANY, "addi"),
    cmp(15, ANY, "addis"),
    cmp(20, ANY, "rlwimi"),
    cmp(21, ANY, "rlwinm"),
    cmp(23, ANY, "rlwnm"),
    cmp(24, ANY, "ori"),
    cmp(25, ANY, "oris"),
    cmp(26, ANY, "xori"),
    cmp(27, ANY, "xoris"),
    cmp(28, ANY, "andi."),
    cmp(29, ANY, "andis."),
    cmp(19, 150, "isync"),
    cmp(19, 193, "crxor"),
    cmp(31, 0, "cmpw"),
    cmp(31, 32, "cmplw"),
    cmp(31, 19, "mfcr"),
    cmp(31, 144, "mtcrf"),
    cmp(31, 339, "mfspr"),
    cmp(31, 467, "mtspr"),
    cmp(31, 444, "or"),
    cmp(31, 28, "and"),
    cmp(31, 316, "xor"),
    cmp(31, 24, "slw"),
    cmp(31, 536, "srw"),
    cmp(31, 824, "srawi"),
    cmp(31, 598, "sync"),
    cmp(31, 822, "dss"),
    cmp(31, 6, "lvsl"),
    cmp(31, 38, "lvsr"),
];

/// XO-form arithmetic under major 31, by the 9-bit extended opcode `(w >> 1) & 0x1FF` (the
/// OE bit set adds 512 to the 10-bit field): compute, mnemonic only.
const XO_ARITH: [(u16, &str); 12] = [
    (8, "subfc"),
    (10, "addc"),
    (40, "subf"),
    (104, "neg"),
    (136, "subfe"),
    (138, "adde"),
    (202, "addze"),
    (235, "mullw"),
    (266, "add"),
    (459, "divwu"),
    (491, "divw"),
    (75, "mulhw"),
];

const NONE: u8 = u8::MAX;
/// Marker in [`MAJOR_CLASS`]: look the minor opcode up in [`X19_CLASS`] / [`X31_CLASS`].
const BY_MINOR: u8 = 0x80;

/// Class bits of one entry: TT6 in bits 0-1, TT6E in bits 2-3.
const fn class_bits(info: &OpInfo) -> u8 {
    (info.tt6 as u8) | ((info.tt6e as u8) << 2)
}

// Evaluated at compile time: an out-of-range index fails the build instead of panicking.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn build_index(major: u8) -> [u8; 1024] {
    let mut t = [NONE; 1024];
    let mut i = 0;
    while i < OPS.len() {
        if OPS[i].major == major && OPS[i].minor != ANY {
            t[OPS[i].minor as usize] = i as u8;
        }
        i += 1;
    }
    t
}

#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn build_major_index() -> [u8; 64] {
    let mut t = [NONE; 64];
    let mut i = 0;
    while i < OPS.len() {
        if OPS[i].minor == ANY {
            t[OPS[i].major as usize] = i as u8;
        }
        i += 1;
    }
    t
}

#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn build_minor_class(index: &[u8; 1024]) -> [u8; 1024] {
    let mut t = [0u8; 1024];
    let mut i = 0;
    while i < 1024 {
        if index[i] != NONE {
            t[i] = class_bits(&OPS[index[i] as usize].info);
        }
        i += 1;
    }
    t
}

#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn build_major_class() -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        if MAJOR_IDX[i] != NONE {
            t[i] = class_bits(&OPS[MAJOR_IDX[i] as usize].info);
        }
        i += 1;
    }
    t[19] = BY_MINOR;
    t[31] = BY_MINOR | 1;
    t
}

const MAJOR_IDX: [u8; 64] = build_major_index();
static MAJOR_INDEX: [u8; 64] = MAJOR_IDX;
static X19_INDEX: [u8; 1024] = build_index(19);
static X31_INDEX: [u8; 1024] = build_index(31);

/// Class bits by `(major << 10) | minor` (64 KiB): one branch-free load per opcode on the
/// hot path. Built from the tables above.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn build_class_table() -> [u8; 65536] {
    let mut t = [0u8; 65536];
    let mut i = 0;
    while i < 65536 {
        let m = MAJOR_CLASS[i >> 10];
        t[i] = if m & BY_MINOR == 0 {
            m
        } else if m & 1 == 0 {
            X19_CLASS[i & 0x3FF]
        } else {
            X31_CLASS[i & 0x3FF]
        };
        i += 1;
    }
    t
}

const MAJOR_CLASS: [u8; 64] = build_major_class();
const X19_CLASS: [u8; 1024] = build_minor_class(&build_index(19));
const X31_CLASS: [u8; 1024] = build_minor_class(&build_index(31));
static CLASS_TABLE: [u8; 65536] = build_class_table();

/// [`CLASS_TABLE`] for one dialect: the class discriminant itself, no shift needed.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn build_dialect_table(shift: u32) -> [u8; 65536] {
    let all = build_class_table();
    let mut t = [0u8; 65536];
    let mut i = 0;
    while i < 65536 {
        t[i] = (all[i] >> shift) & 3;
        i += 1;
    }
    t
}

static TT6_CLASS: [u8; 65536] = build_dialect_table(0);
static TT6E_CLASS: [u8; 65536] = build_dialect_table(2);

/// A classifier bound to one dialect (one table lookup per opcode, no shift).
#[derive(Clone, Copy)]
pub(crate) struct Classifier(&'static [u8; 65536]);

impl core::fmt::Debug for Classifier {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Classifier")
    }
}

impl Classifier {
    pub(crate) fn new(dialect: Dialect) -> Classifier {
        Classifier(match dialect {
            Dialect::Tt6 => &TT6_CLASS,
            Dialect::Tt6e => &TT6E_CLASS,
        })
    }

    #[inline(always)]
    pub(crate) fn classify(self, word: u32) -> Class {
        Class::from_bits(self.0.get(class_index(word)).copied().unwrap_or_default())
    }
}

/// The index of [`CLASS_TABLE`]: major opcode in bits 10-15, minor in bits 0-9.
#[inline]
const fn class_index(word: u32) -> usize {
    (((word >> 16) & 0xFC00) | ((word >> 1) & 0x3FF)) as usize
}

/// The major (primary) opcode, `w >> 26`.
#[inline]
#[must_use]
pub const fn major(word: u32) -> u32 {
    word >> 26
}

/// The 10-bit minor (extended) opcode the class macros test, `(w >> 1) & 0x3FF`.
#[inline]
#[must_use]
pub const fn minor(word: u32) -> u32 {
    (word >> 1) & 0x3FF
}

/// Whether `word`, read in the opcode slot, is an escape record (top 6 bits zero).
#[inline]
#[must_use]
pub const fn is_escape(word: u32) -> bool {
    word >> 26 == 0
}

/// Classifies an opcode word exactly as the spec's macros for `dialect` do (an escape word,
/// major 0, classifies as compute; readers test [`is_escape`] first).
#[inline]
#[must_use]
pub fn classify(dialect: Dialect, word: u32) -> Class {
    let shift = (dialect as u8) << 1;
    let bits = CLASS_TABLE
        .get(class_index(word))
        .copied()
        .unwrap_or_default();
    Class::from_bits(bits >> shift)
}

/// The table entry for `word`, if it is one of the listed instructions.
#[must_use]
pub fn info(word: u32) -> Option<&'static OpInfo> {
    let idx = match major(word) {
        19 => X19_INDEX.get(minor(word) as usize).copied(),
        31 => X31_INDEX.get(minor(word) as usize).copied(),
        m => MAJOR_INDEX.get(m as usize).copied(),
    }
    .unwrap_or(NONE);
    OPS.get(usize::from(idx)).map(|e| &e.info)
}

/// The mnemonic of `word`: every instruction of the class macros and the common compute
/// instructions (`None` for others). Refines the base form from the word's other bits:
/// `b`/`ba`/`bl`/`bla`, `bc…`, `bclr`/`bclrl`, `bcctr`/`bcctrl`, `ld`/`ldu`/`lwa`,
/// `std`/`stdu`, `dcbz`/`dcbzl`, `dst`/`dstt`, `dstst`/`dststt`, `mflr`/`mtlr`/`mfctr`/
/// `mtctr`, `nop`, XO-form arithmetic with `o`/`.` suffixes dropped.
#[must_use]
pub fn mnemonic(word: u32) -> Option<&'static str> {
    let aa_lk = word & 3;
    let spr = ((word >> 16) & 0x1F) | ((word >> 6) & 0x3E0);
    let special = match (major(word), minor(word)) {
        (18, _) => ["b", "bl", "ba", "bla"].get(aa_lk as usize).copied(),
        (16, _) => ["bc", "bcl", "bca", "bcla"].get(aa_lk as usize).copied(),
        (19, 16) if word & 1 == 1 => Some("bclrl"),
        (19, 528) if word & 1 == 1 => Some("bcctrl"),
        (58, _) => match word & 3 {
            0 => Some("ld"),
            1 => Some("ldu"),
            2 => Some("lwa"),
            _ => None,
        },
        (62, _) => match word & 3 {
            0 => Some("std"),
            1 => Some("stdu"),
            _ => None,
        },
        (31, 1014) if dcbzl(word) => Some("dcbzl"),
        (31, 342) if stream_transient(word) => Some("dstt"),
        (31, 374) if stream_transient(word) => Some("dststt"),
        (31, 339) if spr == 8 => Some("mflr"),
        (31, 339) if spr == 9 => Some("mfctr"),
        (31, 467) if spr == 8 => Some("mtlr"),
        (31, 467) if spr == 9 => Some("mtctr"),
        (24, _) if word == 0x6000_0000 => Some("nop"),
        _ => None,
    };
    if special.is_some() {
        return special;
    }
    if let Some(i) = info(word) {
        // DS-form majors 58/62 with an undefined `w & 3` were handled (None) above.
        if matches!(major(word), 58 | 62) {
            return None;
        }
        return Some(i.mnemonic);
    }
    if major(word) == 31 {
        let xo = (word >> 1) & 0x1FF;
        return XO_ARITH
            .iter()
            .find(|(op, _)| u32::from(*op) == xo)
            .map(|(_, m)| *m);
    }
    None
}

/// `dcbzl`: `dcbz` with IBM bit 10 (`(w >> 21) & 1`) set (notes §6.2).
#[inline]
#[must_use]
pub const fn dcbzl(word: u32) -> bool {
    major(word) == 31 && minor(word) == 1014 && (word >> 21) & 1 == 1
}

/// The T (transient) bit of `dst`/`dstst`, IBM bit 6.
const fn stream_transient(word: u32) -> bool {
    (word >> 25) & 1 == 1
}

/// What the instruction does with its effective address, if it has one under `dialect`
/// (cache-block operations have none in TT6, where they are compute).
#[must_use]
pub fn access(dialect: Dialect, word: u32) -> Option<Access> {
    let i = info(word)?;
    match i.class(dialect) {
        Class::Memory | Class::MemoryExtended => i.access,
        Class::Compute | Class::Flow => None,
    }
}

/// Whether `word` stores to memory (a store, not a load or block operation).
#[must_use]
pub fn is_store(word: u32) -> bool {
    info(word).and_then(|i| i.access) == Some(Access::Store)
}

/// Whether `word` is a trap instruction: `tw` (31/4), `td` (31/68), `twi` (3), `tdi` (2).
#[must_use]
pub const fn is_trap(word: u32) -> bool {
    matches!((major(word), minor(word)), (3 | 2, _) | (31, 4 | 68))
}

/// The operand size in bytes of a memory instruction (notes §7): `extra` is the third word
/// of a MEMORY_EXTENDED record, `cache_line` the cache-block size for `dcb*`/`icbi`
/// (`dcbzl` always clears 128 bytes, the G5 line). `None` when the instruction has no
/// memory operand under `dialect` or no data size (`dst*`, DS-form with undefined `w & 3`).
#[must_use]
pub fn operand_size(
    dialect: Dialect,
    word: u32,
    extra: Option<u32>,
    cache_line: u32,
) -> Option<u32> {
    let i = info(word)?;
    if !matches!(i.class(dialect), Class::Memory | Class::MemoryExtended) {
        return None;
    }
    match i.size? {
        SizeRule::Fixed(n) => match (major(word), word & 3) {
            (58, 2) => Some(4),
            (58, 3) | (62, 2 | 3) => None,
            _ => Some(u32::from(n)),
        },
        SizeRule::Multiple => Some(32u32.saturating_sub((word >> 21) & 0x1F).saturating_mul(4)),
        SizeRule::StringImmediate => match (word >> 11) & 0x1F {
            0 => Some(32),
            nb => Some(nb),
        },
        SizeRule::StringIndexed => extra.map(|x| x & 0x7F),
        SizeRule::CacheLine if dcbzl(word) => Some(128),
        SizeRule::CacheLine => Some(cache_line),
        SizeRule::Stream => None,
    }
}

/// The AltiVec data-stream control word rB of `dst*` (the third word of its record):
/// IBM bits 3-7 block size (units of 16 bytes, 0 = 32), bits 8-15 block count (0 = 256),
/// bits 16-31 signed stride in bytes (0 = 32768).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamControl {
    /// Block size in 16-byte units (1..=32).
    pub block_size: u32,
    /// Number of blocks (1..=256).
    pub block_count: u32,
    /// Signed stride in bytes (0 in the word means 32768).
    pub stride: i32,
}

impl StreamControl {
    /// Decodes the rB word.
    #[must_use]
    pub fn from_word(rb: u32) -> StreamControl {
        let size = (rb >> 24) & 0x1F;
        let count = (rb >> 16) & 0xFF;
        let stride = (rb & 0xFFFF) as u16 as i16;
        StreamControl {
            block_size: if size == 0 { 32 } else { size },
            block_count: if count == 0 { 256 } else { count },
            stride: if stride == 0 {
                32768
            } else {
                i32::from(stride)
            },
        }
    }
}

/// Every `(major, minor)` pair that the spec macros name, with `minor = None` for the
/// major-only tests, and the classes under TT6 and TT6E: the lists used by the tests and
/// the fixtures to cover every opcode of the tables.
pub fn table() -> impl Iterator<Item = (u32, Option<u32>, &'static OpInfo)> {
    OPS.iter().map(|e| {
        (
            u32::from(e.major),
            (e.minor != ANY).then_some(u32::from(e.minor)),
            &e.info,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spec's macros transcribed literally as `match` patterns (an independent oracle
    /// of the table-driven classifier).
    fn macro_class(d: Dialect, w: u32) -> Class {
        let (maj, min) = (w >> 26, (w >> 1) & 0x3FF);
        let flow = matches!((maj, min), (16..=18, _) | (19, 528 | 16 | 50 | 18));
        let mem = matches!(
            (maj, min),
            (
                34 | 35 | 50 | 51 | 48 | 49 | 42 | 43 | 40 | 41 | 46 | 32 | 33,
                _
            ) | (
                38 | 39 | 54 | 55 | 52 | 53 | 44 | 45 | 47 | 36 | 37 | 58 | 62,
                _
            ) | (
                31,
                597 | 119
                    | 87
                    | 631
                    | 599
                    | 567
                    | 535
                    | 375
                    | 343
                    | 790
                    | 311
                    | 279
                    | 20
                    | 534
                    | 55
                    | 23
                    | 7
                    | 39
                    | 71
                    | 103
                    | 359
                    | 310
                    | 438
                    | 247
                    | 215
                    | 759
                    | 727
                    | 983
                    | 695
                    | 663
                    | 918
                    | 439
                    | 407
                    | 725
                    | 662
                    | 150
                    | 183
                    | 151
                    | 135
                    | 167
                    | 199
                    | 231
                    | 487
                    | 21
                    | 53
                    | 84
                    | 341
                    | 373
                    | 149
                    | 181
                    | 214
            )
        );
        let mem_e = matches!(
            (maj, min),
            (31, 758 | 86 | 470 | 54 | 278 | 246 | 1014 | 982)
        );
        let ext = matches!((maj, min), (31, 533 | 661 | 342 | 374));
        if flow {
            Class::Flow
        } else if mem || (d == Dialect::Tt6e && mem_e) {
            Class::Memory
        } else if ext {
            Class::MemoryExtended
        } else {
            Class::Compute
        }
    }

    #[test]
    fn classifier_matches_the_macros_for_every_major_minor_pair() {
        for maj in 0..64u32 {
            for min in 0..1024u32 {
                for low in [0u32, 1, 2, 3] {
                    let w = (maj << 26) | (min << 1) | (low & 1) | ((low >> 1) << 21);
                    for d in [Dialect::Tt6, Dialect::Tt6e] {
                        assert_eq!(classify(d, w), macro_class(d, w), "{w:#010x} {d:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn table_pairs_are_unique_and_sets_disjoint() {
        let v: Vec<_> = table().map(|(a, b, _)| (a, b)).collect();
        for (i, x) in v.iter().enumerate() {
            assert!(!v[i + 1..].contains(x), "{x:?} twice");
        }
    }

    #[test]
    fn mnemonics_and_sizes_from_assembled_words() {
        // Words from the notes' example (assembled with powerpc-linux-gnu-as there).
        assert_eq!(mnemonic(0x7c08_02a6), Some("mflr"));
        assert_eq!(mnemonic(0x93e1_fffc), Some("stw"));
        assert_eq!(mnemonic(0x4800_0011), Some("bl"));
        assert_eq!(mnemonic(0x7c64_2c2a), Some("lswx"));
        assert_eq!(mnemonic(0x7c24_28ce), Some("lvx"));
        assert_eq!(mnemonic(0x4c00_0064), Some("rfi"));
        assert_eq!(classify(Dialect::Tt6, 0x7c64_2c2a), Class::MemoryExtended);
        assert_eq!(
            operand_size(Dialect::Tt6, 0x7c64_2c2a, Some(0x2000_0007), 32),
            Some(7)
        );
        assert_eq!(operand_size(Dialect::Tt6, 0x7c24_28ce, None, 32), Some(16));
        // lmw r29,0(r1): 0xbba10000 (46<<26 | 29<<21 | 1<<16) -> (32-29)*4 = 12.
        assert_eq!(operand_size(Dialect::Tt6, 0xbba1_0000, None, 32), Some(12));
        // lswi r5,r4,0: 0x7ca404aa (31<<26|5<<21|4<<16|0<<11|597<<1) -> 32 bytes.
        assert_eq!(operand_size(Dialect::Tt6, 0x7ca4_04aa, None, 32), Some(32));
        // dcbz r3,r4 = 0x7c0327ec: compute in TT6, memory with the line size in TT6E.
        assert_eq!(classify(Dialect::Tt6, 0x7c03_27ec), Class::Compute);
        assert_eq!(classify(Dialect::Tt6e, 0x7c03_27ec), Class::Memory);
        assert_eq!(operand_size(Dialect::Tt6, 0x7c03_27ec, None, 32), None);
        assert_eq!(operand_size(Dialect::Tt6e, 0x7c03_27ec, None, 64), Some(64));
        assert_eq!(mnemonic(0x7c23_27ec), Some("dcbzl"));
        assert_eq!(
            operand_size(Dialect::Tt6e, 0x7c23_27ec, None, 32),
            Some(128)
        );
        // lwa r3,8(r4) = 0xe864000a (58, ds=8>>2, xo=2): 4 bytes; ld = 8 bytes.
        assert_eq!(mnemonic(0xe864_000a), Some("lwa"));
        assert_eq!(operand_size(Dialect::Tt6, 0xe864_000a, None, 32), Some(4));
        assert_eq!(operand_size(Dialect::Tt6, 0xe864_0008, None, 32), Some(8));
        assert!(is_trap(0x0c00_0000) && is_trap(0x7fe0_0008) && !is_trap(0x7c08_02a6));
        assert!(is_store(0x93e1_fffc) && !is_store(0x7c24_28ce));
        assert_eq!(mnemonic(0x7c63_2214), Some("add")); // add r3,r3,r4
        assert_eq!(mnemonic(0x7c63_2614), Some("add")); // addo r3,r3,r4
        let sc = StreamControl::from_word(0x0102_0000);
        assert_eq!((sc.block_size, sc.block_count, sc.stride), (1, 2, 32768));
    }
}
