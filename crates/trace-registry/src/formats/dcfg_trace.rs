//! Intel DCFG-Trace (`dcfg-trace`): one record per chunk, `{"pid","thread","chunk",
//! "preceding_instr_count","instr_count","edge_count","edges":[…]}`; with a DCFG
//! (`Options::dcfg`), `blocks` too: the edges' target nodes.
//!
//! The chunk's edges are a child table (`edges`: `seq`, `edge_id`, and with a DCFG the
//! target `block` and its `addr`), keyed by the chunk's `pid`, `thread` and `chunk`, which
//! JSON Lines shows as the array of edge ids. `blocks` stays a plain list, so the dump is
//! as before.
//!
//! Streaming: one chunk in memory at a time; a chunk of more than [`BIG_CHUNK`] edges is
//! decoded twice (checked first, then handed out in batches) rather than held.

mod blocks;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use dcfg_trace::join::{EdgeInfo, JoinProcess};
use dcfg_trace::read::{Chunk, Event, ReadOptions, Reader, Trace};

use crate::formats::dcfg::looks_like_dcfg;
use crate::schema::{Field, Json, Row, Run, Schema, Type, Visitor};
use crate::{
    Confidence, Ctx, Error, Handler, Info, Input, Offers, Record, Records, Source, contains,
};

/// The dcfg-trace handler.
#[derive(Debug)]
pub struct DcfgTrace;

const NAME: &str = "dcfg-trace";

/// Chunks with more edges than this are not held decoded (see the module docs).
pub const BIG_CHUNK: u64 = 1 << 22;

fn err(e: dcfg_trace::Error) -> Error {
    Error::format(NAME, e)
}

fn options(ctx: &Ctx<'_>) -> ReadOptions {
    ReadOptions {
        lenient: ctx.options.lenient,
    }
}

/// The DCFG at `path`, reduced to what a join with a trace needs, per process.
///
/// # Errors
///
/// The DCFG cannot be read.
pub fn load_join(path: &Path) -> Result<Vec<JoinProcess>, Error> {
    let d = dcfg::Dcfg::from_path(path).map_err(|e| Error::format("dcfg", e))?;
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
    Ok(out)
}

type Events<'a> = Box<dyn Iterator<Item = Result<Event<'a>, dcfg_trace::Error>> + 'a>;

fn events<'a>(input: &'a mut Input, ctx: &Ctx<'_>) -> Events<'a> {
    let opts = options(ctx);
    match input.source() {
        Source::Bytes(b) => Box::new(Reader::from_slice(b, opts)),
        Source::Stream(s) => Box::new(Reader::from_reader(s, opts)),
    }
}

#[derive(Default)]
struct ThreadSummary {
    thread: u64,
    chunks: u64,
    edges: u64,
    instructions: u64,
}

impl Handler for DcfgTrace {
    /// `bbv --loop-bounded`: the blocks between the loop boundaries of the DCFG given with
    /// `--dcfg` ([`Options::dcfg`](crate::Options::dcfg)).
    fn offers(&self) -> Offers {
        Offers {
            loop_bounded_blocks: true,
            reads: &["dcfg", "lenient"],
            ..Offers::default()
        }
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn recognised_by(&self) -> &'static str {
        "JSON whose PROCESSES table has TRANSITION_TABLE/THREAD_DATA"
    }

    /// The edge sequence, rather than the chunks that carry it.
    fn main_table(&self) -> &'static str {
        "edges"
    }

    fn detect(&self, head: &[u8], file_name: &str) -> Option<Confidence> {
        if head.trim_ascii_start().first() != Some(&b'{') {
            return None;
        }
        // DCFG-Trace's PROCESSES header row names these columns; a DCFG's does not.
        let columns = contains(head, b"\"TRANSITION_TABLE\"") || contains(head, b"\"THREAD_DATA\"");
        // Intel's names decide between the two when the content does not.
        let named = looks_like_dcfg(head) && file_name.to_ascii_lowercase().contains(".trace.json");
        (columns || named).then_some(Confidence::Magic)
    }

    fn info(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let opts = options(ctx);
        let (mut procs, (major, minor)) = match input.source() {
            Source::Bytes(b) => {
                let mut r = Reader::from_slice(b, opts);
                (summarize(&mut r, ctx)?, r.version())
            }
            Source::Stream(s) => {
                let mut r = Reader::from_reader(s, opts);
                (summarize(&mut r, ctx)?, r.version())
            }
        };
        let version = format!("{}.{:02}", major.unwrap_or(0), minor.unwrap_or(0));
        let total = |f: fn(&ThreadSummary) -> u64| -> u64 {
            procs
                .iter()
                .flat_map(|p| &p.1)
                .map(f)
                .fold(0, u64::saturating_add)
        };
        let threads: usize = procs.iter().map(|p| p.1.len()).sum();
        let (chunks, edges, instrs) = (
            total(|t| t.chunks),
            total(|t| t.edges),
            total(|t| t.instructions),
        );
        let processes: Vec<Info> = procs
            .iter_mut()
            .map(|(p, threads)| {
                let list: Vec<Info> = threads
                    .iter()
                    .map(|t| {
                        Info::new()
                            .with("thread", t.thread)
                            .with("chunks", t.chunks)
                            .with("edges", t.edges)
                            .with("instructions", t.instructions)
                    })
                    .collect();
                std::mem::take(p).with("threads", list)
            })
            .collect();
        Ok(Info::new()
            .with("format", NAME)
            .with("version", version)
            .with("processes", processes)
            .with("threads", threads)
            .with("chunks", chunks)
            .with("edges", edges)
            .with("instructions", instrs))
    }

    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let opts = options(ctx);
        if let Some(path) = ctx.options.dcfg.clone() {
            let dcfg = load_join(&path)?;
            let trace = Trace::parse(input.bytes()?, opts).map_err(err)?;
            for p in &trace.processes {
                for t in &p.threads {
                    for g in t.chain_gaps() {
                        ctx.diagnostic(&format!(
                            "warning: process {} thread {}: {g}",
                            p.process.pid, t.thread
                        ));
                    }
                }
            }
            let workers = std::thread::available_parallelism().map_or(1, usize::from);
            let report = dcfg_trace::join::check(&trace, &dcfg, workers).map_err(err)?;
            for m in report.mismatches.iter().take(20) {
                ctx.diagnostic(&format!("mismatch: {m}"));
            }
            if let Some(first) = report.mismatches.first() {
                return Err(Error::Invalid {
                    message: format!(
                        "{} mismatch(es) between the trace and the DCFG; the first: {first}",
                        report.mismatches.len()
                    ),
                    offset: None,
                    path: None,
                });
            }
            return Ok(Info::new().with("processes", trace.processes.len()));
        }
        let mut buf = Vec::new();
        let mut last: Option<(u64, u64, u64)> = None;
        let (mut chunks, mut edges) = (0u64, 0u64);
        for ev in events(input, ctx) {
            let Event::Chunk(c) = ev.map_err(err)? else {
                last = None;
                continue;
            };
            if let Some((pid, thread, end)) = last
                && pid == c.process.pid
                && thread == c.thread
                && end != c.preceding_instr_count
            {
                ctx.diagnostic(&format!(
                    "warning: process {pid} thread {thread} chunk {}: PRECEDING_INSTR_COUNT {} does not continue the previous chunk ({end}) at offset {}",
                    c.index, c.preceding_instr_count, c.offset
                ));
            }
            last = Some((
                c.process.pid,
                c.thread,
                c.preceding_instr_count.saturating_add(c.instr_count),
            ));
            c.for_each_batch(1 << 16, |_| {}, &mut buf).map_err(err)?;
            chunks = chunks.saturating_add(1);
            edges = edges.saturating_add(c.edge_count);
            ctx.progress(c.offset.0);
        }
        Ok(Info::new().with("chunks", chunks).with("edges", edges))
    }

    fn records<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error> {
        let dcfg = match &ctx.options.dcfg {
            Some(p) => Some(load_join(p)?),
            None => None,
        };
        Ok(Box::new(ChunkRecords {
            tables: [chunk_schema(dcfg.is_some())],
            events: events(input, ctx),
            dcfg,
            current: None,
            process: None,
            edges: Vec::new(),
            blocks: Vec::new(),
            addrs: Vec::new(),
            done: false,
        }))
    }

    /// The blocks of the DCFG given with `--dcfg` (each edge runs its target block); without one, a usage
    /// error.
    /// The chunks are decoded on as many threads as the process may use
    /// ([`std::thread::available_parallelism`], which follows `taskset`).
    fn blocks<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn crate::blocks::Blocks + 'a>, Error> {
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        dcfg_blocks(input, ctx, workers)
    }
}

/// [`Handler::blocks`] of a DCFG-Trace with its DCFG (`ctx.options.dcfg`), its chunks
/// decoded on `workers` threads (1: on the calling thread; the output is the same).
///
/// # Errors
///
/// No DCFG given (a usage error), or the DCFG cannot be read.
pub fn dcfg_blocks<'a>(
    input: &'a mut Input,
    ctx: &mut Ctx<'_>,
    workers: usize,
) -> Result<Box<dyn crate::blocks::Blocks + 'a>, Error> {
    let Some(dcfg) = ctx.options.dcfg.clone() else {
        return Err(Error::Unsupported(
            "a DCFG-Trace's blocks are in its DCFG: give --dcfg F.dcfg.json[.bz2]".into(),
        ));
    };
    Ok(Box::new(blocks::DcfgBlocks::open(
        events(input, ctx),
        &dcfg,
        workers,
    )?))
}

/// The `chunks` table, keyed by pid, thread and chunk, with its child table `edges` (one row
/// per edge, shown in JSON as the array of edge ids). With a DCFG (`joined`), each edge
/// row also has its target block and that block's address (columns only), and the chunk
/// the list of target blocks (`blocks`, shown in JSON as before).
fn chunk_schema(joined: bool) -> Arc<Schema> {
    let mut edge_fields = vec![
        Field::new("seq", Type::UInt(64)).json(Json::Skip),
        Field::new("edge_id", Type::UInt(64)),
    ];
    if joined {
        edge_fields.push(
            Field::new("block", Type::UInt(64))
                .nullable()
                .json(Json::Skip),
        );
        edge_fields.push(Field::hex("addr", 64).nullable().json(Json::Skip));
    }
    let mut fields = vec![
        Field::new("pid", Type::UInt(64)).key(),
        Field::new("thread", Type::UInt(64)).key(),
        Field::new("chunk", Type::UInt(64)).key(),
        Field::new("preceding_instr_count", Type::UInt(64)),
        Field::new("instr_count", Type::UInt(64)),
        Field::new("edge_count", Type::UInt(64)),
        Field::new(
            "edges",
            Type::Rows(Arc::new(Schema::new("edges", edge_fields))),
        )
        .json(Json::Values),
    ];
    if joined {
        fields.push(Field::new("blocks", Type::List(Box::new(Type::UInt(64)))));
    }
    Arc::new(Schema::new("chunks", fields))
}

/// Per process its summary and threads, from one pass over the chunk rows (no decoding).
fn summarize<'a>(
    events: &mut dyn Iterator<Item = Result<Event<'a>, dcfg_trace::Error>>,
    ctx: &mut Ctx<'_>,
) -> Result<Vec<(Info, Vec<ThreadSummary>)>, Error> {
    let mut procs: Vec<(Info, Vec<ThreadSummary>)> = Vec::new();
    let mut n = 0u64;
    for ev in events {
        match ev.map_err(err)? {
            Event::Process(p) => procs.push((
                Info::new()
                    .with("pid", p.pid)
                    .with("dictionary_entries", p.dictionary.len())
                    .with("dictionary_bytes", p.dictionary.byte_len())
                    .with("transitions", p.table.rows().len())
                    .with("table_edges", p.table.edge_count())
                    .with("max_code_bits", p.table.max_code_len())
                    .with("lookup_entries", p.table.lookup_entries()),
                Vec::new(),
            )),
            Event::Thread { thread, .. } => {
                if let Some(p) = procs.last_mut() {
                    p.1.push(ThreadSummary {
                        thread,
                        ..ThreadSummary::default()
                    });
                }
            }
            Event::Chunk(c) => {
                if let Some(t) = procs.last_mut().and_then(|p| p.1.last_mut()) {
                    t.chunks = t.chunks.saturating_add(1);
                    t.edges = t.edges.saturating_add(c.edge_count);
                    t.instructions = t.instructions.saturating_add(c.instr_count);
                }
                n = n.wrapping_add(1);
                if n.is_multiple_of(256) {
                    ctx.progress(c.offset.0);
                }
            }
            _ => {}
        }
    }
    Ok(procs)
}

struct ChunkRecords<'a> {
    tables: [Arc<Schema>; 1],
    events: Events<'a>,
    dcfg: Option<Vec<JoinProcess>>,
    current: Option<Chunk<'a>>,
    /// Index into `dcfg` of the current chunk's process.
    process: Option<usize>,
    /// The current chunk's edges, and with a DCFG their target blocks and those blocks'
    /// addresses, unless it is big.
    edges: Vec<u64>,
    blocks: Vec<u64>,
    addrs: Vec<Option<u64>>,
    done: bool,
}

impl ChunkRecords<'_> {
    fn join(&self) -> Option<&JoinProcess> {
        self.process.and_then(|p| self.dcfg.as_ref()?.get(p))
    }

    /// Decodes (or, for a big chunk, checks) the current chunk, so that a bad chunk is an
    /// error before any of it is handed out.
    fn prepare(&mut self, c: &Chunk<'_>) -> Result<(), Error> {
        let pid = c.process.pid;
        self.process = match &self.dcfg {
            None => None,
            Some(d) => Some(
                d.iter()
                    .position(|p| p.pid == pid)
                    .ok_or_else(|| Error::Invalid {
                        message: format!("process {pid} of the trace is not in the DCFG"),
                        offset: Some(c.offset),
                        path: None,
                    })?,
            ),
        };
        let unknown = |u: dcfg_trace::join::UnknownEdge| Error::Invalid {
            message: format!("{u} (thread {} chunk {})", c.thread, c.index),
            offset: Some(c.offset),
            path: None,
        };
        self.edges.clear();
        self.blocks.clear();
        self.addrs.clear();
        if c.edge_count <= BIG_CHUNK {
            c.decode_into(&mut self.edges).map_err(err)?;
            let join = self.process.and_then(|p| self.dcfg.as_ref()?.get(p));
            if let Some(j) = join {
                self.blocks.reserve(self.edges.len());
                self.addrs.reserve(self.edges.len());
                for e in &self.edges {
                    let info = j.edges.get(e).ok_or(dcfg_trace::join::UnknownEdge {
                        pid: j.pid,
                        edge: *e,
                    });
                    let info = info.map_err(unknown)?;
                    self.blocks.push(info.target);
                    self.addrs.push(info.target_addr);
                }
            }
        } else {
            let join = self.join();
            let mut bad = None;
            let mut scratch = Vec::new();
            c.for_each_batch(
                1 << 14,
                |batch| {
                    if bad.is_none()
                        && let Some(j) = join
                        && let Err(u) = j.blocks(batch)
                    {
                        bad = Some(u);
                    }
                },
                &mut scratch,
            )
            .map_err(err)?;
            if let Some(u) = bad {
                return Err(unknown(u));
            }
        }
        Ok(())
    }
}

impl Records for ChunkRecords<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn position(&self) -> u64 {
        self.current.as_ref().map_or(0, |c| c.offset.0)
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        if self.done {
            return None;
        }
        loop {
            let ev = match self.events.next() {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(err(e)));
                }
                Some(Ok(ev)) => ev,
            };
            let Event::Chunk(c) = ev else { continue };
            if let Err(e) = self.prepare(&c) {
                self.done = true;
                return Some(Err(e));
            }
            self.current = Some(c);
            return Some(Ok(Record::new(0, self)));
        }
    }
}

/// Visits one edge row: its position in the chunk and its id, and with a DCFG its target
/// block and address.
#[inline]
fn edge_row(v: &mut dyn Visitor, seq: u64, edge: u64, target: Option<(u64, Option<u64>)>) {
    v.begin_row();
    v.uint(seq);
    v.uint(edge);
    if let Some((block, addr)) = target {
        v.uint(block);
        match addr {
            Some(a) => v.uint(a),
            None => v.null(),
        }
    }
    v.end_row();
}

impl Row for ChunkRecords<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        let Some(c) = &self.current else { return };
        v.uint(c.process.pid);
        v.uint(c.thread);
        v.uint(c.index);
        v.uint(c.preceding_instr_count);
        v.uint(c.instr_count);
        v.uint(c.edge_count);
        let join = self.join();
        v.begin_list();
        if c.edge_count <= BIG_CHUNK {
            if join.is_some() {
                let targets = self.blocks.iter().zip(&self.addrs);
                for ((seq, e), (b, a)) in (0u64..).zip(&self.edges).zip(targets) {
                    edge_row(v, seq, *e, Some((*b, *a)));
                }
            } else {
                // The common case: the whole chunk in one call.
                v.rows(&[Run::Counting(0), Run::UInts(&self.edges)]);
            }
        } else {
            // Checked by `prepare`: decoding again gives the same edges.
            let mut seq = 0u64;
            let mut scratch = Vec::new();
            let _ = c.for_each_batch(
                1 << 14,
                |batch| {
                    for e in batch {
                        let target = join.map(|j| {
                            j.edges
                                .get(e)
                                .map_or((0, None), |i| (i.target, i.target_addr))
                        });
                        edge_row(v, seq, *e, target);
                        seq = seq.wrapping_add(1);
                    }
                },
                &mut scratch,
            );
        }
        v.end_list();
        let Some(j) = join else { return };
        v.begin_list();
        if c.edge_count <= BIG_CHUNK {
            for b in &self.blocks {
                v.uint(*b);
            }
        } else {
            let mut scratch = Vec::new();
            let _ = c.for_each_batch(
                1 << 14,
                |batch| {
                    for b in j.blocks(batch).unwrap_or_default() {
                        v.uint(b);
                    }
                },
                &mut scratch,
            );
        }
        v.end_list();
    }
}
