//! `tracekit` commands for the x64dbg format (`trac-x64dbg`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use trac_x64dbg::{Block, Error, Trace, raw, word_names};

use super::Ctx;
use crate::{CliError, Input};

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
    end: u64,
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
                s.end = ins.offset().0.saturating_add(ins.bytes().len() as u64);
                if s.instructions.is_multiple_of(4096) {
                    ctx.progress.update(s.end);
                }
            }
            Ok(Block::User(u)) => {
                let n = s.user_blocks.entry(u.block_type).or_default();
                *n = n.saturating_add(1);
                s.end = u
                    .offset
                    .0
                    .saturating_add(u.payload.len() as u64)
                    .saturating_add(5);
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
        s.blocks = s.blocks.saturating_add(1);
    }
    s.full_dumps = replay.full_dumps();
    s.sessions = replay.sessions();
    s.recovered_thread_ids = replay.recovered_thread_ids();
    s.started_without_dump = replay.started_without_dump();
    ctx.progress.finish();
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
    if trace.first_block_offset().0.saturating_sub(8) > u64::from(raw::X64DBG_HEADER_LIMIT) {
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

fn hex_opt(v: Option<u64>) -> serde_json::Value {
    v.map_or(serde_json::Value::Null, |v| format!("{v:#x}").into())
}

/// `tracekit info`.
pub fn info(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let bytes = input.bytes()?;
    let trace = Trace::parse(bytes).map_err(CliError::format)?;
    let (s, error) = summarize(&trace, ctx);
    let h = trace.header();
    let diags = diagnostics(&trace, &s);
    if ctx.json {
        let threads: Vec<serde_json::Value> = s
            .threads
            .iter()
            .map(|(t, n)| serde_json::json!({"id": t, "instructions": n}))
            .collect();
        let users: Vec<serde_json::Value> = s
            .user_blocks
            .iter()
            .map(|(t, n)| serde_json::json!({"type": format!("{t:#x}"), "count": n}))
            .collect();
        let v = serde_json::json!({
            "format": "x64dbg",
            "arch": h.arch.name(),
            "word_size": h.arch.word_size(),
            "header": serde_json::from_str::<serde_json::Value>(&h.to_json()).unwrap_or_default(),
            "header_length": trace.first_block_offset().0.saturating_sub(8),
            "instructions": s.instructions,
            "blocks": s.blocks,
            "threads": threads,
            "full_dumps": s.full_dumps,
            "sessions": s.sessions,
            "user_blocks": users,
            "first_pc": hex_opt(s.first_pc),
            "last_pc": hex_opt(s.last_pc),
            "diagnostics": diags,
            "complete": error.is_none(),
        });
        writeln!(ctx.out, "{v}")?;
    } else {
        let o = &mut *ctx.out;
        let opt = |v: &Option<String>| v.as_deref().map_or("-".to_owned(), |s| format!("{s:?}"));
        writeln!(o, "format:        x64dbg")?;
        writeln!(
            o,
            "arch:          {} ({}-byte words, {}-word register dump)",
            h.arch,
            h.arch.word_size(),
            h.arch.regdump_words()
        )?;
        writeln!(o, "version:       1")?;
        writeln!(o, "hashAlgorithm: {}", opt(&h.hash_algorithm))?;
        writeln!(o, "hash:          {}", opt(&h.hash))?;
        writeln!(o, "compression:   {}", opt(&h.compression))?;
        writeln!(o, "path:          {}", opt(&h.path))?;
        for (k, v) in &h.extra {
            writeln!(o, "header.{k}: {v}")?;
        }
        writeln!(
            o,
            "header length: {} bytes",
            trace.first_block_offset().0.saturating_sub(8)
        )?;
        writeln!(o, "instructions:  {}", s.instructions)?;
        writeln!(o, "threads:       {}", s.threads.len())?;
        for (t, n) in &s.threads {
            writeln!(o, "  thread {t:>8}: {n} instructions")?;
        }
        writeln!(o, "full dumps:    {}", s.full_dumps)?;
        writeln!(o, "sessions:      {}", s.sessions)?;
        let users: u64 = s.user_blocks.values().sum();
        write!(o, "user blocks:   {users}")?;
        for (t, n) in &s.user_blocks {
            write!(o, " ({n} of type {t:#x})")?;
        }
        writeln!(o)?;
        let pc = |v: Option<u64>| v.map_or("-".to_owned(), |v| format!("{v:#x}"));
        writeln!(o, "first pc:      {}", pc(s.first_pc))?;
        writeln!(o, "last pc:       {}", pc(s.last_pc))?;
        for d in &diags {
            writeln!(o, "note:          {d}")?;
        }
    }
    match error {
        Some(e) => Err(CliError::format(e)),
        None => Ok(()),
    }
}

/// `tracekit dump`: one JSON line per instruction (user blocks are not instructions; `info`
/// counts them).
pub fn dump(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let bytes = input.bytes()?;
    let trace = Trace::parse(bytes).map_err(CliError::format)?;
    let names = word_names(trace.arch());
    let mut replay = trace.replay();
    let mut line = String::with_capacity(512);
    let mut hex = String::with_capacity(32);
    while let Some(ins) = replay.next_instruction() {
        let ins = ins.map_err(CliError::format)?;
        line.clear();
        hex.clear();
        trace_core::hex::encode_to(&mut hex, ins.opcode());
        let _ = write!(
            line,
            "{{\"i\":{},\"offset\":{},\"thread\":{},\"pc\":\"{:#x}\",\"opcode\":\"{hex}\",\"regs\":{{",
            ins.index(),
            ins.offset().0,
            ins.thread(),
            replay.regs().ip()
        );
        for (k, r) in ins.regs().enumerate() {
            let name = names.get(usize::from(r.index)).map_or("?", String::as_str);
            let sep = if k == 0 { "" } else { "," };
            let _ = write!(line, "{sep}\"{name}\":\"{:#x}\"", r.value);
        }
        line.push_str("},\"mem\":[");
        for (k, m) in ins.mem().enumerate() {
            let sep = if k == 0 { "" } else { "," };
            let _ = write!(
                line,
                "{sep}{{\"addr\":\"{:#x}\",\"old\":\"{:#x}\"",
                m.address, m.old
            );
            if let Some(n) = m.new {
                let _ = write!(line, ",\"new\":\"{n:#x}\"");
            }
            line.push('}');
        }
        line.push_str("]}\n");
        ctx.out.write_all(line.as_bytes())?;
        if ins.index().is_multiple_of(4096) {
            ctx.progress.update(ins.offset().0);
        }
    }
    ctx.progress.finish();
    if replay.recovered_thread_ids() > 0 {
        writeln!(
            ctx.err,
            "note: {} block(s) carry thread-id bytes without the flag (x64dbg before PR #3920); recovered",
            replay.recovered_thread_ids()
        )?;
    }
    Ok(())
}

/// `tracekit validate`: every block, with the x64dbg reader's checks; notes on stderr.
pub fn validate(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let bytes = input.bytes()?;
    let trace = Trace::parse(bytes).map_err(CliError::format)?;
    let (s, error) = summarize(&trace, ctx);
    for d in diagnostics(&trace, &s) {
        writeln!(ctx.err, "note: {d}")?;
    }
    match error {
        Some(e) => Err(CliError::format(e)),
        None => Ok(()),
    }
}
