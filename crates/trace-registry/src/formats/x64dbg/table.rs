//! The table of an x64dbg trace, `instructions`, and its child tables `registers` and
//! `memory`, stated once: [`INSTRUCTIONS`], [`REGISTERS`] and [`MEMORY`] list each table's
//! fields in order, and everything about a table follows those lists: its schema
//! ([`schema`]), the visit of a row ([`InstructionRow`]) and the typed fast path's binding
//! of the sink's columns ([`InstructionColumns::of`], child tables found by name), which
//! [`fill_instructions`] fills. Each list entry names its field and the variant that says
//! what it holds; a new variant does not compile until each of the three handles it.

use std::cell::Cell as Flag;
use std::sync::{Arc, OnceLock};

use trac_x64dbg::{
    Arch, Cursor, Instruction, MAX_FIELD, RegChange, RegDump, RegLayout, RegisterField,
    general_names,
};

use super::err;
use crate::Error;
use crate::disasm::Disassembler;
use crate::schema::{
    BytesBuf, Cell, Col, Columns, Field, IntBuf, Json, Row, Schema, Type, Visitor,
};
use crate::steps::Access;

/// A field of `instructions`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InstructionField {
    /// The instruction's number (the key of the child tables).
    Index,
    /// The file offset of its block.
    Offset,
    /// Its thread.
    Thread,
    /// Its address (the instruction-pointer word of the state).
    Pc,
    /// Its bytes.
    Opcode,
    /// Its text, with `--disasm` only (null when the bytes do not decode).
    Asm,
    /// The `registers` child table: the registers its block records.
    Regs,
    /// The `memory` child table: its memory accesses.
    Mem,
    /// The general registers, the pc and the flags before it, one column each in columnar
    /// sinks (not shown in JSON).
    State,
    /// The `REGDUMP` words the block records, only when `regs` does not tell them (a field
    /// wider than a word recorded in part; see [`RegLayout::show`]): left out of JSON
    /// otherwise.
    Words,
}

/// A field of `registers`: one register or flag of a word the block records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChangeField {
    /// The field's name ([`RegisterField::name`]).
    Name,
    /// Its value, when it has at most 8 bytes.
    Value,
    /// Its value when it is wider (x87 and vector registers): the bytes of the number, most
    /// significant first.
    Wide,
}

/// A field of `memory`: one memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AccessField {
    /// The address.
    Addr,
    /// The word before the instruction.
    Old,
    /// The word after it, when it changed.
    New,
    /// With `--disasm`: the operand's bytes in the word (null when not matched).
    Size,
    /// With `--disasm`: `read`, `write`, `readwrite` or `unknown`.
    Access,
}

/// The fields of `instructions`, in order (JSON:
/// `{"i","offset","thread","pc","opcode","regs":{…},"mem":[…]}`, `asm` after `opcode` with
/// `--disasm`, `words` at the end when `regs` does not tell them).
const INSTRUCTIONS: [(&str, InstructionField); 10] = [
    ("i", InstructionField::Index),
    ("offset", InstructionField::Offset),
    ("thread", InstructionField::Thread),
    ("pc", InstructionField::Pc),
    ("opcode", InstructionField::Opcode),
    ("asm", InstructionField::Asm),
    ("regs", InstructionField::Regs),
    ("mem", InstructionField::Mem),
    ("state", InstructionField::State),
    ("words", InstructionField::Words),
];

/// The fields of `registers`, after the key `i` (JSON: one object, `"name":"0x…"`, the
/// value from `value` or `wide`, whichever the field has).
const REGISTERS: [(&str, ChangeField); 3] = [
    ("name", ChangeField::Name),
    ("value", ChangeField::Value),
    ("wide", ChangeField::Wide),
];

/// The fields of `memory`, after the key `i`.
const MEMORY: [(&str, AccessField); 5] = [
    ("addr", AccessField::Addr),
    ("old", AccessField::Old),
    ("new", AccessField::New),
    ("size", AccessField::Size),
    ("access", AccessField::Access),
];

impl InstructionField {
    /// The field named `name` of this kind, or `None` where it is not in the table
    /// (`asm` without `disasm`).
    fn field(self, name: &'static str, arch: Arch, disasm: bool) -> Option<Field> {
        Some(match self {
            InstructionField::Index => Field::new(name, Type::UInt(64)).key(),
            InstructionField::Offset => Field::new(name, Type::UInt(64)),
            InstructionField::Thread => Field::new(name, Type::UInt(32)),
            InstructionField::Pc => Field::hex(name, 64),
            InstructionField::Opcode => Field::new(name, Type::Bytes),
            InstructionField::Asm if disasm => Field::new(name, Type::Str).nullable(),
            InstructionField::Asm => return None,
            InstructionField::Regs => {
                let fields = REGISTERS.iter().map(|&(n, f)| f.field(n));
                let regs = Schema::new("registers", fields.collect());
                Field::new(name, Type::Rows(Arc::new(regs))).json(Json::Object)
            }
            InstructionField::Mem => {
                let fields = MEMORY.iter().filter_map(|&(n, f)| f.field(n, disasm));
                let mem = Schema::new("memory", fields.collect());
                Field::new(name, Type::Rows(Arc::new(mem)))
            }
            InstructionField::State => {
                let state = Schema::new(
                    "state",
                    general_names(arch)
                        .map(|n| Field::new(n, Type::UInt(64)))
                        .collect(),
                );
                Field::new(name, Type::Struct(Arc::new(state))).json(Json::Skip)
            }
            InstructionField::Words => {
                Field::new(name, Type::List(Box::new(Type::UInt(32)))).optional()
            }
        })
    }
}

impl ChangeField {
    /// The field named `name` of this kind.
    fn field(self, name: &'static str) -> Field {
        match self {
            ChangeField::Name => Field::new(name, Type::Name),
            ChangeField::Value => Field::hex(name, 64).nullable(),
            ChangeField::Wide => Field::new(name, Type::Bytes)
                .json(Json::HexBytes0x)
                .nullable(),
        }
    }
}

impl AccessField {
    /// The field named `name` of this kind, or `None` where it is not in the table
    /// (`size` and `access` without `disasm`).
    fn field(self, name: &'static str, disasm: bool) -> Option<Field> {
        Some(match self {
            AccessField::Addr | AccessField::Old => Field::hex(name, 64),
            AccessField::New => Field::hex(name, 64).optional(),
            AccessField::Size if disasm => Field::new(name, Type::UInt(32)).nullable(),
            AccessField::Access if disasm => Field::new(name, Type::Name),
            AccessField::Size | AccessField::Access => return None,
        })
    }
}

/// The schema of `instructions` ([`INSTRUCTIONS`]) on `arch`, with `--disasm`'s fields
/// when `disasm`; made once per case. The `state` struct (flattened into one column per
/// general register by columnar sinks) is the register state *before* the instruction,
/// as the replay gives it (x64dbg stores the values before the instruction executes).
pub(super) fn schema(arch: Arch, disasm: bool) -> Arc<Schema> {
    static CELLS: [OnceLock<Arc<Schema>>; 4] = [const { OnceLock::new() }; 4];
    let at = usize::from(arch == Arch::X86) << 1 | usize::from(disasm);
    let Some(cell) = CELLS.get(at) else {
        return Arc::new(Schema::new("instructions", Vec::new()));
    };
    cell.get_or_init(|| {
        let fields = INSTRUCTIONS
            .iter()
            .filter_map(|&(n, f)| f.field(n, arch, disasm));
        Arc::new(Schema::new("instructions", fields.collect()))
    })
    .clone()
}

/// One `registers` row: field `f` of `regs` (its value in `value` or in `wide`).
#[inline(always)]
fn visit_register(v: &mut dyn Visitor, regs: &RegDump, f: &RegisterField) {
    if f.size <= 8 {
        let value = regs.field_u64(f);
        v.row(&REGISTERS.map(|(_, c)| match c {
            ChangeField::Name => Cell::Str(f.name),
            ChangeField::Value => Cell::UInt(value),
            ChangeField::Wide => Cell::Null,
        }));
    } else {
        let mut buf = [0; MAX_FIELD];
        v.begin_row();
        for &(_, c) in &REGISTERS {
            match c {
                ChangeField::Name => v.str(f.name),
                ChangeField::Value => v.null(),
                ChangeField::Wide => v.bytes(regs.field_be(f, &mut buf)),
            }
        }
        v.end_row();
    }
}

/// What `--disasm` adds to an instruction row, worked out before the row is handed out
/// (rows are visited through `&self`; the decode cache needs `&mut`).
pub(super) struct DisasmRow {
    /// The disassembler; its [`Disassembler::last_asm`] is the current instruction's text
    /// (read in place from its cache, not copied).
    disassembler: Disassembler,
    /// The current instruction's memory entries, sized and classified, in recorded order.
    accesses: Vec<Access>,
}

impl DisasmRow {
    pub(super) fn new(arch: Arch) -> DisasmRow {
        DisasmRow {
            disassembler: Disassembler::new(super::isa(arch)),
            accesses: Vec::new(),
        }
    }

    /// Disassembles `ins` and matches its memory entries, with `regs` the state before it.
    pub(super) fn prepare(&mut self, ins: &Instruction<'_>, regs: &RegDump, state_words: usize) {
        let pc = regs.ip();
        let word = u32::try_from(regs.arch().word_size()).unwrap_or(8);
        self.accesses.clear();
        self.accesses.extend(ins.mem().map(|m| Access {
            addr: m.address,
            len: word,
            ..Access::default()
        }));
        let words = regs.words();
        let state = words.get(..state_words).unwrap_or(words);
        self.disassembler
            .annotate_asm(pc, ins.opcode(), state, &mut self.accesses);
    }
}

/// One instruction as a row: the block, the register state before it, register names.
pub(super) struct InstructionRow<'r> {
    /// The instruction.
    pub(super) ins: Instruction<'r>,
    /// The registers before it.
    pub(super) regs: &'r RegDump,
    /// The fields of the `REGDUMP`.
    pub(super) layout: &'static RegLayout,
    /// Set by the visit of `regs`: its fields tell the words the block records (`words`
    /// is left out).
    pub(super) exact: Flag<bool>,
    /// How many leading words of `regs` the `state` struct holds.
    pub(super) state_words: usize,
    /// With `--disasm`: the text and sized accesses of this instruction.
    pub(super) disasm: Option<&'r DisasmRow>,
}

impl Row for InstructionRow<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        // Unrolled: with a constant index each `visit_field` folds to its one arm (a loop over
        // the table cost `dump` 7% more instructions). The assertion keeps the list whole.
        const _: () = assert!(
            INSTRUCTIONS.len() == 10,
            "visit every field of INSTRUCTIONS"
        );
        macro_rules! visit_each {
            ($($i:literal)*) => { $( self.visit_field(INSTRUCTIONS[$i].1, v); )* };
        }
        visit_each!(0 1 2 3 4 5 6 7 8 9);
    }
}

impl InstructionRow<'_> {
    /// The value of one field of `instructions` ([`INSTRUCTIONS`]).
    #[inline(always)]
    fn visit_field(&self, field: InstructionField, v: &mut dyn Visitor) {
        let ins = &self.ins;
        match field {
            InstructionField::Index => v.uint(ins.index()),
            InstructionField::Offset => v.uint(ins.offset().0),
            InstructionField::Thread => v.uint(u64::from(ins.thread())),
            InstructionField::Pc => v.uint(self.regs.ip()),
            InstructionField::Opcode => v.bytes(ins.opcode()),
            InstructionField::Asm => {
                if let Some(d) = self.disasm {
                    match d.disassembler.last_asm() {
                        Some(asm) => v.str(asm),
                        None => v.null(),
                    }
                }
            }
            InstructionField::Regs => {
                v.begin_list();
                let regs = self.regs;
                let words = ins.regs().map(|r| r.index);
                let exact = self
                    .layout
                    .show(regs, words, |f| visit_register(v, regs, f));
                self.exact.set(exact);
                v.end_list();
            }
            InstructionField::Words => {
                if self.exact.get() {
                    v.null();
                } else {
                    v.begin_list();
                    for r in ins.regs() {
                        v.uint(u64::from(r.index));
                    }
                    v.end_list();
                }
            }
            InstructionField::Mem => {
                v.begin_list();
                for (k, m) in ins.mem().enumerate() {
                    let annotated = self
                        .disasm
                        .map(|d| d.accesses.get(k).copied().unwrap_or_default());
                    // The row in one call.
                    let mut cells = [Cell::Null; MEMORY.len()];
                    let mut n = 0usize;
                    for (&(_, f), cell) in MEMORY.iter().zip(&mut cells) {
                        *cell = match (f, annotated) {
                            (AccessField::Addr, _) => Cell::UInt(m.address),
                            (AccessField::Old, _) => Cell::UInt(m.old),
                            (AccessField::New, _) => m.new.map_or(Cell::Null, Cell::UInt),
                            (AccessField::Size, Some(a)) if a.sized => Cell::UInt(u64::from(a.len)),
                            (AccessField::Size, Some(_)) => Cell::Null,
                            (AccessField::Access, Some(a)) => Cell::Str(a.kind.name()),
                            // Without `--disasm`, not in the table.
                            (AccessField::Size | AccessField::Access, None) => break,
                        };
                        n = n.saturating_add(1);
                    }
                    v.row(cells.get(..n).unwrap_or_default());
                }
                v.end_list();
            }
            InstructionField::State => {
                // The leading words of the dump, in one call.
                let words = self.regs.words();
                v.row(&[Cell::UInts(words.get(..self.state_words).unwrap_or(words))]);
            }
        }
    }
}

/// The columns of `instructions` (and of `registers` and `memory` when they are wanted) as
/// the typed fast path fills them: the layout of [`schema`] without `--disasm`.
pub(super) struct InstructionColumns<'c> {
    index: &'c mut IntBuf,
    offset: &'c mut IntBuf,
    thread: &'c mut IntBuf,
    pc: &'c mut IntBuf,
    opcode: &'c mut BytesBuf,
    /// The `state` words.
    state: Vec<&'c mut IntBuf>,
    /// `words`.
    words: &'c mut dyn Visitor,
    /// `registers`, when wanted.
    regs: Option<RegCols<'c>>,
    /// `memory`, when wanted.
    mem: Option<MemCols<'c>>,
}

/// The columns of `registers`: the key `i`, then [`REGISTERS`].
struct RegCols<'c> {
    i: &'c mut IntBuf,
    name: &'c mut dyn Visitor,
    value: &'c mut IntBuf,
    wide: &'c mut BytesBuf,
}

/// The columns of `memory` without `--disasm`: the key `i`, then [`MEMORY`].
struct MemCols<'c> {
    i: &'c mut IntBuf,
    addr: &'c mut IntBuf,
    old: &'c mut IntBuf,
    new: &'c mut IntBuf,
}

/// An integer column, or `None`.
fn ints(c: Col<'_>) -> Option<&mut IntBuf> {
    match c {
        Col::Ints(b) => Some(b),
        _ => None,
    }
}

impl<'c> InstructionColumns<'c> {
    /// The columns, when the sink's layout is the one [`INSTRUCTIONS`] states (`None`:
    /// visit instead), with `state_words` words in `state`.
    pub(super) fn of(cols: Columns<'c>, state_words: usize) -> Option<InstructionColumns<'c>> {
        let mut record = cols.record.into_iter();
        let (mut index, mut offset, mut thread, mut pc) = (None, None, None, None);
        let (mut opcode, mut state, mut words) = (None, None, None);
        for &(_, field) in &INSTRUCTIONS {
            match field {
                InstructionField::Index => index = ints(record.next()?),
                InstructionField::Offset => offset = ints(record.next()?),
                InstructionField::Thread => thread = ints(record.next()?),
                InstructionField::Pc => pc = ints(record.next()?),
                InstructionField::Opcode => match record.next()? {
                    Col::Bytes(b) => opcode = Some(b),
                    _ => return None,
                },
                // Not in the layout without `--disasm`.
                InstructionField::Asm => {}
                // Child tables: their own columns, below.
                InstructionField::Regs | InstructionField::Mem => {}
                InstructionField::State => {
                    let words = record.by_ref().take(state_words).map(ints);
                    state = Some(words.collect::<Option<Vec<_>>>()?);
                }
                InstructionField::Words => match record.next()? {
                    Col::Other(v) => words = Some(v),
                    _ => return None,
                },
            }
        }
        let state = state.filter(|s| s.len() == state_words)?;
        if record.next().is_some() {
            return None;
        }
        let (mut regs, mut mem) = (None, None);
        for (name, child) in cols.children {
            let field = INSTRUCTIONS.iter().find(|(n, _)| *n == name)?.1;
            let mut c = child.into_iter();
            // A child row starts with its parent's key, `i`.
            let i = ints(c.next()?)?;
            match field {
                InstructionField::Regs => {
                    let (mut names, mut value, mut wide) = (None, None, None);
                    for &(_, f) in &REGISTERS {
                        match (f, c.next()?) {
                            (ChangeField::Name, Col::Other(v)) => names = Some(v),
                            (ChangeField::Value, col) => value = ints(col),
                            (ChangeField::Wide, Col::Bytes(b)) => wide = Some(b),
                            _ => return None,
                        }
                    }
                    let (name, value, wide) = (names?, value?, wide?);
                    regs = Some(RegCols {
                        i,
                        name,
                        value,
                        wide,
                    });
                }
                InstructionField::Mem => {
                    let (mut addr, mut old, mut new) = (None, None, None);
                    for &(_, f) in &MEMORY {
                        match f {
                            AccessField::Addr => addr = ints(c.next()?),
                            AccessField::Old => old = ints(c.next()?),
                            AccessField::New => new = ints(c.next()?),
                            // Not in the layout without `--disasm`.
                            AccessField::Size | AccessField::Access => {}
                        }
                    }
                    let (addr, old, new) = (addr?, old?, new?);
                    mem = Some(MemCols { i, addr, old, new });
                }
                _ => return None,
            }
            if c.next().is_some() {
                return None;
            }
        }
        Some(InstructionColumns {
            index: index?,
            offset: offset?,
            thread: thread?,
            pc: pc?,
            opcode: opcode?,
            state,
            words: words?,
            regs,
            mem,
        })
    }
}

/// A new buffer for [`fill_instructions`]'s state words, kept from one fill to the next.
pub(super) fn new_stage() -> Box<StateStage> {
    Box::new([[0; STATE_STRIDE]; MAX_STATE])
}

/// Up to `max` instructions of `r` into `cols` (the same values as [`InstructionRow`]
/// visits): how many. The end sets `done`; an error sets `done` and `failed` (reported
/// by the next call).
///
/// One loop over the cursor, whose fast path (the usual block) is inlined into it and
/// decodes each block's register changes once, as it applies them (and reports them for
/// the `registers` table). Each row's `state` words are copied into a small
/// buffer by column ([`StateRows`]) and appended to the columns a stretch at a time; the
/// thread is filled in runs, the pc from the state and `i` as a count.
pub(super) fn fill_instructions(
    r: &mut Cursor<'_>,
    cols: InstructionColumns<'_>,
    stage: &mut StateStage,
    layout: &'static RegLayout,
    max: usize,
    done: &mut bool,
    failed: &mut Option<Error>,
) -> usize {
    let InstructionColumns {
        index: ci,
        offset: co,
        thread: ct,
        pc: cp,
        opcode,
        mut state,
        words,
        regs,
        mem,
    } = cols;
    // Room for every row up front: the pushes below then never grow a column.
    co.values.reserve(max);
    opcode.offsets.reserve(max);
    opcode.data.reserve(max.saturating_mul(OPCODE_RESERVE));
    for col in &mut state {
        col.values.reserve(max);
    }
    let mut row = FillRow {
        offsets: co,
        opcode,
        state: StateRows::new(&mut state, stage),
        // The thread before the first row is unknown: its first row opens its run.
        thread: Run::new(ct, 0),
        words,
        regs,
        mem,
        layout,
        recorded: Vec::with_capacity(trac_x64dbg::MAX_WORDS),
        first: None,
        next: 0,
    };
    // The `registers` table decided once: the fill's loop without it reports no change.
    if row.regs.is_some() {
        fill_rows::<true>(r, &mut row, max, done, failed);
    } else {
        fill_rows::<false>(r, &mut row, max, done, failed);
    }
    let (n, first) = (row.next, row.first.unwrap_or(0));
    row.thread.close(n);
    row.state.flush();
    // The instructions of a fill are numbered one after the other.
    ci.values
        .extend((0..n as u64).map(|k| first.wrapping_add(k)));
    // The pc is the instruction-pointer word of the state (`RegDump::ip`), which comes
    // right after the general registers: the second-last state word.
    let state = row.state.cols;
    if let Some(ip) = state.len().checked_sub(2).and_then(|w| state.get(w)) {
        let filled = &ip.values;
        cp.values
            .extend_from_slice(filled.get(filled.len().saturating_sub(n)..).unwrap_or(&[]));
    }
    n
}

/// The instructions of `r` into `row`, up to `max` rows. `CHILD`: whether the `registers`
/// table is wanted (else the changes matter only through the state they leave).
#[inline(always)]
fn fill_rows<const CHILD: bool>(
    r: &mut Cursor<'_>,
    row: &mut FillRow<'_, '_>,
    max: usize,
    done: &mut bool,
    failed: &mut Option<Error>,
) {
    row.first.get_or_insert(r.instructions());
    while row.next < max {
        let next = if CHILD {
            r.next_instruction_with(|change| row.change(change))
        } else {
            r.next_instruction()
        };
        match next {
            Some(Ok(ins)) => row.instruction(&ins, r.regs()),
            Some(Err(e)) => {
                *done = true;
                *failed = Some(err(e));
                break;
            }
            None => {
                *done = true;
                break;
            }
        }
    }
}

/// What [`fill_instructions`] fills, row by row, as the instructions and their register
/// changes come.
struct FillRow<'s, 'c> {
    offsets: &'c mut IntBuf,
    opcode: &'c mut BytesBuf,
    state: StateRows<'s, 'c>,
    thread: Run<'c>,
    words: &'c mut dyn Visitor,
    regs: Option<RegCols<'c>>,
    mem: Option<MemCols<'c>>,
    layout: &'static RegLayout,
    /// The words the current block records, when `regs` is wanted.
    recorded: Vec<u16>,
    /// The number of the fill's first instruction.
    first: Option<u64>,
    /// The rows filled.
    next: usize,
}

impl FillRow<'_, '_> {
    /// The next instruction's own columns (and its `memory` rows, when wanted), with the
    /// REGDUMP words before it.
    #[inline(always)]
    fn instruction(&mut self, ins: &Instruction<'_>, regs: &RegDump) {
        self.thread.set(self.next, u64::from(ins.thread()));
        // At most the fill's `max` rows.
        self.next = self.next.wrapping_add(1);
        self.offsets.push(ins.offset().0);
        push_opcode(self.opcode, ins);
        self.state.push(regs.words());
        let exact = match &mut self.regs {
            Some(c) => {
                let index = ins.index();
                let mut buf = [0; MAX_FIELD];
                let recorded = self.recorded.iter().copied();
                self.layout.show(regs, recorded, |f| {
                    c.i.push(index);
                    c.name.str(f.name);
                    if f.size <= 8 {
                        c.value.push(regs.field_u64(f));
                        c.wide.push_null();
                    } else {
                        c.value.push_null();
                        c.wide.push(regs.field_be(f, &mut buf));
                    }
                })
            }
            None => self.layout.show(regs, ins.regs().map(|r| r.index), |_| {}),
        };
        self.recorded.clear();
        if exact {
            self.words.null();
        } else {
            self.words.begin_list();
            for r in ins.regs() {
                self.words.uint(u64::from(r.index));
            }
            self.words.end_list();
        }
        if let Some(c) = &mut self.mem {
            for m in ins.mem() {
                c.i.push(ins.index());
                c.addr.push(m.address);
                c.old.push(m.old);
                match m.new {
                    Some(v) => c.new.push(v),
                    None => c.new.push_null(),
                }
            }
        }
    }

    /// One word the current block records (its `registers` rows come with the
    /// instruction, from the state the block leaves).
    #[inline(always)]
    fn change(&mut self, change: RegChange) {
        self.recorded.push(change.index);
    }
}

/// Appends the opcode of `ins` to `opcode`.
#[inline(always)]
fn push_opcode(opcode: &mut BytesBuf, ins: &Instruction<'_>) {
    match ins.opcode_window() {
        Some(window) => opcode.push_prefix(window, ins.opcode().len()),
        None => opcode.push(ins.opcode()),
    }
}

/// Opcode bytes reserved per row (an x86 instruction is 1 to 15 bytes, a few on average).
const OPCODE_RESERVE: usize = 8;

/// The `state` columns of [`fill_instructions`]: each row's state words are copied into
/// a small buffer of columns, which is appended to the columns a stretch of rows at a
/// time. Copying every word of every row costs less than following the register changes
/// into the columns one by one, and the buffer stays in the nearest cache.
struct StateRows<'s, 'b> {
    cols: &'s mut [&'b mut IntBuf],
    /// By word, its values in the rows not yet in `cols`, the first `len`.
    stage: &'s mut StateStage,
    len: usize,
}

/// [`StateRows`]'s buffer: by state word, its values in a stretch of rows. The columns
/// are a little longer than the stretch: at a stride of a power of two, a row's words
/// would all fall in the same few sets of the cache and evict each other.
pub(super) type StateStage = [[u64; STATE_STRIDE]; MAX_STATE];

/// The most `state` words of any architecture ([`state_words`]).
const MAX_STATE: usize = 18;

/// The rows [`StateRows`] keeps before it appends them to the columns. A power of two.
const STATE_STRETCH: usize = 256;

/// The words between one column of [`StateStage`] and the next: one cache line more than
/// the stretch.
const STATE_STRIDE: usize = STATE_STRETCH + 8;

impl<'s, 'b> StateRows<'s, 'b> {
    fn new(cols: &'s mut [&'b mut IntBuf], stage: &'s mut StateStage) -> StateRows<'s, 'b> {
        StateRows {
            cols,
            stage,
            len: 0,
        }
    }

    /// A row whose state is the first words of `regs`.
    #[inline(always)]
    fn push(&mut self, regs: &[u64]) {
        // A REGDUMP has well over MAX_STATE words.
        let Some(words) = regs.first_chunk::<MAX_STATE>() else {
            return;
        };
        let k = self.len % STATE_STRETCH;
        for (column, word) in self.stage.iter_mut().zip(words) {
            if let Some(slot) = column.get_mut(k) {
                *slot = *word;
            }
        }
        self.len = k.wrapping_add(1);
        if self.len == STATE_STRETCH {
            self.flush();
        }
    }

    /// Appends the rows kept to the columns.
    #[inline(never)]
    fn flush(&mut self) {
        let n = self.len.min(STATE_STRETCH);
        for (col, column) in self.cols.iter_mut().zip(self.stage.iter()) {
            col.values
                .extend_from_slice(column.get(..n).unwrap_or_default());
        }
        self.len = 0;
    }
}

/// A column of [`fill_instructions`] filled in runs of equal values.
struct Run<'b> {
    buf: &'b mut IntBuf,
    /// The value of the open run.
    value: u64,
    /// The rows (of this fill) written so far: the open run starts there.
    from: usize,
}

impl<'b> Run<'b> {
    fn new(buf: &'b mut IntBuf, value: u64) -> Run<'b> {
        Run {
            buf,
            value,
            from: 0,
        }
    }

    /// The value is `value` from row `row` of this fill on.
    #[inline]
    fn set(&mut self, row: usize, value: u64) {
        if value != self.value {
            self.close(row);
            self.value = value;
        }
    }

    /// Writes the open run up to row `row` (not included).
    #[inline]
    fn close(&mut self, row: usize) {
        let values = &mut self.buf.values;
        values.resize(
            values.len().saturating_add(row.saturating_sub(self.from)),
            self.value,
        );
        self.from = row;
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
mod tests {
    use std::borrow::Cow;

    use crate::Handler;
    use crate::schema::testing::{Val, records, testdata};
    use crate::schema::{BytesBuf, Col, ColumnSink, Columns, IntBuf, Visitor};

    /// The names a `Col::Other` column is handed.
    #[derive(Default)]
    struct Names(Vec<String>);

    impl Visitor for Names {
        fn uint(&mut self, _: u64) {}
        fn int(&mut self, _: i64) {}
        fn bool(&mut self, _: bool) {}
        fn bytes(&mut self, _: &[u8]) {}
        fn str(&mut self, v: &str) {
            self.0.push(v.to_owned());
        }
        fn null(&mut self) {}
        fn begin_list(&mut self) {}
        fn end_list(&mut self) {}
        fn begin_row(&mut self) {}
        fn end_row(&mut self) {}
    }

    /// The lists (or nulls) a `Col::Other` list column is handed, a row each.
    #[derive(Default)]
    struct Lists(Vec<Option<Vec<u64>>>);

    impl Visitor for Lists {
        fn uint(&mut self, v: u64) {
            if let Some(Some(list)) = self.0.last_mut() {
                list.push(v);
            }
        }
        fn int(&mut self, _: i64) {}
        fn bool(&mut self, _: bool) {}
        fn bytes(&mut self, _: &[u8]) {}
        fn str(&mut self, _: &str) {}
        fn null(&mut self) {
            self.0.push(None);
        }
        fn begin_list(&mut self) {
            self.0.push(Some(Vec::new()));
        }
        fn end_list(&mut self) {}
        fn begin_row(&mut self) {}
        fn end_row(&mut self) {}
    }

    /// A sink with the columns of `instructions` without `--disasm` (`i`, `offset`,
    /// `thread`, `pc`, `opcode`, 18 state words, `words`), its child tables under the names
    /// given.
    struct Sink {
        record: Vec<IntBuf>,
        opcode: BytesBuf,
        words: Lists,
        regs: (IntBuf, Names, IntBuf, BytesBuf),
        mem: [IntBuf; 4],
        children: [&'static str; 2],
    }

    impl Sink {
        fn new(children: [&'static str; 2]) -> Sink {
            Sink {
                record: (0..4 + 18).map(|_| IntBuf::default()).collect(),
                opcode: BytesBuf::default(),
                words: Lists::default(),
                regs: Default::default(),
                mem: Default::default(),
                children,
            }
        }
    }

    impl ColumnSink for Sink {
        fn columns(&mut self, _: usize) -> Option<Columns<'_>> {
            let (head, state) = self.record.split_at_mut(4);
            let mut record: Vec<Col<'_>> = head.iter_mut().map(Col::Ints).collect();
            record.push(Col::Bytes(&mut self.opcode));
            record.extend(state.iter_mut().map(Col::Ints));
            record.push(Col::Other(&mut self.words));
            let (ri, names, value, wide) = &mut self.regs;
            let regs = vec![
                Col::Ints(ri),
                Col::Other(names),
                Col::Ints(value),
                Col::Bytes(wide),
            ];
            let mem = self.mem.iter_mut().map(Col::Ints).collect();
            let [a, b] = self.children;
            let mut children = vec![(Cow::Borrowed(a), regs), (Cow::Borrowed(b), mem)];
            if a == "mem" {
                // The `memory` columns under `mem`, wherever the sink lists them.
                let (first, second) = children.split_at_mut(1);
                std::mem::swap(&mut first[0].1, &mut second[0].1);
            }
            Some(Columns { record, children })
        }
    }

    /// The typed fast path binds a sink's columns by the names of the child tables (in
    /// either order) and fills the values the rows visit; a child table of another name
    /// leaves it to the visiting path.
    #[test]
    fn the_fast_path_binds_by_name_and_fills_what_rows_visit() {
        fills_what_rows_visit(&testdata("x64dbg/basic.trace64"));
        fills_what_rows_visit(&part_recorded());
    }

    /// A trace whose second block records the low half of `xmm0` only (and `rip`): its
    /// row tells the words; the full dump's does not.
    fn part_recorded() -> Vec<u8> {
        use trac_x64dbg::{
            Arch, Header, InstructionRecord, MemAccess, Record, RegChange, ThreadField,
        };
        let ins = |regs: Vec<RegChange>| {
            Record::Instruction(InstructionRecord {
                thread: 7,
                thread_field: ThreadField::Flagged,
                opcode: vec![0x90],
                regs,
                mem: vec![MemAccess {
                    flags: 0,
                    address: 0x1000,
                    old: 1,
                    new: Some(2),
                }],
            })
        };
        let full = (0..172).map(|index| RegChange {
            index,
            value: u64::from(index),
        });
        let part = [(16, 0x401000), (40, 0x1234)].map(|(index, value)| RegChange { index, value });
        let blocks = [ins(full.collect()), ins(part.to_vec())];
        let bytes = trac_x64dbg::write_records(&Header::new(Arch::X64, "p.exe"), &blocks).unwrap();
        let handler = &crate::formats::x64dbg::X64dbg;
        let (_, rows) = records(handler, "p.trace64", &bytes, false);
        assert_eq!(rows[0].1[8], Val::Null);
        assert_eq!(rows[1].1[8].items(), [Val::U(16), Val::U(40)]);
        let names: Vec<_> = rows[1].1[5]
            .items()
            .iter()
            .map(|r| r.items()[0].clone())
            .collect();
        assert_eq!(names, [Val::S("rip".into()), Val::S("xmm0".into())]);
        bytes
    }

    fn fills_what_rows_visit(bytes: &[u8]) {
        let bytes = bytes.to_vec();
        let handler = &crate::formats::x64dbg::X64dbg;
        let (_, rows) = records(handler, "basic.trace64", &bytes, false);
        for children in [["regs", "mem"], ["mem", "regs"]] {
            let mut sink = Sink::new(children);
            let options = crate::Options::default();
            let mut ctx = crate::Ctx::new(&options);
            let mut input = crate::Input::from_bytes("basic.trace64", bytes.clone()).unwrap();
            let mut reader = handler.records(&mut input, &mut ctx).unwrap();
            let n = reader.fill_columns(&mut sink, 1 << 20).unwrap().unwrap();
            assert_eq!(n, rows.len());
            let (mut regs, mut mem) = (Vec::new(), Vec::new());
            for (k, (_, row)) in rows.iter().enumerate() {
                for (c, v) in sink.record[..4].iter().zip(&row[..4]) {
                    assert_eq!(c.values[k], v.u());
                }
                let (from, to) = (sink.opcode.offsets[k], sink.opcode.offsets[k + 1]);
                let opcode = &sink.opcode.data[from as usize..to as usize];
                assert_eq!(Val::Bytes(opcode.to_vec()), row[4]);
                let state = row[7].items();
                assert_eq!(state.len(), 18);
                for (c, v) in sink.record[4..].iter().zip(state) {
                    assert_eq!(c.values[k], v.u());
                }
                let words = match &row[8] {
                    Val::Null => None,
                    list => Some(list.items().iter().map(Val::u).collect()),
                };
                assert_eq!(sink.words.0[k], words);
                for r in row[5].items() {
                    let r = r.items();
                    regs.push((row[0].u(), r[0].clone(), r[1].clone(), r[2].clone()));
                }
                for m in row[6].items() {
                    let m = m.items();
                    mem.push((row[0].u(), m[0].u(), m[1].u(), m[2].clone()));
                }
            }
            let (ri, names, value, wide) = &sink.regs;
            let filled: Vec<_> = (0..ri.values.len())
                .map(|k| {
                    let (from, to) = (wide.offsets[k] as usize, wide.offsets[k + 1] as usize);
                    let (v, w) = if value.null_rows().contains(&k) {
                        (Val::Null, Val::Bytes(wide.data[from..to].to_vec()))
                    } else {
                        (Val::U(value.values[k]), Val::Null)
                    };
                    (ri.values[k], Val::S(names.0[k].clone()), v, w)
                })
                .collect();
            assert!(!regs.is_empty());
            assert_eq!(filled, regs);
            let [mi, addr, old, new] = &sink.mem;
            let filled: Vec<_> = (0..mi.values.len())
                .map(|k| {
                    let n = if new.null_rows().contains(&k) {
                        Val::Null
                    } else {
                        Val::U(new.values[k])
                    };
                    (mi.values[k], addr.values[k], old.values[k], n)
                })
                .collect();
            assert!(!mem.is_empty());
            assert_eq!(filled, mem);
        }
        let mut input = crate::Input::from_bytes("basic.trace64", bytes.clone()).unwrap();
        let options = crate::Options::default();
        let mut reader = handler
            .records(&mut input, &mut crate::Ctx::new(&options))
            .unwrap();
        assert!(
            reader
                .fill_columns(&mut Sink::new(["regs", "memory"]), 10)
                .is_none()
        );
    }
}
