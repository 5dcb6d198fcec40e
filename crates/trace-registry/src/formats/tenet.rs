//! Tenet text traces (`tenet`): one record per instruction,
//! `{"i","line","pc","regs":{…},"mem":[{"access","addr","data"}]}`.
//!
//! **Step numbering** (the same in every command, records and steps): instruction `i` is
//! the `i`-th instruction line (from 0; comment lines do not count), and an access is
//! numbered by the instruction that made it. A Tenet line carries the accesses of the
//! **previous** instruction, so record `i` and step `i` hold the memory items of the next
//! instruction line; the last instruction has none (the tracer never writes them), and
//! the first line's items, made by an instruction before the trace, are record 0's
//! `mem_before` (left out when there are none) and [`Steps::before_first`].
//!
//! Record fields: `line` the instruction's line in the file (from 1), `regs` the registers
//! named on it (lowercase, the pc among them: a Tenet line names only the registers that
//! changed), `mem` the items in line order (`access` `read`, `write` or `readwrite` for
//! `mr`, `mw`, `mrw`; the bytes as hex), and, for columnar sinks only, `state`: the
//! register state before the instruction (every register the lines so far named; null
//! before a register is named; the pc always), in [`Steps::reg_names`]' order. Comment
//! lines (`#…`) are not records; `info` lists them.
//!
//! Tables (for columnar sinks): `instructions` (`i` key, `line`, `pc`, the state columns
//! `rax`…`r15`, `rip` or `eax`…`eip`), `registers` (`i`, `name`, `value`), `memory` and
//! `memory_before` (`i`, `access`, `addr`, `data`). Plain files are read in place; stdin
//! and compressed files through the streaming reader, in memory bounded by the longest
//! line. Records and steps read one instruction line ahead (the first line when opened,
//! for the architecture and so the register names and the state columns).
//!
//! The instruction stream ([`Handler::steps`]): step `k` is line `k`, its registers the
//! whole state (every register named so far, 0 before: [`Steps::regs_known`] says which),
//! its memory accesses `Read` with the bytes as `old`, `Write`/`ReadWrite` with them as
//! `new`.

use std::borrow::Cow;
use std::io::Read;
use std::sync::Arc;

use tenet_trace::{
    Arch, Instruction, Line, MemKind, MemOwned, ReadOptions, Reader, Registers, StreamReader,
};

use crate::schema::{Cell, Field, Json, Row, Schema, Type, Visitor};
use crate::steps::{self, AccessKind, Isa, NamedReg, RegValue, Step, Steps};
use crate::{Confidence, Ctx, Error, Handler, Hex, Info, Input, Offers, Record, Records, Source};

/// The Tenet handler.
#[derive(Debug)]
pub struct Tenet;

const NAME: &str = "tenet";

/// Progress is reported every this many lines.
const PROGRESS_EVERY: u64 = 1 << 14;

/// At most this many comment lines are listed by `info`.
const INFO_COMMENTS: usize = 16;

fn err(e: tenet_trace::Error) -> Error {
    Error::format(NAME, e)
}

fn read_options(ctx: &Ctx<'_>) -> Result<ReadOptions, Error> {
    let arch = match ctx.options.arch.as_deref() {
        None => None,
        Some(name) => Some(Arch::from_name(name).ok_or_else(|| {
            Error::Unsupported(format!(
                "unknown architecture {name:?} (tenet: amd64 or x86)"
            ))
        })?),
    };
    Ok(ReadOptions { arch })
}

/// The lines of a trace in memory or from a stream (both readers hold the parser's
/// register array inline: about the same size).
enum Lines<'a> {
    /// In memory, with the bytes and options to read them again from the start.
    Slice(Reader<'a>, &'a [u8], ReadOptions),
    Stream(StreamReader<Box<dyn Read + Send>>),
}

impl<'a> Lines<'a> {
    fn open(input: &'a mut Input, ctx: &Ctx<'_>) -> Result<Lines<'a>, Error> {
        let options = read_options(ctx)?;
        Ok(match input.source() {
            Source::Bytes(bytes) => Lines::Slice(Reader::parse(bytes, options), bytes, options),
            Source::Stream(s) => Lines::Stream(StreamReader::from_reader(s, options).map_err(err)?),
        })
    }

    fn next_line(&mut self) -> Option<Result<Line<'_>, Error>> {
        let line = match self {
            Lines::Slice(r, ..) => r.next_line(),
            Lines::Stream(s) => s.next_line(),
        };
        line.map(|l| l.map_err(err))
    }

    fn next_instruction(&mut self) -> Option<Result<Instruction<'_>, Error>> {
        let insn = match self {
            Lines::Slice(r, ..) => r.next_instruction(),
            Lines::Stream(s) => s.next_instruction(),
        };
        insn.map(|i| i.map_err(err))
    }

    /// The lines again from the first (in memory only: a stream reads on).
    fn restart(&self) -> Option<Lines<'a>> {
        match self {
            Lines::Slice(_, bytes, options) => Some(Lines::Slice(
                Reader::parse(bytes, *options),
                bytes,
                *options,
            )),
            Lines::Stream(_) => None,
        }
    }

    fn position(&self) -> u64 {
        match self {
            Lines::Slice(r, ..) => r.position(),
            Lines::Stream(s) => s.position(),
        }
    }

    fn summary(&self) -> tenet_trace::Summary {
        match self {
            Lines::Slice(r, ..) => r.summary(),
            Lines::Stream(s) => s.summary(),
        }
    }
}

impl Handler for Tenet {
    fn name(&self) -> &'static str {
        NAME
    }

    /// `--arch`: the architecture when the register names leave it open.
    fn offers(&self) -> Offers {
        Offers {
            reads: &["arch"],
            ..Offers::default()
        }
    }

    fn recognised_by(&self) -> &'static str {
        "first non-comment line: KEY=VALUE items with rip or eip"
    }

    /// The first line that is not a comment parses as Tenet items with a pc register (a
    /// `.log` name alone says nothing: many tools write `.log` files).
    fn detect(&self, head: &[u8], _file_name: &str) -> Option<Confidence> {
        tenet_trace::detect(head).map(|_| Confidence::Content)
    }

    fn info(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let mut lines = Lines::open(input, ctx)?;
        let mut comments = Vec::new();
        let mut comment_lines = 0u64;
        let mut items = [0u64; 3];
        let mut bytes = 0u64;
        let (mut first_pc, mut last_pc) = (None, None);
        let (mut min_pc, mut max_pc) = (u64::MAX, 0u64);
        let mut seen = 0u32;
        while let Some(line) = lines.next_line() {
            match line? {
                Line::Comment(c) => {
                    comment_lines = comment_lines.saturating_add(1);
                    if comments.len() < INFO_COMMENTS {
                        comments.push(String::from_utf8_lossy(c.text).into_owned());
                    }
                }
                Line::Instruction(insn) => {
                    let pc = insn.pc();
                    first_pc.get_or_insert(pc);
                    last_pc = Some(pc);
                    min_pc = min_pc.min(pc);
                    max_pc = max_pc.max(pc);
                    seen |= insn.regs.mask();
                    for m in insn.mem() {
                        let k = match m.kind {
                            MemKind::Read => 0,
                            MemKind::Write => 1,
                            MemKind::ReadWrite => 2,
                        };
                        if let Some(c) = items.get_mut(k) {
                            *c = c.saturating_add(1);
                        }
                        bytes = bytes.saturating_add(m.data.len() as u64);
                    }
                    if insn.index.is_multiple_of(PROGRESS_EVERY) {
                        ctx.progress(insn.offset.0);
                    }
                }
            }
        }
        let s = lines.summary();
        let arch = s.arch.unwrap_or(Arch::Amd64);
        let registers: Vec<String> = (0..)
            .zip(arch.registers())
            .filter(|&(i, _)| seen & (1u32 << i) != 0)
            .map(|(_, n)| (*n).to_owned())
            .collect();
        let [read, write, readwrite] = items;
        Ok(Info::new()
            .with("format", NAME)
            .with("architecture", s.arch.map(Arch::name))
            .with(
                "architecture_source",
                if s.arch_given {
                    "--arch"
                } else {
                    "register names"
                },
            )
            .with("lines", s.lines)
            .with("instructions", s.instructions)
            .with("line_ends", if s.crlf { "crlf" } else { "lf" })
            .with("first_pc", first_pc.map(Hex))
            .with("last_pc", last_pc.map(Hex))
            .with("lowest_pc", first_pc.map(|_| Hex(min_pc)))
            .with("highest_pc", first_pc.map(|_| Hex(max_pc)))
            .with("registers_named", registers)
            .with(
                "memory_items",
                Info::new()
                    .with("read", read)
                    .with("write", write)
                    .with("readwrite", readwrite),
            )
            .with("memory_bytes", bytes)
            .with("comment_lines", comment_lines)
            .with("comments", comments))
    }

    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let mut lines = Lines::open(input, ctx)?;
        while let Some(line) = lines.next_line() {
            if let Line::Instruction(i) = line?
                && i.index.is_multiple_of(PROGRESS_EVERY)
            {
                ctx.progress(i.offset.0);
            }
        }
        let s = lines.summary();
        Ok(Info::new()
            .with("instructions", s.instructions)
            .with("lines", s.lines))
    }

    fn records<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error> {
        let arch = read_options(ctx)?.arch;
        Ok(Box::new(LineRecords::new(Lines::open(input, ctx)?, arch)))
    }

    /// One step per instruction line, with the memory of the next line (module docs).
    fn steps<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Steps + 'a>, Error> {
        Ok(Box::new(TenetSteps::new(Lines::open(input, ctx)?)))
    }
}

/// The schema of `instructions` on `arch`: the register state's fields are those of
/// [`state_names`].
fn schema(arch: Arch) -> Arc<Schema> {
    let regs = Schema::new(
        "registers",
        vec![Field::new("name", Type::Name), Field::hex("value", 64)],
    );
    let mem_fields = || {
        vec![
            Field::new("access", Type::Name),
            Field::hex("addr", 64),
            Field::new("data", Type::Bytes),
        ]
    };
    let state = Schema::new(
        "state",
        state_names(arch)
            .iter()
            .map(|&n| {
                let field = Field::new(n, Type::UInt(64));
                // Every line names the pc; the others may not be named yet.
                if n == arch.pc_name() {
                    field
                } else {
                    field.nullable()
                }
            })
            .collect(),
    );
    Arc::new(Schema::new(
        "instructions",
        vec![
            Field::new("i", Type::UInt(64)).key(),
            Field::new("line", Type::UInt(64)),
            Field::hex("pc", 64),
            Field::new("regs", Type::Rows(Arc::new(regs))).json(Json::Object),
            Field::new(
                "mem",
                Type::Rows(Arc::new(Schema::new("memory", mem_fields()))),
            ),
            Field::new(
                "mem_before",
                Type::Rows(Arc::new(Schema::new("memory_before", mem_fields()))),
            )
            .optional(),
            Field::new("state", Type::Struct(Arc::new(state))).json(Json::Skip),
        ],
    ))
}

/// What a row needs of its instruction line once the reader has gone on to the next one.
#[derive(Clone, Copy)]
struct Held {
    index: u64,
    line: u64,
    /// The registers named on the line.
    regs: Registers,
    /// The register state before the instruction: every register named up to its line.
    state: Registers,
}

/// The rows of a trace: instruction `i`'s row is written once line `i + 1` is read, since
/// that line carries what instruction `i` accessed (module docs).
struct LineRecords<'a> {
    tables: [Arc<Schema>; 1],
    lines: Lines<'a>,
    /// Two rows' instruction lines, filled in turn: `slots[cur]` is the row that comes
    /// next (when `ahead`), the other slot takes the line read ahead. A row borrows its
    /// slot, so the two register sets of a line are copied once, not moved with the row.
    slots: [Held; 2],
    cur: usize,
    /// Whether `slots[cur]` holds a row still to hand out.
    ahead: bool,
    /// The first line's memory items: made by an instruction before the trace, shown on
    /// the first row as `mem_before`.
    before: Vec<MemOwned>,
    /// For each of [`state_names`], its index in [`Arch::registers`].
    order: Vec<usize>,
    /// The error met reading ahead, returned after the row that precedes it.
    error: Option<Error>,
    done: bool,
}

impl<'a> LineRecords<'a> {
    /// The rows of `lines`, the first line read ahead (for the architecture, so the
    /// schema's register state, and for its memory items).
    fn new(mut lines: Lines<'a>, arch: Option<Arch>) -> LineRecords<'a> {
        let (mut held, mut before, mut error) = (None, Vec::new(), None::<Error>);
        match lines.next_instruction() {
            None => {}
            Some(Ok(insn)) => {
                before = insn
                    .mem()
                    .map(|m| MemOwned {
                        kind: m.kind,
                        addr: m.addr,
                        data: m.data.to_vec(),
                    })
                    .collect();
                held = Some(Held {
                    index: insn.index,
                    line: insn.line,
                    regs: *insn.regs,
                    state: *insn.regs,
                });
            }
            Some(Err(e)) => error = Some(e),
        }
        let arch = held
            .as_ref()
            .map(|h| h.regs.arch())
            .or(arch)
            .unwrap_or(Arch::Amd64);
        let first = held.unwrap_or(Held {
            index: 0,
            line: 0,
            regs: Registers::new(arch),
            state: Registers::new(arch),
        });
        LineRecords {
            tables: [schema(arch)],
            lines,
            slots: [first, first],
            cur: 0,
            ahead: held.is_some(),
            before,
            order: state_order(arch),
            error,
            done: false,
        }
    }
}

/// One instruction as a row: its line's registers and the register state before it
/// (`held`), the memory items of the next line (`next`: what it accessed).
struct InstructionRow<'l> {
    held: &'l Held,
    next: Option<Instruction<'l>>,
    before: Vec<MemOwned>,
    order: &'l [usize],
}

impl Row for InstructionRow<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        let held = self.held;
        v.uint(held.index);
        v.uint(held.line);
        v.uint(held.regs.pc().unwrap_or(0));
        v.begin_list();
        for (name, value) in held.regs.iter() {
            v.row(&[Cell::Str(name), Cell::UInt(value)]);
        }
        v.end_list();
        let item = |v: &mut dyn Visitor, kind: MemKind, addr: u64, data: &[u8]| {
            v.begin_row();
            v.str(kind.name());
            v.uint(addr);
            v.bytes(data);
            v.end_row();
        };
        v.begin_list();
        for m in self.next.iter().flat_map(Instruction::mem) {
            item(v, m.kind, m.addr, m.data);
        }
        v.end_list();
        if self.before.is_empty() {
            v.null();
        } else {
            v.begin_list();
            for m in &self.before {
                item(v, m.kind, m.addr, &m.data);
            }
            v.end_list();
        }
        // In one call (JSON drops it at once).
        let mut state = [Cell::Null; MAX_STATE];
        for (cell, &k) in state.iter_mut().zip(self.order) {
            if let Some(value) = held.state.get(k) {
                *cell = Cell::UInt(value);
            }
        }
        v.row(state.get(..self.order.len()).unwrap_or_default());
    }
}

impl Records for LineRecords<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn position(&self) -> u64 {
        self.lines.position()
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        if self.done {
            return None;
        }
        if !self.ahead {
            self.done = true;
            return self.error.take().map(Err);
        }
        let before = std::mem::take(&mut self.before);
        let cur = self.cur;
        let next = match self.lines.next_instruction() {
            None => {
                self.ahead = false;
                None
            }
            Some(Ok(insn)) => {
                let [a, b] = &mut self.slots;
                let (this, ahead) = if cur == 0 { (&*a, b) } else { (&*b, a) };
                ahead.index = insn.index;
                ahead.line = insn.line;
                ahead.regs = *insn.regs;
                ahead.state = this.state;
                ahead.state.merge(insn.regs);
                self.cur = cur ^ 1;
                Some(insn)
            }
            Some(Err(e)) => {
                self.error = Some(e);
                self.ahead = false;
                None
            }
        };
        let [a, b] = &self.slots;
        let row = InstructionRow {
            held: if cur == 0 { a } else { b },
            next,
            before,
            order: &self.order,
        };
        Some(Ok(Record::boxed(0, Box::new(row))))
    }
}

/// The register state's names on `arch` (the `state` columns of `instructions`, the
/// order of [`Steps::reg_names`]).
fn state_names(arch: Arch) -> &'static [&'static str] {
    match arch {
        Arch::Amd64 => &AMD64_STATE,
        _ => &X86_STATE,
    }
}

/// For each of [`state_names`], its index in [`Arch::registers`].
fn state_order(arch: Arch) -> Vec<usize> {
    state_names(arch)
        .iter()
        .filter_map(|n| arch.register(n.as_bytes()))
        .collect()
}

/// The most registers in a state ([`state_names`]).
const MAX_STATE: usize = AMD64_STATE.len();

/// The order of [`Steps::reg_names`]: x64dbg's (so that `diff` lines up), the pc last.
const AMD64_STATE: [&str; 17] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15", "rip",
];
const X86_STATE: [&str; 9] = [
    "eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "eip",
];

/// The instruction stream of a Tenet trace (module docs).
struct TenetSteps<'a> {
    lines: Lines<'a>,
    names: Vec<Cow<'static, str>>,
    /// For each of `names`, its index in [`Arch::registers`].
    order: Vec<usize>,
    /// The whole register state (set from the first instruction line).
    state: Option<Registers>,
    values: Vec<u64>,
    /// Bit `k` set once register `names[k]` has been named by a line.
    known: u64,
    step: Step,
    /// The first line's memory items (see [`Steps::before_first`]).
    before: Step,
    /// The registers of the next line, read ahead for its memory items.
    next: Option<Registers>,
    /// The error met reading ahead, returned after the step that precedes it.
    error: Option<Error>,
    /// The index of the next step.
    index: u64,
    /// The step is already held (after a seek) and is what `next_step` returns.
    pending: bool,
    done: bool,
}

impl<'a> TenetSteps<'a> {
    /// The stream over `lines`, its first line read ahead (module docs): the register
    /// names and the architecture are known before the first step, as [`Steps::reg_names`]
    /// asks, so that `diff` names the registers and `--ignore` takes their names.
    fn new(lines: Lines<'a>) -> TenetSteps<'a> {
        let mut steps = TenetSteps {
            lines,
            names: Vec::new(),
            order: Vec::new(),
            state: None,
            values: Vec::new(),
            known: 0,
            step: Step::default(),
            before: Step::default(),
            next: None,
            error: None,
            index: 0,
            pending: false,
            done: false,
        };
        steps.read_first();
        steps
    }

    /// Reads the first instruction line ahead: its memory items, made by an instruction
    /// before the trace, into `before`; its architecture sets the register names; its
    /// registers wait for the first step (an error, for the first `next_step`).
    fn read_first(&mut self) {
        let first = self.read();
        std::mem::swap(&mut self.before, &mut self.step);
        self.step.clear();
        match first {
            None => {}
            Some(Ok(r)) => {
                self.start(r.arch());
                self.next = Some(r);
            }
            Some(Err(e)) => self.error = Some(e),
        }
    }

    /// Reads the next instruction line: its registers, its memory items appended to
    /// `step` as accesses.
    fn read(&mut self) -> Option<Result<Registers, Error>> {
        let insn = match self.lines.next_instruction()? {
            Ok(i) => i,
            Err(e) => return Some(Err(e)),
        };
        for m in insn.mem() {
            let len = u32::try_from(m.data.len()).unwrap_or(u32::MAX);
            let (old, new, kind) = match m.kind {
                MemKind::Read => (Some(m.data), None, AccessKind::Read),
                MemKind::Write => (None, Some(m.data), AccessKind::Write),
                MemKind::ReadWrite => (None, Some(m.data), AccessKind::ReadWrite),
            };
            self.step.push_access(m.addr, old, new, len);
            if let Some(a) = self.step.mem.last_mut() {
                a.kind = kind;
            }
        }
        Some(Ok(*insn.regs))
    }

    /// Sets the register names from the architecture of the first line.
    fn start(&mut self, arch: Arch) {
        self.names = state_names(arch)
            .iter()
            .map(|n| Cow::Borrowed(*n))
            .collect();
        self.order = state_order(arch);
        self.values = vec![0; self.order.len()];
        self.state = Some(Registers::new(arch));
    }

    /// Moves to the next step: applies its line's registers, reads the next line ahead for
    /// the memory items. `None` at the end.
    fn advance(&mut self) -> Option<Result<(), Error>> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        let regs = self.next.take()?;
        if self.state.is_none() {
            self.start(regs.arch());
        }
        let state = self.state.get_or_insert(Registers::new(regs.arch()));
        state.merge(&regs);
        for (bit, (v, &k)) in self.values.iter_mut().zip(&self.order).enumerate() {
            *v = state.value(k);
            if state.get(k).is_some() {
                self.known |= 1u64.checked_shl(bit as u32).unwrap_or(0);
            }
        }
        let i = self.index;
        self.index = i.saturating_add(1);
        self.step.clear();
        self.step.i = i;
        self.step.pc = regs.pc().unwrap_or(0);
        match self.read() {
            None => {}
            Some(Ok(r)) => self.next = Some(r),
            Some(Err(e)) => self.error = Some(e),
        }
        Some(Ok(()))
    }
}

impl Steps for TenetSteps<'_> {
    fn isa(&self) -> Isa {
        match self.state.map(|s| s.arch()) {
            Some(Arch::X86) => Isa::X86,
            _ => Isa::X64,
        }
    }

    fn reg_names(&self) -> &[Cow<'static, str>] {
        &self.names
    }

    fn next_step(&mut self) -> Option<Result<&Step, Error>> {
        if std::mem::take(&mut self.pending) {
            return Some(Ok(&self.step));
        }
        if self.done {
            return None;
        }
        match self.advance() {
            Some(Ok(())) => Some(Ok(&self.step)),
            None => {
                self.done = true;
                None
            }
            Some(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    fn regs(&self) -> &[u64] {
        &self.values
    }

    fn regs_known(&self) -> u64 {
        self.known
    }

    fn before_first(&self) -> Option<&Step> {
        Some(&self.before).filter(|b| !b.mem.is_empty())
    }

    fn named_regs(&self, out: &mut Vec<NamedReg>) {
        out.extend(self.names.iter().zip(&self.values).map(|(n, &v)| NamedReg {
            name: n.clone(),
            value: RegValue::Word(v),
        }));
    }

    /// Reads on to step `n`; to an earlier step, reads again from the start (a trace in
    /// memory: a stream cannot go back).
    fn seek(&mut self, n: u64) -> Result<(), Error> {
        let first_unread = if self.pending {
            self.step.i
        } else {
            self.index
        };
        if n < first_unread
            && let Some(lines) = self.lines.restart()
        {
            *self = TenetSteps::new(lines);
        }
        steps::seek_by_scan(self, n)?;
        self.pending = true;
        Ok(())
    }

    fn position(&self) -> u64 {
        self.lines.position()
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::schema::testing::{Val, input, records, testdata};
    use crate::{Options, detect_bytes};

    /// (pc, rsp, rbp, rax, accesses as (kind, addr, old, new)) of every step.
    type Seen = (
        u64,
        u64,
        u64,
        u64,
        Vec<(AccessKind, u64, Option<Vec<u8>>, Option<Vec<u8>>)>,
    );

    fn steps_of(name: &str, bytes: &[u8], gzip: bool) -> Vec<Seen> {
        let options = Options::default();
        let mut inp = input(name, bytes, gzip);
        let mut s = Tenet.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
        let mut out = Vec::new();
        while let Some(step) = s.next_step() {
            let step = step.unwrap().clone();
            let names = s.reg_names();
            let reg = |n: &str| s.regs()[names.iter().position(|x| x == n).unwrap()];
            out.push((
                step.pc,
                reg("rsp"),
                reg("rbp"),
                reg("rax"),
                step.mem
                    .iter()
                    .map(|a| {
                        (
                            a.kind,
                            a.addr,
                            step.old(a).map(<[u8]>::to_vec),
                            step.new(a).map(<[u8]>::to_vec),
                        )
                    })
                    .collect(),
            ));
        }
        out
    }

    /// Seeking lands on step `n` with its registers and accesses, whatever was read
    /// before: forwards, back (read again from the start), onto the step held, after the
    /// end; past the end is an error; a stream (gzip) goes forwards only.
    #[test]
    fn seek_goes_to_step_n_from_anywhere() {
        let bytes = testdata("tenet/basic.log");
        let all = steps_of("basic.log", &bytes, false);
        let n = all.len() as u64;
        let options = Options::default();
        let mut inp = input("basic.log", &bytes, false);
        let mut s = Tenet.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
        let pc_at = |s: &mut Box<dyn Steps + '_>, k: u64| {
            s.seek(k).unwrap();
            let step = s.next_step().unwrap().unwrap();
            assert_eq!(step.i, k);
            let pc = step.pc;
            let names = s.reg_names().to_vec();
            let rsp = s.regs()[names.iter().position(|x| x == "rsp").unwrap()];
            (pc, rsp)
        };
        for k in [3, 1, 1, 0, n - 1, 2, n - 1, 0] {
            let (pc, rsp) = pc_at(&mut s, k);
            assert_eq!(
                (pc, rsp),
                (all[k as usize].0, all[k as usize].1),
                "step {k}"
            );
        }
        // Onto the step held: it is what comes next, once.
        s.seek(2).unwrap();
        s.seek(2).unwrap();
        assert_eq!(s.next_step().unwrap().unwrap().i, 2);
        assert_eq!(s.next_step().unwrap().unwrap().i, 3);
        while s.next_step().is_some() {}
        assert!(s.seek(n).unwrap_err().to_string().contains("past the end"));
        assert_eq!(pc_at(&mut s, 1).0, all[1].0);

        let mut inp = input("basic.log", &bytes, true);
        let mut s = Tenet.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
        assert_eq!(pc_at(&mut s, 2).0, all[2].0);
        assert_eq!(pc_at(&mut s, 4).0, all[4].0);
        let e = s.seek(1).unwrap_err().to_string();
        assert!(
            e.contains("cannot go back to instruction 1 in a stream"),
            "{e}"
        );
    }

    /// The hand-built `basic.log` (push rbp; mov rbp,rsp; mov rax,[rsp+0x10]; call; ret;
    /// pop rbp; …): the registers carried forward, each line's memory items attributed to
    /// the instruction before it (push writes the old rbp, the load reads 0x55, call writes
    /// the return address, ret and pop read), nothing for the last one; in place and
    /// streamed.
    #[test]
    fn steps_carry_the_state_and_attribute_memory_to_the_instruction() {
        use AccessKind::{Read, Write};
        let bytes = testdata("tenet/basic.log");
        let le = |v: u64| Some(v.to_le_bytes().to_vec());
        let expected: Vec<Seen> = vec![
            (
                0x401000,
                0x7fff0,
                0x1234,
                0,
                vec![(Write, 0x7ffe8, None, le(0x1234))],
            ),
            (0x401001, 0x7ffe8, 0x1234, 0, vec![]),
            (
                0x401004,
                0x7ffe8,
                0x7ffe8,
                0,
                vec![(Read, 0x7fff8, le(0x55), None)],
            ),
            (
                0x401009,
                0x7ffe8,
                0x7ffe8,
                0x55,
                vec![(Write, 0x7ffe0, None, le(0x40100e))],
            ),
            (
                0x402000,
                0x7ffe0,
                0x7ffe8,
                0x55,
                vec![(Read, 0x7ffe0, le(0x40100e), None)],
            ),
            (
                0x40100e,
                0x7ffe8,
                0x7ffe8,
                0x55,
                vec![(Read, 0x7ffe8, le(0x1234), None)],
            ),
            (0x40100f, 0x7fff0, 0x1234, 0x55, vec![]),
        ];
        for gzip in [false, true] {
            assert_eq!(steps_of("basic.log", &bytes, gzip), expected);
        }
        // Seeking to step 4 (ret) gives its state.
        let options = Options::default();
        let mut inp = input("basic.log", &bytes, false);
        let mut s = Tenet.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
        assert_eq!(s.isa(), Isa::X64);
        s.seek(4).unwrap();
        let step = s.next_step().unwrap().unwrap();
        assert_eq!((step.i, step.pc), (4, 0x402000));
        assert_eq!(s.next_step().unwrap().unwrap().i, 5);
        let mut named = Vec::new();
        s.named_regs(&mut named);
        assert_eq!(named.len(), 17);
        assert_eq!(named[4].name, "rsp");
        assert_eq!(named[4].value, RegValue::Word(0x7ffe8));
    }

    /// A damaged line: the steps before it come first (the one before it without memory),
    /// then the error with its line.
    #[test]
    fn steps_stop_at_the_damage() {
        let options = Options::default();
        let mut inp = input("x.log", b"rip=1\nrip=2\nrip=3,rflags=0\n", false);
        let mut s = Tenet.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
        assert_eq!(s.next_step().unwrap().unwrap().pc, 1);
        assert_eq!(s.next_step().unwrap().unwrap().pc, 2);
        let e = s.next_step().unwrap().unwrap_err();
        assert!(
            e.to_string().starts_with("line 3, column 7: unknown key"),
            "{e}"
        );
        assert!(s.next_step().is_none());
    }

    /// Rows: `i`, `line`, `pc`, the registers named on the line, the memory items the
    /// instruction made (carried by the next line), those of the first line (made before
    /// the trace) on the first row only, the register state before the instruction.
    #[test]
    fn records_are_the_instructions() {
        let bytes = testdata("tenet/qemu-x86.log");
        for gzip in [false, true] {
            let (tables, rows) = records(&Tenet, "qemu-x86.log", &bytes, gzip);
            assert_eq!(tables[0].name, "instructions");
            let state: Vec<&str> = match &tables[0].field("state").unwrap().ty {
                Type::Struct(s) => s.fields.iter().map(|f| &*f.name).collect(),
                _ => panic!("a struct"),
            };
            assert_eq!(state, X86_STATE);
            assert_eq!(rows.len(), 3);
            let row = &rows[0].1;
            assert_eq!(row[..3], [Val::U(0), Val::U(2), Val::U(0x401000)]);
            assert_eq!(
                row[4],
                Val::List(vec![Val::Row(vec![
                    Val::S("readwrite".into()),
                    Val::U(0x12ff70),
                    Val::Bytes(vec![0x2b, 0x1a, 0, 0])
                ])])
            );
            assert_eq!(row[5], Val::Null);
            let row = &rows[1].1;
            assert_eq!(row[..3], [Val::U(1), Val::U(3), Val::U(0x401005)]);
            assert_eq!(
                row[3],
                Val::List(vec![Val::Row(vec![Val::S("eip".into()), Val::U(0x401005)])])
            );
            assert_eq!(row[4], Val::List(vec![]));
            // eax ecx edx ebx esp ebp esi edi eip before instruction 2.
            let row = &rows[2].1;
            let words = [0x1a2c, 0, 0, 0, 0x12ff70, 0x12ff80, 0, 0, 0x401006];
            assert_eq!(row[6], Val::Row(words.iter().map(|&w| Val::U(w)).collect()));
        }
        // A first line without memory items: no `mem_before`.
        let bytes = testdata("tenet/basic.log");
        let (_, rows) = records(&Tenet, "basic.log", &bytes, false);
        assert_eq!(rows[0].1[5], Val::Null);
        let text =
            b"rsp=0x10,rip=0x1,mw=0x8:0100000000000000\nrip=0x2,mr=0x10:02\nrax=0x5,rip=0x3\n";
        // A first line with one (made before the trace), registers not named yet null in
        // the state.
        let (_, rows) = records(&Tenet, "x.log", text, false);
        let item = |access: &str, addr: u64, data: Vec<u8>| {
            Val::List(vec![Val::Row(vec![
                Val::S(access.into()),
                Val::U(addr),
                Val::Bytes(data),
            ])])
        };
        assert_eq!(rows[0].1[4], item("read", 0x10, vec![2]));
        assert_eq!(
            rows[0].1[5],
            item("write", 0x8, vec![1, 0, 0, 0, 0, 0, 0, 0])
        );
        assert_eq!(rows[1].1[4], Val::List(vec![]));
        assert_eq!(rows[2].1[5], Val::Null);
        let state = |k: usize| rows[k].1[6].items().to_vec();
        assert_eq!(state(0)[0], Val::Null, "rax not named yet");
        assert_eq!(state(0)[4], Val::U(0x10), "rsp");
        assert_eq!(state(0)[16], Val::U(0x1), "rip");
        assert_eq!(state(2)[0], Val::U(0x5), "rax named on line 3");
    }

    /// Detection reads the first line that is not a comment; a `.log` name says nothing.
    #[test]
    fn detection() {
        let name = |h: &[u8], n: &str| detect_bytes(h, n).map(|h| h.name());
        assert_eq!(name(b"rip=0x1\n", "trace"), Some("tenet"));
        assert_eq!(name(b"# SO: a @ 0x1\r\nEIP=1\r\n", "x.txt"), Some("tenet"));
        assert_eq!(name(b"rax=1,rip=0x10,mr=0x1:0", "cut.log"), Some("tenet"));
        assert_eq!(name(b"2024-01-01 started\n", "x.log"), None);
        assert_eq!(name(b"rax=1\n", "x.log"), None);
        assert_eq!(name(b"a=1,rip=2\n", "x.log"), None);
        assert_eq!(name(b"", "trace.0.log"), None);
    }

    /// `--arch` forces the architecture; an unknown name is refused.
    #[test]
    fn arch_option() {
        let options = Options {
            arch: Some("x86".into()),
            ..Options::default()
        };
        let mut inp = input("x.log", b"rip=1\n", false);
        let e = Tenet
            .validate(&mut inp, &mut Ctx::new(&options))
            .unwrap_err();
        assert!(e.to_string().contains("not a x86 register"), "{e}");
        let options = Options {
            arch: Some("arm".into()),
            ..Options::default()
        };
        let mut inp = input("x.log", b"rip=1\n", false);
        assert!(matches!(
            Tenet.validate(&mut inp, &mut Ctx::new(&options)),
            Err(Error::Unsupported(_))
        ));
    }
}
