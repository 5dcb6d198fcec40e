//! Intel DCFG JSON (`dcfg`): one record per basic block, `{"pid","image","id","addr",
//! "offset","size","instrs","count","symbol","source"}` (table `basic_blocks`, the first),
//! and the rest of the graph as further tables: `processes`, `images`, `routines` (with
//! their dominator tree as child table `routine_nodes`), `loops` and `edges` (with their
//! per-thread counts as child table `edge_thread_counts`). Per process, the reader hands
//! out the process, its images, routines, loops, basic blocks, then its edges.
//!
//! The whole graph is needed (symbols, sources and counts come from other tables), so a
//! DCFG is read into its model: through the file's handle as a stream (the JSON is never held whole),
//! or from a stream. Memory is about the model's, some 0.9 times the JSON.

use std::sync::{Arc, OnceLock};

use crate::schema::{Field, Json, Row, Schema, Type, Visitor};
use crate::{Confidence, Ctx, Error, Handler, Hex, Info, Input, Offers, Record, Records, contains};

/// The dcfg handler.
#[derive(Debug)]
pub struct Dcfg;

const NAME: &str = "dcfg";

fn err(e: dcfg::Error) -> Error {
    Error::format(NAME, e)
}

/// Every top-level key of a DCFG: writers differ in key order, and a large file with
/// `PROCESSES` first has no `MAJOR_VERSION` in its first 64 KiB.
pub(crate) const DCFG_KEYS: [&[u8]; 5] = [
    b"\"MAJOR_VERSION\"",
    b"\"FILE_NAMES\"",
    b"\"EDGE_TYPES\"",
    b"\"SPECIAL_NODES\"",
    b"\"PROCESSES\"",
];

/// Whether `head` is JSON with a DCFG top-level key.
pub(crate) fn looks_like_dcfg(head: &[u8]) -> bool {
    head.trim_ascii_start().first() == Some(&b'{') && DCFG_KEYS.iter().any(|k| contains(head, k))
}

/// The whole DCFG of an input, read as a stream: a file through its handle rather than
/// through its memory map, whose pages would count too.
///
/// # Errors
///
/// The DCFG cannot be read.
pub fn load(input: &mut Input, ctx: &mut Ctx<'_>) -> Result<dcfg::Dcfg, Error> {
    let d = match input.file_reader() {
        Some(file) => dcfg::Dcfg::from_reader(file),
        None => match input.source() {
            crate::Source::Bytes(b) => dcfg::Dcfg::parse(b),
            crate::Source::Stream(s) => dcfg::Dcfg::from_reader(s),
        },
    }
    .map_err(err)?;
    if let Some(t) = input.file_len() {
        ctx.progress(t);
    }
    Ok(d)
}

/// Table indexes of [`Dcfg::records`]: basic blocks first, so that a dump's block lines
/// need no `"table"` label.
const BLOCKS: usize = 0;
const PROCESSES: usize = 1;
const IMAGES: usize = 2;
const ROUTINES: usize = 3;
const LOOPS: usize = 4;
const EDGES: usize = 5;

fn uint_list() -> Type {
    Type::List(Box::new(Type::UInt(64)))
}

/// Every table of a DCFG, indexed as above.
fn tables() -> [Arc<Schema>; 6] {
    static TABLES: OnceLock<[Arc<Schema>; 6]> = OnceLock::new();
    TABLES
        .get_or_init(|| {
            let pid = || Field::new("pid", Type::UInt(64));
            let blocks = Schema::new(
                "basic_blocks",
                vec![
                    pid(),
                    Field::new("image", Type::UInt(64)),
                    Field::new("id", Type::UInt(64)),
                    Field::hex("addr", 64),
                    Field::hex("offset", 64),
                    Field::new("size", Type::UInt(32)),
                    Field::new("instrs", Type::UInt(32)),
                    Field::new("count", Type::UInt(64)),
                    Field::new("symbol", Type::Str).nullable(),
                    Field::new("source", Type::Str).nullable(),
                ],
            );
            let processes = Schema::new(
                "processes",
                vec![
                    pid(),
                    Field::new("instr_count", Type::UInt(64)).nullable(),
                    Field::new("threads", Type::UInt(64)),
                    Field::new("instr_count_per_thread", uint_list()).nullable(),
                ],
            );
            let images = Schema::new(
                "images",
                vec![
                    pid(),
                    Field::new("id", Type::UInt(64)),
                    Field::hex("load_addr", 64),
                    Field::new("size", Type::UInt(64)),
                    Field::new("file_name_id", Type::UInt(64)).nullable(),
                    Field::new("file_name", Type::Str).nullable(),
                ],
            );
            let nodes = Schema::new(
                "routine_nodes",
                vec![
                    Field::new("id", Type::UInt(64)),
                    Field::new("idom", Type::UInt(64)),
                ],
            );
            let routines = Schema::new(
                "routines",
                vec![
                    pid().key(),
                    Field::new("image", Type::UInt(64)),
                    Field::new("entry", Type::UInt(64)).key(),
                    Field::hex("addr", 64).nullable(),
                    Field::new("symbol", Type::Str).nullable(),
                    Field::new("exits", uint_list()),
                    Field::new("loops", Type::UInt(64)),
                    Field::new("nodes", Type::Rows(Arc::new(nodes))).json(Json::Object),
                ],
            );
            let loops = Schema::new(
                "loops",
                vec![
                    pid(),
                    Field::new("image", Type::UInt(64)),
                    Field::new("routine", Type::UInt(64)),
                    Field::new("head", Type::UInt(64)),
                    Field::hex("addr", 64).nullable(),
                    Field::new("parent", Type::UInt(64)).nullable(),
                    Field::new("back_edge_sources", uint_list()),
                    Field::new("nodes", uint_list()),
                ],
            );
            let thread_counts = Schema::new(
                "edge_thread_counts",
                vec![
                    Field::new("thread", Type::UInt(64)),
                    Field::new("count", Type::UInt(64)),
                ],
            );
            let edges = Schema::new(
                "edges",
                vec![
                    pid().key(),
                    Field::new("id", Type::UInt(64)).key(),
                    Field::new("source", Type::UInt(64)),
                    Field::new("target", Type::UInt(64)),
                    Field::new("type", Type::Name).nullable(),
                    Field::new("count", Type::UInt(64)),
                    Field::new("thread_counts", Type::Rows(Arc::new(thread_counts)))
                        .json(Json::Object),
                ],
            );
            [blocks, processes, images, routines, loops, edges].map(Arc::new)
        })
        .clone()
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

impl Handler for Dcfg {
    fn offers(&self) -> Offers {
        Offers {
            graph: true,
            ..Offers::default()
        }
    }

    fn name(&self) -> &'static str {
        NAME
    }

    fn recognised_by(&self) -> &'static str {
        "JSON with DCFG keys (MAJOR_VERSION, PROCESSES, ...)"
    }

    fn detect(&self, head: &[u8], _file_name: &str) -> Option<Confidence> {
        looks_like_dcfg(head).then_some(Confidence::Content)
    }

    fn info(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let d = load(input, ctx)?;
        let processes: Vec<Info> = d
            .processes
            .iter()
            .map(|p| {
                let c = counts(p);
                let images: Vec<Info> = p
                    .images()
                    .iter()
                    .map(|img| {
                        Info::new()
                            .with("id", img.id)
                            .with("load_addr", Hex(img.load_addr))
                            .with("size", img.size)
                            .with("file_name", img.file_name_id.and_then(|f| d.file_name(f)))
                            .with("basic_blocks", img.basic_blocks().len())
                            .with("routines", img.routines().len())
                    })
                    .collect();
                Info::new()
                    .with("pid", p.id)
                    .with("threads", p.threads())
                    .with("instr_count", p.instr_count)
                    .with("images", p.images().len())
                    .with("basic_blocks", c.blocks)
                    .with("edges", p.edge_count())
                    .with("routines", c.routines)
                    .with("loops", c.loops)
                    .with("image_list", images)
            })
            .collect();
        Ok(Info::new()
            .with("format", NAME)
            .with("version", d.version())
            .with("file_names", d.file_names.as_ref().map_or(0, Vec::len))
            .with("edge_types", d.edge_types.as_ref().map_or(0, Vec::len))
            .with(
                "special_nodes",
                d.special_nodes.as_ref().map_or(0, Vec::len),
            )
            .with("processes", processes)
            .with("consistency_problems", d.validate().len()))
    }

    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error> {
        let d = load(input, ctx)?;
        let findings = d.validate();
        let Some(first) = findings.first() else {
            let blocks: usize = d.processes.iter().map(|p| counts(p).blocks).sum();
            return Ok(Info::new()
                .with("processes", d.processes.len())
                .with("basic_blocks", blocks));
        };
        for f in &findings {
            ctx.diagnostic(&f.to_string());
        }
        Err(Error::Invalid {
            message: format!(
                "{} consistency problem(s); the first: {first}",
                findings.len()
            ),
            offset: None,
            path: Some(first.path.clone()),
        })
    }

    fn records<'a>(
        &self,
        input: &'a mut Input,
        _ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error> {
        // A file is read as a stream; only a damaged one is then held whole, so that it
        // still gives every complete block before the error.
        let first = match input.file_reader() {
            Some(file) => dcfg::Dcfg::from_reader(file),
            None => dcfg::Dcfg::parse(input.bytes()?),
        };
        let (model, error) = match first {
            Ok(d) => (d, None),
            Err(e) => {
                let bytes = input.bytes()?;
                match e
                    .offset()
                    .and_then(|off| dcfg::Dcfg::recover_prefix(bytes, off.0))
                {
                    Some(d) => (d, Some(err(e))),
                    None => return Err(err(e)),
                }
            }
        };
        // The records borrow the model (and its graph); the input keeps it.
        let model: &'a dcfg::Dcfg = input
            .keep(model)
            .ok_or_else(|| Error::Unsupported("the DCFG model could not be kept".into()))?;
        Ok(Box::new(DcfgRecords {
            tables: tables(),
            model,
            error,
            graph: None,
            process: 0,
            step: Step::Process,
            current: None,
            symbol: None,
            source: None,
        }))
    }
}

/// Where the reader is inside the current process: its tables come one after another
/// (the process, its images, routines, loops, basic blocks, then its edges), each over
/// every image in order. The numbers index the next row.
#[derive(Clone, Copy, Debug)]
enum Step {
    Process,
    Images(usize),
    Routines(usize, usize),
    Loops(usize, usize, usize),
    Blocks(usize, usize),
    Edges(usize),
}

/// The current row.
#[derive(Clone, Copy, Debug)]
enum Item<'a> {
    Process(&'a dcfg::Process),
    Image(&'a dcfg::Image),
    Routine(&'a dcfg::Image, &'a dcfg::Routine),
    Loop(&'a dcfg::Image, &'a dcfg::Routine, &'a dcfg::Loop),
    Block(&'a dcfg::Image, &'a dcfg::BasicBlock),
    Edge(&'a dcfg::Edge),
}

impl Item<'_> {
    fn table(self) -> usize {
        match self {
            Item::Process(_) => PROCESSES,
            Item::Image(_) => IMAGES,
            Item::Routine(..) => ROUTINES,
            Item::Loop(..) => LOOPS,
            Item::Block(..) => BLOCKS,
            Item::Edge(_) => EDGES,
        }
    }
}

struct DcfgRecords<'a> {
    tables: [Arc<Schema>; 6],
    model: &'a dcfg::Dcfg,
    /// The error that cut the file short, handed out after the last complete row.
    error: Option<Error>,
    /// The graph of the current process (symbols, sources and counts come from it).
    graph: Option<dcfg::Graph<'a>>,
    /// The current process's index.
    process: usize,
    /// The next row of the current process.
    step: Step,
    /// The current row, with its process id.
    current: Option<(u64, Item<'a>)>,
    /// The current block's or routine's symbol, and the block's source line.
    symbol: Option<String>,
    source: Option<String>,
}

/// The next row of process `p` after `step` (which it moves past it), or `None` once the
/// process has no more.
fn next_item<'a>(p: &'a dcfg::Process, step: &mut Step) -> Option<Item<'a>> {
    let images = p.images();
    let inc = |i: usize| i.saturating_add(1);
    loop {
        match *step {
            Step::Process => {
                *step = Step::Images(0);
                return Some(Item::Process(p));
            }
            Step::Images(i) => match images.get(i) {
                Some(img) => {
                    *step = Step::Images(inc(i));
                    return Some(Item::Image(img));
                }
                None => *step = Step::Routines(0, 0),
            },
            Step::Routines(i, r) => match images.get(i) {
                None => *step = Step::Loops(0, 0, 0),
                Some(img) => match img.routines().get(r) {
                    Some(rt) => {
                        *step = Step::Routines(i, inc(r));
                        return Some(Item::Routine(img, rt));
                    }
                    None => *step = Step::Routines(inc(i), 0),
                },
            },
            Step::Loops(i, r, l) => match images.get(i) {
                None => *step = Step::Blocks(0, 0),
                Some(img) => match img.routines().get(r) {
                    None => *step = Step::Loops(inc(i), 0, 0),
                    Some(rt) => match rt.loops().get(l) {
                        Some(lp) => {
                            *step = Step::Loops(i, r, inc(l));
                            return Some(Item::Loop(img, rt, lp));
                        }
                        None => *step = Step::Loops(i, inc(r), 0),
                    },
                },
            },
            Step::Blocks(i, b) => match images.get(i) {
                None => *step = Step::Edges(0),
                Some(img) => match img.basic_blocks().get(b) {
                    Some(blk) => {
                        *step = Step::Blocks(i, inc(b));
                        return Some(Item::Block(img, blk));
                    }
                    None => *step = Step::Blocks(inc(i), 0),
                },
            },
            Step::Edges(e) => {
                let edge = p.edges.as_ref().and_then(|t| t.get(e))?;
                *step = Step::Edges(inc(e));
                return Some(Item::Edge(edge));
            }
        }
    }
}

/// `name`, or `name+0x10` inside it.
fn symbol_text((name, off): (&str, u64)) -> String {
    if off == 0 {
        name.to_owned()
    } else {
        format!("{name}+{off:#x}")
    }
}

impl Records for DcfgRecords<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        let model = self.model;
        loop {
            let Some(p) = model.processes.get(self.process) else {
                self.current = None;
                return self.error.take().map(Err);
            };
            let graph = self.graph.get_or_insert_with(|| dcfg::Graph::new(model, p));
            let Some(item) = next_item(p, &mut self.step) else {
                self.process = self.process.saturating_add(1);
                self.step = Step::Process;
                self.graph = None;
                continue;
            };
            match item {
                Item::Block(_, b) => {
                    self.symbol = graph.block_symbol(b.id).map(symbol_text);
                    self.source = graph.block_source(b.id).map(|(f, l)| format!("{f}:{l}"));
                }
                Item::Routine(_, r) => {
                    self.symbol = graph.block_symbol(r.entry).map(symbol_text);
                }
                _ => {}
            }
            self.current = Some((p.id, item));
            return Some(Ok(Record::new(item.table(), self)));
        }
    }
}

fn opt(v: &mut dyn Visitor, value: Option<u64>) {
    match value {
        Some(x) => v.uint(x),
        None => v.null(),
    }
}

fn opt_str(v: &mut dyn Visitor, value: Option<&str>) {
    match value {
        Some(s) => v.str(s),
        None => v.null(),
    }
}

fn list(v: &mut dyn Visitor, values: &[u64]) {
    v.begin_list();
    for x in values {
        v.uint(*x);
    }
    v.end_list();
}

fn len(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl Row for DcfgRecords<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        let Some((pid, item)) = self.current else {
            return;
        };
        let graph = self.graph.as_ref();
        v.uint(pid);
        match item {
            Item::Process(p) => {
                opt(v, p.instr_count);
                v.uint(len(p.threads()));
                match &p.instr_count_per_thread {
                    Some(counts) => list(v, counts),
                    None => v.null(),
                }
            }
            Item::Image(img) => {
                v.uint(img.id);
                v.uint(img.load_addr);
                v.uint(img.size);
                opt(v, img.file_name_id);
                opt_str(v, img.file_name_id.and_then(|f| self.model.file_name(f)));
            }
            Item::Routine(img, r) => {
                v.uint(img.id);
                v.uint(r.entry);
                opt(v, graph.and_then(|g| g.block_addr(r.entry)));
                opt_str(v, self.symbol.as_deref());
                list(v, &r.exits);
                v.uint(len(r.loops().len()));
                v.begin_list();
                for n in &r.nodes {
                    v.begin_row();
                    v.uint(n.id);
                    v.uint(n.idom);
                    v.end_row();
                }
                v.end_list();
            }
            Item::Loop(img, r, l) => {
                v.uint(img.id);
                v.uint(r.entry);
                v.uint(l.head);
                opt(v, graph.and_then(|g| g.block_addr(l.head)));
                opt(v, l.parent_head());
                list(v, &l.back_edge_sources);
                list(v, &l.nodes);
            }
            Item::Block(img, b) => {
                v.uint(img.id);
                v.uint(b.id);
                v.uint(img.load_addr.wrapping_add(b.addr_offset));
                v.uint(b.addr_offset);
                v.uint(u64::from(b.size));
                v.uint(u64::from(b.num_instrs));
                v.uint(graph.map_or(0, |g| g.block_count(b.id)));
                opt_str(v, self.symbol.as_deref());
                opt_str(v, self.source.as_deref());
            }
            Item::Edge(e) => {
                v.uint(e.id);
                v.uint(e.source);
                v.uint(e.target);
                opt_str(v, graph.and_then(|g| g.edge_type_name(e)));
                v.uint(e.count());
                v.begin_list();
                for (t, c) in e.counts.iter().enumerate() {
                    v.begin_row();
                    v.uint(len(t));
                    v.uint(c);
                    v.end_row();
                }
                v.end_list();
            }
        }
    }
}
