//! x64dbg run traces (`trac-x64dbg`): one record per instruction (user blocks are not
//! instructions; `info` counts them).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use trac_x64dbg::{Block, Instruction, Replay, Trace, raw, word_names};

use crate::schema::{Field, Json, Row, Schema, Type, Visitor};
use crate::{Confidence, Ctx, Error, Handler, Hex, Info, Input, Record, Records};

/// The x64dbg handler.
#[derive(Debug)]
pub struct X64dbg;

const NAME: &str = "x64dbg";

fn err(e: trac_x64dbg::Error) -> Error {
    Error::Format {
        format: NAME,
        offset: e.offset().map(trace_core::Offset),
        path: None,
        record: None,
        source: Box::new(e),
    }
}

/// The schema of `instructions`: `{"i","offset","thread","pc","opcode","regs":{…},"mem":[…]}`.
fn instructions() -> Arc<Schema> {
    static SCHEMA: OnceLock<Arc<Schema>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            let regs = Schema::new(
                "registers",
                vec![Field::new("name", Type::Name), Field::hex("value", 64)],
            );
            let mem = Schema::new(
                "memory",
                vec![
                    Field::hex("addr", 64),
                    Field::hex("old", 64),
                    Field::hex("new", 64).optional(),
                ],
            );
            Arc::new(Schema::new(
                "instructions",
                vec![
                    Field::new("i", Type::UInt(64)),
                    Field::new("offset", Type::UInt(64)),
                    Field::new("thread", Type::UInt(32)),
                    Field::hex("pc", 64),
                    Field::new("opcode", Type::Bytes),
                    Field::new("regs", Type::Rows(Arc::new(regs))).json(Json::Object),
                    Field::new("mem", Type::Rows(Arc::new(mem))),
                ],
            ))
        })
        .clone()
}

/// What one pass over the blocks learns, for `info` and `validate`.
#[derive(Default)]
struct Summary {
    instructions: u64,
    blocks: u64,
    threads: BTreeMap<u32, u64>,
    full_dumps: u64,
    sessions: u64,
    user_blocks: BTreeMap<u8, u64>,
    first_pc: Option<u64>,
    last_pc: Option<u64>,
    recovered_thread_ids: u64,
    first_recovered: Option<u64>,
    started_without_dump: bool,
    reserved_bits: u64,
}

fn summarize(trace: &Trace<'_>, ctx: &mut Ctx<'_>) -> (Summary, Option<Error>) {
    let mut s = Summary::default();
    let mut replay = trace.replay();
    let mut error = None;
    while let Some(block) = replay.next_block() {
        match block {
            Ok(Block::Instruction(ins)) => {
                s.instructions = s.instructions.saturating_add(1);
                let n = s.threads.entry(ins.thread()).or_default();
                *n = n.saturating_add(1);
                let pc = replay.regs().ip();
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
            Ok(Block::User(u)) => {
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
    s.full_dumps = replay.full_dumps();
    s.sessions = replay.sessions();
    s.recovered_thread_ids = replay.recovered_thread_ids();
    s.started_without_dump = replay.started_without_dump();
    (s, error)
}

fn diagnostics(trace: &Trace<'_>, s: &Summary) -> Vec<String> {
    let mut d = Vec::new();
    if s.recovered_thread_ids > 0 {
        d.push(format!(
            "{} block(s) carry thread-id bytes without the 0x80 flag (x64dbg before PR #3920); recovered, first at offset {:#x}",
            s.recovered_thread_ids,
            s.first_recovered.unwrap_or(0)
        ));
    }
    if s.started_without_dump {
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
    if trace.first_block_offset().saturating_sub(8) > u64::from(raw::X64DBG_HEADER_LIMIT) {
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
fn header_info(trace: &Trace<'_>) -> Info {
    let h = trace.header();
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
        let trace = Trace::parse(input.bytes()?).map_err(err)?;
        let (s, error) = summarize(&trace, ctx);
        if let Some(e) = error {
            return Err(e);
        }
        let h = trace.header();
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
            .with("header", header_info(&trace))
            .with(
                "header_length",
                trace.first_block_offset().saturating_sub(8),
            )
            .with("instructions", s.instructions)
            .with("blocks", s.blocks)
            .with("threads", threads)
            .with("full_dumps", s.full_dumps)
            .with("sessions", s.sessions)
            .with("user_blocks", users)
            .with("first_pc", s.first_pc.map(Hex))
            .with("last_pc", s.last_pc.map(Hex))
            .with("diagnostics", diagnostics(&trace, &s)))
    }

    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let trace = Trace::parse(input.bytes()?).map_err(err)?;
        let (s, error) = summarize(&trace, ctx);
        for d in diagnostics(&trace, &s) {
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
        _ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error> {
        let trace = Trace::parse(input.bytes()?).map_err(err)?;
        Ok(Box::new(X64Records {
            tables: [instructions()],
            names: word_names(trace.arch()),
            replay: trace.replay(),
            current: None,
            pc: 0,
            done: false,
        }))
    }
}

struct X64Records<'a> {
    tables: [Arc<Schema>; 1],
    names: Vec<String>,
    replay: Replay<'a>,
    current: Option<Instruction<'a>>,
    /// The instruction pointer before the current instruction.
    pc: u64,
    done: bool,
}

impl Records for X64Records<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        if self.done {
            return None;
        }
        match self.replay.next_instruction() {
            None => {
                self.done = true;
                None
            }
            Some(Err(e)) => {
                self.done = true;
                Some(Err(err(e)))
            }
            Some(Ok(ins)) => {
                self.pc = self.replay.regs().ip();
                self.current = Some(ins);
                Some(Ok(Record {
                    table: 0,
                    row: self,
                }))
            }
        }
    }

    fn finish(&mut self) -> Vec<String> {
        let n = self.replay.recovered_thread_ids();
        if n == 0 {
            return Vec::new();
        }
        vec![format!(
            "note: {n} block(s) carry thread-id bytes without the flag (x64dbg before PR #3920); recovered"
        )]
    }
}

impl Row for X64Records<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        let Some(ins) = &self.current else { return };
        v.uint(ins.index());
        v.uint(ins.offset().0);
        v.uint(u64::from(ins.thread()));
        v.uint(self.pc);
        v.bytes(ins.opcode());
        v.begin_list();
        for r in ins.regs() {
            v.begin_row();
            v.str(
                self.names
                    .get(usize::from(r.index))
                    .map_or("?", String::as_str),
            );
            v.uint(r.value);
            v.end_row();
        }
        v.end_list();
        v.begin_list();
        for m in ins.mem() {
            v.begin_row();
            v.uint(m.address);
            v.uint(m.old);
            match m.new {
                Some(n) => v.uint(n),
                None => v.null(),
            }
            v.end_row();
        }
        v.end_list();
    }
}
