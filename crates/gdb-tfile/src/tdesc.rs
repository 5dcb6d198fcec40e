//! The target description (`tdesc` lines): GDB's `target.xml`, flattened. Its `<reg>`
//! elements in `regnum` order give the layout of a register block (the `g` packet: each
//! register `bitsize / 8` bytes, back to back), and its `<architecture>` the byte order
//! where that decides it (notes §5, §6.3, §7).

use std::collections::HashMap;

use trace_core::Offset;

use crate::error::Error;
use crate::limits;

/// Byte order of the target (the file does not record it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Endian {
    /// Little-endian (x86, the default).
    #[default]
    Little,
    /// Big-endian.
    Big,
}

/// One register of the description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Register {
    /// Its name, e.g. `rip`.
    pub name: String,
    /// Its size in bits.
    pub bitsize: u32,
    /// Its register number (explicit `regnum`, or one more than the previous register).
    pub regnum: u32,
    /// Its type name, e.g. `int64`, `code_ptr`, `vec128`.
    pub ty: String,
    /// Its byte offset in a register block.
    pub offset: usize,
}

impl Register {
    /// Its size in bytes (`bitsize` rounded up to bytes).
    #[must_use]
    pub fn size(&self) -> usize {
        (self.bitsize as usize).div_ceil(8)
    }
}

/// A parsed target description: architecture, OS ABI and the register layout.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TargetDescription {
    /// `<architecture>`, e.g. `i386:x86-64`.
    pub architecture: Option<String>,
    /// `<osabi>`, e.g. `GNU/Linux`.
    pub osabi: Option<String>,
    /// The registers in `g`-packet order (by `regnum`), with their block offsets.
    pub registers: Vec<Register>,
    by_name: HashMap<String, usize>,
}

impl TargetDescription {
    /// Parses the XML (a DOCTYPE line is allowed; includes are not resolved).
    ///
    /// # Errors
    ///
    /// [`Error::Tdesc`] at `offset` (where the `tdesc` lines start) if the XML is not
    /// well-formed, a `<reg>` lacks a name or has a bad `bitsize`/`regnum`, or there are too
    /// many registers.
    pub fn parse(xml: &str, offset: u64) -> Result<Self, Error> {
        let fail = |message: String| Error::Tdesc {
            offset: Offset(offset),
            message,
        };
        // gdbserver's descriptions start with a DOCTYPE line; entity expansion is bounded
        // by the node limit (real descriptions have a few hundred nodes).
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            nodes_limit: limits::MAX_TDESC_NODES,
        };
        let doc = roxmltree::Document::parse_with_options(xml, opts)
            .map_err(|e| fail(format!("bad XML: {e}")))?;
        let root = doc.root_element();
        if root.tag_name().name() != "target" {
            return Err(fail(format!(
                "root element is <{}>, not <target>",
                root.tag_name().name()
            )));
        }
        let mut td = TargetDescription::default();
        let mut next_regnum: u64 = 0;
        let mut regs: Vec<Register> = Vec::new();
        for node in root.descendants().filter(roxmltree::Node::is_element) {
            match node.tag_name().name() {
                "architecture" => td.architecture = node.text().map(|t| t.trim().to_owned()),
                "osabi" => td.osabi = node.text().map(|t| t.trim().to_owned()),
                "reg" => {
                    if regs.len() >= limits::MAX_REGISTERS {
                        return Err(fail(format!(
                            "more than {} registers",
                            limits::MAX_REGISTERS
                        )));
                    }
                    let name = node
                        .attribute("name")
                        .ok_or_else(|| fail("a <reg> has no name".into()))?;
                    let bitsize = node
                        .attribute("bitsize")
                        .and_then(|b| b.trim().parse::<u32>().ok())
                        .filter(|&b| b > 0 && b <= 1 << 16)
                        .ok_or_else(|| fail(format!("register {name} has a bad bitsize")))?;
                    let regnum = match node.attribute("regnum") {
                        Some(r) => r
                            .trim()
                            .parse::<u32>()
                            .map_err(|_| fail(format!("register {name} has a bad regnum")))?,
                        None => u32::try_from(next_regnum)
                            .map_err(|_| fail(format!("register {name}: regnum overflow")))?,
                    };
                    next_regnum = u64::from(regnum).saturating_add(1);
                    regs.push(Register {
                        name: name.to_owned(),
                        bitsize,
                        regnum,
                        ty: node.attribute("type").unwrap_or("int").to_owned(),
                        offset: 0,
                    });
                }
                _ => {}
            }
        }
        regs.sort_by_key(|r| r.regnum);
        let mut off = 0usize;
        for r in &mut regs {
            r.offset = off;
            off = off.saturating_add(r.size());
        }
        td.by_name = regs
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i))
            .collect();
        td.registers = regs;
        Ok(td)
    }

    /// The sum of the register sizes: the size of a `g` packet, which should equal the `R`
    /// line.
    #[must_use]
    pub fn block_size(&self) -> usize {
        self.registers
            .iter()
            .fold(0usize, |a, r| a.saturating_add(r.size()))
    }

    /// The register called `name`.
    #[must_use]
    pub fn register(&self, name: &str) -> Option<&Register> {
        self.registers.get(*self.by_name.get(name)?)
    }

    /// The program-counter register: `rip`, `eip`, `pc` or `pswa`, whichever exists.
    #[must_use]
    pub fn pc_register(&self) -> Option<&Register> {
        ["rip", "eip", "pc", "pswa"]
            .iter()
            .find_map(|n| self.register(n))
    }

    /// The byte order implied by the architecture, where the architecture decides it
    /// (`None` for bi-endian ones such as PowerPC, MIPS and ARM, or unknown ones).
    #[must_use]
    pub fn endian(&self) -> Option<Endian> {
        endian_of_architecture(self.architecture.as_deref()?)
    }

    /// Checks the layout against the `R` size: `Err` with a message saying how they differ.
    ///
    /// # Errors
    ///
    /// A human-readable explanation when the sizes differ.
    pub fn check_size(&self, register_size: u32) -> Result<(), String> {
        let sum = self.block_size();
        if sum == register_size as usize {
            Ok(())
        } else {
            Err(format!(
                "the {} registers of the target description take {sum} bytes ({sum:#x}), but the R line says {register_size} ({register_size:#x}); registers past the block are unavailable",
                self.registers.len()
            ))
        }
    }
}

/// The x86 targets [`x86_tdesc_xml`] describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum X86Target {
    /// x86-64: architecture `i386:x86-64`, 16 general registers, 16 XMM registers.
    Amd64,
    /// 32-bit x86: architecture `i386`, 8 general registers, 8 XMM registers.
    I386,
}

/// The `eflags` flag bits gdbserver's descriptions name (`i386_eflags`).
const EFLAGS_BITS: [(&str, u8); 17] = [
    ("CF", 0),
    ("", 1),
    ("PF", 2),
    ("AF", 4),
    ("ZF", 6),
    ("SF", 7),
    ("TF", 8),
    ("IF", 9),
    ("DF", 10),
    ("OF", 11),
    ("NT", 14),
    ("RF", 16),
    ("VM", 17),
    ("AC", 18),
    ("VIF", 19),
    ("VIP", 20),
    ("ID", 21),
];

/// The `mxcsr` flag bits (`i386_mxcsr`).
const MXCSR_BITS: [(&str, u8); 14] = [
    ("IE", 0),
    ("DE", 1),
    ("ZE", 2),
    ("OE", 3),
    ("UE", 4),
    ("PE", 5),
    ("DAZ", 6),
    ("IM", 7),
    ("DM", 8),
    ("ZM", 9),
    ("OM", 10),
    ("UM", 11),
    ("PM", 12),
    ("FZ", 15),
];

fn flags_xml(xml: &mut String, id: &str, bits: &[(&str, u8)]) {
    use std::fmt::Write as _;
    let _ = writeln!(xml, "    <flags id=\"{id}\" size=\"4\">");
    for (name, bit) in bits {
        let _ = writeln!(
            xml,
            "      <field name=\"{name}\" start=\"{bit}\" end=\"{bit}\" type=\"bool\"/>"
        );
    }
    xml.push_str("    </flags>\n");
}

/// A target description of an x86 target that GDB accepts with no executable loaded, in
/// the shape gdbserver sends (notes §5): the features `org.gnu.gdb.i386.core` (general
/// registers, the pc, `eflags`, the segment registers, x87 `st0`–`st7` and its control
/// registers), `org.gnu.gdb.i386.sse` (`xmm*`, `mxcsr`) and, with `avx`,
/// `org.gnu.gdb.i386.avx` (the upper halves `ymm*h`), with the types they use
/// (`i386_eflags`, `vec128`, `i386_mxcsr`). `regnum`s follow GDB's own numbering, so the
/// register block (the `g` packet) is the registers in that order, back to back:
/// [`TargetDescription::parse`] of the result gives the offsets, and its
/// [`TargetDescription::block_size`] the `R` size. No OS ABI is named.
#[must_use]
pub fn x86_tdesc_xml(target: X86Target, avx: bool) -> String {
    use std::fmt::Write as _;
    let (arch, gprs, ptrs, pc, bits, xmms): (_, &[&str], &[&str], _, _, _) = match target {
        X86Target::Amd64 => (
            "i386:x86-64",
            &[
                "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11",
                "r12", "r13", "r14", "r15",
            ],
            &["rbp", "rsp"],
            "rip",
            64,
            16,
        ),
        X86Target::I386 => (
            "i386",
            &["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"],
            &["esp", "ebp"],
            "eip",
            32,
            8,
        ),
    };
    let mut xml = String::with_capacity(8192);
    let _ = write!(
        xml,
        "\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target>\n  <architecture>{arch}</architecture>\n  <feature name=\"org.gnu.gdb.i386.core\">\n"
    );
    flags_xml(&mut xml, "i386_eflags", &EFLAGS_BITS);
    let mut regnum = 0u32;
    let mut reg = |xml: &mut String, name: &str, bitsize: u32, ty: &str, group: &str| {
        let _ = writeln!(
            xml,
            "    <reg name=\"{name}\" bitsize=\"{bitsize}\" type=\"{ty}\" regnum=\"{regnum}\"{group}/>"
        );
        regnum = regnum.saturating_add(1);
    };
    let int = if bits == 64 { "int64" } else { "int32" };
    for r in gprs {
        let ty = if ptrs.contains(r) { "data_ptr" } else { int };
        reg(&mut xml, r, bits, ty, "");
    }
    reg(&mut xml, pc, bits, "code_ptr", "");
    reg(&mut xml, "eflags", 32, "i386_eflags", "");
    for r in ["cs", "ss", "ds", "es", "fs", "gs"] {
        reg(&mut xml, r, 32, "int32", "");
    }
    for i in 0..8 {
        reg(&mut xml, &format!("st{i}"), 80, "i387_ext", "");
    }
    for r in [
        "fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop",
    ] {
        reg(&mut xml, r, 32, "int", " group=\"float\"");
    }
    xml.push_str("  </feature>\n  <feature name=\"org.gnu.gdb.i386.sse\">\n");
    for (id, ty, n) in [
        ("v4f", "ieee_single", 4),
        ("v2d", "ieee_double", 2),
        ("v16i8", "int8", 16),
        ("v8i16", "int16", 8),
        ("v4i32", "int32", 4),
        ("v2i64", "int64", 2),
    ] {
        let _ = writeln!(xml, "    <vector id=\"{id}\" type=\"{ty}\" count=\"{n}\"/>");
    }
    xml.push_str("    <union id=\"vec128\">\n");
    for (name, ty) in [
        ("v4_float", "v4f"),
        ("v2_double", "v2d"),
        ("v16_int8", "v16i8"),
        ("v8_int16", "v8i16"),
        ("v4_int32", "v4i32"),
        ("v2_int64", "v2i64"),
        ("uint128", "uint128"),
    ] {
        let _ = writeln!(xml, "      <field name=\"{name}\" type=\"{ty}\"/>");
    }
    xml.push_str("    </union>\n");
    flags_xml(&mut xml, "i386_mxcsr", &MXCSR_BITS);
    for i in 0..xmms {
        reg(&mut xml, &format!("xmm{i}"), 128, "vec128", "");
    }
    reg(&mut xml, "mxcsr", 32, "i386_mxcsr", " group=\"vector\"");
    xml.push_str("  </feature>\n");
    if avx {
        xml.push_str("  <feature name=\"org.gnu.gdb.i386.avx\">\n");
        for i in 0..xmms {
            reg(&mut xml, &format!("ymm{i}h"), 128, "uint128", "");
        }
        xml.push_str("  </feature>\n");
    }
    xml.push_str("</target>\n");
    xml
}

/// Byte order of a GDB architecture name, where it is fixed.
#[must_use]
pub fn endian_of_architecture(arch: &str) -> Option<Endian> {
    let a = arch.to_ascii_lowercase();
    let little = [
        "i386",
        "i8086",
        "x86-64",
        "aarch64",
        "riscv",
        "loongarch",
        "ia64",
        "alpha",
        "avr",
        "msp430",
        "xtensa",
        "nios2",
        "csky",
        "arc",
    ];
    let big = [
        "s390",
        "sparc",
        "m68k",
        "hppa",
        "or1k",
        "openrisc",
        "powerpc:common64:be",
        "h8300",
    ];
    if little.iter().any(|p| a.starts_with(p)) && !a.contains("aarch64_be") {
        Some(Endian::Little)
    } else if big.iter().any(|p| a.starts_with(p)) {
        Some(Endian::Big)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"
<!DOCTYPE target SYSTEM "gdb-target.dtd">
<target>
  <architecture>i386:x86-64</architecture>
  <osabi>GNU/Linux</osabi>
  <feature name="org.gnu.gdb.i386.core">
    <flags id="x" size="4"><field name="CF" start="0" end="0"/></flags>
    <reg name="rax" bitsize="64" type="int64" regnum="0"/>
    <reg name="rip" bitsize="64" type="code_ptr" regnum="16"/>
    <reg name="eflags" bitsize="32" type="x"/>
    <reg name="rbx" bitsize="64" type="int64" regnum="1"/>
  </feature>
  <feature name="org.gnu.gdb.i386.sse">
    <reg name="st0" bitsize="80" type="i387_ext" regnum="18"/>
  </feature>
</target>
"#;

    #[test]
    fn layout_in_regnum_order() {
        let td = TargetDescription::parse(XML, 0).unwrap();
        let names: Vec<_> = td.registers.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["rax", "rbx", "rip", "eflags", "st0"]);
        let offs: Vec<_> = td.registers.iter().map(|r| r.offset).collect();
        assert_eq!(offs, [0, 8, 16, 24, 28]);
        assert_eq!(td.register("eflags").unwrap().regnum, 17);
        assert_eq!(td.block_size(), 38);
        assert_eq!(td.endian(), Some(Endian::Little));
        assert_eq!(td.pc_register().unwrap().name, "rip");
        assert!(td.check_size(38).is_ok());
        let msg = td.check_size(0x970).unwrap_err();
        assert!(msg.contains("38 bytes") && msg.contains("2416"), "{msg}");
    }

    /// The x86 descriptions parse, in GDB's register order, with the sizes of GDB's own
    /// `g` packets for these feature sets (amd64 core + SSE: 24 words of 8 and 4 bytes,
    /// 8 x87 registers of 10, 8 control words, 16 XMM, MXCSR).
    #[test]
    fn x86_descriptions() {
        let td = TargetDescription::parse(&x86_tdesc_xml(X86Target::Amd64, false), 0).unwrap();
        assert_eq!(td.architecture.as_deref(), Some("i386:x86-64"));
        assert_eq!(
            td.block_size(),
            17 * 8 + 7 * 4 + 8 * 10 + 8 * 4 + 16 * 16 + 4
        );
        let names: Vec<_> = td.registers.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(&names[..4], ["rax", "rbx", "rcx", "rdx"]);
        assert_eq!(td.register("rip").unwrap().offset, 128);
        assert_eq!(td.register("eflags").unwrap().offset, 136);
        assert_eq!(td.register("st0").unwrap().offset, 164);
        assert_eq!(td.register("xmm0").unwrap().regnum, 40);
        assert_eq!(td.register("mxcsr").unwrap().regnum, 56);
        assert_eq!(td.pc_register().unwrap().name, "rip");
        let avx = TargetDescription::parse(&x86_tdesc_xml(X86Target::Amd64, true), 0).unwrap();
        assert_eq!(avx.block_size(), td.block_size() + 16 * 16);
        assert_eq!(avx.register("ymm15h").unwrap().regnum, 72);
        let td = TargetDescription::parse(&x86_tdesc_xml(X86Target::I386, false), 0).unwrap();
        assert_eq!(td.architecture.as_deref(), Some("i386"));
        assert_eq!(td.block_size(), 16 * 4 + 8 * 10 + 8 * 4 + 8 * 16 + 4);
        let names: Vec<_> = td.registers.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            &names[..10],
            [
                "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip", "eflags"
            ]
        );
        assert_eq!(td.register("mxcsr").unwrap().regnum, 40);
    }

    #[test]
    fn bad_xml_is_an_error_with_offset() {
        let e =
            TargetDescription::parse("<target><reg bitsize=\"8\"/></target>", 0x30).unwrap_err();
        assert_eq!(e.offset(), Some(trace_core::Offset(0x30)));
        assert!(TargetDescription::parse("<target", 0).is_err());
        assert!(TargetDescription::parse("<foo/>", 0).is_err());
        // Billion laughs: entity expansion stops at the node limit.
        let mut xml =
            String::from("<!DOCTYPE target [<!ENTITY a0 \"<reg name='x' bitsize='8'/>\">");
        for i in 1..20 {
            let p = i - 1;
            xml.push_str(&format!("<!ENTITY a{i} \"&a{p};&a{p};&a{p};&a{p};\">"));
        }
        xml.push_str("]><target>&a19;</target>");
        assert!(TargetDescription::parse(&xml, 0).is_err());
        assert_eq!(endian_of_architecture("powerpc:common"), None);
        assert_eq!(endian_of_architecture("s390:64-bit"), Some(Endian::Big));
    }
}
