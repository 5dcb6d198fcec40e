//! `tracekit` commands for Intel DCFG-Trace files (`dcfg-trace`), and the glue between the
//! `dcfg-trace` crate's join (plain data) and the `dcfg` crate's model (`--dcfg FILE`).

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write};

use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges};
use dcfg_trace::join::{EdgeInfo, JoinProcess};
use dcfg_trace::read::{Event, ReadOptions, Reader, Trace};

use super::Ctx;
use crate::{CliError, EncodeArgs, Input};

fn options(ctx: &Ctx<'_>) -> ReadOptions {
    ReadOptions {
        lenient: ctx.opts.lenient,
    }
}

/// The DCFG of `--dcfg`, reduced to what the join needs, per process.
fn load_dcfg(ctx: &Ctx<'_>) -> Result<Option<Vec<JoinProcess>>, CliError> {
    let Some(path) = &ctx.opts.dcfg else {
        return Ok(None);
    };
    let d = dcfg::Dcfg::from_path(path).map_err(CliError::format)?;
    let mut out = Vec::new();
    for p in &d.processes {
        let blocks: HashMap<u64, (u64, u64)> = p
            .blocks()
            .map(|(img, b)| {
                (
                    b.id,
                    (
                        u64::from(b.num_instrs),
                        img.load_addr.wrapping_add(b.addr_offset),
                    ),
                )
            })
            .collect();
        let graph = d.graph(p.id);
        let edges = p
            .edges()
            .map(|e| {
                let info = EdgeInfo {
                    source: e.source,
                    target: e.target,
                    source_instrs: blocks.get(&e.source).map_or(0, |b| b.0),
                    target_addr: blocks.get(&e.target).map(|b| b.1),
                    target_symbol: graph
                        .as_ref()
                        .and_then(|g| g.block_symbol(e.target))
                        .map(|(s, o)| (s.to_owned(), o)),
                    counts_per_thread: e.counts.to_vec(),
                };
                (e.id, info)
            })
            .collect();
        out.push(JoinProcess { pid: p.id, edges });
    }
    Ok(Some(out))
}

#[derive(Default)]
struct ProcessSummary {
    pid: u64,
    threads: Vec<(u64, u64, u64, u64)>,
    dictionary: usize,
    dictionary_bytes: u64,
    transitions: usize,
    table_edges: usize,
    max_code: u8,
    lookup_entries: usize,
}

/// `tracekit info`: one pass over the file (no decoding); counts come from the chunk rows.
pub fn info(input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let mut r = Reader::from_reader(input.into_reader(), options(ctx));
    let mut procs: Vec<ProcessSummary> = Vec::new();
    let mut n = 0u64;
    while let Some(ev) = r.next_event().map_err(CliError::format)? {
        match ev {
            Event::Process(p) => procs.push(ProcessSummary {
                pid: p.pid,
                threads: Vec::new(),
                dictionary: p.dictionary.len(),
                dictionary_bytes: p.dictionary.byte_len(),
                transitions: p.table.rows().len(),
                table_edges: p.table.edge_count(),
                max_code: p.table.max_code_len(),
                lookup_entries: p.table.lookup_entries(),
            }),
            Event::Thread { thread, .. } => {
                if let Some(p) = procs.last_mut() {
                    p.threads.push((thread, 0, 0, 0));
                }
            }
            Event::Chunk(c) => {
                if let Some(t) = procs.last_mut().and_then(|p| p.threads.last_mut()) {
                    t.1 = t.1.saturating_add(1);
                    t.2 = t.2.saturating_add(c.edge_count);
                    t.3 = t.3.saturating_add(c.instr_count);
                }
                n = n.wrapping_add(1);
                if n.is_multiple_of(256) {
                    ctx.progress.update(r.offset().0);
                }
            }
            _ => {}
        }
    }
    ctx.progress.finish();
    let (major, minor) = r.version();
    let total = |f: fn(&(u64, u64, u64, u64)) -> u64| -> u64 {
        procs
            .iter()
            .flat_map(|p| &p.threads)
            .map(f)
            .fold(0, u64::saturating_add)
    };
    if ctx.json {
        let v = serde_json::json!({
            "format": "dcfg-trace",
            "version": format!("{}.{:02}", major.unwrap_or(0), minor.unwrap_or(0)),
            "processes": procs.iter().map(|p| serde_json::json!({
                "pid": p.pid,
                "dictionary_entries": p.dictionary,
                "dictionary_bytes": p.dictionary_bytes,
                "transitions": p.transitions,
                "table_edges": p.table_edges,
                "max_code_bits": p.max_code,
                "lookup_entries": p.lookup_entries,
                "threads": p.threads.iter().map(|t| serde_json::json!({
                    "thread": t.0, "chunks": t.1, "edges": t.2, "instructions": t.3,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "threads": procs.iter().map(|p| p.threads.len()).sum::<usize>(),
            "chunks": total(|t| t.1),
            "edges": total(|t| t.2),
            "instructions": total(|t| t.3),
        });
        writeln!(ctx.out, "{v}")?;
        return Ok(());
    }
    let out = &mut ctx.out;
    writeln!(
        out,
        "format:       dcfg-trace {}.{:02}",
        major.unwrap_or(0),
        minor.unwrap_or(0)
    )?;
    writeln!(out, "processes:    {}", procs.len())?;
    writeln!(
        out,
        "threads:      {}",
        procs.iter().map(|p| p.threads.len()).sum::<usize>()
    )?;
    writeln!(out, "chunks:       {}", total(|t| t.1))?;
    writeln!(out, "edges:        {}", total(|t| t.2))?;
    writeln!(out, "instructions: {}", total(|t| t.3))?;
    for p in &procs {
        writeln!(
            out,
            "process {}: dictionary {} entries ({} bytes), transition table {} rows over {} edges (codes up to {} bits, {} lookup entries)",
            p.pid,
            p.dictionary,
            p.dictionary_bytes,
            p.transitions,
            p.table_edges,
            p.max_code,
            p.lookup_entries
        )?;
        for t in &p.threads {
            writeln!(
                out,
                "  thread {}: {} chunks, {} edges, {} instructions",
                t.0, t.1, t.2, t.3
            )?;
        }
    }
    Ok(())
}

fn write_list(out: &mut dyn Write, name: &str, items: &[u64]) -> std::io::Result<()> {
    write!(out, ",\"{name}\":[")?;
    let mut line = String::with_capacity(items.len().saturating_mul(6));
    for (i, e) in items.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(&e.to_string());
    }
    out.write_all(line.as_bytes())?;
    out.write_all(b"]")
}

/// Writes `,"name":[…]` with the chunk's edges (or their target blocks), decoding in
/// batches so that a chunk of any length is written in bounded memory.
fn write_decoded(
    out: &mut dyn Write,
    name: &str,
    c: &dcfg_trace::read::Chunk<'_>,
    map: Option<&JoinProcess>,
) -> Result<(), CliError> {
    write!(out, ",\"{name}\":[")?;
    let mut first = true;
    let mut io_err: Option<std::io::Error> = None;
    let mut unknown: Option<dcfg_trace::join::UnknownEdge> = None;
    let mut line = String::new();
    let mut buf = Vec::new();
    c.for_each_batch(
        1 << 14,
        |batch| {
            if io_err.is_some() || unknown.is_some() {
                return;
            }
            line.clear();
            for &e in batch {
                if !first {
                    line.push(',');
                }
                first = false;
                let v = match map {
                    None => e,
                    Some(m) => match m.blocks(&[e]) {
                        Ok(b) => b.first().copied().unwrap_or(0),
                        Err(u) => {
                            unknown = Some(u);
                            return;
                        }
                    },
                };
                line.push_str(&v.to_string());
            }
            if let Err(e) = out.write_all(line.as_bytes()) {
                io_err = Some(e);
            }
        },
        &mut buf,
    )
    .map_err(CliError::format)?;
    if let Some(e) = io_err {
        return Err(e.into());
    }
    if let Some(u) = unknown {
        return Err(CliError::Failed(format!(
            "{u} (thread {} chunk {})",
            c.thread, c.index
        )));
    }
    out.write_all(b"]")?;
    Ok(())
}

/// `tracekit dump`: one JSON line per chunk, streaming (one chunk's text in memory, edges
/// written in batches); with `--dcfg FILE`, the target blocks of the edges too.
pub fn dump(input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let dcfg = load_dcfg(ctx)?;
    let mut r = Reader::from_reader(input.into_reader(), options(ctx));
    let mut edges = Vec::new();
    while let Some(ev) = r.next_event().map_err(CliError::format)? {
        let Event::Chunk(c) = ev else { continue };
        let pid = c.process.pid;
        let model = match &dcfg {
            None => None,
            Some(d) => Some(d.iter().find(|p| p.pid == pid).ok_or_else(|| {
                CliError::Failed(format!("process {pid} of the trace is not in the DCFG"))
            })?),
        };
        // Decode before writing, so that a bad chunk leaves no partial line: into a buffer
        // for ordinary chunks, or (huge chunks) in a first pass that keeps nothing.
        let small = c.edge_count <= 1 << 22;
        if small {
            edges.clear();
            c.decode_into(&mut edges).map_err(CliError::format)?;
        } else {
            let mut scratch = Vec::new();
            c.for_each_batch(1 << 14, |_| {}, &mut scratch)
                .map_err(CliError::format)?;
        }
        write!(
            ctx.out,
            "{{\"pid\":{pid},\"thread\":{},\"chunk\":{},\"preceding_instr_count\":{},\"instr_count\":{},\"edge_count\":{}",
            c.thread, c.index, c.preceding_instr_count, c.instr_count, c.edge_count
        )?;
        if small {
            write_list(ctx.out, "edges", &edges)?;
            if let Some(m) = model {
                let blocks = m.blocks(&edges).map_err(|e| {
                    CliError::Failed(format!("{e} (thread {} chunk {})", c.thread, c.index))
                })?;
                write_list(ctx.out, "blocks", &blocks)?;
            }
        } else {
            write_decoded(ctx.out, "edges", &c, None)?;
            if let Some(m) = model {
                write_decoded(ctx.out, "blocks", &c, Some(m))?;
            }
        }
        ctx.out.write_all(b"}\n")?;
        ctx.progress.update(r.offset().0);
    }
    ctx.progress.finish();
    Ok(())
}

/// `tracekit validate`: decodes every chunk; chunk instruction counts that do not chain are
/// warnings. With `--dcfg FILE`, also the join checks (edges known, `INSTR_COUNT` per
/// chunk, per-edge counts against `COUNT_PER_THREAD`), which fail validation.
pub fn validate(mut input: Input, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let opts = options(ctx);
    if let Some(dcfg) = load_dcfg(ctx)? {
        let bytes = input.bytes()?;
        let trace = Trace::parse(bytes, opts).map_err(CliError::format)?;
        warn_gaps(&trace, ctx)?;
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        let report = dcfg_trace::join::check(&trace, &dcfg, workers).map_err(CliError::format)?;
        for m in report.mismatches.iter().take(20) {
            writeln!(ctx.err, "mismatch: {m}")?;
        }
        if let Some(first) = report.mismatches.first() {
            return Err(CliError::Failed(format!(
                "{} mismatch(es) between the trace and the DCFG; the first: {first}",
                report.mismatches.len()
            )));
        }
        return Ok(());
    }
    let mut r = Reader::from_reader(input.into_reader(), opts);
    let mut buf = Vec::new();
    let mut last: Option<(u64, u64, u64)> = None;
    while let Some(ev) = r.next_event().map_err(CliError::format)? {
        let Event::Chunk(c) = ev else {
            last = None;
            continue;
        };
        if let Some((pid, thread, end)) = last
            && pid == c.process.pid
            && thread == c.thread
            && end != c.preceding_instr_count
        {
            writeln!(
                ctx.err,
                "warning: process {pid} thread {thread} chunk {}: PRECEDING_INSTR_COUNT {} does not continue the previous chunk ({end}) at offset {:#x}",
                c.index, c.preceding_instr_count, c.offset.0
            )?;
        }
        last = Some((
            c.process.pid,
            c.thread,
            c.preceding_instr_count.saturating_add(c.instr_count),
        ));
        c.for_each_batch(1 << 16, |_| {}, &mut buf)
            .map_err(CliError::format)?;
        ctx.progress.update(r.offset().0);
    }
    ctx.progress.finish();
    Ok(())
}

fn warn_gaps(trace: &Trace<'_>, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    for p in &trace.processes {
        for t in &p.threads {
            for g in t.chain_gaps() {
                writeln!(
                    ctx.err,
                    "warning: process {} thread {}: {g}",
                    p.process.pid, t.thread
                )?;
            }
        }
    }
    Ok(())
}

#[derive(serde::Deserialize)]
struct EdgeLine {
    #[serde(default)]
    pid: trace_core::json::JsonU64,
    #[serde(default)]
    thread: trace_core::json::JsonU64,
    edges: Vec<trace_core::json::JsonU64>,
}

/// `tracekit encode`: JSON Lines edge lists plus a DCFG → a DCFG-Trace file.
///
/// Each line is `{"pid":…,"thread":…,"edges":[…]}` (pid and thread default to 0; lines of
/// the same thread are concatenated). Instruction counts per edge come from the DCFG
/// (`NUM_INSTRS` of the source block); without `--dcfg`, each edge counts one instruction.
pub fn encode(args: &EncodeArgs, ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    let reader: Box<dyn BufRead> = if args.edges == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(&args.edges).map_err(|e| {
            CliError::io(
                format!(
                    "cannot open {}",
                    std::path::Path::new(&args.edges).display()
                ),
                e,
            )
        })?;
        Box::new(std::io::BufReader::new(f))
    };
    let mut procs: BTreeMap<u64, BTreeMap<u64, Vec<u64>>> = BTreeMap::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let l: EdgeLine = serde_json::from_str(&line).map_err(|e| {
            CliError::Failed(format!("edge list line {}: {e}", i.saturating_add(1)))
        })?;
        procs
            .entry(l.pid.0)
            .or_default()
            .entry(l.thread.0)
            .or_default()
            .extend(l.edges.iter().map(|e| e.0));
    }
    let dcfg = load_dcfg(ctx)?;
    if dcfg.is_none() {
        writeln!(
            ctx.err,
            "warning: no --dcfg: every edge counts as one instruction"
        )?;
    }
    let input: Vec<ProcessEdges> = procs
        .into_iter()
        .map(|(pid, threads)| ProcessEdges {
            pid,
            threads: threads
                .into_iter()
                .map(|(thread, edges)| ThreadEdges { thread, edges })
                .collect(),
        })
        .collect();
    let opts = EncodeOptions {
        chunk_instrs: args.chunk_instrs,
        fold_chains: args.fold_chains,
        repeats: args.repeats,
        dictionary: args.dictionary,
    };
    let file = dcfg_trace::encode::encode(
        &input,
        |pid, e| match &dcfg {
            None => 1,
            Some(d) => d
                .iter()
                .find(|p| p.pid == pid)
                .and_then(|p| p.edges.get(&e))
                .map_or(0, |i| i.source_instrs),
        },
        &opts,
    );
    file.write_to(&mut *ctx.out)?;
    Ok(())
}
