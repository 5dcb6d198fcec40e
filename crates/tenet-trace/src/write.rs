//! The writer and the owned model.
//!
//! **Canonical form** (what [`Writer`] writes, and what read → write gives back byte for
//! byte): one line per instruction ending in LF; the registers the line names, lowercase,
//! in the order of [`Arch::registers`] (the order of Tenet's reference Pin tracer, the pc
//! last), each as `0x` and lowercase hex without leading zeros (`0x0` for zero); then the
//! memory items in the order given, `mr=`/`mw=`/`mrw=`, the address as the registers, `:`
//! and two lowercase hex digits per byte; comment lines as written. The real Pin-tracer
//! trace in `../shared/realdata/tenet/` is canonical. A file with uppercase keys, values
//! without `0x`, leading zeros, CRLF, registers in another order or after memory items
//! reads the same but is written back canonical.

use std::io::Write;

use trace_core::hex;

use crate::error::{Error, WriteError};
use crate::raw::{Arch, MemKind};
use crate::read::{Line, MemRef, ReadOptions, Reader, Registers};

/// Appends `v` as `0x` and lowercase hex without leading zeros ([`hex::leading_digits`]),
/// appended as one fixed-size piece and cut to length (no call to a variable-length copy:
/// the writer's hot path).
#[inline]
fn push_hex(out: &mut Vec<u8>, v: u64) {
    let (digits, n) = hex::leading_digits(v, 1);
    let mut tmp = [0u8; 18];
    if let Some((prefix, body)) = tmp.split_first_chunk_mut::<2>()
        && let Some(body) = body.first_chunk_mut::<16>()
    {
        *prefix = *b"0x";
        *body = digits;
    }
    let len = out.len().saturating_add(2).saturating_add(n);
    out.extend_from_slice(&tmp);
    out.truncate(len);
}

/// The register keys of an architecture as written, in canonical order: a `,` (unless
/// `comma` is false: the first item of a line), the name and `=`, left-aligned in 8
/// bytes, with their length; built at compile time from the names (at most 3 bytes).
struct Keys<const N: usize> {
    text: [[u8; 8]; N],
    len: [u8; N],
}

#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
const fn keys<const N: usize>(names: [&str; N], comma: bool) -> Keys<N> {
    let mut text = [[b'='; 8]; N];
    let mut len = [0u8; N];
    let at = if comma { 1 } else { 0 };
    let mut i = 0;
    while i < N {
        let name = names[i].as_bytes();
        text[i][0] = b',';
        let mut k = 0;
        while k < name.len() && k < 3 {
            text[i][at + k] = name[k];
            k += 1;
        }
        // The `=` after the name is already there.
        len[i] = (at + k + 1) as u8;
        i += 1;
    }
    Keys { text, len }
}

/// The keys of each architecture: after a comma, and first on a line.
static AMD64_KEYS: [Keys<17>; 2] = [
    keys(crate::raw::AMD64_REGISTERS, true),
    keys(crate::raw::AMD64_REGISTERS, false),
];
static X86_KEYS: [Keys<9>; 2] = [
    keys(crate::raw::X86_REGISTERS, true),
    keys(crate::raw::X86_REGISTERS, false),
];

/// Appends the registers `mask` selects of `values` (index `i` is register `i` of the
/// keys), keys and hex values, the first without a comma before it: one key piece of
/// constant size per register, cut to length, then [`push_hex`].
#[inline]
fn push_registers<const N: usize>(
    out: &mut Vec<u8>,
    [after, first]: &[Keys<N>; 2],
    mask: u32,
    values: &[u64],
) {
    let mut mask = mask;
    let mut keys = first;
    while mask != 0 {
        let i = mask.trailing_zeros() as usize;
        mask &= mask.wrapping_sub(1);
        let (Some(key), Some(&len), Some(&value)) =
            (keys.text.get(i), keys.len.get(i), values.get(i))
        else {
            break;
        };
        let end = out.len().saturating_add(usize::from(len));
        out.extend_from_slice(key);
        out.truncate(end);
        push_hex(out, value);
        keys = after;
    }
}

/// Memory items formatted ahead of the line that carries them (the Pin tracer's shape:
/// a line carries the accesses of its thread's previous instruction), each `,` and the
/// item in canonical form; written after a line's registers by
/// [`Writer::write_instruction_items`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemItems {
    text: Vec<u8>,
    count: usize,
}

impl MemItems {
    /// No items.
    #[must_use]
    pub fn new() -> MemItems {
        MemItems::default()
    }

    /// Removes every item (keeps the capacity).
    pub fn clear(&mut self) {
        self.text.clear();
        self.count = 0;
    }

    /// The number of items.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there is no item.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends an item.
    #[inline]
    pub fn push(&mut self, item: MemRef<'_>) {
        // The usual item is one word of 8 or 4 bytes: the fixed-size path.
        let word = match item.data.len() {
            8 => item.data.first_chunk::<8>().map(|w| u64::from_le_bytes(*w)),
            4 => item
                .data
                .first_chunk::<4>()
                .map(|w| u64::from(u32::from_le_bytes(*w))),
            _ => None,
        };
        match word {
            Some(value) => self.push_word(item.kind, item.addr, value, item.data.len()),
            None => {
                self.push_key(item.kind, item.addr);
                hex::push_bytes(&mut self.text, item.data);
            }
        }
    }

    /// Appends an item of the `size` low bytes of `value` in little-endian order (at most
    /// 8; the usual item is one recorded word).
    #[inline]
    pub fn push_word(&mut self, kind: MemKind, addr: u64, value: u64, size: usize) {
        // The whole item built as one fixed-size piece and cut to length: `,`, the key,
        // `=0x`, the address, `:`, the value's bytes.
        let (prefix, mut at): (&[u8; 8], usize) = match kind {
            MemKind::Read => (b",mr=0x00", 6),
            MemKind::Write => (b",mw=0x00", 6),
            MemKind::ReadWrite => (b",mrw=0x0", 7),
        };
        let mut tmp = [0u8; 48];
        if let Some(head) = tmp.first_chunk_mut::<8>() {
            *head = *prefix;
        }
        // Each piece may run past its digits: the next one is written over the rest.
        let mut put = |at: usize, piece: [u8; 16]| {
            if let Some(d) = tmp.get_mut(at..).and_then(<[u8]>::first_chunk_mut::<16>) {
                *d = piece;
            }
        };
        let digits = 64u32
            .saturating_sub(addr.leading_zeros())
            .div_ceil(4)
            .max(1);
        let top = addr
            .checked_shl(16u32.saturating_sub(digits).saturating_mul(4))
            .unwrap_or(0);
        put(at, hex::digits16(top));
        at = at.saturating_add(digits as usize);
        // The bytes in memory order: the little-endian word's, read as a big-endian one.
        put(at.saturating_add(1), hex::digits16(value.swap_bytes()));
        if let Some(sep) = tmp.get_mut(at) {
            *sep = crate::raw::MEMORY_SEPARATOR;
        }
        let len = at
            .saturating_add(1)
            .saturating_add(size.min(8).saturating_mul(2));
        let end = self.text.len().saturating_add(len);
        self.text.extend_from_slice(&tmp);
        self.text.truncate(end);
        self.count = self.count.saturating_add(1);
    }

    #[inline]
    fn push_key(&mut self, kind: MemKind, addr: u64) {
        push_key(&mut self.text, false, kind.key());
        push_hex(&mut self.text, addr);
        self.text.push(crate::raw::MEMORY_SEPARATOR);
        self.count = self.count.saturating_add(1);
    }
}

/// Appends `,` (unless `first`), `key` and `=`, as one fixed-size piece cut to length
/// (keys are register names and `mr`/`mw`/`mrw`: at most 3 bytes; a longer one is
/// appended as it is).
#[inline(always)]
fn push_key(out: &mut Vec<u8>, first: bool, key: &str) {
    let key = key.as_bytes();
    if key.len() > 3 {
        if !first {
            out.push(b',');
        }
        out.extend_from_slice(key);
        out.push(b'=');
        return;
    }
    let mut tmp = [b'='; 5];
    let at = usize::from(!first);
    if let (false, Some(comma)) = (first, tmp.first_mut()) {
        *comma = b',';
    }
    for (d, &s) in tmp.iter_mut().skip(at).zip(key) {
        *d = s;
    }
    // The `=` after the key is already there.
    let len = out
        .len()
        .saturating_add(at)
        .saturating_add(key.len())
        .saturating_add(1);
    out.extend_from_slice(&tmp);
    out.truncate(len);
}

/// The buffered lines are handed to the output once they hold this many bytes.
const FLUSH_AT: usize = 1 << 15;

/// Writes a trace in canonical form, one line at a time, into a buffer that is handed to
/// the output in large pieces (so a `BufWriter` around a file copies nothing more).
#[derive(Debug)]
pub struct Writer<W: Write> {
    out: W,
    arch: Arch,
    buf: Vec<u8>,
    index: u64,
}

impl<W: Write> Writer<W> {
    /// A writer of `arch` registers to `out`. The lines are buffered (up to 32 KiB): call
    /// [`Writer::finish`] to write the last of them.
    pub fn new(out: W, arch: Arch) -> Writer<W> {
        Writer {
            out,
            arch,
            buf: Vec::with_capacity(FLUSH_AT.saturating_add(1024)),
            index: 0,
        }
    }

    /// Hands the buffered lines to the output once there are enough of them.
    #[inline]
    fn line_done(&mut self) -> Result<(), WriteError> {
        if self.buf.len() >= FLUSH_AT {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Writes a comment line: `text` as given (a `#` is put first if it lacks one).
    ///
    /// # Errors
    ///
    /// [`WriteError::CommentLineBreak`] if `text` holds a LF or ends with a CR; the output
    /// fails.
    pub fn write_comment(&mut self, text: &[u8]) -> Result<(), WriteError> {
        // A CR at the end would be read as part of the line end.
        if text.contains(&b'\n') || text.last() == Some(&b'\r') {
            return Err(WriteError::CommentLineBreak);
        }
        if text.first() != Some(&crate::raw::COMMENT) {
            self.buf.push(crate::raw::COMMENT);
        }
        self.buf.extend_from_slice(text);
        self.buf.push(b'\n');
        self.line_done()
    }

    /// Writes an instruction line: the registers `regs` sets, then `mem`.
    ///
    /// # Errors
    ///
    /// [`WriteError::MissingPc`] when `regs` has no pc, [`WriteError::WrongArch`] when it
    /// is of another architecture; the output fails.
    pub fn write_instruction<'m>(
        &mut self,
        regs: &Registers,
        mem: impl IntoIterator<Item = MemRef<'m>>,
    ) -> Result<(), WriteError> {
        self.push_registers(regs)?;
        for m in mem {
            push_key(&mut self.buf, false, m.kind.key());
            push_hex(&mut self.buf, m.addr);
            self.buf.push(b':');
            hex::push_bytes(&mut self.buf, m.data);
        }
        self.buf.push(b'\n');
        self.index = self.index.saturating_add(1);
        self.line_done()
    }

    /// [`Writer::write_instruction`] with memory items formatted ahead.
    ///
    /// # Errors
    ///
    /// As [`Writer::write_instruction`].
    #[inline]
    pub fn write_instruction_items(
        &mut self,
        regs: &Registers,
        mem: &MemItems,
    ) -> Result<(), WriteError> {
        self.push_registers(regs)?;
        self.buf.extend_from_slice(&mem.text);
        self.buf.push(b'\n');
        self.index = self.index.saturating_add(1);
        self.line_done()
    }

    /// Checks `regs` (this architecture, a pc) and appends them.
    #[inline]
    fn push_registers(&mut self, regs: &Registers) -> Result<(), WriteError> {
        if regs.arch() != self.arch {
            return Err(WriteError::WrongArch {
                index: self.index,
                found: regs.arch().name(),
                expected: self.arch.name(),
            });
        }
        if regs.pc().is_none() {
            return Err(WriteError::MissingPc { index: self.index });
        }
        let values = regs.values();
        match self.arch {
            Arch::Amd64 => push_registers(&mut self.buf, &AMD64_KEYS, regs.mask(), values),
            Arch::X86 => push_registers(&mut self.buf, &X86_KEYS, regs.mask(), values),
        }
        Ok(())
    }

    /// Writes the buffered lines, flushes and returns the output.
    ///
    /// # Errors
    ///
    /// The write or the flush fails.
    pub fn finish(mut self) -> Result<W, WriteError> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A memory item, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemOwned {
    /// `mr`, `mw` or `mrw`.
    pub kind: MemKind,
    /// The first address.
    pub addr: u64,
    /// The bytes in memory order.
    pub data: Vec<u8>,
}

/// One line of a [`Trace`].
// Nearly every line is an instruction: boxing its registers would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    /// An instruction line.
    Instruction {
        /// The registers named on the line (the pc among them).
        regs: Registers,
        /// The memory items, in order.
        mem: Vec<MemOwned>,
    },
    /// A comment line, `#` included.
    Comment(Vec<u8>),
}

/// A whole trace in memory: the owned model of the writer and of round-trip tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    /// The architecture.
    pub arch: Arch,
    /// The lines.
    pub lines: Vec<Entry>,
}

impl Trace {
    /// Reads a whole trace.
    ///
    /// # Errors
    ///
    /// The first error of the reader.
    pub fn read(data: &[u8], options: ReadOptions) -> Result<Trace, Error> {
        let mut reader = Reader::parse(data, options);
        let mut lines = Vec::new();
        while let Some(line) = reader.next_line() {
            lines.push(match line? {
                Line::Comment(c) => Entry::Comment(c.text.to_vec()),
                Line::Instruction(i) => Entry::Instruction {
                    regs: *i.regs,
                    mem: i
                        .mem()
                        .map(|m| MemOwned {
                            kind: m.kind,
                            addr: m.addr,
                            data: m.data.to_vec(),
                        })
                        .collect(),
                },
            });
        }
        let arch = reader.summary().arch.unwrap_or(Arch::Amd64);
        Ok(Trace { arch, lines })
    }

    /// Writes the trace in canonical form to `out`.
    ///
    /// # Errors
    ///
    /// As [`Writer::write_instruction`] and [`Writer::write_comment`].
    pub fn write_to<W: Write>(&self, out: W) -> Result<W, WriteError> {
        let mut w = Writer::new(out, self.arch);
        for line in &self.lines {
            match line {
                Entry::Comment(text) => w.write_comment(text)?,
                Entry::Instruction { regs, mem } => w.write_instruction(
                    regs,
                    mem.iter().map(|m| MemRef {
                        kind: m.kind,
                        addr: m.addr,
                        data: &m.data,
                    }),
                )?,
            }
        }
        w.finish()
    }

    /// The trace in canonical form.
    ///
    /// # Errors
    ///
    /// As [`Trace::write_to`].
    pub fn to_bytes(&self) -> Result<Vec<u8>, WriteError> {
        self.write_to(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_has_no_leading_zeros() {
        for (v, s) in [
            (0u64, "0x0"),
            (1, "0x1"),
            (0x10, "0x10"),
            (0x14000419c, "0x14000419c"),
            (0xabc, "0xabc"),
            (1 << 63, "0x8000000000000000"),
            (u64::MAX, "0xffffffffffffffff"),
        ] {
            let mut out = Vec::new();
            push_hex(&mut out, v);
            assert_eq!(out, s.as_bytes());
            assert_eq!(format!("{v:#x}"), s);
        }
        let mut out = Vec::new();
        hex::push_bytes(&mut out, &[0x00, 0x0f, 0xa5, 0xff]);
        assert_eq!(out, b"000fa5ff");
    }
}
