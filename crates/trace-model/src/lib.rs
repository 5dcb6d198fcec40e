//! The model every trace format is read into: inputs, typed rows and their schemas, the
//! instruction stream and its capabilities, basic blocks, summaries and errors.
//!
//! This crate knows no format. The format adapters (`trace-registry`) implement its
//! [`Handler`] trait, one per format; the outputs (`trace-sinks`) and the analyses
//! (`trace-analyses`) consume what a handler gives, so each is written once for every
//! format:
//!
//! - [`Records`]: the records of an input as typed rows ([`Row`]) described by one
//!   [`Schema`] per table, handed to any [`Visitor`];
//! - [`steps::Steps`]: the instruction stream (pc, opcode, thread, memory accesses, the
//!   registers before each step), with optional capabilities a format offers when it can
//!   do something faster than reading steps ([`steps::Steps::registers`],
//!   [`steps::Steps::raw`], [`steps::Steps::indexing`]);
//! - [`blocks::Blocks`]: basic-block executions;
//! - [`stretches::Stretches`]: one input's records read on several threads and handed on
//!   in order;
//! - [`Input`]: a path (memory-mapped), stdin, a `.gz`/`.bz2` stream or an amber thread
//!   directory, opened once; [`output::AtomicFile`]: outputs that appear only complete;
//! - [`Info`] and [`Error`]: summaries and errors as values a program can read.
//!
//! # Example
//!
//! A table's schema, and one row visited as every sink visits it: a sink written once
//! over [`Visitor`] takes the rows of every format.
//!
//! ```
//! use trace_model::schema::{Field, Row, Schema, Type, Visitor};
//!
//! /// A row of a table of steps: the pc and the thread.
//! struct Step {
//!     pc: u64,
//!     thread: u32,
//! }
//!
//! impl Row for Step {
//!     fn visit(&self, v: &mut dyn Visitor) {
//!         v.uint(self.pc);
//!         v.uint(self.thread.into());
//!     }
//! }
//!
//! /// A sink that writes a row's values as words.
//! #[derive(Default)]
//! struct Words(Vec<String>);
//!
//! impl Visitor for Words {
//!     fn uint(&mut self, v: u64) { self.0.push(v.to_string()) }
//!     fn int(&mut self, v: i64) { self.0.push(v.to_string()) }
//!     fn bool(&mut self, v: bool) { self.0.push(v.to_string()) }
//!     fn bytes(&mut self, v: &[u8]) { self.0.push(format!("{v:02x?}")) }
//!     fn str(&mut self, v: &str) { self.0.push(v.to_owned()) }
//!     fn null(&mut self) { self.0.push("null".into()) }
//!     fn begin_list(&mut self) {}
//!     fn end_list(&mut self) {}
//!     fn begin_row(&mut self) {}
//!     fn end_row(&mut self) {}
//! }
//!
//! let schema = Schema::new("steps", vec![Field::hex("pc", 64), Field::new("thread", Type::UInt(32))]);
//! let mut words = Words::default();
//! Step { pc: 0x401000, thread: 7 }.visit(&mut words);
//! let named: Vec<String> = schema.fields.iter().zip(&words.0).map(|(f, v)| format!("{}={v}", f.name)).collect();
//! assert_eq!(named, ["pc=4198400", "thread=7"]);
//! ```

pub mod blocks;
mod error;
pub mod info;
mod input;
mod mapped;
pub mod output;
pub mod schema;
pub mod steps;
pub mod stretches;

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
    /// rows `size` and `access`, and x64dbg steps sized, classified accesses (`trace_registry::disasm`).
    pub disasm: bool,
    /// The sidecar index to use (`--index`) instead of the one beside the trace
    /// (`FILE.tkidx`; see the `trace-index` crate).
    pub index: Option<PathBuf>,
}

impl Options {
    /// The format options set here that a format offering `offers` does not read, by field
    /// name (see [`Offers::reads`]); `disasm` and `index` apply to every format.
    #[must_use]
    pub fn unread(&self, offers: Offers) -> Vec<&'static str> {
        [
            ("dcfg", self.dcfg.is_some()),
            ("big_endian", self.big_endian),
            ("record_size", self.record_size.is_some()),
            ("lenient", self.lenient),
            ("arch", self.arch.is_some()),
        ]
        .into_iter()
        .filter(|&(name, set)| set && !offers.reads.contains(&name))
        .map(|(name, _)| name)
        .collect()
    }
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

    /// Runs `f` with a context of the same options whose diagnostics leave out the lines
    /// `drop` matches and pass the others on to this context's (a caller that said
    /// something once keeps a reader from saying it again).
    pub fn filtered<T>(
        &mut self,
        drop: impl Fn(&str) -> bool,
        f: impl FnOnce(&mut Ctx<'_>) -> T,
    ) -> T {
        let mut notes = std::mem::replace(&mut self.diagnostics, Box::new(|_| {}));
        let out = {
            let mut inner = Ctx::new(self.options).on_diagnostic(|line| {
                if !drop(line) {
                    notes(line);
                }
            });
            f(&mut inner)
        };
        self.diagnostics = notes;
        out
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

    /// Notes about the whole input, known once every record is read. A reader moved by
    /// [`Records::seek`] counts ([`Note::Count`]) only what it read after the seek, so that
    /// the notes of readers of consecutive parts of one input add up to one reader's
    /// ([`merge_notes`]).
    fn finish(&mut self) -> Vec<Note> {
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

    /// Whether [`Records::seek`] with a seek index jumps to record `n` (its cost does not
    /// grow with `n`) rather than reading the records before it: what makes reading parts
    /// of one input on several threads worth it ([`stretches::Stretches`]). The default:
    /// `false`.
    fn seeks_by_index(&self) -> bool {
        false
    }
}

/// A note about a whole input ([`Records::finish`]), shown as one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// `count` of what `what` says (`note: 3 block(s) carry …`): the counts of readers of
    /// parts of one input add up.
    Count {
        /// How many.
        count: u64,
        /// What was counted, after the number.
        what: &'static str,
    },
    /// A line as it is.
    Line(String),
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::Count { count, what } => write!(f, "note: {count} {what}"),
            Note::Line(line) => f.write_str(line),
        }
    }
}

/// The notes of several readers of one input (each over a part of it, in order) as one
/// reader's: counts of the same thing added (where the first was), lines kept in order,
/// zero counts dropped.
#[must_use]
pub fn merge_notes(notes: impl IntoIterator<Item = Note>) -> Vec<Note> {
    let mut out: Vec<Note> = Vec::new();
    for note in notes {
        if let Note::Count { count, what } = &note {
            let seen = out.iter_mut().find_map(|n| match n {
                Note::Count { count: c, what: w } if w == what => Some(c),
                _ => None,
            });
            if let Some(c) = seen {
                *c = c.saturating_add(*count);
                continue;
            }
        }
        out.push(note);
    }
    out.retain(|n| !matches!(n, Note::Count { count: 0, .. }));
    out
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
///
/// Handlers build it as `Offers { graph: true, ..Offers::default() }`, so a new ability
/// is a new field that every other handler leaves false.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
    /// The format options ([`Options`] fields, by name: `"arch"`, `"big_endian"`, …) this
    /// format reads. Any other one given is a mistake ([`Options::unread`]) that `tracekit`
    /// reports rather than ignores.
    pub reads: &'static [&'static str],
}

#[cfg(test)]
mod tests {
    use super::{Note, merge_notes};

    /// Counts of the same thing add up where the first was; lines stay in order; zero
    /// counts go.
    #[test]
    fn notes_of_parts_merge_into_one_readers() {
        let count = |count| Note::Count {
            count,
            what: "block(s)",
        };
        let other = Note::Count {
            count: 0,
            what: "other",
        };
        let merged = merge_notes([count(2), Note::Line("warning: x".into()), other, count(3)]);
        assert_eq!(merged, vec![count(5), Note::Line("warning: x".into())]);
        assert_eq!(merged[0].to_string(), "note: 5 block(s)");
    }
}
