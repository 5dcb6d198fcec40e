//! Linux's register sets as x64dbg's `REGDUMP` (`specs/notes/record-notes.md` section 2,
//! `specs/notes/x64dbg-notes.md` section 8): a pure function over the `user_regs_struct`
//! values and the bytes of the `NT_X86_XSTATE` register set, so that it runs, and is
//! property-tested, on any platform.

// Offsets are constants of the REGDUMP layout (below 1376) plus field offsets; the loops
// run over fixed small ranges. Nothing here can overflow.
#![allow(clippy::arithmetic_side_effects)]

use trac_x64dbg::{Arch, RegDump};

/// The general registers as `PTRACE_GETREGS` returns them (`user_regs_struct` of
/// `<sys/user.h>`, same names). `eflags` has the trap flag hidden by the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct UserRegs {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rax: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    /// The system call number at a system-call stop, else `u64::MAX` (−1).
    pub orig_rax: u64,
    pub rip: u64,
    pub cs: u64,
    pub eflags: u64,
    pub rsp: u64,
    pub ss: u64,
    /// The fs segment's base (thread-local storage on x86-64 Linux).
    pub fs_base: u64,
    /// The gs segment's base.
    pub gs_base: u64,
    pub ds: u64,
    pub es: u64,
    pub fs: u64,
    pub gs: u64,
}

impl UserRegs {
    /// General register `i` in encoding order (0 = rax, 1 = rcx, 2 = rdx, 3 = rbx, 4 = rsp,
    /// 5 = rbp, 6 = rsi, 7 = rdi, 8..=15 = r8..r15), as x64dbg numbers them; 0 past 15.
    #[must_use]
    pub fn gpr(&self, i: usize) -> u64 {
        match i {
            0 => self.rax,
            1 => self.rcx,
            2 => self.rdx,
            3 => self.rbx,
            4 => self.rsp,
            5 => self.rbp,
            6 => self.rsi,
            7 => self.rdi,
            8 => self.r8,
            9 => self.r9,
            10 => self.r10,
            11 => self.r11,
            12 => self.r12,
            13 => self.r13,
            14 => self.r14,
            15 => self.r15,
            _ => 0,
        }
    }
}

/// The debug registers x64dbg stores: dr0, dr1, dr2, dr3, dr6, dr7.
pub type DebugRegs = [u64; 6];

/// Byte offsets in the stored x64 `REGDUMP` (x64dbg-notes.md section 8.2).
mod at {
    pub const SEGMENTS: usize = 0x90;
    pub const DEBUG: usize = 0xa0;
    pub const REGISTER_AREA: usize = 0xd0;
    pub const X87FPU: usize = 0x120;
    pub const MXCSR: usize = 0x13c;
    pub const XMM: usize = 0x140;
    pub const YMM: usize = 0x240;
    pub const FLAGS: usize = 0x440;
    pub const X87_REGISTERS: usize = 0x44c;
    pub const MMX: usize = 0x4f0;
    pub const MXCSR_FIELDS: usize = 0x530;
    pub const STATUS_FIELDS: usize = 0x540;
    pub const CONTROL_FIELDS: usize = 0x550;
    /// The stored dump: 172 words of 8 bytes.
    pub const END: usize = 1376;
}

/// Offsets in the XSAVE area (the `NT_X86_XSTATE` register set; its first 512 bytes are
/// the FXSAVE image): Intel SDM vol. 1 section 13.4 and 13.5.
mod xsave {
    pub const FCW: usize = 0;
    pub const FSW: usize = 2;
    pub const FTW: usize = 4;
    pub const FIP: usize = 8;
    pub const FCS: usize = 12;
    pub const FDP: usize = 16;
    pub const FDS: usize = 20;
    pub const MXCSR: usize = 24;
    pub const ST: usize = 32;
    pub const XMM: usize = 160;
    /// `XSTATE_BV` in the XSAVE header.
    pub const XSTATE_BV: usize = 512;
    /// The upper halves of YMM0..15 (component 2, standard format).
    pub const YMM_HI: usize = 576;
    /// Bit of `XSTATE_BV`: the AVX upper halves are not in their initial state (zeros).
    pub const AVX: u64 = 1 << 2;
}

/// `N` bytes of `src` from `off`, zeros where `src` is shorter.
fn bytes<const N: usize>(src: &[u8], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = src.get(off..) {
        let n = s.len().min(N);
        if let (Some(o), Some(s)) = (out.get_mut(..n), s.get(..n)) {
            o.copy_from_slice(s);
        }
    }
    out
}

fn u16_at(src: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(bytes(src, off))
}

fn u32_at(src: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(bytes(src, off))
}

fn u64_at(src: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(bytes(src, off))
}

/// Copies `b` into `img` at `off` (what passes the end is dropped).
fn put(img: &mut [u8], off: usize, b: &[u8]) {
    if let Some(dst) = img.get_mut(off..) {
        let n = dst.len().min(b.len());
        if let (Some(d), Some(b)) = (dst.get_mut(..n), b.get(..n)) {
            d.copy_from_slice(b);
        }
    }
}

/// Bits of `v` as one-byte booleans, in the order given.
fn bools<const N: usize>(v: u32, bits: [u32; N]) -> [u8; N] {
    bits.map(|b| u8::from(v >> b & 1 == 1))
}

/// The full x87 tag of physical register `i` from the abridged FXSAVE tag and its value,
/// as TitanEngine's `FxsaveToFsaveTagWord` rebuilds it: 0 valid, 1 zero, 2 special, 3 empty.
fn full_tag(abridged: u8, i: usize, value: &[u8; 10]) -> u16 {
    if abridged >> i & 1 == 0 {
        return 3;
    }
    let exponent = u16::from_le_bytes([value[8], value[9]]) & 0x7fff;
    let mantissa = u64::from_le_bytes(bytes(value, 0));
    match exponent {
        0x7fff => 2,
        0 if mantissa == 0 => 1,
        0 => 2,
        _ if mantissa >> 63 == 0 => 2,
        _ => 0,
    }
}

/// The `REGDUMP` of one thread: `regs` from `PTRACE_GETREGS`, `xstate` the bytes of the
/// `NT_X86_XSTATE` register set (any length: the parts it lacks read as zeros, an empty
/// slice gives zeroed x87/SSE/AVX words), `debug` the debug registers.
///
/// Words the format has and Linux does not give (`Cr0NpxState`, `lastError`, padding) are
/// zero; the derived words (`flags`, `x87FPURegisters`, `mmx`, the `*Fields` structs, the
/// copy of XMM in `YmmRegisters[i].Low`) are computed as x64dbg computes them.
#[must_use]
pub fn regdump(regs: &UserRegs, xstate: &[u8], debug: &DebugRegs) -> RegDump {
    let mut img = [0u8; at::END];
    for i in 0..16 {
        put(&mut img, 8 * i, &regs.gpr(i).to_le_bytes());
    }
    put(&mut img, 0x80, &regs.rip.to_le_bytes());
    put(&mut img, 0x88, &regs.eflags.to_le_bytes());
    // Selectors are 16 bits: the truncations are the values.
    let segments = [regs.gs, regs.fs, regs.es, regs.ds, regs.cs, regs.ss];
    for (i, s) in segments.iter().enumerate() {
        put(&mut img, at::SEGMENTS + 2 * i, &(*s as u16).to_le_bytes());
    }
    for (i, d) in debug.iter().enumerate() {
        put(&mut img, at::DEBUG + 8 * i, &d.to_le_bytes());
    }

    // x87: ST(0..7) in stack order, 10 bytes each out of 16-byte FXSAVE slots.
    let st: [[u8; 10]; 8] = core::array::from_fn(|i| bytes(xstate, xsave::ST + 16 * i));
    for (i, v) in st.iter().enumerate() {
        put(&mut img, at::REGISTER_AREA + 10 * i, v);
    }
    let control = u16_at(xstate, xsave::FCW);
    let status = u16_at(xstate, xsave::FSW);
    let abridged = bytes::<1>(xstate, xsave::FTW)[0];
    let top = usize::from(status >> 11 & 7);
    // Physical register R_i is ST((i - TOP) mod 8).
    let physical: [[u8; 10]; 8] =
        core::array::from_fn(|i| st.get((i + 8 - top) % 8).copied().unwrap_or_default());
    let tag = physical
        .iter()
        .enumerate()
        .fold(0u16, |t, (i, v)| t | full_tag(abridged, i, v) << (2 * i));
    put(&mut img, at::X87FPU, &control.to_le_bytes());
    put(&mut img, at::X87FPU + 2, &status.to_le_bytes());
    put(&mut img, at::X87FPU + 4, &tag.to_le_bytes());
    // The FPU instruction and data pointers, split offset/selector as TitanEngine does.
    put(
        &mut img,
        at::X87FPU + 8,
        &u32_at(xstate, xsave::FIP).to_le_bytes(),
    );
    put(
        &mut img,
        at::X87FPU + 12,
        &u32::from(u16_at(xstate, xsave::FCS)).to_le_bytes(),
    );
    put(
        &mut img,
        at::X87FPU + 16,
        &u32_at(xstate, xsave::FDP).to_le_bytes(),
    );
    put(
        &mut img,
        at::X87FPU + 20,
        &u32::from(u16_at(xstate, xsave::FDS)).to_le_bytes(),
    );
    let mxcsr = u32_at(xstate, xsave::MXCSR);
    put(&mut img, at::MXCSR, &mxcsr.to_le_bytes());

    // SSE and AVX: XMM i, then YMM i as (XMM i, upper half).
    let avx = u64_at(xstate, xsave::XSTATE_BV) & xsave::AVX != 0;
    for i in 0..16 {
        let xmm: [u8; 16] = bytes(xstate, xsave::XMM + 16 * i);
        put(&mut img, at::XMM + 16 * i, &xmm);
        put(&mut img, at::YMM + 32 * i, &xmm);
        if avx {
            let hi: [u8; 16] = bytes(xstate, xsave::YMM_HI + 16 * i);
            put(&mut img, at::YMM + 32 * i + 16, &hi);
        }
    }

    // The derived structs.
    let flags = bools(regs.eflags as u32, [0, 2, 4, 6, 7, 8, 9, 10, 11]);
    put(&mut img, at::FLAGS, &flags);
    for (i, data) in physical.iter().enumerate() {
        let o = at::X87_REGISTERS + 20 * i;
        put(&mut img, o, data);
        put(
            &mut img,
            o + 12,
            &(((i + 8 - top) % 8) as i32).to_le_bytes(),
        );
        put(
            &mut img,
            o + 16,
            &i32::from(tag >> (2 * i) & 3).to_le_bytes(),
        );
        put(&mut img, at::MMX + 8 * i, &data[..8]);
    }
    // FZ PM UM OM ZM IM DM DAZ PE UE OE ZE DE IE, then RC.
    let mx = bools(mxcsr, [15, 12, 11, 10, 9, 7, 8, 6, 5, 4, 3, 2, 1, 0]);
    put(&mut img, at::MXCSR_FIELDS, &mx);
    put(
        &mut img,
        at::MXCSR_FIELDS + 14,
        &((mxcsr >> 13 & 3) as u16).to_le_bytes(),
    );
    // B C3 C2 C1 C0 ES SF P U O Z D I, then TOP.
    let sw = bools(
        u32::from(status),
        [15, 14, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0],
    );
    put(&mut img, at::STATUS_FIELDS, &sw);
    put(
        &mut img,
        at::STATUS_FIELDS + 14,
        &(top as u16).to_le_bytes(),
    );
    // IC IEM PM UM OM ZM DM IM, then RC and PC.
    let cw = bools(u32::from(control), [12, 7, 5, 4, 3, 2, 1, 0]);
    put(&mut img, at::CONTROL_FIELDS, &cw);
    put(
        &mut img,
        at::CONTROL_FIELDS + 8,
        &(control >> 10 & 3).to_le_bytes(),
    );
    put(
        &mut img,
        at::CONTROL_FIELDS + 10,
        &(control >> 8 & 3).to_le_bytes(),
    );

    let mut words = [0u64; at::END / 8];
    for (w, chunk) in words.iter_mut().zip(img.chunks_exact(8)) {
        *w = u64_at(chunk, 0);
    }
    RegDump::from_words(Arch::X64, &words)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing, clippy::unwrap_used)]
    use super::*;
    use quickcheck::quickcheck;
    use trac_x64dbg::Segment;

    fn sample_regs() -> UserRegs {
        UserRegs {
            rax: 1,
            rcx: 2,
            rdx: 3,
            rbx: 4,
            rsp: 0x7ffc_0000_1000,
            rbp: 6,
            rsi: 7,
            rdi: 8,
            r8: 9,
            r15: 16,
            rip: 0x40_1000,
            eflags: 0x246,
            cs: 0x33,
            ss: 0x2b,
            fs_base: 0x4c_0380,
            ..UserRegs::default()
        }
    }

    /// An FXSAVE image as Linux starts a process: control word 0x37f, MXCSR 0x1f80, all
    /// registers empty, plus the given XSTATE_BV and YMM0's upper half.
    fn sample_xstate(avx: bool) -> Vec<u8> {
        let mut x = vec![0u8; 832];
        x[0..2].copy_from_slice(&0x37fu16.to_le_bytes());
        x[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
        x[160..176].copy_from_slice(&0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00u128.to_le_bytes());
        x[512] = if avx { 7 } else { 3 };
        x[576..592].copy_from_slice(&[0xab; 16]);
        x
    }

    #[test]
    fn the_dump_has_linux_values_in_x64dbg_places() {
        let d = regdump(&sample_regs(), &sample_xstate(true), &[0; 6]);
        assert_eq!(d.words().len(), 172);
        assert_eq!(d.cax(), 1);
        assert_eq!(d.ccx(), 2);
        assert_eq!(d.cbx(), 4);
        assert_eq!(d.sp(), 0x7ffc_0000_1000);
        assert_eq!(d.word(15), 16);
        assert_eq!(d.ip(), 0x40_1000);
        assert_eq!(d.flags(), 0x246);
        assert_eq!(d.segment(Segment::Cs), 0x33);
        assert_eq!(d.segment(Segment::Ss), 0x2b);
        // Bools c, p, a, z, s, t, i, d, o of 0x246: p, z, i.
        assert_eq!(
            d.flag_bools(),
            [false, true, false, true, false, false, true, false, false]
        );
        assert_eq!(d.mxcsr(), 0x1f80);
        let fpu = d.x87_fpu();
        assert_eq!(fpu.control_word, 0x37f);
        assert_eq!(fpu.tag_word, 0xffff, "all empty");
        assert_eq!(d.x87_register(0).tag, 3);
        assert_eq!(d.xmm(0), 0x1122_3344_5566_7788_99aa_bbcc_ddee_ff00);
        let ymm = d.ymm(0);
        assert_eq!(&ymm[..16], &d.xmm(0).to_le_bytes());
        assert_eq!(&ymm[16..], &[0xab; 16]);
        // Without the AVX bit the upper halves are in their initial state: zero.
        let d = regdump(&sample_regs(), &sample_xstate(false), &[0; 6]);
        assert_eq!(&d.ymm(0)[16..], &[0; 16]);
        // MXCSR 0x1f80: every mask bit (IM DM ZM OM UM PM) set, FZ clear.
        let named = trac_x64dbg::register_fields(Arch::X64);
        let field = |n: &str| d.field(named.iter().find(|f| f.name == n).unwrap());
        assert_eq!(field("MxCsrFields.PM"), [1]);
        assert_eq!(field("MxCsrFields.FZ"), [0]);
        assert_eq!(field("x87ControlWordFields.PC"), [3, 0]);
        assert_eq!(field("x87ControlWordFields.IM"), [1]);
    }

    #[test]
    fn tags_are_rebuilt_from_the_abridged_word() {
        let mut x = sample_xstate(false);
        // TOP = 7, one value pushed: ST(0) = 1.0 (exponent 0x3fff, integer bit set), which
        // is physical register 7; ST(1) holds +0, physical 0.
        x[2..4].copy_from_slice(&(7u16 << 11).to_le_bytes());
        x[4] = 0b1000_0001;
        x[32 + 7] = 0x80;
        x[32 + 8..32 + 10].copy_from_slice(&0x3fffu16.to_le_bytes());
        let d = regdump(&sample_regs(), &x, &[0; 6]);
        assert_eq!(d.st(0)[9], 0x3f);
        assert_eq!(d.x87_register(7).tag, 0, "valid");
        assert_eq!(d.x87_register(7).st_value, 0);
        assert_eq!(d.x87_register(0).tag, 1, "zero");
        assert_eq!(d.x87_register(0).st_value, 1);
        assert_eq!(d.x87_register(3).tag, 3, "empty");
        assert_eq!(d.x87_fpu().tag_word, 0x3ffd);
        assert_eq!(d.mmx(7), 0x8000_0000_0000_0000);
    }

    quickcheck! {
        /// Any bytes as the register set, of any length: no panic, and the parts it lacks
        /// read as zeros.
        fn any_xstate_bytes_give_a_dump(bytes: Vec<u8>, rax: u64, eflags: u64) -> bool {
            let regs = UserRegs { rax, eflags, ..UserRegs::default() };
            let d = regdump(&regs, &bytes, &[0; 6]);
            let short_ok = bytes.len() > 160 || d.xmm(0) == 0;
            d.cax() == rax && d.flags() == eflags && short_ok
        }
    }
}
