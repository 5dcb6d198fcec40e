//! Export to the Dinero IV `din` format: one `label address` line per access, label 0 read,
//! 1 write, 2 instruction fetch, address in hex without `0x`, so traces feed cache
//! simulators.
//!
//! Each instruction gives a fetch at its PC, then its data access: loads are reads, stores
//! writes. `dcbz`/`dcbzl`/`dcba` (TT6E) establish a cache block and are written as a write
//! at the effective address; the other cache-block operations (flush, store, touch,
//! invalidate) and the `dst*` stream hints move no data and are left out, as are
//! `lswx`/`stswx` with a zero byte count. FULL records give fetches only (they carry no
//! effective address).

use std::io::Write;

use crate::full::FullRecord;
use crate::opcode::{self, Access};
use crate::read::Record;

/// The din label of a data access of `r`, if it has one (see the module docs).
#[must_use]
pub fn data_label(r: &Record<'_>) -> Option<u8> {
    match r.access()? {
        Access::Load | Access::Store if r.xer_byte_count() == Some(0) => None,
        Access::Load => Some(0),
        Access::Store => Some(1),
        Access::CacheBlock => {
            matches!(opcode::mnemonic(r.opcode), Some("dcbz" | "dcbzl" | "dcba")).then_some(1)
        }
        Access::Stream => None,
    }
}

/// Writes din lines.
#[derive(Debug)]
pub struct DinWriter<W> {
    out: W,
    lines: u64,
}

impl<W: Write> DinWriter<W> {
    /// A writer to `out`.
    pub fn new(out: W) -> DinWriter<W> {
        DinWriter { out, lines: 0 }
    }

    fn line(&mut self, label: u8, addr: u32) -> std::io::Result<()> {
        self.lines = self.lines.wrapping_add(1);
        writeln!(self.out, "{label} {addr:x}")
    }

    /// The fetch and data access of one TT6/TT6E record.
    ///
    /// # Errors
    ///
    /// The output fails.
    pub fn write_record(&mut self, r: &Record<'_>) -> std::io::Result<()> {
        self.line(2, r.pc)?;
        if let (Some(label), Some(ea)) = (data_label(r), r.ea()) {
            self.line(label, ea)?;
        }
        Ok(())
    }

    /// The fetch of one FULL record (at `srr0`).
    ///
    /// # Errors
    ///
    /// The output fails.
    pub fn write_full(&mut self, r: &FullRecord<'_>) -> std::io::Result<()> {
        self.line(2, r.pc())
    }

    /// Lines written.
    #[must_use]
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// The output.
    pub fn finish(self) -> W {
        self.out
    }
}
