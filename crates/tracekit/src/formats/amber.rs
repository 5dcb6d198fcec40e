//! `tracekit` commands for the amber TT6, TT6E and FULL formats.
//!
//! `dump` prints one JSON line per instruction, each field only where it applies:
//! `{"i":0,"pc":"0x1000","op":"0x7c0802a6","mnemonic":"mflr","class":"compute",…}` with
//! `next_pc` (flow), `ea`, `size`, `store` or `access`, `extra` (memory-extended), `trap`,
//! `synthetic_trap`, `escapes`; FULL records add `regs`. Escapes after the last instruction
//! come as a final `{"dangling_escapes":[…]}` line.

use std::fmt::Write as _;
use std::io::Write;

use amber_tt6::din::DinWriter;
use amber_tt6::{
    Class, Dialect, Escapes, FullReader, FullRecord, Record, RecordSize, Summary, SyntheticTrap,
    Tt6Reader, Tt6StreamReader,
};

use super::Ctx;
use crate::{CliError, Format, Input};

/// The cache-line size used for `dcb*` operand sizes (G3/G4).
const CACHE_LINE: u32 = 32;
/// Progress is reported every this many records.
const PROGRESS_EVERY: u64 = 1 << 16;

fn dialect(format: Format) -> Dialect {
    if format == Format::Tt6e {
        Dialect::Tt6e
    } else {
        Dialect::Tt6
    }
}

fn full_reader<'a>(bytes: &'a [u8], ctx: &Ctx<'_>) -> Result<FullReader<'a>, CliError> {
    match ctx.opts.record_size {
        Some(n) => {
            let size = RecordSize::from_bytes(n).map_err(CliError::format)?;
            FullReader::with_size(bytes, size).map_err(CliError::format)
        }
        None => FullReader::parse(bytes).map_err(CliError::format),
    }
}

/// `tracekit info`.
pub fn info(format: Format, mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let bytes = input.bytes()?;
    if format == Format::AmberFull {
        return info_full(bytes, ctx);
    }
    let reader = Tt6Reader::parse(bytes, dialect(format)).map_err(CliError::format)?;
    let mut records = reader.records();
    let mut s = Summary::default();
    for r in records.by_ref() {
        let r = r.map_err(CliError::format)?;
        s.add(&r);
        if r.index.is_multiple_of(PROGRESS_EVERY) {
            ctx.progress.update(r.offset.0);
        }
    }
    for e in records.dangling_escapes() {
        s.add_escape(&e);
        s.dangling_escapes = s.dangling_escapes.saturating_add(1);
    }
    ctx.progress.finish();
    if ctx.json {
        let classes: serde_json::Map<String, serde_json::Value> = Class::ALL
            .iter()
            .map(|c| (c.name().to_owned(), s.class_count(*c).into()))
            .collect();
        let escapes: Vec<serde_json::Value> = s
            .escapes
            .iter()
            .map(|(code, n)| {
                serde_json::json!({
                    "code": code,
                    "name": amber_tt6::EscapeKind::from_code(*code).name(),
                    "count": n,
                })
            })
            .collect();
        let v = serde_json::json!({
            "format": format.name(),
            "initial_pc": format!("{:#x}", reader.initial_pc()),
            "instructions": s.instructions,
            "classes": classes,
            "taken_branches": s.taken,
            "traps": s.traps,
            "escapes": escapes,
            "sync_events": s.sync_events,
            "dangling_escapes": s.dangling_escapes,
            "final_pc": format!("{:#x}", records.pc()),
        });
        writeln!(ctx.out, "{v}")?;
    } else {
        let out = &mut ctx.out;
        writeln!(out, "format: {}", format.name())?;
        writeln!(out, "initial pc: {:#x}", reader.initial_pc())?;
        writeln!(out, "instructions: {}", s.instructions)?;
        for c in Class::ALL {
            writeln!(out, "  {}: {}", c.name(), s.class_count(c))?;
        }
        writeln!(out, "taken branches: {}", s.taken)?;
        writeln!(out, "traps: {}", s.traps)?;
        let total: u64 = s.escapes.values().sum();
        writeln!(out, "escapes: {total}")?;
        for (code, n) in &s.escapes {
            let name = amber_tt6::EscapeKind::from_code(*code).name();
            writeln!(out, "  {code:#04x} {name}: {n}")?;
        }
        writeln!(out, "sync events: {}", s.sync_events)?;
        writeln!(out, "dangling escapes: {}", s.dangling_escapes)?;
        writeln!(out, "final pc: {:#x}", records.pc())?;
    }
    Ok(())
}

fn info_full(bytes: &[u8], ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let reader = full_reader(bytes, ctx)?;
    let mut per_class = [0u64; 4];
    let mut n = 0u64;
    let mut first_pc = None;
    for r in reader.records() {
        let r = r.map_err(CliError::format)?;
        n = n.saturating_add(1);
        first_pc.get_or_insert(r.pc());
        let c = amber_tt6::classify(Dialect::Tt6e, r.opcode);
        if let Some(x) = per_class.get_mut(c as usize) {
            *x = x.saturating_add(1);
        }
    }
    let size = reader.record_size().bytes();
    let first = first_pc.map(|p| format!("{p:#x}"));
    if ctx.json {
        let classes: serde_json::Map<String, serde_json::Value> = Class::ALL
            .iter()
            .map(|c| {
                (
                    c.name().to_owned(),
                    per_class.get(*c as usize).copied().unwrap_or(0).into(),
                )
            })
            .collect();
        let v = serde_json::json!({
            "format": "amber-full",
            "record_size": size,
            "initial_pc": first,
            "instructions": n,
            "classes": classes,
        });
        writeln!(ctx.out, "{v}")?;
    } else {
        writeln!(ctx.out, "format: amber-full")?;
        writeln!(ctx.out, "record size: {size}")?;
        writeln!(
            ctx.out,
            "initial pc: {}",
            first.as_deref().unwrap_or("(none)")
        )?;
        writeln!(ctx.out, "instructions: {n}")?;
        for c in Class::ALL {
            let k = per_class.get(c as usize).copied().unwrap_or(0);
            writeln!(ctx.out, "  {}: {k}", c.name())?;
        }
    }
    Ok(())
}

fn push_escapes(line: &mut String, escapes: Escapes<'_>) {
    line.push('[');
    for (k, e) in escapes.iter().enumerate() {
        if k > 0 {
            line.push(',');
        }
        let _ = write!(
            line,
            "{{\"code\":{},\"name\":\"{}\",\"words\":[",
            e.code,
            e.kind().name()
        );
        for (j, w) in e.words.iter().enumerate() {
            if j > 0 {
                line.push(',');
            }
            let _ = write!(line, "\"{:#x}\"", w.get());
        }
        line.push_str("]}");
    }
    line.push(']');
}

/// Appends the JSON object of one record (without the closing brace).
fn record_json(line: &mut String, r: &Record<'_>) {
    let _ = write!(
        line,
        "{{\"i\":{},\"pc\":\"{:#x}\",\"op\":\"{:#010x}\"",
        r.index, r.pc, r.opcode
    );
    if let Some(m) = r.mnemonic() {
        let _ = write!(line, ",\"mnemonic\":\"{m}\"");
    }
    let _ = write!(line, ",\"class\":\"{}\"", r.class.name());
    if r.class == Class::Flow {
        let _ = write!(line, ",\"next_pc\":\"{:#x}\"", r.next_pc);
    }
    if let Some(ea) = r.ea() {
        let _ = write!(line, ",\"ea\":\"{ea:#x}\"");
        if let Some(size) = r.operand_size(CACHE_LINE) {
            let _ = write!(line, ",\"size\":{size}");
        }
        match r.access() {
            Some(a @ (amber_tt6::Access::Load | amber_tt6::Access::Store)) => {
                let _ = write!(line, ",\"store\":{}", a == amber_tt6::Access::Store);
            }
            Some(a) => {
                let _ = write!(line, ",\"access\":\"{}\"", a.name());
            }
            None => {}
        }
    }
    if let Some(x) = r.extra() {
        let _ = write!(line, ",\"extra\":\"{x:#x}\"");
    }
    if r.is_trap() {
        line.push_str(",\"trap\":true");
    }
    match r.trap {
        Some(SyntheticTrap::Branch) => line.push_str(",\"synthetic_trap\":\"branch\""),
        Some(SyntheticTrap::Return) => line.push_str(",\"synthetic_trap\":\"return\""),
        None => {}
    }
    if !r.escapes.is_empty() {
        line.push_str(",\"escapes\":");
        push_escapes(line, r.escapes);
    }
}

fn full_json(line: &mut String, r: &FullRecord<'_>) {
    let c = amber_tt6::classify(Dialect::Tt6e, r.opcode);
    let _ = write!(
        line,
        "{{\"i\":{},\"pc\":\"{:#x}\",\"op\":\"{:#010x}\"",
        r.index,
        r.pc(),
        r.opcode
    );
    if let Some(m) = amber_tt6::opcode::mnemonic(r.opcode) {
        let _ = write!(line, ",\"mnemonic\":\"{m}\"");
    }
    let _ = write!(line, ",\"class\":\"{}\",\"regs\":{{", c.name());
    let t = r.thread;
    let _ = write!(
        line,
        "\"srr0\":\"{:#x}\",\"srr1\":\"{:#x}\"",
        t.srr0.get(),
        t.srr1.get()
    );
    for (n, v) in t.r.iter().enumerate() {
        let _ = write!(line, ",\"r{n}\":\"{:#x}\"", v.get());
    }
    for (name, v) in [
        ("cr", t.cr),
        ("xer", t.xer),
        ("lr", t.lr),
        ("ctr", t.ctr),
        ("mq", t.mq),
        ("vrsave", t.vrsave),
    ] {
        let _ = write!(line, ",\"{name}\":\"{:#x}\"", v.get());
    }
    for (n, v) in r.float.fpregs.iter().enumerate() {
        let _ = write!(line, ",\"f{n}\":\"{:#018x}\"", v.get());
    }
    let _ = write!(line, ",\"fpscr\":\"{:#x}\"", r.float.fpscr.get());
    for (n, v) in r.vector.save_vr.iter().enumerate() {
        let _ = write!(line, ",\"v{n}\":\"0x");
        for w in v {
            let _ = write!(line, "{:08x}", w.get());
        }
        line.push('"');
    }
    let vscr = r.vector.save_vscr.get(3).map_or(0, |w| w.get());
    let _ = write!(
        line,
        ",\"vscr\":\"{vscr:#x}\",\"vrvalid\":\"{:#x}\"",
        r.vector.save_vrvalid.get()
    );
    if let Some(p) = r.pad {
        let _ = write!(line, ",\"pad\":\"{p:#x}\"");
    }
    line.push('}');
}

/// `tracekit dump`.
pub fn dump(format: Format, mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let bytes = input.bytes()?;
    let mut line = String::with_capacity(512);
    if format == Format::AmberFull {
        let reader = full_reader(bytes, ctx)?;
        for r in reader.records() {
            let r = r.map_err(CliError::format)?;
            line.clear();
            full_json(&mut line, &r);
            line.push_str("}\n");
            ctx.out.write_all(line.as_bytes())?;
            if r.index.is_multiple_of(1024) {
                ctx.progress.update(r.offset.0);
            }
        }
        ctx.progress.finish();
        return Ok(());
    }
    let reader = Tt6Reader::parse(bytes, dialect(format)).map_err(CliError::format)?;
    let mut records = reader.records();
    for r in records.by_ref() {
        let r = r.map_err(CliError::format)?;
        line.clear();
        record_json(&mut line, &r);
        line.push_str("}\n");
        ctx.out.write_all(line.as_bytes())?;
        if r.index.is_multiple_of(PROGRESS_EVERY) {
            ctx.progress.update(r.offset.0);
        }
    }
    let dangling = records.dangling_escapes();
    if !dangling.is_empty() {
        line.clear();
        line.push_str("{\"dangling_escapes\":");
        push_escapes(&mut line, dangling);
        line.push_str("}\n");
        ctx.out.write_all(line.as_bytes())?;
    }
    ctx.progress.finish();
    Ok(())
}

/// `tracekit validate`: every record must be complete. Dangling escapes at the end are
/// reported on stderr as a warning, not an error.
pub fn validate(format: Format, input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    if format == Format::AmberFull {
        let mut input = input;
        let bytes = input.bytes()?;
        let reader = full_reader(bytes, ctx)?;
        for r in reader.records() {
            r.map_err(CliError::format)?;
        }
        return Ok(());
    }
    // Streaming: constant memory whatever the size.
    let mut reader = Tt6StreamReader::from_reader(input.into_reader(), dialect(format))
        .map_err(CliError::format)?;
    let mut n = 0u64;
    while let Some(r) = reader.next_record() {
        r.map_err(CliError::format)?;
        n = n.wrapping_add(1);
        if n.is_multiple_of(PROGRESS_EVERY) {
            let pos = reader.position();
            ctx.progress.update(pos.0);
        }
    }
    let dangling = reader.dangling_escapes();
    if !dangling.is_empty() {
        let k = dangling.iter().count();
        writeln!(
            ctx.err,
            "warning: {k} escape record(s) after the last instruction"
        )?;
    }
    ctx.progress.finish();
    Ok(())
}

/// `tracekit convert FILE --to din`: Dinero IV din lines (0 read, 1 write, 2 fetch).
pub fn convert(format: Format, input: Input, to: &str, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    if to != "din" {
        return Err(CliError::Usage(format!(
            "cannot convert {format} to {to:?}; supported: din"
        )));
    }
    let mut din = DinWriter::new(&mut *ctx.out);
    if format == Format::AmberFull {
        let mut input = input;
        let bytes = input.bytes()?;
        let reader = match ctx.opts.record_size {
            Some(n) => {
                let size = RecordSize::from_bytes(n).map_err(CliError::format)?;
                FullReader::with_size(bytes, size)
            }
            None => FullReader::parse(bytes),
        }
        .map_err(CliError::format)?;
        for r in reader.records() {
            din.write_full(&r.map_err(CliError::format)?)?;
        }
        return Ok(());
    }
    let mut reader = Tt6StreamReader::from_reader(input.into_reader(), dialect(format))
        .map_err(CliError::format)?;
    while let Some(r) = reader.next_record() {
        din.write_record(&r.map_err(CliError::format)?)?;
    }
    Ok(())
}
