//! `tracekit` commands for GDB tracepoint files (`tsave` / `target tfile`).
//!
//! `dump` prints one JSON line per frame:
//! `{"i":0,"offset":2145,"tracepoint":1,"regs":{"rax":"0x0","rip":"0x401136"},"mem":[{"addr":"0x404028","len":4,"data":"2a000000"}],"tsv":{"1":42}}`.
//! `regs` are named by the file's target description (registers up to 64 bits as `0x` hex
//! integers decoded in target byte order, wider ones as hex bytes in target order);
//! without a description, `regs_raw` holds the register block as hex; both are absent for
//! a frame without an `R` block. `tsv` holds the last value per variable. `--big-endian`
//! reads a big-endian target (the file does not say; otherwise the description's
//! architecture decides where it can, else little-endian).

use std::fmt::Write as _;

use gdb_tfile::{
    Block, Endian, Frame, FrameIndex, ReadOptions, StopReason, StreamReader, TargetDescription,
    TraceFile,
};

use super::Ctx;
use crate::{CliError, Input};

/// Progress is reported every this many frames.
const PROGRESS_EVERY: u64 = 1 << 12;

fn read_options(ctx: &Ctx<'_>) -> ReadOptions {
    ReadOptions {
        endian: ctx.opts.big_endian.then_some(Endian::Big),
    }
}

fn open<'a>(bytes: &'a [u8], ctx: &mut Ctx<'_>) -> Result<TraceFile<'a>, CliError> {
    let file = TraceFile::parse(bytes, read_options(ctx)).map_err(CliError::format)?;
    warn(file.warnings(), ctx)?;
    Ok(file)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `tracekit info`.
pub fn info(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let bytes = input.bytes()?;
    let file = open(bytes, ctx)?;
    let (index, err) = FrameIndex::new_partial(&file);
    ctx.progress.finish();
    if let Some(e) = err {
        return Err(CliError::format(e));
    }
    let d = file.description();
    let layout = file.layout();
    let counts = index.counts_by_tracepoint();
    let endian = match layout.endian {
        Endian::Little => "little",
        Endian::Big => "big",
    };
    let td = file.tdesc();
    if ctx.json {
        let status = d.status.as_ref().map(|s| {
            serde_json::json!({
                "running": s.running,
                "stop_reason": s.stop_reason.key(),
                "stop_description": s.stop_description.as_deref().map(lossy),
                "stopping_tracepoint": s.stopping_tracepoint,
                "frames": s.frames,
                "created": s.created,
                "free": s.free,
                "size": s.size,
                "disconnected": s.disconnected,
                "circular": s.circular,
                "start_time": s.start_time,
                "stop_time": s.stop_time,
                "notes": s.notes.as_deref().map(lossy),
                "username": s.username.as_deref().map(lossy),
                "unknown": s.unknown.iter().map(|(k, v)| serde_json::json!([k, v])).collect::<Vec<_>>(),
            })
        });
        let tps: Vec<_> = d
            .tracepoints
            .iter()
            .map(|t| {
                serde_json::json!({
                    "number": t.number,
                    "address": format!("{:#x}", t.address),
                    "enabled": t.enabled,
                    "step_count": t.step_count,
                    "pass_count": t.pass_count,
                    "fast": t.fast.is_some(),
                    "static": t.is_static,
                    "condition": t.condition.as_deref().map(trace_core::hex::encode),
                    "actions": t.actions,
                    "step_actions": t.step_actions,
                    "at": t.at().map(lossy),
                    "cond": t.cond_source().map(lossy),
                    "cmds": t.cmds().map(lossy).collect::<Vec<_>>(),
                    "hits": t.hits(),
                    "usage": t.usage(),
                })
            })
            .collect();
        let tsvs: Vec<_> = d
            .tsvs
            .iter()
            .map(|v| {
                serde_json::json!({
                    "number": v.number,
                    "name": lossy(&v.name),
                    "initial": v.initial,
                    "builtin": v.builtin != 0,
                })
            })
            .collect();
        let per_tp: serde_json::Map<String, serde_json::Value> = counts
            .iter()
            .map(|(tp, n)| (tp.to_string(), (*n).into()))
            .collect();
        let v = serde_json::json!({
            "format": "gdb-tfile",
            "register_size": layout.register_size,
            "architecture": td.and_then(|t| t.architecture.clone()),
            "osabi": td.and_then(|t| t.osabi.clone()),
            "registers": td.map(|t| t.registers.len()),
            "byte_order": endian,
            "status": status,
            "tracepoints": tps,
            "tsvs": tsvs,
            "frames": index.len(),
            "frames_per_tracepoint": per_tp,
            "warnings": file.warnings().iter().map(ToString::to_string).collect::<Vec<_>>(),
        });
        writeln!(ctx.out, "{v}")?;
        return Ok(());
    }
    let big_flag = ctx.opts.big_endian;
    let out = &mut *ctx.out;
    writeln!(out, "format: gdb-tfile (GDB tracepoint file)")?;
    writeln!(
        out,
        "register block: {:#x} ({}) bytes",
        layout.register_size, layout.register_size
    )?;
    match td {
        Some(t) => writeln!(
            out,
            "architecture: {} ({}), {} registers in the target description",
            t.architecture.as_deref().unwrap_or("unknown"),
            t.osabi.as_deref().unwrap_or("no OS ABI"),
            t.registers.len()
        )?,
        None => writeln!(out, "architecture: unknown (no target description)")?,
    }
    let source = if big_flag {
        "--big-endian"
    } else if td.and_then(TargetDescription::endian).is_some() {
        "from the architecture"
    } else {
        "default; the file does not say"
    };
    writeln!(out, "byte order: {endian} ({source})")?;
    match &d.status {
        None => writeln!(out, "status: none")?,
        Some(s) => {
            let mut line = format!(
                "status: {}, {}",
                if s.running { "running" } else { "not running" },
                s.stop_reason.describe()
            );
            if let Some(desc) = &s.stop_description {
                let _ = write!(line, " ({})", lossy(desc));
            }
            if matches!(s.stop_reason, StopReason::PassCount | StopReason::Error) {
                let _ = write!(line, ", tracepoint {}", s.stopping_tracepoint);
            }
            writeln!(out, "{line}")?;
            let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
            writeln!(
                out,
                "  frames {}, created {}, buffer {} bytes free of {}",
                opt(s.frames),
                opt(s.created),
                opt(s.free),
                opt(s.size)
            )?;
            if s.disconnected.is_some_and(|v| v != 0) || s.circular.is_some_and(|v| v != 0) {
                writeln!(
                    out,
                    "  disconnected tracing {}, circular buffer {}",
                    opt(s.disconnected),
                    opt(s.circular)
                )?;
            }
            if let (Some(a), b) = (s.start_time, s.stop_time) {
                writeln!(out, "  start time {a} us, stop time {}", opt(b))?;
            }
            if let Some(u) = &s.username {
                writeln!(out, "  user {:?}", lossy(u))?;
            }
            if let Some(n) = &s.notes {
                writeln!(out, "  notes {:?}", lossy(n))?;
            }
            for (k, v) in &s.unknown {
                writeln!(out, "  unknown key {k}:{v}")?;
            }
        }
    }
    writeln!(out, "tracepoints: {}", d.tracepoints.len())?;
    for t in &d.tracepoints {
        let mut line = format!(
            "  {} at {:#x}: {}, step {}, pass {}",
            t.number,
            t.address,
            if t.enabled { "enabled" } else { "disabled" },
            t.step_count,
            t.pass_count
        );
        if t.fast.is_some() {
            line.push_str(", fast");
        }
        if t.is_static {
            line.push_str(", static");
        }
        if let Some(c) = &t.condition {
            let _ = write!(line, ", condition of {} bytes", c.len());
        }
        if !t.status.is_empty() {
            let _ = write!(line, ", hits {} (usage {} bytes)", t.hits(), t.usage());
            if let (Some(h), Some(u)) = (t.hits_decimal(), t.usage_decimal()) {
                let _ = write!(line, " [as gdbserver's decimal: {h} hits, {u} bytes]");
            }
        }
        writeln!(out, "{line}")?;
        if let Some(at) = t.at() {
            writeln!(out, "    at: {}", lossy(at))?;
        }
        if let Some(c) = t.cond_source() {
            writeln!(out, "    cond: {}", lossy(c))?;
        }
        for a in &t.actions {
            writeln!(out, "    action: {a}")?;
        }
        for a in &t.step_actions {
            writeln!(out, "    while-stepping action: {a}")?;
        }
        for c in t.cmds() {
            writeln!(out, "    cmd: {}", lossy(c))?;
        }
    }
    writeln!(out, "trace state variables: {}", d.tsvs.len())?;
    for v in &d.tsvs {
        writeln!(
            out,
            "  {} ${} = {}{}",
            v.number,
            lossy(&v.name),
            v.initial,
            if v.builtin != 0 { " (builtin)" } else { "" }
        )?;
    }
    let per: Vec<String> = counts
        .iter()
        .map(|(tp, n)| format!("tracepoint {tp}: {n}"))
        .collect();
    writeln!(out, "frames: {} ({})", index.len(), per.join(", "))?;
    for w in file.warnings() {
        writeln!(out, "warning: {w}")?;
    }
    Ok(())
}

/// Register names (JSON-escaped once) and positions.
struct RegFmt {
    regs: Vec<(String, usize, usize)>,
}

impl RegFmt {
    fn new(td: &TargetDescription) -> RegFmt {
        RegFmt {
            regs: td
                .registers
                .iter()
                .map(|r| {
                    let key = serde_json::to_string(&r.name).unwrap_or_else(|_| "\"?\"".into());
                    (key, r.offset, r.size())
                })
                .collect(),
        }
    }
}

fn push_reg_value(line: &mut String, bytes: &[u8], endian: Endian) {
    if bytes.len() <= 8 {
        let v = gdb_tfile::RegisterValue { bytes, endian }
            .as_u64()
            .unwrap_or(0);
        let _ = write!(line, "\"{v:#x}\"");
    } else {
        line.push('"');
        trace_core::hex::encode_to(line, bytes);
        line.push('"');
    }
}

/// Whether to read through the streaming reader (constant memory): stdin and compressed
/// inputs; plain files are memory-mapped and read in place.
fn streaming(input: &Input) -> bool {
    input.path().is_none() || input.compression().is_some()
}

/// Appends the JSON line of one frame to `line` (cleared first).
fn frame_json(
    line: &mut String,
    f: &Frame<'_>,
    regfmt: Option<&RegFmt>,
    tsvs: &mut Vec<(i32, i64)>,
) -> Result<(), CliError> {
    line.clear();
    let _ = write!(
        line,
        "{{\"i\":{},\"offset\":{},\"tracepoint\":{}",
        f.index, f.offset.0, f.tracepoint
    );
    // Blocks are checked before anything of the frame is printed.
    let mut regs = None;
    tsvs.clear();
    for b in f.blocks() {
        match b.map_err(CliError::format)? {
            Block::Registers { data, .. } => {
                regs.get_or_insert(data);
            }
            Block::Tsv { number, value, .. } => match tsvs.iter_mut().find(|(n, _)| *n == number) {
                Some(e) => e.1 = value,
                None => tsvs.push((number, value)),
            },
            Block::Memory { .. } => {}
        }
    }
    if let Some(r) = regs {
        match regfmt {
            Some(fmt) => {
                line.push_str(",\"regs\":{");
                let mut first = true;
                for (key, off, size) in &fmt.regs {
                    let Some(bytes) = r.get(*off..off.saturating_add(*size)) else {
                        continue;
                    };
                    if !first {
                        line.push(',');
                    }
                    first = false;
                    line.push_str(key);
                    line.push(':');
                    push_reg_value(line, bytes, f.layout.endian);
                }
                line.push('}');
            }
            None => {
                line.push_str(",\"regs_raw\":\"");
                trace_core::hex::encode_to(line, r);
                line.push('"');
            }
        }
    }
    line.push_str(",\"mem\":[");
    let mut first = true;
    for b in f.blocks().flatten() {
        if let Block::Memory { address, data, .. } = b {
            if !first {
                line.push(',');
            }
            first = false;
            let _ = write!(
                line,
                "{{\"addr\":\"{address:#x}\",\"len\":{},\"data\":\"",
                data.len()
            );
            trace_core::hex::encode_to(line, data);
            line.push_str("\"}");
        }
    }
    line.push_str("],\"tsv\":{");
    for (i, (n, v)) in tsvs.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        let _ = write!(line, "\"{n}\":{v}");
    }
    line.push_str("}}\n");
    Ok(())
}

fn warn(warnings: &[gdb_tfile::Warning], ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    for w in warnings {
        writeln!(ctx.err, "warning: {w}")?;
    }
    Ok(())
}

/// `tracekit dump`.
pub fn dump(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let mut line = String::with_capacity(4096);
    let mut tsvs: Vec<(i32, i64)> = Vec::new();
    if streaming(&input) {
        let mut s = StreamReader::from_reader(input.into_reader(), read_options(ctx))
            .map_err(CliError::format)?;
        warn(s.warnings(), ctx)?;
        let regfmt = s.tdesc().map(RegFmt::new);
        while let Some(f) = s.next_frame().map_err(CliError::format)? {
            frame_json(&mut line, &f, regfmt.as_ref(), &mut tsvs)?;
            ctx.out.write_all(line.as_bytes())?;
            if f.index.is_multiple_of(PROGRESS_EVERY) {
                ctx.progress.update(f.offset.0);
            }
        }
    } else {
        let bytes = input.bytes()?;
        let file = open(bytes, ctx)?;
        let regfmt = file.tdesc().map(RegFmt::new);
        for f in file.frames() {
            let f = f.map_err(CliError::format)?;
            frame_json(&mut line, &f, regfmt.as_ref(), &mut tsvs)?;
            ctx.out.write_all(line.as_bytes())?;
            if f.index.is_multiple_of(PROGRESS_EVERY) {
                ctx.progress.update(f.offset.0);
            }
        }
    }
    ctx.progress.finish();
    Ok(())
}

fn check_blocks(f: &Frame<'_>, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    for b in f.blocks() {
        b.map_err(CliError::format)?;
    }
    if f.index.is_multiple_of(PROGRESS_EVERY) {
        ctx.progress.update(f.offset.0);
    }
    Ok(())
}

/// `tracekit validate`: the description, every frame and every block.
pub fn validate(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    if streaming(&input) {
        let mut s = StreamReader::from_reader(input.into_reader(), read_options(ctx))
            .map_err(CliError::format)?;
        warn(s.warnings(), ctx)?;
        while let Some(f) = s.next_frame().map_err(CliError::format)? {
            check_blocks(&f, ctx)?;
        }
    } else {
        let bytes = input.bytes()?;
        let file = open(bytes, ctx)?;
        for f in file.frames() {
            check_blocks(&f.map_err(CliError::format)?, ctx)?;
        }
    }
    ctx.progress.finish();
    Ok(())
}
