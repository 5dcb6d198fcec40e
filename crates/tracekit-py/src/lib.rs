//! `tracekit` for Python: any trace the registry reads, as dicts or as Arrow.
//!
//! A thin layer over `trace-registry`: `open` detects the format ([`trace_registry::detect`])
//! and checks that its records open; iterating a `Trace` walks the records as trees of
//! native values in `tracekit dump`'s shape ([`trace_sinks::native`]), turned into
//! `dict`s; `Trace.to_arrow` streams the record batches of one Parquet-export table
//! ([`trace_sinks::parquet::Batches`], filled through the readers' typed column
//! fast path where they have one) to pyarrow through the Arrow C data interface. No code
//! here knows a format.
//!
//! Each pass reads the input afresh in a reader thread of its own (which owns the input and
//! its record reader, so an iterator outlives its `Trace` safely): the parsing, the trees and
//! the Arrow batches are built there, without the GIL, and handed over through a bounded
//! channel (memory: a few chunks or batches). Python waits for them with the GIL released.
//! `state` and far `seek`s use the input and seek index a `Trace` keeps once made.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use arrow_array::RecordBatch;
use arrow_pyarrow::ToPyArrow;
use arrow_schema::SchemaRef;
use pyo3::create_exception;
use pyo3::exceptions::{
    PyException, PyFileExistsError, PyFileNotFoundError, PyIndexError, PyPermissionError,
    PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use trace_core::Located;
use trace_registry::steps::SeekIndex;
use trace_registry::stretches::{Ended, Stretches};
use trace_registry::{Ctx, Error, Handler, Info, Input, Options, Records, Value};
use trace_sinks::native::{Native, Node};
use trace_sinks::parquet::{
    Batches, Compression, Dataset, Origin, ParquetOptions, Pulled, TableSummary,
};

mod graph;

/// The allocator of the extension's own allocations (Python's are not affected): `to_arrow`
/// allocates a batch of columns at a time, which pyarrow frees when done with it. glibc
/// returns such freed pages to the kernel and faults them in again for the next batch
/// (in process, as much kernel time as the fill's own); mimalloc keeps them, as in the tracekit
/// binary. Every buffer an Arrow array hands to pyarrow is released through this
/// library's own release callback, so it is freed by the allocator that made it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

create_exception!(
    tracekit,
    TraceError,
    PyException,
    "A trace that cannot be read: `offset` (byte offset or None), `path` (the JSON path for \
     the JSON formats, else None), `record` (record index or None)."
);
create_exception!(
    tracekit,
    FormatError,
    TraceError,
    "Input of no known format (pass format=NAME to choose one)."
);

/// Records per chunk handed from the reader thread to Python.
const CHUNK: usize = 512;
/// Chunks (or Arrow batches) waiting in the channel at most.
const QUEUE: usize = 4;
/// Rows per Arrow batch (and per stretch of `to_arrow` on several threads): about 3 MiB
/// of x64dbg columns, so that the memory of dropped batches comes back while it is still
/// in cache (the fill alone, from memory, a fifth faster than with 65,536 rows; through
/// Python the gain is within this host's noise), and fewer bytes are held meanwhile.
const BATCH_ROWS: usize = 1 << 14;
/// `seek` reads the records before one nearer than this rather than build (or load) the
/// format's index: a few milliseconds.
const SEEK_BY_READING: u64 = 1 << 12;

/// A registry error as a Python exception: files that cannot be opened or made as `OSError`s,
/// unsupported operations as `ValueError`, undetectable input as [`FormatError`], the rest
/// (the trace is damaged) as [`TraceError`] with where.
fn py_err(e: Error) -> PyErr {
    let msg = e.to_string();
    match &e {
        Error::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::NotFound => return PyFileNotFoundError::new_err(msg),
            std::io::ErrorKind::PermissionDenied => return PyPermissionError::new_err(msg),
            std::io::ErrorKind::AlreadyExists => return PyFileExistsError::new_err(msg),
            _ => {}
        },
        Error::Unsupported(_) => return PyValueError::new_err(msg),
        _ => {}
    }
    let err = match &e {
        Error::Detect(_) => FormatError::new_err(msg),
        _ => TraceError::new_err(msg),
    };
    Python::attach(|py| {
        let v = err.value(py);
        let set = || -> PyResult<()> {
            v.setattr("offset", e.offset().map(|o| o.0))?;
            v.setattr("path", e.path())?;
            v.setattr("record", e.record())?;
            Ok(())
        };
        // Attributes on a fresh exception object cannot fail in practice; the exception
        // is raised either way.
        let _ = set();
    });
    err
}

/// Where a trace comes from, so that every pass can open it again.
#[derive(Clone, Debug)]
enum Source {
    Path(PathBuf),
    Bytes { name: String, bytes: Arc<[u8]> },
}

impl Source {
    fn input(&self) -> Result<Input, Error> {
        match self {
            Source::Path(p) => Input::open(p.as_os_str()),
            // Shared, not copied: each reader (of several threads) opens the same bytes.
            Source::Bytes { name, bytes } => Input::from_shared(name.clone(), Arc::clone(bytes)),
        }
    }
}

/// A trace as opened: where, its handler, its options.
#[derive(Clone)]
struct Opened {
    source: Source,
    handler: &'static dyn Handler,
    options: Options,
}

impl Opened {
    /// Runs `body` over the records in a reader thread; its items (and the error that
    /// ends them) arrive through the returned channel.
    fn spawn<T, F>(&self, body: F) -> Receiver<Result<T, Error>>
    where
        T: Send + 'static,
        F: FnOnce(&mut dyn Records, &SyncSender<Result<T, Error>>) -> Result<(), Error>
            + Send
            + 'static,
    {
        let handler = self.handler;
        self.spawn_on_input(move |input, ctx, send| {
            let mut records = handler.records(input, ctx)?;
            body(records.as_mut(), send)
        })
    }

    /// [`Opened::spawn`] over the input opened afresh (for an analysis, not the records).
    fn spawn_on_input<T, F>(&self, body: F) -> Receiver<Result<T, Error>>
    where
        T: Send + 'static,
        F: FnOnce(&mut Input, &mut Ctx<'_>, &SyncSender<Result<T, Error>>) -> Result<(), Error>
            + Send
            + 'static,
    {
        let (tx, rx) = sync_channel(QUEUE);
        let me = self.clone();
        let send = tx.clone();
        let spawned = std::thread::Builder::new()
            .name("tracekit-reader".into())
            .spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| -> Result<(), Error> {
                    let mut input = me.source.input()?;
                    let mut ctx = Ctx::new(&me.options);
                    body(&mut input, &mut ctx, &send)
                });
                // The readers do not panic on any input; should one, Python gets an error
                // rather than a truncated result.
                let result = std::panic::catch_unwind(run)
                    .unwrap_or_else(|_| Err(internal("the reader thread panicked")));
                if let Err(e) = result {
                    let _ = send.send(Err(e));
                }
            });
        if let Err(e) = spawned {
            let _ = tx.send(Err(Error::io("cannot start a reader thread", e)));
        }
        rx
    }

    /// Opens the input afresh and runs `f` on it (in this thread).
    fn with_input<T>(
        &self,
        f: impl FnOnce(&mut Input, &mut Ctx<'_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut input = self.source.input()?;
        let mut ctx = Ctx::new(&self.options);
        f(&mut input, &mut ctx)
    }
}

fn internal(what: &str) -> Error {
    Error::io("tracekit", std::io::Error::other(what.to_owned()))
}

/// The source of `open`'s first argument: bytes-like objects are copied, anything else
/// is a path (`str` or `os.PathLike`).
fn source_of(obj: &Bound<'_, PyAny>) -> PyResult<Source> {
    let py = obj.py();
    let bytes = if obj.is_instance_of::<PyBytes>() {
        Some(obj.clone())
    } else if obj.is_instance_of::<pyo3::types::PyByteArray>()
        || obj.is_instance_of::<pyo3::types::PyMemoryView>()
    {
        // `bytes(x)`: the buffer protocol is not in the stable ABI before 3.11.
        Some(py.get_type::<PyBytes>().call1((obj,))?)
    } else {
        None
    };
    if let Some(b) = bytes {
        let b = b.cast_into::<PyBytes>()?;
        return Ok(Source::Bytes {
            name: "<bytes>".into(),
            bytes: Arc::from(b.as_bytes()),
        });
    }
    let path: PathBuf = obj.extract().map_err(|_| {
        PyTypeError::new_err("open() takes a path (str or os.PathLike) or bytes-like data")
    })?;
    if path.as_os_str() == "-" {
        return Err(PyValueError::new_err(
            "open('-') would read stdin: pass sys.stdin.buffer.read() instead",
        ));
    }
    Ok(Source::Path(path))
}

/// Builds the registry's options from `open`'s keyword arguments.
fn options_of(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Options> {
    let mut o = Options::default();
    let Some(kwargs) = kwargs else {
        return Ok(o);
    };
    for (k, v) in kwargs.iter() {
        let key: String = k.extract()?;
        match key.as_str() {
            "big_endian" => o.big_endian = v.extract()?,
            "lenient" => o.lenient = v.extract()?,
            "disasm" => o.disasm = v.extract()?,
            "dcfg" => o.dcfg = v.extract()?,
            "record_size" => o.record_size = v.extract()?,
            "arch" => o.arch = v.extract()?,
            "index" => o.index = v.extract()?,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "unknown option {other:?}; options: big_endian, lenient, disasm, dcfg, \
                     record_size, arch, index"
                )));
            }
        }
    }
    Ok(o)
}

/// Opens a trace: a path (str or os.PathLike; .gz and .bz2 are decompressed) or bytes-like
/// data, of the format `format` names or the one detected from its content.
///
/// Options (as the command line's): `big_endian` (gdb-tfile), `lenient` (dcfg-trace),
/// `dcfg` (dcfg-trace: the DCFG of the run), `record_size` (amber FULL), `arch` (tenet),
/// `disasm` (x64dbg, tfile and amber records get `asm`), `index` (a sidecar index path).
///
/// Raises FormatError for input of no known format, TraceError when its records cannot be
/// opened (a damaged header), FileNotFoundError, ValueError for an unknown format name or
/// an option the input's format does not read (`arch` for an x64dbg trace).
#[pyfunction]
#[pyo3(signature = (source, format=None, **options))]
fn open(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    format: Option<&str>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Trace> {
    let source = source_of(source)?;
    let options = options_of(options)?;
    let format = format.map(str::to_owned);
    let opened = py.detach(move || -> Result<(Opened, Vec<String>), Error> {
        let mut input = source.input()?;
        let handler = match format.as_deref() {
            Some(name) => trace_registry::by_name(name)
                .ok_or_else(|| Error::Unsupported(format!("unknown format {name:?}")))?,
            None => trace_registry::detect(&input)
                .ok_or_else(|| trace_registry::detection_error(input.name()))?,
        };
        let unread = options.unread(handler.offers());
        if !unread.is_empty() {
            return Err(Error::Unsupported(format!(
                "{} not for {} input (each applies to one format; see open's documentation)",
                unread.join(", "),
                handler.name()
            )));
        }
        // The records must open: a damaged header is an error of `open`, not of the first
        // iteration.
        let tables = {
            let mut ctx = Ctx::new(&options);
            let records = handler.records(&mut input, &mut ctx)?;
            Batches::table_names(records.tables())
        };
        Ok((
            Opened {
                source,
                handler,
                options,
            },
            tables,
        ))
    });
    let (opened, tables) = opened.map_err(py_err)?;
    Ok(Trace {
        opened,
        tables,
        kept: Arc::new(Mutex::new(Kept::default())),
    })
}

/// Checks a whole trace: returns None, or raises the first problem (TraceError with its
/// offset and path; FormatError for input of no known format).
#[pyfunction]
#[pyo3(signature = (source, format=None, **options))]
fn validate(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    format: Option<&str>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<()> {
    let source = source_of(source)?;
    let options = options_of(options)?;
    let format = format.map(str::to_owned);
    py.detach(move || -> Result<(), Error> {
        let mut input = source.input()?;
        let handler = match format.as_deref() {
            Some(name) => trace_registry::by_name(name)
                .ok_or_else(|| Error::Unsupported(format!("unknown format {name:?}")))?,
            None => trace_registry::detect(&input)
                .ok_or_else(|| trace_registry::detection_error(input.name()))?,
        };
        handler.validate(&mut input, &mut Ctx::new(&options))?;
        Ok(())
    })
    .map_err(py_err)
}

/// An opened trace. Iterating it yields one dict per record (the keys of `tracekit
/// dump`'s lines, integers as int, byte strings as bytes); each iteration reads the file
/// afresh.
#[pyclass(module = "tracekit", frozen)]
struct Trace {
    opened: Opened,
    tables: Vec<String>,
    /// What `state` and `seek` keep between calls.
    kept: Arc<Mutex<Kept>>,
}

/// The open input (loaded whole: mapped, or decompressed) and the format's seek index,
/// kept by a Trace for `state` and `seek` once the first call made them.
#[derive(Default)]
struct Kept {
    input: Option<Input>,
    /// `None` until asked for; then the format's index (`None` where it has none).
    index: Option<Option<SeekIndex>>,
}

impl Kept {
    /// The kept input, opened (and loaded whole, for random access) on first use.
    fn input(&mut self, opened: &Opened) -> Result<&mut Input, Error> {
        let input = match self.input.take() {
            Some(input) => input,
            None => {
                let mut input = opened.source.input()?;
                if input.is_stream() {
                    input.bytes()?;
                }
                input
            }
        };
        Ok(self.input.insert(input))
    }

    /// The format's seek index of the trace ([`trace_registry::steps::Indexing::seek_index`]:
    /// the sidecar's, else built in one pass), made on first use. A trace without
    /// steps, or whose index cannot be built (damage), has none.
    fn index(&mut self, opened: &Opened) -> Result<Option<SeekIndex>, Error> {
        if let Some(index) = &self.index {
            return Ok(index.clone());
        }
        let input = self.input(opened)?;
        let mut ctx = Ctx::new(&opened.options);
        let index = match opened.handler.steps(input, &mut ctx) {
            Ok(mut steps) => steps.seek_index().ok().flatten().map(SeekIndex::new),
            Err(_) => None,
        };
        Ok(self.index.insert(index).clone())
    }
}

#[pymethods]
impl Trace {
    /// The format's name (`x64dbg`, `gdb-tfile`, `dcfg`, `dcfg-trace`, `tt6`, `tt6e`,
    /// `amber-full`, `tenet`).
    #[getter]
    fn format(&self) -> &'static str {
        self.opened.handler.name()
    }

    fn __repr__(&self) -> String {
        let what = match &self.opened.source {
            Source::Path(p) => format!("{:?}", p.display().to_string()),
            Source::Bytes { bytes, .. } => format!("<{} bytes>", bytes.len()),
        };
        format!(
            "<tracekit.Trace {what} format={:?}>",
            self.opened.handler.name()
        )
    }

    /// The summary of the trace (`tracekit info --json`'s content; addresses as int).
    fn info(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let opened = self.opened.clone();
        let info = py
            .detach(move || opened.with_input(|input, ctx| opened.handler.info(input, ctx)))
            .map_err(py_err)?;
        info_to_py(py, &info)
    }

    /// The output tables of the records, as `export_parquet` names its folders.
    fn tables(&self) -> Vec<String> {
        self.tables.clone()
    }

    fn __iter__(&self) -> RecordIter {
        RecordIter::new(&self.opened, 0, None)
    }

    /// The records from record `i` on (for traces of instructions, instruction `i`): an
    /// iterator of dicts as `iter(trace)` yields. An x64dbg trace jumps there through its
    /// index of full dumps (the sidecar's, else built on the first far seek and kept); other
    /// formats read the records before `i`.
    fn seek(&self, py: Python<'_>, i: u64) -> PyResult<RecordIter> {
        let index = if i < SEEK_BY_READING {
            None
        } else {
            let opened = self.opened.clone();
            py.detach(|| self.kept().index(&opened)).map_err(py_err)?
        };
        Ok(RecordIter::new(&self.opened, i, index))
    }

    /// The records of one output table (`tables()`; default: the format's main table) as
    /// a pyarrow.RecordBatchReader of batches built in a reader thread (each crossing
    /// through the Arrow C data interface, uncopied): the same columns and types as the
    /// Parquet export's files. A damaged trace raises TraceError from the batch where the
    /// damage is, after the rows before it. `"calls"` (x86/x64 traces): the call tree, as
    /// `tracekit export --calls` writes it.
    #[pyo3(signature = (table=None))]
    fn to_arrow<'py>(&self, py: Python<'py>, table: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        if table == Some("calls") && !self.tables.iter().any(|t| t == "calls") {
            return arrow_reader(py, spawn_calls(&self.opened));
        }
        let table = self.table_name(table)?;
        // Several threads build stretches of the batches when there are cores for them,
        // unless the trace is known to have no seek index. The index is made meanwhile
        // (while the first thread builds the first stretches from the start) when it is
        // not known yet, and kept by the Trace.
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        // Not waiting (with the GIL) for a seek index being made: then it is made again.
        let known = match self.kept.try_lock() {
            Ok(kept) => kept.index.clone(),
            Err(TryLockError::Poisoned(p)) => p.into_inner().index.clone(),
            Err(TryLockError::WouldBlock) => None,
        };
        let (handler, kept) = (self.opened.handler, Arc::clone(&self.kept));
        let rx = self.opened.spawn_on_input(move |input, ctx, tx| {
            let keep = |made: Option<SeekIndex>| {
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                kept.index.get_or_insert(made).clone()
            };
            let how = Stretches::new(handler, BATCH_ROWS as u64, threads.min(MAX_THREADS));
            let how = match known {
                Some(index) => how.with_index(index),
                None => how.keeping_index(&keep),
            };
            let reading = how.open(input, ctx)?;
            let schema = Batches::new(reading.tables(), &table, BATCH_ROWS)?.schema();
            if tx.send(Ok(Chunk::Schema(schema))).is_err() {
                return Ok(());
            }
            let ended = reading.run(
                ctx,
                |records, limit| stretch(records, &table, limit),
                |batches| {
                    batches
                        .into_iter()
                        .all(|b| tx.send(Ok(Chunk::Batch(b))).is_ok())
                },
            );
            // The rows before the damage come first, then the error.
            ended.failure.map_or(Ok(()), Err)
        });
        arrow_reader(py, rx)
    }

    /// `to_arrow(table).read_all().to_pandas()`: a pandas.DataFrame (needs pandas).
    #[pyo3(signature = (table=None))]
    fn to_pandas<'py>(&self, py: Python<'py>, table: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        self.to_arrow(py, table)?
            .call_method0("read_all")?
            .call_method0("to_pandas")
    }

    /// `polars.from_arrow(to_arrow(table).read_all())`: a polars.DataFrame (needs polars).
    #[pyo3(signature = (table=None))]
    fn to_polars<'py>(&self, py: Python<'py>, table: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
        let all = self.to_arrow(py, table)?.call_method0("read_all")?;
        py.import("polars")?.call_method1("from_arrow", (all,))
    }

    /// Writes every record as a Parquet dataset at `dir` (as `tracekit export`): one folder
    /// per table and `_tracekit.json`. Options: `compression` ("zstd", "snappy", "none"),
    /// `rows_per_file`, `row_group_rows`, `threads`, `force` (replace `dir`), `partial`
    /// (keep the records before an error, marked incomplete; the error is still raised).
    /// Returns {table: rows}.
    #[pyo3(signature = (dir, compression="zstd", rows_per_file=None, row_group_rows=1<<20, threads=1, force=false, partial=false))]
    #[allow(clippy::too_many_arguments)]
    fn export_parquet(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        compression: &str,
        rows_per_file: Option<u64>,
        row_group_rows: usize,
        threads: usize,
        force: bool,
        partial: bool,
    ) -> PyResult<Py<PyAny>> {
        let compression = match compression {
            "zstd" => Compression::Zstd,
            "snappy" => Compression::Snappy,
            "none" => Compression::None,
            other => {
                return Err(PyValueError::new_err(format!(
                    "compression {other:?}: zstd, snappy or none"
                )));
            }
        };
        let options = ParquetOptions {
            compression,
            rows_per_file,
            row_group_rows: row_group_rows.max(1),
            threads: threads.max(1),
            ..ParquetOptions::default()
        };
        let opened = self.opened.clone();
        let summaries = py
            .detach(move || export(&opened, &dir, &options, force, partial))
            .map_err(py_err)?;
        let out = PyDict::new(py);
        for t in summaries {
            out.set_item(t.name, t.rows)?;
        }
        Ok(out.into_any().unbind())
    }

    /// The named registers before instruction `i` (x64dbg, gdb-tfile, amber FULL, tenet):
    /// {"i": i, "thread": t, "regs": {"rax": int, …}}. An x64dbg trace seeks through its
    /// full register dumps (with the sidecar index when there is one).
    fn state(&self, py: Python<'_>, i: u64) -> PyResult<Py<PyAny>> {
        let opened = self.opened.clone();
        let s = py
            .detach(|| -> Result<_, Error> {
                let mut kept = self.kept();
                let index = kept.index.clone().flatten();
                let known = kept.index.is_some();
                let input = kept.input(&opened)?;
                let mut ctx = Ctx::new(&opened.options);
                let mut steps = opened.handler.steps(input, &mut ctx)?;
                if let Some(index) = &index {
                    steps.use_seek_index(index);
                }
                let s = trace_analyses::state::state_of(steps.as_mut(), opened.handler.name(), i)?;
                // The index the seek built (x64dbg in memory), for the next call.
                if !known {
                    let built = steps.seek_index().ok().flatten().map(SeekIndex::new);
                    drop(steps);
                    kept.index = Some(built);
                }
                Ok(s)
            })
            .map_err(|e| match e {
                // `steps::past_end`'s message.
                Error::Unsupported(m) if m.contains("is past the end") => PyIndexError::new_err(m),
                e => py_err(e),
            })?;
        let regs = PyDict::new(py);
        for r in &s.regs {
            let v = match &r.value {
                trace_registry::steps::RegValue::Word(w) => w.into_pyobject(py)?.into_any(),
                trace_registry::steps::RegValue::Wide(b) => {
                    let b: Vec<u8> = b.iter().rev().copied().collect();
                    big_int(py, &b)?
                }
            };
            regs.set_item(&*r.name, v)?;
        }
        let out = PyDict::new(py);
        out.set_item("i", s.i)?;
        out.set_item("thread", s.thread)?;
        out.set_item("pc", s.pc)?;
        out.set_item("regs", regs)?;
        Ok(out.into_any().unbind())
    }

    /// The memory as known before instruction `i`: `len` bytes at `addr` (default one word
    /// of the trace's ISA), as `tracekit mem --json` gives them: {"i", "addr", "len",
    /// "bytes": [int or None], "source": [instruction or None], "inferred": [bool or None],
    /// "value": bytes (None unless every byte is known)}, and for a gdb-tfile "earlier":
    /// [bool or None] (collected at an earlier frame than `i`). IndexError past the end.
    #[pyo3(signature = (i, addr, len=None))]
    fn mem(&self, py: Python<'_>, i: u64, addr: u64, len: Option<u64>) -> PyResult<Py<PyAny>> {
        use trace_analyses::mem::{MemQuery, mem};
        let query = MemQuery { at: i, addr, len };
        let opened = self.opened.clone();
        let (m, damage) = py
            .detach(move || opened.with_input(|input, ctx| mem(opened.handler, input, ctx, &query)))
            .map_err(index_error)?;
        if let Some(e) = damage {
            return Err(py_err(e));
        }
        let out = PyDict::new(py);
        out.set_item("i", m.i)?;
        out.set_item("addr", m.addr)?;
        out.set_item("len", m.len)?;
        out.set_item("bytes", m.bytes.clone())?;
        out.set_item("source", m.source.clone())?;
        out.set_item("inferred", m.inferred.clone())?;
        if let Some(earlier) = &m.earlier {
            out.set_item("earlier", earlier.clone())?;
        }
        out.set_item("value", m.value().map(|v| PyBytes::new(py, &v)))?;
        Ok(out.into_any().unbind())
    }

    /// Every access to `len` bytes at `addr` (default one word), or with `pc=` every
    /// execution of that address, as `tracekit xref` lists them: [{"i", "thread", "pc"},
    /// plus "addr", "old", "new" (ints or None) for an access], from the sidecar index when
    /// there is one.
    #[pyo3(signature = (addr=None, len=None, *, pc=None))]
    fn xref(
        &self,
        py: Python<'_>,
        addr: Option<u64>,
        len: Option<u64>,
        pc: Option<u64>,
    ) -> PyResult<Py<PyAny>> {
        use trace_analyses::xref::{XrefQuery, xref};
        if len.is_some() && addr.is_none() {
            return Err(PyValueError::new_err("len= goes with an address"));
        }
        let query = XrefQuery {
            mem: addr.map(|a| (a, len)),
            pc,
        };
        let opened = self.opened.clone();
        let hits = py
            .detach(move || {
                let mut hits = Vec::new();
                opened.with_input(|input, ctx| {
                    xref(opened.handler, input, ctx, &query, |h| {
                        hits.push(h.clone());
                        Ok(())
                    })
                })?;
                Ok::<_, Error>(hits)
            })
            .map_err(py_err)?;
        let out = PyList::empty(py);
        for h in hits {
            let d = PyDict::new(py);
            d.set_item("i", h.i)?;
            d.set_item("thread", h.thread)?;
            d.set_item("pc", h.pc)?;
            if let Some(a) = &h.access {
                d.set_item("addr", a.addr)?;
                d.set_item("old", hex_to_py(py, a.old.as_deref())?)?;
                d.set_item("new", hex_to_py(py, a.new.as_deref())?)?;
            }
            out.append(d)?;
        }
        Ok(out.into_any().unbind())
    }

    /// Where the value of `target` before instruction `i` came from, as `tracekit origin
    /// --json` lists it: one dict per hop, {"i", "thread", "pc" ("0x…"), "asm", "from",
    /// "kind", "loc"} (None where unknown; "kind" is "copy", "compute", "syscall",
    /// "partial", "start" or "unknown"). `target`: a register name ("rax", "eax", "xmm0"),
    /// "ADDR[:LEN]", or an address (8 bytes). x86/x64 only; IndexError past the end.
    #[pyo3(signature = (i, target, max_hops=64))]
    fn origin(
        &self,
        py: Python<'_>,
        i: u64,
        target: &Bound<'_, PyAny>,
        max_hops: usize,
    ) -> PyResult<Py<PyAny>> {
        use trace_analyses::origin::{DEFAULT_LEN, OriginQuery, Target, origin};
        let target = match target.extract::<u64>() {
            Ok(addr) => Target::Mem {
                addr,
                len: DEFAULT_LEN,
            },
            Err(_) => target
                .extract::<String>()?
                .parse::<Target>()
                .map_err(PyValueError::new_err)?,
        };
        if max_hops == 0 {
            return Err(PyValueError::new_err("max_hops must be at least 1"));
        }
        let query = OriginQuery {
            at: i,
            target,
            max_hops,
        };
        let opened = self.opened.clone();
        let found = py
            .detach(move || {
                opened.with_input(|input, ctx| origin(opened.handler, input, ctx, &query))
            })
            .map_err(index_error)?;
        let json = py.import("json")?;
        let out = PyList::empty(py);
        for hop in &found.hops {
            out.append(json.call_method1("loads", (hop.to_json(),))?)?;
        }
        Ok(out.into_any().unbind())
    }

    /// The call tree of an x86/x64 trace, as `tracekit calls --json` lists it: one dict per
    /// call in the order of its step, {"i", "thread", "depth", "target", "return_address",
    /// "entry_i", "ret_i", "unwound", "args" (four ints or None), "ret", "instructions",
    /// "symbol"} (None where unknown). `abi`: "win64", "sysv" or "cdecl" (default: by the
    /// trace, as the command's).
    #[pyo3(signature = (*, thread=None, abi=None))]
    fn calls(
        &self,
        py: Python<'_>,
        thread: Option<u64>,
        abi: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        use trace_analyses::calls::{Abi, CallsOptions, calls};
        let abi = match abi.as_deref() {
            None => None,
            Some(name) => Some(Abi::parse(name).ok_or_else(|| {
                PyValueError::new_err(format!("abi is one of {}", Abi::NAMES.join(", ")))
            })?),
        };
        let opened = self.opened.clone();
        let rows = py
            .detach(move || {
                let mut rows = Vec::new();
                let options = CallsOptions {
                    abi,
                    thread,
                    symbols: None,
                };
                opened.with_input(|input, ctx| {
                    calls(opened.handler, input, ctx, &options, &mut |c| {
                        rows.push(c.clone());
                        Ok(())
                    })
                    .map(|_| ())
                })?;
                Ok::<_, Error>(rows)
            })
            .map_err(py_err)?;
        let out = PyList::empty(py);
        for c in rows {
            let d = PyDict::new(py);
            d.set_item("i", c.i)?;
            d.set_item("thread", c.thread)?;
            d.set_item("depth", c.depth)?;
            d.set_item("target", c.target)?;
            d.set_item("return_address", c.return_address)?;
            d.set_item("entry_i", c.entry_i)?;
            d.set_item("ret_i", c.ret_i)?;
            d.set_item("unwound", c.unwound)?;
            d.set_item("args", c.args.to_vec())?;
            d.set_item("ret", c.ret)?;
            d.set_item("instructions", c.instructions)?;
            d.set_item("symbol", c.name())?;
            out.append(d)?;
        }
        Ok(out.into_any().unbind())
    }

    /// Basic-block vectors for SimPoint, as `tracekit bbv` writes them: one stream per
    /// thread (or one over the merged timeline with `merged=True`), each {"process",
    /// "thread" (None when merged), "instructions", "slices": [{block id: count}, …]}
    /// (a count is the block's executions times its instructions, as in a `.bb` file).
    #[pyo3(signature = (slice, *, merged=false, loop_bounded=false))]
    fn bbv(
        &self,
        py: Python<'_>,
        slice: u64,
        merged: bool,
        loop_bounded: bool,
    ) -> PyResult<Py<PyAny>> {
        use trace_analyses::bbv::{BbvOptions, bbv};
        let options = BbvOptions {
            slice,
            global: merged,
            loop_bounded,
        };
        let opened = self.opened.clone();
        let streams = py
            .detach(move || {
                opened.with_input(|input, ctx| {
                    let mut blocks = opened.handler.blocks(input, ctx)?;
                    let result = bbv(&mut *blocks, &options, |_| Ok(Vec::new()))?;
                    Ok(result.streams)
                })
            })
            .map_err(py_err)?;
        let out = PyList::empty(py);
        for s in streams {
            let d = PyDict::new(py);
            d.set_item("process", s.key.map_or(0, |k| k.process))?;
            d.set_item("thread", s.key.map(|k| k.thread))?;
            d.set_item("instructions", s.instructions)?;
            let slices = PyList::empty(py);
            let mut reader = simpoint::bb::Reader::new(s.out.as_slice());
            while let Some(item) = reader.next_item() {
                let item = item.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
                if let simpoint::bb::Item::Slice(entries) = item {
                    let v = PyDict::new(py);
                    for e in entries.iter() {
                        // `.bb` counts are whole numbers.
                        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                        v.set_item(e.id, e.count as u64)?;
                    }
                    slices.append(v)?;
                }
            }
            d.set_item("slices", slices)?;
            out.append(d)?;
        }
        Ok(out.into_any().unbind())
    }

    /// Frames of a GDB tracepoint file (GDB's tfind, all at once): every frame with this
    /// `pc` and/or `tracepoint` (and within `range=(lo, hi)`, outside `outside=(lo, hi)`,
    /// touching memory `mem=addr` or `mem=(addr, len)`), as
    /// [{"frame": n, "tracepoint": t, "pc": int or None}, …].
    #[pyo3(signature = (pc=None, tracepoint=None, range=None, outside=None, mem=None))]
    fn find(
        &self,
        py: Python<'_>,
        pc: Option<u64>,
        tracepoint: Option<u64>,
        range: Option<(u64, u64)>,
        outside: Option<(u64, u64)>,
        mem: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        use trace_registry::formats::gdb_tfile::find::{FindQuery, MemQuery, find};
        let mem = match mem {
            None => None,
            Some(m) => Some(match m.extract::<(u64, u64)>() {
                Ok((addr, len)) => MemQuery {
                    addr,
                    len: Some(len),
                },
                Err(_) => MemQuery {
                    addr: m.extract()?,
                    len: None,
                },
            }),
        };
        let query = FindQuery {
            pc,
            tracepoint,
            range: range.map(|(a, b)| a..b),
            outside: outside.map(|(a, b)| a..b),
            mem,
        };
        let opened = self.opened.clone();
        let found = py
            .detach(move || {
                let mut found = Vec::new();
                opened.with_input(|input, ctx| {
                    find(opened.handler, input, ctx, &query, |m| {
                        found.push(*m);
                        Ok(())
                    })
                })?;
                Ok::<_, Error>(found)
            })
            .map_err(py_err)?;
        let out = PyList::empty(py);
        for m in found {
            let d = PyDict::new(py);
            d.set_item("frame", m.frame)?;
            d.set_item("tracepoint", m.tracepoint)?;
            d.set_item("pc", m.pc)?;
            out.append(d)?;
        }
        Ok(out.into_any().unbind())
    }

    /// A DCFG's graph (dcfg traces): processes → images → routines → loops → blocks →
    /// edges, as lightweight objects (see `tracekit.Graph`).
    #[getter]
    fn graph(&self, py: Python<'_>) -> PyResult<graph::Graph> {
        if !self.opened.handler.offers().graph {
            return Err(PyValueError::new_err(format!(
                "graph is for dcfg traces, not {}",
                self.opened.handler.name()
            )));
        }
        let opened = self.opened.clone();
        let d = py
            .detach(move || opened.with_input(trace_registry::formats::dcfg::load))
            .map_err(py_err)?;
        Ok(graph::Graph::new(d))
    }
}

impl Trace {
    /// What the trace keeps between calls (a panic while it was held leaves nothing
    /// half-made: each field is set whole).
    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The output table `table` names, or the format's main one; ValueError for a name
    /// the records do not have.
    fn table_name(&self, table: Option<&str>) -> PyResult<String> {
        let main = self.opened.handler.main_table();
        let name = match table {
            Some(t) => t,
            None if !main.is_empty() => main,
            None => self.tables.first().map_or("", String::as_str),
        };
        if self.tables.iter().any(|t| t == name) {
            Ok(name.to_owned())
        } else {
            Err(PyValueError::new_err(format!(
                "no table {name:?}; the tables are: {}",
                self.tables.join(", ")
            )))
        }
    }
}

/// The `calls` table (`tracekit export --calls`): the rows of [`Trace::calls`] as Arrow
/// batches, from the call analysis in a reader thread.
fn spawn_calls(opened: &Opened) -> Receiver<Result<Chunk, Error>> {
    use trace_analyses::calls::{CallsOptions, calls, table};
    let handler = opened.handler;
    opened.spawn_on_input(move |input, ctx, tx| {
        let mut batches = Batches::new(&[table()], "calls", BATCH_ROWS)?;
        if tx.send(Ok(Chunk::Schema(batches.schema()))).is_err() {
            return Ok(());
        }
        // A closed receiver (Python dropped the reader) ends the walk.
        let closed = || internal("the reader was dropped");
        calls(handler, input, ctx, &CallsOptions::default(), &mut |c| {
            batches.write(0, c);
            while let Some(b) = batches.take() {
                tx.send(Ok(Chunk::Batch(b))).map_err(|_| closed())?;
            }
            Ok(())
        })?;
        batches.finish();
        while let Some(b) = batches.take() {
            if tx.send(Ok(Chunk::Batch(b))).is_err() {
                break;
            }
        }
        Ok(())
    })
}

/// `tracekit export` over the registry's Parquet sink.
fn export(
    opened: &Opened,
    dir: &std::path::Path,
    options: &ParquetOptions,
    force: bool,
    partial: bool,
) -> Result<Vec<TableSummary>, Error> {
    let mut input = opened.source.input()?;
    let mut origin = Origin::new(&input, opened.handler.name());
    let mut ctx = Ctx::new(&opened.options);
    let group = options.row_group_rows.max(1) as u64;
    let threads = options.threads.min(MAX_THREADS);
    let reading = Stretches::new(opened.handler, group, threads).open(&mut input, &mut ctx)?;
    let mut dataset = Dataset::create(dir, reading.tables(), options, force)?;
    let Ended { failure, notes } = dataset.read(reading, &mut ctx)?;
    origin.read(&input);
    match failure {
        // Dropping the unfinished dataset removes its temporary folder.
        Some(e) if !partial => Err(e),
        Some(e) => {
            dataset.finish(&origin, Some(&e), &notes)?;
            Err(e)
        }
        None => dataset.finish(&origin, None, &notes),
    }
}

/// A `pyarrow.RecordBatchReader` over the schema and batches a `to_arrow` reader thread
/// sends.
fn arrow_reader(py: Python<'_>, rx: Receiver<Result<Chunk, Error>>) -> PyResult<Bound<'_, PyAny>> {
    // The receiver moves to the detached closure and back (`&Receiver` is not `Send`).
    let (rx, first) = py.detach(move || {
        let first = rx.recv();
        (rx, first)
    });
    let schema = match first {
        Ok(Ok(Chunk::Schema(s))) => s,
        Ok(Err(e)) => return Err(py_err(e)),
        _ => return Err(PyRuntimeError::new_err("the reader thread stopped")),
    };
    // A Python iterator of batches under pyarrow's reader, rather than the Arrow C
    // stream: an error of the C stream reaches Python as a pyarrow error with our
    // message only, while pyarrow re-raises an iterator's own exception, a TraceError
    // with its offset. Each batch still crosses by the C data interface, uncopied.
    let batches = BatchIter {
        rx: Mutex::new(Some(rx)),
    };
    py.import("pyarrow")?
        .getattr("RecordBatchReader")?
        .call_method1("from_batches", (schema.to_pyarrow(py)?, batches))
}

/// Threads at most for one `to_arrow` or `export_parquet` (each holds a stretch's batches
/// or row groups: memory).
const MAX_THREADS: usize = 4;

/// The batches of table `table` of the next records of `records`, at most `limit` of them,
/// and whether the records end there, or the error that ends them (after the batches of
/// the records before it): one stretch of a `to_arrow`.
fn stretch(
    records: &mut dyn Records,
    table: &str,
    limit: u64,
) -> (Vec<RecordBatch>, Result<bool, Error>) {
    let mut batches = match Batches::new(records.tables(), table, BATCH_ROWS) {
        Ok(b) => b,
        Err(e) => return (Vec::new(), Err(e)),
    };
    let mut left = limit;
    let mut out = Vec::new();
    let end = loop {
        if left == 0 {
            break Ok(false);
        }
        match batches.pull_at_most(records, usize::try_from(left).unwrap_or(usize::MAX)) {
            Pulled::Records(n) => left = left.saturating_sub(n as u64),
            Pulled::End => break Ok(true),
            Pulled::Failed(e) => break Err(e),
        }
        out.extend(std::iter::from_fn(|| batches.take()));
    };
    batches.finish();
    out.extend(std::iter::from_fn(|| batches.take()));
    (out, end)
}

/// What a `to_arrow` reader thread sends: the schema first, then the batches.
enum Chunk {
    Schema(SchemaRef),
    Batch(RecordBatch),
}

/// The batches of a `to_arrow` reader thread, as a Python iterator (under a
/// `pyarrow.RecordBatchReader`): each batch crosses to pyarrow through the Arrow C data
/// interface; the error that ends the records is raised as a TraceError.
#[pyclass(module = "tracekit")]
struct BatchIter {
    /// `None` once the reader is done.
    rx: Mutex<Option<Receiver<Result<Chunk, Error>>>>,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut guard = match self.rx.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // As for `RecordIter`: waiting with the GIL could deadlock.
            Err(TryLockError::WouldBlock) => {
                return Err(PyValueError::new_err(
                    "batch iterator already executing in another thread",
                ));
            }
        };
        loop {
            let Some(rx) = guard.take() else {
                return Ok(None);
            };
            // The receiver moves to the detached closure and back (`&Receiver` is not
            // `Send`); it is dropped when the reader is done, which fuses the iterator.
            let (rx, msg) = py.detach(move || {
                let msg = rx.recv();
                (rx, msg)
            });
            match msg {
                Ok(Ok(Chunk::Batch(b))) => {
                    *guard = Some(rx);
                    return Ok(Some(b.to_pyarrow(py)?.unbind()));
                }
                Ok(Ok(Chunk::Schema(_))) => *guard = Some(rx),
                Ok(Err(e)) => return Err(py_err(e)),
                Err(_) => return Ok(None),
            }
        }
    }
}

/// The state of a record iterator.
struct IterState {
    /// `None` once the reader is done.
    rx: Option<Receiver<Result<Vec<Node>, Error>>>,
    ready: VecDeque<Node>,
    /// Field names as Python strings, made once (keyed by the name's allocation, which the
    /// kept `Arc` holds alive).
    keys: HashMap<usize, (Arc<str>, Py<PyString>)>,
}

/// An iterator over a trace's records as dicts. It owns its reader (a thread with its own
/// handle on the input), so it stays valid after its Trace is gone.
#[pyclass(module = "tracekit")]
struct RecordIter {
    state: Mutex<IterState>,
}

impl RecordIter {
    /// The records from record `skip` on (through the format's seek `index`, if any).
    fn new(opened: &Opened, skip: u64, index: Option<SeekIndex>) -> RecordIter {
        let rx = opened.spawn(move |records, tx| {
            records.seek(skip, index.as_ref())?;
            let mut sink = Native::new(records.tables());
            let mut chunk = Vec::with_capacity(CHUNK);
            let failure = loop {
                let record = match records.next_record() {
                    None => break None,
                    Some(Err(e)) => break Some(e),
                    Some(Ok(r)) => r,
                };
                chunk.push(sink.record(record.table, record.row()));
                if chunk.len() >= CHUNK && tx.send(Ok(std::mem::take(&mut chunk))).is_err() {
                    return Ok(());
                }
            };
            if !chunk.is_empty() && tx.send(Ok(chunk)).is_err() {
                return Ok(());
            }
            failure.map_or(Ok(()), Err)
        });
        RecordIter {
            state: Mutex::new(IterState {
                rx: Some(rx),
                ready: VecDeque::new(),
                keys: HashMap::new(),
            }),
        }
    }

    fn lock(&self) -> PyResult<MutexGuard<'_, IterState>> {
        match self.state.try_lock() {
            Ok(g) => Ok(g),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            // Waiting here while holding the GIL could deadlock with the thread that holds
            // the lock and waits for the GIL; Python's generators refuse the same way.
            Err(TryLockError::WouldBlock) => Err(PyValueError::new_err(
                "record iterator already executing in another thread",
            )),
        }
    }
}

#[pymethods]
impl RecordIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut guard = self.lock()?;
        let st = &mut *guard;
        loop {
            if let Some(node) = st.ready.pop_front() {
                return Ok(Some(node_to_py(py, &node, &mut st.keys)?.unbind()));
            }
            let Some(rx) = st.rx.take() else {
                return Ok(None);
            };
            // The receiver moves to the detached closure and back (`&Receiver` is not
            // `Send`); it is dropped when the reader is done, which fuses the iterator.
            let (rx, msg) = py.detach(move || {
                let msg = rx.recv();
                (rx, msg)
            });
            match msg {
                Ok(Ok(chunk)) => {
                    st.ready.extend(chunk);
                    st.rx = Some(rx);
                }
                Ok(Err(e)) => return Err(py_err(e)),
                Err(_) => {}
            }
        }
    }
}

/// `int.from_bytes(b, "big")`.
fn big_int<'py>(py: Python<'py>, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    py.get_type::<pyo3::types::PyInt>()
        .call_method1("from_bytes", (PyBytes::new(py, b), "big"))
}

/// `0x…` (a recorded value of any width) as an int; `None` as None.
fn hex_to_py<'py>(py: Python<'py>, v: Option<&str>) -> PyResult<Bound<'py, PyAny>> {
    match v.and_then(|v| v.strip_prefix("0x")) {
        Some(digits) => py.get_type::<pyo3::types::PyInt>().call1((digits, 16)),
        None => Ok(py.None().into_bound(py)),
    }
}

/// A JSON value as Python values, with `0x…` strings (addresses, values) as ints.
fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => py.None().into_bound(py),
        J::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        J::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i)) => i.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        J::String(s)
            if s.len() > 2
                && s.starts_with("0x")
                && s[2..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            hex_to_py(py, Some(s))?
        }
        J::String(s) => PyString::new(py, s).into_any(),
        J::Array(items) => {
            let l = PyList::empty(py);
            for i in items {
                l.append(json_to_py(py, i)?)?;
            }
            l.into_any()
        }
        J::Object(m) => {
            let d = PyDict::new(py);
            for (k, v) in m {
                d.set_item(k, json_to_py(py, v)?)?;
            }
            d.into_any()
        }
    })
}

/// [`py_err`], with `steps::past_end`'s error as IndexError.
fn index_error(e: Error) -> PyErr {
    match e {
        Error::Unsupported(m) if m.contains("is past the end") => PyIndexError::new_err(m),
        e => py_err(e),
    }
}

/// An opened trace, or anything `open` takes (opened with `format` and `options`).
fn opened_of(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    format: Option<&str>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Opened> {
    if let Ok(t) = obj.cast::<Trace>() {
        return Ok(t.get().opened.clone());
    }
    Ok(open(py, obj, format, options)?.opened)
}

/// Compares two traces of the same format, as `tracekit diff --json` does: {"equal":
/// bool, "regions": [region, …], "summary": {…}}, each region a dict of its kind, its
/// spans in A and B and what differs at its first instruction (addresses and values as
/// ints). `a` and `b` are Traces or anything `open` takes; `threads` pairs A's and B's
/// threads, `ignore` names registers not to compare, `mem=False` leaves memory out.
#[pyfunction]
#[pyo3(signature = (a, b, format=None, *, threads=Vec::new(), ignore=Vec::new(), mem=true, window=None, context=3, **options))]
#[allow(clippy::too_many_arguments)] // diff's options, as keywords
fn diff(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    format: Option<&str>,
    threads: Vec<(u64, u64)>,
    ignore: Vec<String>,
    mem: bool,
    window: Option<u64>,
    context: usize,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    use trace_analyses::diff::{self as d, DiffError, DiffOptions};
    let (a, b) = (
        opened_of(py, a, format, options)?,
        opened_of(py, b, format, options)?,
    );
    if a.handler.name() != b.handler.name() {
        return Err(PyValueError::new_err(format!(
            "A is a {} trace and B a {} trace: diff compares two traces of the same format",
            a.handler.name(),
            b.handler.name()
        )));
    }
    let diff_options = DiffOptions {
        threads,
        ignore,
        mem,
        window: window.unwrap_or(DiffOptions::default().window),
        context,
        ..DiffOptions::default()
    };
    let found = py.detach(move || -> Result<_, Error> {
        let (mut input_a, mut input_b) = (a.source.input()?, b.source.input()?);
        let mut steps_a = a.handler.steps(&mut input_a, &mut Ctx::new(&a.options))?;
        let mut steps_b = b.handler.steps(&mut input_b, &mut Ctx::new(&b.options))?;
        let mut regions = Vec::new();
        let summary = d::diff(&mut *steps_a, &mut *steps_b, &diff_options, &mut |r| {
            regions.push(serde_json::to_value(r).unwrap_or_default());
            Ok(())
        });
        let summary = match summary {
            Ok(s) => s,
            Err(DiffError::Read { source, .. } | DiffError::Other(source)) => return Err(source),
            Err(e) => return Err(Error::Unsupported(e.to_string())),
        };
        Ok((regions, summary))
    });
    let (regions, summary) = found.map_err(py_err)?;
    let out = PyDict::new(py);
    out.set_item("equal", summary.is_equal())?;
    let list = PyList::empty(py);
    for r in &regions {
        list.append(json_to_py(py, r)?)?;
    }
    out.set_item("regions", list)?;
    out.set_item(
        "summary",
        json_to_py(py, &serde_json::to_value(&summary).unwrap_or_default())?,
    )?;
    Ok(out.into_any().unbind())
}

/// A record tree as Python values.
fn node_to_py<'py>(
    py: Python<'py>,
    node: &Node,
    keys: &mut HashMap<usize, (Arc<str>, Py<PyString>)>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match node {
        Node::UInt(v) => v.into_pyobject(py)?.into_any(),
        Node::Map(entries) => {
            let d = PyDict::new(py);
            for (k, v) in entries {
                d.set_item(node_to_py(py, k, keys)?, node_to_py(py, v, keys)?)?;
            }
            d.into_any()
        }
        Node::Key(k) => {
            let id = Arc::as_ptr(k).cast::<u8>() as usize;
            match keys.get(&id) {
                Some((_, s)) => s.bind(py).clone().into_any(),
                None => {
                    let s = PyString::intern(py, k);
                    keys.insert(id, (Arc::clone(k), s.clone().unbind()));
                    s.into_any()
                }
            }
        }
        Node::Null => py.None().into_bound(py),
        Node::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Node::Int(v) => v.into_pyobject(py)?.into_any(),
        Node::Bytes(b) => PyBytes::new(py, b).into_any(),
        Node::BigUInt(b) => big_int(py, b)?,
        Node::Str(s) => PyString::new(py, s).into_any(),
        Node::List(items) => {
            let l = PyList::empty(py);
            for v in items {
                l.append(node_to_py(py, v, keys)?)?;
            }
            l.into_any()
        }
        _ => py.None().into_bound(py),
    })
}

/// An `info` value as Python values (addresses as int).
fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Value::UInt(n) | Value::Hex(n) => n.into_pyobject(py)?.into_any(),
        Value::Int(n) => n.into_pyobject(py)?.into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::List(items) => {
            let l = PyList::empty(py);
            for i in items {
                l.append(value_to_py(py, i)?)?;
            }
            l.into_any()
        }
        Value::Map(m) => info_to_py(py, m)?.into_bound(py),
        _ => py.None().into_bound(py),
    })
}

fn info_to_py(py: Python<'_>, info: &Info) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    for (k, v) in info.iter() {
        d.set_item(k, value_to_py(py, v)?)?;
    }
    Ok(d.into_any().unbind())
}

/// The `tracekit` module.
#[pymodule]
#[pyo3(name = "tracekit")]
fn tracekit_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(diff, m)?)?;
    m.add_class::<Trace>()?;
    m.add_class::<RecordIter>()?;
    m.add_class::<BatchIter>()?;
    graph::register(m)?;
    m.add("TraceError", py.get_type::<TraceError>())?;
    m.add("FormatError", py.get_type::<FormatError>())?;
    m.add(
        "formats",
        trace_registry::HANDLERS
            .iter()
            .map(|h| h.name())
            .collect::<Vec<_>>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
