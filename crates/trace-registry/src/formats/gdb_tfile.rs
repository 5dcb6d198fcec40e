//! GDB tracepoint files (`gdb-tfile`, `tsave` / `target tfile`): one record per frame,
//! `{"i","offset","tracepoint","pc","regs":{…},"mem":[…],"tsv":{…}}`.
//!
//! `pc` is the program counter the frame collected: the target description's pc register
//! ([`TargetDescription::pc_register`]: `rip`, `eip`, `pc` or `pswa`, the first that
//! exists), decoded in target byte order; `null` without a description, without such a
//! register, without an `R` block, or when the register does not fit in the block (GDB
//! would guess the pc from the tracepoint's address there; this does not guess).
//!
//! `regs` are named by the file's target description (registers up to 64 bits as `0x`
//! integers decoded in target byte order, wider ones as hex bytes in target order); without
//! a description, `regs_raw` holds the register block as hex; both are absent for a frame
//! without an `R` block. `regs` is a child table (`registers`: `name`, `value_u64` for
//! registers of at most 8 bytes, `value` the bytes in target order) with one row per
//! available register; registers past the end of the block have no row. `tsv` holds the
//! last value per variable. Plain files are read in place; stdin and compressed files
//! through the streaming reader, in constant memory.
//!
//! Tables (for columnar sinks), the same four for every file (empty where it has no such
//! blocks): `frames` (`i` key, `offset`, `tracepoint`, `pc`, and `regs_raw` without a
//! description), `registers` (`i`, `name`, `value_u64`, `value`; no rows without a
//! description), `memory` (`i`, `addr`, `len`, `data`) and `tsv` (`i`, `number`, `value`).
//!
//! With [`Options::disasm`](crate::Options::disasm), `frames` gets `asm` after `pc`: the
//! instruction at pc ([`crate::disasm`]) when the frame's own `M` blocks hold its bytes and
//! the description's architecture is x86 (`i386`) or x64 (`i386:x86-64`, `i386:x64-32`);
//! null otherwise (no description, another architecture, bytes not collected or cut short).

use std::collections::BTreeMap;
use std::sync::Arc;

use gdb_tfile::{
    Block, Endian, Frame, FrameLayout, ReadOptions, StopReason, StreamReader, TargetDescription,
    TraceFile, raw,
};

use crate::disasm::Disassembler;
use crate::schema::{Field, Json, Row, Schema, Type, Visitor};
use crate::steps::{Isa, Steps};
use crate::{Confidence, Ctx, Error, Handler, Hex, Info, Input, Offers, Record, Records, Source};

pub mod find;
mod steps;

pub(crate) use steps::TfileSteps;

/// The gdb-tfile handler.
#[derive(Debug)]
pub struct GdbTfile;

const NAME: &str = "gdb-tfile";

/// Progress is reported every this many frames.
const PROGRESS_EVERY: u64 = 1 << 12;

fn err(e: gdb_tfile::Error) -> Error {
    Error::format(NAME, e)
}

fn read_options(ctx: &Ctx<'_>) -> ReadOptions {
    ReadOptions {
        endian: ctx.options.big_endian.then_some(Endian::Big),
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Frames from a file in memory or from a stream, one at a time.
enum Frames<'a> {
    Slice(Box<(TraceFile<'a>, gdb_tfile::Frames<'a>)>),
    Stream(Box<StreamReader<Box<dyn std::io::Read + Send>>>),
}

impl<'a> Frames<'a> {
    fn open(input: &'a mut Input, ctx: &mut Ctx<'_>) -> Result<Frames<'a>, Error> {
        let opts = read_options(ctx);
        let frames = match input.source() {
            Source::Bytes(bytes) => {
                let file = TraceFile::parse(bytes, opts).map_err(err)?;
                let frames = file.frames();
                Frames::Slice(Box::new((file, frames)))
            }
            Source::Stream(s) => {
                Frames::Stream(Box::new(StreamReader::from_reader(s, opts).map_err(err)?))
            }
        };
        for w in frames.warnings() {
            ctx.diagnostic(&format!("warning: {w}"));
        }
        Ok(frames)
    }

    fn warnings(&self) -> &[gdb_tfile::Warning] {
        match self {
            Frames::Slice(b) => b.0.warnings(),
            Frames::Stream(s) => s.warnings(),
        }
    }

    fn tdesc(&self) -> Option<&TargetDescription> {
        match self {
            Frames::Slice(b) => b.0.tdesc(),
            Frames::Stream(s) => s.tdesc(),
        }
    }

    fn description(&self) -> &gdb_tfile::Description {
        match self {
            Frames::Slice(b) => b.0.description(),
            Frames::Stream(s) => s.description(),
        }
    }

    fn layout(&self) -> FrameLayout {
        match self {
            Frames::Slice(b) => b.0.layout(),
            Frames::Stream(s) => s.layout(),
        }
    }

    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, Error> {
        match self {
            Frames::Slice(b) => b.1.next().transpose().map_err(err),
            Frames::Stream(s) => s.next_frame().map_err(err),
        }
    }
}

/// Checks every block of a frame (a frame is handed out whole or not at all).
fn check_blocks(f: &Frame<'_>) -> Result<(), Error> {
    for b in f.blocks() {
        b.map_err(err)?;
    }
    Ok(())
}

impl Handler for GdbTfile {
    fn offers(&self) -> Offers {
        Offers {
            frames: true,
            reads: &["big_endian"],
            ..Offers::default()
        }
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["tfile"]
    }

    fn recognised_by(&self) -> &'static str {
        "magic \"\\x7fTRACE0\\n\""
    }

    fn detect(&self, head: &[u8], _file_name: &str) -> Option<Confidence> {
        head.starts_with(raw::MAGIC).then_some(Confidence::Magic)
    }

    fn info(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let big_flag = ctx.options.big_endian;
        let mut frames = Frames::open(input, ctx)?;
        let mut per_tp: BTreeMap<i16, u64> = BTreeMap::new();
        let mut n = 0u64;
        while let Some(f) = frames.next_frame()? {
            let c = per_tp.entry(f.tracepoint).or_default();
            *c = c.saturating_add(1);
            n = n.saturating_add(1);
            if f.index.is_multiple_of(PROGRESS_EVERY) {
                ctx.progress(f.offset.0);
            }
        }
        let d = frames.description();
        let layout = frames.layout();
        let td = frames.tdesc();
        let byte_order = match layout.endian {
            Endian::Little => "little",
            Endian::Big => "big",
        };
        let byte_order_source = if big_flag {
            "--big-endian"
        } else if td.and_then(TargetDescription::endian).is_some() {
            "from the architecture"
        } else {
            "default; the file does not say"
        };
        let status = d.status.as_ref().map(|s| {
            Info::new()
                .with("running", s.running)
                .with("stop_reason", s.stop_reason.key())
                .with("stop_reason_text", s.stop_reason.describe())
                .with("stop_description", s.stop_description.as_deref().map(lossy))
                .with(
                    "stopping_tracepoint",
                    matches!(s.stop_reason, StopReason::PassCount | StopReason::Error)
                        .then_some(s.stopping_tracepoint),
                )
                .with("frames", s.frames)
                .with("created", s.created)
                .with("free", s.free)
                .with("size", s.size)
                .with("disconnected", s.disconnected)
                .with("circular", s.circular)
                .with("start_time", s.start_time)
                .with("stop_time", s.stop_time)
                .with("notes", s.notes.as_deref().map(lossy))
                .with("username", s.username.as_deref().map(lossy))
                .with(
                    "unknown",
                    s.unknown
                        .iter()
                        .map(|(k, v)| {
                            Info::new()
                                .with("key", k.to_string())
                                .with("value", v.to_string())
                        })
                        .collect::<Vec<_>>(),
                )
        });
        let tracepoints: Vec<Info> = d
            .tracepoints
            .iter()
            .map(|t| {
                Info::new()
                    .with("number", t.number)
                    .with("address", Hex(t.address))
                    .with("enabled", t.enabled)
                    .with("step_count", t.step_count)
                    .with("pass_count", t.pass_count)
                    .with("fast", t.fast.is_some())
                    .with("static", t.is_static)
                    .with(
                        "condition",
                        t.condition.as_deref().map(trace_core::hex::encode),
                    )
                    .with("actions", t.actions.clone())
                    .with("step_actions", t.step_actions.clone())
                    .with("at", t.at().map(lossy))
                    .with("cond", t.cond_source().map(lossy))
                    .with("cmds", t.cmds().map(lossy).collect::<Vec<_>>())
                    .with("hits", t.hits())
                    .with("usage", t.usage())
                    .with("hits_decimal", t.hits_decimal())
                    .with("usage_decimal", t.usage_decimal())
            })
            .collect();
        let tsvs: Vec<Info> = d
            .tsvs
            .iter()
            .map(|v| {
                Info::new()
                    .with("number", v.number)
                    .with("name", lossy(&v.name))
                    .with("initial", v.initial)
                    .with("builtin", v.builtin != 0)
            })
            .collect();
        let mut frames_per_tp = Info::new();
        for (tp, c) in &per_tp {
            frames_per_tp.push(tp.to_string(), *c);
        }
        Ok(Info::new()
            .with("format", NAME)
            .with("register_size", layout.register_size)
            .with("architecture", td.and_then(|t| t.architecture.clone()))
            .with("osabi", td.and_then(|t| t.osabi.clone()))
            .with("registers", td.map(|t| t.registers.len()))
            .with("byte_order", byte_order)
            .with("byte_order_source", byte_order_source)
            .with("status", status)
            .with("tracepoints", tracepoints)
            .with("tsvs", tsvs)
            .with("frames", n)
            .with("frames_per_tracepoint", frames_per_tp)
            .with(
                "warnings",
                frames
                    .warnings()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
            ))
    }

    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let mut frames = Frames::open(input, ctx)?;
        let mut n = 0u64;
        while let Some(f) = frames.next_frame()? {
            check_blocks(&f)?;
            if f.index.is_multiple_of(PROGRESS_EVERY) {
                ctx.progress(f.offset.0);
            }
            n = n.saturating_add(1);
        }
        Ok(Info::new().with("frames", n))
    }

    fn records<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error> {
        let frames = Frames::open(input, ctx)?;
        let regs = frames.tdesc().map(|td| {
            td.registers
                .iter()
                .map(|r| RegSlot {
                    name: r.name.clone(),
                    offset: r.offset,
                    size: r.size(),
                })
                .collect::<Vec<_>>()
        });
        let pc = frames
            .tdesc()
            .and_then(TargetDescription::pc_register)
            .map(|r| (r.offset, r.size()));
        let schema = frame_schema(frames.tdesc().is_some(), ctx.options.disasm);
        let disasm = ctx.options.disasm.then(|| {
            let isa = frames.tdesc().map_or(Isa::Other, isa);
            (Disassembler::new(isa), None)
        });
        Ok(Box::new(FrameRecords {
            tables: [schema],
            frames,
            regs,
            pc,
            disasm,
            current: None,
            data: Vec::new(),
            tsvs: Vec::new(),
            done: false,
        }))
    }

    /// One step per frame (see the `steps` module): the frame's pc, its `M` blocks as
    /// snapshot accesses, its registers named by the target description.
    fn steps<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Steps + 'a>, Error> {
        Ok(Box::new(TfileSteps::open(input, ctx)?))
    }
}

/// The instruction set of a target description's architecture, as far as [`crate::disasm`]
/// decodes it.
fn isa(td: &TargetDescription) -> Isa {
    match td.architecture.as_deref() {
        Some("i386:x86-64" | "i386:x64-32") => Isa::X64,
        Some("i386" | "i386:intel") => Isa::X86,
        _ => Isa::Other,
    }
}

/// Up to 15 bytes at `pc` from the frame's memory blocks (the longest x86 instruction).
fn bytes_at<'f>(frame: &Frame<'f>, pc: u64) -> Option<&'f [u8]> {
    frame.blocks().flatten().find_map(|b| match b {
        Block::Memory { address, data, .. } => {
            let start = usize::try_from(pc.checked_sub(address)?).ok()?;
            let rest = data.get(start..).filter(|r| !r.is_empty())?;
            rest.get(..rest.len().min(15))
        }
        _ => None,
    })
}

/// The schema of `frames`, for a file with a target description (named registers) or
/// without one (the raw register block); `disasm` adds `asm`.
fn frame_schema(tdesc: bool, disasm: bool) -> Arc<Schema> {
    let mem = Schema::new(
        "memory",
        vec![
            Field::hex("addr", 64),
            Field::new("len", Type::UInt(64)),
            Field::new("data", Type::Bytes),
        ],
    );
    let tsv = Schema::new(
        "tsv",
        vec![
            Field::new("number", Type::Int(32)),
            Field::new("value", Type::Int(64)),
        ],
    );
    let mut fields = vec![
        Field::new("i", Type::UInt(64)).key(),
        Field::new("offset", Type::UInt(64)),
        Field::new("tracepoint", Type::Int(16)),
        Field::hex("pc", 64).nullable(),
    ];
    if disasm {
        fields.push(Field::new("asm", Type::Str).nullable());
    }
    // JSON shows the table as `{"name":value,…}`: `value_u64` as `0x…` when the register
    // has at most 8 bytes, else `value` as hex bytes (one key per available register, in
    // the description's order). Every file has the table, so that a dataset's tables do
    // not depend on the file: empty without a description (the block is then `regs_raw`)
    // or without `R` blocks.
    let regs = Schema::new(
        "registers",
        vec![
            Field::new("name", Type::Name),
            Field::hex("value_u64", 64).nullable(),
            Field::new("value", Type::Bytes),
        ],
    );
    fields.push(
        Field::new("regs", Type::Rows(Arc::new(regs)))
            .json(Json::Object)
            .optional(),
    );
    if !tdesc {
        fields.push(Field::new("regs_raw", Type::Bytes).optional());
    }
    fields.push(Field::new("mem", Type::Rows(Arc::new(mem))));
    fields.push(Field::new("tsv", Type::Rows(Arc::new(tsv))).json(Json::Object));
    Arc::new(Schema::new("frames", fields))
}

/// A register of the target description: its name and where it is in the `R` block.
struct RegSlot {
    name: String,
    offset: usize,
    size: usize,
}

/// The frame being handed out.
#[derive(Clone, Copy)]
struct Current<'a> {
    index: u64,
    offset: trace_core::Offset,
    tracepoint: i16,
    layout: FrameLayout,
    /// The blocks, in place; `None` when copied to `FrameRecords::data` (streams).
    data: Option<&'a [u8]>,
}

struct FrameRecords<'a> {
    tables: [Arc<Schema>; 1],
    frames: Frames<'a>,
    /// Each register of the target description (`None` without one).
    regs: Option<Vec<RegSlot>>,
    /// Offset and size of the description's pc register.
    pc: Option<(usize, usize)>,
    /// With `--disasm`: the disassembler and the current frame's text.
    disasm: Option<(Disassembler, Option<String>)>,
    current: Option<Current<'a>>,
    data: Vec<u8>,
    /// The last value of each trace state variable in the current frame.
    tsvs: Vec<(i32, i64)>,
    done: bool,
}

impl<'a> FrameRecords<'a> {
    fn advance(&mut self) -> Result<bool, Error> {
        let more = self.advance_frame()?;
        if more && self.disasm.is_some() {
            let frame = frame_of(self.current, &self.data);
            let pc = frame.as_ref().and_then(|f| pc_of(self.pc, f));
            let text = match (&mut self.disasm, frame.as_ref(), pc) {
                (Some((d, _)), Some(f), Some(pc)) => bytes_at(f, pc)
                    .and_then(|b| d.asm(pc, b))
                    .map(str::to_owned),
                _ => None,
            };
            if let Some((_, asm)) = &mut self.disasm {
                *asm = text;
            }
        }
        Ok(more)
    }

    fn advance_frame(&mut self) -> Result<bool, Error> {
        let (cur, tsvs, data) = (&mut self.current, &mut self.tsvs, &mut self.data);
        let slice = match &mut self.frames {
            Frames::Slice(b) => b.1.next().transpose().map_err(err)?,
            Frames::Stream(s) => {
                let Some(f) = s.next_frame().map_err(err)? else {
                    return Ok(false);
                };
                summarize_frame(&f, tsvs)?;
                data.clear();
                data.extend_from_slice(f.data);
                *cur = Some(Current {
                    index: f.index,
                    offset: f.offset,
                    tracepoint: f.tracepoint,
                    layout: f.layout,
                    data: None,
                });
                return Ok(true);
            }
        };
        let Some(f) = slice else { return Ok(false) };
        summarize_frame(&f, tsvs)?;
        *cur = Some(Current {
            index: f.index,
            offset: f.offset,
            tracepoint: f.tracepoint,
            layout: f.layout,
            data: Some(f.data),
        });
        Ok(true)
    }
}

/// Checks the frame's blocks and collects the last value of each trace state variable.
fn summarize_frame(f: &Frame<'_>, tsvs: &mut Vec<(i32, i64)>) -> Result<(), Error> {
    tsvs.clear();
    for b in f.blocks() {
        if let Block::Tsv { number, value, .. } = b.map_err(err)? {
            match tsvs.iter_mut().find(|(n, _)| *n == number) {
                Some(e) => e.1 = value,
                None => tsvs.push((number, value)),
            }
        }
    }
    Ok(())
}

impl Records for FrameRecords<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn position(&self) -> u64 {
        self.current.map_or(0, |c| c.offset.0)
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        if self.done {
            return None;
        }
        match self.advance() {
            Ok(true) => Some(Ok(Record::new(0, self))),
            Ok(false) => {
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

/// The current frame, in place or in `data` (streams).
fn frame_of<'s>(current: Option<Current<'s>>, data: &'s [u8]) -> Option<Frame<'s>> {
    let c = current?;
    Some(Frame {
        index: c.index,
        offset: c.offset,
        tracepoint: c.tracepoint,
        data: c.data.unwrap_or(data),
        layout: c.layout,
    })
}

/// The frame's pc: the description's pc register (`slot`: offset and size) in its `R`
/// block.
fn pc_of(slot: Option<(usize, usize)>, frame: &Frame<'_>) -> Option<u64> {
    let regs = registers(frame)?;
    let (off, size) = slot?;
    let bytes = regs.get(off..off.saturating_add(size))?;
    gdb_tfile::RegisterValue {
        bytes,
        endian: frame.layout.endian,
    }
    .as_u64()
}

/// The frame's `R` block.
fn registers<'f>(frame: &Frame<'f>) -> Option<&'f [u8]> {
    frame.blocks().flatten().find_map(|b| match b {
        Block::Registers { data, .. } => Some(data),
        _ => None,
    })
}

impl Row for FrameRecords<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        let Some(frame) = frame_of(self.current, &self.data) else {
            return;
        };
        v.uint(frame.index);
        v.uint(frame.offset.0);
        v.int(i64::from(frame.tracepoint));
        let regs = registers(&frame);
        let endian = frame.layout.endian;
        let as_u64 = |bytes| gdb_tfile::RegisterValue { bytes, endian }.as_u64();
        match pc_of(self.pc, &frame) {
            Some(pc) => v.uint(pc),
            None => v.null(),
        }
        if let Some((_, asm)) = &self.disasm {
            match asm {
                Some(a) => v.str(a),
                None => v.null(),
            }
        }
        match (regs, &self.regs) {
            (None, Some(_)) => v.null(),
            // No description: no named registers; the block as it is.
            (None, None) => {
                v.null();
                v.null();
            }
            (Some(r), Some(layout)) => {
                v.begin_list();
                for reg in layout {
                    // A register past the end of the block is unavailable: no row.
                    let Some(bytes) = r.get(reg.offset..reg.offset.saturating_add(reg.size)) else {
                        continue;
                    };
                    v.begin_row();
                    v.str(&reg.name);
                    match as_u64(bytes) {
                        Some(x) => v.uint(x),
                        None => v.null(),
                    }
                    v.bytes(bytes);
                    v.end_row();
                }
                v.end_list();
            }
            (Some(r), None) => {
                v.null();
                v.bytes(r);
            }
        }
        v.begin_list();
        for b in frame.blocks().flatten() {
            if let Block::Memory { address, data, .. } = b {
                v.begin_row();
                v.uint(address);
                v.uint(data.len() as u64);
                v.bytes(data);
                v.end_row();
            }
        }
        v.end_list();
        v.begin_list();
        for (n, value) in &self.tsvs {
            v.begin_row();
            v.int(i64::from(*n));
            v.int(*value);
            v.end_row();
        }
        v.end_list();
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::schema::testing::{Val, records, testdata};

    /// `pc` is the value of the description's pc register as `gdb_tfile` reads it
    /// (`rip` on amd64, `pswa` on s390, null without a description), and `regs` has one
    /// row per register in the `R` block, `value_u64` where it has at most 8 bytes.
    #[test]
    fn pc_is_the_description_pc_register() {
        for (name, pc_name) in [
            ("amd64.tf", Some("rip")),
            ("quirks.tf", Some("rip")),
            ("s390-big-endian.tf", Some("pswa")),
            ("no-tdesc.tf", None),
        ] {
            let bytes = testdata(&format!("gdb-tfile/{name}"));
            let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
            let td = file.tdesc();
            assert_eq!(
                td.and_then(TargetDescription::pc_register)
                    .map(|r| r.name.as_str()),
                pc_name,
                "{name}"
            );
            let expected: Vec<Option<u64>> = file
                .frames()
                .map(|f| {
                    let f = f.unwrap();
                    let pc = td.and_then(|td| f.register(td, pc_name?).unwrap())?;
                    pc.as_u64()
                })
                .collect();
            assert!(expected.iter().any(Option::is_some) == pc_name.is_some());
            for gzip in [false, true] {
                let (tables, rows) = records(&GdbTfile, name, &bytes, gzip);
                let schema = &tables[0];
                assert_eq!(schema.keys().map(|f| &*f.name).collect::<Vec<_>>(), ["i"]);
                assert_eq!(rows.len(), expected.len());
                for ((_, row), pc) in rows.iter().zip(&expected) {
                    match pc {
                        Some(pc) => assert_eq!(row[3], Val::U(*pc), "{name}"),
                        None => assert_eq!(row[3], Val::Null, "{name}"),
                    }
                    let Some(td) = td else { continue };
                    if row[4] == Val::Null {
                        continue;
                    }
                    for reg in row[4].items() {
                        let [Val::S(n), value_u64, Val::Bytes(value)] = reg.items() else {
                            panic!("bad register row {reg:?}");
                        };
                        let r = td.register(n).unwrap();
                        assert_eq!(value.len(), r.size());
                        match value_u64 {
                            Val::U(_) => assert!(r.size() <= 8),
                            Val::Null => assert!(r.size() > 8),
                            v => panic!("bad value_u64 {v:?}"),
                        }
                        if Some(n.as_str()) == pc_name {
                            assert_eq!(value_u64, &Val::U(pc.unwrap()));
                        }
                    }
                }
            }
        }
    }

    /// With `disasm`, `asm` follows `pc`: the instruction at pc where the frame's memory
    /// holds its bytes (x64 here), null where it does not, or holds only part of it, and
    /// for other architectures; in place and streamed.
    #[test]
    fn disasm_reads_the_instruction_at_pc_from_the_frame() {
        use gdb_tfile::{BlockData, testgen};
        let mut file = testgen::amd64_file(16, 1);
        // mov rax, qword ptr [rsp+8] at tracepoint 2's pc 0x401134 in frames 0 and 1;
        // frame 2 holds only its first 2 bytes (cut short); the others hold none.
        let code = [0x48, 0x8b, 0x44, 0x24, 0x08, 0xc3];
        for (k, frame) in file.frames.iter_mut().take(3).enumerate() {
            let data = if k == 2 {
                code[..2].to_vec()
            } else {
                code.to_vec()
            };
            frame.blocks.push(BlockData::Memory {
                address: 0x401134 - u64::from(k == 1),
                data: if k == 1 {
                    [&[0x90][..], &data].concat()
                } else {
                    data
                },
            });
        }
        let bytes = gdb_tfile::write::to_bytes(&file, Endian::Little).unwrap();
        let options = crate::Options {
            disasm: true,
            ..crate::Options::default()
        };
        for gzip in [false, true] {
            let name = if gzip { "x.tf.gz" } else { "x.tf" };
            let data = if gzip {
                use std::io::Write;
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(&bytes).unwrap();
                gz.finish().unwrap()
            } else {
                bytes.clone()
            };
            let mut input = Input::from_bytes(name, data).unwrap();
            let mut records = GdbTfile
                .records(&mut input, &mut Ctx::new(&options))
                .unwrap();
            let schema = records.tables()[0].clone();
            assert_eq!(schema.fields[4].name, "asm");
            let mut asm = Vec::new();
            while let Some(r) = records.next_record() {
                let row = crate::schema::testing::collect(r.unwrap().row());
                asm.push(row[4].clone());
            }
            assert_eq!(asm.len(), 16);
            let mov = Val::S("mov rax, qword ptr [rsp+8]".into());
            assert_eq!(asm[..4], [mov.clone(), mov, Val::Null, Val::Null]);
            assert!(asm[2..].iter().all(|a| *a == Val::Null));
        }
        // Another architecture: null, even with the bytes there.
        let s390 = testdata("gdb-tfile/s390-big-endian.tf");
        let mut input = Input::from_bytes("s390.tf", s390).unwrap();
        let mut records = GdbTfile
            .records(&mut input, &mut Ctx::new(&options))
            .unwrap();
        while let Some(r) = records.next_record() {
            assert_eq!(
                crate::schema::testing::collect(r.unwrap().row())[4],
                Val::Null
            );
        }
        // Without the option the schema is the plain one.
        let (tables, _) = crate::schema::testing::records(&GdbTfile, "x.tf", &bytes, false);
        assert!(tables[0].field("asm").is_none());
    }
}
