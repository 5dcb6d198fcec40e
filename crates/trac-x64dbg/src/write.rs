//! Writing traces: [`Writer`] writes blocks exactly as given (the mirror of the reader,
//! for byte-exact round trips), [`Recorder`] writes them the way x64dbg's `TraceRecord`
//! does from the register state before each instruction (`specs/notes/x64dbg-notes.md`
//! section 4): delta-encoded registers, a full dump at the start of each session and every
//! 512 instructions, thread ids, memory flags.

// Counts and offsets below are bounded by the checks before them (u8 counts, 15-byte
// opcodes, 216 words); none can overflow.
#![allow(clippy::arithmetic_side_effects)]

use std::io::Write;

use trace_core::Offset;

use crate::Error;
use crate::header::{Arch, Header};
use crate::model::{InstructionRecord, MemAccess, Record, ThreadField};
use crate::raw;
use crate::regs::RegDump;

/// Writes blocks as given.
#[derive(Debug)]
pub struct Writer<W> {
    out: W,
    arch: Arch,
    records: u64,
    written: u64,
    scratch: Vec<u8>,
}

impl<W: Write> Writer<W> {
    /// Writes the file prefix and `header`, ready for blocks.
    ///
    /// # Errors
    ///
    /// I/O errors; a header too long to write.
    pub fn new(mut out: W, header: &Header) -> Result<Writer<W>, Error> {
        let bytes = header.to_bytes()?;
        out.write_all(&bytes).map_err(|source| Error::Io {
            offset: Offset(0),
            source,
        })?;
        Ok(Writer {
            out,
            arch: header.arch,
            records: 0,
            written: bytes.len() as u64,
            scratch: Vec::with_capacity(3072),
        })
    }

    /// A writer that appends blocks to an existing trace of `arch` without a header, as
    /// x64dbg does when it records into a non-empty file.
    #[must_use]
    pub fn append(out: W, arch: Arch) -> Writer<W> {
        Writer {
            out,
            arch,
            records: 0,
            written: 0,
            scratch: Vec::with_capacity(3072),
        }
    }

    /// The architecture.
    #[must_use]
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Bytes written so far.
    #[must_use]
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    fn invalid(&self, what: &'static str) -> Error {
        Error::InvalidRecord {
            record: self.records,
            what,
        }
    }

    fn flush_scratch(&mut self) -> Result<(), Error> {
        self.out
            .write_all(&self.scratch)
            .map_err(|source| Error::Io {
                offset: Offset(self.written),
                source,
            })?;
        self.written += self.scratch.len() as u64;
        self.records += 1;
        Ok(())
    }

    fn push_word(&mut self, v: u64) -> Result<(), Error> {
        if v > self.arch.word_max() {
            return Err(self.invalid("a value is wider than the word size"));
        }
        let bytes = v.to_le_bytes();
        self.scratch
            .extend_from_slice(bytes.get(..self.arch.word_size()).unwrap_or(&bytes));
        Ok(())
    }

    /// Writes one instruction block exactly as `rec` describes it (thread field included);
    /// the "unchanged" bit of each memory flag is set from whether `new` is `None`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecord`] for an opcode not 1..=15 bytes, more register changes than
    /// REGDUMP words, indices not strictly increasing or out of range, more than 32 memory
    /// accesses, values wider than the word; I/O errors.
    pub fn write_instruction(&mut self, rec: &InstructionRecord) -> Result<(), Error> {
        let words = self.arch.regdump_words();
        let l = rec.opcode.len();
        if l == 0 || l > usize::from(raw::MAX_OPCODE_LEN) {
            return Err(self.invalid("the opcode must have 1..=15 bytes"));
        }
        if rec.regs.len() > usize::from(words) {
            return Err(self.invalid("more register changes than REGDUMP words"));
        }
        if rec.mem.len() > usize::from(raw::MAX_MEMORY_ACCESSES) {
            return Err(self.invalid("more than 32 memory accesses"));
        }
        self.scratch.clear();
        let mut flags = l as u8;
        if rec.thread_field == ThreadField::Flagged {
            flags |= raw::FLAG_THREAD_ID;
        }
        self.scratch.extend_from_slice(&[
            raw::BLOCK_INSTRUCTION,
            rec.regs.len() as u8,
            rec.mem.len() as u8,
            flags,
        ]);
        if rec.thread_field != ThreadField::Absent {
            self.scratch.extend_from_slice(&rec.thread.to_le_bytes());
        }
        self.scratch.extend_from_slice(&rec.opcode);
        let mut next: u16 = 0;
        for c in &rec.regs {
            if c.index < next || c.index >= words {
                return Err(self.invalid(
                    "register indices must strictly increase and stay inside the REGDUMP",
                ));
            }
            self.scratch.push((c.index - next) as u8);
            next = c.index + 1;
        }
        for c in &rec.regs {
            self.push_word(c.value)?;
        }
        for m in &rec.mem {
            let unchanged = u8::from(m.new.is_none());
            self.scratch
                .push((m.flags & !raw::MEM_UNCHANGED) | unchanged);
        }
        for m in &rec.mem {
            self.push_word(m.address)?;
        }
        for m in &rec.mem {
            self.push_word(m.old)?;
        }
        for m in &rec.mem {
            if let Some(v) = m.new {
                self.push_word(v)?;
            }
        }
        self.flush_scratch()
    }

    /// Writes a user block (type `0x80..=0xff`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidRecord`] for a type below 0x80 or a payload of 4 GiB or more; I/O
    /// errors.
    pub fn write_user_block(&mut self, block_type: u8, payload: &[u8]) -> Result<(), Error> {
        if block_type < raw::BLOCK_USER_MIN {
            return Err(self.invalid("user block types are 0x80..=0xff"));
        }
        let len = u32::try_from(payload.len())
            .map_err(|_| self.invalid("user block payload of 4 GiB or more"))?;
        self.scratch.clear();
        self.scratch.push(block_type);
        self.scratch.extend_from_slice(&len.to_le_bytes());
        self.scratch.extend_from_slice(payload);
        self.flush_scratch()
    }

    /// Writes a record.
    ///
    /// # Errors
    ///
    /// As [`Writer::write_instruction`] and [`Writer::write_user_block`].
    pub fn write_record(&mut self, rec: &Record) -> Result<(), Error> {
        match rec {
            Record::Instruction(i) => self.write_instruction(i),
            Record::User {
                block_type,
                payload,
            } => self.write_user_block(*block_type, payload),
        }
    }

    /// Flushes and returns the output.
    ///
    /// # Errors
    ///
    /// I/O errors of the flush.
    pub fn finish(mut self) -> Result<W, Error> {
        self.out.flush().map_err(|source| Error::Io {
            offset: Offset(self.written),
            source,
        })?;
        Ok(self.out)
    }
}

/// A whole trace as bytes: header then records, written as given.
///
/// # Errors
///
/// As [`Writer::write_record`].
pub fn write_records(header: &Header, records: &[Record]) -> Result<Vec<u8>, Error> {
    let mut w = Writer::new(Vec::new(), header)?;
    for r in records {
        w.write_record(r)?;
    }
    w.finish()
}

/// Options of the [`Recorder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecorderOptions {
    /// A full dump every this many instructions of a session (x64dbg: 512; 0 means only at
    /// the start of each session).
    pub full_dump_interval: u32,
    /// Reproduce the thread-id bug of x64dbg before PR #3920: after a thread switch, the
    /// first block of the new thread carries the thread id without the flag.
    pub legacy_thread_ids: bool,
    /// List a word also in the block of the instruction about to change it, with its
    /// unchanged value, as x64dbg does (true, the default). False lists only the words that
    /// differ from the previous block (and every word in a full dump): the same state for
    /// every reader, x64dbg's included, in about a quarter fewer register entries.
    pub lookahead: bool,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            full_dump_interval: raw::FULL_DUMP_INTERVAL,
            legacy_thread_ids: false,
            lookahead: true,
        }
    }
}

/// One executed instruction as the [`Recorder`] takes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The thread that executes it.
    pub thread: u32,
    /// Its bytes (1..=15).
    pub opcode: Vec<u8>,
    /// The register state before it executes (its instruction pointer included).
    pub regs: RegDump,
    /// Its memory accesses (at most 32).
    pub mem: Vec<MemAccess>,
}

/// Writes instructions the way x64dbg records them, from the state before each one. Like
/// x64dbg, block N is written when step N+1 arrives, because it lists the words that change
/// across N; unlike x64dbg, the last step is written too (by [`Recorder::finish`] or
/// [`Recorder::new_session`]), listing only the words that changed across the step before.
#[derive(Debug)]
pub struct Recorder<W> {
    writer: Writer<W>,
    opts: RecorderOptions,
    prev: Option<RegDump>,
    pending: Option<Step>,
    pending_users: Vec<(u8, Vec<u8>)>,
    in_session: u64,
    latch: bool,
    record: InstructionRecord,
}

impl<W: Write> Recorder<W> {
    /// A recorder writing to `writer` (new file or [`Writer::append`]).
    #[must_use]
    pub fn new(writer: Writer<W>, opts: RecorderOptions) -> Recorder<W> {
        Recorder {
            writer,
            opts,
            prev: None,
            pending: None,
            pending_users: Vec::new(),
            in_session: 0,
            latch: true,
            record: InstructionRecord::default(),
        }
    }

    /// Records one executed instruction.
    ///
    /// # Errors
    ///
    /// A step of another architecture; the errors of [`Writer::write_instruction`] for the
    /// previous step.
    pub fn step(&mut self, step: Step) -> Result<(), Error> {
        if step.regs.arch() != self.writer.arch {
            return Err(self
                .writer
                .invalid("register state of another architecture"));
        }
        if let Some(cur) = self.pending.take() {
            self.emit(cur, Some(&step))?;
        }
        self.pending = Some(step);
        Ok(())
    }

    /// Adds a user block after the instructions recorded so far.
    ///
    /// # Errors
    ///
    /// As [`Writer::write_user_block`].
    pub fn user_block(&mut self, block_type: u8, payload: &[u8]) -> Result<(), Error> {
        if self.pending.is_some() {
            self.pending_users.push((block_type, payload.to_vec()));
            Ok(())
        } else {
            self.writer.write_user_block(block_type, payload)
        }
    }

    /// Ends the recording session and starts another one in the same file (no header, a new
    /// full dump), as when x64dbg records again into an existing trace.
    ///
    /// # Errors
    ///
    /// As [`Writer::write_instruction`].
    pub fn new_session(&mut self) -> Result<(), Error> {
        if let Some(cur) = self.pending.take() {
            self.emit(cur, None)?;
        }
        self.prev = None;
        self.in_session = 0;
        self.latch = true;
        Ok(())
    }

    /// Writes the last step and returns the output.
    ///
    /// # Errors
    ///
    /// As [`Writer::write_instruction`].
    pub fn finish(mut self) -> Result<W, Error> {
        self.new_session()?;
        self.writer.finish()
    }

    fn emit(&mut self, cur: Step, next: Option<&Step>) -> Result<(), Error> {
        let interval = u64::from(self.opts.full_dump_interval);
        let full = if interval == 0 {
            self.in_session == 0
        } else {
            self.in_session.is_multiple_of(interval)
        };
        let rec = &mut self.record;
        rec.regs.clear();
        let now = cur.regs.words();
        for (i, &v) in now.iter().enumerate() {
            let before = self.prev.as_ref().is_some_and(|p| p.word(i) != v);
            let after = self.opts.lookahead && next.is_some_and(|n| n.regs.word(i) != v);
            if full || before || after {
                rec.regs.push(crate::RegChange {
                    index: i as u16,
                    value: v,
                });
            }
        }
        let changed = next.is_some_and(|n| n.thread != cur.thread);
        let write = changed || self.latch || full;
        let flag = if self.opts.legacy_thread_ids {
            changed || full
        } else {
            write
        };
        if write {
            self.latch = changed;
        }
        rec.thread = cur.thread;
        rec.thread_field = match (write, flag) {
            (true, true) => ThreadField::Flagged,
            (true, false) => ThreadField::Unflagged,
            (false, _) => ThreadField::Absent,
        };
        rec.opcode.clear();
        rec.opcode.extend_from_slice(&cur.opcode);
        rec.mem.clear();
        rec.mem.extend_from_slice(&cur.mem);
        let rec = core::mem::take(&mut self.record);
        let result = self.writer.write_instruction(&rec);
        self.record = rec;
        result?;
        self.in_session += 1;
        self.prev = Some(cur.regs);
        for (t, p) in core::mem::take(&mut self.pending_users) {
            self.writer.write_user_block(t, &p)?;
        }
        Ok(())
    }
}
