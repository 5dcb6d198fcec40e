//! The registers as GDB sees them: the wire layout of `i386:x86-64` (amd64) and `i386`
//! (what gdbserver sends on GNU/Linux: core, sse, linux, for amd64 segments, and avx), its
//! target description XML, and the `g` packet's bytes made from a trace's named
//! registers (`tracekit state`'s names), `xx` for every byte the trace does not have.

use std::fmt::Write as _;

use trace_registry::steps::{Isa, NamedReg, RegValue};

/// Where a wire register's value comes from in a trace's named registers.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// The first of these names that the trace has.
    Named(&'static [&'static str]),
    /// The register of this name (st0–st7: GDB's names are the trace's).
    Same(&'static str),
    /// Nothing in any trace (`fop`, `orig_rax`, `fs_base`): unavailable.
    None,
}

/// One register on the wire.
#[derive(Clone, Copy, Debug)]
struct WireReg {
    name: &'static str,
    bytes: usize,
    /// The XML type.
    ty: &'static str,
    /// The XML group, where GDB's feature files give one.
    group: Option<&'static str>,
    /// The feature it belongs to (features are contiguous).
    feature: &'static str,
    source: Source,
}

const CORE: &str = "org.gnu.gdb.i386.core";
const SSE: &str = "org.gnu.gdb.i386.sse";
const LINUX: &str = "org.gnu.gdb.i386.linux";
const SEGMENTS: &str = "org.gnu.gdb.i386.segments";
const AVX: &str = "org.gnu.gdb.i386.avx";

/// A register of the core feature taken from one of `names`.
const fn core(
    name: &'static str,
    bytes: usize,
    ty: &'static str,
    names: &'static [&'static str],
) -> WireReg {
    WireReg {
        name,
        bytes,
        ty,
        group: None,
        feature: CORE,
        source: Source::Named(names),
    }
}

/// An x87 control register (`fctrl`…`fop`).
const fn fpu(name: &'static str, names: &'static [&'static str]) -> WireReg {
    WireReg {
        name,
        bytes: 4,
        ty: "int",
        group: Some("float"),
        feature: CORE,
        source: Source::Named(names),
    }
}

/// st0–st7, by GDB's name, which x64dbg's and the recorder's traces use too.
const fn st(name: &'static str) -> WireReg {
    WireReg {
        name,
        bytes: 10,
        ty: "i387_ext",
        group: None,
        feature: CORE,
        source: Source::Same(name),
    }
}

/// The upper half of a YMM register: GDB's name, or x64dbg's `ymmK.High`.
const fn ymmh(name: &'static str, names: &'static [&'static str]) -> WireReg {
    WireReg {
        name,
        bytes: 16,
        ty: "uint128",
        group: None,
        feature: AVX,
        source: Source::Named(names),
    }
}

/// An SSE register.
const fn xmm(name: &'static str, names: &'static [&'static str]) -> WireReg {
    WireReg {
        name,
        bytes: 16,
        ty: "vec128",
        group: None,
        feature: SSE,
        source: Source::Named(names),
    }
}

const MXCSR: &[&str] = &["mxcsr"];
const FCTRL: &[&str] = &["fctrl", "fcw"];
const FSTAT: &[&str] = &["fstat", "fsw"];
const FTAG: &[&str] = &["ftag", "ftw"];
const FISEG: &[&str] = &["fiseg", "fcs"];
const FIOFF: &[&str] = &["fioff", "fip"];
const FOSEG: &[&str] = &["foseg", "fds"];
const FOOFF: &[&str] = &["fooff", "fdp"];
const FLAGS: &[&str] = &["eflags", "rflags", "flags"];

/// The amd64 layout (wire numbers 0–75).
const AMD64: &[WireReg] = &[
    core("rax", 8, "int64", &["rax"]),
    core("rbx", 8, "int64", &["rbx"]),
    core("rcx", 8, "int64", &["rcx"]),
    core("rdx", 8, "int64", &["rdx"]),
    core("rsi", 8, "int64", &["rsi"]),
    core("rdi", 8, "int64", &["rdi"]),
    core("rbp", 8, "data_ptr", &["rbp"]),
    core("rsp", 8, "data_ptr", &["rsp"]),
    core("r8", 8, "int64", &["r8"]),
    core("r9", 8, "int64", &["r9"]),
    core("r10", 8, "int64", &["r10"]),
    core("r11", 8, "int64", &["r11"]),
    core("r12", 8, "int64", &["r12"]),
    core("r13", 8, "int64", &["r13"]),
    core("r14", 8, "int64", &["r14"]),
    core("r15", 8, "int64", &["r15"]),
    core("rip", 8, "code_ptr", &["rip", "pc"]),
    core("eflags", 4, "i386_eflags", FLAGS),
    core("cs", 4, "int32", &["cs"]),
    core("ss", 4, "int32", &["ss"]),
    core("ds", 4, "int32", &["ds"]),
    core("es", 4, "int32", &["es"]),
    core("fs", 4, "int32", &["fs"]),
    core("gs", 4, "int32", &["gs"]),
    st("st0"),
    st("st1"),
    st("st2"),
    st("st3"),
    st("st4"),
    st("st5"),
    st("st6"),
    st("st7"),
    fpu("fctrl", FCTRL),
    fpu("fstat", FSTAT),
    fpu("ftag", FTAG),
    fpu("fiseg", FISEG),
    fpu("fioff", FIOFF),
    fpu("foseg", FOSEG),
    fpu("fooff", FOOFF),
    fpu("fop", &["fop"]),
    xmm("xmm0", &["xmm0"]),
    xmm("xmm1", &["xmm1"]),
    xmm("xmm2", &["xmm2"]),
    xmm("xmm3", &["xmm3"]),
    xmm("xmm4", &["xmm4"]),
    xmm("xmm5", &["xmm5"]),
    xmm("xmm6", &["xmm6"]),
    xmm("xmm7", &["xmm7"]),
    xmm("xmm8", &["xmm8"]),
    xmm("xmm9", &["xmm9"]),
    xmm("xmm10", &["xmm10"]),
    xmm("xmm11", &["xmm11"]),
    xmm("xmm12", &["xmm12"]),
    xmm("xmm13", &["xmm13"]),
    xmm("xmm14", &["xmm14"]),
    xmm("xmm15", &["xmm15"]),
    WireReg {
        name: "mxcsr",
        bytes: 4,
        ty: "i386_mxcsr",
        group: Some("vector"),
        feature: SSE,
        source: Source::Named(MXCSR),
    },
    WireReg {
        name: "orig_rax",
        bytes: 8,
        ty: "int",
        group: None,
        feature: LINUX,
        source: Source::None,
    },
    WireReg {
        name: "fs_base",
        bytes: 8,
        ty: "int",
        group: None,
        feature: SEGMENTS,
        source: Source::Named(&["fs_base"]),
    },
    WireReg {
        name: "gs_base",
        bytes: 8,
        ty: "int",
        group: None,
        feature: SEGMENTS,
        source: Source::Named(&["gs_base"]),
    },
    ymmh("ymm0h", &["ymm0h", "ymm0.High"]),
    ymmh("ymm1h", &["ymm1h", "ymm1.High"]),
    ymmh("ymm2h", &["ymm2h", "ymm2.High"]),
    ymmh("ymm3h", &["ymm3h", "ymm3.High"]),
    ymmh("ymm4h", &["ymm4h", "ymm4.High"]),
    ymmh("ymm5h", &["ymm5h", "ymm5.High"]),
    ymmh("ymm6h", &["ymm6h", "ymm6.High"]),
    ymmh("ymm7h", &["ymm7h", "ymm7.High"]),
    ymmh("ymm8h", &["ymm8h", "ymm8.High"]),
    ymmh("ymm9h", &["ymm9h", "ymm9.High"]),
    ymmh("ymm10h", &["ymm10h", "ymm10.High"]),
    ymmh("ymm11h", &["ymm11h", "ymm11.High"]),
    ymmh("ymm12h", &["ymm12h", "ymm12.High"]),
    ymmh("ymm13h", &["ymm13h", "ymm13.High"]),
    ymmh("ymm14h", &["ymm14h", "ymm14.High"]),
    ymmh("ymm15h", &["ymm15h", "ymm15.High"]),
];

/// The i386 layout (wire numbers 0–49; no segments feature, which GDB 13 rejects for
/// 32-bit GNU/Linux).
const I386: &[WireReg] = &[
    core("eax", 4, "int32", &["eax"]),
    core("ecx", 4, "int32", &["ecx"]),
    core("edx", 4, "int32", &["edx"]),
    core("ebx", 4, "int32", &["ebx"]),
    core("esp", 4, "data_ptr", &["esp"]),
    core("ebp", 4, "data_ptr", &["ebp"]),
    core("esi", 4, "int32", &["esi"]),
    core("edi", 4, "int32", &["edi"]),
    core("eip", 4, "code_ptr", &["eip", "pc"]),
    core("eflags", 4, "i386_eflags", FLAGS),
    core("cs", 4, "int32", &["cs"]),
    core("ss", 4, "int32", &["ss"]),
    core("ds", 4, "int32", &["ds"]),
    core("es", 4, "int32", &["es"]),
    core("fs", 4, "int32", &["fs"]),
    core("gs", 4, "int32", &["gs"]),
    st("st0"),
    st("st1"),
    st("st2"),
    st("st3"),
    st("st4"),
    st("st5"),
    st("st6"),
    st("st7"),
    fpu("fctrl", FCTRL),
    fpu("fstat", FSTAT),
    fpu("ftag", FTAG),
    fpu("fiseg", FISEG),
    fpu("fioff", FIOFF),
    fpu("foseg", FOSEG),
    fpu("fooff", FOOFF),
    fpu("fop", &["fop"]),
    xmm("xmm0", &["xmm0"]),
    xmm("xmm1", &["xmm1"]),
    xmm("xmm2", &["xmm2"]),
    xmm("xmm3", &["xmm3"]),
    xmm("xmm4", &["xmm4"]),
    xmm("xmm5", &["xmm5"]),
    xmm("xmm6", &["xmm6"]),
    xmm("xmm7", &["xmm7"]),
    WireReg {
        name: "mxcsr",
        bytes: 4,
        ty: "i386_mxcsr",
        group: Some("vector"),
        feature: SSE,
        source: Source::Named(MXCSR),
    },
    WireReg {
        name: "orig_eax",
        bytes: 4,
        ty: "int",
        group: None,
        feature: LINUX,
        source: Source::None,
    },
    ymmh("ymm0h", &["ymm0h", "ymm0.High"]),
    ymmh("ymm1h", &["ymm1h", "ymm1.High"]),
    ymmh("ymm2h", &["ymm2h", "ymm2.High"]),
    ymmh("ymm3h", &["ymm3h", "ymm3.High"]),
    ymmh("ymm4h", &["ymm4h", "ymm4.High"]),
    ymmh("ymm5h", &["ymm5h", "ymm5.High"]),
    ymmh("ymm6h", &["ymm6h", "ymm6.High"]),
    ymmh("ymm7h", &["ymm7h", "ymm7.High"]),
];

/// The register layout GDB is told of: amd64 or i386.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    regs: &'static [WireReg],
    amd64: bool,
}

impl Layout {
    /// The layout of a trace of `isa`, or `None` for an instruction set GDB is not served
    /// (only x86 and x86-64 are).
    #[must_use]
    pub fn of(isa: Isa) -> Option<Layout> {
        match isa {
            Isa::X64 => Some(Layout {
                regs: AMD64,
                amd64: true,
            }),
            Isa::X86 => Some(Layout {
                regs: I386,
                amd64: false,
            }),
            _ => None,
        }
    }

    /// The size of a `g` packet's register block, in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.regs.iter().map(|r| r.bytes).sum()
    }

    /// Whether the layout has no registers (never: for clippy's `len_without_is_empty`).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.regs.is_empty()
    }

    /// The register block of `regs` (a trace's named registers), `None` for each byte
    /// the trace does not have.
    #[must_use]
    pub fn block(&self, regs: &[NamedReg]) -> Vec<Option<u8>> {
        let mut out = Vec::with_capacity(self.len());
        for r in self.regs {
            let value = match r.source {
                Source::Named(names) => names
                    .iter()
                    .find_map(|n| regs.iter().find(|x| x.name == *n))
                    .map(|x| bytes_of(&x.value)),
                Source::Same(name) => regs
                    .iter()
                    .find(|x| x.name == name)
                    .map(|x| bytes_of(&x.value)),
                Source::None => None,
            };
            for b in 0..r.bytes {
                out.push(value.as_ref().and_then(|v| v.get(b).copied()).or_else(|| {
                    // A word narrower than the wire register (a 32-bit eflags in 8
                    // bytes) is zero-extended; a missing register stays unknown.
                    value.as_ref().map(|_| 0)
                }));
            }
        }
        out
    }

    /// The target description: `i386:x86-64` or `i386`, GNU/Linux, every register of the
    /// layout in wire order.
    #[must_use]
    pub fn xml(&self) -> String {
        let arch = if self.amd64 { "i386:x86-64" } else { "i386" };
        let mut x = String::from(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target version=\"1.0\">\n",
        );
        let _ = writeln!(x, "<architecture>{arch}</architecture>");
        x.push_str("<osabi>GNU/Linux</osabi>\n");
        let mut feature = "";
        for r in self.regs {
            if r.feature != feature {
                if !feature.is_empty() {
                    x.push_str("</feature>\n");
                }
                feature = r.feature;
                let _ = writeln!(x, "<feature name=\"{feature}\">");
                x.push_str(match feature {
                    CORE => CORE_TYPES,
                    SSE => SSE_TYPES,
                    _ => "",
                });
            }
            let _ = write!(
                x,
                "<reg name=\"{}\" bitsize=\"{}\" type=\"{}\"",
                r.name,
                r.bytes.saturating_mul(8),
                r.ty
            );
            if let Some(g) = r.group {
                let _ = write!(x, " group=\"{g}\"");
            }
            x.push_str("/>\n");
        }
        x.push_str("</feature>\n</target>\n");
        x
    }
}

/// A register value as little-endian bytes (a word as 8).
fn bytes_of(v: &RegValue) -> Vec<u8> {
    match v {
        RegValue::Word(w) => w.to_le_bytes().to_vec(),
        RegValue::Wide(b) => b.to_vec(),
    }
}

/// The types of GDB's `64bit-core.xml` / `32bit-core.xml`.
const CORE_TYPES: &str = r#"<flags id="i386_eflags" size="4">
<field name="CF" start="0" end="0"/>
<field name="" start="1" end="1"/>
<field name="PF" start="2" end="2"/>
<field name="AF" start="4" end="4"/>
<field name="ZF" start="6" end="6"/>
<field name="SF" start="7" end="7"/>
<field name="TF" start="8" end="8"/>
<field name="IF" start="9" end="9"/>
<field name="DF" start="10" end="10"/>
<field name="OF" start="11" end="11"/>
<field name="NT" start="14" end="14"/>
<field name="RF" start="16" end="16"/>
<field name="VM" start="17" end="17"/>
<field name="AC" start="18" end="18"/>
<field name="VIF" start="19" end="19"/>
<field name="VIP" start="20" end="20"/>
<field name="ID" start="21" end="21"/>
</flags>
"#;

/// The types of GDB's `64bit-sse.xml` (without the bfloat16 and half vectors that older
/// GDBs reject).
const SSE_TYPES: &str = r#"<vector id="v4f" type="ieee_single" count="4"/>
<vector id="v2d" type="ieee_double" count="2"/>
<vector id="v16i8" type="int8" count="16"/>
<vector id="v8i16" type="int16" count="8"/>
<vector id="v4i32" type="int32" count="4"/>
<vector id="v2i64" type="int64" count="2"/>
<union id="vec128">
<field name="v4_float" type="v4f"/>
<field name="v2_double" type="v2d"/>
<field name="v16_int8" type="v16i8"/>
<field name="v8_int16" type="v8i16"/>
<field name="v4_int32" type="v4i32"/>
<field name="v2_int64" type="v2i64"/>
<field name="uint128" type="uint128"/>
</union>
<flags id="i386_mxcsr" size="4">
<field name="IE" start="0" end="0"/>
<field name="DE" start="1" end="1"/>
<field name="ZE" start="2" end="2"/>
<field name="OE" start="3" end="3"/>
<field name="UE" start="4" end="4"/>
<field name="PE" start="5" end="5"/>
<field name="DAZ" start="6" end="6"/>
<field name="IM" start="7" end="7"/>
<field name="DM" start="8" end="8"/>
<field name="ZM" start="9" end="9"/>
<field name="OM" start="10" end="10"/>
<field name="UM" start="11" end="11"/>
<field name="PM" start="12" end="12"/>
<field name="FZ" start="15" end="15"/>
</flags>
"#;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_gdb_wire_layouts() {
        // gdbserver's amd64 and i386 layouts with AVX (notes §3).
        assert_eq!(Layout::of(Isa::X64).unwrap().len(), 816);
        assert_eq!(Layout::of(Isa::X86).unwrap().len(), 440);
        assert!(Layout::of(Isa::Other).is_none());
    }

    #[test]
    fn block_takes_named_values_and_leaves_the_rest_unknown() {
        let l = Layout::of(Isa::X64).unwrap();
        let regs = vec![
            NamedReg {
                name: "rax".into(),
                value: RegValue::Word(0x1122),
            },
            NamedReg {
                name: "rflags".into(),
                value: RegValue::Word(0x202),
            },
        ];
        let b = l.block(&regs);
        assert_eq!(&b[..3], &[Some(0x22), Some(0x11), Some(0)]);
        assert_eq!(b[8], None);
        assert_eq!(&b[136..140], &[Some(2), Some(2), Some(0), Some(0)]);
        assert!(l.xml().contains("<architecture>i386:x86-64</architecture>"));
    }
}
