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
