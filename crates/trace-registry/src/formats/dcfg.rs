//! Intel DCFG JSON (`dcfg`): one record per basic block, `{"pid","image","id","addr",
//! "offset","size","instrs","count","symbol","source"}`.
//!
//! The whole graph is needed (symbols, sources and counts come from other tables), so a
//! DCFG is read into its model: from its path as a stream (the JSON is never held whole),
//! or from a stream. Memory is about the model's, some 0.9 times the JSON.

use std::sync::{Arc, OnceLock};

use crate::schema::{Field, Row, Schema, Type, Visitor};
use crate::{Confidence, Ctx, Error, Handler, Hex, Info, Input, Record, Records, contains};

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

/// Reads the whole DCFG as a stream: a file from its path rather than through its memory
/// map, whose pages would count too.
/// The whole DCFG of an input.
///
/// # Errors
///
/// The DCFG cannot be read.
pub fn load(input: &mut Input, ctx: &mut Ctx<'_>) -> Result<dcfg::Dcfg, Error> {
    let d = match input.path() {
        Some(path) if !input.is_stream() => dcfg::Dcfg::from_path(path),
        _ => match input.source() {
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

fn block_schema() -> Arc<Schema> {
    static SCHEMA: OnceLock<Arc<Schema>> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Arc::new(Schema::new(
                "basic_blocks",
                vec![
                    Field::new("pid", Type::UInt(64)),
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
            ))
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
        let first = match input.path() {
            Some(path) if !input.is_stream() => dcfg::Dcfg::from_path(path),
            _ => dcfg::Dcfg::parse(input.bytes()?),
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
        Ok(Box::new(BlockRecords {
            tables: [block_schema()],
            model,
            error,
            graph: None,
            at: (0, 0, 0),
            current: None,
            symbol: None,
            source: None,
        }))
    }
}

struct BlockRecords<'a> {
    tables: [Arc<Schema>; 1],
    model: &'a dcfg::Dcfg,
    /// The error that cut the file short, handed out after the last complete block.
    error: Option<Error>,
    /// The graph of the current process (symbols, sources and counts come from it).
    graph: Option<dcfg::Graph<'a>>,
    /// The next block: process, image and block index.
    at: (usize, usize, usize),
    /// The current block: its process id, image and the block.
    current: Option<(u64, &'a dcfg::Image, &'a dcfg::BasicBlock)>,
    symbol: Option<String>,
    source: Option<String>,
}

impl Records for BlockRecords<'_> {
    fn tables(&self) -> &[Arc<Schema>] {
        &self.tables
    }

    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>> {
        let model = self.model;
        loop {
            let (pi, ii, bi) = self.at;
            let Some(p) = model.processes.get(pi) else {
                return self.error.take().map(Err);
            };
            let graph = self.graph.get_or_insert_with(|| dcfg::Graph::new(model, p));
            let Some(img) = p.images().get(ii) else {
                self.at = (pi.saturating_add(1), 0, 0);
                self.graph = None;
                continue;
            };
            let Some(b) = img.basic_blocks().get(bi) else {
                self.at = (pi, ii.saturating_add(1), 0);
                continue;
            };
            self.at = (pi, ii, bi.saturating_add(1));
            self.symbol = graph.block_symbol(b.id).map(|(s, off)| {
                if off == 0 {
                    s.to_owned()
                } else {
                    format!("{s}+{off:#x}")
                }
            });
            self.source = graph.block_source(b.id).map(|(f, l)| format!("{f}:{l}"));
            self.current = Some((p.id, img, b));
            return Some(Ok(Record::new(0, self)));
        }
    }
}

impl Row for BlockRecords<'_> {
    fn visit(&self, v: &mut dyn Visitor) {
        let Some((pid, img, b)) = self.current else {
            return;
        };
        v.uint(pid);
        v.uint(img.id);
        v.uint(b.id);
        v.uint(img.load_addr.wrapping_add(b.addr_offset));
        v.uint(b.addr_offset);
        v.uint(u64::from(b.size));
        v.uint(u64::from(b.num_instrs));
        v.uint(self.graph.as_ref().map_or(0, |g| g.block_count(b.id)));
        for s in [&self.symbol, &self.source] {
            match s {
                Some(s) => v.str(s),
                None => v.null(),
            }
        }
    }
}
