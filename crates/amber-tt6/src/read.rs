//! TT6 and TT6E readers: a lazy zero-copy iterator over `&[u8]` ([`Tt6Reader`]) and a
//! constant-memory reader over `io::Read` ([`Tt6StreamReader`]). Both share one decoder.
//!
//! Stream (notes §3): word 0 is the initial PC; then, in the opcode slot, an escape word
//! (top 6 bits zero) and its payload, any number of times, then an instruction whose class
//! decides how many words follow: flow → next PC, memory → EA, memory-extended → EA and a
//! third word. A clean end is EOF at an opcode slot; escapes right before it are "dangling"
//! (kept, reported, not an error). EOF inside a record is [`Error::Truncated`], returned
//! after every complete record.

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::ControlFlow;

use trace_core::{LimitExceeded, Offset, UnexpectedEof};
use zerocopy::FromBytes;

use crate::escape::{EscapeRef, Escapes, SyncEvent};
use crate::opcode::{self, Access, Class, Dialect, StreamControl, classify, is_escape};
use crate::raw::{Word, escape_count};
use crate::write::Instruction;
use crate::{Error, limits};

/// The part a record plays in TT6E's synthetic trap pair (`b 0x700`, then `rfi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SyntheticTrap {
    /// A major-18 branch whose next PC is 0x700 (the trap vector).
    Branch,
    /// The `rfi` right after such a branch (the return from the trap).
    Return,
}

/// One instruction record, with the escapes that preceded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Instruction index (0 = first record after the initial PC; escapes are not counted).
    pub index: u64,
    /// File offset of the opcode word.
    pub offset: Offset,
    /// The classification tables used.
    pub dialect: Dialect,
    /// The instruction's address (initial PC, then PC + 4 or the previous next PC).
    pub pc: u32,
    /// The opcode word.
    pub opcode: u32,
    /// Its class under [`Record::dialect`].
    pub class: Class,
    /// The address of the next instruction: the flow record's word, else `pc + 4`.
    pub next_pc: u32,
    /// The second word of a memory or memory-extended record (0 otherwise); see
    /// [`Record::ea`]. (Plain words rather than `Option`s keep the record cheap to move.)
    second: u32,
    /// The third word of a memory-extended record (0 otherwise); see [`Record::extra`].
    third: u32,
    /// The escape records attached to this instruction.
    pub escapes: Escapes<'a>,
    /// TT6E's synthetic trap pair, recognised.
    pub trap: Option<SyntheticTrap>,
}

impl<'a> Record<'a> {
    /// The data effective address (memory and memory-extended records).
    #[inline]
    #[must_use]
    pub fn ea(&self) -> Option<u32> {
        (self.class as u8 >= Class::Memory as u8).then_some(self.second)
    }

    /// The third word of a memory-extended record: XER (`lswx`/`stswx`, byte count in its
    /// low 7 bits, see [`Record::xer_byte_count`]) or rB (`dst*`, see
    /// [`Record::stream_control`]).
    #[inline]
    #[must_use]
    pub fn extra(&self) -> Option<u32> {
        (self.class == Class::MemoryExtended).then_some(self.third)
    }

    /// The mnemonic, if the opcode is a known one.
    #[must_use]
    pub fn mnemonic(&self) -> Option<&'static str> {
        opcode::mnemonic(self.opcode)
    }

    /// What the instruction does with [`Record::ea`].
    #[must_use]
    pub fn access(&self) -> Option<Access> {
        if self.ea().is_some() {
            opcode::access(self.dialect, self.opcode)
        } else {
            None
        }
    }

    /// Whether it is a store.
    #[must_use]
    pub fn is_store(&self) -> bool {
        self.access() == Some(Access::Store)
    }

    /// The operand size in bytes (notes §7), with `cache_line` bytes for cache-block ops.
    #[must_use]
    pub fn operand_size(&self, cache_line: u32) -> Option<u32> {
        self.ea()?;
        opcode::operand_size(self.dialect, self.opcode, self.extra(), cache_line)
    }

    /// For `lswx`/`stswx`: the byte count from XER (third word `& 0x7F`).
    #[must_use]
    pub fn xer_byte_count(&self) -> Option<u32> {
        match (self.access(), self.extra()) {
            (Some(Access::Load | Access::Store), Some(x)) => Some(x & 0x7F),
            _ => None,
        }
    }

    /// For `dst*`: the stream-control word rB, decoded.
    #[must_use]
    pub fn stream_control(&self) -> Option<StreamControl> {
        match (self.access(), self.extra()) {
            (Some(Access::Stream), Some(x)) => Some(StreamControl::from_word(x)),
            _ => None,
        }
    }

    /// Whether it is a trap instruction (`tw`, `td`, `twi`, `tdi`).
    #[must_use]
    pub fn is_trap(&self) -> bool {
        opcode::is_trap(self.opcode)
    }

    /// Whether control did not fall through to `pc + 4`.
    #[must_use]
    pub fn taken(&self) -> bool {
        self.next_pc != self.pc.wrapping_add(4)
    }

    /// The synchronization events among the escapes.
    pub fn sync_events(&self) -> impl Iterator<Item = SyncEvent> + 'a {
        self.escapes.iter().filter_map(|e| e.sync())
    }

    /// The owned model of this record (for the writers).
    #[must_use]
    pub fn to_instruction(&self) -> Instruction {
        Instruction {
            opcode: self.opcode,
            next_pc: (self.class == Class::Flow).then_some(self.next_pc),
            ea: self.ea(),
            extra: self.extra(),
            escapes: self.escapes.iter().map(|e| e.to_owned()).collect(),
        }
    }
}

/// What one decoding step found.
#[derive(Debug)]
pub(crate) enum Step<'a> {
    /// A record, and how many words it used (escapes included).
    Record(Record<'a>, usize),
    /// A clean end; the escapes (possibly none) left dangling at the end.
    End(Escapes<'a>),
    /// More input is needed (streams only).
    More,
}

/// The decoder state: PC and record index.
#[derive(Clone, Debug)]
pub(crate) struct Decoder {
    dialect: Dialect,
    classifier: opcode::Classifier,
    pc: u32,
    index: u64,
    after_trap_branch: bool,
}

fn words_of(bytes: &[u8]) -> (&[Word], usize) {
    let n = bytes.len() / 4;
    match <[Word]>::ref_from_prefix_with_elems(bytes, n) {
        Ok((w, rest)) => (w, rest.len()),
        Err(_) => (&[], bytes.len()),
    }
}

#[inline]
fn byte_offset(base: u64, words: usize) -> u64 {
    base.saturating_add((words as u64).saturating_mul(4))
}

impl Decoder {
    pub(crate) fn new(dialect: Dialect, pc: u32) -> Decoder {
        Decoder {
            dialect,
            classifier: opcode::Classifier::new(dialect),
            pc,
            index: 0,
            after_trap_branch: false,
        }
    }

    #[cold]
    fn truncated(&self, offset: u64, needed: usize, available: usize) -> Error {
        Error::Truncated {
            record: self.index,
            offset: Offset(offset),
            needed: needed as u64,
            available: available as u64,
        }
    }

    /// The hot path: an instruction record (no escapes) when at least three words are
    /// available, so no length check depends on the class. `None` sends the caller to
    /// [`Decoder::decode`] (an escape, or near the end of the input).
    #[inline(always)]
    pub(crate) fn fast<'a>(&mut self, words: &'a [Word], base: u64) -> Option<(Record<'a>, usize)> {
        let [w0, w1, w2] = words.first_chunk::<3>()?;
        let w = w0.get();
        if is_escape(w) {
            return None;
        }
        let class = self.classifier.classify(w);
        let pc = self.pc;
        let fall = pc.wrapping_add(4);
        // One arm per class: the record length is then predicted by the branch predictor
        // (real traces repeat the same instruction sequences) instead of waiting for the
        // opcode load and table lookup.
        let (n, next_pc, second, third) = match class {
            Class::Compute => (1, fall, 0, 0),
            Class::Flow => (2, w1.get(), 0, 0),
            Class::Memory => (2, fall, w1.get(), 0),
            Class::MemoryExtended => (3, fall, w1.get(), w2.get()),
        };
        let trap = if self.dialect == Dialect::Tt6e {
            self.trap(w, class, next_pc)
        } else {
            None
        };
        let record = Record {
            index: self.index,
            offset: Offset(base),
            dialect: self.dialect,
            pc,
            opcode: w,
            class,
            next_pc,
            second,
            third,
            escapes: Escapes::new(&[], base),
            trap,
        };
        self.pc = next_pc;
        self.index = self.index.wrapping_add(1);
        Some((record, n))
    }

    /// TT6E's synthetic trap pair, tracking the state across records.
    #[inline]
    fn trap(&mut self, w: u32, class: Class, next_pc: u32) -> Option<SyntheticTrap> {
        let t = if class == Class::Flow && opcode::major(w) == 18 && next_pc == 0x700 {
            Some(SyntheticTrap::Branch)
        } else if self.after_trap_branch && opcode::major(w) == 19 && opcode::minor(w) == 50 {
            Some(SyntheticTrap::Return)
        } else {
            None
        };
        self.after_trap_branch = t == Some(SyntheticTrap::Branch);
        t
    }

    /// Decodes one record from `words` (which start at an opcode slot, at file offset
    /// `base`); `tail` is the count of stray bytes after the last whole word, `eof` whether
    /// no more input will come. Updates the PC and index only when a record is returned.
    #[inline]
    pub(crate) fn decode<'a>(
        &mut self,
        words: &'a [Word],
        base: u64,
        tail: usize,
        eof: bool,
    ) -> Result<Step<'a>, Error> {
        let mut i = 0usize;
        loop {
            let Some(w) = words.get(i) else {
                if !eof {
                    return Ok(Step::More);
                }
                if tail == 0 {
                    return Ok(Step::End(Escapes::new(words, base)));
                }
                return Err(self.truncated(byte_offset(base, i), 4, tail));
            };
            let w = w.get();
            if is_escape(w) {
                let end = i
                    .saturating_add(1)
                    .saturating_add(usize::from(escape_count(w)));
                if end > limits::MAX_ESCAPE_WORDS {
                    return Err(LimitExceeded {
                        offset: Offset(byte_offset(base, i)),
                        what: "escape words before one instruction",
                        found: end as u64,
                        limit: limits::MAX_ESCAPE_WORDS as u64,
                    }
                    .into());
                }
                if end > words.len() {
                    if !eof {
                        return Ok(Step::More);
                    }
                    let have = words.len().saturating_sub(i).saturating_mul(4);
                    return Err(self.truncated(
                        byte_offset(base, i),
                        end.saturating_sub(i).saturating_mul(4),
                        have.saturating_add(tail),
                    ));
                }
                i = end;
                continue;
            }
            let class = classify(self.dialect, w);
            let end = i.saturating_add(1).saturating_add(class.extra_words());
            let Some(rest) = words.get(i.saturating_add(1)..end) else {
                if !eof {
                    return Ok(Step::More);
                }
                let have = words.len().saturating_sub(i).saturating_mul(4);
                return Err(self.truncated(
                    byte_offset(base, i),
                    end.saturating_sub(i).saturating_mul(4),
                    have.saturating_add(tail),
                ));
            };
            let second = rest.first().map(|x| x.get());
            let third = rest.get(1).map(|x| x.get());
            let pc = self.pc;
            let fall = pc.wrapping_add(4);
            let (next_pc, second, third) = match class {
                Class::Compute => (fall, 0, 0),
                Class::Flow => (second.unwrap_or(fall), 0, 0),
                Class::Memory => (fall, second.unwrap_or(0), 0),
                Class::MemoryExtended => (fall, second.unwrap_or(0), third.unwrap_or(0)),
            };
            let trap = if self.dialect == Dialect::Tt6e {
                self.trap(w, class, next_pc)
            } else {
                None
            };
            let record = Record {
                index: self.index,
                offset: Offset(byte_offset(base, i)),
                dialect: self.dialect,
                pc,
                opcode: w,
                class,
                next_pc,
                second,
                third,
                escapes: Escapes::new(words.get(..i).unwrap_or_default(), base),
                trap,
            };
            self.pc = next_pc;
            self.index = self.index.wrapping_add(1);
            return Ok(Step::Record(record, end));
        }
    }
}

/// A TT6/TT6E trace in memory: the initial PC and a lazy record iterator.
#[derive(Clone, Debug)]
pub struct Tt6Reader<'a> {
    data: &'a [u8],
    dialect: Dialect,
    initial_pc: u32,
}

impl<'a> Tt6Reader<'a> {
    /// Reads the initial PC of `data`, a TT6 (`dialect` = Tt6) or TT6E trace.
    ///
    /// # Errors
    ///
    /// [`Error::Eof`] when `data` is shorter than one word.
    pub fn parse(data: &'a [u8], dialect: Dialect) -> Result<Tt6Reader<'a>, Error> {
        let initial_pc = trace_core::Cursor::new(data).read_u32_be()?;
        Ok(Tt6Reader {
            data,
            dialect,
            initial_pc,
        })
    }

    /// The PC of the first instruction.
    #[must_use]
    pub fn initial_pc(&self) -> u32 {
        self.initial_pc
    }

    /// The classification tables in use.
    #[must_use]
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The records, lazily; fused after the first error.
    #[must_use]
    pub fn records(&self) -> Records<'a> {
        let body = self.data.get(4..).unwrap_or_default();
        let (words, tail) = words_of(body);
        Records {
            rest: words,
            base: 4,
            tail,
            dec: Decoder::new(self.dialect, self.initial_pc),
            done: false,
            dangling: Escapes::default(),
        }
    }
}

/// The lazy record iterator of a [`Tt6Reader`].
#[derive(Clone, Debug)]
pub struct Records<'a> {
    /// The words not yet decoded.
    rest: &'a [Word],
    /// File offset of `rest[0]`.
    base: u64,
    tail: usize,
    dec: Decoder,
    done: bool,
    dangling: Escapes<'a>,
}

impl<'a> Records<'a> {
    /// Escapes after the last instruction (no instruction to attach them to); meaningful
    /// once the iterator returned `None`.
    #[must_use]
    pub fn dangling_escapes(&self) -> Escapes<'a> {
        self.dangling
    }

    /// The PC the next instruction would have (after the end: the last next PC).
    #[must_use]
    pub fn pc(&self) -> u32 {
        self.dec.pc
    }

    /// Calls `f` with every record left (and the error that ends them), in order, until
    /// `f` breaks: the internal iteration of [`Iterator::fold`] (the decoder state kept in
    /// registers), for a caller that may stop early. The iterator resumes after the last
    /// record `f` saw.
    #[inline]
    pub fn try_for_each_record<B>(
        &mut self,
        mut f: impl FnMut(Result<Record<'a>, Error>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        loop {
            if self.done {
                return ControlFlow::Continue(());
            }
            let mut rest = self.rest;
            let mut base = self.base;
            let mut dec = self.dec.clone();
            let mut flow = ControlFlow::Continue(());
            while let Some((r, n)) = dec.fast(rest, base) {
                // `fast` used three words, so `n <= 3 <= rest.len()`.
                if let Some(r) = rest.get(n..) {
                    rest = r;
                }
                // Offsets of a slice's words cannot overflow a u64.
                base = base.wrapping_add((n as u64).wrapping_mul(4));
                flow = f(Ok(r));
                if flow.is_break() {
                    break;
                }
            }
            self.rest = rest;
            self.base = base;
            self.dec = dec;
            if flow.is_break() {
                return flow;
            }
            // Escapes, the last records or the end: one step of the general path.
            match self.next_slow() {
                Some(item) => {
                    if let ControlFlow::Break(b) = f(item) {
                        return ControlFlow::Break(b);
                    }
                }
                None => return ControlFlow::Continue(()),
            }
        }
    }
}

/// Consecutive records of a [`Records`] walk that fall through one to the next: each but
/// the last has `next_pc == pc + 4` (no taken branch), so their pcs are the words from
/// [`Run::pc`] on. What [`Records::try_for_each_run`] hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// The index of its first record.
    pub first: u64,
    /// The pc of its first record.
    pub pc: u32,
    /// Its records (at least 1).
    pub len: u64,
}

impl<'a> Records<'a> {
    /// Calls `f` with every run of records left ([`Run`]: a run ends at a record whose
    /// next pc is not its pc + 4, compared without wrapping at 2³², or at the end of the
    /// records), and with the error that ends them after the run open before it, until
    /// `f` breaks. The records' other fields are not looked at, so this costs less than
    /// [`Records::try_for_each_record`] with a run kept by the caller. After a break the
    /// iterator resumes after the run `f` saw.
    #[inline]
    pub fn try_for_each_run<B>(
        &mut self,
        mut f: impl FnMut(Result<Run, Error>) -> ControlFlow<B>,
    ) -> ControlFlow<B> {
        // The fast loop of `try_for_each_record`, repeated on purpose: built on it (the run
        // kept in its closure), `tracekit bbv` on TT6 took 1.7 times the CPU.
        // The run open: its first record's index and pc, and its length (0: none).
        let (mut first, mut start, mut len) = (0u64, 0u32, 0u64);
        loop {
            if self.done {
                break;
            }
            let mut rest = self.rest;
            let mut base = self.base;
            let mut dec = self.dec.clone();
            let mut flow = ControlFlow::Continue(());
            while let Some((r, n)) = dec.fast(rest, base) {
                // `fast` used three words, so `n <= 3 <= rest.len()`.
                if let Some(r) = rest.get(n..) {
                    rest = r;
                }
                // Offsets of a slice's words cannot overflow a u64.
                base = base.wrapping_add((n as u64).wrapping_mul(4));
                if len == 0 {
                    (first, start) = (r.index, r.pc);
                }
                len = len.wrapping_add(1);
                if u64::from(r.next_pc) != u64::from(r.pc).wrapping_add(4) {
                    flow = f(Ok(Run {
                        first,
                        pc: start,
                        len,
                    }));
                    len = 0;
                    if flow.is_break() {
                        break;
                    }
                }
            }
            self.rest = rest;
            self.base = base;
            self.dec = dec;
            if flow.is_break() {
                return flow;
            }
            // Escapes, the last records or the end: one step of the general path.
            match self.next_slow() {
                Some(Ok(r)) => {
                    if len == 0 {
                        (first, start) = (r.index, r.pc);
                    }
                    len = len.wrapping_add(1);
                    if u64::from(r.next_pc) != u64::from(r.pc).wrapping_add(4) {
                        let run = Run {
                            first,
                            pc: start,
                            len,
                        };
                        len = 0;
                        f(Ok(run))?;
                    }
                }
                Some(Err(e)) => {
                    if len != 0 {
                        let run = Run {
                            first,
                            pc: start,
                            len,
                        };
                        len = 0;
                        if let ControlFlow::Break(b) = f(Ok(run)) {
                            // The decoder state is as before the error: a resumed walk
                            // meets it again.
                            self.done = false;
                            return ControlFlow::Break(b);
                        }
                    }
                    f(Err(e))?;
                }
                None => break,
            }
        }
        if len != 0 {
            f(Ok(Run {
                first,
                pc: start,
                len,
            }))?;
        }
        ControlFlow::Continue(())
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Some((r, n)) = self.dec.fast(self.rest, self.base) {
            self.advance(n);
            return Some(Ok(r));
        }
        self.next_slow()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            (0, Some(self.rest.len()))
        }
    }

    /// Internal iteration (`for_each`, `fold`, `count`, …): the same records as `next`,
    /// with the decoder state kept in registers.
    #[inline]
    fn fold<B, F>(mut self, init: B, mut f: F) -> B
    where
        F: FnMut(B, Self::Item) -> B,
    {
        let mut acc = init;
        loop {
            if self.done {
                return acc;
            }
            let mut rest = self.rest;
            let mut base = self.base;
            let mut dec = self.dec.clone();
            while let Some((r, n)) = dec.fast(rest, base) {
                // `fast` used three words, so `n <= 3 <= rest.len()`.
                if let Some(r) = rest.get(n..) {
                    rest = r;
                }
                // Offsets of a slice's words cannot overflow a u64.
                base = base.wrapping_add((n as u64).wrapping_mul(4));
                acc = f(acc, Ok(r));
            }
            self.rest = rest;
            self.base = base;
            self.dec = dec;
            // Escapes, the last records or the end: one step of the general path.
            match self.next_slow() {
                Some(item) => acc = f(acc, item),
                None => return acc,
            }
        }
    }
}

impl<'a> Records<'a> {
    #[inline(always)]
    fn advance(&mut self, n: usize) {
        self.rest = self.rest.get(n..).unwrap_or_default();
        self.base = byte_offset(self.base, n);
    }

    #[inline(never)]
    fn next_slow(&mut self) -> Option<Result<Record<'a>, Error>> {
        match self.dec.decode(self.rest, self.base, self.tail, true) {
            Ok(Step::Record(r, n)) => {
                self.advance(n);
                Some(Ok(r))
            }
            Ok(Step::End(e)) => {
                self.dangling = e;
                self.done = true;
                None
            }
            Ok(Step::More) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl core::iter::FusedIterator for Records<'_> {}

/// A TT6/TT6E reader over `io::Read` with a bounded buffer (64 KiB, growing only for long
/// runs of escapes, up to [`limits::MAX_ESCAPE_WORDS`] words). Records borrow the buffer,
/// so this is a lending reader: call [`Tt6StreamReader::next_record`] in a `while let`.
#[derive(Debug)]
pub struct Tt6StreamReader<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    eof: bool,
    /// File offset of `buf[start]`.
    base: u64,
    dec: Decoder,
    done: bool,
    clean_end: bool,
    dialect: Dialect,
    initial_pc: u32,
}

const STREAM_BUF: usize = 64 * 1024;
const MAX_STREAM_BUF: usize = (limits::MAX_ESCAPE_WORDS + 8) * 4;

impl<R: Read> Tt6StreamReader<R> {
    /// Reads the initial PC from `inner`.
    ///
    /// # Errors
    ///
    /// [`Error::Eof`] if the stream is shorter than one word, [`Error::Io`] if it fails.
    pub fn from_reader(inner: R, dialect: Dialect) -> Result<Tt6StreamReader<R>, Error> {
        let mut r = Tt6StreamReader {
            inner,
            buf: vec![0; STREAM_BUF],
            start: 0,
            end: 0,
            eof: false,
            base: 0,
            dec: Decoder::new(dialect, 0),
            done: false,
            clean_end: false,
            dialect,
            initial_pc: 0,
        };
        r.fill_to(4)?;
        let head = r.buf.get(..r.end).unwrap_or_default();
        let Some(pc) = head.first_chunk::<4>().map(|b| u32::from_be_bytes(*b)) else {
            return Err(UnexpectedEof {
                offset: Offset(0),
                needed: 4,
                available: r.end as u64,
            }
            .into());
        };
        r.initial_pc = pc;
        r.dec = Decoder::new(dialect, pc);
        r.start = 4;
        r.base = 4;
        Ok(r)
    }

    /// The PC of the first instruction.
    #[must_use]
    pub fn initial_pc(&self) -> u32 {
        self.initial_pc
    }

    /// The classification tables in use.
    #[must_use]
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// How many bytes of the stream have been consumed by returned records: the file
    /// offset of the next record.
    #[must_use]
    pub fn position(&self) -> Offset {
        Offset(self.base)
    }

    /// Reads until at least `want` bytes are buffered from `start`, or EOF.
    fn fill_to(&mut self, want: usize) -> Result<(), Error> {
        while !self.eof && self.end.saturating_sub(self.start) < want {
            if self.start > 0 && self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end = self.end.saturating_sub(self.start);
                self.start = 0;
            }
            if self.end == self.buf.len() {
                let grow = self.buf.len().saturating_mul(2).min(MAX_STREAM_BUF);
                if grow <= self.buf.len() {
                    return Ok(());
                }
                self.buf.resize(grow, 0);
            }
            let space = self.buf.get_mut(self.end..).unwrap_or_default();
            match self.inner.read(space) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end = self.end.saturating_add(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        offset: Offset(
                            self.base
                                .saturating_add(self.end.saturating_sub(self.start) as u64),
                        ),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// The next record, `None` at the end (or after an error).
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] for a record cut by EOF, [`Error::Io`], [`Error::Limit`].
    pub fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        if self.done {
            return None;
        }
        // Hot path: a whole instruction record (at most 12 bytes) is buffered.
        let buffered = self.end.saturating_sub(self.start);
        let instruction_first = self
            .buf
            .get(self.start..)
            .and_then(|b| b.first_chunk::<4>())
            .is_some_and(|b| !is_escape(u32::from_be_bytes(*b)));
        if buffered >= 12 && instruction_first {
            let avail = self.buf.get(self.start..self.end).unwrap_or_default();
            let (words, _) = words_of(avail);
            let out = self.dec.fast(words, self.base);
            if let Some((_, n)) = &out {
                let bytes = n.wrapping_mul(4);
                self.start = self.start.wrapping_add(bytes);
                self.base = self.base.wrapping_add(bytes as u64);
            }
            // `fast` always succeeds on three words that do not start with an escape.
            return out.map(|(r, _)| Ok(r));
        }
        // Escapes may need more than 12 bytes.
        let mut want = 12usize;
        loop {
            if let Err(e) = self.fill_to(want) {
                self.done = true;
                return Some(Err(e));
            }
            let avail = self.buf.get(self.start..self.end).unwrap_or_default();
            let (words, _) = words_of(avail);
            let simple = avail.len() >= 12 && words.first().is_some_and(|w| !is_escape(w.get()));
            if simple || self.eof || avail.len() < want {
                // `avail.len() < want` without EOF: the buffer cannot grow (unreachable, as
                // the escape limit is checked before a run outgrows it).
                break;
            }
            let mut probe = self.dec.clone();
            match probe.decode(words, self.base, 0, false) {
                Ok(Step::More) => want = avail.len().saturating_add(4),
                _ => break,
            }
        }
        let avail = self.buf.get(self.start..self.end).unwrap_or_default();
        let (words, tail) = words_of(avail);
        match self.dec.decode(words, self.base, tail, self.eof) {
            Ok(Step::Record(r, n)) => {
                let bytes = n.saturating_mul(4);
                self.start = self.start.saturating_add(bytes);
                self.base = self.base.saturating_add(bytes as u64);
                Some(Ok(r))
            }
            Ok(Step::End(_)) => {
                self.done = true;
                self.clean_end = true;
                None
            }
            Ok(Step::More) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// Escapes left after the last instruction, once [`Tt6StreamReader::next_record`]
    /// returned `None`.
    #[must_use]
    pub fn dangling_escapes(&self) -> Escapes<'_> {
        if !self.clean_end {
            return Escapes::default();
        }
        let avail = self.buf.get(self.start..self.end).unwrap_or_default();
        let (words, tail) = words_of(avail);
        if tail == 0 {
            Escapes::new(words, self.base)
        } else {
            Escapes::default()
        }
    }
}

/// Counts of a TT6/TT6E trace, as `tracekit info` prints them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Instructions (records).
    pub instructions: u64,
    /// Records per class, indexed by `Class as usize`.
    pub per_class: [u64; 4],
    /// Escape records per code.
    pub escapes: BTreeMap<u16, u64>,
    /// Synchronization events (signal, broadcast, wait, try-wait escapes).
    pub sync_events: u64,
    /// Taken flow records (next PC ≠ PC + 4).
    pub taken: u64,
    /// Trap instructions and synthetic trap pairs (counted on the branch).
    pub traps: u64,
    /// Escapes after the last instruction.
    pub dangling_escapes: u64,
}

impl Summary {
    /// Adds one record.
    #[inline]
    pub fn add(&mut self, r: &Record<'_>) {
        self.instructions = self.instructions.wrapping_add(1);
        if let Some(c) = self.per_class.get_mut(r.class as usize) {
            *c = c.wrapping_add(1);
        }
        if r.class == Class::Flow && r.taken() {
            self.taken = self.taken.wrapping_add(1);
        }
        if r.is_trap() || r.trap == Some(SyntheticTrap::Branch) {
            self.traps = self.traps.wrapping_add(1);
        }
        if !r.escapes.is_empty() {
            for e in r.escapes {
                self.add_escape(&e);
            }
        }
    }

    /// Records of class `c`.
    #[must_use]
    pub fn class_count(&self, c: Class) -> u64 {
        self.per_class.get(c as usize).copied().unwrap_or(0)
    }

    /// Adds one escape.
    pub fn add_escape(&mut self, e: &EscapeRef<'_>) {
        let n = self.escapes.entry(e.code).or_insert(0);
        *n = n.wrapping_add(1);
        if e.kind().is_sync() {
            self.sync_events = self.sync_events.wrapping_add(1);
        }
    }
}
