//! `tracekit` commands for the dcfg format (the `dcfg` crate).

use dcfg::{Dcfg, DotOptions, Graph};

use super::Ctx;
use crate::{CliError, Input};

/// Reads the whole DCFG as a stream: the JSON is never held whole, so memory stays at
/// about the size of the model (a file is read again from its path rather than through
/// its memory map, whose pages would count too).
fn load(input: Input, ctx: &mut Ctx<'_>) -> Result<Dcfg, CliError> {
    let total = input.file_len();
    let d = match input.path() {
        Some(path) => Dcfg::from_path(path),
        None => Dcfg::from_reader(input.into_reader()),
    }
    .map_err(CliError::format)?;
    if let Some(t) = total {
        ctx.progress.update(t);
    }
    ctx.progress.finish();
    Ok(d)
}

struct Counts {
    blocks: usize,
    routines: usize,
    loops: usize,
}

fn counts(p: &dcfg::Process) -> Counts {
    let mut c = Counts {
        blocks: 0,
        routines: 0,
        loops: 0,
    };
    for i in p.images() {
        c.blocks = c.blocks.saturating_add(i.basic_blocks().len());
        c.routines = c.routines.saturating_add(i.routines().len());
        c.loops = i
            .routines()
            .iter()
            .fold(c.loops, |a, r| a.saturating_add(r.loops().len()));
    }
    c
}

/// `tracekit info`.
pub fn info(input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let d = load(input, ctx)?;
    if ctx.json {
        // Keys in the documented order (serde_json's map would sort them).
        let mut procs = Vec::new();
        for p in &d.processes {
            let c = counts(p);
            let instr = p
                .instr_count
                .map_or_else(|| "null".to_owned(), |n| n.to_string());
            procs.push(format!(
                "{{\"pid\":{},\"threads\":{},\"instr_count\":{},\"images\":{},\"basic_blocks\":{},\"edges\":{},\"routines\":{},\"loops\":{}}}",
                p.id,
                p.threads(),
                instr,
                p.images().len(),
                c.blocks,
                p.edge_count(),
                c.routines,
                c.loops
            ));
        }
        writeln!(
            ctx.out,
            "{{\"format\":\"dcfg\",\"version\":{},\"processes\":[{}]}}",
            json_str(&d.version()),
            procs.join(",")
        )?;
        return Ok(());
    }
    let out = &mut *ctx.out;
    writeln!(out, "format: dcfg (Intel DCFG JSON)")?;
    writeln!(out, "version: {}", d.version())?;
    writeln!(
        out,
        "file names: {}, edge types: {}, special nodes: {}",
        d.file_names.as_ref().map_or(0, Vec::len),
        d.edge_types.as_ref().map_or(0, Vec::len),
        d.special_nodes.as_ref().map_or(0, Vec::len)
    )?;
    writeln!(out, "processes: {}", d.processes.len())?;
    for p in &d.processes {
        let c = counts(p);
        let instr = p
            .instr_count
            .map_or_else(|| "unknown".to_owned(), |n| n.to_string());
        writeln!(
            out,
            "process {}: {} thread(s), {} instructions, {} image(s), {} basic blocks, {} edges, {} routines, {} loops",
            p.id,
            p.threads(),
            instr,
            p.images().len(),
            c.blocks,
            p.edge_count(),
            c.routines,
            c.loops
        )?;
        for img in p.images() {
            let name = img.file_name_id.and_then(|f| d.file_name(f)).unwrap_or("?");
            writeln!(
                out,
                "  image {}: {:#x}..{:#x} {}: {} blocks, {} routines",
                img.id,
                img.load_addr,
                img.load_addr.saturating_add(img.size),
                name,
                img.basic_blocks().len(),
                img.routines().len()
            )?;
        }
    }
    let findings = d.validate();
    if !findings.is_empty() {
        writeln!(
            out,
            "consistency: {} problem(s), run `tracekit validate`",
            findings.len()
        )?;
    }
    Ok(())
}

/// `tracekit dump`: one JSON line per basic block.
pub fn dump(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    // A file is read as a stream; only a damaged one is then held whole, so that it still
    // gives every complete block before the error.
    let first = match input.path() {
        Some(path) => Dcfg::from_path(path),
        None => Dcfg::parse(input.bytes()?),
    };
    let (d, error) = match first {
        Ok(d) => (d, None),
        Err(e) => {
            let bytes = input.bytes()?;
            match e
                .offset()
                .and_then(|off| Dcfg::recover_prefix(bytes, off.0))
            {
                Some(d) => (d, Some(e)),
                None => return Err(CliError::format(e)),
            }
        }
    };
    ctx.progress.finish();
    for p in &d.processes {
        let g = Graph::new(&d, p);
        for (img, b) in p.blocks() {
            let symbol = g.block_symbol(b.id).map(|(s, off)| {
                if off == 0 {
                    s.to_owned()
                } else {
                    format!("{s}+{off:#x}")
                }
            });
            let source = g.block_source(b.id).map(|(f, l)| format!("{f}:{l}"));
            let opt_str = |v: Option<String>| v.map_or_else(|| "null".to_owned(), |s| json_str(&s));
            writeln!(
                ctx.out,
                "{{\"pid\":{},\"image\":{},\"id\":{},\"addr\":\"{:#x}\",\"offset\":\"{:#x}\",\"size\":{},\"instrs\":{},\"count\":{},\"symbol\":{},\"source\":{}}}",
                p.id,
                img.id,
                b.id,
                img.load_addr.wrapping_add(b.addr_offset),
                b.addr_offset,
                b.size,
                b.num_instrs,
                g.block_count(b.id),
                opt_str(symbol),
                opt_str(source)
            )?;
        }
    }
    match error {
        Some(e) => Err(CliError::format(e)),
        None => Ok(()),
    }
}

/// `tracekit validate`: every finding on stderr, the first in the error.
pub fn validate(input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let d = load(input, ctx)?;
    let findings = d.validate();
    let Some(first) = findings.first() else {
        return Ok(());
    };
    for f in &findings {
        writeln!(ctx.err, "{f}")?;
    }
    Err(CliError::Failed(format!(
        "{} consistency problem(s); the first: {first}",
        findings.len()
    )))
}

/// `tracekit dot`.
pub fn dot(input: Input, args: &crate::DotArgs, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let d = load(input, ctx)?;
    let opts = DotOptions {
        process: args.process,
        image: args.image,
        routine: args.routine,
        loop_head: args.loop_id,
        hide_zero_edges: args.hide_zero,
        hide_libraries: args.hide_libraries,
    };
    if let Some(pid) = opts.process
        && d.process(pid).is_none()
    {
        return Err(CliError::Failed(format!("no process {pid} in the DCFG")));
    }
    let graphs: Vec<Graph<'_>> = d
        .processes
        .iter()
        .filter(|p| opts.process.is_none_or(|pid| p.id == pid))
        .map(|p| Graph::new(&d, p))
        .collect();
    if let Some(id) = opts.image
        && !graphs.iter().any(|g| g.image(id).is_some())
    {
        return Err(CliError::Failed(format!("no image {id} in the DCFG")));
    }
    if let Some(id) = opts.routine
        && !graphs.iter().any(|g| g.routine(id).is_some())
    {
        return Err(CliError::Failed(format!(
            "no routine with entry block {id} in the DCFG"
        )));
    }
    if let Some(id) = opts.loop_head
        && !graphs.iter().any(|g| g.loop_by_head(id).is_some())
    {
        return Err(CliError::Failed(format!(
            "no loop with head block {id} in the DCFG"
        )));
    }
    drop(graphs);
    d.write_dot(&mut *ctx.out, &opts)?;
    Ok(())
}

/// `tracekit loops` (CSV).
pub fn loops(input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let d = load(input, ctx)?;
    d.write_loops_csv(&mut *ctx.out)?;
    Ok(())
}

/// A JSON string literal.
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "null".to_owned())
}
