//! The JSON API of `tracekit serve` (documented in the [module above](super)): the
//! trace kept open ([`Api`]), the background index, and the endpoints, callable without a
//! socket ([`Worker::handle`]) for the tests and the bench.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};

use serde_json::{Map, Value, json};
use trace_analyses::calls::{Call, CallsOptions, calls_of};
use trace_analyses::mem::{MemQuery, mem_of};
use trace_analyses::origin::{DEFAULT_MAX_HOPS, OriginQuery, Target, origin_of};
use trace_analyses::state::state_of;
use trace_analyses::xref::{Window, XrefHit, XrefQuery, xref_of};
use trace_index::{self as index, BuildOptions, Identity, Sidecar};
use trace_registry::disasm::{Disassembler, ReadWatch};
use trace_registry::steps::{Isa, RegCopy, RegPlan, SeekIndex, Steps};
use trace_registry::{Ctx, Error, Handler, Input, Options};
use trace_sinks::JsonLines;

use super::http::Response;
use crate::CliError;

/// The most rows, hits or executions one call returns.
pub const MAX_COUNT: u64 = 10_000;

/// The most bytes one `mem` call reads.
pub const MAX_LEN: u64 = 65_536;

/// How many steps `reader` reads forward from `i` at most before it gives up.
pub const READER_SEARCH: u64 = 1 << 22;

/// How many steps `writer` reads back from `i` at most before it gives up.
pub const WRITER_SEARCH: u64 = 1 << 22;

/// The first window `writer` reads back (then twice as many each time).
const WRITER_FIRST: u64 = 256;

/// The most hops one `origin` call follows.
pub const MAX_HOPS: u64 = 1024;

/// How many requests are worked on at once (each with its own open inputs).
pub const WORKERS: usize = 4;

/// The most calls `stack` keeps in memory (about 200 bytes each): a trace with more is
/// answered by a pass per request instead.
pub const MAX_KEPT_CALLS: usize = 1_000_000;

/// The calls `stack` answers from, found by its first request.
#[derive(Clone, Debug)]
enum KeptCalls {
    /// The first request is reading them: the others are answered 503 meanwhile rather
    /// than wait (each waiting request would hold a worker the page's rows need).
    Finding,
    /// Every call of the trace, in the order of their steps.
    All(Arc<Vec<Call>>),
    /// More than [`MAX_KEPT_CALLS`]: each request makes its own pass.
    TooMany,
}

/// Puts the kept calls back to unknown when dropped before [`FindingCalls::done`] (the
/// pass failed or panicked): the next request tries again.
struct FindingCalls<'a> {
    kept: &'a Mutex<Option<KeptCalls>>,
    done: bool,
}

impl FindingCalls<'_> {
    /// Keeps `found`.
    fn done(mut self, found: KeptCalls) {
        *lock(self.kept) = Some(found);
        self.done = true;
    }
}

impl Drop for FindingCalls<'_> {
    fn drop(&mut self) {
        if !self.done {
            *lock(self.kept) = None;
        }
    }
}

/// The state of the background index, as `/api/status` reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexStatus {
    /// `ready`, `building`, `failed` or `none` (not started, or not possible).
    pub state: &'static str,
    /// Bytes of the trace indexed so far.
    pub done: u64,
    /// Bytes of the trace.
    pub total: u64,
    /// Why it failed.
    pub error: Option<String>,
}

/// What `/api/status` says of the stream, found when the trace is opened.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Meta {
    isa: &'static str,
    word_size: u32,
    noun: &'static str,
    reg_names: Vec<String>,
}

/// The trace a server serves, shared by its workers: the input opened at the start (the
/// path is opened once: see [`Shared::input`]), what is known of it, and the background
/// index.
struct Shared {
    handler: &'static dyn Handler,
    file: OsString,
    /// The input opened at the start, which the workers' inputs are made from.
    opened: Mutex<Input>,
    /// The user's options (`state`, `mem`, `xref` answer as the CLI does with them).
    options: Options,
    /// The same with `disasm` (the rows are `dump --disasm`'s).
    row_options: Options,
    meta: Meta,
    steps: Mutex<Option<u64>>,
    index: Mutex<IndexStatus>,
    /// The format's seek index, once known (x64dbg), for every open of the steps and
    /// records (parsed on the first, then shared).
    seek_index: RwLock<Option<SeekIndex>>,
    /// The sidecar index, once usable (one file handle: lookups take turns).
    sidecar: Mutex<Option<Sidecar>>,
    info: Mutex<Option<Result<String, String>>>,
    /// Workers not in use.
    idle: Mutex<Vec<Worker>>,
    idle_changed: Condvar,
    /// Workers made so far (at most [`WORKERS`]).
    made: Mutex<usize>,
    /// Where the file was first found cut short by another process (see [`Api::handle`]).
    changed: Mutex<Option<u64>>,
    /// The calls `stack` answers from, once found (a failed pass is not kept: the next
    /// request tries again).
    calls: Mutex<Option<KeptCalls>>,
}

/// The trace kept open: see the module docs.
#[derive(Clone)]
pub struct Api {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("format", &self.shared.handler.name())
            .field("file", &self.shared.file)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another request must not stop the server: the data stays usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn isa_name(isa: trace_registry::steps::Isa) -> &'static str {
    use trace_registry::steps::Isa;
    match isa {
        Isa::X64 => "x64",
        Isa::X86 => "x86",
        Isa::Ppc32 => "ppc",
        _ => "other",
    }
}

/// Opens `file` for the server (a plain or compressed file, not stdin).
fn open_input(file: &OsStr, forced: Option<&str>) -> Result<(Input, &'static dyn Handler), Error> {
    let (mut input, handler) = trace_registry::open(file, forced)?;
    // Random access: a compressed file is read (or spooled) once here.
    input.bytes()?;
    Ok((input, handler))
}

impl Shared {
    /// Another input over the trace, for a worker or the index build: from the handle
    /// opened at the start, as the file is now (see [`Input::again`]), never by opening
    /// the path again (it may name another file by now).
    fn input(&self) -> Result<Input, Error> {
        let again = lock(&self.opened).again();
        let mut input = again
            .unwrap_or_else(|| Err(Error::Unsupported("the trace cannot be read again".into())))?;
        input.bytes()?;
        Ok(input)
    }
}

/// The progress hook of the index build: moves the status's `done` from the start of
/// `span` to its end as the steps indexed go from 0 to `count` (never back).
fn progress_hook(
    shared: &Arc<Shared>,
    span: std::ops::Range<u64>,
    count: u64,
) -> Arc<dyn Fn(u64) + Send + Sync> {
    let shared = Arc::clone(shared);
    let width = u128::from(span.end.saturating_sub(span.start));
    Arc::new(move |steps: u64| {
        let share = width
            .saturating_mul(u128::from(steps.min(count)))
            .checked_div(u128::from(count))
            .unwrap_or(width);
        let done = span.start.saturating_add(u64::try_from(share).unwrap_or(0));
        let mut st = lock(&shared.index);
        st.done = st.done.max(done);
    })
}

impl Api {
    /// Opens the trace: checks that it has an instruction stream and reads its first
    /// step (the register names, the ISA).
    ///
    /// # Errors
    ///
    /// The file cannot be opened, stdin, a format without an instruction stream (exit 2),
    /// or a trace whose first step cannot be read.
    pub fn open(file: &OsStr, forced: Option<&str>, options: &Options) -> Result<Api, CliError> {
        if file == "-" {
            return Err(CliError::Usage(
                "`tracekit serve` reads a file, not stdin".into(),
            ));
        }
        let (mut input, handler) = open_input(file, forced)?;
        let meta = {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(options)).map_err(|e| {
                match e {
                    Error::Unsupported(m) => CliError::Usage(format!(
                        "`tracekit serve` shows traces with an instruction stream (x64dbg, gdb-tfile, tenet, tt6, tt6e, amber-full): {m}"
                    )),
                    e => e.into(),
                }
            })?;
            if let Some(first) = steps.next_step() {
                first?;
            }
            Meta {
                isa: isa_name(steps.isa()),
                word_size: steps.isa().word_size(),
                noun: steps.kind().noun(),
                reg_names: steps.reg_names().iter().map(|n| n.to_string()).collect(),
            }
        };
        let total = input.file_len().unwrap_or(0);
        let shared = Shared {
            handler,
            file: file.to_owned(),
            opened: Mutex::new(input.share().ok_or_else(|| {
                CliError::Usage("`tracekit serve` reads a file, not a stream".into())
            })?),
            options: options.clone(),
            row_options: Options {
                disasm: true,
                ..options.clone()
            },
            meta,
            steps: Mutex::new(None),
            index: Mutex::new(IndexStatus {
                state: "none",
                done: 0,
                total,
                error: None,
            }),
            seek_index: RwLock::new(None),
            sidecar: Mutex::new(None),
            info: Mutex::new(None),
            idle: Mutex::new(Vec::new()),
            idle_changed: Condvar::new(),
            // The worker made of the input opened here.
            made: Mutex::new(1),
            changed: Mutex::new(None),
            calls: Mutex::new(None),
        };
        let api = Api {
            shared: Arc::new(shared),
        };
        api.put(Worker::new(Arc::clone(&api.shared), input));
        Ok(api)
    }

    /// The index's state.
    #[must_use]
    pub fn index_status(&self) -> IndexStatus {
        lock(&self.shared.index).clone()
    }

    /// Runs `f` with a free worker (making one if fewer than [`WORKERS`] exist, else
    /// waiting for one).
    ///
    /// # Errors
    ///
    /// A new worker's input cannot be opened.
    pub fn with_worker<T>(&self, f: impl FnOnce(&mut Worker) -> T) -> Result<T, CliError> {
        self.on_worker(f).map(|(out, _)| out)
    }

    /// [`Api::with_worker`], saying too whether the worker read past the end of a file cut
    /// short during the call (its answer may hold zeros for the bytes no longer there).
    fn on_worker<T>(&self, f: impl FnOnce(&mut Worker) -> T) -> Result<(T, bool), CliError> {
        let mut worker = self.take()?;
        // A bug must not take the server down nor lose the worker's place: the worker is
        // dropped (a new one is made in its stead) and the call fails.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut worker))) {
            Ok(out) => match worker.cut() {
                None => {
                    self.put(worker);
                    Ok((out, false))
                }
                Some(cut) => {
                    // Its map reads zeros past the cut: a new worker maps the file as it
                    // is now (whose end the readers see as the end).
                    self.note_cut(cut.offset);
                    self.retire(worker);
                    Ok((out, cut.read))
                }
            },
            Err(_) => {
                self.retire(worker);
                Err(CliError::Usage("internal error while answering".into()))
            }
        }
    }

    /// Drops `worker`, so that a new one is made in its stead.
    fn retire(&self, worker: Worker) {
        drop(worker);
        let mut made = lock(&self.shared.made);
        *made = made.saturating_sub(1);
        drop(made);
        self.shared.idle_changed.notify_one();
    }

    /// Remembers that the file was found cut at `offset` (the lowest cut seen).
    fn note_cut(&self, offset: u64) {
        let mut changed = lock(&self.shared.changed);
        *changed = Some(changed.map_or(offset, |c| c.min(offset)));
    }

    fn take(&self) -> Result<Worker, CliError> {
        let s = &self.shared;
        let mut idle = lock(&s.idle);
        loop {
            if let Some(w) = idle.pop() {
                return Ok(w);
            }
            {
                let mut made = lock(&s.made);
                if *made < WORKERS {
                    *made = made.saturating_add(1);
                    drop(made);
                    drop(idle);
                    return match s.input() {
                        Ok(input) => Ok(Worker::new(Arc::clone(s), input)),
                        Err(e) => {
                            let mut made = lock(&s.made);
                            *made = made.saturating_sub(1);
                            Err(e.into())
                        }
                    };
                }
            }
            idle = s
                .idle_changed
                .wait(idle)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn put(&self, worker: Worker) {
        lock(&self.shared.idle).push(worker);
        self.shared.idle_changed.notify_one();
    }

    /// Answers one API call (`path` under `/api/`, the query without the token); every
    /// failure is a response (500 if no worker can be made). Once the file has been cut
    /// short by another process, an answer that read past the cut, and any failure to read
    /// the trace, is a 409 saying so (rows before the cut are still answered).
    #[must_use]
    pub fn handle(&self, path: &str, query: &[(String, String)]) -> Response {
        let (response, read_past_cut) = match self.on_worker(|w| w.handle(path, query)) {
            Ok(answer) => answer,
            Err(e) => (Response::error(500, &e.to_string(), None), false),
        };
        let changed = *lock(&self.shared.changed);
        match changed {
            Some(offset) if read_past_cut || matches!(response.status, 422 | 500) => {
                let file = trace_registry::Error::Changed {
                    file: self.shared.file.to_string_lossy().into_owned(),
                    offset,
                };
                Response::json(
                    409,
                    json!({ "error": file.to_string(), "changed": true }).to_string(),
                )
            }
            _ => response,
        }
    }

    /// Finds or builds the sidecar index (in the calling thread: the server runs this in
    /// the background). A usable sidecar beside the trace (or at `--index`) is used as it
    /// is; else the format's seek index is made first (so that seeks are fast soon), then
    /// the sidecar (with that seek index: no second pass; the status's `done` follows the
    /// steps indexed) is written beside the trace or, where that is not writable, in `temp`
    /// (opened, then removed at once: the open handle keeps it readable where the system
    /// allows).
    pub fn build_index(&self, temp: &Path) {
        let s = &self.shared;
        let set = |state: &'static str, done: u64, error: Option<String>| {
            let mut st = lock(&s.index);
            st.state = state;
            st.done = done;
            st.error = error;
        };
        let total = lock(&s.index).total;
        let handler = s.handler;
        let mut input = match s.input() {
            Ok(x) => x,
            Err(e) => return set("failed", 0, Some(e.to_string())),
        };
        let explicit = s.options.index.clone();
        if let Ok(mut sidecar) = index::open_for(&input, explicit.as_deref(), handler.name())
            && let Ok(seek) = sidecar.seek_index()
        {
            self.ready(sidecar, seek);
            return set("ready", total, None);
        }
        set("building", 0, None);
        // The seek index first: a fast pass, and rows and state at any step need it.
        let seek = {
            let mut ctx = Ctx::new(&s.options);
            handler.steps(&mut input, &mut ctx).and_then(|mut steps| {
                let bytes = steps.seek_index()?;
                Ok((bytes, steps.count_known()))
            })
        };
        let (seek, count) = match seek {
            Ok((Some(bytes), count)) if !bytes.is_empty() => {
                let index = SeekIndex::new(bytes);
                *s.seek_index.write().unwrap_or_else(PoisonError::into_inner) = Some(index.clone());
                (Some(index), count)
            }
            Ok((_, count)) => (None, count),
            Err(e) => return self.failed(&mut input, &e.to_string()),
        };
        // The seek-index pass is about a third of the work, the pass over the steps most
        // of the rest: it moves `done` on in proportion to the steps indexed, when the
        // format knows how many there are (writing the lists is the last tenth).
        let (start, end) = (total / 3, total.saturating_sub(total / 10));
        set("building", start, None);
        let progress = count.map(|n| progress_hook(&self.shared, start..end, n));
        let options = BuildOptions {
            seek_index: seek,
            progress,
            ..BuildOptions::default()
        };
        let beside = index::default_path(Path::new(&s.file));
        let out = explicit.unwrap_or(beside);
        let mut build = |out: &Path| {
            let mut ctx = Ctx::new(&s.options);
            index::build(handler, &mut input, &mut ctx, Some(out), options.clone())
        };
        let (built, temp_file) = match build(&out) {
            Ok(b) => (Ok(b), None),
            Err(Error::Io { .. }) => {
                let name = out.file_name().unwrap_or(OsStr::new("trace.tkidx"));
                let t = temp.join(name);
                let built = std::fs::create_dir_all(temp)
                    .map_err(|e| Error::io(format!("cannot create {}", temp.display()), e))
                    .and_then(|()| build(&t));
                (built, Some(t))
            }
            Err(e) => (Err(e), None),
        };
        let opened = built.map_err(|e| e.to_string()).and_then(|b| {
            let trace = Identity::of_input(&input).map_err(|e| e.to_string())?;
            let mut sidecar =
                Sidecar::open(&b.path, &trace, handler.name()).map_err(|why| format!("{why:?}"))?;
            let seek = sidecar.seek_index().map_err(|e| e.to_string())?;
            Ok((sidecar, seek))
        });
        if let Some(t) = temp_file {
            // Unix keeps the open file readable; elsewhere it stays until the next boot's
            // clean-up of the temporary directory.
            let _ = std::fs::remove_file(&t);
            let _ = std::fs::remove_dir(temp);
        }
        match opened {
            Ok((sidecar, seek)) => {
                self.ready(sidecar, seek);
                set("ready", total, None);
            }
            Err(e) => self.failed(&mut input, &e),
        }
    }

    /// Takes in a usable sidecar and its seek index.
    fn ready(&self, sidecar: Sidecar, seek: Vec<u8>) {
        let s = &self.shared;
        *lock(&s.steps) = Some(sidecar.header().steps);
        let mut kept = s.seek_index.write().unwrap_or_else(PoisonError::into_inner);
        // The sidecar keeps the seek index made first: keep that one, parsed already.
        if !seek.is_empty() && kept.as_ref().is_none_or(|k| k.bytes() != seek) {
            *kept = Some(SeekIndex::new(seek));
        }
        drop(kept);
        *lock(&s.sidecar) = Some(sidecar);
    }

    /// The index could not be made: says why, and counts the steps by a pass.
    fn failed(&self, input: &mut Input, why: &str) {
        let s = &self.shared;
        {
            let mut st = lock(&s.index);
            st.state = "failed";
            st.error = Some(why.to_owned());
        }
        let mut ctx = Ctx::new(&s.options);
        let Ok(mut steps) = s.handler.steps(input, &mut ctx) else {
            return;
        };
        let mut count = 0u64;
        let all = trace_registry::steps::ScanQuery {
            all: true,
            ..Default::default()
        };
        if steps
            .scan(&all, &mut |step| {
                count = step.i.saturating_add(1);
                Ok(())
            })
            .is_ok()
        {
            *lock(&s.steps) = Some(count);
        }
    }
}

/// What a worker answers with: a response, or a refusal of a parameter.
type Answer = Result<Response, Response>;

/// A refusal (400) of parameter `param`.
fn bad(param: &str, message: impl AsRef<str>) -> Response {
    Response::error(400, message.as_ref(), Some(param))
}

/// The response for an error of the registry: bad arguments (400, naming `param`), a
/// damaged trace (422, with the offset in the message), or an I/O failure (500).
fn failure(e: &Error, param: Option<&str>) -> Response {
    match e {
        Error::Unsupported(m) => Response::error(400, m, param),
        Error::Format { .. } | Error::Invalid { .. } | Error::Detect(_) => {
            Response::error(422, &e.to_string(), None)
        }
        Error::Io { .. } => Response::error(500, &e.to_string(), None),
        _ => Response::error(500, &e.to_string(), None),
    }
}

/// The query parameters of one call, checked against the names the endpoint takes.
struct Params<'q> {
    query: &'q [(String, String)],
}

impl<'q> Params<'q> {
    /// Refuses names the endpoint does not take and names given twice.
    fn new(query: &'q [(String, String)], allowed: &[&str]) -> Result<Params<'q>, Response> {
        for (k, (name, _)) in query.iter().enumerate() {
            if !allowed.contains(&name.as_str()) {
                return Err(bad(
                    name,
                    format!(
                        "unknown parameter {name:?}; this endpoint takes: {}",
                        if allowed.is_empty() {
                            "none".to_owned()
                        } else {
                            allowed.join(", ")
                        }
                    ),
                ));
            }
            if query.iter().take(k).any(|(n, _)| n == name) {
                return Err(bad(name, format!("parameter {name:?} is given twice")));
            }
        }
        Ok(Params { query })
    }

    fn get(&self, name: &str) -> Option<&'q str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A number (decimal or `0x` hex), if given.
    fn number(&self, name: &str) -> Result<Option<u64>, Response> {
        self.get(name)
            .map(|v| parse_number(v).map_err(|m| bad(name, m)))
            .transpose()
    }

    /// A number that must be given.
    fn required(&self, name: &str) -> Result<u64, Response> {
        self.number(name)?
            .ok_or_else(|| bad(name, format!("parameter {name:?} is required")))
    }

    /// A count in `1..=max` (default `default`).
    fn count(&self, name: &str, default: u64, max: u64) -> Result<u64, Response> {
        let n = self.number(name)?.unwrap_or(default);
        if n == 0 || n > max {
            return Err(bad(name, format!("{name} must be 1 to {max}, not {n}")));
        }
        Ok(n)
    }
}

/// A parameter number: decimal or `0x` hex, nothing else (no sign, no spaces, no `_`).
///
/// # Errors
///
/// What was expected.
pub fn parse_number(s: &str) -> Result<u64, String> {
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(hex, 16).ok()
        }
        Some(_) => None,
        None if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        None => None,
    };
    parsed
        .ok_or_else(|| format!("{s:?} is not a number (decimal, or hex with 0x, at most 2^64 - 1)"))
}

/// One worker: its own open inputs of the trace (two: the rows read records and steps
/// side by side).
pub struct Worker {
    shared: Arc<Shared>,
    input: Input,
    second: Option<Input>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("input", &self.input.name())
            .finish_non_exhaustive()
    }
}

impl Worker {
    fn new(shared: Arc<Shared>, input: Input) -> Worker {
        Worker {
            shared,
            input,
            second: None,
        }
    }

    /// Where the trace was found cut short, by either of the worker's inputs.
    fn cut(&self) -> Option<trace_registry::Cut> {
        let second = self.second.as_ref().and_then(Input::cut);
        match (self.input.cut(), second) {
            (Some(a), Some(b)) => Some(trace_registry::Cut {
                offset: a.offset.min(b.offset),
                read: a.read || b.read,
            }),
            (a, b) => a.or(b),
        }
    }

    /// Answers one call to `/api/{path}` with `query` (the token already taken out).
    #[must_use]
    pub fn handle(&mut self, path: &str, query: &[(String, String)]) -> Response {
        let answer = match path {
            "info" => Params::new(query, &[]).and_then(|_| self.info()),
            "status" => Params::new(query, &[]).map(|_| self.status()),
            "rows" => self.rows(query),
            "state" => self.state(query),
            "mem" => self.mem(query),
            "xref" => self.xref(query, false),
            "find" => self.xref(query, true),
            "calls" => self.calls(query),
            "stack" => self.stack(query),
            "origin" => self.origin(query),
            "writer" => self.register_search(query, "writer", find_writer),
            "reader" => self.register_search(query, "reader", find_reader),
            _ => Err(Response::error(
                404,
                &format!("no endpoint /api/{path}"),
                None,
            )),
        };
        answer.unwrap_or_else(|r| r)
    }

    /// The steps, open at their start, with the seek index when one is known.
    fn steps<'a>(
        handler: &dyn Handler,
        shared: &Shared,
        input: &'a mut Input,
        options: &Options,
    ) -> Result<Box<dyn Steps + 'a>, Error> {
        let mut steps = handler.steps(input, &mut Ctx::new(options))?;
        let seek = shared
            .seek_index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(index) = seek {
            steps.use_seek_index(&index);
        }
        Ok(steps)
    }

    /// Refuses `i` past the end when the count is known.
    fn check_i(&self, i: u64) -> Result<(), Response> {
        match *lock(&self.shared.steps) {
            Some(n) if i >= n => Err(bad(
                "i",
                format!(
                    "{} {i} is past the end: the trace has {n}",
                    self.shared.meta.noun
                ),
            )),
            _ => Ok(()),
        }
    }

    fn info(&mut self) -> Answer {
        let s = Arc::clone(&self.shared);
        let mut cached = lock(&s.info);
        if cached.is_none() {
            let mut input = match s.input() {
                Ok(input) => input,
                Err(e) => return Err(failure(&e, None)),
            };
            let info = s.handler.info(&mut input, &mut Ctx::new(&s.options));
            *cached = Some(info.map(|i| i.to_json()).map_err(|e| e.to_string()));
        }
        match cached.as_ref() {
            Some(Ok(json)) => Ok(Response::json(200, json.clone())),
            Some(Err(e)) => Err(Response::error(422, e, None)),
            None => Err(Response::error(500, "no info", None)),
        }
    }

    fn status(&self) -> Response {
        let s = &self.shared;
        if let Some(cut) = self.cut() {
            let mut changed = lock(&s.changed);
            *changed = Some(changed.map_or(cut.offset, |c| c.min(cut.offset)));
        }
        let changed = lock(&s.changed).map(|offset| {
            let e = Error::Changed {
                file: s.file.to_string_lossy().into_owned(),
                offset,
            };
            json!({ "offset": offset, "error": e.to_string() })
        });
        let st = lock(&s.index).clone();
        let v = json!({
            "steps": *lock(&s.steps),
            "step_noun": s.meta.noun,
            "isa": s.meta.isa,
            "word_size": s.meta.word_size,
            "reg_names": s.meta.reg_names,
            "format": s.handler.name(),
            "index": {
                "state": st.state,
                "done": st.done,
                "total": st.total,
                "error": st.error,
            },
            "changed": changed,
        });
        Response::json(200, v.to_string())
    }

    fn rows(&mut self, query: &[(String, String)]) -> Answer {
        let p = Params::new(query, &["from", "count"])?;
        let from = p.number("from")?.unwrap_or(0);
        let count = p.count("count", 100, MAX_COUNT)?;
        self.check_i(from).map_err(|_| {
            bad(
                "from",
                format!(
                    "{} {from} is past the end of the trace",
                    self.shared.meta.noun
                ),
            )
        })?;
        let s = Arc::clone(&self.shared);
        let seek = s
            .seek_index
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut rows: Vec<Row> = Vec::new();
        let mut damage = None;
        let mut end = false;
        {
            let mut records = s
                .handler
                .records(&mut self.input, &mut Ctx::new(&s.row_options))
                .map_err(|e| failure(&e, None))?;
            records
                .seek(from, seek.as_ref())
                .map_err(|e| failure(&e, Some("from")))?;
            let mut buf = Vec::new();
            let mut sink = JsonLines::new(&mut buf, records.tables());
            let mut n = 0u64;
            while n < count {
                match records.next_record() {
                    None => {
                        end = true;
                        break;
                    }
                    Some(Err(e)) => {
                        damage = Some(e);
                        end = true;
                        break;
                    }
                    Some(Ok(r)) => sink
                        .write(r.table, r.row())
                        .map_err(|e| Response::error(500, &e.to_string(), None))?,
                }
                n = n.saturating_add(1);
            }
            if !end {
                // The trace ends within this page if nothing follows.
                end = records.next_record().is_none();
            }
            sink.flush()
                .map_err(|e| Response::error(500, &e.to_string(), None))?;
            drop(sink);
            // The keys of a format's lines do not change from row to row: when the first
            // has `thread` and `mem`, the others are not parsed (x64dbg: the fast path).
            let mut complete = false;
            for (k, line) in buf
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .enumerate()
            {
                let text = String::from_utf8_lossy(line).into_owned();
                if complete {
                    rows.push(Row {
                        i: None,
                        has_thread: true,
                        has_mem: true,
                        text,
                    });
                    continue;
                }
                let Ok(Value::Object(m)) = serde_json::from_str::<Value>(&text) else {
                    return Err(Response::error(500, "a row is not a JSON object", None));
                };
                let row = Row {
                    i: m.get("i").and_then(Value::as_u64),
                    has_thread: m.contains_key("thread"),
                    has_mem: m.contains_key("mem"),
                    text,
                };
                complete = k == 0 && row.has_thread && row.has_mem;
                rows.push(row);
            }
        }
        if rows.is_empty() && damage.is_some() {
            return Err(damage.as_ref().map_or_else(
                || Response::error(500, "no rows", None),
                |e| failure(e, None),
            ));
        }
        self.complete_rows(&mut rows)?;
        let mut body = format!("{{\"from\":{from},\"rows\":[");
        for (k, r) in rows.iter().enumerate() {
            if k > 0 {
                body.push(',');
            }
            body.push_str(&r.text);
        }
        body.push_str(&format!("],\"end\":{end}"));
        if let Some(e) = damage {
            body.push_str(&format!(",\"error\":{}", Value::from(e.to_string())));
        }
        body.push('}');
        Ok(Response::json(200, body))
    }

    /// Adds the keys every row has in the API (`thread`, `mem`) where the format's dump
    /// line lacks them, from the steps read alongside: in one place, for every format.
    fn complete_rows(&mut self, rows: &mut [Row]) -> Result<(), Response> {
        let Some(first) = rows.first() else {
            return Ok(());
        };
        if rows.iter().all(|r| r.has_thread && r.has_mem) {
            return Ok(());
        }
        let from = first.i.unwrap_or(0);
        let s = Arc::clone(&self.shared);
        if self.second.is_none() {
            let input = s.input().map_err(|e| failure(&e, None))?;
            self.second = Some(input);
        }
        let Some(input) = self.second.as_mut() else {
            return Ok(());
        };
        let mut steps =
            Self::steps(s.handler, &s, input, &s.row_options).map_err(|e| failure(&e, None))?;
        if from > 0 {
            steps.seek(from).map_err(|e| failure(&e, None))?;
        }
        let big_endian = steps.isa() == trace_registry::steps::Isa::Ppc32;
        let hex = |b: &[u8]| trace_registry::steps::value_hex(b, big_endian);
        for row in rows.iter_mut() {
            let Some(Ok(step)) = steps.next_step() else {
                break;
            };
            if row.i != Some(step.i) {
                return Err(Response::error(
                    500,
                    "the rows and the steps disagree",
                    None,
                ));
            }
            let mut extra = String::new();
            if !row.has_thread {
                extra.push_str(&format!(",\"thread\":{}", step.thread));
            }
            if !row.has_mem {
                let mem: Vec<Value> = step
                    .mem
                    .iter()
                    .map(|a| {
                        let mut m = Map::new();
                        m.insert("addr".into(), format!("{:#x}", a.addr).into());
                        m.insert("size".into(), a.len.into());
                        if a.kind != trace_registry::steps::AccessKind::Unknown {
                            m.insert("access".into(), a.kind.name().into());
                        }
                        if let Some(b) = step.old(a) {
                            m.insert("old".into(), hex(b).into());
                        }
                        if let Some(b) = step.new(a) {
                            m.insert("new".into(), hex(b).into());
                        }
                        Value::Object(m)
                    })
                    .collect();
                extra.push_str(&format!(",\"mem\":{}", Value::from(mem)));
            }
            // Before the closing brace of the dump's object, which keeps its own text.
            if let Some(body) = row.text.strip_suffix('}') {
                row.text = format!("{body}{extra}}}");
            }
        }
        Ok(())
    }

    fn state(&mut self, query: &[(String, String)]) -> Answer {
        let p = Params::new(query, &["i"])?;
        let i = p.required("i")?;
        self.check_i(i)?;
        let s = Arc::clone(&self.shared);
        let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
            .map_err(|e| failure(&e, None))?;
        let st =
            state_of(steps.as_mut(), s.handler.name(), i).map_err(|e| failure(&e, Some("i")))?;
        Ok(Response::json(200, st.to_json()))
    }

    fn mem(&mut self, query: &[(String, String)]) -> Answer {
        let p = Params::new(query, &["i", "addr", "len"])?;
        let i = p.required("i")?;
        let addr = p.required("addr")?;
        let len = p.count("len", u64::from(self.shared.meta.word_size), MAX_LEN)?;
        if addr.checked_add(len).is_none() {
            return Err(bad("len", "the range passes the end of the address space"));
        }
        self.check_i(i)?;
        let s = Arc::clone(&self.shared);
        let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
            .map_err(|e| failure(&e, None))?;
        let mut sidecar = lock(&s.sidecar);
        let q = MemQuery {
            at: i,
            addr,
            len: Some(len),
        };
        let found = mem_of(
            steps.as_mut(),
            sidecar.as_mut().filter(|sc| sc.has_seek_index()),
            &mut Ctx::new(&s.options),
            &q,
        );
        drop(sidecar);
        // Damage after `i` still gives the bytes found before it, as the CLI prints them.
        let (memory, _damage) = found.map_err(|e| failure(&e, Some("i")))?;
        Ok(Response::json(200, memory.to_json()))
    }

    /// `xref` (an address range) or `find` (a pc): one page of hits.
    fn xref(&mut self, query: &[(String, String)], find: bool) -> Answer {
        let p = if find {
            Params::new(query, &["pc", "from", "before", "count"])?
        } else {
            Params::new(query, &["addr", "len", "from", "count", "disasm"])?
        };
        let count = p.count("count", 100, MAX_COUNT)?;
        // `disasm=1`: the lines of `xref --disasm` (operand sizes, read or write).
        let disasm = match p.number("disasm")? {
            None | Some(0) => self.shared.options.disasm,
            Some(1) => true,
            Some(_) => return Err(bad("disasm", "disasm is 0 or 1")),
        };
        let xq = if find {
            XrefQuery {
                mem: None,
                pc: Some(p.required("pc")?),
            }
        } else {
            let addr = p.required("addr")?;
            let len = p.count("len", u64::from(self.shared.meta.word_size), MAX_LEN)?;
            if addr.checked_add(len).is_none() {
                return Err(bad("len", "the range passes the end of the address space"));
            }
            XrefQuery {
                mem: Some((addr, Some(len))),
                pc: None,
            }
        };
        let from = p.number("from")?;
        let before = if find { p.number("before")? } else { None };
        if from.is_some() && before.is_some() {
            return Err(bad("before", "give `from` or `before`, not both"));
        }
        let s = Arc::clone(&self.shared);
        let options = if disasm { &s.row_options } else { &s.options };
        let mut steps =
            Self::steps(s.handler, &s, &mut self.input, options).map_err(|e| failure(&e, None))?;
        let mut sidecar = lock(&s.sidecar);
        let cap = usize::try_from(count).unwrap_or(usize::MAX);
        let mut hits: VecDeque<XrefHit> = VecDeque::new();
        let mut next = None;
        let result = if let Some(b) = before {
            let window = Window {
                from: 0,
                to: b,
                last: Some(cap),
            };
            xref_of(
                steps.as_mut(),
                sidecar.as_mut(),
                disasm,
                &xq,
                window,
                &mut |h| {
                    if hits.len() >= cap {
                        hits.pop_front();
                    }
                    hits.push_back(h.clone());
                    Ok(())
                },
            )
        } else {
            let window = Window {
                from: from.unwrap_or(0),
                to: u64::MAX,
                last: None,
            };
            xref_of(
                steps.as_mut(),
                sidecar.as_mut(),
                disasm,
                &xq,
                window,
                &mut |h| {
                    // A page ends between steps: a step's hits are never split.
                    if hits.len() >= cap && hits.back().is_none_or(|last| last.i != h.i) {
                        next = Some(h.i);
                        return Err(Error::Unsupported(STOP.into()));
                    }
                    hits.push_back(h.clone());
                    Ok(())
                },
            )
        };
        drop(sidecar);
        match result {
            Ok(()) => {}
            Err(Error::Unsupported(m)) if m == STOP => {}
            Err(e) if hits.is_empty() => return Err(failure(&e, None)),
            // Damage after some hits: those hits, and the error.
            Err(e) => {
                let body = hits_body(&hits, before.is_some(), None, Some(&e));
                return Ok(Response::json(200, body));
            }
        }
        Ok(Response::json(
            200,
            hits_body(&hits, before.is_some(), next, None),
        ))
    }

    /// `calls?from=&count=&thread=`: the calls of `calls --json` whose step is `from` or
    /// later (up to `count`), in the order of their steps, as
    /// `{"calls":[…],"next":I|null,"summary":{…}}` (`next`: the step of the first call left
    /// out; `summary` that of `calls --json`, over the whole trace). One pass over the
    /// trace per request.
    fn calls(&mut self, query: &[(String, String)]) -> Answer {
        let p = Params::new(query, &["from", "count", "thread"])?;
        let count = p.count("count", 100, MAX_COUNT)?;
        let from = p.number("from")?.unwrap_or(0);
        let thread = p.number("thread")?;
        let s = Arc::clone(&self.shared);
        let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
            .map_err(|e| failure(&e, None))?;
        let options = CallsOptions {
            thread,
            ..CallsOptions::default()
        };
        let cap = usize::try_from(count).unwrap_or(usize::MAX);
        let mut rows: Vec<String> = Vec::new();
        let mut next: Option<u64> = None;
        let done = calls_of(steps.as_mut(), &options, &mut |c| {
            if c.i >= from && rows.len() < cap {
                rows.push(c.to_json());
            } else if c.i >= from && next.is_none() {
                next = Some(c.i);
            }
            Ok(())
        })
        .map_err(|e| failure(&e, None))?;
        let summary = done.summary.to_json();
        // `{"summary":{…}}` without its outer braces' key.
        let summary = summary
            .strip_prefix("{\"summary\":")
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or("null");
        let next = next.map_or_else(|| "null".to_owned(), |n| n.to_string());
        Ok(Response::json(
            200,
            format!(
                "{{\"calls\":[{}],\"next\":{next},\"summary\":{summary}}}",
                rows.join(",")
            ),
        ))
    }

    /// `stack?i=`: the frames open in step `i`'s thread at `i`, outermost first, as
    /// `{"i":I,"thread":T,"frames":[CALL,…]}` (each CALL a line of `calls --json`). The
    /// calls of the whole trace are found by the first request and kept (up to
    /// [`MAX_KEPT_CALLS`]; past that, one pass per request, ended once the calls before
    /// `i` are known).
    fn stack(&mut self, query: &[(String, String)]) -> Answer {
        let p = Params::new(query, &["i"])?;
        let i = p.required("i")?;
        self.check_i(i)?;
        let kept = self.kept_calls()?;
        let s = Arc::clone(&self.shared);
        let thread = {
            let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
                .map_err(|e| failure(&e, None))?;
            steps.seek(i).map_err(|e| failure(&e, Some("i")))?;
            match steps.next_step() {
                Some(Ok(step)) => step.thread,
                Some(Err(e)) => return Err(failure(&e, None)),
                None => {
                    let e = trace_registry::steps::past_end_of(s.meta.noun, i, i);
                    return Err(failure(&e, Some("i")));
                }
            }
        };
        let frames: Vec<String> = match kept {
            // Not handed out by `kept_calls`.
            KeptCalls::Finding => return Err(Response::error(500, "no calls", None)),
            KeptCalls::All(calls) => {
                // Only a call before `i` can be open at `i`: the entry of a later one is
                // after `i`.
                let before = calls.partition_point(|c| c.i < i);
                calls
                    .get(..before)
                    .unwrap_or_default()
                    .iter()
                    .filter(|c| open_at(c, i, thread))
                    .map(Call::to_json)
                    .collect()
            }
            KeptCalls::TooMany => {
                // Steps of their own, from the start: the pass needs the registers of
                // every step.
                let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
                    .map_err(|e| failure(&e, None))?;
                let mut frames = Vec::new();
                let result = calls_of(steps.as_mut(), &CallsOptions::default(), &mut |c| {
                    // The calls come in the order of their steps: once one at `i` or
                    // later comes, every call before `i` has.
                    if c.i >= i {
                        return Err(Error::Unsupported(STOP.into()));
                    }
                    if open_at(c, i, thread) {
                        frames.push(c.to_json());
                    }
                    Ok(())
                });
                match result {
                    Ok(_) => {}
                    Err(Error::Unsupported(m)) if m == STOP => {}
                    Err(e) => return Err(failure(&e, None)),
                }
                frames
            }
        };
        Ok(Response::json(
            200,
            format!(
                "{{\"i\":{i},\"thread\":{thread},\"frames\":[{}]}}",
                frames.join(",")
            ),
        ))
    }

    /// The calls `stack` answers from: found by a pass on the first call, then kept; a
    /// call while that pass runs is a 503 saying so.
    fn kept_calls(&mut self) -> Result<KeptCalls, Response> {
        let s = Arc::clone(&self.shared);
        {
            let mut kept = lock(&s.calls);
            match kept.as_ref() {
                Some(KeptCalls::Finding) => {
                    return Err(Response::error(
                        503,
                        "the calls are still being found (the first call of /api/stack reads the whole trace): try again shortly",
                        None,
                    ));
                }
                Some(k) => return Ok(k.clone()),
                None => *kept = Some(KeptCalls::Finding),
            }
        }
        let finding = FindingCalls {
            kept: &s.calls,
            done: false,
        };
        let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
            .map_err(|e| failure(&e, None))?;
        let mut calls = Vec::new();
        let mut too_many = false;
        let result = calls_of(steps.as_mut(), &CallsOptions::default(), &mut |c| {
            if calls.len() >= MAX_KEPT_CALLS {
                too_many = true;
                return Err(Error::Unsupported(STOP.into()));
            }
            calls.push(c.clone());
            Ok(())
        });
        match result {
            Ok(_) => {}
            Err(Error::Unsupported(m)) if m == STOP && too_many => {}
            Err(e) => return Err(failure(&e, None)),
        }
        let found = if too_many {
            KeptCalls::TooMany
        } else {
            KeptCalls::All(Arc::new(calls))
        };
        finding.done(found.clone());
        Ok(found)
    }

    /// `origin?i=&target=&max_hops=`: `tracekit origin --json`'s hops as one object,
    /// `{"at":I,"target":"…","hops":[HOP,…]}`, with the sidecar when the server has one
    /// that seeks.
    fn origin(&mut self, query: &[(String, String)]) -> Answer {
        let p = Params::new(query, &["i", "target", "max_hops"])?;
        let i = p.required("i")?;
        let target: Target = p
            .get("target")
            .ok_or_else(|| bad("target", "parameter \"target\" is required"))?
            .parse()
            .map_err(|m: String| bad("target", m))?;
        let default_hops = u64::try_from(DEFAULT_MAX_HOPS).unwrap_or(MAX_HOPS);
        let max_hops = p.count("max_hops", default_hops, MAX_HOPS)?;
        self.check_i(i)?;
        let s = Arc::clone(&self.shared);
        let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
            .map_err(|e| failure(&e, None))?;
        let isa = steps.isa();
        // The analysis refuses a whole trace (not x86/x64, tracepoint frames) with no
        // parameter at fault; past those, a refusal is of the register or of `i`.
        let whole_trace = !matches!(isa, Isa::X64 | Isa::X86) || steps.kind().memory_is_snapshot();
        let param = if whole_trace {
            None
        } else if target.fits(isa) {
            Some("i")
        } else {
            Some("target")
        };
        let q = OriginQuery {
            at: i,
            target,
            max_hops: usize::try_from(max_hops).unwrap_or(usize::MAX),
        };
        let mut sidecar = lock(&s.sidecar);
        let found = origin_of(
            steps.as_mut(),
            sidecar.as_mut().filter(|sc| sc.has_seek_index()),
            &q,
        );
        drop(sidecar);
        let found = found.map_err(|e| failure(&e, param))?;
        Ok(Response::json(200, found.to_json()))
    }

    /// `writer` and `reader`: `search` from step `i` for register `reg`, answered as
    /// `{"i","reg",KEY:J|null}` with `"searched"` when none was found.
    fn register_search(
        &mut self,
        query: &[(String, String)],
        key: &str,
        search: RegisterSearch,
    ) -> Answer {
        let p = Params::new(query, &["i", "reg"])?;
        let i = p.required("i")?;
        let reg = p
            .get("reg")
            .ok_or_else(|| bad("reg", "parameter \"reg\" is required"))?
            .to_owned();
        self.check_i(i)?;
        let s = Arc::clone(&self.shared);
        let mut steps = Self::steps(s.handler, &s, &mut self.input, &s.options)
            .map_err(|e| failure(&e, None))?;
        let (found, searched) = search(steps.as_mut(), i, &reg).map_err(|e| e.into_response())?;
        let mut v = json!({ "i": i, "reg": reg });
        if let Some(map) = v.as_object_mut() {
            map.insert(key.into(), found.into());
            if found.is_none() {
                map.insert("searched".into(), searched.into());
            }
        }
        Ok(Response::json(200, v.to_string()))
    }
}

/// Whether `call` is open in `thread` at step `i`: entered at or before `i`, and not
/// returned before it (its ret, at `i` or later, or none in the trace).
fn open_at(call: &Call, i: u64, thread: u64) -> bool {
    call.thread == thread
        && call.entry_i.is_some_and(|entry| entry <= i)
        && call.ret_i.is_none_or(|ret| i <= ret)
}

/// One row of `/api/rows`: the dump's JSON line, and what [`Worker::complete_rows`]
/// needs to know of it.
struct Row {
    i: Option<u64>,
    has_thread: bool,
    has_mem: bool,
    text: String,
}

/// The error `on_hit` stops a page with.
const STOP: &str = "page full";

/// `{"hits":[…],"next":…}`: the hits as `xref` prints them (newest first for `before`),
/// and `error` when damage cut the search short.
fn hits_body(
    hits: &VecDeque<XrefHit>,
    descending: bool,
    next: Option<u64>,
    error: Option<&Error>,
) -> String {
    let lines: Vec<String> = if descending {
        hits.iter().rev().map(XrefHit::to_json).collect()
    } else {
        hits.iter().map(XrefHit::to_json).collect()
    };
    let next = next.map_or_else(|| "null".to_owned(), |n| n.to_string());
    let mut body = format!("{{\"hits\":[{}],\"next\":{next}", lines.join(","));
    if let Some(e) = error {
        body.push_str(&format!(",\"error\":{}", Value::from(e.to_string())));
    }
    body.push('}');
    body
}

/// [`find_writer`] or [`find_reader`]: the step found, and how many were searched.
type RegisterSearch = fn(&mut dyn Steps, u64, &str) -> Result<(Option<u64>, u64), WriterError>;

/// Why [`find_writer`] or [`find_reader`] failed.
#[derive(Debug)]
pub enum WriterError {
    /// The stream has no register of that name.
    UnknownReg(String),
    /// A read error (or `i` past the end).
    Read(Error),
}

impl WriterError {
    fn into_response(self) -> Response {
        match self {
            WriterError::UnknownReg(m) => bad("reg", m),
            WriterError::Read(e) => failure(&e, Some("i")),
        }
    }
}

impl From<Error> for WriterError {
    fn from(e: Error) -> Self {
        WriterError::Read(e)
    }
}

/// The last step `j < i` of step `i`'s thread after which register `name` changed (the
/// value before a step is the thread's state then, so a change first seen before step `k`
/// was made by the thread's step before `k`), read back from `i` in windows that double,
/// up to [`WRITER_SEARCH`] steps; with how many steps were searched.
///
/// # Errors
///
/// An unknown register, `i` past the end, or a read error.
pub fn find_writer(
    steps: &mut dyn Steps,
    i: u64,
    name: &str,
) -> Result<(Option<u64>, u64), WriterError> {
    steps.seek(i)?;
    let thread = match steps.next_step() {
        Some(step) => step?.thread,
        None => return Err(trace_registry::steps::past_end(i, i).into()),
    };
    let Some(src) = steps.reg_source(name) else {
        return Err(WriterError::UnknownReg(format!(
            "this trace has no register {name:?} (`state` lists the names)"
        )));
    };
    let mut plan = RegPlan::new(vec![RegCopy {
        src,
        dst: 0,
        len: src.len,
    }]);
    let mut at_i = vec![0u8; src.len];
    steps.update_regs(&mut plan, &mut at_i);
    let mut window = WRITER_FIRST;
    loop {
        let lo = i.saturating_sub(window);
        let searched = i.saturating_sub(lo);
        steps.seek(lo)?;
        let mut plan = RegPlan::new(plan.copies().to_vec());
        let mut value = vec![0u8; src.len];
        // The thread's steps in the window and the value before each, then `i`'s.
        let mut seen: Vec<(u64, Vec<u8>)> = Vec::new();
        while let Some(step) = steps.next_step() {
            let (k, t) = {
                let step = step?;
                (step.i, step.thread)
            };
            if k >= i {
                break;
            }
            if t == thread {
                steps.update_regs(&mut plan, &mut value);
                seen.push((k, value.clone()));
            }
        }
        seen.push((i, at_i.clone()));
        let found = seen.windows(2).rev().find_map(|w| match w {
            [(p, before_p), (_, before_k)] if before_p != before_k => Some(*p),
            _ => None,
        });
        if found.is_some() || lo == 0 || searched >= WRITER_SEARCH {
            return Ok((found, searched));
        }
        window = window.saturating_mul(2).min(WRITER_SEARCH);
    }
}

/// The first step `j >= i` of step `i`'s thread whose instruction reads register `name`
/// (through any part of it; a flag by its `flags.x` name), by its operands as the
/// disassembler decodes them; read forwards up to [`READER_SEARCH`] steps; with how many
/// steps were read.
///
/// # Errors
///
/// A name that is no x86 register or flag, a trace that is not x86 or x64, `i` past the
/// end, or a read error.
pub fn find_reader(
    steps: &mut dyn Steps,
    i: u64,
    name: &str,
) -> Result<(Option<u64>, u64), WriterError> {
    let isa = steps.isa();
    if !matches!(isa, Isa::X64 | Isa::X86) {
        return Err(WriterError::UnknownReg(
            "register reads are known for x86 and x64 traces only (from the instructions' \
             operands)"
                .into(),
        ));
    }
    let Some(watch) = ReadWatch::parse(name) else {
        return Err(WriterError::UnknownReg(format!(
            "{name:?} is no x86 register or flag whose reads can be told"
        )));
    };
    steps.seek(i)?;
    let mut disasm = Disassembler::new(isa);
    let mut thread = None;
    let mut searched = 0u64;
    while searched < READER_SEARCH {
        let Some(step) = steps.next_step() else {
            break;
        };
        let step = step?;
        searched = searched.saturating_add(1);
        if step.thread == *thread.get_or_insert(step.thread)
            && disasm.reads(step.pc, &step.opcode, watch) == Some(true)
        {
            return Ok((Some(step.i), searched));
        }
    }
    if thread.is_none() {
        return Err(trace_registry::steps::past_end(i, i).into());
    }
    Ok((None, searched))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_decimal_or_hex_only() {
        assert_eq!(parse_number("42"), Ok(42));
        assert_eq!(parse_number("0x2A"), Ok(42));
        assert_eq!(parse_number("0X2a"), Ok(42));
        assert_eq!(parse_number("18446744073709551615"), Ok(u64::MAX));
        for bad in [
            "",
            "-1",
            "+1",
            " 1",
            "1_000",
            "0x",
            "0xg",
            "1e3",
            "18446744073709551616",
            "0x1ffffffffffffffff",
        ] {
            assert!(parse_number(bad).is_err(), "{bad:?}");
        }
    }

    /// The index status's `done` follows the steps indexed: from the start of its span
    /// (the seek-index pass) up to its end, strictly inside the file's size meanwhile, and
    /// never back.
    #[test]
    fn index_progress_moves_with_the_steps() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/x64dbg")
            .join("sessions.trace64");
        let api = Api::open(path.as_os_str(), None, &Options::default()).unwrap();
        let total = api.index_status().total;
        assert!(total > 100, "{total}");
        let (start, end) = (total / 3, total - total / 10);
        let hook = progress_hook(&api.shared, start..end, 1000);
        let mut seen = vec![api.index_status().done];
        for steps in [0, 1, 250, 500, 499, 999, 1000, 5000] {
            hook(steps);
            seen.push(api.index_status().done);
        }
        assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
        assert_eq!(seen[1], start);
        assert_eq!(seen[4], start + (end - start) / 2);
        assert_eq!(seen[5], seen[4], "not back");
        assert!(seen[6] > seen[5] && seen[6] < end, "{seen:?}");
        assert_eq!(seen[7], end);
        assert_eq!(seen[8], end);
        assert!(seen[1..].iter().all(|&d| d > 0 && d < total), "{seen:?}");
    }

    /// `stack` answers the same from the calls kept and by a pass per request (the path
    /// of traces with more than [`MAX_KEPT_CALLS`] calls), and 503 while the first pass
    /// runs.
    #[test]
    fn stacks_by_a_pass_are_the_stacks_kept() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/tenet/basic.log");
        let api = Api::open(path.as_os_str(), None, &Options::default()).unwrap();
        let steps = (0u64..)
            .take_while(|i| api.handle("stack", &q(&[("i", &i.to_string())])).status == 200)
            .count() as u64;
        assert!(steps > 4, "{steps}");
        let answers = |api: &Api| -> Vec<Vec<u8>> {
            (0..steps)
                .map(|i| api.handle("stack", &q(&[("i", &i.to_string())])).body)
                .collect()
        };
        assert!(matches!(*lock(&api.shared.calls), Some(KeptCalls::All(_))));
        let kept = answers(&api);
        *lock(&api.shared.calls) = Some(KeptCalls::TooMany);
        assert_eq!(answers(&api), kept);
        // While a first pass runs, the others are told to come back.
        *lock(&api.shared.calls) = Some(KeptCalls::Finding);
        assert_eq!(api.handle("stack", &q(&[("i", "1")])).status, 503);
        *lock(&api.shared.calls) = None;
        assert_eq!(answers(&api), kept);
        let open = kept
            .iter()
            .filter(|b| !String::from_utf8_lossy(b).contains("\"frames\":[]"))
            .count();
        assert!(open > 0, "a frame is open somewhere");
    }

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn params_refuse_unknown_repeated_and_out_of_range() {
        let query = q(&[("i", "5"), ("x", "1")]);
        let e = Params::new(&query, &["i"]).err().unwrap();
        assert_eq!(e.status, 400);
        let v: Value = serde_json::from_slice(&e.body).unwrap();
        assert_eq!(v["param"], "x");
        let twice = q(&[("i", "5"), ("i", "6")]);
        assert!(Params::new(&twice, &["i"]).is_err());
        let counts = q(&[("count", "0"), ("len", "65537"), ("ok", "10000")]);
        let p = Params::new(&counts, &["count", "len", "ok"]).unwrap();
        assert!(p.count("count", 1, MAX_COUNT).is_err());
        assert!(p.count("len", 1, MAX_LEN).is_err());
        assert_eq!(p.count("ok", 1, MAX_COUNT).unwrap(), 10_000);
        assert!(p.required("missing").is_err());
    }
}
