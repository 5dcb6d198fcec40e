//! x64dbg run traces (`trac-x64dbg`): one record per instruction (user blocks are not
//! instructions; `info` counts them).
//!
//! Tables (for columnar sinks): `instructions` (`i` key, `offset`, `thread`, `pc`,
//! `opcode`, then the general registers before the instruction, one column each: `rax`,
//! `rcx`, `rdx`, `rbx`, `rsp`, `rbp`, `rsi`, `rdi`, `r8`…`r15`, `rip`, `rflags` on x64,
//! `eax`…`edi`, `eip`, `eflags` on x86; and `words`, the `REGDUMP` words the block records
//! when `registers` does not tell them), `registers` (`i`, `name`, `value` or `wide`: every
//! named field of each word the block records, [`trac_x64dbg::RegLayout::show`]) and
//! `memory` (`i`, `addr`, `old`, `new`). JSON Lines does not show the register columns
//! (`regs` shows what the block records, one key per register or flag: `gs`, `st0`, `fcw`,
//! `xmm0`, `flags.z`; no key joins fields or is a byte range).
//!
//! With [`Options::disasm`](crate::Options::disasm), `instructions` gets `asm` after `opcode`
//! (null when the bytes do not decode) and each `memory` row `size` (the operand's bytes in
//! the recorded word, null when not matched) and `access` (`read`, `write`, `readwrite` or
//! `unknown`), as [`crate::disasm`] matches them; the steps' accesses are sized the same way.

use std::collections::BTreeMap;
use std::sync::Arc;

use std::borrow::Cow;

use smallvec::SmallVec;

use trac_x64dbg::{
    Arch, Block, Counters, Cursor, General, Header, Index, Instruction, Pc, RegChange, RegDump,
    RegLayout, RegisterField, StreamReader, Trace, general_names, raw, reg_layout, register_fields,
};

use crate::disasm::Disassembler;
use crate::schema::{ColumnSink, Row, Schema, Visitor};
use crate::steps::{
    self, Indexing, Isa, NamedReg, OnStep, Os, Passed, Raw, RegCopy, RegPlan, RegSource, RegValue,
    Registers, RegsWanted, ScanQuery, SeekIndex, Step, Steps,
};
use crate::{Confidence, Ctx, Error, Handler, Hex, Info, Input, Note, Record, Records, Source};

mod blocks;
mod table;

use table::{DisasmRow, InstructionColumns, InstructionRow, StateStage};

/// The x64dbg handler.
#[derive(Debug)]
pub struct X64dbg;

const NAME: &str = "x64dbg";

fn err(e: trac_x64dbg::Error) -> Error {
    Error::format(NAME, e)
}

/// How many words of the `REGDUMP` are general registers, the instruction pointer and the
/// flags: they lead it (rax…r15, rip, rflags; eax…edi, eip, eflags).
use trac_x64dbg::general_words as state_words;

/// What one pass over the blocks learns, for `info` and `validate`.
#[derive(Default)]
struct Summary {
    instructions: u64,
    blocks: u64,
    threads: BTreeMap<u32, u64>,
    user_blocks: BTreeMap<u8, u64>,
    first_pc: Option<u64>,
    last_pc: Option<u64>,
    first_recovered: Option<u64>,
    reserved_bits: u64,
    /// The replay's own counts, read at the end.
    counters: Counters,
}

/// Blocks with the register state before each: the full cursor over bytes or a stream
/// reader, or the cursor of the general registers over bytes ([`Registers::want_regs`](crate::steps::Registers::want_regs)).
enum Blocks<'a> {
    Slice(Box<Cursor<'a>>),
    Stream(Box<StreamReader<Box<dyn std::io::Read + Send>>>),
    General(Box<Cursor<'a, General>>),
}

impl Blocks<'_> {
    fn next_block_with_regs(
        &mut self,
    ) -> Option<Result<(Block<'_>, &RegDump), trac_x64dbg::Error>> {
        match self {
            Blocks::Slice(r) => with_regs(r.next_block(), r.regs()),
            Blocks::Stream(r) => r.next_block_with_regs(),
            Blocks::General(r) => with_regs(r.next_block(), r.regs()),
        }
    }

    fn regs(&self) -> &RegDump {
        match self {
            Blocks::Slice(r) => r.regs(),
            Blocks::Stream(r) => r.regs(),
            Blocks::General(r) => r.regs(),
        }
    }

    fn offset(&self) -> u64 {
        match self {
            Blocks::Slice(r) => r.offset().0,
            Blocks::Stream(r) => r.offset().0,
            Blocks::General(r) => r.offset().0,
        }
    }

    fn counters(&self) -> Counters {
        match self {
            Blocks::Slice(r) => r.counters(),
            Blocks::Stream(r) => r.counters(),
            // The summary never reads through the general cursor.
            Blocks::General(r) => r.counters(),
        }
    }
}

/// A step of a cursor with its state.
fn with_regs<T>(
    next: Option<Result<T, trac_x64dbg::Error>>,
    regs: &RegDump,
) -> Option<Result<(T, &RegDump), trac_x64dbg::Error>> {
    Some(next?.map(|x| (x, regs)))
}

/// Bit `k` for a change of `REGDUMP` word `k` (words from 64 on have none).
fn change_bit(change: RegChange) -> u64 {
    1u64.checked_shl(u32::from(change.index)).unwrap_or(0)
}

/// The header, the offset of the first block, and the blocks: in place for a file, through
/// the streaming reader (constant memory) for stdin and compressed input.
fn open<'a>(input: &'a mut Input) -> Result<(Header, u64, Blocks<'a>), Error> {
    open_trace(input).map(|(h, first, blocks, _)| (h, first, blocks))
}

/// [`open`], with the trace in place (for seeks) when it is one.
fn open_trace<'a>(
    input: &'a mut Input,
) -> Result<(Header, u64, Blocks<'a>, Option<Trace<'a>>), Error> {
    Ok(match input.source() {
        Source::Bytes(b) => {
            let trace = Trace::parse(b).map_err(err)?;
            let first = trace.first_block_offset().0;
            (
                trace.header().clone(),
                first,
                Blocks::Slice(Box::new(trace.replay())),
                Some(trace),
            )
        }
        Source::Stream(s) => {
            let reader = StreamReader::from_reader(s).map_err(err)?;
            let first = reader.offset().0;
            (
                reader.header().clone(),
                first,
                Blocks::Stream(Box::new(reader)),
                None,
            )
        }
    })
}

fn summarize(blocks: &mut Blocks<'_>, ctx: &mut Ctx<'_>) -> (Summary, Option<Error>) {
    let mut s = Summary::default();
    let mut error = None;
    while let Some(block) = blocks.next_block_with_regs() {
        match block {
            Ok((Block::Instruction(ins), regs)) => {
                s.instructions = s.instructions.saturating_add(1);
                let n = s.threads.entry(ins.thread()).or_default();
                *n = n.saturating_add(1);
                let pc = regs.ip();
                s.first_pc.get_or_insert(pc);
                s.last_pc = Some(pc);
                if ins.thread_field() == trac_x64dbg::ThreadField::Unflagged {
                    s.first_recovered.get_or_insert(ins.offset().0);
                }
                if ins.flags() & raw::FLAGS_RESERVED != 0 {
                    s.reserved_bits = s.reserved_bits.saturating_add(1);
                }
                if s.instructions.is_multiple_of(4096) {
                    ctx.progress(ins.offset().0);
                }
            }
            Ok((Block::User(u), _)) => {
                let n = s.user_blocks.entry(u.block_type).or_default();
                *n = n.saturating_add(1);
            }
            Err(e) => {
                error = Some(err(e));
                break;
            }
        }
        s.blocks = s.blocks.saturating_add(1);
    }
    s.counters = blocks.counters();
    (s, error)
}

fn diagnostics(first_block_offset: u64, s: &Summary) -> Vec<String> {
    let mut d = Vec::new();
    if s.counters.recovered_thread_ids > 0 {
        d.push(format!(
            "{} block(s) carry thread-id bytes without the 0x80 flag (x64dbg before PR #3920); recovered, first at offset {:#x}",
            s.counters.recovered_thread_ids,
            s.first_recovered.unwrap_or(0)
        ));
    }
    if s.counters.started_without_dump {
        d.push(
            "the first instruction is not a full register dump: registers start as zeros".into(),
        );
    }
    if s.reserved_bits > 0 {
        d.push(format!(
            "{} block(s) have reserved flag bits 4-6 set",
            s.reserved_bits
        ));
    }
    if first_block_offset.saturating_sub(8) > u64::from(raw::X64DBG_HEADER_LIMIT) {
        d.push(format!(
            "the JSON header is longer than x64dbg's limit of {} bytes: x64dbg will not open it",
            raw::X64DBG_HEADER_LIMIT
        ));
    }
    if s.instructions > u64::from(u32::MAX) {
        d.push("more than 2^32-1 instructions: x64dbg cannot index them all".into());
    }
    d
}

/// The header as a summary value: its JSON fields in file order.
fn header_info(h: &Header) -> Info {
    let mut info = Info::new()
        .with("version", 1u32)
        .with("arch", h.arch.name())
        .with("hashAlgorithm", h.hash_algorithm.clone())
        .with("hash", h.hash.clone())
        .with("compression", h.compression.clone())
        .with("path", h.path.clone());
    for (k, v) in &h.extra {
        info.push(k.clone(), v.to_string());
    }
    info
}

impl Handler for X64dbg {
    fn name(&self) -> &'static str {
        NAME
    }

    fn recognised_by(&self) -> &'static str {
        "magic \"TRAC\""
    }

    fn detect(&self, head: &[u8], _file_name: &str) -> Option<Confidence> {
        head.starts_with(&raw::MAGIC).then_some(Confidence::Magic)
    }

    fn info(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let (h, first, mut blocks) = open(input)?;
        let (s, error) = summarize(&mut blocks, ctx);
        if let Some(e) = error {
            return Err(e);
        }
        let threads: Vec<Info> = s
            .threads
            .iter()
            .map(|(t, n)| Info::new().with("id", *t).with("instructions", *n))
            .collect();
        let users: Vec<Info> = s
            .user_blocks
            .iter()
            .map(|(t, n)| {
                Info::new()
                    .with("type", Hex(u64::from(*t)))
                    .with("count", *n)
            })
            .collect();
        Ok(Info::new()
            .with("format", NAME)
            .with("arch", h.arch.name())
            .with("word_size", h.arch.word_size())
            .with("regdump_words", h.arch.regdump_words())
            .with("header", header_info(&h))
            .with("header_length", first.saturating_sub(8))
            .with("instructions", s.instructions)
            .with("blocks", s.blocks)
            .with("threads", threads)
            .with("full_dumps", s.counters.full_dumps)
            .with("sessions", s.counters.sessions)
            .with("user_blocks", users)
            .with("first_pc", s.first_pc.map(Hex))
            .with("last_pc", s.last_pc.map(Hex))
            .with("diagnostics", diagnostics(first, &s)))
    }

    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let (_, first, mut blocks) = open(input)?;
        let (s, error) = summarize(&mut blocks, ctx);
        for d in diagnostics(first, &s) {
            ctx.diagnostic(&format!("note: {d}"));
        }
        match error {
            Some(e) => Err(e),
            None => Ok(Info::new()
                .with("instructions", s.instructions)
                .with("blocks", s.blocks)),
        }
    }

    fn records<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error> {
        let (h, _, blocks, trace) = open_trace(input)?;
        let disasm = ctx.options.disasm.then(|| DisasmRow::new(h.arch));
        Ok(Box::new(X64Records {
            tables: [table::schema(h.arch, disasm.is_some())],
            layout: reg_layout(h.arch),
            state_words: state_words(h.arch),
            blocks,
            trace,
            current: None,
            pending: false,
            failed: None,
            disasm,
            done: false,
            stage: None,
            recovered_before: 0,
        }))
    }

    fn steps<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Steps + 'a>, Error> {
        Ok(Box::new(X64Steps::open(input, ctx)?))
    }

    /// The blocks of the default, from the lean pc walk for a trace in memory (see the
    /// `blocks` module).
    fn blocks<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn crate::blocks::Blocks + 'a>, Error> {
        if input.is_stream() {
            return Ok(Box::new(crate::blocks::StepBlocks::new(
                self.steps(input, ctx)?,
            )));
        }
        let trace = Trace::parse(input.loaded_bytes()).map_err(err)?;
        Ok(Box::new(blocks::X64Blocks::new(
            trace.cursor::<Pc>(),
            isa(trace.arch()),
        )))
    }
}

impl<'a> X64Steps<'a> {
    /// The steps of an x64dbg input: in place (seekable) or streamed.
    fn open(input: &'a mut Input, ctx: &mut Ctx<'_>) -> Result<X64Steps<'a>, Error> {
        // The seek index kept in a sidecar index file, when there is a usable one.
        let saved = trace_index::load_seek_index(input, ctx, NAME);
        let (trace, blocks) = match input.source() {
            Source::Bytes(b) => {
                let trace = Trace::parse(b).map_err(err)?;
                let blocks = Blocks::Slice(Box::new(trace.replay()));
                (Some(trace), blocks)
            }
            Source::Stream(s) => {
                let reader = StreamReader::from_reader(s).map_err(err)?;
                (None, Blocks::Stream(Box::new(reader)))
            }
        };
        let arch = trace
            .as_ref()
            .map_or_else(|| blocks.regs().arch(), Trace::arch);
        let isa = isa(arch);
        let header = match (&trace, &blocks) {
            (Some(t), _) => Some(t.header()),
            (None, Blocks::Stream(r)) => Some(r.header()),
            _ => None,
        };
        let os = os_of(header.and_then(|h| h.path.as_deref()));
        Ok(X64Steps {
            isa,
            os,
            disasm: ctx.options.disasm.then(|| Disassembler::new(isa)),
            word: u32::try_from(arch.word_size()).unwrap_or(8),
            names: general_names(arch).map(Cow::Borrowed).collect(),
            fields: register_fields(arch),
            index: saved
                .and_then(|bytes| Index::from_bytes(&bytes))
                .map(Arc::new),
            trace,
            blocks,
            step: Step::default(),
            pending: false,
            done: false,
            replayed: 0,
            ahead: Ahead::No,
            dirty: [0; 4],
            all_dirty: true,
            tracking: false,
            lean: false,
            changed: u64::MAX,
        })
    }
}

/// The system of a trace whose header names `path`: Windows (x64dbg's), unless the path is
/// a Unix one (`/…`, as `tracekit record` writes).
fn os_of(path: Option<&str>) -> Os {
    match path {
        Some(p) if p.starts_with('/') => Os::Unix,
        _ => Os::Windows,
    }
}

fn isa(arch: Arch) -> Isa {
    match arch {
        Arch::X64 => Isa::X64,
        Arch::X86 => Isa::X86,
    }
}

/// The instruction stream of an x64dbg trace: the replay, with the index for `seek` (built
/// on the first seek) when the trace is in memory.
struct X64Steps<'a> {
    isa: Isa,
    /// The system the program ran on ([`Steps::os`]).
    os: Os,
    /// With `--disasm`: sizes and classifies the steps' accesses.
    disasm: Option<Disassembler>,
    /// The size of a recorded memory word.
    word: u32,
    names: Vec<Cow<'static, str>>,
    fields: &'static [RegisterField],
    /// The trace in memory, for seeking; `None` for a stream.
    trace: Option<Trace<'a>>,
    /// The seek index: built here, or taken parsed from a caller's [`SeekIndex`].
    index: Option<Arc<Index>>,
    blocks: Blocks<'a>,
    step: Step,
    /// `step` is already read (by a seek) and is what the next `next_step` returns.
    pending: bool,
    done: bool,
    /// The blocks the last seek replayed after the index (its work past the binary search).
    replayed: u64,
    /// Where [`Raw::pass_equal`](crate::steps::Raw::pass_equal) or [`Raw::pass_records`](crate::steps::Raw::pass_records) left the stream, ahead of
    /// the replay, which the next read catches up to.
    ahead: Ahead<'a>,
    /// The `REGDUMP` words changed since the last [`Registers::update_regs`](crate::steps::Registers::update_regs), one bit each
    /// (216 words at most).
    dirty: [u64; 4],
    /// Every word may have changed (a full dump, or the stream moved other than by
    /// `next_step`: a seek or a pass).
    all_dirty: bool,
    /// [`Registers::update_regs`](crate::steps::Registers::update_regs) has been called: `dirty` is kept (`all_dirty` covers the
    /// steps before).
    tracking: bool,
    /// [`RegsWanted::General`]: the general cursor when the trace is in memory.
    lean: bool,
    /// The general words the last block set under the general cursor
    /// ([`Registers::regs_changed`](crate::steps::Registers::regs_changed); every bit after a seek).
    changed: u64,
}

/// Where an [`X64Steps`] is ahead of its replay after passing records without reading
/// them.
enum Ahead<'a> {
    /// Not ahead.
    No,
    /// [`Raw::pass_equal`](crate::steps::Raw::pass_equal) walked the blocks to here: their iterator, with its decoder
    /// state.
    Walked(trac_x64dbg::Blocks<'a>),
    /// [`Raw::pass_records`](crate::steps::Raw::pass_records) was told of the records to here (not even walked): the
    /// offset, the steps since the replay's position and the key there.
    Told { to: u64, steps: u64, key: u64 },
}

impl<'a> X64Steps<'a> {
    /// Catches the replay up to the blocks [`Raw::pass_equal`](crate::steps::Raw::pass_equal) or
    /// [`Raw::pass_records`](crate::steps::Raw::pass_records) passed over: replays them, or, for a long stretch, seeks
    /// to its last instruction through the index (one index pass, then at most one
    /// full-dump interval of replay).
    fn caught_up(&mut self) -> Result<(), Error> {
        let (Some(trace), Blocks::Slice(r)) = (&self.trace, &mut self.blocks) else {
            return Ok(());
        };
        // The offset passed to and the number of the next instruction there.
        let (to, next) = match std::mem::replace(&mut self.ahead, Ahead::No) {
            Ahead::Walked(w) => (w.offset().0, w.instructions()),
            Ahead::Told { to, steps, .. } => (to, r.instructions().saturating_add(steps)),
            Ahead::No => return Ok(()),
        };
        let gap = to.saturating_sub(r.offset().0);
        // Replaying runs at about a tenth of the index pass's speed (per byte): seek once
        // the gap is a sixteenth of the trace, or whenever the index is already built.
        let far = self.index.is_some() || gap > trace.data().len() as u64 / 16;
        if far && let Some(last) = next.checked_sub(1) {
            let index = self
                .index
                .get_or_insert_with(|| Arc::new(trace.index_builder().finish().0));
            if last < index.instructions() {
                match trace.seek(index, last) {
                    Ok((_, replay)) => {
                        **r = replay;
                        return Ok(());
                    }
                    Err(e) => {
                        self.done = true;
                        return Err(err(e));
                    }
                }
            }
        }
        while r.offset().0 < to {
            match r.next_block() {
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    self.done = true;
                    return Err(err(e));
                }
                None => break,
            }
        }
        Ok(())
    }

    /// Fills `step` from an instruction and the registers before it; with a disassembler,
    /// sizes and classifies its accesses (`state_words`: the words [`Steps::regs`] gives).
    fn fill(
        step: &mut Step,
        word: u32,
        ins: &Instruction<'_>,
        regs: &RegDump,
        disasm: Option<&mut Disassembler>,
        state_words: usize,
    ) {
        Self::fill_lean(step, word, ins, regs.ip());
        if let Some(d) = disasm {
            let words = regs.words();
            d.annotate_step(step, words.get(..state_words).unwrap_or(words));
        }
    }

    /// [`X64Steps::fill`] without registers or disassembly: what a scan hands out.
    fn fill_lean(step: &mut Step, word: u32, ins: &Instruction<'_>, pc: u64) {
        step.clear();
        step.i = ins.index();
        step.thread = u64::from(ins.thread());
        step.pc = pc;
        let opcode = ins.opcode();
        // The opcode starts after the 4 fixed bytes and the thread id, if any; the block
        // goes on after it (register changes, accesses), so it is usually taken as 16
        // bytes, a copy of constant size, and cut to its length (at most 15).
        let start = if ins.thread_field() == trac_x64dbg::ThreadField::Absent {
            4
        } else {
            8
        };
        match ins.bytes().get(start..).and_then(<[u8]>::first_chunk::<16>) {
            Some(window) if opcode.len() < 16 => {
                step.opcode = SmallVec::from_buf_and_len(*window, opcode.len());
            }
            _ => step.opcode.extend_from_slice(opcode),
        }
        for m in ins.mem() {
            step.push_word(m.address, word, m.old, m.new);
        }
    }
}

impl Steps for X64Steps<'_> {
    fn isa(&self) -> Isa {
        self.isa
    }

    fn os(&self) -> Os {
        self.os
    }

    fn reg_names(&self) -> &[Cow<'static, str>] {
        &self.names
    }

    fn next_step(&mut self) -> Option<Result<&Step, Error>> {
        if let Err(e) = self.caught_up() {
            return Some(Err(e));
        }
        if std::mem::take(&mut self.pending) {
            return Some(Ok(&self.step));
        }
        if self.done {
            return None;
        }
        // In memory, the cursor marks the words changed as it applies them.
        let marked = self.tracking && matches!(self.blocks, Blocks::Slice(_));
        let next = match &mut self.blocks {
            Blocks::Slice(r) if marked => {
                let dirty = &mut self.dirty;
                let next = r.next_instruction_with(|c| {
                    let i = usize::from(c.index);
                    if let Some(bits) = dirty.get_mut(i >> 6) {
                        *bits |= 1 << (i & 63);
                    }
                });
                with_regs(next, r.regs())
            }
            Blocks::Slice(r) => with_regs(r.next_instruction(), r.regs()),
            Blocks::Stream(r) => r.next_instruction_with_regs(),
            Blocks::General(r) => {
                let changed = &mut self.changed;
                *changed = 0;
                let next = r.next_instruction_with(|c| *changed |= change_bit(c));
                with_regs(next, r.regs())
            }
        };
        match fuse(&mut self.done, next)? {
            Ok((ins, regs)) => {
                if ins.is_full_dump() {
                    self.all_dirty = true;
                } else if self.tracking && !marked {
                    for c in ins.regs() {
                        let i = usize::from(c.index);
                        if let Some(bits) = self.dirty.get_mut(i >> 6) {
                            *bits |= 1 << (i & 63);
                        }
                    }
                }
                let disasm = self.disasm.as_mut();
                Self::fill(
                    &mut self.step,
                    self.word,
                    &ins,
                    regs,
                    disasm,
                    self.names.len(),
                );
                Some(Ok(&self.step))
            }
            Err(e) => Some(Err(e)),
        }
    }

    fn regs(&self) -> &[u64] {
        let words = self.blocks.regs().words();
        words.get(..self.names.len()).unwrap_or(words)
    }

    fn named_regs(&self, out: &mut Vec<NamedReg>) {
        let regs = self.blocks.regs();
        out.extend(self.fields.iter().map(|f| {
            let bytes = regs.field(f);
            let value = if bytes.len() <= 8 {
                let mut w = [0u8; 8];
                w.get_mut(..bytes.len())
                    .unwrap_or_default()
                    .copy_from_slice(&bytes);
                RegValue::Word(u64::from_le_bytes(w))
            } else {
                RegValue::Wide(bytes.into_iter().collect())
            };
            NamedReg {
                name: Cow::Borrowed(f.name),
                value,
            }
        }));
    }

    fn seek(&mut self, n: u64) -> Result<(), Error> {
        self.all_dirty = true;
        // The seek sets the position: what was passed over needs no catching up.
        self.ahead = Ahead::No;
        let Some(trace) = &self.trace else {
            steps::seek_by_scan(self, n)?;
            self.pending = true;
            return Ok(());
        };
        // The index of the complete blocks: instructions before damage can be reached.
        let index = match &self.index {
            Some(index) => index,
            None => self
                .index
                .insert(Arc::new(trace.index_builder().finish().0)),
        };
        if n >= index.instructions() {
            return Err(past_the_index(trace, index, n));
        }
        let (ins, replay) = trace.seek(index, n).map_err(err)?;
        self.replayed = replay.blocks_read();
        let disasm = self.disasm.as_mut();
        Self::fill(
            &mut self.step,
            self.word,
            &ins,
            replay.regs(),
            disasm,
            self.names.len(),
        );
        self.changed = u64::MAX;
        self.blocks = if self.lean {
            Blocks::General(Box::new(replay.into_mode()))
        } else {
            Blocks::Slice(Box::new(replay))
        };
        self.pending = true;
        self.done = false;
        Ok(())
    }

    fn position(&self) -> u64 {
        match &self.ahead {
            Ahead::Walked(w) => w.offset().0,
            Ahead::Told { to, .. } => *to,
            Ahead::No => self.blocks.offset(),
        }
    }

    fn registers(&mut self) -> Option<&mut dyn Registers> {
        Some(self)
    }

    fn raw(&mut self) -> Option<&mut dyn Raw> {
        Some(self)
    }

    fn indexing(&mut self) -> Option<&mut dyn Indexing> {
        Some(self)
    }
}

impl Registers for X64Steps<'_> {
    /// The words the last block set under the general cursor (every word after a seek, and
    /// under the full cursor).
    fn regs_changed(&self) -> u64 {
        match &self.blocks {
            Blocks::General(_) => self.changed,
            Blocks::Slice(_) | Blocks::Stream(_) => u64::MAX,
        }
    }

    /// [`RegsWanted::General`] switches a cursor in memory to the [`General`] mode (not
    /// while [`Raw::pass_equal`](crate::steps::Raw::pass_equal) is ahead of it); [`RegsWanted::All`] takes effect at
    /// the next seek.
    fn want_regs(&mut self, wanted: RegsWanted) {
        self.lean = wanted == RegsWanted::General;
        if let (true, Blocks::Slice(r), Ahead::No) = (self.lean, &self.blocks, &self.ahead) {
            self.changed = u64::MAX;
            self.blocks = Blocks::General(Box::new(Cursor::clone(r).into_mode()));
        }
    }

    /// A field of the `REGDUMP` by its name (`xmm3`, `st0`, `mxcsr`, …):
    /// its byte offset and size.
    fn reg_source(&self, name: &str) -> Option<RegSource> {
        let f = self.fields.iter().find(|f| f.name == name)?;
        Some(RegSource {
            at: f.offset,
            len: f.size,
        })
    }

    /// Copies the fields straight out of the replay's `REGDUMP` words, a word at a time,
    /// and only those reading words a block changed since the last call (found from the
    /// changed words through the plan's index, so the cost follows the changes).
    fn update_regs(&mut self, plan: &mut RegPlan, out: &mut [u8]) {
        self.track(plan);
        let dirty = std::mem::take(&mut self.dirty);
        let all = std::mem::take(&mut self.all_dirty);
        let w = self.word as usize;
        update_image(self.blocks.regs().words(), w, plan, out, &dirty, all);
    }

    /// In memory under [`RegsWanted::General`]: the general cursor, in a loop of its own
    /// (no `next_step` per step). Else the default.
    fn walk_steps(
        &mut self,
        on_step: &mut dyn FnMut(&Step, &[u64], u64) -> bool,
    ) -> Result<(), Error> {
        self.caught_up()?;
        if self.pending || self.done || !matches!(self.blocks, Blocks::General(_)) {
            return steps::walk_steps_by_steps(self, on_step);
        }
        // `update_regs` has no marks to go by afterwards.
        self.all_dirty = true;
        let state_words = self.names.len();
        let X64Steps {
            blocks: Blocks::General(replay),
            step,
            disasm,
            done,
            word,
            changed,
            ..
        } = self
        else {
            return Ok(());
        };
        loop {
            *changed = 0;
            match replay.next_instruction_with(|c| *changed |= change_bit(c)) {
                None => return Ok(()),
                Some(Ok(ins)) => {
                    let regs = replay.regs();
                    Self::fill(step, *word, &ins, regs, disasm.as_mut(), state_words);
                    let words = regs.words();
                    let words = words.get(..state_words).unwrap_or(words);
                    if !on_step(step, words, *changed) {
                        return Ok(());
                    }
                }
                Some(Err(e)) => {
                    *done = true;
                    return Err(err(e));
                }
            }
        }
    }

    /// In memory: the full cursor hands over each `REGDUMP` word a block sets; the words that feed one slot
    /// of their own (nearly all changes) are written straight into `out`, those feeding
    /// other copies marked for them at the next step of `thread`, the others (no copy
    /// reads them) passed over. A step of another thread is not filled. Else the default.
    fn walk_regs(
        &mut self,
        thread: u64,
        plan: &mut RegPlan,
        out: &mut [u8],
        on_step: &mut dyn FnMut(&Step, &[u8]) -> bool,
    ) -> Result<(), Error> {
        self.caught_up()?;
        if self.pending || self.done || !matches!(self.blocks, Blocks::Slice(_)) {
            return steps::walk_regs_by_steps(self, thread, plan, out, on_step);
        }
        self.track(plan);
        let mut walk = ImageWalk {
            route: (0..trac_x64dbg::MAX_WORDS)
                .map(|i| Route::of(plan, i, self.word as usize))
                .collect(),
            plan,
            out,
            w: self.word as usize,
            dirty: std::mem::take(&mut self.dirty),
            all: std::mem::take(&mut self.all_dirty),
            thread,
            on_step,
            stopped: false,
        };
        let state_words = self.names.len();
        let X64Steps {
            blocks: Blocks::Slice(replay),
            step,
            disasm,
            done,
            word,
            ..
        } = self
        else {
            return Ok(());
        };
        let result = loop {
            let next = replay.next_instruction_with(|c| walk.change(usize::from(c.index), c.value));
            match next {
                None => break Ok(()),
                Some(Ok(ins)) => {
                    // A full dump sets every word: the copies of several words made once.
                    walk.all |= ins.is_full_dump();
                    let regs = replay.regs();
                    walk.step(&ins, regs, step, *word, disasm.as_mut(), state_words);
                    if walk.stopped {
                        break Ok(());
                    }
                }
                Some(Err(e)) => {
                    *done = true;
                    break Err(err(e));
                }
            }
        };
        self.dirty = walk.dirty;
        self.all_dirty = walk.all;
        result
    }
}

impl Raw for X64Steps<'_> {
    /// In memory (not pending a seek's step): the blocks from the position passed to, or
    /// the replay's.
    fn records(&self) -> Option<steps::Records<'_>> {
        let (Some(trace), Blocks::Slice(r)) = (&self.trace, &self.blocks) else {
            return None;
        };
        if self.pending || self.done {
            return None;
        }
        let (at, key) = match &self.ahead {
            Ahead::Walked(w) => (w.offset().0, w.key()),
            Ahead::Told { to, key, .. } => (*to, *key),
            Ahead::No => (r.offset().0, r.blocks().key()),
        };
        let bytes = trace.data().get(usize::try_from(at).ok()?..)?;
        Some(steps::Records { bytes, key })
    }

    /// [`trac_x64dbg::Blocks::pass_equal`] from the replay's position or the one walked
    /// to before; nothing after [`Raw::pass_records`](crate::steps::Raw::pass_records) (no walk to go on from there:
    /// `diff` never asks that), nor when the keys differ.
    fn pass_equal(&mut self, other: steps::Records<'_>, on_thread: &mut dyn FnMut(u64)) -> Passed {
        let none = Passed::default();
        if self.records().is_none_or(|own| own.key != other.key) {
            return none;
        }
        self.all_dirty = true;
        let mut w = match std::mem::replace(&mut self.ahead, Ahead::No) {
            Ahead::Walked(w) => w,
            Ahead::No => match &self.blocks {
                Blocks::Slice(r) => r.blocks(),
                Blocks::Stream(_) | Blocks::General(_) => return none,
            },
            told @ Ahead::Told { .. } => {
                self.ahead = told;
                return none;
            }
        };
        let from = w.offset().0;
        let steps = w.pass_equal(other.bytes, |t| on_thread(u64::from(t)));
        let passed = Passed {
            steps,
            bytes: usize::try_from(w.offset().0.saturating_sub(from)).unwrap_or(0),
            key: w.key(),
        };
        self.ahead = Ahead::Walked(w);
        passed
    }

    /// Notes the offset and the steps passed, without reading the blocks (the replay
    /// catches up when a step is read next).
    fn pass_records(&mut self, passed: Passed) {
        self.all_dirty = true;
        let (Some(_), Blocks::Slice(r)) = (&self.trace, &self.blocks) else {
            return;
        };
        let bytes = passed.bytes as u64;
        let (to, steps) = match &self.ahead {
            Ahead::No => (r.offset().0, 0),
            Ahead::Told { to, steps, .. } => (*to, *steps),
            Ahead::Walked(w) => (
                w.offset().0,
                w.instructions().saturating_sub(r.instructions()),
            ),
        };
        self.ahead = Ahead::Told {
            to: to.saturating_add(bytes),
            steps: steps.saturating_add(passed.steps),
            key: passed.key,
        };
    }

    /// The [`Pc`] cursor for a trace in memory without `--disasm` (the pc from the `cip`
    /// changes, the addresses read in place, a step filled only for a match); the replay
    /// otherwise.
    fn scan(&mut self, query: &ScanQuery, on_step: &mut OnStep<'_>) -> Result<(), Error> {
        let (Blocks::Slice(replay), None) = (&self.blocks, &self.disasm) else {
            return steps::scan_by_steps(self, query, on_step);
        };
        let mut scan = Cursor::clone(replay).into_mode::<Pc>();
        if std::mem::take(&mut self.pending) && query.matches(&self.step) {
            on_step(&self.step)?;
        }
        if self.done {
            return Ok(());
        }
        // The stream is at its end after the scan, whatever happens.
        self.done = true;
        let (lo, hi) = query.mem.as_ref().map_or((1, 0), |r| (r.start, r.end));
        let wanted = |ins: &Instruction<'_>, regs: &RegDump| {
            query.all || query.pc == Some(regs.ip()) || (lo < hi && ins.touches(lo, hi))
        };
        while let Some(ins) = scan.next_instruction_where(wanted) {
            let ins = ins.map_err(err)?;
            Self::fill_lean(&mut self.step, self.word, &ins, scan.regs().ip());
            on_step(&self.step)?;
        }
        Ok(())
    }
}

impl Indexing for X64Steps<'_> {
    fn seek_index(&mut self) -> Result<Option<Vec<u8>>, Error> {
        self.seek_index_reaching(u64::MAX, &mut |_, _| {})
    }

    fn seek_index_reaching(
        &mut self,
        every: u64,
        reached: &mut dyn FnMut(u64, SeekIndex),
    ) -> Result<Option<Vec<u8>>, Error> {
        let Some(trace) = &self.trace else {
            return Ok(None);
        };
        if let Some(index) = &self.index {
            return Ok(Some(index.to_bytes()));
        }
        let mut builder = trace.index_builder();
        let mut n = every.max(1);
        // Past step n: the index then holds every full dump up to it.
        while builder.build_until(n.saturating_add(1)) > n {
            reached(n, SeekIndex::new(builder.reaching().to_bytes()));
            n = n.saturating_add(every.max(1));
        }
        let index = match builder.finish() {
            (_, Some(e)) => return Err(err(e)),
            (index, None) => self.index.insert(Arc::new(index)),
        };
        Ok(Some(index.to_bytes()))
    }

    fn use_seek_index(&mut self, index: &SeekIndex) -> bool {
        if self.trace.is_none() {
            return false;
        }
        match index.parsed(Index::from_bytes) {
            Some(index) => {
                self.index = Some(index);
                true
            }
            None => false,
        }
    }

    fn count_known(&self) -> Option<u64> {
        self.index.as_deref().map(Index::instructions)
    }
}

impl X64Steps<'_> {
    /// Notes that a reader keeps a register image with `plan` ([`Registers::update_regs`](crate::steps::Registers::update_regs)):
    /// from now on the words the blocks change are marked; the plan is indexed by
    /// `REGDUMP` word on first use (and the image then copied whole).
    fn track(&mut self, plan: &mut RegPlan) {
        self.tracking = true;
        if plan.is_indexed() {
            return;
        }
        let w = self.word as usize;
        let shift = if w == 8 { 3 } else { 2 };
        let span = |c: &RegCopy| {
            let last = c.src.at.saturating_add(c.src.len.max(1)).saturating_sub(1);
            (c.src.at >> shift, last >> shift)
        };
        // A copy of the first bytes of one word into a slot of their size.
        let low = |c: &RegCopy| {
            let aligned = (c.src.at >> shift) << shift == c.src.at;
            (aligned && c.src.len <= w).then_some(c.src.len)
        };
        plan.index(trac_x64dbg::MAX_WORDS, span, low);
        self.all_dirty = true;
    }
}

/// What [`X64Steps::walk_regs`] does with a change of a `REGDUMP` word.
#[derive(Clone, Copy)]
enum Route {
    /// No copy of the plan reads the word.
    Skip,
    /// The word's low `.1` bytes go to offset `.0` of the image, and nothing else reads it.
    Low(usize, usize),
    /// Other copies read it: marked for [`update_image`].
    Mark,
}

impl Route {
    /// The route of word `i` (of `w` bytes): [`Route::Low`] for a word that one copy alone
    /// reads whole (its low bytes into a slot of their size, or one word of a wider
    /// register such as an XMM one), [`Route::Mark`] for a word other copies read.
    fn of(plan: &RegPlan, i: usize, w: usize) -> Route {
        if let Some((dst, n)) = plan.low(i) {
            return Route::Low(dst, n);
        }
        let mut readers = plan.readers(i);
        let Some(c) = readers.next() else {
            return Route::Skip;
        };
        let start = i.saturating_mul(w);
        // The word's bytes land at `dst + (start - src.at)` (the copy's bytes are the
        // dump's from `src.at` on), when they are all inside what it copies.
        let inside = start
            .checked_sub(c.src.at)
            .filter(|off| off.saturating_add(w) <= c.src.len.min(c.len));
        match (inside, readers.next()) {
            (Some(off), None) => Route::Low(c.dst.saturating_add(off), w),
            _ => Route::Mark,
        }
    }
}

/// The state of [`X64Steps::walk_regs`].
struct ImageWalk<'w> {
    /// Per `REGDUMP` word.
    route: Vec<Route>,
    plan: &'w RegPlan,
    out: &'w mut [u8],
    /// The size of a word.
    w: usize,
    /// Words marked since the image was last brought up to date.
    dirty: [u64; 4],
    /// Every copy is due (a full dump, or a new plan).
    all: bool,
    thread: u64,
    on_step: &'w mut dyn FnMut(&Step, &[u8]) -> bool,
    /// `on_step` returned false.
    stopped: bool,
}

impl ImageWalk<'_> {
    /// Word `i` was set to `value`.
    #[inline(always)]
    fn change(&mut self, i: usize, value: u64) {
        match self.route.get(i) {
            Some(&Route::Low(dst, n)) => write_word(self.out, dst, n, value),
            Some(Route::Mark) => {
                if let Some(bits) = self.dirty.get_mut(i >> 6) {
                    *bits |= 1 << (i & 63);
                }
            }
            Some(Route::Skip) | None => {}
        }
    }

    /// The instruction `ins` with the registers `regs` before it (its changes passed to
    /// [`ImageWalk::change`]): a step of the thread brings the image up to date, is
    /// filled and handed on.
    #[inline(always)]
    fn step(
        &mut self,
        ins: &Instruction<'_>,
        regs: &RegDump,
        step: &mut Step,
        word: u32,
        disasm: Option<&mut Disassembler>,
        state_words: usize,
    ) {
        if u64::from(ins.thread()) != self.thread {
            return;
        }
        if self.all || self.dirty.iter().any(|&b| b != 0) {
            let marked = std::mem::take(&mut self.dirty);
            let all = std::mem::take(&mut self.all);
            update_image(regs.words(), self.w, self.plan, self.out, &marked, all);
        }
        X64Steps::fill(step, word, ins, regs, disasm, state_words);
        self.stopped = !(self.on_step)(step, self.out);
    }
}

/// Writes the `n` low bytes of `value` at `dst` of `out` (8 and 4 bytes as copies of
/// constant size); nothing where they do not fit.
#[inline(always)]
fn write_word(out: &mut [u8], dst: usize, n: usize, value: u64) {
    let word = value.to_le_bytes();
    match (n, out.get_mut(dst..dst.saturating_add(n))) {
        (8, Some(d)) => d.copy_from_slice(&word),
        (4, Some(d)) => d.copy_from_slice(word.first_chunk::<4>().unwrap_or(&[0; 4])),
        (_, Some(d)) => d.copy_from_slice(word.get(..n).unwrap_or_default()),
        (_, None) => {}
    }
}

/// Brings the register image `out` up to date from the `REGDUMP` `words` (of `w` bytes):
/// every copy of `plan` when `all`, else those reading the words marked in `dirty` (a
/// word feeding one slot of its own is written alone, as [`RegPlan::low`] says).
fn update_image(
    words: &[u64],
    w: usize,
    plan: &RegPlan,
    out: &mut [u8],
    dirty: &[u64; 4],
    all: bool,
) {
    let shift = if w == 8 { 3 } else { 2 };
    let copy = |c: &RegCopy, out: &mut [u8]| {
        let Some(dst) = out.get_mut(c.dst..c.dst.saturating_add(c.len)) else {
            return;
        };
        // The most common copy: one whole word into a slot of its size.
        if c.len == w && c.src.len == w && (c.src.at >> shift) << shift == c.src.at {
            let word = words
                .get(c.src.at >> shift)
                .copied()
                .unwrap_or(0)
                .to_le_bytes();
            if let Some(src) = word.get(..w) {
                dst.copy_from_slice(src);
            }
            return;
        }
        let (head, tail) = dst.split_at_mut(c.src.len.min(dst.len()));
        dump_bytes(words, w, c.src.at, head);
        for b in tail {
            *b = 0;
        }
    };
    if all {
        plan.copies().iter().for_each(|c| copy(c, out));
        return;
    }
    // A copy fed by several changed words (an XMM register) is made once per word: a
    // few bytes again, cheaper than remembering which were made.
    for (k, &bits) in dirty.iter().enumerate() {
        let mut bits = bits;
        while bits != 0 {
            let unit = (k << 6) | bits.trailing_zeros() as usize;
            bits &= bits.wrapping_sub(1);
            // Most changed words feed one slot of their own: a copy of constant size.
            if let Some((dst, n)) = plan.low(unit) {
                write_word(out, dst, n, words.get(unit).copied().unwrap_or(0));
                continue;
            }
            plan.readers(unit).for_each(|c| copy(c, out));
        }
    }
}

/// Fills `dst` with the `REGDUMP` bytes from byte offset `at`: the dump is `words` of `w`
/// bytes each (8 or 4, in the low bytes of each `u64`), little-endian; zeros past its end.
/// Whole words are copied with constant sizes and the odd bytes one by one, since the
/// copies are small and many (no call to memcpy).
fn dump_bytes(words: &[u64], w: usize, at: usize, dst: &mut [u8]) {
    let word = |i: usize| words.get(i).copied().unwrap_or(0).to_le_bytes();
    // Shifts, not a division: this runs for every copy of every step.
    let (w, shift, mask): (usize, u32, usize) = if w == 8 { (8, 3, 7) } else { (4, 2, 3) };
    let (mut i, within) = (at >> shift, at & mask);
    let mut rest = dst;
    if within > 0 {
        let head = word(i);
        let n = w.saturating_sub(within).min(rest.len());
        let (d, tail) = rest.split_at_mut(n);
        for (d, s) in d.iter_mut().zip(head.iter().skip(within)) {
            *d = *s;
        }
        rest = tail;
        i = i.saturating_add(1);
    }
    let tail = if w == 8 {
        let mut chunks = rest.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&word(i));
            i = i.saturating_add(1);
        }
        chunks.into_remainder()
    } else {
        let mut chunks = rest.chunks_exact_mut(4);
        for c in &mut chunks {
            let [a, b, c2, d, ..] = word(i);
            c.copy_from_slice(&[a, b, c2, d]);
            i = i.saturating_add(1);
        }
        chunks.into_remainder()
    };
    for (d, s) in tail.iter_mut().zip(word(i)) {
        *d = s;
    }
}

/// Why instruction `n`, at or past the instructions `index` holds, cannot be reached: the
/// damage that ended the blocks (a bad or truncated block, found by replaying from the last
/// full dump: at most one interval), else the end of the trace.
fn past_the_index(trace: &Trace<'_>, index: &Index, n: u64) -> Error {
    let count = index.instructions();
    let mut replay = match count.checked_sub(1) {
        Some(last) => match trace.seek(index, last) {
            Ok((_, replay)) => replay,
            Err(e) => return err(e),
        },
        None => trace.replay(),
    };
    loop {
        match replay.next_block() {
            Some(Ok(_)) => {}
            Some(Err(e)) => return err(e),
            None => return steps::past_end(n, count),
        }
    }
}

struct X64Records<'a> {
    tables: [Arc<Schema>; 1],
    layout: &'static RegLayout,
    /// The number of fields of the `state` struct ([`state_words`]).
    state_words: usize,
    blocks: Blocks<'a>,
    /// The trace in place (for seeks), when it is one.
    trace: Option<Trace<'a>>,
    /// The current instruction (in-place reading; the replay holds the registers before it).
    current: Option<Instruction<'a>>,
    /// Set by a seek: `current` is the next record.
    pending: bool,
    /// The error that ended a run of the typed fast path after some records: the next
    /// call reports it.
    failed: Option<Error>,
    /// With `--disasm`: the disassembler and the current instruction's text and accesses.
    disasm: Option<DisasmRow>,
    done: bool,
    /// The typed fast path's buffer of state words ([`StateRows`]), kept from one fill to
    /// the next.
    stage: Option<Box<StateStage>>,
    /// The blocks with recovered thread ids before the last seek (not this reader's to
    /// note).
    recovered_before: u64,
}

impl X64Records<'_> {
    /// After a seek: the notes count the blocks read from here (see `Records::finish`),
    /// the next record's included, though its block was read to find it.
    fn count_from_here(&mut self) {
        let next_recovered = self.pending
            && self
                .current
                .as_ref()
                .is_some_and(|i| i.thread_field() == trac_x64dbg::ThreadField::Unflagged);
        self.recovered_before = self
            .blocks
            .counters()
            .recovered_thread_ids
            .saturating_sub(u64::from(next_recovered));
    }
}

impl Row for X64Records<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        if let (Some(ins), Blocks::Slice(r)) = (self.current, &self.blocks) {
            InstructionRow {
                ins,
                regs: r.regs(),
                layout: self.layout,
                exact: std::cell::Cell::new(true),
                state_words: self.state_words,
                disasm: self.disasm.as_ref(),
            }
            .visit(v);
        }
    }
}

/// A reader's step, with `done` set at its end or first error.
fn fuse<T>(
    done: &mut bool,
    step: Option<Result<T, trac_x64dbg::Error>>,
) -> Option<Result<T, Error>> {
    match step {
        Some(Ok(v)) => Some(Ok(v)),
        Some(Err(e)) => {
            *done = true;
            Some(Err(err(e)))
        }
        None => {
            *done = true;
            None
        }
    }
}

impl Records for X64Records<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        if std::mem::take(&mut self.pending) && self.current.is_some() {
            return Some(Ok(Record::new(0, self)));
        }
        if self.done {
            return None;
        }
        // In place: the instruction borrows the file, not the reader, so the row is kept
        // here and handed out by reference.
        if let Blocks::Slice(r) = &mut self.blocks {
            let step = r.next_instruction();
            return match fuse(&mut self.done, step)? {
                Ok(current) => {
                    if let Some(d) = &mut self.disasm {
                        d.prepare(&current, r.regs(), self.state_words);
                    }
                    self.current = Some(current);
                    Some(Ok(Record::new(0, self)))
                }
                Err(e) => Some(Err(e)),
            };
        }
        // A stream's instruction borrows the reader's buffer: the row goes in a box.
        let step = match &mut self.blocks {
            Blocks::Stream(r) => r.next_instruction_with_regs(),
            // Records never read through the lean replay.
            Blocks::Slice(_) | Blocks::General(_) => None,
        };
        let (layout, state_words, disasm) = (self.layout, self.state_words, &mut self.disasm);
        Some(fuse(&mut self.done, step)?.map(|(ins, regs)| {
            if let Some(d) = disasm.as_mut() {
                d.prepare(&ins, regs, state_words);
            }
            let row = InstructionRow {
                ins,
                regs,
                layout,
                exact: std::cell::Cell::new(true),
                state_words,
                disasm: disasm.as_ref(),
            };
            Record::boxed(0, Box::new(row))
        }))
    }

    fn position(&self) -> u64 {
        match &self.blocks {
            Blocks::Slice(_) => self.current.map_or(0, |ins| ins.offset().0),
            Blocks::Stream(r) => r.offset().0,
            Blocks::General(r) => r.offset().0,
        }
    }

    fn fill_columns(
        &mut self,
        out: &mut dyn ColumnSink,
        max: usize,
    ) -> Option<Result<usize, Error>> {
        if let Some(e) = self.failed.take() {
            return Some(Err(e));
        }
        // In place and without `--disasm` (whose rows need the disassembler per record),
        // and not with a seek's record pending (that one goes the visiting way).
        if self.disasm.is_some() || self.pending || !matches!(self.blocks, Blocks::Slice(_)) {
            return None;
        }
        if self.done {
            return Some(Ok(0));
        }
        let cols = InstructionColumns::of(out.columns(0)?, self.state_words)?;
        let Blocks::Slice(r) = &mut self.blocks else {
            return None;
        };
        let stage = self.stage.get_or_insert_with(table::new_stage);
        let n = table::fill_instructions(
            r,
            cols,
            stage,
            self.layout,
            max,
            &mut self.done,
            &mut self.failed,
        );
        // An error before any record of this fill is reported now: 0 records means the end.
        match self.failed.take() {
            Some(e) if n == 0 => Some(Err(e)),
            failed => {
                self.failed = failed;
                Some(Ok(n))
            }
        }
    }

    fn seek(&mut self, n: u64, index: Option<&SeekIndex>) -> Result<(), Error> {
        let found = match (&self.trace, index.and_then(|i| i.parsed(Index::from_bytes))) {
            (Some(trace), Some(index)) if index.instructions() > 0 => {
                // The last instruction the index knows, at most: past it, the records
                // (and the damage that ends them, if any) are read one by one.
                let at = n.min(index.instructions().saturating_sub(1));
                Some((at, trace.seek(&index, at).map_err(err)?))
            }
            _ => None,
        };
        let Some((at, (ins, replay))) = found else {
            crate::skip_records(self, n)?;
            self.count_from_here();
            return Ok(());
        };
        if let Some(d) = &mut self.disasm {
            d.prepare(&ins, replay.regs(), self.state_words);
        }
        self.blocks = Blocks::Slice(Box::new(replay));
        self.current = Some(ins);
        self.pending = true;
        self.done = false;
        self.failed = None;
        crate::skip_records(self, n.saturating_sub(at))?;
        self.count_from_here();
        Ok(())
    }

    fn seeks_by_index(&self) -> bool {
        // In memory; a stream is read on.
        self.trace.is_some()
    }

    fn finish(&mut self) -> Vec<Note> {
        let count = self
            .blocks
            .counters()
            .recovered_thread_ids
            .saturating_sub(self.recovered_before);
        if count == 0 {
            return Vec::new();
        }
        vec![Note::Count {
            count,
            what: "block(s) carry thread-id bytes without the flag (x64dbg before PR #3920); recovered",
        }]
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
mod tests {
    use super::*;
    use crate::schema::testing::{Val, records, testdata};
    use crate::schema::{Field, Json, Type};

    /// The `state` columns of every instruction are the registers before it as
    /// `trac_x64dbg`'s own replay gives them, and agree with the values the block records
    /// (x64dbg stores the values before the instruction), in place and streamed.
    #[test]
    fn state_is_the_replayed_registers_before_each_instruction() {
        for (name, arch, first) in [
            (
                "basic.trace64",
                Arch::X64,
                ["rax", "rcx", "rdx", "rbx", "rsp"],
            ),
            (
                "basic.trace32",
                Arch::X86,
                ["eax", "ecx", "edx", "ebx", "esp"],
            ),
            (
                "sessions.trace64",
                Arch::X64,
                ["rax", "rcx", "rdx", "rbx", "rsp"],
            ),
        ] {
            let bytes = testdata(&format!("x64dbg/{name}"));
            let trace = Trace::parse(&bytes).unwrap();
            assert_eq!(trace.header().arch, arch);
            let mut expected = Vec::new();
            let mut replay = trace.replay();
            while let Some(ins) = replay.next_instruction() {
                let ins = ins.unwrap();
                let words = replay.regs().words()[..state_words(arch)].to_vec();
                expected.push((ins.index(), words));
            }
            assert!(expected.len() > 2, "{name}");
            for gzip in [false, true] {
                let (tables, rows) = records(&X64dbg, name, &bytes, gzip);
                let schema = &tables[0];
                assert_eq!(schema.keys().map(|f| &*f.name).collect::<Vec<_>>(), ["i"]);
                let Some(Field {
                    ty: Type::Struct(state),
                    json: Json::Skip,
                    ..
                }) = schema.field("state")
                else {
                    panic!("no state struct");
                };
                let names: Vec<&str> = state.fields.iter().map(|f| &*f.name).collect();
                assert_eq!(names.len(), state_words(arch));
                assert_eq!(names[..5], first);
                let (ip, flags) = match arch {
                    Arch::X64 => (16, 17),
                    Arch::X86 => (8, 9),
                };
                assert_eq!(names[ip], if arch == Arch::X64 { "rip" } else { "eip" });
                assert_eq!(
                    names[flags],
                    if arch == Arch::X64 {
                        "rflags"
                    } else {
                        "eflags"
                    }
                );
                assert!(state.fields.iter().all(|f| f.ty == Type::UInt(64)));
                assert_eq!(rows.len(), expected.len());
                for ((table, row), (index, words)) in rows.iter().zip(&expected) {
                    assert_eq!(*table, 0);
                    assert_eq!(row.len(), schema.fields.len());
                    assert_eq!(row[0].u(), *index);
                    let state: Vec<u64> = row[7].items().iter().map(Val::u).collect();
                    assert_eq!(&state, words, "{name} instruction {index}");
                    // pc is the instruction pointer before it.
                    assert_eq!(row[3].u(), state[ip]);
                    // Every recorded general register has the value of the state.
                    // and no name joins fields or is a byte range.
                    for change in row[5].items() {
                        let (reg, value) = match change.items() {
                            [Val::S(reg), Val::U(value), Val::Null] => (reg, Some(*value)),
                            [Val::S(reg), Val::Null, Val::Bytes(_)] => (reg, None),
                            _ => panic!("bad register change {change:?}"),
                        };
                        assert!(!reg.contains(['|', '[']), "{name} {index} {reg}");
                        if let (Some(k), Some(value)) = (names.iter().position(|n| n == reg), value)
                        {
                            assert_eq!(state[k], value, "{name} {index} {reg}");
                        }
                    }
                }
            }
        }
    }

    fn input(name: &str, bytes: &[u8], gzip: bool) -> Input {
        use std::io::Write;
        if !gzip {
            return Input::from_bytes(name, bytes.to_vec()).unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(bytes).unwrap();
        Input::from_bytes(format!("{name}.gz"), gz.finish().unwrap()).unwrap()
    }

    /// The steps are the replay's instructions, in memory and streamed; a seek lands on the
    /// same step and state as reading up to it; named registers include every REGDUMP field.
    #[test]
    fn steps_follow_the_replay_and_seek() {
        let bytes = testdata("x64dbg/basic.trace64");
        let trace = Trace::parse(&bytes).unwrap();
        let mut expected = Vec::new();
        let mut replay = trace.replay();
        while let Some(ins) = replay.next_instruction() {
            let ins = ins.unwrap();
            let mem: Vec<(u64, u64, Option<u64>)> =
                ins.mem().map(|m| (m.address, m.old, m.new)).collect();
            expected.push((ins.index(), ins.thread(), replay.regs().clone(), mem));
        }
        let options = crate::Options::default();
        for gzip in [false, true] {
            let mut input = input("basic.trace64", &bytes, gzip);
            let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            assert_eq!(steps.isa(), Isa::X64);
            assert_eq!(steps.reg_names().len(), 18);
            let mut n = 0;
            while let Some(step) = steps.next_step() {
                let step = step.unwrap().clone();
                let (i, thread, regs, mem) = &expected[n];
                assert_eq!(step.i, *i);
                assert_eq!(step.thread, u64::from(*thread));
                assert_eq!(step.pc, regs.ip());
                assert_eq!(steps.regs(), &regs.words()[..18]);
                assert_eq!(step.mem.len(), mem.len());
                for (a, (addr, old, new)) in step.mem.iter().zip(mem) {
                    assert_eq!(a.addr, *addr);
                    assert_eq!(step.old(a).unwrap(), old.to_le_bytes());
                    assert_eq!(
                        step.new(a).map(<[u8]>::to_vec),
                        new.map(|v| v.to_le_bytes().to_vec())
                    );
                }
                n += 1;
            }
            assert_eq!(n, expected.len());
            for at in [0u64, 1, 511, 512, 700, 1099] {
                let mut input = self::input("basic.trace64", &bytes, gzip);
                let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
                steps.seek(at).unwrap();
                let step = steps.next_step().unwrap().unwrap();
                assert_eq!(step.i, at);
                let regs = &expected[usize::try_from(at).unwrap()].2;
                assert_eq!(steps.regs(), &regs.words()[..18]);
                let mut named = Vec::new();
                steps.named_regs(&mut named);
                let get = |n: &str| named.iter().find(|r| r.name == n).unwrap().value.clone();
                assert_eq!(get("rsp"), RegValue::Word(regs.sp()));
                assert_eq!(
                    get("lastError"),
                    RegValue::Word(u64::from(regs.last_error()))
                );
                assert_eq!(
                    get("xmm1"),
                    RegValue::Wide(regs.xmm(1).to_le_bytes().into_iter().collect())
                );
                assert!(named.iter().any(|r| r.name == "flags.z"));
            }
            let mut input = self::input("basic.trace64", &bytes, gzip);
            let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            assert!(matches!(steps.seek(1100), Err(Error::Unsupported(_))));
        }
    }

    /// One instruction of a hand-built trace: bytes, registers set before it, and the
    /// recorded memory words (address, old, new).
    type HandStep = (
        &'static [u8],
        &'static [(usize, u64)],
        &'static [(u64, u64, Option<u64>)],
    );

    /// A trace recorded by `trac_x64dbg`'s `Recorder` from `steps` (x64, one thread).
    fn hand_built(steps: &[HandStep]) -> Vec<u8> {
        use trac_x64dbg::{MemAccess, Recorder, RecorderOptions, Writer};
        let header = Header::new(Arch::X64, "hand.exe");
        let writer = Writer::new(Vec::new(), &header).unwrap();
        let mut rec = Recorder::new(writer, RecorderOptions::default());
        let mut regs = RegDump::new(Arch::X64);
        let mut pc = 0x7ff6_0000_1000u64;
        for (opcode, set, mem) in steps {
            for &(i, v) in *set {
                regs.set_word(i, v);
            }
            regs.set_ip(pc);
            rec.step(trac_x64dbg::Step {
                thread: 7,
                opcode: opcode.to_vec(),
                regs: regs.clone(),
                mem: mem
                    .iter()
                    .map(|&(address, old, new)| MemAccess {
                        flags: u8::from(new.is_none()),
                        address,
                        old,
                        new,
                    })
                    .collect(),
            })
            .unwrap();
            pc += opcode.len() as u64;
        }
        // The recorder writes a block when the next one comes: one more to flush the last.
        regs.set_ip(pc);
        rec.step(trac_x64dbg::Step {
            thread: 7,
            opcode: vec![0x90],
            regs,
            mem: Vec::new(),
        })
        .unwrap();
        rec.finish().unwrap()
    }

    const RSP: u64 = 0x14_fe00;
    const HAND: &[HandStep] = &[
        // mov qword ptr [rsp+8], rax: a store of 8.
        (
            &[0x48, 0x89, 0x44, 0x24, 0x08],
            &[(0, 0x1111), (4, RSP)],
            &[(RSP + 8, 5, Some(0x1111))],
        ),
        // add dword ptr [rax], ecx: read-write of 4 (the word holds 8 recorded bytes).
        (
            &[0x01, 0x08],
            &[(0, 0x5000), (1, 2)],
            &[(0x5000, 0xaaaa_0000_0001, Some(0xaaaa_0000_0003))],
        ),
        // mov rcx, qword ptr [rbx+0x10]: a load.
        (
            &[0x48, 0x8b, 0x4b, 0x10],
            &[(3, 0x6000)],
            &[(0x6010, 9, None)],
        ),
        // rep movsb (as a post-2024 x64dbg records it): unknown.
        (
            &[0xf3, 0xa4],
            &[(6, 0x7000), (7, 0x8000)],
            &[(0x7000, 1, None), (0x8000, 2, Some(1))],
        ),
        // push rbx: the slot below rsp.
        (&[0x53], &[], &[(RSP - 8, 0, Some(0x6000))]),
        // movdqa xmmword ptr [rsp+0x10], xmm0: two words of 8.
        (
            &[0x66, 0x0f, 0x7f, 0x44, 0x24, 0x10],
            &[(4, RSP - 8)],
            &[(RSP + 8, 0, Some(1)), (RSP + 0x10, 0, Some(2))],
        ),
    ];

    /// An instruction's expected text and (size, access) per recorded word.
    type Expected = (&'static str, Vec<(Option<u64>, &'static str)>);

    /// The hand-built trace's expected text and accesses.
    fn hand_expected() -> Vec<Expected> {
        vec![
            ("mov qword ptr [rsp+8], rax", vec![(Some(8), "write")]),
            ("add dword ptr [rax], ecx", vec![(Some(4), "readwrite")]),
            ("mov rcx, qword ptr [rbx+0x10]", vec![(Some(8), "read")]),
            (
                "rep movsb byte ptr [rdi], byte ptr [rsi]",
                vec![(None, "unknown"), (None, "unknown")],
            ),
            ("push rbx", vec![(Some(8), "write")]),
            (
                "movdqa xmmword ptr [rsp+0x10], xmm0",
                vec![(Some(8), "write"), (Some(8), "write")],
            ),
            ("nop", vec![]),
        ]
    }

    /// With `disasm`, rows carry `asm` after `opcode` and each memory row `size` and
    /// `access`, in place and streamed; without it the schema is the plain one.
    #[test]
    fn disasm_rows_have_asm_size_and_access() {
        let bytes = hand_built(HAND);
        let options = crate::Options {
            disasm: true,
            ..crate::Options::default()
        };
        let expected = hand_expected();
        for gzip in [false, true] {
            let mut input = input("hand.trace64", &bytes, gzip);
            let mut records = X64dbg.records(&mut input, &mut Ctx::new(&options)).unwrap();
            let schema = records.tables()[0].clone();
            let names: Vec<&str> = schema.fields.iter().map(|f| &*f.name).collect();
            assert_eq!(
                names[..7],
                ["i", "offset", "thread", "pc", "opcode", "asm", "regs"]
            );
            let Type::Rows(mem) = &schema.field("mem").unwrap().ty else {
                panic!("mem is a child table");
            };
            let mem_names: Vec<&str> = mem.fields.iter().map(|f| &*f.name).collect();
            assert_eq!(mem_names, ["addr", "old", "new", "size", "access"]);
            let mut n = 0;
            while let Some(r) = records.next_record() {
                let row = crate::schema::testing::collect(r.unwrap().row());
                let (asm, accesses) = &expected[n];
                assert_eq!(row[5], Val::S((*asm).into()), "instruction {n}");
                let got: Vec<(Option<u64>, String)> = row[7]
                    .items()
                    .iter()
                    .map(|m| {
                        let size = match &m.items()[3] {
                            Val::U(s) => Some(*s),
                            Val::Null => None,
                            v => panic!("size {v:?}"),
                        };
                        let Val::S(access) = &m.items()[4] else {
                            panic!("access")
                        };
                        (size, access.clone())
                    })
                    .collect();
                let want: Vec<(Option<u64>, String)> = accesses
                    .iter()
                    .map(|(s, a)| (*s, (*a).to_owned()))
                    .collect();
                assert_eq!(got, want, "instruction {n}: {asm}");
                n += 1;
            }
            assert_eq!(n, expected.len());
        }
        let (tables, _) = records(&X64dbg, "hand.trace64", &bytes, false);
        assert!(tables[0].field("asm").is_none());
        assert_eq!(tables[0], table::schema(Arch::X64, false));
    }

    /// With `disasm`, the steps' accesses are sized and classified the same way, after a
    /// seek too; without it they are the recorded words, unknown.
    #[test]
    fn disasm_steps_are_sized() {
        let bytes = hand_built(HAND);
        let expected = hand_expected();
        let kind = |a: &steps::Access| (a.sized.then_some(u64::from(a.len)), a.kind.name());
        for disasm in [false, true] {
            let options = crate::Options {
                disasm,
                ..crate::Options::default()
            };
            for gzip in [false, true] {
                let mut input = input("hand.trace64", &bytes, gzip);
                let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
                let mut n = 0;
                while let Some(step) = steps.next_step() {
                    let step = step.unwrap();
                    let got: Vec<_> = step.mem.iter().map(kind).collect();
                    if disasm {
                        assert_eq!(got, expected[n].1, "step {n}");
                        for a in &step.mem {
                            assert_eq!(step.old(a).unwrap().len() as u32, a.len);
                        }
                    } else {
                        assert!(got.iter().all(|g| *g == (None, "unknown")));
                        assert!(step.mem.iter().all(|a| a.len == 8));
                    }
                    n += 1;
                }
                assert_eq!(n, expected.len());
            }
            let mut input = input("hand.trace64", &bytes, false);
            let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            steps.seek(1).unwrap();
            let step = steps.next_step().unwrap().unwrap();
            let want = if disasm {
                (Some(4), "readwrite")
            } else {
                (None, "unknown")
            };
            assert_eq!(kind(&step.mem[0]), want);
            // The 4 operand bytes of the recorded word.
            let old_len = if disasm { 4 } else { 8 };
            assert_eq!(
                step.old(&step.mem[0]).unwrap(),
                &0xaaaa_0000_0001u64.to_le_bytes()[..old_len]
            );
        }
    }

    /// The real x64dbg sample: every recorded entry is either matched to an operand (sized,
    /// a known kind, at most a word) or left unknown; the matched share is what was measured
    /// (all 84 entries: the sample's instructions are plain moves, pushes, pops, calls,
    /// `movdqa` and the like; its `rep stosq` records none).
    #[test]
    fn real_sample_accesses_are_matched() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64");
        let Ok(bytes) = std::fs::read(&path) else {
            println!("note: {} absent; skipped", path.display());
            return;
        };
        let options = crate::Options {
            disasm: true,
            ..crate::Options::default()
        };
        let mut input = Input::from_bytes("test1.trace64", bytes).unwrap();
        let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
        let (mut total, mut matched) = (0u32, 0u32);
        let mut by_kind = BTreeMap::new();
        let mut dis = crate::disasm::Disassembler::new(Isa::X64);
        while let Some(step) = steps.next_step() {
            let step = step.unwrap();
            assert!(
                dis.asm(step.pc, &step.opcode).is_some(),
                "step {} decodes",
                step.i
            );
            for a in &step.mem {
                total += 1;
                *by_kind
                    .entry((a.kind.name(), a.len, step.new(a).is_some()))
                    .or_insert(0u32) += 1;
                if a.sized {
                    matched += 1;
                    assert_ne!(a.kind, steps::AccessKind::Unknown);
                    assert!((1..=8).contains(&a.len));
                } else {
                    assert_eq!((a.kind, a.len), (steps::AccessKind::Unknown, 8));
                    println!(
                        "unmatched: step {} {:?} at {:#x}",
                        step.i,
                        dis.asm(step.pc, &step.opcode),
                        a.addr
                    );
                }
            }
        }
        println!("real sample: {matched} of {total} accesses matched");
        println!("(kind, len, changed) counts: {by_kind:?}");
        assert_eq!(total, 84);
        assert_eq!(matched, MATCHED_IN_REAL_SAMPLE);
    }

    /// Measured on the real sample (see `real_sample_accesses_are_matched`).
    const MATCHED_IN_REAL_SAMPLE: u32 = 84;

    /// After the index, a seek replays at most one full-dump interval (512 instructions,
    /// and the user blocks between them), whether the instruction is near the start or
    /// near the end of a 40,000-instruction trace: the work does not grow with N.
    #[test]
    fn seek_work_does_not_grow_with_n() {
        let opts = trac_x64dbg::testgen::Options {
            arch: Arch::X64,
            threads: 3,
            max_run: 100,
            seed: 14,
        };
        let n = 40_000u64;
        let bytes =
            trac_x64dbg::testgen::trace(opts, n, trac_x64dbg::RecorderOptions::default(), "w.exe");
        let options = crate::Options::default();
        let mut input = Input::from_bytes("w.trace64", bytes).unwrap();
        let mut steps = X64Steps::open(&mut input, &mut Ctx::new(&options)).unwrap();
        let mut work = Vec::new();
        for at in [0, 1, 511, 512, 700, n / 2, n - 513, n - 2, n - 1] {
            steps.seek(at).unwrap();
            assert_eq!(steps.next_step().unwrap().unwrap().i, at);
            work.push((at, steps.replayed));
        }
        for &(at, blocks) in &work {
            // The blocks from the full dump at or before `at` up to it: at most 512.
            assert_eq!(blocks, at % 512 + 1, "seek to {at}: {work:?}");
        }
    }

    /// `Records::seek` through the index gives the records that reading from the start
    /// gives from the same place on (past the end: none), near and far, over full dumps,
    /// for a synthetic trace and the fixtures; a damaged trace's error comes as reading
    /// gives it.
    #[test]
    fn records_seek_through_the_index_equals_reading() {
        let opts = trac_x64dbg::testgen::Options {
            arch: Arch::X64,
            threads: 3,
            max_run: 100,
            seed: 15,
        };
        let synth = trac_x64dbg::testgen::trace(
            opts,
            3000,
            trac_x64dbg::RecorderOptions::default(),
            "w.exe",
        );
        let mut inputs = vec![("w.trace64".to_owned(), synth)];
        for name in [
            "basic.trace64",
            "basic.trace32",
            "sessions.trace64",
            "legacy-tid.trace64",
            "err-truncated-block.bin",
        ] {
            inputs.push((name.to_owned(), testdata(&format!("x64dbg/{name}"))));
        }
        let options = crate::Options::default();
        for (name, bytes) in inputs {
            let all = |from: u64, index: Option<&SeekIndex>| {
                let mut input = Input::from_bytes(name.clone(), bytes.clone()).unwrap();
                let mut records = X64dbg.records(&mut input, &mut Ctx::new(&options)).unwrap();
                let sought = records.seek(from, index).map_err(|e| e.to_string());
                let mut rows = Vec::new();
                let mut error = None;
                while let Some(r) = records.next_record() {
                    match r {
                        Ok(r) => rows.push(crate::schema::testing::collect(r.row())),
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                (sought, rows, error)
            };
            let mut input = Input::from_bytes(name.clone(), bytes.clone()).unwrap();
            let index = X64Steps::open(&mut input, &mut Ctx::new(&options))
                .unwrap()
                .seek_index()
                .ok()
                .flatten()
                .map(SeekIndex::new);
            let (_, every, _) = all(0, None);
            let n = every.len() as u64;
            assert!(index.is_some() || name.starts_with("err-"), "{name}");
            for at in [
                0,
                1,
                511,
                512,
                513,
                700,
                n / 2,
                n.saturating_sub(1),
                n,
                n + 7,
            ] {
                let jumped = all(at, index.as_ref());
                assert_eq!(jumped, all(at, None), "{name}: seek to {at}");
                let expected = every
                    .get(usize::try_from(at).unwrap()..)
                    .unwrap_or_default();
                assert_eq!(jumped.1, expected, "{name}: seek to {at}");
            }
        }
    }
}
