//! The reader: a one-pass pull parser that yields processes, threads and chunks in file
//! order ([`Reader`], over a slice or an `io::Read`), an in-memory index of a whole file for
//! seeking and parallel decoding ([`Trace`]), and chunk decoding.
//!
//! Memory: the streaming reader holds the current process's dictionary and transition
//! table and one chunk, never the file. It relies on the specification's ordering rules
//! only where one pass needs them: in a process row, `THREAD_DATA` must come after
//! `PROCESS_ID`, `STRING_DICTIONARY` and `TRANSITION_TABLE`; in a thread row, `THREAD_ID`
//! before `TRACE_DATA`. Columns are otherwise found by their header names, unknown columns
//! and keys are skipped, and short chunk rows are accepted when `EDGE_COUNT` is 0.

use std::borrow::Cow;
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use trace_core::{LimitExceeded, Offset};

use crate::base64::BitReader;
use crate::error::{Context, Error};
use crate::expand::{Dictionary, Expander, Program};
use crate::limits::{MAX_CHUNK_EDGES, MAX_DICTIONARY, MAX_GROUP, MAX_TRANSITIONS};
use crate::raw;
use crate::table::ChunkDecoder;
use crate::table::{Code, TransitionRow, TransitionTable};
use trace_core::json::{Lexer, ReadSource, SliceSource, Source};

/// Reading and decoding options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Lenient decoding: ignore `""` next to other codes of an edge, and cut a multi-edge
    /// group that overshoots `EDGE_COUNT`, instead of failing.
    pub lenient: bool,
}

/// A process's tables: what every chunk of the process needs to decode.
#[derive(Debug)]
pub struct Process {
    /// `PROCESS_ID`.
    pub pid: u64,
    /// Index of the process row, from 0.
    pub index: u64,
    /// Offset of the process row.
    pub offset: Offset,
    /// `STRING_DICTIONARY`, compiled.
    pub dictionary: Dictionary,
    /// `TRANSITION_TABLE`, compiled.
    pub table: TransitionTable,
    /// Options the tables were checked with (used when decoding).
    pub options: ReadOptions,
}

/// One row of a thread's `TRACE_DATA`: a chunk, not yet decoded.
#[derive(Clone, Debug)]
pub struct Chunk<'a> {
    /// The process (its tables).
    pub process: Arc<Process>,
    /// `THREAD_ID`.
    pub thread: u64,
    /// Index of the chunk in its thread, from 0.
    pub index: u64,
    /// `PRECEDING_INSTR_COUNT`.
    pub preceding_instr_count: u64,
    /// `INSTR_COUNT`.
    pub instr_count: u64,
    /// `EDGE_COUNT` (with the first edge).
    pub edge_count: u64,
    /// `FIRST_EDGE_ID` (`None` when absent or null).
    pub first_edge_id: Option<u64>,
    /// `EDGE_ID_SEQUENCE`, as written (borrowed from a slice when it has no escape).
    pub sequence: Cow<'a, [u8]>,
    /// Offset of the chunk row.
    pub offset: Offset,
    /// Offset of the first character of the sequence string.
    pub sequence_offset: Offset,
}

/// What the reader yields, in file order.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Event<'a> {
    /// A process and its tables (before its threads).
    Process(Arc<Process>),
    /// A thread row (before its chunks).
    Thread {
        /// `PROCESS_ID`.
        pid: u64,
        /// `THREAD_ID`.
        thread: u64,
        /// Offset of the thread row.
        offset: Offset,
    },
    /// A chunk.
    Chunk(Chunk<'a>),
}

impl Chunk<'_> {
    /// Where the chunk is, for messages.
    #[must_use]
    pub fn context(&self) -> Context {
        Context::Chunk {
            pid: self.process.pid,
            thread: self.thread,
            chunk: self.index,
        }
    }

    /// Checks the sequence's syntax and compiles it for expansion.
    ///
    /// # Errors
    ///
    /// [`Error::Sequence`] with the position in the sequence and the chunk.
    pub fn compile(&self) -> Result<Program, Error> {
        if self.edge_count <= 1 {
            return Ok(Program::default());
        }
        self.process
            .dictionary
            .compile(&self.sequence, &self.context(), self.sequence_offset.0)
    }

    /// Decodes the chunk's edges, appending them to `out`.
    ///
    /// # Errors
    ///
    /// A bad sequence, a decoding error, or `EDGE_COUNT` above
    /// [`limits::MAX_CHUNK_EDGES`](crate::limits::MAX_CHUNK_EDGES) (use [`Chunk::for_each_batch`]
    /// for such chunks).
    pub fn decode_into(&self, out: &mut Vec<u64>) -> Result<(), Error> {
        LimitExceeded::check(self.offset, "EDGE_COUNT", self.edge_count, MAX_CHUNK_EDGES)?;
        let cap = usize::try_from(self.edge_count.min(1 << 20)).unwrap_or(0);
        out.reserve(cap);
        self.for_each_batch(u64::MAX, |_| {}, out)
    }

    /// Decodes the chunk into a new vector.
    ///
    /// # Errors
    ///
    /// As [`Chunk::decode_into`].
    pub fn decode(&self) -> Result<Vec<u64>, Error> {
        let mut out = Vec::new();
        self.decode_into(&mut out)?;
        Ok(out)
    }

    /// Decodes the chunk, handing each edge to `emit` in order, until the end or an edge
    /// for which `emit` returns `false` (see [`ChunkDecoder::decode_each`]: the caller's
    /// work per edge runs inside the decoding loop, with no buffer).
    ///
    /// [`ChunkDecoder::decode_each`]: crate::table::ChunkDecoder::decode_each
    ///
    /// # Errors
    ///
    /// A bad sequence or a decoding error; the edges before it were handed to `emit`.
    #[inline]
    pub fn for_each_edge(&self, emit: impl FnMut(u64) -> bool) -> Result<(), Error> {
        // `emit` moves in: a `&mut` of it would be called through a forwarding function
        // that the decoding loop need not inline.
        self.with_decoder(|dec| dec.decode_each(u64::MAX, emit).map(drop))
    }

    /// Decodes the chunk in batches of about `batch` edges: `f` sees each batch (the tail
    /// of `buf`, which is cleared between batches when `batch` is below `u64::MAX`), so a
    /// chunk of any length decodes in bounded memory.
    ///
    /// # Errors
    ///
    /// A bad sequence or a decoding error; the batches before it were passed to `f`.
    pub fn for_each_batch(
        &self,
        batch: u64,
        mut f: impl FnMut(&[u64]),
        buf: &mut Vec<u64>,
    ) -> Result<(), Error> {
        let streaming = batch != u64::MAX;
        self.with_decoder(|dec| {
            loop {
                if streaming {
                    buf.clear();
                }
                let start = buf.len();
                let n = dec.decode_into(buf, batch.max(1));
                let new = buf.get(start..).unwrap_or_default();
                if !new.is_empty() {
                    f(new);
                }
                if n? == 0 {
                    return Ok(());
                }
            }
        })
    }

    /// Runs `f` with the chunk's decoder (its sequence compiled and expanded).
    #[inline]
    fn with_decoder<T>(
        &self,
        f: impl for<'p> FnOnce(&mut ChunkDecoder<'p, Expander<'p>>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let prog = self.compile()?;
        let bits = BitReader::new(Expander::new(&prog, &self.process.dictionary));
        f(&mut self.process.table.decoder(
            self.first_edge_id,
            self.edge_count,
            bits,
            self.context(),
            self.sequence_offset.0,
            self.process.options.lenient,
        ))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProcCol {
    Pid,
    Dict,
    Table,
    Threads,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ThreadCol {
    Id,
    Data,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkCol {
    Preceding,
    Instr,
    Edges,
    First,
    Seq,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TransCol {
    Current,
    Code,
    Next,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    Top,
    Processes { first: bool },
    ProcessRest { col: usize },
    Threads { first: bool },
    ThreadRest { col: usize },
    Chunks { first: bool },
    End,
    Done,
}

/// The streaming reader: an iterator of [`Event`]s that fuses after the first error.
#[derive(Debug)]
pub struct Reader<'a, S> {
    lex: Lexer<S>,
    options: ReadOptions,
    state: State,
    major: Option<u64>,
    minor: Option<u64>,
    proc_cols: Vec<ProcCol>,
    thread_cols: Vec<ThreadCol>,
    chunk_cols: Vec<ChunkCol>,
    process: Option<Arc<Process>>,
    process_index: u64,
    thread: u64,
    chunk_index: u64,
    marker: std::marker::PhantomData<&'a [u8]>,
}

/// A reader over a byte slice (zero-copy sequences).
pub type SliceReader<'a> = Reader<'a, SliceSource<'a>>;
/// A reader over an `io::Read` (one chunk in memory at a time).
pub type StreamReader<R> = Reader<'static, ReadSource<R>>;

impl<'a> Reader<'a, SliceSource<'a>> {
    /// A reader over the bytes of a DCFG-Trace.
    #[must_use]
    pub fn from_slice(bytes: &'a [u8], options: ReadOptions) -> Self {
        Reader::new(SliceSource::new(bytes), options)
    }
}

impl<R: Read> Reader<'static, ReadSource<R>> {
    /// A reader over a stream (use a decompressor for `.bz2`).
    pub fn from_reader(inner: R, options: ReadOptions) -> Self {
        Reader::new(ReadSource::new(inner), options)
    }
}

/// An integer value named `what` (a column or key), with this crate's errors.
fn integer<'a, S: Source<'a>>(lex: &mut Lexer<S>, what: &'static str) -> Result<u64, Error> {
    lex.u64().map_err(|e| Error::integer(e, what))
}

fn header<'a, S: Source<'a>, C>(
    lex: &mut Lexer<S>,
    what: &'static str,
    map: impl Fn(&[u8]) -> C,
) -> Result<Vec<C>, Error> {
    lex.expect(b'[', what)?;
    lex.expect(b'[', "a header row (an array of column names)")?;
    let mut cols = Vec::new();
    let mut first = true;
    while lex.next_elem(&mut first)? {
        let name = lex.string_bytes_at()?.0;
        LimitExceeded::check(
            Offset(lex.offset()),
            "header columns",
            cols.len() as u64,
            1024,
        )?;
        cols.push(map(&name));
    }
    Ok(cols)
}

impl<'a, S: Source<'a>> Reader<'a, S> {
    /// A reader over any source.
    pub fn new(src: S, options: ReadOptions) -> Self {
        Reader {
            lex: Lexer::new(src),
            options,
            state: State::Start,
            major: None,
            minor: None,
            proc_cols: Vec::new(),
            thread_cols: Vec::new(),
            chunk_cols: Vec::new(),
            process: None,
            process_index: 0,
            thread: 0,
            chunk_index: 0,
            marker: std::marker::PhantomData,
        }
    }

    /// `MAJOR_VERSION` and `MINOR_VERSION`, once read (they come first in a conforming file).
    #[must_use]
    pub fn version(&self) -> (Option<u64>, Option<u64>) {
        (self.major, self.minor)
    }

    /// Bytes consumed so far.
    #[must_use]
    pub fn offset(&self) -> Offset {
        Offset(self.lex.offset())
    }

    /// The next event, `Ok(None)` at the end.
    ///
    /// # Errors
    ///
    /// The first error in the file; afterwards the reader returns `Ok(None)`.
    pub fn next_event(&mut self) -> Result<Option<Event<'a>>, Error> {
        match self.step() {
            Ok(e) => Ok(e),
            Err(e) => {
                self.state = State::Done;
                Err(e)
            }
        }
    }

    fn step(&mut self) -> Result<Option<Event<'a>>, Error> {
        loop {
            match self.state {
                State::Done => return Ok(None),
                State::Start => {
                    self.lex.expect(b'{', "a JSON object (a DCFG-Trace)")?;
                    self.state = State::Top;
                    self.top(true)?;
                }
                State::Top => self.top(false)?,
                State::End => {
                    self.lex.end("the end of the input")?;
                    self.state = State::Done;
                    return Ok(None);
                }
                State::Processes { first } => {
                    let mut first = first;
                    if !self.lex.next_elem(&mut first)? {
                        self.state = State::Top;
                        self.top(false)?;
                        continue;
                    }
                    return self.process_row().map(Some);
                }
                State::ProcessRest { col } => {
                    self.rest_of_row(col, self.proc_cols.len())?;
                    self.state = State::Processes { first: false };
                }
                State::Threads { first } => {
                    let mut first = first;
                    if !self.lex.next_elem(&mut first)? {
                        let col = self.col_after(&self.proc_cols, ProcCol::Threads);
                        self.state = State::ProcessRest { col };
                        continue;
                    }
                    return self.thread_row().map(Some);
                }
                State::ThreadRest { col } => {
                    self.rest_of_row(col, self.thread_cols.len())?;
                    self.state = State::Threads { first: false };
                }
                State::Chunks { first } => {
                    let mut first = first;
                    if !self.lex.next_elem(&mut first)? {
                        let col = self.col_after(&self.thread_cols, ThreadCol::Data);
                        self.state = State::ThreadRest { col };
                        continue;
                    }
                    self.state = State::Chunks { first: false };
                    return self.chunk_row().map(|c| Some(Event::Chunk(c)));
                }
            }
        }
    }

    fn col_after<C: PartialEq>(&self, cols: &[C], c: C) -> usize {
        cols.iter()
            .position(|x| *x == c)
            .map_or(cols.len(), |i| i.saturating_add(1))
    }

    /// Skips the values of columns `col..` of a row and its `]`.
    fn rest_of_row(&mut self, col: usize, ncols: usize) -> Result<(), Error> {
        let mut first = col == 0;
        let mut col = col;
        while self.lex.next_elem(&mut first)? {
            if col >= ncols {
                return Err(Error::structure(
                    self.lex.offset(),
                    "a row with more values than its table header",
                ));
            }
            self.lex.skip_value()?;
            col = col.saturating_add(1);
        }
        Ok(())
    }

    /// Top-level members until `PROCESSES` (state `Processes`) or the end (`End`).
    fn top(&mut self, first: bool) -> Result<(), Error> {
        let mut first = first;
        while let Some((key, at)) = self.lex.next_key_bytes(&mut first)? {
            match &*key {
                k if k == raw::MAJOR_VERSION.as_bytes() => {
                    self.major = Some(integer(&mut self.lex, raw::MAJOR_VERSION)?);
                }
                k if k == raw::MINOR_VERSION.as_bytes() => {
                    self.minor = Some(integer(&mut self.lex, raw::MINOR_VERSION)?);
                }
                k if k == raw::PROCESSES.as_bytes() => {
                    let _ = at;
                    self.proc_cols = header(&mut self.lex, "the PROCESSES table", |n| match n {
                        b"PROCESS_ID" => ProcCol::Pid,
                        b"STRING_DICTIONARY" => ProcCol::Dict,
                        b"TRANSITION_TABLE" => ProcCol::Table,
                        b"THREAD_DATA" => ProcCol::Threads,
                        _ => ProcCol::Other,
                    })?;
                    self.state = State::Processes { first: false };
                    return Ok(());
                }
                _ => self.lex.skip_value()?,
            }
        }
        self.state = State::End;
        Ok(())
    }

    fn process_row(&mut self) -> Result<Event<'a>, Error> {
        let row_at = self.lex.offset();
        self.lex.expect(b'[', "a PROCESSES row")?;
        let mut first = true;
        let (mut pid, mut dict, mut table) = (None, None, None);
        let mut col = 0usize;
        let mut has_threads = false;
        while self.lex.next_elem(&mut first)? {
            let at = self.lex.offset();
            match self.proc_cols.get(col).copied() {
                None => {
                    return Err(Error::structure(
                        at,
                        "a PROCESSES row with more values than its header",
                    ));
                }
                Some(ProcCol::Pid) => pid = Some(integer(&mut self.lex, raw::PROCESS_ID)?),
                Some(ProcCol::Dict) => dict = Some(self.dictionary()?),
                Some(ProcCol::Table) => table = Some(self.transitions()?),
                Some(ProcCol::Other) => self.lex.skip_value()?,
                Some(ProcCol::Threads) => {
                    has_threads = true;
                    break;
                }
            }
            col = col.saturating_add(1);
        }
        let Some(pid) = pid else {
            return Err(Error::structure(
                row_at,
                "PROCESSES row without PROCESS_ID (before THREAD_DATA)",
            ));
        };
        let dictionary = match dict {
            Some(entries) => Dictionary::new(pid, entries)?,
            None => Dictionary::default(),
        };
        let (rows, offsets) = table.unwrap_or_default();
        let table = TransitionTable::new(pid, rows, &offsets, self.options.lenient)?;
        let process = Arc::new(Process {
            pid,
            index: self.process_index,
            offset: Offset(row_at),
            dictionary,
            table,
            options: self.options,
        });
        self.process_index = self.process_index.saturating_add(1);
        self.process = Some(Arc::clone(&process));
        if has_threads {
            if self.lex.null()? {
                self.state = State::ProcessRest {
                    col: col.saturating_add(1),
                };
            } else {
                self.thread_cols = header(&mut self.lex, "the THREAD_DATA table", |n| match n {
                    b"THREAD_ID" => ThreadCol::Id,
                    b"TRACE_DATA" => ThreadCol::Data,
                    _ => ThreadCol::Other,
                })?;
                self.state = State::Threads { first: false };
            }
        } else {
            self.state = State::Processes { first: false };
        }
        Ok(Event::Process(process))
    }

    fn dictionary(&mut self) -> Result<Vec<(String, Vec<u8>, u64)>, Error> {
        let mut out = Vec::new();
        if self.lex.null()? {
            return Ok(out);
        }
        self.lex.expect(b'{', "a STRING_DICTIONARY object")?;
        let mut first = true;
        while let Some((key, at)) = self.lex.next_key_bytes(&mut first)? {
            LimitExceeded::check(
                Offset(at),
                "STRING_DICTIONARY entries",
                out.len() as u64,
                MAX_DICTIONARY,
            )?;
            let (value, vat) = self.lex.string_bytes_at()?;
            out.push((
                String::from_utf8_lossy(&key).into_owned(),
                value.into_owned(),
                vat,
            ));
        }
        Ok(out)
    }

    #[allow(clippy::type_complexity)] // rows and their offsets
    fn transitions(&mut self) -> Result<(Vec<TransitionRow>, Vec<u64>), Error> {
        let mut rows = Vec::new();
        let mut offsets = Vec::new();
        if self.lex.null()? {
            return Ok((rows, offsets));
        }
        let cols = header(&mut self.lex, "a TRANSITION_TABLE", |n| match n {
            b"CURRENT_EDGE_ID" => TransCol::Current,
            b"TRANSITION_CODE" => TransCol::Code,
            b"NEXT_EDGE_IDS" => TransCol::Next,
            _ => TransCol::Other,
        })?;
        let mut first = false;
        while self.lex.next_elem(&mut first)? {
            let at = self.lex.offset();
            LimitExceeded::check(
                Offset(at),
                "TRANSITION_TABLE rows",
                rows.len() as u64,
                MAX_TRANSITIONS,
            )?;
            self.lex.expect(b'[', "a TRANSITION_TABLE row")?;
            let (mut current, mut code, mut next) = (None, None, None);
            let mut rfirst = true;
            let mut col = 0usize;
            while self.lex.next_elem(&mut rfirst)? {
                let vat = self.lex.offset();
                match cols.get(col) {
                    None => {
                        return Err(Error::structure(
                            vat,
                            "a TRANSITION_TABLE row with more values than its header",
                        ));
                    }
                    Some(TransCol::Current) => {
                        current = Some(integer(&mut self.lex, raw::CURRENT_EDGE_ID)?)
                    }
                    Some(TransCol::Code) => {
                        let s = self.lex.string_bytes_at()?.0;
                        code = Some(Code::parse(&s).ok_or_else(|| Error::Syntax {
                            offset: Offset(vat),
                            expected: "a TRANSITION_CODE of at most 32 `0`/`1` characters",
                            found: format!("{:?}", String::from_utf8_lossy(&s)),
                        })?);
                    }
                    Some(TransCol::Next) => {
                        self.lex.expect(b'[', "a NEXT_EDGE_IDS array")?;
                        let mut ids = Vec::new();
                        let mut f = true;
                        while self.lex.next_elem(&mut f)? {
                            LimitExceeded::check(
                                Offset(self.lex.offset()),
                                "NEXT_EDGE_IDS length",
                                ids.len() as u64,
                                MAX_GROUP.saturating_sub(1),
                            )?;
                            ids.push(integer(&mut self.lex, raw::NEXT_EDGE_IDS)?);
                        }
                        if ids.is_empty() {
                            return Err(Error::structure(vat, "empty NEXT_EDGE_IDS"));
                        }
                        next = Some(ids);
                    }
                    Some(TransCol::Other) => self.lex.skip_value()?,
                }
                col = col.saturating_add(1);
            }
            match (current, code, next) {
                (Some(current), Some(code), Some(next)) => {
                    rows.push(TransitionRow {
                        current,
                        code,
                        next,
                    });
                    offsets.push(at);
                }
                _ => {
                    return Err(Error::structure(
                        at,
                        "TRANSITION_TABLE row without CURRENT_EDGE_ID, TRANSITION_CODE and NEXT_EDGE_IDS",
                    ));
                }
            }
        }
        Ok((rows, offsets))
    }

    fn thread_row(&mut self) -> Result<Event<'a>, Error> {
        let at = self.lex.offset();
        self.lex.expect(b'[', "a THREAD_DATA row")?;
        let mut first = true;
        let mut tid = None;
        let mut col = 0usize;
        let pid = self.process.as_ref().map_or(0, |p| p.pid);
        while self.lex.next_elem(&mut first)? {
            let vat = self.lex.offset();
            match self.thread_cols.get(col) {
                None => {
                    return Err(Error::structure(
                        vat,
                        "a THREAD_DATA row with more values than its header",
                    ));
                }
                Some(ThreadCol::Id) => tid = Some(integer(&mut self.lex, raw::THREAD_ID)?),
                Some(ThreadCol::Other) => self.lex.skip_value()?,
                Some(ThreadCol::Data) => {
                    let Some(thread) = tid else {
                        return Err(Error::structure(
                            at,
                            "THREAD_DATA row with TRACE_DATA before THREAD_ID",
                        ));
                    };
                    self.thread = thread;
                    self.chunk_index = 0;
                    if self.lex.null()? {
                        self.state = State::ThreadRest {
                            col: col.saturating_add(1),
                        };
                    } else {
                        self.chunk_cols =
                            header(&mut self.lex, "a TRACE_DATA table", |n| match n {
                                b"PRECEDING_INSTR_COUNT" => ChunkCol::Preceding,
                                b"INSTR_COUNT" => ChunkCol::Instr,
                                b"EDGE_COUNT" => ChunkCol::Edges,
                                b"FIRST_EDGE_ID" => ChunkCol::First,
                                b"EDGE_ID_SEQUENCE" => ChunkCol::Seq,
                                _ => ChunkCol::Other,
                            })?;
                        self.state = State::Chunks { first: false };
                    }
                    return Ok(Event::Thread {
                        pid,
                        thread,
                        offset: Offset(at),
                    });
                }
            }
            col = col.saturating_add(1);
        }
        // A row without TRACE_DATA: a thread with no chunks.
        let Some(thread) = tid else {
            return Err(Error::structure(at, "THREAD_DATA row without THREAD_ID"));
        };
        self.state = State::Threads { first: false };
        Ok(Event::Thread {
            pid,
            thread,
            offset: Offset(at),
        })
    }

    fn chunk_row(&mut self) -> Result<Chunk<'a>, Error> {
        let at = self.lex.offset();
        self.lex.expect(b'[', "a TRACE_DATA row")?;
        let mut first = true;
        let (mut pre, mut instr, mut edges, mut first_edge) = (None, None, None, None);
        let mut seq: Option<(Cow<'a, [u8]>, u64)> = None;
        let mut col = 0usize;
        while self.lex.next_elem(&mut first)? {
            let vat = self.lex.offset();
            match self.chunk_cols.get(col) {
                None => {
                    return Err(Error::structure(
                        vat,
                        "a TRACE_DATA row with more values than its header",
                    ));
                }
                Some(ChunkCol::Preceding) => {
                    pre = Some(integer(&mut self.lex, raw::PRECEDING_INSTR_COUNT)?)
                }
                Some(ChunkCol::Instr) => instr = Some(integer(&mut self.lex, raw::INSTR_COUNT)?),
                Some(ChunkCol::Edges) => edges = Some(integer(&mut self.lex, raw::EDGE_COUNT)?),
                Some(ChunkCol::First) => {
                    if !self.lex.null()? {
                        first_edge = Some(integer(&mut self.lex, raw::FIRST_EDGE_ID)?);
                    }
                }
                Some(ChunkCol::Seq) => {
                    if !self.lex.null()? {
                        seq = Some(self.lex.string_bytes_at()?);
                    }
                }
                Some(ChunkCol::Other) => self.lex.skip_value()?,
            }
            col = col.saturating_add(1);
        }
        let process = self
            .process
            .clone()
            .ok_or_else(|| Error::structure(at, "TRACE_DATA row outside a process"))?;
        let (Some(pre), Some(instr), Some(edges)) = (pre, instr, edges) else {
            return Err(Error::structure(
                at,
                "TRACE_DATA row without PRECEDING_INSTR_COUNT, INSTR_COUNT and EDGE_COUNT",
            ));
        };
        let (sequence, sequence_offset) = seq.unwrap_or((Cow::Borrowed(&[]), self.lex.offset()));
        let chunk = Chunk {
            process,
            thread: self.thread,
            index: self.chunk_index,
            preceding_instr_count: pre,
            instr_count: instr,
            edge_count: edges,
            first_edge_id: first_edge,
            sequence,
            offset: Offset(at),
            sequence_offset: Offset(sequence_offset),
        };
        self.chunk_index = self.chunk_index.saturating_add(1);
        Ok(chunk)
    }
}

impl<'a, S: Source<'a>> Iterator for Reader<'a, S> {
    type Item = Result<Event<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

impl<'a, S: Source<'a>> std::iter::FusedIterator for Reader<'a, S> {}

/// A chunk whose `PRECEDING_INSTR_COUNT` does not follow from the previous chunk's (a
/// warning: chunks need not be contiguous, section 3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChainGap {
    /// Index of the chunk.
    pub chunk: u64,
    /// Previous chunk's `PRECEDING_INSTR_COUNT + INSTR_COUNT`.
    pub expected: u64,
    /// This chunk's `PRECEDING_INSTR_COUNT`.
    pub found: u64,
    /// Offset of the chunk row.
    pub offset: Offset,
}

impl std::fmt::Display for ChainGap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chunk {}: PRECEDING_INSTR_COUNT {} does not continue the previous chunk ({}) at offset {}",
            self.chunk, self.found, self.expected, self.offset
        )
    }
}

/// One thread's chunks, not decoded.
#[derive(Clone, Debug)]
pub struct ThreadTrace<'a> {
    /// `THREAD_ID`.
    pub thread: u64,
    /// Offset of the thread row.
    pub offset: Offset,
    /// The chunks, in file (execution) order.
    pub chunks: Vec<Chunk<'a>>,
}

/// One process: its tables and threads.
#[derive(Clone, Debug)]
pub struct ProcessTrace<'a> {
    /// The tables.
    pub process: Arc<Process>,
    /// The threads, in file order.
    pub threads: Vec<ThreadTrace<'a>>,
}

/// A whole file, parsed and indexed but not decoded: chunks borrow their sequences from the
/// input, so this costs little more than the input itself.
#[derive(Clone, Debug, Default)]
pub struct Trace<'a> {
    /// `MAJOR_VERSION`.
    pub major: Option<u64>,
    /// `MINOR_VERSION`.
    pub minor: Option<u64>,
    /// The processes, in file order.
    pub processes: Vec<ProcessTrace<'a>>,
}

impl<'a> Trace<'a> {
    /// Parses a whole file (checking the tables and the JSON, not decoding the chunks).
    ///
    /// # Errors
    ///
    /// The first error of the [`Reader`].
    pub fn parse(bytes: &'a [u8], options: ReadOptions) -> Result<Trace<'a>, Error> {
        let mut r = Reader::from_slice(bytes, options);
        let mut t = Trace::default();
        while let Some(ev) = r.next_event()? {
            match ev {
                Event::Process(p) => t.processes.push(ProcessTrace {
                    process: p,
                    threads: Vec::new(),
                }),
                Event::Thread { thread, offset, .. } => {
                    if let Some(p) = t.processes.last_mut() {
                        p.threads.push(ThreadTrace {
                            thread,
                            offset,
                            chunks: Vec::new(),
                        });
                    }
                }
                Event::Chunk(c) => {
                    if let Some(th) = t.processes.last_mut().and_then(|p| p.threads.last_mut()) {
                        th.chunks.push(c);
                    }
                }
            }
        }
        (t.major, t.minor) = r.version();
        Ok(t)
    }

    /// The thread `thread` of process `pid`; `None` when it was not traced (only thread 0
    /// is, by default, in Intel's tools).
    #[must_use]
    pub fn thread(&self, pid: u64, thread: u64) -> Option<&ThreadTrace<'a>> {
        self.processes
            .iter()
            .filter(|p| p.process.pid == pid)
            .flat_map(|p| &p.threads)
            .find(|t| t.thread == thread)
    }
}

impl<'a> ThreadTrace<'a> {
    /// The index of the chunk holding the instruction count `icount` (counted on this
    /// thread from the start of the process): the last chunk whose
    /// `PRECEDING_INSTR_COUNT` ≤ `icount`, if `icount` is inside it. Binary search over
    /// the chunk table; nothing is decoded.
    #[must_use]
    pub fn seek(&self, icount: u64) -> Option<usize> {
        let i = self
            .chunks
            .partition_point(|c| c.preceding_instr_count <= icount)
            .checked_sub(1)?;
        let c = self.chunks.get(i)?;
        (icount < c.preceding_instr_count.saturating_add(c.instr_count.max(1))).then_some(i)
    }

    /// Chunks whose `PRECEDING_INSTR_COUNT` does not chain from the previous chunk.
    #[must_use]
    pub fn chain_gaps(&self) -> Vec<ChainGap> {
        self.chunks
            .windows(2)
            .filter_map(|w| {
                let [a, b] = w else { return None };
                let expected = a.preceding_instr_count.saturating_add(a.instr_count);
                (b.preceding_instr_count != expected).then_some(ChainGap {
                    chunk: b.index,
                    expected,
                    found: b.preceding_instr_count,
                    offset: b.offset,
                })
            })
            .collect()
    }

    /// Decodes every chunk on up to `workers` threads and maps each result with `f`;
    /// results are in chunk order. Each worker reuses one buffer.
    pub fn map_parallel<T, F>(&self, workers: usize, f: F) -> Vec<T>
    where
        T: Send,
        F: Fn(&Chunk<'a>, Result<&[u64], Error>) -> T + Sync,
    {
        map_chunks_parallel(&self.chunks, workers, f)
    }

    /// Decodes every chunk on up to `workers` threads; results in chunk order.
    #[must_use]
    pub fn decode_parallel(&self, workers: usize) -> Vec<Result<Vec<u64>, Error>> {
        self.map_parallel(workers, |_, r| r.map(<[u64]>::to_vec))
    }
}

/// Decodes `chunks` on up to `workers` threads (std::thread::scope; chunks handed out one
/// at a time, so uneven chunks balance) and maps each result with `f`, in chunk order.
pub fn map_chunks_parallel<'a, T, F>(chunks: &[Chunk<'a>], workers: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(&Chunk<'a>, Result<&[u64], Error>) -> T + Sync,
{
    let workers = workers.clamp(1, chunks.len().max(1));
    let next = AtomicUsize::new(0);
    let run = || {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(c) = chunks.get(i) else { break };
            buf.clear();
            let r = c.decode_into(&mut buf).map(|()| buf.as_slice());
            out.push((i, f(c, r)));
        }
        out
    };
    let mut all: Vec<(usize, T)> = if workers == 1 {
        run()
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers).map(|_| s.spawn(run)).collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, t)| t).collect()
}
