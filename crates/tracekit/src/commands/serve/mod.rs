//! `tracekit serve FILE [--port N] [--host H] [--allow-host NAME]… [--open]`: a trace
//! explorer in the browser.
//!
//! An HTTP/1.1 server (hyper on tokio, with [`http`] around it) serves one trace and the
//! explorer page, which is shipped inside the binary (`assets/`). The trace is opened once; a
//! sidecar index (`FILE.tkidx`, as `tracekit index` writes it) is used when there is a
//! usable one, else built in the background (beside the trace, or in a temporary
//! directory when that is not writable), while the API already answers (by passes, more
//! slowly). The first line on stdout is the URL to open, `http://127.0.0.1:PORT/?token=T`.
//!
//! # Security
//!
//! - The server binds 127.0.0.1 unless `--host H` is given (then it warns that anyone who
//!   can reach H:PORT with the token can read the trace).
//! - Every `/api/` call needs the token T (128 random bits from the OS, as 32 hex digits),
//!   as `?token=T` or `Authorization: Bearer T`; a missing or wrong one gets 403. The
//!   page's assets (`/`, `/index.html`, `/app.js`, `/style.css`) hold no trace data and
//!   need none.
//! - A request whose `Host` header is not the address served (`127.0.0.1:PORT`,
//!   `localhost:PORT`, `H:PORT`, or `NAME:PORT` for each `--allow-host NAME`) gets 403: a
//!   web page whose DNS name is rebound to 127.0.0.1 would otherwise be same-origin with
//!   the server. No CORS headers are sent, so other pages cannot read the answers either.
//! - Every response has a Content-Security-Policy that lets the page run only its own
//!   script and style sheet (`default-src 'self'`, no inline script) and forbids framing
//!   (`frame-ancestors 'none'`, `X-Frame-Options: DENY`), `Referrer-Policy: no-referrer`
//!   and `X-Content-Type-Options: nosniff` ([`http::SECURITY_HEADERS`]). The page takes
//!   the token out of the address bar once loaded (`history.replaceState`) and keeps it
//!   in memory.
//! - No path reaches the file system: the server knows its four assets and `/api/`; any
//!   other path is 404. Only GET and HEAD (others 405), heads of at most 16 KiB (431), no
//!   request bodies (413), at most [`MAX_CONNECTIONS`] connections at once and
//!   [`MAX_PER_PEER`] from one address (503 past that); a connection is closed when its
//!   next request head is not whole [`HEAD_TIME`] after the connection or the previous
//!   answer (a client sending it slowly cannot hold its connection), or after
//!   [`MAX_REQUESTS`].
//!   Every refusal of a head is the server's JSON error with the headers above
//!   ([`http::check_head`] runs before hyper's parser).
//!
//! # The server
//!
//! hyper (HTTP/1.1) on one tokio thread serves every connection; the API's calls, which
//! read the trace, run on at most [`api::WORKERS`] blocking threads (one per worker of
//! [`api::Api`]), so a slow call never holds up the others' heads, assets or refusals.
//! SIGTERM and SIGINT end the server at once (exit 0), without waiting for calls under way.
//!
//! # The API
//!
//! Every answer is JSON (`application/json; charset=utf-8`, `Cache-Control: no-store`).
//! Numbers in parameters are decimal or `0x` hex (nothing else: no sign, no spaces).
//! Addresses and register values in answers are `0x…` strings, as the CLI prints them.
//! Errors are `{"error":"…"}` with `"param":"NAME"` when a parameter is at fault:
//! 400 for a malformed, missing, repeated, unknown or out-of-range parameter (refused,
//! never clamped: `i` past the end, `count` 0 or over 10,000, `len` 0 or over 65,536);
//! 403 for a missing or wrong token or a foreign `Host`; 404 for an unknown path; 422 for
//! a damaged trace (the reader's error, with its offset); 409 once the file has been cut
//! short by another process (truncated, or rewritten as `cp` does) for a call that reached
//! the bytes no longer there: `{"error":"FILE changed while it was read (at offset 0x…)",
//! "changed":true}` (calls within what is left are still answered); 500 for an I/O
//! failure. The server keeps serving after any of them.
//!
//! - `GET /api/info` → `tracekit info --json FILE`'s object.
//! - `GET /api/status` → `{"steps":N|null,"step_noun":"instruction"|"frame","isa":"x64"|
//!   "x86"|"ppc"|"other","word_size":8,"reg_names":[…],"format":"x64dbg","index":
//!   {"state":"ready"|"building"|"failed"|"none","done":BYTES,"total":BYTES,"error":null|"…"}}`.
//!   plus `"changed":null|{"offset":N,"error":"…"}` (where the file was found cut short).
//!   `steps` is null until known (the index counts them); `reg_names` are the general
//!   registers, pc and flags; the page polls this for the index's progress.
//! - `GET /api/rows?from=F&count=C` (F default 0, C 1..=10,000, default 100) →
//!   `{"from":F,"rows":[ROW,…],"end":bool}`: each ROW is the object `tracekit dump --disasm`
//!   prints for step `i` (its keys depend on the format), plus, where that lacks them,
//!   `thread` (0 where the format has none) and `mem` (the step's accesses:
//!   `[{"addr","size","access"?,"old"?,"new"?}]`). So every ROW has `i`, `thread`, `pc` (a
//!   `0x…` string; null for a tfile frame that collected no pc), `mem`, and where known
//!   `asm` (absent or null when not decodable) and `regs` (x64dbg, Tenet: the registers
//!   that changed before the step; tfile, amber FULL: every collected register). `end`
//!   is true when the trace ends within this page. On damage after some rows, the rows
//!   before it come with `"error":"…"` and `end` true.
//! - `GET /api/state?i=N` → `tracekit state --json --at N`'s object:
//!   `{"i":N,"thread":T,"regs":{"rax":"0x…",…}}`.
//! - `GET /api/mem?i=N&addr=A&len=L` (L 1..=65,536, default one word) →
//!   `tracekit mem --json --at N A L`'s object:
//!   `{"i":N,"addr":"0x…","len":L,"bytes":[…],"source":[…],"inferred":[…]}`.
//! - `GET /api/xref?addr=A&len=L&from=F&count=C` → `{"hits":[HIT,…],"next":i|null}`: each
//!   HIT a line of `tracekit xref FILE A:L` (`{"i","thread","pc","addr","old","new"}`),
//!   only those with `i >= F` (default 0), at most C (1..=10,000, default 100; the hits of
//!   one step are never split over two pages, so a page may exceed C when one step has
//!   more); `next` is the `from` of the following page, null at the end. With `disasm=1`,
//!   the lines of `tracekit xref --disasm` (with `size` and `access`: read, write,
//!   readwrite or unknown; accesses then cover their operand size).
//! - `GET /api/find?pc=P&from=F&count=C` → the same shape, HITs the lines of
//!   `tracekit xref FILE --pc P` (`{"i","thread","pc"}`). With `before=B` instead of
//!   `from`: the last C executions with `i < B`, newest first, and `next` null.
//! - `GET /api/calls?from=F&count=C&thread=T` → `{"calls":[CALL,…],"next":i|null,
//!   "summary":{…}}`: each CALL a line of `tracekit calls --json FILE` (with `i >= F`, at
//!   most C, 1..=10,000, default 100; of thread T when given), `next` the `from` of the
//!   following page, `summary` that command's over the whole trace (x86/x64 streams; one
//!   pass per request).
//! - `GET /api/stack?i=N` → `{"i":N,"thread":T,"frames":[CALL,…]}`: the frames open in
//!   step N's thread T at N, outermost first, each CALL a line of `tracekit calls --json
//!   FILE` (as `/api/calls` gives them): the calls of thread T with `entry_i <= N` and
//!   `ret_i` null or `N <= ret_i`. The first request finds the calls of the whole trace
//!   by a pass and the server keeps them (up to [`api::MAX_KEPT_CALLS`]; a trace with more
//!   gets a pass per request, up to N's calls); a request while that first pass runs is
//!   a 503 `{"error":"the calls are still being found …"}` (try again), rather than hold
//!   a worker. Streams other than x86/x64 get the 400 of `/api/calls`; an `i` past the end
//!   is a 400 on `i`.
//! - `GET /api/writer?i=N&reg=NAME` → `{"i":N,"reg":NAME,"writer":J|null}`: the last step
//!   `J < N` of step N's thread after which register NAME (a name of `state`) changed
//!   (the values of a step are those before it, so a change first seen at the thread's
//!   step `k` was made by its step before `k`). Searched backwards from N in windows that
//!   double, up to [`api::WRITER_SEARCH`] steps; when none is found the answer adds
//!   `"searched":M`, the steps looked at. An unknown NAME is a 400 on `reg`.
//! - `GET /api/reader?i=N&reg=NAME` → `{"i":N,"reg":NAME,"reader":J|null}`: the first step
//!   `J >= N` of step N's thread whose instruction reads register NAME (through any part
//!   of it, as `eax` reads `rax`; a flag by its `state` name such as `flags.z`, or any
//!   flag for `rflags`), by the instruction's operands (x86 and x64 traces whose steps
//!   carry their bytes: x64dbg). Read forwards up to [`api::READER_SEARCH`] steps; when
//!   none is found the answer adds `"searched":M`. A NAME that is no x86 register or
//!   flag, or a trace of another instruction set, is a 400 on `reg`.
//! - `GET /api/origin?i=N&target=T&max_hops=K` → `{"at":N,"target":LABEL,"hops":[HOP,…]}`:
//!   where the value of T before step N came from, `tracekit origin --json --at N T
//!   --max-hops K`'s lines as one object (each HOP `{"i","thread","pc","asm","from",
//!   "kind","loc"}`, newest first; the last hop's `kind`, `compute`, `syscall`, `partial`,
//!   `start` or `unknown`, says why the chain stopped, a `copy` that K cut it). T is a
//!   register as `state` names it or `ADDR[:LEN]` (LEN 1 to 64, default 8); K 1..=1,024,
//!   default 64. The sidecar is used when the server has one. A T that does not parse or
//!   is no register of the trace's instruction set is a 400 on `target`; a trace that is
//!   not x86/x64, or of tracepoint frames (tfile), a 400 with no parameter.

pub mod api;
pub mod http;

use std::cell::Cell;
use std::collections::HashMap;
use std::convert::Infallible;
use std::ffi::OsString;
use std::future::Future;
use std::io::Write;
use std::net::{IpAddr, TcpListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONNECTION, HOST};
use tokio::io::AsyncWriteExt;
use trace_registry::Options;

use self::api::Api;
use self::http::{Heads, Response};
use crate::CliError;

/// The page, embedded in the binary.
pub const INDEX_HTML: &str = include_str!("assets/index.html");
/// The page's script.
pub const APP_JS: &str = include_str!("assets/app.js");
/// The page's style sheet.
pub const STYLE_CSS: &str = include_str!("assets/style.css");

/// The most connections open at once: enough that clients holding connections open slowly
/// cannot keep others out while [`HEAD_TIME`] closes them, few enough for the process's
/// file descriptors.
pub const MAX_CONNECTIONS: usize = 1024;

/// The most connections open at once from one address.
pub const MAX_PER_PEER: usize = 512;

/// How long the whole head of a request may take, from the connection's start or the
/// previous answer (so also how long a kept-alive connection may idle): a client that
/// sends it a little at a time is closed then, however often it sends.
pub const HEAD_TIME: Duration = Duration::from_secs(5);

/// The most requests one kept-alive connection serves.
pub const MAX_REQUESTS: u32 = 10_000;

/// How long a refusal written outside hyper (a refused head, too many connections) may
/// take to go out.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// Arguments of `tracekit serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The trace file (any format with an instruction stream: x64dbg, gdb-tfile, Tenet,
    /// amber TT6/TT6E/FULL).
    pub file: OsString,
    /// The port; 0 (the default) picks a free one. The URL printed says which.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Bind this address instead of 127.0.0.1: anyone who can reach it with the token can
    /// read the trace (a warning says so). Requests must then name it in their Host.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Also accept requests whose Host header names NAME (repeatable): the machine's DNS
    /// names or addresses through which clients reach `--host`. Any other Host is refused
    /// (the DNS-rebinding defence).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_host: Vec<String>,
    /// Open the page in the system browser (xdg-open, open, or start).
    #[arg(long)]
    pub open: bool,
}

/// What every connection needs: the API, the token and the Host values accepted.
struct Server {
    api: Api,
    token: String,
    hosts: Vec<String>,
    connections: AtomicUsize,
    /// Open connections by peer address.
    peers: Mutex<HashMap<IpAddr, usize>>,
}

/// A connection counted by [`Server::admit`], uncounted when dropped.
struct Admitted {
    server: Arc<Server>,
    peer: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.server.connections.fetch_sub(1, Ordering::SeqCst);
        let mut peers = self
            .server
            .peers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = peers.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                peers.remove(&self.peer);
            }
        }
    }
}

impl Server {
    /// Counts a new connection from `peer`, unless that would pass a limit.
    fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<Admitted> {
        if self.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            self.connections.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        let mut peers = self.peers.lock().unwrap_or_else(PoisonError::into_inner);
        let n = peers.entry(peer).or_insert(0);
        if *n >= MAX_PER_PEER {
            drop(peers);
            self.connections.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        *n = n.saturating_add(1);
        Some(Admitted {
            server: Arc::clone(self),
            peer,
        })
    }
}

/// 128 random bits from the OS, as 32 hex digits.
fn new_token() -> Result<String, CliError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| CliError::Usage(format!("cannot get random bytes for the token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `host:port` as it appears in a URL and a `Host` header (IPv6 in brackets).
fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Opens the trace, binds, prints the URL and serves until SIGTERM or SIGINT.
///
/// # Errors
///
/// The trace cannot be opened or has no instruction stream (exit 2 for the latter), the
/// address cannot be bound, the runtime or its signal handlers cannot be set up, or the
/// URL cannot be printed.
pub fn run(
    args: &ServeArgs,
    forced: Option<&str>,
    options: &Options,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let api = Api::open(&args.file, forced, options)?;
    let host = args.host.clone().unwrap_or_else(|| "127.0.0.1".into());
    let listener = TcpListener::bind((host.as_str(), args.port)).map_err(|e| {
        CliError::io(
            format!("cannot listen on {}", authority(&host, args.port)),
            e,
        )
    })?;
    let port = listener
        .local_addr()
        .map_err(|e| CliError::io("cannot read the port listened on", e))?
        .port();
    // One thread for every connection's I/O; the API's blocking calls on their own pool,
    // one thread per worker (more could only wait for a worker).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(api::WORKERS)
        .build()
        .map_err(|e| CliError::io("cannot start the server's runtime", e))?;
    let (listener, stop) = {
        let _in_runtime = runtime.enter();
        listener
            .set_nonblocking(true)
            .map_err(|e| CliError::io("cannot set up the listening socket", e))?;
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| CliError::io("cannot set up the listening socket", e))?;
        // Before the URL is printed: a client that has read it may stop the server.
        (listener, stop_signal()?)
    };
    let token = new_token()?;
    let unspecified = host
        .trim_matches(['[', ']'])
        .parse::<IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified());
    let shown = if unspecified {
        "127.0.0.1"
    } else {
        host.as_str()
    };
    let url = format!("http://{}/?token={token}", authority(shown, port));
    writeln!(out, "{url}")?;
    out.flush()?;
    if args.host.is_some() {
        writeln!(
            err,
            "warning: serving on {}: anyone who can reach it with the token can read the trace",
            authority(&host, port)
        )?;
        if unspecified && args.allow_host.is_empty() {
            writeln!(
                err,
                "note: requests must name this server in their Host header: give the names or addresses clients use with --allow-host NAME"
            )?;
        }
    }
    let mut hosts = vec![authority("127.0.0.1", port), authority("localhost", port)];
    hosts.push(authority(&host, port));
    hosts.extend(args.allow_host.iter().map(|name| authority(name, port)));
    let server = Arc::new(Server {
        api,
        token,
        hosts: hosts.into_iter().map(|h| h.to_ascii_lowercase()).collect(),
        connections: AtomicUsize::new(0),
        peers: Mutex::new(HashMap::new()),
    });
    let indexer = server.api.clone();
    let temp = std::env::temp_dir().join(format!("tracekit-serve-{}", std::process::id()));
    std::thread::spawn(move || indexer.build_index(&temp));
    if args.open {
        open_browser(&url, err);
    }
    runtime.block_on(async {
        tokio::spawn(accept(listener, server));
        stop.await;
    });
    // Calls under way read a trace: nothing of theirs needs finishing.
    runtime.shutdown_background();
    Ok(())
}

/// A future that is ready at SIGTERM or SIGINT (Ctrl-C elsewhere than Unix).
#[cfg(unix)]
fn stop_signal() -> Result<impl Future<Output = ()>, CliError> {
    use tokio::signal::unix::{SignalKind, signal};
    let handler =
        |kind| signal(kind).map_err(|e| CliError::io("cannot handle the stop signals", e));
    let (mut term, mut int) = (
        handler(SignalKind::terminate())?,
        handler(SignalKind::interrupt())?,
    );
    Ok(std::future::poll_fn(move |cx| {
        if term.poll_recv(cx).is_ready() || int.poll_recv(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }))
}

/// A future that is ready at SIGTERM or SIGINT (Ctrl-C elsewhere than Unix).
#[cfg(not(unix))]
fn stop_signal() -> Result<impl Future<Output = ()>, CliError> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// Accepts connections for ever, each served on its own task; past a limit, one is
/// answered 503 and closed.
async fn accept(listener: tokio::net::TcpListener, server: Arc<Server>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            // Out of file descriptors, say: wait for some to close.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        match server.admit(peer.ip()) {
            Some(admitted) => tokio::spawn(connection(stream, admitted)),
            None => tokio::spawn(refuse(
                stream,
                Response::error(503, "too many connections", None),
            )),
        };
    }
}

/// Writes `response` (closing the connection) where hyper does not run.
async fn refuse(mut stream: tokio::net::TcpStream, response: Response) {
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        stream.write_all(&response.to_bytes()).await?;
        stream.shutdown().await
    })
    .await;
}

/// A boxed future, as hyper's `poll_without_shutdown` needs one that is `Unpin`.
type Answer =
    Pin<Box<dyn Future<Output = Result<hyper::Response<Full<Bytes>>, Infallible>> + Send>>;

/// Serves one connection with hyper: the head deadline [`HEAD_TIME`], at most
/// [`MAX_REQUESTS`]; a head that [`http::check_head`] refuses is answered once hyper has
/// answered the requests before it.
async fn connection(stream: tokio::net::TcpStream, admitted: Admitted) {
    let server = Arc::clone(&admitted.server);
    let served = Cell::new(0u32);
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| -> Answer {
        served.set(served.get().saturating_add(1));
        let last = served.get() >= MAX_REQUESTS;
        let server = Arc::clone(&server);
        Box::pin(async move {
            let response = server.answer(&req).await;
            // Not after a method refused: the client may be sending a body.
            let keep_alive = !last && response.status != 405 && wants_keep_alive(&req);
            Ok(response.into_hyper(keep_alive))
        })
    });
    let mut conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIME)
        .keep_alive(true)
        // A client may shut its side once it has sent its requests: answer them still.
        .half_close(true)
        // Room for a few pipelined heads; each one is bounded by `check_head` already.
        .max_buf_size(4 * http::MAX_HEAD)
        .serve_connection(Heads::new(stream), service);
    let _ = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)).await;
    let (stream, refusal) = conn.into_parts().io.into_parts();
    if let Some(e) = refusal {
        refuse(stream, Response::error(e.status, &e.message, None)).await;
    }
    drop(admitted);
}

/// Whether the client asks to keep the connection open (HTTP/1.1 unless
/// `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`).
fn wants_keep_alive(req: &hyper::Request<Incoming>) -> bool {
    let has = |token: &str| {
        req.headers().get_all(CONNECTION).iter().any(|v| {
            v.to_str()
                .unwrap_or_default()
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case(token))
        })
    };
    match req.version() {
        hyper::Version::HTTP_11 => !has("close"),
        _ => has("keep-alive"),
    }
}

/// Starts the system browser on `url`; a failure is a warning.
fn open_browser(url: &str, err: &mut dyn Write) {
    let mut cmd = if cfg!(target_os = "windows") {
        let mut c = std::process::Command::new("cmd");
        c.args(["/C", "start", "", url]);
        c
    } else if cfg!(target_os = "macos") {
        let mut c = std::process::Command::new("open");
        c.arg(url);
        c
    } else {
        let mut c = std::process::Command::new("xdg-open");
        c.arg(url);
        c
    };
    if let Err(e) = cmd.spawn() {
        let _ = writeln!(err, "warning: cannot start a browser ({e}); open {url}");
    }
}

/// What a request asks for, once checked: an answer at once, or an API call.
enum Route {
    Done(Response),
    Api {
        endpoint: String,
        query: Vec<(String, String)>,
    },
}

impl Server {
    /// The response to a request.
    async fn answer(&self, req: &hyper::Request<Incoming>) -> Response {
        if !matches!(*req.method(), hyper::Method::GET | hyper::Method::HEAD) {
            return Response::error(405, "only GET and HEAD are served", None);
        }
        match self.route(req) {
            Route::Done(r) => r,
            Route::Api { endpoint, query } => {
                // The trace is read there: on the blocking pool, not on the reactor.
                let api = self.api.clone();
                tokio::task::spawn_blocking(move || api.handle(&endpoint, &query))
                    .await
                    .unwrap_or_else(|e| Response::error(500, &format!("internal error: {e}"), None))
            }
        }
    }

    /// Checks the Host and the token, and finds what the path names.
    fn route(&self, req: &hyper::Request<Incoming>) -> Route {
        let header = |name| {
            req.headers()
                .get(name)
                .and_then(|v: &hyper::header::HeaderValue| v.to_str().ok())
        };
        // The DNS-rebinding defence: see the module docs.
        let host = header(HOST).map(str::to_ascii_lowercase);
        if !host.is_some_and(|h| self.hosts.contains(&h)) {
            let r = Response::error(403, "the Host header does not name this server", None);
            return Route::Done(r);
        }
        let Some(path) = http::percent_decode(req.uri().path(), false) else {
            let r = Response::error(400, "malformed percent-encoding in the path", None);
            return Route::Done(r);
        };
        let Some(mut query) = http::parse_query(req.uri().query().unwrap_or_default()) else {
            let r = Response::error(400, "malformed percent-encoding in the query", None);
            return Route::Done(r);
        };
        let asset = |content_type, body: &str| {
            Route::Done(Response {
                status: 200,
                content_type,
                body: body.as_bytes().to_vec(),
            })
        };
        match path.as_str() {
            "/" | "/index.html" => return asset("text/html; charset=utf-8", INDEX_HTML),
            "/app.js" => return asset("text/javascript; charset=utf-8", APP_JS),
            "/style.css" => return asset("text/css; charset=utf-8", STYLE_CSS),
            _ => {}
        }
        let Some(endpoint) = path.strip_prefix("/api/") else {
            let r = Response::error(404, &format!("no such page: {path}"), None);
            return Route::Done(r);
        };
        let bearer = header(AUTHORIZATION)
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let from_query = query
            .iter()
            .position(|(n, _)| n == "token")
            .map(|k| query.remove(k).1);
        let given = from_query.as_deref().or(bearer);
        if !given.is_some_and(|t| same_secret(t.as_bytes(), self.token.as_bytes())) {
            return Route::Done(Response::error(
                403,
                "a missing or wrong token: pass the one printed at start as ?token= or Authorization: Bearer",
                None,
            ));
        }
        Route::Api {
            endpoint: endpoint.to_owned(),
            query,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abcd", b"abcd"));
        assert!(!same_secret(b"abcd", b"abce"));
        assert!(!same_secret(b"abcd", b"abc"));
        assert!(!same_secret(b"", b"a"));
    }

    #[test]
    fn tokens_are_32_hex_digits_and_differ() -> Result<(), CliError> {
        let (a, b) = (new_token()?, new_token()?);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        Ok(())
    }

    #[test]
    fn authorities_bracket_ipv6() {
        assert_eq!(authority("127.0.0.1", 80), "127.0.0.1:80");
        assert_eq!(authority("::1", 80), "[::1]:80");
        assert_eq!(authority("[::1]", 80), "[::1]:80");
    }
}
