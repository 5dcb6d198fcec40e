//! One registry of trace formats: open any trace, tell its format, summarise it, check it,
//! and walk its records as typed rows, the same way for every format.
//!
//! The format crates (`trac-x64dbg`, `gdb-tfile`, `dcfg`, `dcfg-trace`, `amber-tt6`) each
//! read one format. This crate puts one [`Handler`] per format in one table ([`HANDLERS`]),
//! in the manner of `object::File::parse` or pcap-parser's `create_reader`:
//!
//! - **detection** from the first bytes (each crate's own magic constants) and the file
//!   name ([`detect`]);
//! - **info**: a summary as one [`Info`] value, shown as text or JSON from the same tree;
//! - **validate**: the whole file checked, with diagnostics;
//! - **records**: the records as typed rows ([`Row`]) described by a [`Schema`] per record
//!   kind, handed to any sink ([`sink::JsonLines`] is `tracekit dump`; `sink::parquet`,
//!   behind the `parquet` feature, is `tracekit export`).
//!
//! An output written once over rows and schemas works for every format; a format added as
//! one handler module and one line in [`HANDLERS`] gets every output.
//!
//! # Example
//!
//! ```
//! use trace_registry::{Ctx, Input, Options, sink::JsonLines};
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! assert_eq!(handler.name(), "x64dbg");
//! let options = Options::default();
//! let mut ctx = Ctx::new(&options);
//! let info = handler.info(&mut input, &mut ctx)?;
//! println!("{}", info.to_text());
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let mut records = handler.records(&mut input, &mut ctx)?;
//! let mut out = JsonLines::new(Vec::new(), records.tables());
//! while let Some(record) = records.next_record() {
//!     let record = record?;
//!     out.write(record.table, record.row())?;
//! }
//! out.flush()?;
//! assert!(out.into_inner().starts_with(b"{\"i\":0,"));
//! # Ok::<(), trace_registry::Error>(())
//! ```

pub mod analyses;
pub mod blocks;
pub mod disasm;
mod error;
pub mod formats;
pub mod info;
mod input;
mod mapped;
pub mod output;
pub mod schema;
pub mod sink;
pub mod steps;
#[cfg(feature = "testgen")]
pub mod testgen;

use std::path::PathBuf;
use std::sync::Arc;

pub use error::Error;
pub use info::{Hex, Info, Value};
pub use input::{Compression, Cut, FileAt, HEAD_LEN, Input, SPOOL_AT, Source};
pub use mapped::{check_unchanged, first_change};
pub use schema::{Field, Json, Row, Schema, Type, Visitor};

/// Options that only some formats use; the others ignore them.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// dcfg-trace: the DCFG of the traced run, to map edges to blocks and check counts.
    pub dcfg: Option<PathBuf>,
    /// gdb-tfile: the target is big-endian (the file does not say).
    pub big_endian: bool,
    /// amber FULL: the record size (1004 or 1008) instead of detecting it.
    pub record_size: Option<u32>,
    /// dcfg-trace: lenient decoding instead of strict errors.
    pub lenient: bool,
    /// tenet: the architecture (`amd64` or `x86`) instead of detecting it from the register
    /// names.
    pub arch: Option<String>,
    /// Disassemble (`--disasm`): x64dbg, tfile and amber rows get `asm`, x64dbg memory
    /// rows `size` and `access`, and x64dbg steps sized, classified accesses ([`disasm`]).
    pub disasm: bool,
    /// The sidecar index to use (`--index`) instead of the one beside the trace
    /// (`FILE.tkidx`; see [`analyses::index`]).
    pub index: Option<PathBuf>,
}

/// What a handler gets besides its input: options, and where progress and diagnostics go.
pub struct Ctx<'a> {
    /// The options.
    pub options: &'a Options,
    progress: Box<dyn FnMut(u64) + 'a>,
    diagnostics: Box<dyn FnMut(&str) + 'a>,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<'a> Ctx<'a> {
    /// A context that drops progress and diagnostics.
    #[must_use]
    pub fn new(options: &'a Options) -> Ctx<'a> {
        Ctx {
            options,
            progress: Box::new(|_| {}),
            diagnostics: Box::new(|_| {}),
        }
    }

    /// Progress goes to `f`, as the byte position reached in the input.
    #[must_use]
    pub fn on_progress(mut self, f: impl FnMut(u64) + 'a) -> Ctx<'a> {
        self.progress = Box::new(f);
        self
    }

    /// Diagnostics (warnings and notes, one line each, e.g. `warning: …`) go to `f`.
    #[must_use]
    pub fn on_diagnostic(mut self, f: impl FnMut(&str) + 'a) -> Ctx<'a> {
        self.diagnostics = Box::new(f);
        self
    }

    /// Reports progress.
    pub fn progress(&mut self, position: u64) {
        (self.progress)(position);
    }

    /// Reports one diagnostic line.
    pub fn diagnostic(&mut self, line: &str) {
        (self.diagnostics)(line);
    }
}

/// How sure a handler is that an input is its format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    /// Only the file name says so (formats without magic).
    Name,
    /// The content looks right (JSON keys).
    Content,
    /// The magic bytes match.
    Magic,
}

/// One record handed out by [`Records::next_record`]: its table (an index into
/// [`Records::tables`]) and its values.
pub struct Record<'a> {
    /// The table (record kind) the record belongs to.
    pub table: usize,
    row: RowRef<'a>,
}

/// A record's values: in the reader (most formats), or, where the record borrows a stream
/// reader's buffer, in a small box of its own.
enum RowRef<'a> {
    Borrowed(&'a dyn Row),
    Boxed(Box<dyn Row + 'a>),
}

impl<'a> Record<'a> {
    /// A record whose values the reader holds.
    #[must_use]
    pub fn new(table: usize, row: &'a dyn Row) -> Record<'a> {
        Record {
            table,
            row: RowRef::Borrowed(row),
        }
    }

    /// A record whose values borrow what only lives as long as the record.
    #[must_use]
    pub fn boxed(table: usize, row: Box<dyn Row + 'a>) -> Record<'a> {
        Record {
            table,
            row: RowRef::Boxed(row),
        }
    }

    /// The record's values.
    #[must_use]
    pub fn row(&self) -> &dyn Row {
        match &self.row {
            RowRef::Borrowed(r) => *r,
            RowRef::Boxed(r) => r.as_ref(),
        }
    }
}

impl std::fmt::Debug for Record<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

/// The records of one input, as typed rows: a lending iterator (each record borrows the
/// reader until the next call), fused after the first error.
pub trait Records {
    /// The schema of every table (record kind) this reader hands out.
    fn tables(&self) -> &[Arc<Schema>];

    /// The next record, or the error that ends the input (after every complete record).
    fn next_record(&mut self) -> Option<Result<Record<'_>, Error>>;

    /// How far into the input the reader is, in bytes (for progress; 0 where unknown).
    fn position(&self) -> u64 {
        0
    }

    /// Notes about the whole input, known once every record is read (one line each).
    fn finish(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// The typed fast path of the columnar sinks: appends up to `max` records straight into
    /// `out`'s columns ([`schema::ColumnSink`]) and returns how many (0 at the end), or
    /// the error that ends the input. `None` (the default) when the reader has no such
    /// path for what `out` asks: the caller then visits the records one by one
    /// ([`Records::next_record`]). Either way gives the same rows.
    fn fill_columns(
        &mut self,
        _out: &mut dyn schema::ColumnSink,
        _max: usize,
    ) -> Option<Result<usize, Error>> {
        None
    }

    /// Passes over the first `n` records (of every table): the next [`Records::next_record`]
    /// gives record `n`, or none when the input has `n` or fewer. `index` is the format's
    /// random-access index as [`steps::Indexing::seek_index`] gives it, when the caller has
    /// one: a format that can use it jumps there (x64dbg in memory: a binary search and at
    /// most one full-dump interval); the default reads and drops the records before `n`.
    ///
    /// # Errors
    ///
    /// The error that ends the input before record `n`.
    fn seek(&mut self, n: u64, index: Option<&steps::SeekIndex>) -> Result<(), Error> {
        let _ = index;
        skip_records(self, n)
    }
}

/// Reads and drops the next `n` records of `records` (fewer at the end): the default
/// [`Records::seek`], and the rest of a format's own seek.
///
/// # Errors
///
/// The error that ends the input before `n` records.
pub fn skip_records<R: Records + ?Sized>(records: &mut R, n: u64) -> Result<(), Error> {
    for _ in 0..n {
        match records.next_record() {
            None => break,
            Some(Err(e)) => return Err(e),
            Some(Ok(_)) => {}
        }
    }
    Ok(())
}

/// A format: how to recognise it, summarise it, check it and read its records.
pub trait Handler: Send + Sync {
    /// The name used by `--format` and in `info` (`x64dbg`, `gdb-tfile`, …).
    fn name(&self) -> &'static str;

    /// Other names `--format` accepts.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// How the format is recognised, for messages (`magic "TRAC"`).
    fn recognised_by(&self) -> &'static str;

    /// The output table (as a Parquet export names its folders) most users mean by the
    /// records: the Python package's `to_arrow()` default. Empty (the default): the first
    /// record table.
    fn main_table(&self) -> &'static str {
        ""
    }

    /// Whether `head` (the first bytes, decompressed) and `file_name` (without a compression
    /// extension) look like this format.
    fn detect(&self, head: &[u8], file_name: &str) -> Option<Confidence>;

    /// Whether a directory holding files of these names is an input of this format (amber's
    /// per-thread directories). Most formats are single files.
    fn detect_dir(&self, _names: &[String]) -> Option<Confidence> {
        None
    }

    /// The summary of the input.
    ///
    /// # Errors
    ///
    /// The input cannot be read or is not valid for the format.
    fn info(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error>;

    /// Checks the whole input: `Ok` with a short summary (record counts), diagnostics
    /// through `ctx`, or the first error.
    ///
    /// # Errors
    ///
    /// The first problem found.
    fn validate(&self, input: &mut Input, ctx: &mut Ctx<'_>) -> Result<Info, Error>;

    /// The records of the input as typed rows.
    ///
    /// # Errors
    ///
    /// The input cannot be opened as this format.
    fn records<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn Records + 'a>, Error>;

    /// The instruction stream, for formats that have one (what `state`, `mem`, `xref` and
    /// `diff` read). The default: [`Error::Unsupported`].
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] for formats without an instruction stream; as
    /// [`Handler::records`] when the input cannot be opened.
    fn steps<'a>(
        &self,
        _input: &'a mut Input,
        _ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn steps::Steps + 'a>, Error> {
        Err(Error::Unsupported(format!(
            "{} traces have no instruction stream",
            self.name()
        )))
    }

    /// What the format offers beyond records, info and validate, for the commands that
    /// work on some formats only (none by default). Callers ask this, never the name.
    fn offers(&self) -> Offers {
        Offers::default()
    }

    /// The basic-block executions (what `bbv` reads). The default derives dynamic blocks
    /// from [`Handler::steps`] ([`blocks::StepBlocks`]); DCFG-Trace gives its DCFG's blocks.
    ///
    /// # Errors
    ///
    /// As [`Handler::steps`]: [`Error::Unsupported`] for formats without blocks.
    fn blocks<'a>(
        &self,
        input: &'a mut Input,
        ctx: &mut Ctx<'_>,
    ) -> Result<Box<dyn blocks::Blocks + 'a>, Error> {
        Ok(Box::new(blocks::StepBlocks::new(self.steps(input, ctx)?)))
    }
}

/// What a format offers beyond records, info and validate ([`Handler::offers`]): what
/// the commands that work on some formats only ask, instead of a format's name. The
/// instruction-stream accelerators are capabilities of the stream itself
/// ([`steps::Steps::registers`], [`steps::Steps::raw`], [`steps::Steps::indexing`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offers {
    /// A control-flow graph (DCFG): `dot`, `loops` and the Python package's `graph`.
    pub graph: bool,
    /// Tracepoint frames to search by tracepoint and collected memory (GDB tfiles): `find`.
    pub frames: bool,
    /// Basic blocks bounded by the loops of a DCFG given with `--dcfg` (DCFG-Trace):
    /// `bbv --loop-bounded`.
    pub loop_bounded_blocks: bool,
    /// A directory of per-thread files read as one stream (amber tt6 and tt6e): `merge`.
    pub thread_files: bool,
}

/// The handlers whose [`Handler::offers`] has `wanted`, in [`HANDLERS`] order (for the
/// messages that say which formats a command takes).
pub fn offering(wanted: fn(Offers) -> bool) -> impl Iterator<Item = &'static dyn Handler> {
    HANDLERS.iter().copied().filter(move |h| wanted(h.offers()))
}

/// Every format, in the order they are listed to users and tried by detection.
pub static HANDLERS: &[&dyn Handler] = &[
    &formats::x64dbg::X64dbg,
    &formats::gdb_tfile::GdbTfile,
    &formats::dcfg::Dcfg,
    &formats::dcfg_trace::DcfgTrace,
    &formats::amber::TT6,
    &formats::amber::TT6E,
    &formats::amber::FULL,
    &formats::tenet::Tenet,
];

/// The handler named `name` (or one of its aliases).
#[must_use]
pub fn by_name(name: &str) -> Option<&'static dyn Handler> {
    HANDLERS
        .iter()
        .copied()
        .find(|h| h.name() == name || h.aliases().contains(&name))
}

/// The format of an input from its first bytes and file name: the handler most sure of it
/// (the first listed among equals), or `None`.
#[must_use]
pub fn detect(input: &Input) -> Option<&'static dyn Handler> {
    if let Some(names) = input.part_names() {
        let mut best: Option<(Confidence, &'static dyn Handler)> = None;
        for h in HANDLERS.iter().copied() {
            if let Some(c) = h.detect_dir(&names)
                && best.is_none_or(|(b, _)| c > b)
            {
                best = Some((c, h));
            }
        }
        return best.map(|(_, h)| h);
    }
    detect_bytes(input.head(), &input.logical_name())
}

/// [`detect`] over the first bytes and file name directly.
#[must_use]
pub fn detect_bytes(head: &[u8], file_name: &str) -> Option<&'static dyn Handler> {
    let mut best: Option<(Confidence, &'static dyn Handler)> = None;
    for h in HANDLERS.iter().copied() {
        if let Some(c) = h.detect(head, file_name)
            && best.is_none_or(|(b, _)| c > b)
        {
            best = Some((c, h));
        }
    }
    best.map(|(_, h)| h)
}

/// The message for an input of no known format: every format and how it is recognised.
#[must_use]
pub fn detection_error(name: &str) -> Error {
    let mut msg = format!("cannot tell the format of {name}; known formats (use --format NAME):");
    for h in HANDLERS {
        msg.push_str(&format!("\n  {:<11} {}", h.name(), h.recognised_by()));
    }
    Error::Detect(msg)
}

/// Opens a path (or `-` for stdin) and finds its format: `forced` by name, or detected.
///
/// # Errors
///
/// The input cannot be read, the forced name is unknown, or no format matches.
pub fn open(
    path: &std::ffi::OsStr,
    forced: Option<&str>,
) -> Result<(Input, &'static dyn Handler), Error> {
    let input = Input::open(path)?;
    let handler = match forced {
        Some(name) => {
            by_name(name).ok_or_else(|| Error::Unsupported(format!("unknown format {name:?}")))?
        }
        None => detect(&input).ok_or_else(|| detection_error(input.name()))?,
    };
    Ok((input, handler))
}

/// Whether `needle` occurs in `haystack`.
pub(crate) fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn detected(head: &[u8], name: &str) -> Option<&'static str> {
        detect_bytes(head, name).map(|h| h.name())
    }

    /// Detection uses each crate's own magic constants, and magic beats a file name.
    #[test]
    fn detects_by_each_crates_magic() {
        let mut x64 = trac_x64dbg::raw::MAGIC.to_vec();
        x64.extend_from_slice(b"\x10\0\0\0{}");
        assert_eq!(detected(&x64, "x.bin"), Some("x64dbg"));
        assert_eq!(detected(&x64, "thread_001.tt6"), Some("x64dbg"));
        let mut tf = gdb_tfile::raw::MAGIC.to_vec();
        tf.extend_from_slice(b"R 2a0\n");
        assert_eq!(detected(&tf, "x"), Some("gdb-tfile"));
        let full = amber_tt6::raw::FULL_MAGIC.to_be_bytes();
        assert_eq!(detected(&full, "x.tt6"), Some("amber-full"));
        assert_eq!(detected(b"\0\0\0\x10", "thread_001.tt6"), Some("tt6"));
        assert_eq!(detected(b"\0\0\0\x10", "THREAD_001.TT6E"), Some("tt6e"));
        assert_eq!(
            detected(
                b" {\"MAJOR_VERSION\" : 1, \"PROCESSES\" : [[\"PROCESS_ID\"]]}",
                "a"
            ),
            Some("dcfg")
        );
        let trace = b"{\n\"MAJOR_VERSION\" : 1,\n\"PROCESSES\" : [ [\"PROCESS_ID\", \"STRING_DICTIONARY\", \"TRANSITION_TABLE\", \"THREAD_DATA\"]";
        assert_eq!(detected(trace, "a.json"), Some("dcfg-trace"));
        assert_eq!(
            detected(b"{\"PROCESSES\" : [[\"PROCESS_ID\"", "run.trace.json"),
            Some("dcfg-trace")
        );
        assert_eq!(
            detected(b"{\"EDGE_TYPES\" : [", "x.dcfg.json"),
            Some("dcfg")
        );
        assert_eq!(detected(b"hello", "x.txt"), None);
        assert_eq!(detected(b"{\"a\":1}", "x.json"), None);
        assert_eq!(detected(b"", ""), None);
    }

    #[test]
    fn names_and_aliases_find_their_handler() {
        for h in HANDLERS {
            assert_eq!(by_name(h.name()).unwrap().name(), h.name());
            for a in h.aliases() {
                assert_eq!(by_name(a).unwrap().name(), h.name());
            }
        }
        let msg = detection_error("x.bin").to_string();
        for h in HANDLERS {
            assert!(msg.contains(h.name()) && msg.contains(h.recognised_by()));
        }
    }
}
