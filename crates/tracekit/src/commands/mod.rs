//! Every command's implementation. `info`, `dump` and `validate` are written once, over the
//! format registry (`trace-registry`); `dot`, `loops`, `convert` and `encode` are the few
//! commands that belong to one format.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use dcfg_trace::encode::{EncodeOptions, ProcessEdges, ThreadEdges};
use trace_core::Located;
use trace_registry::formats::{amber, dcfg as dcfg_handler, dcfg_trace as dcfg_trace_handler};
use trace_registry::steps::Isa;
use trace_registry::stretches::Stretches;
use trace_registry::{Ctx, Handler, Info, Input, Options, Source};
use trace_sinks::JsonLines;
use trace_sinks::parquet::{Compression, Dataset, Origin, ParquetOptions};

use crate::{CliError, DotArgs, EncodeArgs, ExportArgs, Progress};

pub mod args;
pub mod bbv;
pub mod calls;
pub mod diff;
pub mod find;
pub mod gdbserver;
pub mod mem;
pub mod origin;
pub mod record;
pub mod regions;
pub mod serve;
pub mod simpoint;
pub mod state;
pub mod to_tenet;
pub mod to_tfile;
pub mod xref;

/// The rule of every command that writes files: an existing output is an error unless
/// `--force` (as `export` says of an existing dataset folder).
///
/// # Errors
///
/// `path` exists and `force` is false (exit 1, nothing written).
pub fn refuse_existing(path: &std::path::Path, force: bool) -> Result<(), CliError> {
    if force || std::fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    Err(CliError::io(
        format!("cannot write {} (--force replaces it)", path.display()),
        std::io::Error::from(std::io::ErrorKind::AlreadyExists),
    ))
}

/// Creates one of several outputs a sink opens as it goes (a `.bb` or Tenet file per
/// thread), under the overwrite rule of [`refuse_existing`]: the sink sees an `io::Error`,
/// and the typed refusal is kept in `existing` for the command to return instead.
pub(crate) fn create_output(
    path: &std::path::Path,
    force: bool,
    existing: &mut Option<CliError>,
) -> std::io::Result<std::io::BufWriter<trace_registry::output::AtomicFile>> {
    if let Err(e) = refuse_existing(path, force) {
        let message = e.to_string();
        *existing = Some(e);
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            message,
        ));
    }
    let file = trace_registry::output::AtomicFile::create(path).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
    })?;
    Ok(std::io::BufWriter::new(file))
}

/// The commands every format answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Summary of the file (`--json` for machine-readable output).
    Info,
    /// One JSON line per record.
    Dump,
    /// Full check; `ok` or the first error.
    Validate,
}

/// A registry context whose progress goes to `progress` and diagnostics to `err`.
fn ctx<'a>(options: &'a Options, progress: &'a mut Progress, err: &'a mut dyn Write) -> Ctx<'a> {
    Ctx::new(options)
        .on_progress(|p| progress.update(p))
        .on_diagnostic(|line| {
            let _ = writeln!(err, "{line}");
        })
}

/// `tracekit info`: the summary as text, or as one JSON line with `--json`.
///
/// # Errors
///
/// The input cannot be read or is not valid for its format.
pub fn info(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    json: bool,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let info = handler.info(&mut input, &mut ctx(options, &mut progress, err))?;
    progress.finish();
    if json {
        writeln!(out, "{}", info.to_json())?;
    } else {
        out.write_all(info.to_text().as_bytes())?;
    }
    Ok(())
}

/// `tracekit dump` (and `merge`): every record as a JSON line; on a damaged input, every
/// complete record and then the error.
///
/// # Errors
///
/// The input cannot be read, or is damaged after the records written.
pub fn dump(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    mut progress: Progress,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let mut notes = Vec::new();
    let result = {
        let mut ctx = ctx(options, &mut progress, &mut *err);
        let mut records = handler.records(&mut input, &mut ctx)?;
        let mut sink = JsonLines::new(&mut *out, records.tables());
        let mut n = 0u64;
        let result = loop {
            match records.next_record() {
                None => break Ok(()),
                Some(Err(e)) => break Err(e),
                Some(Ok(r)) => sink.write(r.table, r.row())?,
            }
            n = n.wrapping_add(1);
            if n.is_multiple_of(4096) {
                ctx.progress(records.position());
            }
        };
        sink.flush()?;
        notes.extend(records.finish().iter().map(ToString::to_string));
        result
    };
    progress.finish();
    for note in notes {
        writeln!(err, "{note}")?;
    }
    Ok(result?)
}

/// `tracekit export`: every record into a Parquet dataset at `args.output`, written under a
/// temporary name and renamed when complete. On a damaged input the partial output is
/// removed, or with `--partial` kept and marked incomplete; either way the error is
/// returned (exit 1). Prints one line per table on `err` (unless `quiet`): rows, files,
/// bytes.
///
/// # Errors
///
/// The input cannot be read or is damaged, or the dataset cannot be written.
pub fn export(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    args: &ExportArgs,
    mut progress: Progress,
    quiet: bool,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, usize::from),
        |n| usize::try_from(n).unwrap_or(1),
    );
    let parquet_options = ParquetOptions {
        compression: match args.compression.as_str() {
            "snappy" => Compression::Snappy,
            "none" => Compression::None,
            _ => Compression::Zstd,
        },
        rows_per_file: args.rows_per_file,
        row_group_rows: usize::try_from(args.row_group_rows).unwrap_or(usize::MAX),
        threads,
        ..ParquetOptions::default()
    };
    let mut calls_input = if args.calls {
        Some(calls_input(handler, &input, options)?)
    } else {
        None
    };
    let mut origin = Origin::new(&input, handler.name());
    let mut notes = Vec::new();
    let (dataset, failure) = {
        let mut ctx = ctx(options, &mut progress, &mut *err);
        // Read on every thread where the format seeks by index, in stretches that
        // `Dataset::read` sizes (a row group of records each, built and encoded by one
        // thread): the same bytes as on one.
        let group = parquet_options.row_group_rows.max(1) as u64;
        let reading = Stretches::new(handler, group, threads).open(&mut input, &mut ctx)?;
        let mut schemas = reading.tables().to_vec();
        let calls_table = schemas.len();
        if calls_input.is_some() {
            schemas.push(trace_analyses::calls::table());
        }
        let mut dataset = Dataset::create(&args.output, &schemas, &parquet_options, args.force)?;
        let ended = dataset.read(reading, &mut ctx)?;
        notes.extend(ended.notes);
        let mut failure = ended.failure;
        if let (None, Some(again)) = (&failure, calls_input.as_mut()) {
            let options = trace_analyses::calls::CallsOptions::default();
            let written =
                trace_analyses::calls::calls(handler, again, &mut ctx, &options, &mut |c| {
                    dataset.write(calls_table, c)
                });
            failure = written.err();
        }
        (dataset, failure)
    };
    origin.read(&input);
    progress.finish();
    for note in &notes {
        writeln!(err, "{note}")?;
    }
    let failure = match failure {
        // Dropping the unfinished dataset removes its temporary folder.
        Some(e) if !args.partial => {
            drop(dataset);
            return Err(e.into());
        }
        f => f,
    };
    let summaries = dataset.finish(&origin, failure.as_ref(), &notes)?;
    for t in summaries.iter().filter(|_| !quiet) {
        writeln!(
            err,
            "{:<20} {:>14} rows {:>5} file(s) {:>14} bytes",
            t.name, t.rows, t.files, t.bytes
        )?;
    }
    match failure {
        Some(e) => {
            writeln!(
                err,
                "partial dataset kept at {} (\"complete\": false)",
                args.output.display()
            )?;
            Err(e.into())
        }
        None => Ok(()),
    }
}

/// The input `export --calls` reads the calls from: the trace again (a file, not a stream
/// read once), checked to be an x86/x64 instruction stream before anything is written.
///
/// # Errors
///
/// A stream or directory input, or one without an x86/x64 instruction stream (usage); the
/// stream cannot be opened.
fn calls_input(handler: &dyn Handler, input: &Input, options: &Options) -> Result<Input, CliError> {
    let mut again = input.again().ok_or_else(|| {
        CliError::Usage(format!(
            "--calls reads {} a second time: give a file, not a stream",
            input.name()
        ))
    })??;
    // No instruction stream is the usage error below; a stream that cannot be read, the
    // reader's own error.
    let isa = match handler.steps(&mut again, &mut Ctx::new(options)) {
        Ok(steps) => Some(steps.isa()),
        Err(trace_registry::Error::Unsupported(_)) => None,
        Err(e) => return Err(e.into()),
    };
    if !matches!(isa, Some(Isa::X64 | Isa::X86)) {
        return Err(CliError::Usage(format!(
            "--calls needs an x86/x64 instruction stream; {} input {} has none",
            handler.name(),
            input.name()
        )));
    }
    Ok(again)
}

/// `tracekit validate`: `ok` and exit 0, or the first error and exit 1; with `--json`,
/// `{"ok":true,…summary}` or `{"ok":false,"error":…,"offset":…,"path":…}` on stdout.
///
/// # Errors
///
/// The first problem; with `--json` only after printing it (the exit code still says).
pub fn validate(
    opened: Result<(Input, &'static dyn Handler), trace_registry::Error>,
    options: &Options,
    json: bool,
    show_progress: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let result = opened.and_then(|(mut input, handler)| {
        let mut progress = Progress::new(input.file_len(), show_progress);
        let r = handler.validate(&mut input, &mut ctx(options, &mut progress, &mut *err));
        progress.finish();
        r.map(|summary| (handler, summary))
    });
    if !json {
        result?;
        writeln!(out, "ok")?;
        return Ok(());
    }
    match result {
        Ok((handler, summary)) => {
            let mut v = Info::new().with("ok", true).with("format", handler.name());
            for (k, x) in summary.iter() {
                v.push(k.to_owned(), x.clone());
            }
            writeln!(out, "{}", v.to_json())?;
            Ok(())
        }
        Err(e) => {
            let v = Info::new()
                .with("ok", false)
                .with("error", e.to_string())
                .with("offset", e.offset().map(|o| o.0))
                .with("path", e.path().map(str::to_owned))
                .with("record", e.record());
            writeln!(out, "{}", v.to_json())?;
            Err(e.into())
        }
    }
}

/// `tracekit dot`: a DCFG (or part of it) as Graphviz DOT.
///
/// # Errors
///
/// The DCFG cannot be read, or a selected process, image, routine or loop does not exist.
pub fn dot(
    mut input: Input,
    options: &Options,
    args: &DotArgs,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let d = dcfg_handler::load(&mut input, &mut Ctx::new(options))?;
    let routine = match &args.routine {
        Some(r) => Some(routine_entry(&d, args.process, r)?),
        None => None,
    };
    let opts = dcfg::DotOptions {
        process: args.process,
        image: args.image,
        routine,
        loop_head: args.loop_id,
        hide_zero_edges: args.hide_zero,
        hide_libraries: args.hide_libraries,
    };
    if let Some(pid) = opts.process
        && d.process(pid).is_none()
    {
        return Err(CliError::Failed(format!("no process {pid} in the DCFG")));
    }
    let graphs: Vec<dcfg::Graph<'_>> = d
        .processes
        .iter()
        .filter(|p| opts.process.is_none_or(|pid| p.id == pid))
        .map(|p| dcfg::Graph::new(&d, p))
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
    d.write_dot(out, &opts)?;
    Ok(())
}

/// The entry block of `--routine NAME|ID`: a number is the id; a name, the routine whose
/// entry block starts the symbol of that name (in `process`, or any).
fn routine_entry(d: &dcfg::Dcfg, process: Option<u64>, given: &str) -> Result<u64, CliError> {
    if let Ok(id) = args::number(given) {
        return Ok(id);
    }
    let mut entries: Vec<u64> = Vec::new();
    for p in d
        .processes
        .iter()
        .filter(|p| process.is_none_or(|id| p.id == id))
    {
        let g = dcfg::Graph::new(d, p);
        for b in g.blocks_by_symbol(given) {
            if g.routine(b).is_some()
                && g.block_symbol(b) == Some((given, 0))
                && !entries.contains(&b)
            {
                entries.push(b);
            }
        }
    }
    match entries.as_slice() {
        [one] => Ok(*one),
        [] => Err(CliError::Failed(format!(
            "no routine named {given:?} in the DCFG (--routine takes a symbol name or an entry block id)"
        ))),
        many => Err(CliError::Failed(format!(
            "{} routines are named {given:?} (entry blocks {}): give one by its id",
            many.len(),
            many.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `tracekit loops`: loop statistics of a DCFG as CSV.
///
/// # Errors
///
/// The DCFG cannot be read.
pub fn loops(mut input: Input, options: &Options, out: &mut dyn Write) -> Result<(), CliError> {
    let d = dcfg_handler::load(&mut input, &mut Ctx::new(options))?;
    d.write_loops_csv(out)?;
    Ok(())
}

/// `tracekit convert FILE --to din`: a trace as Dinero IV `din` lines (0 read, 1 write,
/// 2 fetch). Amber traces by their own rules (`amber_tt6::din`: the opcode says which
/// cache-block operations move data); every other format with an instruction stream
/// through [`trace_sinks::din`].
///
/// # Errors
///
/// The format has no instruction stream (usage), the trace cannot be read, or is damaged
/// (after the lines of every complete record).
pub fn convert_din(
    handler: &dyn Handler,
    mut input: Input,
    options: &Options,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let Some(format) = amber::Amber::by_name(handler.name()) else {
        let mut steps = handler
            .steps(&mut input, &mut Ctx::new(options))
            .map_err(|e| match e {
                trace_registry::Error::Unsupported(m) => {
                    CliError::Usage(format!("cannot convert {} to din: {m}", handler.name()))
                }
                e => CliError::Trace(e),
            })?;
        trace_sinks::din::convert(&mut *steps, out)?;
        return Ok(());
    };
    let format_err = |e: amber_tt6::Error| CliError::from(format.err(e));
    let mut din = amber_tt6::din::DinWriter::new(out);
    if format.kind() == amber::Kind::Full {
        let reader = format.full_reader(input.bytes()?, options)?;
        for r in reader.records() {
            din.write_full(&r.map_err(format_err)?)?;
        }
        return Ok(());
    }
    if input.is_dir() {
        // The merged timeline of a threads directory.
        let mut merge = amber::merge_dir(format, input.parts_mut().unwrap_or_default())?;
        for m in merge.by_ref() {
            din.write_record(&m.map_err(format_err)?.record)?;
        }
        for u in merge.unmatched() {
            writeln!(err, "{}", amber::unmatched_line(u))?;
        }
        return Ok(());
    }
    match input.source() {
        Source::Stream(s) => din_stream(s, format, &mut din),
        Source::Bytes(b) => din_stream(b, format, &mut din),
    }
}

/// The din lines of a TT6 or TT6E stream, in constant memory.
fn din_stream<R: std::io::Read, W: Write>(
    reader: R,
    format: amber::Amber,
    din: &mut amber_tt6::din::DinWriter<W>,
) -> Result<(), CliError> {
    let format_err = |e: amber_tt6::Error| CliError::from(format.err(e));
    let mut reader =
        amber_tt6::Tt6StreamReader::from_reader(reader, format.dialect()).map_err(format_err)?;
    while let Some(r) = reader.next_record() {
        din.write_record(&r.map_err(format_err)?)?;
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

/// What `tracekit encode` wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// Processes.
    pub processes: usize,
    /// Threads, over every process.
    pub threads: usize,
    /// Edges, over every thread.
    pub edges: usize,
}

/// `tracekit encode`: JSON Lines edge lists plus a DCFG → a DCFG-Trace file.
///
/// Each line is `{"pid":…,"thread":…,"edges":[…]}` (pid and thread default to 0; lines of
/// the same thread are concatenated). Instruction counts per edge come from the DCFG
/// (`NUM_INSTRS` of the source block); without `--dcfg`, each edge counts one instruction.
///
/// # Errors
///
/// The edge list or the DCFG cannot be read.
pub fn encode(
    args: &EncodeArgs,
    dcfg: Option<&std::path::PathBuf>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Encoded, CliError> {
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
    let dcfg = match dcfg {
        Some(p) => Some(dcfg_trace_handler::load_join(p)?),
        None => {
            writeln!(
                err,
                "warning: no --dcfg: every edge counts as one instruction"
            )?;
            None
        }
    };
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
    file.write_to(out)?;
    Ok(Encoded {
        processes: input.len(),
        threads: input.iter().map(|p| p.threads.len()).sum(),
        edges: input
            .iter()
            .flat_map(|p| &p.threads)
            .map(|t| t.edges.len())
            .sum(),
    })
}
