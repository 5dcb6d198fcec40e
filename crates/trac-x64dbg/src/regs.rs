//! The register dump (`REGDUMP`) stored in traces, with named accessors
//! (`specs/notes/x64dbg-notes.md` section 8).
//!
//! The trace stores the `REGDUMP` as words of the trace's word size (172 × 8 bytes on x64,
//! 216 × 4 bytes on x86); [`RegDump`] keeps those words and reads named fields out of the
//! byte image they form. Some words are partly padding (uninitialised memory in x64dbg) or
//! derived from other fields (the `flags`, `x87FPURegisters`, `mmx` and `*Fields` structs,
//! the low halves of YMM): they are kept verbatim but are not CPU state.
//!
//! [`RegLayout`] names the fields, once per architecture: what `tracekit state` shows and
//! what `dump`, `export` and the Python dicts call the fields of the words a block records.

// Byte offsets here come from the constant layout tables (all below 0x560) plus small
// field offsets; none of the arithmetic can overflow.
#![allow(clippy::arithmetic_side_effects)]

use std::sync::OnceLock;

use crate::RegChange;
use crate::header::Arch;

/// Byte offsets of the parts of the stored `REGDUMP` that differ between x64 and x86.
#[derive(Clone, Copy, Debug)]
struct Layout {
    gprs: usize,
    segments: usize,
    debug: usize,
    register_area: usize,
    x87fpu: usize,
    mxcsr: usize,
    xmm: usize,
    xmm_count: usize,
    ymm: usize,
    flags: usize,
    x87_registers: usize,
    mmx: usize,
    mxcsr_fields: usize,
    status_fields: usize,
    control_fields: usize,
    last_error: usize,
}

const X64: Layout = Layout {
    gprs: 16,
    segments: 0x90,
    debug: 0xa0,
    register_area: 0xd0,
    x87fpu: 0x120,
    mxcsr: 0x13c,
    xmm: 0x140,
    xmm_count: 16,
    ymm: 0x240,
    flags: 0x440,
    x87_registers: 0x44c,
    mmx: 0x4f0,
    mxcsr_fields: 0x530,
    status_fields: 0x540,
    control_fields: 0x550,
    last_error: 0x55c,
};

const X86: Layout = Layout {
    gprs: 8,
    segments: 0x28,
    debug: 0x34,
    register_area: 0x4c,
    x87fpu: 0x9c,
    mxcsr: 0xb8,
    xmm: 0xc0,
    xmm_count: 8,
    ymm: 0x140,
    flags: 0x240,
    x87_registers: 0x24c,
    mmx: 0x2f0,
    mxcsr_fields: 0x330,
    status_fields: 0x340,
    control_fields: 0x350,
    last_error: 0x35c,
};

const fn layout(arch: Arch) -> &'static Layout {
    match arch {
        Arch::X64 => &X64,
        Arch::X86 => &X86,
    }
}

/// Most words a REGDUMP has (x86).
pub const MAX_WORDS: usize = 216;

/// A segment register.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// GS.
    Gs,
    /// FS.
    Fs,
    /// ES.
    Es,
    /// DS.
    Ds,
    /// CS.
    Cs,
    /// SS.
    Ss,
}

/// A debug register (there is no dr4/dr5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DebugReg {
    /// DR0.
    Dr0,
    /// DR1.
    Dr1,
    /// DR2.
    Dr2,
    /// DR3.
    Dr3,
    /// DR6.
    Dr6,
    /// DR7.
    Dr7,
}

/// The x87 control, status and tag words and the error/data pointers (`x87fpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct X87Fpu {
    /// FPU control word (0x027f after reset).
    pub control_word: u16,
    /// FPU status word.
    pub status_word: u16,
    /// Tag word as Windows reports it.
    pub tag_word: u16,
    /// Last instruction pointer offset.
    pub error_offset: u32,
    /// Last instruction selector.
    pub error_selector: u32,
    /// Last data pointer offset.
    pub data_offset: u32,
    /// Last data selector.
    pub data_selector: u32,
    /// `Cr0NpxState`.
    pub cr0_npx_state: u32,
}

/// One of x64dbg's derived `x87FPURegisters` entries (physical register R_i).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct X87Register {
    /// The 80-bit value.
    pub data: [u8; 10],
    /// Its ST index.
    pub st_value: i32,
    /// Its tag (0 valid, 1 zero, 2 special, 3 empty).
    pub tag: i32,
}

/// The register state before an instruction: the stored words of x64dbg's `REGDUMP`.
#[derive(Clone, PartialEq, Eq)]
pub struct RegDump {
    arch: Arch,
    words: [u64; MAX_WORDS],
}

impl core::fmt::Debug for RegDump {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RegDump")
            .field("arch", &self.arch)
            .field("ip", &format_args!("{:#x}", self.ip()))
            .field("sp", &format_args!("{:#x}", self.sp()))
            .finish_non_exhaustive()
    }
}

macro_rules! gpr {
    ($($(#[$doc:meta])* $name:ident = $i:expr;)*) => {$(
        $(#[$doc])*
        #[must_use]
        pub fn $name(&self) -> u64 {
            self.word($i)
        }
    )*};
}

impl RegDump {
    /// A zeroed dump (what x64dbg's reader starts a page with).
    #[must_use]
    pub fn new(arch: Arch) -> RegDump {
        RegDump {
            arch,
            words: [0; MAX_WORDS],
        }
    }

    /// A dump from its words (at most 172/216 are used; missing ones are 0; values are
    /// truncated to the word size).
    #[must_use]
    pub fn from_words(arch: Arch, words: &[u64]) -> RegDump {
        let mut d = RegDump::new(arch);
        for (slot, &w) in d.words_mut().iter_mut().zip(words) {
            *slot = w & arch.word_max();
        }
        d
    }

    /// The architecture.
    #[must_use]
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The stored words (172 or 216).
    #[must_use]
    #[inline]
    pub fn words(&self) -> &[u64] {
        let n = usize::from(self.arch.regdump_words());
        self.words.get(..n).unwrap_or(&self.words)
    }

    /// The stored words, mutable. Values above the word size are not written by the writer
    /// (it reports an error).
    #[inline]
    pub fn words_mut(&mut self) -> &mut [u64] {
        let n = usize::from(self.arch.regdump_words()).min(MAX_WORDS);
        let (used, _) = self.words.split_at_mut(n);
        used
    }

    /// Word `i`, 0 if out of range.
    #[must_use]
    #[inline]
    pub fn word(&self, i: usize) -> u64 {
        self.words().get(i).copied().unwrap_or(0)
    }

    /// Sets word `i` (ignored if out of range).
    #[inline]
    pub fn set_word(&mut self, i: usize, value: u64) {
        if let Some(slot) = self.words_mut().get_mut(i) {
            *slot = value;
        }
    }

    /// Byte `off` of the REGDUMP image.
    fn byte(&self, off: usize) -> u8 {
        // Word sizes are powers of two (4, 8).
        let w = self.arch.word_size();
        let word = self.word(off >> w.trailing_zeros());
        (word >> ((off & (w - 1)) * 8)) as u8
    }

    /// `N` bytes of the REGDUMP image from `off`.
    fn bytes<const N: usize>(&self, off: usize) -> [u8; N] {
        let mut out = [0u8; N];
        for (i, b) in out.iter_mut().enumerate() {
            *b = self.byte(off.saturating_add(i));
        }
        out
    }

    fn u16_at(&self, off: usize) -> u16 {
        u16::from_le_bytes(self.bytes(off))
    }

    fn u32_at(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.bytes(off))
    }

    fn duint_at(&self, off: usize) -> u64 {
        self.word(off / self.arch.word_size())
    }

    fn set_byte(&mut self, off: usize, value: u8) {
        let w = self.arch.word_size();
        let shift = (off % w) * 8;
        let i = off / w;
        let old = self.word(i);
        self.set_word(i, (old & !(0xff << shift)) | (u64::from(value) << shift));
    }

    fn set_bytes(&mut self, off: usize, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            self.set_byte(off.saturating_add(i), b);
        }
    }

    fn layout(&self) -> &'static Layout {
        layout(self.arch)
    }

    /// General register `i` in encoding order (0 = rax/eax, 1 = rcx, 2 = rdx, 3 = rbx,
    /// 4 = rsp, 5 = rbp, 6 = rsi, 7 = rdi, 8..=15 = r8..r15 on x64). 0 if out of range.
    #[must_use]
    pub fn gpr(&self, i: usize) -> u64 {
        if i < self.layout().gprs {
            self.word(i)
        } else {
            0
        }
    }

    gpr! {
        /// rax / eax.
        cax = 0;
        /// rcx / ecx.
        ccx = 1;
        /// rdx / edx.
        cdx = 2;
        /// rbx / ebx.
        cbx = 3;
        /// rsp / esp.
        sp = 4;
        /// rbp / ebp.
        bp = 5;
        /// rsi / esi.
        si = 6;
        /// rdi / edi.
        di = 7;
    }

    /// The instruction pointer (rip / eip: `cip`).
    #[must_use]
    pub fn ip(&self) -> u64 {
        self.word(self.layout().gprs)
    }

    /// rflags / eflags.
    #[must_use]
    pub fn flags(&self) -> u64 {
        self.word(self.layout().gprs.saturating_add(1))
    }

    /// A segment register, unpacked from its packed word.
    #[must_use]
    pub fn segment(&self, s: Segment) -> u16 {
        let i = match s {
            Segment::Gs => 0,
            Segment::Fs => 1,
            Segment::Es => 2,
            Segment::Ds => 3,
            Segment::Cs => 4,
            Segment::Ss => 5,
        };
        self.u16_at(self.layout().segments + 2 * i)
    }

    /// A debug register.
    #[must_use]
    pub fn debug(&self, r: DebugReg) -> u64 {
        let i = match r {
            DebugReg::Dr0 => 0,
            DebugReg::Dr1 => 1,
            DebugReg::Dr2 => 2,
            DebugReg::Dr3 => 3,
            DebugReg::Dr6 => 4,
            DebugReg::Dr7 => 5,
        };
        self.duint_at(self.layout().debug + i * self.arch.word_size())
    }

    /// ST(`i`) (0..8) from the x87 `RegisterArea`, 80 bits, in stack order.
    #[must_use]
    pub fn st(&self, i: usize) -> [u8; 10] {
        self.bytes(self.layout().register_area + 10 * (i % 8))
    }

    /// The x87 control/status/tag words and pointers.
    #[must_use]
    pub fn x87_fpu(&self) -> X87Fpu {
        let o = self.layout().x87fpu;
        X87Fpu {
            control_word: self.u16_at(o),
            status_word: self.u16_at(o + 2),
            tag_word: self.u16_at(o + 4),
            error_offset: self.u32_at(o + 8),
            error_selector: self.u32_at(o + 12),
            data_offset: self.u32_at(o + 16),
            data_selector: self.u32_at(o + 20),
            cr0_npx_state: self.u32_at(o + 24),
        }
    }

    /// x64dbg's derived `x87FPURegisters[i]` (0..8).
    #[must_use]
    pub fn x87_register(&self, i: usize) -> X87Register {
        let o = self.layout().x87_registers + 20 * (i % 8);
        X87Register {
            data: self.bytes(o),
            st_value: i32::from_le_bytes(self.bytes(o + 12)),
            tag: i32::from_le_bytes(self.bytes(o + 16)),
        }
    }

    /// `mmx[i]` (0..8): the first 8 bytes of `x87FPURegisters[i].data`.
    #[must_use]
    pub fn mmx(&self, i: usize) -> u64 {
        u64::from_le_bytes(self.bytes(self.layout().mmx + 8 * (i % 8)))
    }

    /// MXCSR.
    #[must_use]
    pub fn mxcsr(&self) -> u32 {
        self.u32_at(self.layout().mxcsr)
    }

    /// Number of XMM registers stored: 16 on x64, 8 on x86.
    #[must_use]
    pub fn xmm_count(&self) -> usize {
        self.layout().xmm_count
    }

    /// XMM`i` (0 if `i` ≥ [`RegDump::xmm_count`]).
    #[must_use]
    pub fn xmm(&self, i: usize) -> u128 {
        if i >= self.xmm_count() {
            return 0;
        }
        u128::from_le_bytes(self.bytes(self.layout().xmm + 16 * i))
    }

    /// YMM`i` as 32 little-endian bytes: the `YmmRegisters[i]` copy of XMM`i`, then the
    /// upper 128 bits (zeros if `i` ≥ [`RegDump::xmm_count`]).
    #[must_use]
    pub fn ymm(&self, i: usize) -> [u8; 32] {
        if i >= self.xmm_count() {
            return [0; 32];
        }
        self.bytes(self.layout().ymm + 32 * i)
    }

    /// The derived `flags` struct as 9 booleans: c, p, a, z, s, t, i, d, o.
    #[must_use]
    pub fn flag_bools(&self) -> [bool; 9] {
        let b: [u8; 9] = self.bytes(self.layout().flags);
        b.map(|x| x != 0)
    }

    /// `lastError.code`: the thread's last-error value.
    #[must_use]
    pub fn last_error(&self) -> u32 {
        self.u32_at(self.layout().last_error)
    }

    /// Sets the instruction pointer.
    pub fn set_ip(&mut self, v: u64) {
        self.set_word(self.layout().gprs, v);
    }

    /// Sets rflags/eflags and the derived `flags` booleans.
    pub fn set_flags(&mut self, v: u64) {
        self.set_word(self.layout().gprs.saturating_add(1), v);
        let bits = [0, 2, 4, 6, 7, 8, 9, 10, 11];
        let bools = bits.map(|b| u8::from(v >> b & 1 == 1));
        self.set_bytes(self.layout().flags, &bools);
    }

    /// Sets a segment register inside its packed word.
    pub fn set_segment(&mut self, s: Segment, v: u16) {
        let i = match s {
            Segment::Gs => 0,
            Segment::Fs => 1,
            Segment::Es => 2,
            Segment::Ds => 3,
            Segment::Cs => 4,
            Segment::Ss => 5,
        };
        self.set_bytes(self.layout().segments + 2 * i, &v.to_le_bytes());
    }

    /// Sets the x87 control/status/tag words (and the derived x87 register tags).
    pub fn set_x87_words(&mut self, control: u16, status: u16, tag: u16) {
        let o = self.layout().x87fpu;
        self.set_bytes(o, &control.to_le_bytes());
        self.set_bytes(o + 2, &status.to_le_bytes());
        self.set_bytes(o + 4, &tag.to_le_bytes());
        let top = usize::from((status >> 11) & 7);
        for i in 0..8usize {
            let r = self.layout().x87_registers + 20 * i;
            let st = (i + 8 - top) % 8;
            self.set_bytes(r + 12, &(st as i32).to_le_bytes());
            let t = i32::from((tag >> (2 * i)) & 3);
            self.set_bytes(r + 16, &t.to_le_bytes());
        }
    }

    /// Sets MXCSR.
    pub fn set_mxcsr(&mut self, v: u32) {
        self.set_bytes(self.layout().mxcsr, &v.to_le_bytes());
    }

    /// Sets XMM`i` and its copy in `YmmRegisters[i].Low` (ignored if out of range).
    pub fn set_xmm(&mut self, i: usize, v: u128) {
        if i < self.xmm_count() {
            self.set_bytes(self.layout().xmm + 16 * i, &v.to_le_bytes());
            self.set_bytes(self.layout().ymm + 32 * i, &v.to_le_bytes());
        }
    }

    /// Sets `lastError.code`.
    pub fn set_last_error(&mut self, v: u32) {
        self.set_bytes(self.layout().last_error, &v.to_le_bytes());
    }
}

/// A named field of the stored `REGDUMP`: byte offset, size, name (made once per
/// architecture, see [`RegLayout`]).
type Field = (usize, usize, String);

/// The named fields of `arch`, in dump order (padding not included).
fn named_fields(arch: Arch) -> Vec<Field> {
    let l = layout(arch);
    let w = arch.word_size();
    let mut f: Vec<Field> = Vec::new();
    let gprs: &[&str] = match arch {
        Arch::X64 => &[
            "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11",
            "r12", "r13", "r14", "r15", "rip", "rflags",
        ],
        Arch::X86 => &[
            "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "eflags",
        ],
    };
    for (i, n) in gprs.iter().enumerate() {
        f.push((i * w, w, (*n).to_owned()));
    }
    for (i, n) in ["gs", "fs", "es", "ds", "cs", "ss"].iter().enumerate() {
        f.push((l.segments + 2 * i, 2, (*n).to_owned()));
    }
    for (i, n) in ["dr0", "dr1", "dr2", "dr3", "dr6", "dr7"]
        .iter()
        .enumerate()
    {
        f.push((l.debug + w * i, w, (*n).to_owned()));
    }
    // `RegisterArea`: ST(0)…ST(7), 10 bytes each, in stack order.
    for i in 0..8 {
        f.push((l.register_area + 10 * i, 10, format!("st{i}")));
    }
    // `x87fpu`, by the names of the FXSAVE fields (the selectors are Windows' 32-bit ones).
    let fpu: [(usize, usize, &str); 8] = [
        (0, 2, "fcw"),
        (2, 2, "fsw"),
        (4, 2, "ftw"),
        (8, 4, "fip"),
        (12, 4, "fcs"),
        (16, 4, "fdp"),
        (20, 4, "fds"),
        (24, 4, "cr0npxstate"),
    ];
    for (o, s, n) in fpu {
        f.push((l.x87fpu + o, s, n.to_owned()));
    }
    f.push((l.mxcsr, 4, "mxcsr".into()));
    for i in 0..l.xmm_count {
        f.push((l.xmm + 16 * i, 16, format!("xmm{i}")));
    }
    for i in 0..l.xmm_count {
        f.push((l.ymm + 32 * i, 16, format!("ymm{i}.Low")));
        f.push((l.ymm + 32 * i + 16, 16, format!("ymm{i}.High")));
    }
    for (i, n) in ["c", "p", "a", "z", "s", "t", "i", "d", "o"]
        .iter()
        .enumerate()
    {
        f.push((l.flags + i, 1, format!("flags.{n}")));
    }
    for i in 0..8 {
        let o = l.x87_registers + 20 * i;
        f.push((o, 10, format!("x87r{i}.data")));
        f.push((o + 12, 4, format!("x87r{i}.st_value")));
        f.push((o + 16, 4, format!("x87r{i}.tag")));
    }
    for i in 0..8 {
        f.push((l.mmx + 8 * i, 8, format!("mmx{i}")));
    }
    let mx = [
        "FZ", "PM", "UM", "OM", "ZM", "IM", "DM", "DAZ", "PE", "UE", "OE", "ZE", "DE", "IE",
    ];
    for (i, n) in mx.iter().enumerate() {
        f.push((l.mxcsr_fields + i, 1, format!("MxCsrFields.{n}")));
    }
    f.push((l.mxcsr_fields + 14, 2, "MxCsrFields.RC".into()));
    let sw = [
        "B", "C3", "C2", "C1", "C0", "ES", "SF", "P", "U", "O", "Z", "D", "I",
    ];
    for (i, n) in sw.iter().enumerate() {
        f.push((l.status_fields + i, 1, format!("x87StatusWordFields.{n}")));
    }
    f.push((l.status_fields + 14, 2, "x87StatusWordFields.TOP".into()));
    let cw = ["IC", "IEM", "PM", "UM", "OM", "ZM", "DM", "IM"];
    for (i, n) in cw.iter().enumerate() {
        f.push((l.control_fields + i, 1, format!("x87ControlWordFields.{n}")));
    }
    f.push((l.control_fields + 8, 2, "x87ControlWordFields.RC".into()));
    f.push((l.control_fields + 10, 2, "x87ControlWordFields.PC".into()));
    f.push((l.last_error, 4, "lastError".into()));
    f
}

/// One field of the stored `REGDUMP`: a named register or flag, or padding. See
/// [`RegLayout`], [`register_fields`] and [`RegDump::field`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterField {
    /// The byte offset in the stored dump.
    pub offset: usize,
    /// The size in bytes (1 for the flag bits, which x64dbg stores as one byte each; at
    /// most [`MAX_FIELD`]).
    pub size: usize,
    /// Its name: `rax`, `gs`, `st3`, `fcw`, `mxcsr`, `xmm3`, `ymm0.High`, `flags.z`,
    /// `x87r2.data`, `lastError`; padding is `pad_0x…` (its byte offset).
    pub name: &'static str,
    /// Padding (uninitialised bytes in x64dbg), not CPU state.
    pub pad: bool,
}

/// The largest field, in bytes (an XMM register or a YMM half).
pub const MAX_FIELD: usize = 16;

impl RegisterField {
    /// Whether the field is a flag bit: one of the one-byte booleans x64dbg derives from
    /// the flags and the x87 and SSE control words (`flags.z`, `MxCsrFields.PM`,
    /// `x87StatusWordFields.C0`, `x87ControlWordFields.IM`, …; no other field is one byte).
    #[must_use]
    #[inline]
    pub fn is_flag(&self) -> bool {
        self.size == 1 && !self.pad
    }

    /// The first and the last `REGDUMP` word the field overlaps (`word` bytes each).
    #[must_use]
    #[inline]
    pub fn words(&self, word: usize) -> (usize, usize) {
        // Word sizes are powers of two (4, 8): shifts, not divisions.
        let shift = word.trailing_zeros();
        let last = self.offset + self.size.max(1) - 1;
        (self.offset >> shift, last >> shift)
    }
}

/// The fields of one architecture's stored `REGDUMP`, stated once: every named register
/// and flag with its byte offset and size ([`RegLayout::named`]: what `tracekit state`
/// shows), and with them the padding between them ([`RegLayout::fields`]), so that every
/// byte of the dump belongs to exactly one field. Made once per architecture
/// ([`reg_layout`]).
///
/// x64dbg records a block's register changes per word of the dump. A word packs several
/// fields (`gs`, `fs`, `es`, `ds` in one x64 word; eight `flags.*` bytes) or holds part of
/// a wider one (an XMM register is two x64 words). [`RegLayout::show`] turns the recorded
/// words into fields: each field that overlaps a recorded word, once; flag bits only where
/// they are set and padding only where it is not zero (unless the word shows nothing else).
/// [`RegLayout::changes`] turns them back into the words, byte for byte.
#[derive(Debug)]
pub struct RegLayout {
    arch: Arch,
    /// Every field, padding included, by offset.
    fields: Vec<RegisterField>,
    /// The named fields, by offset.
    named: Vec<RegisterField>,
    /// By word: the range of `fields` that overlaps it.
    by_word: Vec<(u16, u16)>,
}

/// The names that are not `&'static` by themselves, kept for the life of the program (one
/// layout per architecture, made once).
fn keep(name: String) -> &'static str {
    name.leak()
}

impl RegLayout {
    fn new(arch: Arch) -> RegLayout {
        let w = arch.word_size();
        let total = usize::from(arch.regdump_words()) * w;
        let mut named: Vec<RegisterField> = named_fields(arch)
            .into_iter()
            .map(|(offset, size, name)| RegisterField {
                offset,
                size,
                name: keep(name),
                pad: false,
            })
            .collect();
        named.sort_by_key(|f| f.offset);
        let mut fields = Vec::with_capacity(named.len() * 2);
        let mut at = 0;
        for f in named.iter().chain(core::iter::once(&RegisterField {
            offset: total,
            size: 0,
            name: "",
            pad: true,
        })) {
            // Padding before `f`, cut at word boundaries: a pad never spans two words.
            while at < f.offset {
                let end = f.offset.min((at / w + 1) * w);
                fields.push(RegisterField {
                    offset: at,
                    size: end - at,
                    name: keep(format!("pad_{at:#x}")),
                    pad: true,
                });
                at = end;
            }
            if f.size > 0 {
                fields.push(*f);
                at = f.offset + f.size;
            }
        }
        let by_word = (0..usize::from(arch.regdump_words()))
            .map(|i| {
                let (start, end) = (i * w, (i + 1) * w);
                let first = fields.partition_point(|f| f.offset + f.size <= start);
                let last = fields.partition_point(|f| f.offset < end);
                let narrow = |k: usize| u16::try_from(k).unwrap_or(u16::MAX);
                (narrow(first), narrow(last.max(first)))
            })
            .collect();
        RegLayout {
            arch,
            fields,
            named,
            by_word,
        }
    }

    /// The architecture.
    #[must_use]
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Every field, padding included, by offset.
    #[must_use]
    pub fn fields(&self) -> &[RegisterField] {
        &self.fields
    }

    /// The named fields (no padding), by offset: the general registers first
    /// ([`crate::general_words`] of them, one word each).
    #[must_use]
    pub fn named(&self) -> &[RegisterField] {
        &self.named
    }

    /// The field called `name` (padding included).
    #[must_use]
    pub fn by_name(&self, name: &str) -> Option<&RegisterField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The fields of `regs` a block that records the words `words` (ascending, as blocks
    /// list them) shows, each handed to `f` once, in order: every named field that overlaps
    /// a recorded word (the fields of a packed word changed or not: x64dbg records whole
    /// words) but the flag bits that are clear ([`RegisterField::is_flag`]: a new `rflags`
    /// comes with the flags set in it, `flags.z` and `flags.i`, not with eight bytes), and
    /// padding that overlaps one only where `regs` has it not zero. A recorded word that
    /// would show nothing that way (all its flags clear, or nothing but zero padding, two
    /// words of x86) shows its flags, or its padding, clear as they are.
    ///
    /// Returns whether the words the shown fields overlap are exactly `words` (then
    /// [`RegLayout::changes`] rebuilds the block from the fields alone); else the words
    /// must be told with them (a field wider than a word recorded in part: the low half of
    /// an XMM register).
    #[inline]
    pub fn show<'l>(
        &'l self,
        regs: &RegDump,
        words: impl IntoIterator<Item = u16>,
        mut f: impl FnMut(&'l RegisterField),
    ) -> bool {
        let w = self.arch.word_size();
        let mut exact = true;
        // The next field not shown yet, and the last word the shown fields overlap.
        let mut next_field = 0usize;
        let mut covered: Option<usize> = None;
        let mut previous: Option<usize> = None;
        for word in words {
            let i = usize::from(word);
            // A word the fields shown so far overlap must be recorded: no gap before `i`.
            if let (Some(c), Some(p)) = (covered, previous)
                && c > p
                && i != p + 1
            {
                exact = false;
            }
            let mut shown_here = covered.is_some_and(|c| c >= i);
            let (a, b) = self.by_word.get(i).copied().unwrap_or((0, 0));
            let from = usize::from(a).max(next_field);
            let to = usize::from(b).max(from);
            next_field = to;
            let fields = self.fields.get(from..to).unwrap_or_default();
            // Clear flags and zero padding are left out, unless the word would show nothing:
            // then its flags are shown (or its padding, when it holds nothing else).
            let clear = |f: &RegisterField| (f.pad || f.is_flag()) && regs.field_u64(f) == 0;
            let silent = !shown_here && fields.iter().all(clear);
            for field in fields {
                if clear(field) && (!silent || field.pad && field.size < w) {
                    continue;
                }
                let (first, last) = field.words(w);
                if first < i {
                    exact = false;
                }
                covered = Some(covered.map_or(last, |c| c.max(last)));
                shown_here = true;
                f(field);
            }
            if !shown_here {
                exact = false;
            }
            previous = Some(i);
        }
        if let (Some(c), Some(p)) = (covered, previous)
            && c > p
        {
            exact = false;
        }
        exact
    }

    /// The register changes of a block from the fields it shows ([`RegLayout::show`]):
    /// `fields` gives each field's name and value (little-endian, as
    /// [`RegDump::field_u128`] reads it), `words` the recorded words when the fields do not
    /// tell them. Flags and padding that are not given are zero. An unknown name is an
    /// error (the name).
    pub fn changes<'n>(
        &self,
        fields: impl IntoIterator<Item = (&'n str, u128)>,
        words: Option<&[u16]>,
    ) -> Result<Vec<RegChange>, &'n str> {
        let w = self.arch.word_size();
        let mut image = RegDump::new(self.arch);
        let mut covered = [0u64; MAX_WORDS.div_ceil(64)];
        for (name, value) in fields {
            let field = self.by_name(name).ok_or(name)?;
            let bytes = value.to_le_bytes();
            image.set_bytes(field.offset, bytes.get(..field.size).unwrap_or(&bytes));
            let (first, last) = field.words(w);
            for i in first..=last {
                if let Some(bits) = covered.get_mut(i / 64) {
                    *bits |= 1 << (i % 64);
                }
            }
        }
        let recorded: Vec<u16> = match words {
            Some(words) => words.to_vec(),
            None => (0..MAX_WORDS)
                .filter(|i| covered.get(i / 64).is_some_and(|b| b >> (i % 64) & 1 == 1))
                .filter_map(|i| u16::try_from(i).ok())
                .collect(),
        };
        Ok(recorded
            .into_iter()
            .map(|index| RegChange {
                index,
                value: image.word(usize::from(index)),
            })
            .collect())
    }
}

/// The field layout of `arch`'s `REGDUMP` (made on first use).
#[must_use]
pub fn reg_layout(arch: Arch) -> &'static RegLayout {
    static LAYOUTS: [OnceLock<RegLayout>; 2] = [OnceLock::new(), OnceLock::new()];
    let (cell, arch) = match arch {
        Arch::X64 => (&LAYOUTS[0], Arch::X64),
        Arch::X86 => (&LAYOUTS[1], Arch::X86),
    };
    cell.get_or_init(|| RegLayout::new(arch))
}

/// Every named field of the `REGDUMP` of `arch`, by offset ([`RegLayout::named`]): the
/// general registers, `rip`/`eip` and the flags, segments, debug registers, `st0`…`st7`
/// (x87 `RegisterArea`), the x87 control words and pointers (`fcw`, `fsw`, `ftw`, `fip`,
/// `fcs`, `fdp`, `fds`, `cr0npxstate`), `mxcsr`, XMM, YMM halves, the flag bits
/// (`flags.c` …), the x87 registers, MMX, the fields of MXCSR and the x87 status and
/// control words, and `lastError`.
#[must_use]
pub fn register_fields(arch: Arch) -> &'static [RegisterField] {
    reg_layout(arch).named()
}

/// The names of the general registers of `arch` ([`crate::general_words`]: `rax`…`r15`,
/// `rip`, `rflags`; `eax`…`edi`, `eip`, `eflags`), one word each.
pub fn general_names(arch: Arch) -> impl Iterator<Item = &'static str> {
    register_fields(arch)
        .iter()
        .take(crate::general_words(arch))
        .map(|f| f.name)
}

impl RegDump {
    /// The bytes of field `f` (little-endian), zero-filled past the stored words.
    #[must_use]
    pub fn field(&self, f: &RegisterField) -> Vec<u8> {
        (f.offset..f.offset.saturating_add(f.size))
            .map(|byte| self.byte(byte))
            .collect()
    }

    /// Field `f` as a number (its first 8 bytes, little-endian: the whole field when it is
    /// at most a word). No allocation.
    #[must_use]
    #[inline]
    pub fn field_u64(&self, f: &RegisterField) -> u64 {
        let w = self.arch.word_size();
        // Word sizes are powers of two (4, 8): shifts, not divisions. A field inside one
        // word (every field of at most a word but x87r data) is one read.
        let at = f.offset & (w - 1);
        if at + f.size <= w {
            let v = self.word(f.offset >> w.trailing_zeros()) >> (8 * at);
            return if f.size >= 8 {
                v
            } else {
                v & ((1u64 << (8 * f.size)) - 1)
            };
        }
        let mut v = 0u64;
        for k in (0..f.size.min(8)).rev() {
            v = v << 8 | u64::from(self.byte(f.offset + k));
        }
        v
    }

    /// Field `f` as a number (its first [`MAX_FIELD`] bytes, little-endian).
    #[must_use]
    pub fn field_u128(&self, f: &RegisterField) -> u128 {
        let mut v = 0u128;
        for k in (0..f.size.min(MAX_FIELD)).rev() {
            v = v << 8 | u128::from(self.byte(f.offset + k));
        }
        v
    }

    /// Field `f` as the bytes of a big-endian number, most significant first (how a
    /// wide register reads as one hex number), in `out`: the first `f.size` bytes.
    #[inline]
    pub fn field_be<'o>(&self, f: &RegisterField, out: &'o mut [u8; MAX_FIELD]) -> &'o [u8] {
        let n = f.size.min(MAX_FIELD);
        // The words the field overlaps, a word at a time (word sizes are powers of two).
        let w = self.arch.word_size();
        let at = f.offset & (w - 1);
        let mut le = [0u8; 2 * MAX_FIELD];
        let first = f.offset >> w.trailing_zeros();
        let chunks = le.chunks_mut(w).take((at + n).div_ceil(w));
        for (i, chunk) in (first..).zip(chunks) {
            let bytes = self.word(i).to_le_bytes();
            chunk.copy_from_slice(bytes.get(..chunk.len()).unwrap_or_default());
        }
        let field = le.get(at..at + n).unwrap_or_default();
        for (b, v) in out.iter_mut().zip(field.iter().rev()) {
            *b = *v;
        }
        out.get(..n).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names of the fields that overlap word `i` (padding included).
    fn names_of(arch: Arch, i: usize) -> Vec<&'static str> {
        let l = reg_layout(arch);
        let w = arch.word_size();
        l.fields()
            .iter()
            .filter(|f| {
                let (a, b) = f.words(w);
                a <= i && i <= b
            })
            .map(|f| f.name)
            .collect()
    }

    #[test]
    fn fields_follow_the_notes_tables() {
        let n = |i| names_of(Arch::X64, i);
        assert_eq!(n(0), ["rax"]);
        assert_eq!(n(4), ["rsp"]);
        assert_eq!(n(16), ["rip"]);
        assert_eq!(n(17), ["rflags"]);
        assert_eq!(n(18), ["gs", "fs", "es", "ds"]);
        assert_eq!(n(19), ["cs", "ss", "pad_0x9c"]);
        assert_eq!(n(20), ["dr0"]);
        assert_eq!(n(25), ["dr7"]);
        assert_eq!(n(26), ["st0"]);
        assert_eq!(n(27), ["st0", "st1"]);
        assert_eq!(n(36), ["fcw", "fsw", "ftw", "pad_0x126"]);
        assert_eq!(n(37), ["fip", "fcs"]);
        assert_eq!(n(38), ["fdp", "fds"]);
        assert_eq!(n(39), ["cr0npxstate", "mxcsr"]);
        assert_eq!(n(40), ["xmm0"]);
        assert_eq!(n(41), ["xmm0"]);
        assert_eq!(n(71), ["xmm15"]);
        assert_eq!(n(72), ["ymm0.Low"]);
        assert_eq!(n(135), ["ymm15.High"]);
        assert_eq!(
            n(136),
            [
                "flags.c", "flags.p", "flags.a", "flags.z", "flags.s", "flags.t", "flags.i",
                "flags.d"
            ]
        );
        assert_eq!(n(137), ["flags.o", "pad_0x449", "x87r0.data"]);
        assert_eq!(n(157), ["x87r7.tag", "pad_0x4ec"]);
        assert_eq!(n(158), ["mmx0"]);
        assert_eq!(n(165), ["mmx7"]);
        assert_eq!(
            n(171),
            [
                "x87ControlWordFields.RC",
                "x87ControlWordFields.PC",
                "lastError"
            ]
        );
        let n = |i| names_of(Arch::X86, i);
        assert_eq!(n(8), ["eip"]);
        assert_eq!(n(9), ["eflags"]);
        assert_eq!(n(10), ["gs", "fs"]);
        assert_eq!(n(12), ["cs", "ss"]);
        assert_eq!(n(13), ["dr0"]);
        assert_eq!(n(18), ["dr7"]);
        assert_eq!(n(19), ["st0"]);
        assert_eq!(n(40), ["ftw", "pad_0xa2"]);
        assert_eq!(n(46), ["mxcsr"]);
        assert_eq!(n(47), ["pad_0xbc"]);
        assert_eq!(n(48), ["xmm0"]);
        assert_eq!(n(80), ["ymm0.Low"]);
        assert_eq!(n(188), ["mmx0"]);
        assert_eq!(n(215), ["lastError"]);
    }

    /// Every byte of the dump is in exactly one field; no name is used twice, none joins
    /// fields with `|` or is a byte range.
    #[test]
    fn fields_tile_the_dump_with_plain_names() {
        for arch in [Arch::X64, Arch::X86] {
            let l = reg_layout(arch);
            let mut at = 0;
            let mut seen = std::collections::HashSet::new();
            for f in l.fields() {
                assert_eq!(f.offset, at, "{arch}: {}", f.name);
                assert!(f.size > 0 && f.size <= MAX_FIELD, "{arch}: {}", f.name);
                at += f.size;
                assert!(seen.insert(f.name), "{arch}: {} twice", f.name);
                assert!(!f.name.contains(['|', '[', ']']), "{arch}: {}", f.name);
                assert_eq!(l.by_name(f.name), Some(f));
            }
            assert_eq!(at, usize::from(arch.regdump_words()) * arch.word_size());
            assert!(l.named().iter().all(|f| !f.pad));
            let general: Vec<_> = general_names(arch).collect();
            assert_eq!(general.len(), crate::general_words(arch));
            let flags = if arch == Arch::X64 {
                "rflags"
            } else {
                "eflags"
            };
            assert_eq!(general.last().copied(), Some(flags));
        }
    }

    /// What `show` hands out and how `changes` rebuilds the words from it.
    #[test]
    fn show_and_changes_round_trip() {
        let mut d = RegDump::new(Arch::X64);
        d.set_word(19, 0xdead_0000_002b_0033);
        d.set_xmm(0, 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00);
        d.set_flags(0x202);
        let l = reg_layout(Arch::X64);
        let cases: [(&[u16], bool, &[&str]); 8] = [
            (&[4, 19], true, &["rsp", "cs", "ss", "pad_0x9c"]),
            // Of the flag bits, those set; `flags.o` (clear) is left out of its word.
            (&[17, 136], true, &["rflags", "flags.i"]),
            (&[136, 137], false, &["flags.i", "x87r0.data"]),
            (&[40, 41], true, &["xmm0"]),
            (&[40], false, &["xmm0"]),
            (&[41], false, &["xmm0"]),
            (
                &[18, 40, 42],
                false,
                &["gs", "fs", "es", "ds", "xmm0", "xmm1"],
            ),
            (&[26, 27, 28], false, &["st0", "st1", "st2"]),
        ];
        for (words, exact, names) in cases {
            let mut shown = Vec::new();
            assert_eq!(l.show(&d, words.iter().copied(), |f| shown.push(f)), exact);
            let got: Vec<_> = shown.iter().map(|f| f.name).collect();
            assert_eq!(got, names, "{words:?}");
            let values = shown.iter().map(|f| (f.name, d.field_u128(f)));
            let told = (!exact).then_some(words);
            let changes = l.changes(values, told).unwrap();
            let want: Vec<_> = words
                .iter()
                .map(|&index| RegChange {
                    index,
                    value: d.word(usize::from(index)),
                })
                .collect();
            assert_eq!(changes, want, "{words:?}");
        }
        // Zero padding is not shown, unless it is the whole word.
        let mut shown = Vec::new();
        d.set_word(19, 0x002b_0033);
        assert!(l.show(&d, [19], |f| shown.push(f.name)));
        assert_eq!(shown, ["cs", "ss"]);
        // A word of clear flags shows them all: the word is recorded.
        d.set_flags(0x2);
        let mut shown = Vec::new();
        assert!(l.show(&d, [136], |f| shown.push(f.name)));
        assert_eq!(shown.len(), 8);
        assert_eq!(
            l.changes(shown.iter().map(|&n| (n, 0)), None).unwrap(),
            [RegChange {
                index: 136,
                value: 0
            }]
        );
        let l = reg_layout(Arch::X86);
        let mut d = RegDump::new(Arch::X86);
        let mut shown = Vec::new();
        assert!(l.show(&d, [46, 47], |f| shown.push(f.name)));
        assert_eq!(shown, ["mxcsr", "pad_0xbc"]);
        // x86's flags take three words: c p a z, s t i d, o and padding.
        d.set_flags(0x246);
        let mut shown = Vec::new();
        assert!(l.show(&d, [9, 144, 145, 146], |f| shown.push(f.name)));
        assert_eq!(
            shown,
            ["eflags", "flags.p", "flags.z", "flags.i", "flags.o"]
        );
        let mut shown = Vec::new();
        d.set_flags(0x202);
        assert!(l.show(&d, [144, 145], |f| shown.push(f.name)));
        assert_eq!(
            shown,
            ["flags.c", "flags.p", "flags.a", "flags.z", "flags.i"]
        );
        let d = RegDump::new(Arch::X86);
        assert_eq!(l.changes([("pad_0xbc", 0)], None).unwrap()[0].index, 47);
        assert_eq!(l.changes([("gs|fs", 0)], None), Err("gs|fs"));
        let mut out = [0; MAX_FIELD];
        let st0 = l.by_name("st0").unwrap();
        assert_eq!(d.field_be(st0, &mut out).len(), 10);
        // Big-endian bytes of the little-endian field, on both word sizes.
        for arch in [Arch::X64, Arch::X86] {
            let words: Vec<u64> = (0..MAX_WORDS as u64)
                .map(|i| i * 0x0101_0101_0101 + 7)
                .collect();
            let d = RegDump::from_words(arch, &words);
            for f in reg_layout(arch).fields() {
                let be = d.field_be(f, &mut out).to_vec();
                let want = d.field_u128(f).to_be_bytes();
                assert_eq!(be, want[MAX_FIELD - f.size..], "{arch} {}", f.name);
                assert_eq!(d.field(f).iter().rev().copied().collect::<Vec<_>>(), be);
                if f.size <= 8 {
                    assert_eq!(u128::from(d.field_u64(f)), d.field_u128(f), "{}", f.name);
                }
            }
        }
    }

    #[test]
    fn accessors_unpack_fields() {
        let mut d = RegDump::new(Arch::X64);
        d.set_word(19, 0x0000_0001_002b_0033);
        assert_eq!(d.segment(Segment::Cs), 0x33);
        assert_eq!(d.segment(Segment::Ss), 0x2b);
        d.set_word(39, 0x1f80_0000_0000);
        assert_eq!(d.mxcsr(), 0x1f80);
        d.set_xmm(15, 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00);
        assert_eq!(d.word(70), 0x99aa_bbcc_ddee_ff00);
        assert_eq!(d.word(71), 0x1122_3344_5566_7788);
        assert_eq!(d.xmm(15), 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00);
        d.set_word(171, 0x5_0000_0000);
        assert_eq!(d.last_error(), 5);
        d.set_x87_words(0x27f, 0, 0xffff);
        assert_eq!(d.x87_fpu().control_word, 0x27f);
        assert_eq!(d.x87_register(3).tag, 3);
        assert_eq!(d.x87_register(3).st_value, 3);
        d.set_flags(0x202);
        assert!(d.flag_bools()[6]);
        let mut d = RegDump::new(Arch::X86);
        d.set_word(12, 0x0023_001b);
        assert_eq!(d.segment(Segment::Cs), 0x1b);
        assert_eq!(d.segment(Segment::Ss), 0x23);
        d.set_word(18, 0x400);
        assert_eq!(d.debug(DebugReg::Dr7), 0x400);
        d.set_word(215, 87);
        assert_eq!(d.last_error(), 87);
        d.set_word(8, 0x401000);
        assert_eq!(d.ip(), 0x401000);
    }
}
