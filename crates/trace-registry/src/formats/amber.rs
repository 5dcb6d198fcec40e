//! Apple amber traces (`amber-tt6`): TT6 and TT6E (one file per thread, or a directory of
//! `thread_NNN.tt6[e]` files merged into one timeline) and FULL (register state per
//! instruction). One record per instruction, each field only where it applies:
//! `{"i","pc","op","mnemonic","class","next_pc","ea","size","store"|"access","extra","trap",
//! "synthetic_trap","escapes"}`; FULL records add `regs`, merged ones `thread` and `seq`.
//! Escapes after the last instruction come as a final `{"dangling_escapes":[…]}` record.
//!
//! Tables (for columnar sinks): `instructions` (`i` key, and `thread` key too in a merged
//! directory, where `i` counts each thread's records; FULL adds one column per register of
//! the `regs` struct) and `escapes` (the keys, `code`, `name`, `words`). The
//! `dangling_escapes` record has the same keys (its `i` is the index the next instruction
//! would have had) and its child table is the same `escapes`, so that a columnar sink puts
//! every escape in one table.
//!
//! With [`Options::disasm`](crate::Options::disasm), instructions get `asm` after
//! `mnemonic`: the opcode word as text ([`crate::disasm`]: the crate's mnemonic, with
//! operands for the common forms; null where there is no mnemonic).

use std::sync::Arc;

use amber_tt6::threads::{Merge, UnmatchedWait, parse_thread_file_name};
use amber_tt6::{
    Access, Class, Dialect, Escapes, FullReader, FullRecord, FullRecordOwned, FullStreamReader,
    RecordSize, Summary, SyntheticTrap, Tt6Reader, Tt6StreamReader, raw,
};

use crate::disasm::Disassembler;
use crate::schema::{Field, Json, Row, Schema, Type, Visitor};
use crate::steps::{Isa, Steps};
use crate::{
    Confidence, Ctx, Error, Handler, Hex, Info, Input, Note, Offers, Record, Records, Source, Value,
};

mod blocks;
mod steps;

/// The cache-line size used for `dcb*` operand sizes (G3/G4).
pub const CACHE_LINE: u32 = 32;
/// Progress is reported every this many records.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Which amber format a handler reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// TT6 (`.tt6`).
    Tt6,
    /// TT6E (`.tt6e`).
    Tt6e,
    /// FULL (magic `0xA1118E17`).
    Full,
}

/// An amber handler.
#[derive(Clone, Copy, Debug)]
pub struct Amber(pub Kind);

/// The TT6 handler.
pub static TT6: Amber = Amber(Kind::Tt6);
/// The TT6E handler.
pub static TT6E: Amber = Amber(Kind::Tt6e);
/// The FULL handler.
pub static FULL: Amber = Amber(Kind::Full);

impl Amber {
    /// The amber handler named `name` (`tt6`, `tt6e`, `amber-full`).
    #[must_use]
    pub fn by_name(name: &str) -> Option<Amber> {
        [TT6, TT6E, FULL].into_iter().find(|h| h.name() == name)
    }

    /// The format kind.
    #[must_use]
    pub fn kind(self) -> Kind {
        self.0
    }

    /// The classification tables of a TT6 or TT6E trace (TT6 for FULL).
    #[must_use]
    pub fn dialect(&self) -> Dialect {
        if self.0 == Kind::Tt6e {
            Dialect::Tt6e
        } else {
            Dialect::Tt6
        }
    }

    /// The registry error for an error of this format.
    pub fn err(self, e: amber_tt6::Error) -> Error {
        Error::format(self.name(), e)
    }

    /// A FULL reader over `bytes`, of the record size `options` force or the detected one.
    ///
    /// # Errors
    ///
    /// A bad record size, or bytes that are not a FULL trace.
    pub fn full_reader<'a>(
        &self,
        bytes: &'a [u8],
        options: &crate::Options,
    ) -> Result<FullReader<'a>, Error> {
        match options.record_size {
            Some(n) => {
                let size = RecordSize::from_bytes(n).map_err(|e| self.err(e))?;
                FullReader::with_size(bytes, size).map_err(|e| self.err(e))
            }
            None => FullReader::parse(bytes).map_err(|e| self.err(e)),
        }
    }
}

/// The merged timeline of a directory input (see [`Input::parts_mut`]): its
/// `thread_NNN.tt6[e]` files (others are not thread traces and are passed over), by thread
/// number; two files of one thread are an error.
///
/// # Errors
///
/// A file cannot be read, two files name one thread, or a thread has no initial PC.
pub fn merge_dir(format: Amber, parts: &mut [Input]) -> Result<Merge<'_>, Error> {
    for p in parts.iter_mut() {
        p.bytes()?;
    }
    let names: Vec<(String, &[u8])> = parts
        .iter()
        .map(|p| (p.logical_name(), p.loaded_bytes()))
        .filter(|(name, _)| parse_thread_file_name(name).is_some())
        .collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    amber_tt6::threads::merge_files(&files).map_err(|e| format.err(e))
}

/// An amber input's record reader, whichever its shape: a mapped file or a stream, TT6/TT6E
/// or FULL, or a merged thread directory. The steps and the blocks both read through it.
pub(super) enum Reader<'a> {
    Slice(amber_tt6::Records<'a>),
    Stream(Box<Tt6StreamReader<Box<dyn std::io::Read + Send>>>),
    Merged(Merge<'a>),
    FullSlice(amber_tt6::FullRecords<'a>),
    FullStream(Box<FullStreamReader<Box<dyn std::io::Read + Send>>>),
}

impl<'a> Reader<'a> {
    /// The reader as it is now, to read again from here: records in memory only (a
    /// stream or a merge of files is read once).
    pub(super) fn again(&self) -> Option<Reader<'a>> {
        match self {
            Reader::Slice(r) => Some(Reader::Slice(r.clone())),
            Reader::FullSlice(r) => Some(Reader::FullSlice(r.clone())),
            Reader::Stream(_) | Reader::Merged(_) | Reader::FullStream(_) => None,
        }
    }

    /// Opens the reader of `input`, and the thread of a single file (from its
    /// `thread_NNN` name, else 0).
    ///
    /// # Errors
    ///
    /// A FULL directory, a bad header, a bad `--record-size`, or an unreadable part.
    pub(super) fn open(
        handler: Amber,
        input: &'a mut Input,
        ctx: &Ctx<'_>,
    ) -> Result<(Reader<'a>, u64), Error> {
        let thread = parse_thread_file_name(&input.logical_name()).map_or(0, |(t, _)| t.0);
        let full = handler.kind() == Kind::Full;
        let err = |e| handler.err(e);
        let reader = if input.is_dir() {
            if full {
                return Err(Error::Unsupported(
                    "amber FULL traces are single files, not directories".into(),
                ));
            }
            Reader::Merged(merge_dir(handler, input.parts_mut().unwrap_or_default())?)
        } else {
            match (input.source(), full) {
                (Source::Bytes(b), false) => Reader::Slice(
                    Tt6Reader::parse(b, handler.dialect())
                        .map_err(err)?
                        .records(),
                ),
                (Source::Stream(s), false) => Reader::Stream(Box::new(
                    Tt6StreamReader::from_reader(s, handler.dialect()).map_err(err)?,
                )),
                (Source::Bytes(b), true) => {
                    Reader::FullSlice(handler.full_reader(b, ctx.options)?.records())
                }
                (Source::Stream(s), true) => {
                    let size = match ctx.options.record_size {
                        Some(n) => Some(RecordSize::from_bytes(n).map_err(err)?),
                        None => None,
                    };
                    Reader::FullStream(Box::new(
                        FullStreamReader::from_reader(s, size).map_err(err)?,
                    ))
                }
            }
        };
        Ok((reader, thread))
    }
}

/// The warning line for a wait the merge released without a matching signal.
pub fn unmatched_line(u: &UnmatchedWait) -> String {
    format!(
        "warning: thread {} record {} at offset {}: wait on {:#x} for count {} released at count {} (no matching signal)",
        u.thread, u.record, u.offset, u.address, u.count, u.signalled
    )
}

fn class_counts(counts: impl Fn(Class) -> u64) -> Info {
    let mut m = Info::new();
    for c in Class::ALL {
        m.push(c.name(), counts(c));
    }
    m
}

impl Handler for Amber {
    /// tt6 and tt6e threads directories (`thread_NNN.tt6`), merged into one stream.
    fn offers(&self) -> Offers {
        Offers {
            thread_files: self.0 != Kind::Full,
            reads: if self.0 == Kind::Full {
                &["record_size"]
            } else {
                &[]
            },
            ..Offers::default()
        }
    }

    fn name(&self) -> &'static str {
        match self.0 {
            Kind::Tt6 => "tt6",
            Kind::Tt6e => "tt6e",
            Kind::Full => "amber-full",
        }
    }

    fn recognised_by(&self) -> &'static str {
        match self.0 {
            Kind::Tt6 => "extension .tt6 (or a directory of thread_NNN.tt6 files)",
            Kind::Tt6e => "extension .tt6e (or a directory of thread_NNN.tt6e files)",
            Kind::Full => "magic 0xA1118E17",
        }
    }

    fn detect(&self, head: &[u8], file_name: &str) -> Option<Confidence> {
        let lower = file_name.to_ascii_lowercase();
        match self.0 {
            Kind::Full => head
                .starts_with(&raw::FULL_MAGIC.to_be_bytes())
                .then_some(Confidence::Magic),
            Kind::Tt6 => lower.ends_with(".tt6").then_some(Confidence::Name),
            Kind::Tt6e => lower.ends_with(".tt6e").then_some(Confidence::Name),
        }
    }

    fn detect_dir(&self, names: &[String]) -> Option<Confidence> {
        let dialect = self.dialect();
        let any = names
            .iter()
            .filter_map(|n| parse_thread_file_name(n))
            .any(|(_, d)| d == dialect);
        (self.0 != Kind::Full && any).then_some(Confidence::Name)
    }

    fn info(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        if self.0 == Kind::Full {
            return self.info_full(input, ctx);
        }
        let mut s = Summary::default();
        let mut threads = Vec::new();
        let mut initial_pc = None;
        let mut final_pc = None;
        let mut unmatched = Vec::new();
        if input.is_dir() {
            let mut merge = merge_dir(*self, input.parts_mut().unwrap_or_default())?;
            let mut per_thread: std::collections::BTreeMap<u64, u64> = Default::default();
            for m in merge.by_ref() {
                let m = m.map_err(|e| self.err(e))?;
                s.add(&m.record);
                let n = per_thread.entry(m.thread.0).or_default();
                *n = n.saturating_add(1);
            }
            unmatched = merge.unmatched().iter().map(unmatched_line).collect();
            for line in &unmatched {
                ctx.diagnostic(line);
            }
            threads = per_thread
                .into_iter()
                .map(|(t, n)| Info::new().with("thread", t).with("instructions", n))
                .collect();
        } else {
            let (initial, last) = self.tt6_summary(input, &mut s, ctx)?;
            initial_pc = Some(Hex(u64::from(initial)));
            final_pc = Some(Hex(u64::from(last)));
        }
        let escapes: Vec<Info> = s
            .escapes
            .iter()
            .map(|(code, n)| {
                Info::new()
                    .with("code", *code)
                    .with("name", amber_tt6::EscapeKind::from_code(*code).name())
                    .with("count", *n)
            })
            .collect();
        let mut info = Info::new()
            .with("format", self.name())
            .with("initial_pc", initial_pc)
            .with("instructions", s.instructions)
            .with("classes", class_counts(|c| s.class_count(c)))
            .with("taken_branches", s.taken)
            .with("traps", s.traps)
            .with("escapes", escapes)
            .with("sync_events", s.sync_events)
            .with("dangling_escapes", s.dangling_escapes)
            .with("final_pc", final_pc);
        if input.is_dir() {
            info.push("threads", threads);
            info.push("unmatched_waits", unmatched);
        }
        Ok(info)
    }

    /// The summary's pass reads every record (no rows are built); escapes after the last
    /// instruction are a warning, as are waits a merge releases unmatched.
    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let info = self.info(input, ctx)?;
        if let Some(&Value::UInt(k)) = info.get("dangling_escapes")
            && k > 0
        {
            ctx.diagnostic(&format!(
                "warning: {k} escape record(s) after the last instruction"
            ));
        }
        let n = info.get("instructions").cloned().unwrap_or(Value::Null);
        Ok(Info::new().with("instructions", n))
    }

    fn records<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error> {
        if self.0 == Kind::Full {
            let (source, _) = self.full_source(input, ctx)?;
            return Ok(Box::new(FullRows {
                handler: *self,
                tables: [full_schema(ctx.options.disasm)],
                source,
                current: None,
                owned: None,
                disasm: ctx.options.disasm.then(Asm::new),
            }));
        }
        if input.is_dir() {
            let merge = merge_dir(*self, input.parts_mut().unwrap_or_default())?;
            return Ok(Box::new(Tt6Rows {
                handler: *self,
                tables: [tt6_schema(true, ctx.options.disasm), dangling_schema(true)],
                source: Tt6Source::Merged(merge),
                row: InstrRow::new(ctx.options.disasm),
                done: false,
            }));
        }
        let dialect = self.dialect();
        let source = match input.source() {
            Source::Bytes(b) => {
                let reader = Tt6Reader::parse(b, dialect).map_err(|e| self.err(e))?;
                Tt6Source::Slice(reader.records())
            }
            Source::Stream(s) => Tt6Source::Stream(Box::new(
                Tt6StreamReader::from_reader(s, dialect).map_err(|e| self.err(e))?,
            )),
        };
        Ok(Box::new(Tt6Rows {
            handler: *self,
            tables: [
                tt6_schema(false, ctx.options.disasm),
                dangling_schema(false),
            ],
            source,
            row: InstrRow::new(ctx.options.disasm),
            done: false,
        }))
    }

    /// One step per instruction record (see the `steps` module): pc, instruction word and,
    /// for TT6/TT6E, the effective address as an access; FULL adds the register state.
    fn steps<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Steps + 'a>, Error> {
        Ok(Box::new(steps::AmberSteps::open(*self, input, ctx)?))
    }

    /// The blocks of the default, read straight from the records (see the `blocks`
    /// module).
    fn blocks<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn crate::blocks::Blocks + 'a>, Error> {
        Ok(Box::new(blocks::AmberBlocks::open(*self, input, ctx)?))
    }
}

impl Amber {
    /// Adds every record of a TT6 or TT6E input to `s`; returns the initial and final PC.
    fn tt6_summary(
        self,
        input: &mut Input,
        s: &mut Summary,
        ctx: &mut Ctx<'_>,
    ) -> Result<(u32, u32), Error> {
        let dialect = self.dialect();
        let add = |s: &mut Summary, r: &amber_tt6::Record<'_>, ctx: &mut Ctx<'_>| {
            s.add(r);
            if r.index.is_multiple_of(PROGRESS_EVERY) {
                ctx.progress(r.offset.0);
            }
        };
        let add_dangling = |s: &mut Summary, escapes: Escapes<'_>| {
            for e in escapes.iter() {
                s.add_escape(&e);
                s.dangling_escapes = s.dangling_escapes.saturating_add(1);
            }
        };
        match input.source() {
            Source::Bytes(b) => {
                let reader = Tt6Reader::parse(b, dialect).map_err(|e| self.err(e))?;
                let mut records = reader.records();
                for r in records.by_ref() {
                    add(s, &r.map_err(|e| self.err(e))?, ctx);
                }
                add_dangling(s, records.dangling_escapes());
                Ok((reader.initial_pc(), records.pc()))
            }
            Source::Stream(st) => {
                let mut reader =
                    Tt6StreamReader::from_reader(st, dialect).map_err(|e| self.err(e))?;
                let mut pc = reader.initial_pc();
                while let Some(r) = reader.next_record() {
                    let r = r.map_err(|e| self.err(e))?;
                    pc = r.next_pc;
                    add(s, &r, ctx);
                }
                add_dangling(s, reader.dangling_escapes());
                Ok((reader.initial_pc(), pc))
            }
        }
    }

    /// The records of a FULL input, in place or streamed, and the record size.
    fn full_source<'a>(
        self,
        input: &'a mut Input,
        ctx: &Ctx<'_>,
    ) -> Result<(FullSource<'a>, RecordSize), Error> {
        Ok(match input.source() {
            Source::Bytes(b) => {
                let reader = self.full_reader(b, ctx.options)?;
                (FullSource::Slice(reader.records()), reader.record_size())
            }
            Source::Stream(s) => {
                let size = match ctx.options.record_size {
                    Some(n) => Some(RecordSize::from_bytes(n).map_err(|e| self.err(e))?),
                    None => None,
                };
                let reader = FullStreamReader::from_reader(s, size).map_err(|e| self.err(e))?;
                let size = reader.record_size();
                (FullSource::Stream(Box::new(reader)), size)
            }
        })
    }

    fn info_full(self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let (mut source, size) = self.full_source(input, ctx)?;
        let mut per_class = [0u64; 4];
        let mut n = 0u64;
        let mut first_pc = None;
        let mut count = |r: &FullRecord<'_>| {
            n = n.saturating_add(1);
            first_pc.get_or_insert(r.pc());
            let c = amber_tt6::classify(Dialect::Tt6e, r.opcode);
            if let Some(x) = per_class.get_mut(c as usize) {
                *x = x.saturating_add(1);
            }
        };
        match &mut source {
            FullSource::Slice(records) => {
                for r in records {
                    count(&r.map_err(|e| self.err(e))?);
                }
            }
            FullSource::Stream(reader) => {
                while let Some(r) = reader.next_record() {
                    count(&r.map_err(|e| self.err(e))?);
                }
            }
        }
        Ok(Info::new()
            .with("format", self.name())
            .with("record_size", size.bytes())
            .with("initial_pc", first_pc.map(|p| Hex(u64::from(p))))
            .with("instructions", n)
            .with(
                "classes",
                class_counts(|c| per_class.get(c as usize).copied().unwrap_or(0)),
            ))
    }
}

fn escape_schema() -> Arc<Schema> {
    Arc::new(Schema::new(
        "escapes",
        vec![
            Field::new("code", Type::UInt(16)),
            Field::new("name", Type::Name),
            Field::new("words", Type::List(Box::new(Type::UInt(32)))).json(Json::Hex),
        ],
    ))
}

/// The fields every amber instruction starts with; `disasm` adds `asm`.
fn instruction_head(disasm: bool) -> Vec<Field> {
    let mut fields = vec![
        Field::new("i", Type::UInt(64)).key(),
        Field::hex("pc", 64),
        Field::hex("op", 32).json(Json::HexWidth(10)),
        Field::new("mnemonic", Type::Name).optional(),
    ];
    if disasm {
        fields.push(Field::new("asm", Type::Str).nullable());
    }
    fields.push(Field::new("class", Type::Name));
    fields
}

/// `--disasm`'s text of the current instruction, worked out before its row is visited.
struct Asm {
    disassembler: Disassembler,
    text: String,
    /// Whether `text` is the current instruction's (else it has none).
    valid: bool,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            disassembler: Disassembler::new(Isa::Ppc32),
            text: String::new(),
            valid: false,
        }
    }

    fn set(&mut self, pc: u32, op: u32) {
        self.text.clear();
        let text = self.disassembler.asm(u64::from(pc), &op.to_be_bytes());
        self.valid = text.is_some();
        self.text.push_str(text.unwrap_or_default());
    }

    fn visit(&self, v: &mut dyn Visitor) {
        opt_str(v, self.valid.then_some(self.text.as_str()));
    }
}

fn tt6_schema(merged: bool, disasm: bool) -> Arc<Schema> {
    let mut fields = instruction_head(disasm);
    fields.extend([
        Field::hex("next_pc", 64).optional(),
        Field::hex("ea", 64).optional(),
        Field::new("size", Type::UInt(32)).optional(),
        Field::new("store", Type::Bool).optional(),
        Field::new("access", Type::Name).optional(),
        Field::hex("extra", 32).optional(),
        Field::new("trap", Type::Bool).optional(),
        Field::new("synthetic_trap", Type::Name).optional(),
    ]);
    if merged {
        // `i` counts the records of each thread: with the thread it names one record. A
        // key comes before the child table it keys.
        fields.push(Field::new("thread", Type::UInt(32)).key());
    }
    fields.push(Field::new("escapes", Type::Rows(escape_schema())).optional());
    if merged {
        fields.push(Field::new("seq", Type::UInt(64)));
    }
    Arc::new(Schema::new("instructions", fields))
}

/// The schema of the final record holding the escapes after the last instruction: the key
/// fields of [`tt6_schema`] (`i`, and `thread` when `merged`), then the
/// escapes as the same child table `escapes` as an instruction's, so that a columnar sink
/// writes them to the one `escapes` table (same name, same key columns, same fields).
///
/// The key values: `i` is the index the next instruction would have had (the number of
/// instructions of the file), because escape records belong to the instruction that
/// follows them. A merged directory has no such record (the merge drops escapes after a
/// thread's last instruction); its `thread` key is there only to keep the columns equal.
fn dangling_schema(merged: bool) -> Arc<Schema> {
    let mut fields = vec![Field::new("i", Type::UInt(64)).key()];
    if merged {
        fields.push(Field::new("thread", Type::UInt(32)).key());
    }
    fields.push(Field::new("dangling_escapes", Type::Rows(escape_schema())));
    Arc::new(Schema::new("dangling_escapes", fields))
}

fn full_schema(disasm: bool) -> Arc<Schema> {
    let mut regs = vec![Field::hex("srr0", 64), Field::hex("srr1", 64)];
    regs.extend((0..32).map(|n| Field::hex(format!("r{n}"), 64)));
    regs.extend(["cr", "xer", "lr", "ctr", "mq", "vrsave"].map(|n| Field::hex(n, 64)));
    regs.extend((0..32).map(|n| Field::hex(format!("f{n}"), 64).json(Json::HexWidth(18))));
    regs.push(Field::hex("fpscr", 64));
    regs.extend((0..32).map(|n| Field::new(format!("v{n}"), Type::Bytes).json(Json::HexBytes0x)));
    regs.push(Field::hex("vscr", 64));
    regs.push(Field::hex("vrvalid", 64));
    regs.push(Field::hex("pad", 64).optional());
    let mut fields = instruction_head(disasm);
    fields.push(Field::new(
        "regs",
        Type::Struct(Arc::new(Schema::new("registers", regs))),
    ));
    Arc::new(Schema::new("instructions", fields))
}

/// One escape record, owned (escapes are rare; the vectors are reused).
#[derive(Default)]
struct EscapeRow {
    code: u16,
    name: &'static str,
    words: Vec<u32>,
}

/// The values of one TT6 record, copied out of the reader so that slice, stream and merged
/// readers hand out the same row.
#[derive(Default)]
struct InstrRow {
    index: u64,
    /// File offset of the record (for progress).
    offset: u64,
    pc: u32,
    op: u32,
    mnemonic: Option<&'static str>,
    class: &'static str,
    next_pc: Option<u32>,
    ea: Option<u32>,
    size: Option<u32>,
    access: Option<Access>,
    extra: Option<u32>,
    trap: bool,
    synthetic_trap: Option<&'static str>,
    escapes: Vec<EscapeRow>,
    escape_count: usize,
    merged: Option<(u32, u64)>,
    /// The index the next instruction would have (the `i` of a `dangling_escapes` record).
    next_index: u64,
    /// This row is the final `dangling_escapes` record.
    dangling: bool,
    /// With `--disasm`: the instruction's text.
    asm: Option<Asm>,
}

impl InstrRow {
    /// An empty row; `disasm` gives its instructions `asm`.
    fn new(disasm: bool) -> InstrRow {
        InstrRow {
            asm: disasm.then(Asm::new),
            ..InstrRow::default()
        }
    }

    fn set_escapes(&mut self, escapes: Escapes<'_>) {
        self.escape_count = 0;
        for e in escapes.iter() {
            if self.escapes.len() <= self.escape_count {
                self.escapes.push(EscapeRow::default());
            }
            if let Some(row) = self.escapes.get_mut(self.escape_count) {
                row.code = e.code;
                row.name = e.kind().name();
                row.words.clear();
                row.words.extend(e.words.iter().map(|w| w.get()));
            }
            self.escape_count = self.escape_count.saturating_add(1);
        }
    }

    fn set(&mut self, r: &amber_tt6::Record<'_>, merged: Option<(u32, u64)>) {
        self.index = r.index;
        self.offset = r.offset.0;
        self.pc = r.pc;
        self.op = r.opcode;
        if let Some(asm) = &mut self.asm {
            asm.set(r.pc, r.opcode);
        }
        self.mnemonic = r.mnemonic();
        self.class = r.class.name();
        self.next_pc = (r.class == Class::Flow).then_some(r.next_pc);
        self.ea = r.ea();
        self.size = self.ea.and(r.operand_size(CACHE_LINE));
        self.access = self.ea.and(r.access());
        self.extra = r.extra();
        self.trap = r.is_trap();
        self.synthetic_trap = r.trap.map(|t| match t {
            SyntheticTrap::Branch => "branch",
            SyntheticTrap::Return => "return",
        });
        self.set_escapes(r.escapes);
        self.merged = merged;
        self.next_index = r.index.saturating_add(1);
        self.dangling = false;
    }

    fn visit_escapes(&self, v: &mut dyn Visitor) {
        v.begin_list();
        for e in self.escapes.iter().take(self.escape_count) {
            v.begin_row();
            v.uint(u64::from(e.code));
            v.str(e.name);
            v.begin_list();
            for w in &e.words {
                v.uint(u64::from(*w));
            }
            v.end_list();
            v.end_row();
        }
        v.end_list();
    }
}

impl Row for InstrRow {
    fn visit(&self, v: &mut dyn Visitor) {
        if self.dangling {
            v.uint(self.next_index);
            if let Some((thread, _)) = self.merged {
                v.uint(u64::from(thread));
            }
            self.visit_escapes(v);
            return;
        }
        v.uint(self.index);
        v.uint(u64::from(self.pc));
        v.uint(u64::from(self.op));
        opt_str(v, self.mnemonic);
        if let Some(asm) = &self.asm {
            asm.visit(v);
        }
        v.str(self.class);
        opt_uint(v, self.next_pc);
        opt_uint(v, self.ea);
        opt_uint(v, self.size);
        match self.access {
            Some(a @ (Access::Load | Access::Store)) => {
                v.bool(a == Access::Store);
                v.null();
            }
            Some(a) => {
                v.null();
                v.str(a.name());
            }
            None => {
                v.null();
                v.null();
            }
        }
        opt_uint(v, self.extra);
        if self.trap {
            v.bool(true);
        } else {
            v.null();
        }
        opt_str(v, self.synthetic_trap);
        if let Some((thread, _)) = self.merged {
            v.uint(u64::from(thread));
        }
        if self.escape_count == 0 {
            v.null();
        } else {
            self.visit_escapes(v);
        }
        if let Some((_, seq)) = self.merged {
            v.uint(seq);
        }
    }
}

fn opt_uint(v: &mut dyn Visitor, x: Option<u32>) {
    match x {
        Some(x) => v.uint(u64::from(x)),
        None => v.null(),
    }
}

fn opt_str(v: &mut dyn Visitor, x: Option<&str>) {
    match x {
        Some(x) => v.str(x),
        None => v.null(),
    }
}

enum Tt6Source<'a> {
    Slice(amber_tt6::Records<'a>),
    Stream(Box<Tt6StreamReader<Box<dyn std::io::Read + Send>>>),
    Merged(Merge<'a>),
}

struct Tt6Rows<'a> {
    handler: Amber,
    tables: [Arc<Schema>; 2],
    source: Tt6Source<'a>,
    row: InstrRow,
    done: bool,
}

impl Tt6Rows<'_> {
    /// Fills `row` with the next instruction; `Ok(false)` at the end.
    fn advance(&mut self) -> Result<bool, Error> {
        let h = self.handler;
        let row = &mut self.row;
        match &mut self.source {
            Tt6Source::Slice(records) => match records.next() {
                Some(r) => row.set(&r.map_err(|e| h.err(e))?, None),
                None => return Ok(false),
            },
            Tt6Source::Stream(reader) => match reader.next_record() {
                Some(r) => row.set(&r.map_err(|e| h.err(e))?, None),
                None => return Ok(false),
            },
            Tt6Source::Merged(merge) => match merge.next() {
                Some(m) => {
                    let m = m.map_err(|e| h.err(e))?;
                    let thread = u32::try_from(m.thread.0).unwrap_or(u32::MAX);
                    row.set(&m.record, Some((thread, m.seq)));
                }
                None => return Ok(false),
            },
        }
        Ok(true)
    }

    /// Fills `row` with the escapes after the last instruction, if there are any.
    fn dangling(&mut self) -> bool {
        match &self.source {
            Tt6Source::Slice(records) => self.row.set_escapes(records.dangling_escapes()),
            Tt6Source::Stream(reader) => self.row.set_escapes(reader.dangling_escapes()),
            Tt6Source::Merged(_) => self.row.escape_count = 0,
        }
        self.row.dangling = true;
        self.row.escape_count > 0
    }
}

impl Records for Tt6Rows<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn position(&self) -> u64 {
        self.row.offset
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        if self.done {
            return None;
        }
        match self.advance() {
            Ok(true) => Some(Ok(Record::new(0, &self.row))),
            Ok(false) => {
                self.done = true;
                self.dangling().then_some(Ok(Record::new(1, &self.row)))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    fn finish(&mut self) -> Vec<Note> {
        match &self.source {
            Tt6Source::Merged(m) => m
                .unmatched()
                .iter()
                .map(|u| Note::Line(unmatched_line(u)))
                .collect(),
            _ => Vec::new(),
        }
    }
}

enum FullSource<'a> {
    Slice(amber_tt6::FullRecords<'a>),
    Stream(Box<FullStreamReader<Box<dyn std::io::Read + Send>>>),
}

struct FullRows<'a> {
    handler: Amber,
    tables: [Arc<Schema>; 1],
    source: FullSource<'a>,
    /// The current record, in place (slices).
    current: Option<FullRecord<'a>>,
    /// The current record copied out of the stream's buffer: index, offset, pad, state.
    owned: Option<(u64, trace_core::Offset, Option<u32>, FullRecordOwned)>,
    /// With `--disasm`: the current instruction's text.
    disasm: Option<Asm>,
}

impl Records for FullRows<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn position(&self) -> u64 {
        match (&self.current, &self.owned) {
            (_, Some((_, offset, _, _))) | (Some(FullRecord { offset, .. }), None) => offset.0,
            (None, None) => 0,
        }
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        let h = self.handler;
        let (pc, op) = match &mut self.source {
            FullSource::Slice(records) => match records.next()? {
                Ok(r) => {
                    self.current = Some(r);
                    (r.pc(), r.opcode)
                }
                Err(e) => return Some(Err(h.err(e))),
            },
            FullSource::Stream(reader) => match reader.next_record()? {
                Ok(r) => {
                    self.owned = Some((r.index, r.offset, r.pad, r.to_owned()));
                    (r.pc(), r.opcode)
                }
                Err(e) => return Some(Err(h.err(e))),
            },
        };
        if let Some(asm) = &mut self.disasm {
            asm.set(pc, op);
        }
        Some(Ok(Record::new(0, self)))
    }
}

impl Row for FullRows<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        let r = match (&self.source, &self.owned) {
            (FullSource::Stream(_), Some((index, offset, pad, o))) => FullRecord {
                index: *index,
                offset: *offset,
                opcode: o.opcode,
                pad: *pad,
                thread: &o.thread,
                float: &o.float,
                vector: &o.vector,
            },
            (FullSource::Slice(_), _) => match self.current {
                Some(r) => r,
                None => return,
            },
            _ => return,
        };
        v.uint(r.index);
        v.uint(u64::from(r.pc()));
        v.uint(u64::from(r.opcode));
        opt_str(v, amber_tt6::opcode::mnemonic(r.opcode));
        if let Some(asm) = &self.disasm {
            asm.visit(v);
        }
        v.str(amber_tt6::classify(Dialect::Tt6e, r.opcode).name());
        v.begin_row();
        let t = r.thread;
        v.uint(u64::from(t.srr0.get()));
        v.uint(u64::from(t.srr1.get()));
        for x in &t.r {
            v.uint(u64::from(x.get()));
        }
        for x in [t.cr, t.xer, t.lr, t.ctr, t.mq, t.vrsave] {
            v.uint(u64::from(x.get()));
        }
        for x in &r.float.fpregs {
            v.uint(x.get());
        }
        v.uint(u64::from(r.float.fpscr.get()));
        for vr in &r.vector.save_vr {
            let mut bytes = [0u8; 16];
            for (chunk, w) in bytes.chunks_exact_mut(4).zip(vr) {
                chunk.copy_from_slice(&w.get().to_be_bytes());
            }
            v.bytes(&bytes);
        }
        v.uint(u64::from(r.vector.save_vscr.get(3).map_or(0, |w| w.get())));
        v.uint(u64::from(r.vector.save_vrvalid.get()));
        opt_uint(v, r.pad);
        v.end_row();
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::schema::testing::{Val, collect, records, testdata};

    /// The key columns a columnar sink gives the child tables of `schema`.
    fn key_columns(schema: &Schema) -> Vec<(String, Type, bool)> {
        schema
            .keys()
            .map(|f| (f.name.to_string(), f.ty.clone(), f.nullable))
            .collect()
    }

    /// The child schema of the `Rows` field `name`.
    fn child(schema: &Schema, name: &str) -> Arc<Schema> {
        match &schema.field(name).unwrap().ty {
            Type::Rows(s) => s.clone(),
            t => panic!("{name} is {t:?}"),
        }
    }

    /// Instructions and the dangling-escapes record give the same `escapes` table: same
    /// name, key columns and fields; escape rows carry their instruction's `i`, dangling
    /// ones the index the next instruction would have had.
    #[test]
    fn escapes_carry_i_and_dangling_ones_join_the_same_table() {
        for (name, handler) in [("escapes.tt6", TT6), ("escapes.tt6e", TT6E)] {
            let bytes = testdata(&format!("amber/{name}"));
            for gzip in [false, true] {
                let (tables, rows) = records(&handler, name, &bytes, gzip);
                let [instructions, dangling] = &tables[..] else {
                    panic!("two tables");
                };
                assert_eq!(
                    key_columns(instructions),
                    [("i".into(), Type::UInt(64), false)]
                );
                assert_eq!(key_columns(dangling), key_columns(instructions));
                let escapes = child(instructions, "escapes");
                assert_eq!(escapes.name, "escapes");
                assert_eq!(child(dangling, "dangling_escapes"), escapes);
                let count = rows.iter().filter(|(t, _)| *t == 0).count() as u64;
                let mut with_escapes = 0;
                for (n, (table, row)) in rows.iter().enumerate() {
                    let escapes_at = if *table == 0 {
                        assert_eq!(row[0].u(), n as u64, "{name}: i is the record index");
                        instructions
                            .fields
                            .iter()
                            .position(|f| f.name == "escapes")
                            .unwrap()
                    } else {
                        assert_eq!(n, rows.len() - 1, "{name}: dangling escapes come last");
                        assert_eq!(row[0].u(), count, "{name}: the next instruction's i");
                        1
                    };
                    if let Val::List(list) = &row[escapes_at] {
                        with_escapes += list.len();
                    }
                }
                assert!(with_escapes > 0);
                assert_eq!(rows.last().unwrap().0, 1, "{name} has dangling escapes");
            }
        }
    }

    /// In a merged directory `i` counts each thread's records, so `thread` is a key too
    /// (the pair is unique), and the dangling-escapes schema keeps the same key columns.
    #[test]
    fn merged_keys_are_i_and_thread() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/amber/threads");
        let mut input = Input::open(dir.as_os_str()).unwrap();
        let options = crate::Options::default();
        let mut ctx = Ctx::new(&options);
        let mut records = TT6.records(&mut input, &mut ctx).unwrap();
        let tables = records.tables().to_vec();
        let keys = key_columns(&tables[0]);
        assert_eq!(
            keys,
            [
                ("i".into(), Type::UInt(64), false),
                ("thread".into(), Type::UInt(32), false)
            ]
        );
        assert_eq!(key_columns(&tables[1]), keys);
        assert_eq!(
            child(&tables[1], "dangling_escapes"),
            child(&tables[0], "escapes")
        );
        let thread_at = tables[0]
            .fields
            .iter()
            .position(|f| f.name == "thread")
            .unwrap();
        let mut seen = std::collections::BTreeSet::new();
        while let Some(r) = records.next_record() {
            let r = r.unwrap();
            assert_eq!(r.table, 0);
            let row = collect(r.row());
            assert!(seen.insert((row[0].u(), row[thread_at].u())), "unique keys");
        }
        assert!(seen.len() > 3);
        // `i` alone repeats across threads.
        let is: std::collections::BTreeSet<u64> = seen.iter().map(|(i, _)| *i).collect();
        assert!(is.len() < seen.len());
    }
}
