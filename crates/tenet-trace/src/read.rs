//! The readers: [`Reader`] over `&[u8]` and [`StreamReader`] over `io::Read`, both lending
//! one [`Line`] at a time from buffers they reuse (no allocation per line).
//!
//! The parser is one pass over the bytes of a line: a key up to `=` (canonical keys found
//! from one word, others lowercased byte by byte), matched against the known keys through
//! a hashed table, then a hex value read eight digits at a time (the digits found and
//! converted in one 64-bit word) until the `,` or the end of the line. No regex, no
//! splitting into strings.

use std::io::Read;

use trace_core::Offset;

use crate::error::{Error, Problem};
use crate::limits::{MAX_LINE_LEN, MAX_QUOTED_KEY};
use crate::raw::{self, Arch, Key, MAX_REGISTERS, MemKind};

/// How to read a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The architecture; `None` detects it from the first register name.
    pub arch: Option<Arch>,
}

/// Register values by index of [`Arch::registers`], with which of them are set: the
/// registers named on one line, or (merged line by line with [`Registers::merge`]) the
/// whole register state. Equal when the same registers are set to the same values.
#[derive(Clone, Copy, Debug)]
pub struct Registers {
    arch: Arch,
    present: u32,
    values: [u64; MAX_REGISTERS],
}

impl Registers {
    /// No register set.
    #[must_use]
    pub fn new(arch: Arch) -> Registers {
        Registers {
            arch,
            present: 0,
            values: [0; MAX_REGISTERS],
        }
    }

    /// The architecture the indexes refer to.
    #[must_use]
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The value of register `index`, if set.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<u64> {
        if index < MAX_REGISTERS && self.present & (1 << index) != 0 {
            self.values.get(index).copied()
        } else {
            None
        }
    }

    /// The value of register `index`, 0 if not set (Tenet's state before a register is
    /// first written).
    #[must_use]
    pub fn value(&self, index: usize) -> u64 {
        self.get(index).unwrap_or(0)
    }

    /// Sets register `index` (ignored past the architecture's registers); the value is
    /// cut to the register's width.
    pub fn set(&mut self, index: usize, value: u64) {
        if index < self.arch.registers().len()
            && let Some(v) = self.values.get_mut(index)
        {
            *v = value & self.arch.max_value();
            self.present |= 1 << index;
        }
    }

    /// Unsets register `index`.
    pub fn unset(&mut self, index: usize) {
        if index < MAX_REGISTERS {
            self.present &= !(1 << index);
        }
    }

    /// The pc, if set.
    #[must_use]
    pub fn pc(&self) -> Option<u64> {
        self.get(self.arch.pc())
    }

    /// The set registers as a mask (bit `i` for index `i`).
    #[must_use]
    pub fn mask(&self) -> u32 {
        self.present
    }

    /// How many registers are set.
    #[must_use]
    pub fn len(&self) -> usize {
        self.present.count_ones() as usize
    }

    /// Whether no register is set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// Sets every register `other` sets to its value there (applies a line to a state).
    pub fn merge(&mut self, other: &Registers) {
        for (i, (v, o)) in self.values.iter_mut().zip(&other.values).enumerate() {
            if other.present & (1 << i) != 0 {
                *v = *o;
            }
        }
        self.present |= other.present;
    }

    /// The values, by index (meaningful where [`Registers::mask`] has the bit).
    pub(crate) fn values(&self) -> &[u64; MAX_REGISTERS] {
        &self.values
    }

    /// Unsets every register (keeps the architecture).
    pub fn clear(&mut self) {
        self.present = 0;
    }

    /// The set registers as (name, value), in canonical order (the pc last).
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        // Over the set bits only (the writer's hot path).
        let names = self.arch.registers();
        let mut mask = self.present;
        std::iter::from_fn(move || {
            let i = mask.trailing_zeros() as usize;
            mask &= mask.wrapping_sub(1);
            Some((*names.get(i)?, *self.values.get(i)?))
        })
    }
}

impl PartialEq for Registers {
    fn eq(&self, other: &Registers) -> bool {
        self.arch == other.arch && self.present == other.present && self.iter().eq(other.iter())
    }
}

impl Eq for Registers {}

/// One memory item of a line: its kind and address (its bytes are in the line's buffer:
/// [`Instruction::mem`] gives them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemItem {
    /// `mr`, `mw` or `mrw`.
    pub kind: MemKind,
    /// The first address.
    pub addr: u64,
    start: u32,
    len: u32,
}

/// A memory item with its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRef<'a> {
    /// `mr`, `mw` or `mrw`.
    pub kind: MemKind,
    /// The first address.
    pub addr: u64,
    /// The bytes, in memory order (after the previous instruction executed).
    pub data: &'a [u8],
}

/// An instruction line: the registers it names and the memory items it carries.
///
/// The memory items are what the **previous** instruction read or wrote, with the bytes
/// read back after it executed (notes: "what a line means").
#[derive(Clone, Copy, Debug)]
pub struct Instruction<'a> {
    /// The index of the instruction, from 0 (comment lines do not count).
    pub index: u64,
    /// The line, from 1.
    pub line: u64,
    /// Where the line starts.
    pub offset: Offset,
    /// The registers named on the line (the pc always among them).
    pub regs: &'a Registers,
    items: &'a [MemItem],
    data: &'a [u8],
}

impl<'a> Instruction<'a> {
    /// The pc.
    #[must_use]
    pub fn pc(&self) -> u64 {
        self.regs.value(self.regs.arch().pc())
    }

    /// The memory items, in line order.
    pub fn mem(&self) -> impl ExactSizeIterator<Item = MemRef<'a>> + 'a {
        let data = self.data;
        self.items.iter().map(move |m| MemRef {
            kind: m.kind,
            addr: m.addr,
            data: usize::try_from(m.start)
                .ok()
                .and_then(|s| data.get(s..s.checked_add(usize::try_from(m.len).ok()?)?))
                .unwrap_or_default(),
        })
    }

    /// The memory items without their bytes.
    #[must_use]
    pub fn mem_items(&self) -> &'a [MemItem] {
        self.items
    }
}

/// A comment line (a line starting with `#`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Comment<'a> {
    /// The line, from 1.
    pub line: u64,
    /// Where the line starts.
    pub offset: Offset,
    /// The line as written, `#` included, line end excluded.
    pub text: &'a [u8],
}

/// One line of a trace.
#[derive(Clone, Copy, Debug)]
pub enum Line<'a> {
    /// An instruction.
    Instruction(Instruction<'a>),
    /// A comment.
    Comment(Comment<'a>),
}

/// The value of each byte as a hex digit, 0xff for other bytes (built at compile time, where
/// a panic would be a compile error).
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
static HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

#[inline]
fn hex(c: u8) -> u8 {
    HEX.get(usize::from(c)).copied().unwrap_or(0xff)
}

/// A problem at byte `at` of the line (boxed: the parser's results stay two words, so
/// they come back in registers).
struct At(usize, Box<Problem>);

/// [`At`] of a problem.
#[cold]
fn at(at: usize, problem: Problem) -> At {
    At(at, Box::new(problem))
}

/// The parser's state: the architecture, and the buffers of the current line.
#[derive(Debug)]
struct Parser {
    arch: Option<Arch>,
    forced: bool,
    regs: Registers,
    items: Vec<MemItem>,
    data: Vec<u8>,
    /// Lines read (the current one included).
    lines: u64,
    /// Instruction lines read (the current one excluded until it is valid).
    instructions: u64,
    /// Whether any line ended with CRLF.
    crlf: bool,
    /// The line number and offset of the last instruction line.
    last: (u64, u64),
}

impl Parser {
    fn new(options: ReadOptions) -> Parser {
        Parser {
            arch: options.arch,
            forced: options.arch.is_some(),
            regs: Registers::new(options.arch.unwrap_or(Arch::Amd64)),
            items: Vec::new(),
            data: Vec::new(),
            lines: 0,
            instructions: 0,
            crlf: false,
            last: (0, 0),
        }
    }

    /// Parses `line` (terminator excluded) starting at absolute `offset`.
    fn line<'s>(&'s mut self, mut line: &'s [u8], offset: u64) -> Result<Line<'s>, Error> {
        self.lines = self.lines.saturating_add(1);
        // CRLF (and any run of CRs before the LF: editors on Windows leave those).
        while let [rest @ .., b'\r'] = line {
            line = rest;
            self.crlf = true;
        }
        if line.first() == Some(&raw::COMMENT) {
            return Ok(Line::Comment(Comment {
                line: self.lines,
                offset: Offset(offset),
                text: line,
            }));
        }
        if let Err(At(at, problem)) = self.items(line) {
            let problem = *problem;
            return Err(self.error(offset, at, problem));
        }
        self.instructions = self.instructions.saturating_add(1);
        self.last = (self.lines, offset);
        Ok(Line::Instruction(self.current()))
    }

    /// The last instruction line read (meaningful once there is one).
    fn current(&self) -> Instruction<'_> {
        Instruction {
            index: self.instructions.saturating_sub(1),
            line: self.last.0,
            offset: Offset(self.last.1),
            regs: &self.regs,
            items: &self.items,
            data: &self.data,
        }
    }

    fn error(&self, line_offset: u64, at: usize, problem: Problem) -> Error {
        let at = at as u64;
        Error::Syntax {
            line: self.lines,
            column: at.saturating_add(1),
            offset: Offset(line_offset.saturating_add(at)),
            instruction: self.instructions,
            problem,
        }
    }

    /// The error at the end of the input: no instruction line at all.
    fn end(&self, offset: u64) -> Option<Error> {
        (self.instructions == 0).then(|| Error::Syntax {
            line: self.lines.saturating_add(1),
            column: 1,
            offset: Offset(offset),
            instruction: 0,
            problem: Problem::NoInstructions,
        })
    }

    /// Reads the items of an instruction line into `regs`, `items` and `data`.
    fn items(&mut self, line: &[u8]) -> Result<(), At> {
        self.regs.clear();
        self.items.clear();
        self.data.clear();
        let mut regs = 0usize;
        let mut p = 0usize;
        if !line.is_empty() {
            loop {
                p = self.item(line, p, &mut regs)?;
                match line.get(p) {
                    None => break,
                    // The separator (anything else was reported by `item`).
                    Some(_) => p = p.saturating_add(1),
                }
            }
        }
        if self.regs.pc().is_none() || self.arch.is_none() {
            let pc = self.arch.map_or("rip or eip", Arch::pc_name);
            return Err(at(0, Problem::MissingPc { pc }));
        }
        Ok(())
    }

    /// Reads the item at `start`; returns where it ends (at `,` or the end of the line).
    fn item(&mut self, line: &[u8], start: usize, regs: &mut usize) -> Result<usize, At> {
        let (kind, p) = match fast_key(line, start) {
            Some(found) => found,
            None => slow_key(line, start)?,
        };
        let value = p.saturating_add(1);
        match kind {
            Key::Reg(arch, index) => {
                match self.arch {
                    None => {
                        self.arch = Some(arch);
                        self.regs = Registers::new(arch);
                    }
                    Some(a) if a != arch => {
                        let key = line.get(start..p).unwrap_or_default().to_ascii_lowercase();
                        return Err(at(
                            start,
                            Problem::OtherArch {
                                key: String::from_utf8_lossy(&key).into_owned(),
                                arch: a,
                                forced: self.forced,
                            },
                        ));
                    }
                    Some(_) => {}
                }
                *regs = regs.saturating_add(1);
                if *regs > MAX_REGISTERS {
                    return Err(at(start, Problem::TooManyRegisters));
                }
                let (v, end) = number(line, value, "register value")?;
                if v > arch.max_value() {
                    return Err(at(
                        value,
                        Problem::TooWide {
                            what: "register value",
                            bits: arch.word_size().saturating_mul(8),
                        },
                    ));
                }
                self.regs.set(index, v);
                end_of_item(line, end, "register value")
            }
            Key::Mem(kind) => {
                let (addr, p) = number(line, value, "memory address")?;
                if line.get(p) != Some(&raw::MEMORY_SEPARATOR) {
                    return Err(at(p, Problem::MissingColon));
                }
                let bytes = p.saturating_add(1);
                // Eight digits (four bytes) at a time, each piece appended whole and cut.
                let from = self.data.len();
                let mut q = bytes;
                loop {
                    let (values, n) = hex_prefix(load8(line, q));
                    let keep = self.data.len().saturating_add(n / 2);
                    let piece = digits_bytes(values, n).to_le_bytes();
                    self.data
                        .extend_from_slice(piece.get(..4).unwrap_or_default());
                    self.data.truncate(keep);
                    q = q.saturating_add(n);
                    // The usual item ends after a whole word: seen from its next byte.
                    if n < 8 || line.get(q).is_none_or(|&c| hex(c) == 0xff) {
                        break;
                    }
                }
                let digits = q.saturating_sub(bytes);
                if digits == 0 || digits % 2 != 0 {
                    self.data.truncate(from);
                }
                if digits == 0 {
                    end_of_item(line, q, "memory bytes")?;
                    return Err(at(
                        q,
                        Problem::NoHexDigits {
                            what: "memory bytes",
                        },
                    ));
                }
                if digits % 2 != 0 {
                    end_of_item(line, q, "memory bytes")?;
                    return Err(at(bytes, Problem::OddHexDigits { digits }));
                }
                self.items.push(MemItem {
                    kind,
                    addr,
                    start: u32::try_from(from).unwrap_or(u32::MAX),
                    len: u32::try_from(digits / 2).unwrap_or(u32::MAX),
                });
                end_of_item(line, q, "memory bytes")
            }
        }
    }
}

/// The key at `start` when it is written as canonical files write it (lowercase, `=`
/// after its 2 or 3 bytes), found from one word: the key and where its `=` is; `None`
/// for anything else (then [`slow_key`] decides).
#[inline(always)]
fn fast_key(line: &[u8], start: usize) -> Option<(Key, usize)> {
    let w = load8(line, start);
    let byte = |k: u32| (w >> k.saturating_mul(8)) as u8;
    let (key, len) = if byte(2) == raw::KEY_SEPARATOR {
        (w & 0xffff, 2)
    } else if byte(3) == raw::KEY_SEPARATOR && byte(2) != 0 {
        // A 0 byte would pack like a shorter key.
        (w & 0xff_ffff, 3)
    } else {
        return None;
    };
    // Known keys are lowercase letters and digits: any other byte matches none.
    let kind = raw::classify(u32::try_from(key).ok()?)?;
    Some((kind, start.saturating_add(len)))
}

/// The key at `start` in any case: lowercased and packed into a u32 as it is scanned
/// (known keys have at most 4 bytes; a longer one is unknown, `len` says so); returns it
/// and where its `=` is.
fn slow_key(line: &[u8], start: usize) -> Result<(Key, usize), At> {
    let mut key = 0u32;
    let mut len = 0u32;
    let mut p = start;
    loop {
        match line.get(p) {
            Some(&raw::KEY_SEPARATOR) => break,
            Some(&raw::ITEM_SEPARATOR) | None => return Err(at(p, Problem::MissingEquals)),
            Some(&c) => {
                if len < 4 && c.is_ascii_alphanumeric() {
                    key |= u32::from(c.to_ascii_lowercase()).wrapping_shl(len.wrapping_mul(8));
                    len = len.saturating_add(1);
                } else {
                    // Too long, or a byte no key has: unknown.
                    len = 5;
                }
            }
        }
        p = p.saturating_add(1);
    }
    let kind = (len <= 4)
        .then(|| raw::classify(key))
        .flatten()
        .ok_or_else(|| at(start, unknown_key(line.get(start..p).unwrap_or_default())))?;
    Ok((kind, p))
}

fn unknown_key(key: &[u8]) -> Problem {
    let key = key.get(..key.len().min(MAX_QUOTED_KEY)).unwrap_or_default();
    Problem::UnknownKey {
        key: String::from_utf8_lossy(key).into_owned(),
    }
}

/// Checks that the item ends at `p` (`,` or the end of the line).
fn end_of_item(line: &[u8], p: usize, what: &'static str) -> Result<usize, At> {
    match line.get(p) {
        None | Some(&raw::ITEM_SEPARATOR) => Ok(p),
        Some(&c) => Err(at(
            p,
            Problem::BadHexDigit {
                what,
                found: char::from(c),
            },
        )),
    }
}

/// Eight bytes of `line` from `p` as a little-endian word; past the end of the line the
/// bytes read as 0 (not a hex digit, so a scan stops there as at the end).
#[inline(always)]
fn load8(line: &[u8], p: usize) -> u64 {
    let rest = line.get(p..).unwrap_or_default();
    match rest.first_chunk::<8>() {
        Some(w) => u64::from_le_bytes(*w),
        None => {
            let mut w = [0u8; 8];
            for (d, s) in w.iter_mut().zip(rest) {
                *d = *s;
            }
            u64::from_le_bytes(w)
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The hex digits at the start of the eight bytes `x` (first byte lowest): how many lead
/// (0 to 8), and each byte's digit value (meaningful for those), all bytes at once.
#[inline(always)]
fn hex_prefix(x: u64) -> (u64, usize) {
    // Bit 7 of each byte: whether the byte (high bit cleared, so no carry crosses bytes)
    // lies in lo..=hi.
    let in_range = |v: u64, lo: u8, hi: u8| {
        let ge = v.wrapping_add(ONES.wrapping_mul(u64::from(0x80u8.wrapping_sub(lo))));
        let gt = v.wrapping_add(ONES.wrapping_mul(u64::from(0x7fu8.wrapping_sub(hi))));
        ge & !gt & HIGH
    };
    let low = x & !HIGH;
    let digit = in_range(low, b'0', b'9');
    let letter = in_range(low | ONES.wrapping_mul(0x20), b'a', b'f');
    // Bytes with their high bit set are no digits.
    let hex = (digit | letter) & !x & HIGH;
    let count = ((!hex & HIGH).trailing_zeros() / 8) as usize;
    // '0'..'9' are 0x3N, 'a'..'f' 0x6N and 'A'..'F' 0x4N with N from 1: bit 6 says letter.
    let values = (x & ONES.wrapping_mul(0x0f)).wrapping_add(((x >> 6) & ONES).wrapping_mul(9));
    (values, count)
}

/// The first `count` (1 to 8) digit values of `values` (first byte the most significant
/// digit) as one number.
#[inline(always)]
fn digits_value(values: u64, count: usize) -> u64 {
    let junk = 8usize.saturating_sub(count).saturating_mul(8) as u32;
    let kept = u64::MAX.checked_shr(junk).unwrap_or(0);
    // The last digit in the lowest byte, then pairs of nibbles joined into bytes, bytes
    // into 16-bit pieces, those into the 32-bit value.
    let mut y = (values & kept).swap_bytes().checked_shr(junk).unwrap_or(0);
    y = (y | (y >> 4)) & 0x00ff_00ff_00ff_00ff;
    y = (y | (y >> 8)) & 0x0000_ffff_0000_ffff;
    (y | (y >> 16)) & 0xffff_ffff
}

/// The bytes spelled by the first `count` (0 to 8) digit values of `values`, two digits a
/// byte in memory order (an odd last digit is dropped), in the low bytes of the result.
#[inline(always)]
fn digits_bytes(values: u64, count: usize) -> u64 {
    let kept = u64::MAX
        .checked_shr(8usize.saturating_sub(count).saturating_mul(8) as u32)
        .unwrap_or(0);
    let v = values & kept;
    let mut z = ((v << 4) | (v >> 8)) & 0x00ff_00ff_00ff_00ff;
    z = (z | (z >> 8)) & 0x0000_ffff_0000_ffff;
    (z | (z >> 16)) & 0xffff_ffff
}

/// A hex number at `p` (with or without `0x`), up to 64 bits; returns it and where its
/// digits end. Up to 16 digits are read eight at a time; longer runs (leading zeros) and
/// errors digit by digit.
#[inline(always)]
fn number(line: &[u8], mut p: usize, what: &'static str) -> Result<(u64, usize), At> {
    if let Some([b'0', b'x' | b'X']) = line.get(p..p.saturating_add(2)) {
        p = p.saturating_add(2);
    }
    let (values, n) = hex_prefix(load8(line, p));
    if n > 0 && n < 8 {
        return Ok((digits_value(values, n), p.saturating_add(n)));
    }
    if n == 8 {
        let high = digits_value(values, 8);
        let (values, n) = hex_prefix(load8(line, p.saturating_add(8)));
        let end = p.saturating_add(8).saturating_add(n);
        if n < 8 || line.get(end).is_none_or(|&c| hex(c) == 0xff) {
            let low = digits_value(values, n);
            let shift = u32::try_from(n.saturating_mul(4)).unwrap_or(0);
            return Ok((high.checked_shl(shift).unwrap_or(0) | low, end));
        }
    }
    number_by_digit(line, p, what)
}

/// [`number`] digit by digit, from `p` after any `0x`.
fn number_by_digit(line: &[u8], mut p: usize, what: &'static str) -> Result<(u64, usize), At> {
    let start = p;
    let mut v = 0u64;
    while let Some(&c) = line.get(p) {
        let d = hex(c);
        if d == 0xff {
            break;
        }
        if v >> 60 != 0 {
            return Err(at(start, Problem::TooWide { what, bits: 64 }));
        }
        v = (v << 4) | u64::from(d);
        p = p.saturating_add(1);
    }
    if p == start {
        return match line.get(p) {
            None | Some(&raw::ITEM_SEPARATOR | &raw::MEMORY_SEPARATOR) => {
                Err(at(p, Problem::NoHexDigits { what }))
            }
            Some(&c) => Err(at(
                p,
                Problem::BadHexDigit {
                    what,
                    found: char::from(c),
                },
            )),
        };
    }
    Ok((v, p))
}

/// What a reader knows once its input is read: the architecture, the counts, the line ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The architecture (given, or detected; `None` before the first instruction line).
    pub arch: Option<Arch>,
    /// Whether it was given rather than detected.
    pub arch_given: bool,
    /// Lines read.
    pub lines: u64,
    /// Instruction lines read.
    pub instructions: u64,
    /// Whether any line ended with CRLF.
    pub crlf: bool,
}

impl Parser {
    fn summary(&self) -> Summary {
        Summary {
            arch: self.arch,
            arch_given: self.forced,
            lines: self.lines,
            instructions: self.instructions,
            crlf: self.crlf,
        }
    }
}

/// A trace in memory: lends one [`Line`] at a time. After an error it is fused.
#[derive(Debug)]
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    parser: Parser,
    done: bool,
}

impl<'a> Reader<'a> {
    /// A reader over `data` (the whole file, line ends LF or CRLF).
    #[must_use]
    pub fn parse(data: &'a [u8], options: ReadOptions) -> Reader<'a> {
        Reader {
            data,
            pos: 0,
            parser: Parser::new(options),
            done: false,
        }
    }

    /// The next line, or the error that ends the input (after every complete line).
    /// The error [`Problem::NoInstructions`] ends an input without instruction lines.
    pub fn next_line(&mut self) -> Option<Result<Line<'_>, Error>> {
        if self.done {
            return None;
        }
        let rest = self.data.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            self.done = true;
            return self.parser.end(self.pos as u64).map(Err);
        }
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(n) => (rest.get(..n).unwrap_or_default(), n.saturating_add(1)),
            None => (rest, rest.len()),
        };
        let offset = self.pos as u64;
        self.pos = self.pos.saturating_add(next);
        if line.len() > MAX_LINE_LEN {
            // As for streams: memory items index their bytes with 32 bits.
            self.done = true;
            self.parser.lines = self.parser.lines.saturating_add(1);
            return Some(Err(self.parser.error(offset, 0, Problem::LineTooLong)));
        }
        let r = self.parser.line(line, offset);
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }

    /// The next instruction line (comment lines skipped), or the error that ends the input.
    pub fn next_instruction(&mut self) -> Option<Result<Instruction<'_>, Error>> {
        loop {
            match self.next_line()? {
                Ok(Line::Comment(_)) => {}
                Ok(Line::Instruction(_)) => break,
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(self.parser.current()))
    }

    /// How far the reader is, in bytes.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.pos as u64
    }

    /// The architecture and counts so far.
    #[must_use]
    pub fn summary(&self) -> Summary {
        self.parser.summary()
    }
}

/// The size of one read from the underlying stream.
const CHUNK: usize = 256 << 10;

/// A trace from an `io::Read` (stdin, a decompressor), in memory bounded by the longest
/// line ([`MAX_LINE_LEN`]). Lends one [`Line`] at a time; fused after an error.
#[derive(Debug)]
pub struct StreamReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// The unread part of `buf` is `start..end`.
    start: usize,
    end: usize,
    /// The absolute offset of `buf[0]`.
    base: u64,
    eof: bool,
    parser: Parser,
    done: bool,
}

impl<R: Read> StreamReader<R> {
    /// A reader over `inner`.
    ///
    /// # Errors
    ///
    /// None today (the signature matches the other crates' `from_reader`); reading starts
    /// with the first [`StreamReader::next_line`].
    pub fn from_reader(inner: R, options: ReadOptions) -> Result<StreamReader<R>, Error> {
        Ok(StreamReader {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            parser: Parser::new(options),
            done: false,
        })
    }

    /// Reads more into the buffer; `Ok(false)` at the end of the input.
    fn fill(&mut self) -> Result<bool, Error> {
        // Drop the lines already handed out once they are at least half the buffer (so
        // that each byte is moved a bounded number of times), and grow the buffer
        // geometrically when less than a chunk is free, up to what the longest line allowed
        // needs (a line past it is an error: the buffer never doubles past the limit).
        if self.start > 0 && self.start >= self.end.saturating_sub(self.start) {
            self.buf.copy_within(self.start..self.end, 0);
            self.base = self.base.saturating_add(self.start as u64);
            self.end = self.end.saturating_sub(self.start);
            self.start = 0;
        }
        if self.buf.len().saturating_sub(self.end) < CHUNK {
            let most = MAX_LINE_LEN.saturating_add(CHUNK.saturating_mul(2));
            let want = self
                .end
                .saturating_add(CHUNK)
                .max(self.buf.len().saturating_mul(2).min(most));
            // Exactly: `resize` alone would double the capacity past `most`.
            self.buf.reserve_exact(want.saturating_sub(self.buf.len()));
            self.buf.resize(want, 0);
        }
        loop {
            let room = self.buf.get_mut(self.end..).unwrap_or_default();
            match self.inner.read(room) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.end = self.end.saturating_add(n);
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        offset: Offset(self.base.saturating_add(self.end as u64)),
                        source,
                    });
                }
            }
        }
    }

    /// The next line, or the error that ends the input (after every complete line).
    pub fn next_line(&mut self) -> Option<Result<Line<'_>, Error>> {
        if self.done {
            return None;
        }
        let (line_start, len) = match self.locate() {
            Ok(Some(at)) => at,
            Ok(None) => {
                self.done = true;
                let end = self.base.saturating_add(self.end as u64);
                return self.parser.end(end).map(Err);
            }
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let offset = self.base.saturating_add(line_start as u64);
        if len > MAX_LINE_LEN {
            self.done = true;
            self.parser.lines = self.parser.lines.saturating_add(1);
            return Some(Err(self.parser.error(offset, 0, Problem::LineTooLong)));
        }
        let line = self
            .buf
            .get(line_start..line_start.saturating_add(len))
            .unwrap_or_default();
        let r = self.parser.line(line, offset);
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }

    /// Finds the next line in the buffer, reading more as needed: its start in `buf` and
    /// its length (terminator excluded), `None` at the end of the input.
    fn locate(&mut self) -> Result<Option<(usize, usize)>, Error> {
        let mut scanned = 0usize;
        let (len, next) = loop {
            let pending = self.buf.get(self.start..self.end).unwrap_or_default();
            if let Some(n) = memchr::memchr(b'\n', pending.get(scanned..).unwrap_or_default()) {
                let n = scanned.saturating_add(n);
                break (n, n.saturating_add(1));
            }
            scanned = pending.len();
            if scanned > MAX_LINE_LEN {
                let offset = self.base.saturating_add(self.start as u64);
                self.parser.lines = self.parser.lines.saturating_add(1);
                return Err(self.parser.error(offset, 0, Problem::LineTooLong));
            }
            if self.eof {
                if scanned == 0 {
                    return Ok(None);
                }
                break (scanned, scanned);
            }
            self.fill()?;
        };
        let line_start = self.start;
        self.start = self.start.saturating_add(next);
        Ok(Some((line_start, len)))
    }

    /// The next instruction line (comment lines skipped), or the error that ends the input.
    pub fn next_instruction(&mut self) -> Option<Result<Instruction<'_>, Error>> {
        loop {
            match self.next_line()? {
                Ok(Line::Comment(_)) => {}
                Ok(Line::Instruction(_)) => break,
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(self.parser.current()))
    }

    /// How far the reader is, in bytes.
    #[must_use]
    pub fn position(&self) -> u64 {
        self.base.saturating_add(self.start as u64)
    }

    /// The architecture and counts so far.
    #[must_use]
    pub fn summary(&self) -> Summary {
        self.parser.summary()
    }
}

/// Whether `head` (the first bytes of a file) starts like a Tenet trace: its first line
/// that is not a comment parses as Tenet items with a pc register. Returns the
/// architecture. A first line without a line end (the file's last, or cut by the end of
/// `head`) may also end in a cut item, which is then left out.
#[must_use]
pub fn detect(head: &[u8]) -> Option<Arch> {
    let mut rest = head;
    loop {
        let (line, next) = match memchr::memchr(b'\n', rest) {
            Some(n) => (rest.get(..n)?, rest.get(n.saturating_add(1)..)?),
            None => (rest, &[][..]),
        };
        let unterminated = next.is_empty() && !rest.ends_with(b"\n");
        if line.first() == Some(&raw::COMMENT) {
            rest = next;
            if rest.is_empty() {
                return None;
            }
            continue;
        }
        let parse = |line: &[u8]| {
            let mut p = Parser::new(ReadOptions::default());
            p.line(line, 0).ok().and_then(|l| match l {
                Line::Instruction(i) => Some(i.regs.arch()),
                Line::Comment(_) => None,
            })
        };
        return parse(line).or_else(|| {
            let cut = memchr::memrchr(raw::ITEM_SEPARATOR, line)?;
            unterminated.then(|| parse(line.get(..cut)?)).flatten()
        });
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]
mod tests {
    use quickcheck::QuickCheck;

    use super::*;

    /// `number` digit by digit (the reference for its word-at-a-time path): the value and
    /// end, or the error's column and problem.
    fn reference(line: &[u8], p: usize) -> Result<(u64, usize), (usize, String)> {
        let mut q = p;
        if line.get(q) == Some(&b'0') && matches!(line.get(q + 1), Some(b'x' | b'X')) {
            q += 2;
        }
        let start = q;
        let mut v = 0u64;
        while let Some(d) = line.get(q).and_then(|&c| char::from(c).to_digit(16)) {
            if v >> 60 != 0 {
                return Err((start, "wide".into()));
            }
            v = (v << 4) | u64::from(d);
            q += 1;
        }
        if q == start {
            return Err((q, "none".into()));
        }
        Ok((v, q))
    }

    /// Hex digits of both cases, with bytes around the ranges' edges and non-ASCII bytes
    /// mixed in, give what the digit-by-digit reading gives (value and end; an error at
    /// the same byte).
    #[test]
    fn number_matches_the_digit_by_digit_reading() {
        fn prop(picks: Vec<u8>, at: u8) -> bool {
            const BYTES: &[u8] = b"0123456789abcdefABCDEF0000fff/:@G`gxX,\x80\xb0\xff";
            let line: Vec<u8> = picks
                .iter()
                .map(|&k| BYTES[usize::from(k) % BYTES.len()])
                .collect();
            let p = usize::from(at) % (line.len() + 1);
            let got = number(&line, p, "test").map_err(|At(at, _)| at);
            let want = reference(&line, p).map_err(|(at, _)| at);
            got == want
        }
        QuickCheck::new()
            .tests(20_000)
            .quickcheck(prop as fn(Vec<u8>, u8) -> bool);
    }

    /// Every byte, as each of the eight of a word: the word scan says what the table says.
    #[test]
    fn hex_prefix_matches_the_table() {
        for b in 0..=255u8 {
            for k in 0..8 {
                let mut w = *b"01234567";
                w[k] = b;
                let (values, n) = hex_prefix(u64::from_le_bytes(w));
                let want = if hex(b) == 0xff { k } else { 8 };
                assert_eq!(n, want, "byte {b:#x} at {k}");
                for (i, &c) in w.iter().enumerate().take(n) {
                    assert_eq!((values >> (8 * i)) as u8, hex(c), "byte {b:#x} at {k}");
                }
            }
        }
    }

    /// Keys in any case, with bytes no key has (`\0` among them) and `=` anywhere: where
    /// the one-word reading finds a key, the byte-by-byte reading finds the same.
    #[test]
    fn fast_key_agrees_with_slow_key() {
        fn prop(picks: Vec<u8>) -> bool {
            const PIECES: &[&[u8]] = &[
                b"r8", b"rip", b"RiP", b"mr", b"mrw", b"MW", b"eax", b"r1", b"r15", b"x", b"\0",
                b"=", b",", b"\x80", b"=0x1",
            ];
            let line: Vec<u8> = picks
                .iter()
                .take(4)
                .flat_map(|&k| PIECES[usize::from(k) % PIECES.len()].iter().copied())
                .collect();
            match fast_key(&line, 0) {
                None => true,
                Some(found) => slow_key(&line, 0).ok() == Some(found),
            }
        }
        QuickCheck::new()
            .tests(20_000)
            .quickcheck(prop as fn(Vec<u8>) -> bool);
        assert!(fast_key(b"r8\0=0x1", 0).is_none());
        assert!(matches!(slow_key(b"r8\0=0x1", 0), Err(At(0, _))));
    }

    /// Memory items of every length of digits (odd ones are errors), then a line end or
    /// another item: the bytes are the digits' pairs.
    #[test]
    fn memory_bytes_of_every_length() {
        let digits = "0123456789abcdefFEDCBA9876543210a5c3e1f0b2d4";
        for n in 0..=digits.len() {
            for tail in ["", ",rip=0x1"] {
                let line = format!("rip=0x1,mr=0x10:{}{tail}", &digits[..n]);
                let mut p = Parser::new(ReadOptions::default());
                let got = p.line(line.as_bytes(), 0);
                if n == 0 || n % 2 == 1 {
                    assert!(got.is_err(), "{line}");
                    continue;
                }
                let Ok(Line::Instruction(i)) = got else {
                    panic!("{line}")
                };
                let want: Vec<u8> = (0..n / 2)
                    .map(|k| u8::from_str_radix(&digits[2 * k..2 * k + 2], 16).unwrap())
                    .collect();
                let m: Vec<_> = i.mem().collect();
                assert_eq!(m.len(), 1);
                assert_eq!(m[0].data, &want[..], "{line}");
            }
        }
    }

    /// Every length of digits from 1 to 17, at the end of a line and before more bytes.
    #[test]
    fn every_width_reads_right() {
        for n in 1..=17usize {
            let digits: String = "fedcba9876543210f".chars().take(n).collect();
            for tail in ["", ",rip=0x1", ":00112233445566778899"] {
                let line = format!("0x{digits}{tail}");
                let got = number(line.as_bytes(), 0, "test").map_err(|At(at, _)| at);
                let want = reference(line.as_bytes(), 0).map_err(|(at, _)| at);
                assert_eq!(got, want, "{line}");
            }
        }
    }
}
