//! The register dump (`REGDUMP`) stored in traces, with named accessors
//! (`specs/notes/x64dbg-notes.md` section 8).
//!
//! The trace stores the `REGDUMP` as words of the trace's word size (172 × 8 bytes on x64,
//! 216 × 4 bytes on x86); [`RegDump`] keeps those words and reads named fields out of the
//! byte image they form. Some words are partly padding (uninitialised memory in x64dbg) or
//! derived from other fields (the `flags`, `x87FPURegisters`, `mmx` and `*Fields` structs,
//! the low halves of YMM): they are kept verbatim but are not CPU state.

// Byte offsets here come from the constant layout tables (all below 0x560) plus small
// field offsets; none of the arithmetic can overflow.
#![allow(clippy::arithmetic_side_effects)]

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
        let w = self.arch.word_size();
        let word = self.word(off / w);
        (word >> ((off % w) * 8)) as u8
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

/// A named field of the stored `REGDUMP`: byte offset, size, name.
type Field = (usize, usize, String);

fn fields(arch: Arch) -> Vec<Field> {
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
    f.push((l.register_area, 80, "RegisterArea".into()));
    let fpu: [(usize, usize, &str); 8] = [
        (0, 2, "ControlWord"),
        (2, 2, "StatusWord"),
        (4, 2, "TagWord"),
        (8, 4, "ErrorOffset"),
        (12, 4, "ErrorSelector"),
        (16, 4, "DataOffset"),
        (20, 4, "DataSelector"),
        (24, 4, "Cr0NpxState"),
    ];
    for (o, s, n) in fpu {
        f.push((l.x87fpu + o, s, format!("x87fpu.{n}")));
    }
    f.push((l.mxcsr, 4, "MxCsr".into()));
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

/// Every named field of the `REGDUMP` of `arch`, in dump order: the general registers,
/// `rip`/`eip` and the flags, segments, debug registers, the x87 area and control words,
/// MXCSR, XMM, YMM halves, the flag bits (`flags.c` …), the x87 registers, MMX, the fields
/// of MXCSR and the x87 status and control words, and `lastError`.
#[must_use]
pub fn register_fields(arch: Arch) -> Vec<RegisterField> {
    fields(arch)
        .into_iter()
        .map(|(offset, size, name)| RegisterField { offset, size, name })
        .collect()
}

/// One named field of the `REGDUMP`: see [`register_fields`] and [`RegDump::field`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterField {
    /// The byte offset in the stored dump.
    pub offset: usize,
    /// The size in bytes (1 for the flag bits, which x64dbg stores as one byte each).
    pub size: usize,
    /// x64dbg's name (`rax`, `xmm3`, `ymm0.High`, `flags.z`, `x87r2.data`, `lastError`).
    pub name: String,
}

impl RegDump {
    /// The bytes of field `f` (little-endian), zero-filled past the stored words.
    #[must_use]
    pub fn field(&self, f: &RegisterField) -> Vec<u8> {
        let w = self.arch.word_size();
        (f.offset..f.offset.saturating_add(f.size))
            .map(|byte| {
                let word = self.word(byte / w);
                // `byte % w` < 8: the shift stays in range.
                (word >> (8 * (byte % w))) as u8
            })
            .collect()
    }
}

/// The name of every stored word of `arch`, as `tracekit dump` prints register changes:
/// the register's name when the word is exactly one field (`rax`, `eip`, `dr7`, `mmx3`,
/// `lastError`), the field names joined by `|` when it packs several (`gs|fs|es|ds`,
/// `cs|ss`), and a byte range `[a..b]` when it holds part of a larger field
/// (`xmm0[0..8]`, `RegisterArea[8..16]`). Padding bytes are not named; a word of padding
/// only is `pad` with its byte range in the `REGDUMP` (`pad[188..192]`), so that every
/// name is different (a JSON object of register changes has no repeated key).
#[must_use]
pub fn word_names(arch: Arch) -> Vec<String> {
    let w = arch.word_size();
    let fields = fields(arch);
    (0..usize::from(arch.regdump_words()))
        .map(|i| {
            let start = i * w;
            let end = start + w;
            let mut parts: Vec<String> = Vec::new();
            for (o, s, n) in &fields {
                let fe = o + s;
                if fe <= start || *o >= end {
                    continue;
                }
                let a = start.max(*o) - o;
                let b = end.min(fe) - o;
                if a == 0 && b == *s {
                    parts.push(n.clone());
                } else {
                    parts.push(format!("{n}[{a}..{b}]"));
                }
            }
            if parts.is_empty() {
                format!("pad[{start}..{end}]")
            } else {
                parts.join("|")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_names_follow_the_notes_tables() {
        let n = word_names(Arch::X64);
        assert_eq!(n.len(), 172);
        assert_eq!(n[0], "rax");
        assert_eq!(n[4], "rsp");
        assert_eq!(n[16], "rip");
        assert_eq!(n[17], "rflags");
        assert_eq!(n[18], "gs|fs|es|ds");
        assert_eq!(n[19], "cs|ss");
        assert_eq!(n[20], "dr0");
        assert_eq!(n[25], "dr7");
        assert_eq!(n[36], "x87fpu.ControlWord|x87fpu.StatusWord|x87fpu.TagWord");
        assert_eq!(n[39], "x87fpu.Cr0NpxState|MxCsr");
        assert_eq!(n[40], "xmm0[0..8]");
        assert_eq!(n[71], "xmm15[8..16]");
        assert_eq!(n[72], "ymm0.Low[0..8]");
        assert_eq!(n[135], "ymm15.High[8..16]");
        assert!(n[137].starts_with("flags.o|x87r0.data[0..4]"));
        assert_eq!(n[157], "x87r7.tag");
        assert_eq!(n[158], "mmx0");
        assert_eq!(n[165], "mmx7");
        assert_eq!(
            n[171],
            "x87ControlWordFields.RC|x87ControlWordFields.PC|lastError"
        );
        let n = word_names(Arch::X86);
        assert_eq!(n.len(), 216);
        assert_eq!(n[8], "eip");
        assert_eq!(n[9], "eflags");
        assert_eq!(n[10], "gs|fs");
        assert_eq!(n[12], "cs|ss");
        assert_eq!(n[13], "dr0");
        assert_eq!(n[18], "dr7");
        assert_eq!(n[40], "x87fpu.TagWord");
        assert_eq!(n[46], "MxCsr");
        assert_eq!(n[47], "pad[188..192]");
        assert_eq!(n[48], "xmm0[0..4]");
        assert_eq!(n[80], "ymm0.Low[0..4]");
        assert_eq!(n[188], "mmx0[0..4]");
        assert_eq!(n[215], "lastError");
    }

    #[test]
    fn word_names_are_unique() {
        for arch in [Arch::X64, Arch::X86] {
            let names = word_names(arch);
            let mut seen = std::collections::HashSet::new();
            for n in &names {
                assert!(seen.insert(n.as_str()), "{arch}: {n} twice");
            }
            assert_eq!(seen.len(), usize::from(arch.regdump_words()));
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
