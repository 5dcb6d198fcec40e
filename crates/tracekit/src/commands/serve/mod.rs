//! `tracekit serve FILE [--port N] [--host H] [--allow-host NAME]… [--open]`: a trace
//! explorer in the browser.
//!
//! An HTTP/1.1 server (our own, on `std::net`: [`http`]) serves one trace and the explorer
//! page, which is shipped inside the binary (`assets/`). The trace is opened once; a
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
//!   [`MAX_PER_PEER`] from one address (503 past that); a connection is closed when idle
//!   for [`IDLE`], when a request head is not whole [`HEAD_TIME`] after its first byte (a
//!   client sending it slowly cannot hold its connection), or after [`MAX_REQUESTS`].
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

pub mod api;
pub mod http;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use trace_registry::Options;

use self::api::Api;
use self::http::{HttpError, Method, Request, Response};
use crate::CliError;

/// The page, embedded in the binary.
pub const INDEX_HTML: &str = include_str!("assets/index.html");
/// The page's script.
pub const APP_JS: &str = include_str!("assets/app.js");
/// The page's style sheet.
pub const STYLE_CSS: &str = include_str!("assets/style.css");

/// The most connections open at once (each a thread with a small stack, most of them
/// waiting): enough that clients holding connections open slowly cannot keep others out
/// while [`HEAD_TIME`] closes them.
pub const MAX_CONNECTIONS: usize = 1024;

/// The most connections open at once from one address.
pub const MAX_PER_PEER: usize = 512;

/// How long a connection may wait, idle, for the first byte of its next request.
pub const IDLE: Duration = Duration::from_secs(15);

/// How long the whole head of a request may take once its first byte has come: a client
/// that sends it a little at a time is closed then, however often it sends.
pub const HEAD_TIME: Duration = Duration::from_secs(5);

/// The most requests one kept-alive connection serves.
pub const MAX_REQUESTS: u32 = 10_000;

/// The stack of a connection's thread (the API's work runs on the worker's stack, not
/// this one, except for a request's answer itself).
const CONNECTION_STACK: usize = 512 * 1024;

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
    peers: std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>,
}

impl Server {
    /// Counts a new connection from `peer`, unless that would pass a limit.
    fn admit(&self, peer: Option<IpAddr>) -> bool {
        if self.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            self.connections.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        let Some(peer) = peer else { return true };
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = peers.entry(peer).or_insert(0);
        if *n >= MAX_PER_PEER {
            drop(peers);
            self.connections.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        *n = n.saturating_add(1);
        true
    }

    /// Uncounts a connection [`Server::admit`] counted.
    fn release(&self, peer: Option<IpAddr>) {
        self.connections.fetch_sub(1, Ordering::SeqCst);
        let Some(peer) = peer else { return };
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = peers.get_mut(&peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                peers.remove(&peer);
            }
        }
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

/// Opens the trace, binds, prints the URL and serves until killed.
///
/// # Errors
///
/// The trace cannot be opened or has no instruction stream (exit 2 for the latter), the
/// address cannot be bound, or the URL cannot be printed.
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
        peers: std::sync::Mutex::new(std::collections::HashMap::new()),
    });
    let indexer = server.api.clone();
    let temp = std::env::temp_dir().join(format!("tracekit-serve-{}", std::process::id()));
    std::thread::spawn(move || indexer.build_index(&temp));
    if args.open {
        open_browser(&url, err);
    }
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let peer = stream.peer_addr().ok().map(|a| a.ip());
        if !server.admit(peer) {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let busy = Response::error(503, "too many connections", None);
            let _ = busy.write_to(&mut stream, false, false);
            continue;
        }
        let s = Arc::clone(&server);
        let spawned = std::thread::Builder::new()
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                s.connection(stream);
                s.release(peer);
            });
        if spawned.is_err() {
            server.release(peer);
        }
    }
    Ok(())
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

impl Server {
    /// Serves the requests of one connection until it closes, idles, is too slow or fails:
    /// each head must start within [`IDLE`] and be whole within [`HEAD_TIME`] of its first
    /// byte (a deadline for the head, not for each read), for at most [`MAX_REQUESTS`].
    fn connection(&self, mut stream: TcpStream) {
        let _ = stream.set_write_timeout(Some(IDLE));
        let _ = stream.set_nodelay(true);
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 4096];
        for served in 1..=MAX_REQUESTS {
            let waiting = Instant::now();
            let head_by = |t: Instant| t.checked_add(HEAD_TIME).unwrap_or(t);
            let mut deadline = (!buf.is_empty()).then(|| head_by(waiting));
            let end = loop {
                if let Some(end) = http::head_end(&buf) {
                    break Some(end);
                }
                if buf.len() > http::MAX_HEAD {
                    break None;
                }
                let until =
                    deadline.unwrap_or_else(|| waiting.checked_add(IDLE).unwrap_or(waiting));
                let Some(left) = until.checked_duration_since(Instant::now()) else {
                    return;
                };
                if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                    return;
                }
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                }
                deadline.get_or_insert_with(|| head_by(Instant::now()));
            };
            let Some(end) = end.filter(|&e| e <= http::MAX_HEAD) else {
                let r = Response::error(431, "the request head is too large", None);
                let _ = r.write_to(&mut stream, false, false);
                return;
            };
            let head: Vec<u8> = buf.drain(..end).collect();
            let (response, keep_alive, head_only) = match http::parse_request(&head) {
                Ok(req) => (
                    self.respond(&req),
                    req.keep_alive && served < MAX_REQUESTS,
                    req.method == Method::Head,
                ),
                Err(HttpError { status, message }) => {
                    (Response::error(status, &message, None), false, false)
                }
            };
            if response
                .write_to(&mut stream, head_only, keep_alive)
                .is_err()
                || !keep_alive
            {
                return;
            }
        }
    }

    /// The response to a parsed request.
    fn respond(&self, req: &Request) -> Response {
        // The DNS-rebinding defence: see the module docs.
        let host = req.header("host").map(str::to_ascii_lowercase);
        if !host.is_some_and(|h| self.hosts.contains(&h)) {
            return Response::error(403, "the Host header does not name this server", None);
        }
        let asset = |content_type, body: &str| Response {
            status: 200,
            content_type,
            body: body.as_bytes().to_vec(),
        };
        match req.path.as_str() {
            "/" | "/index.html" => return asset("text/html; charset=utf-8", INDEX_HTML),
            "/app.js" => return asset("text/javascript; charset=utf-8", APP_JS),
            "/style.css" => return asset("text/css; charset=utf-8", STYLE_CSS),
            _ => {}
        }
        let Some(endpoint) = req.path.strip_prefix("/api/") else {
            return Response::error(404, &format!("no such page: {}", req.path), None);
        };
        let bearer = req
            .header("authorization")
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let mut query = req.query.clone();
        let from_query = query
            .iter()
            .position(|(n, _)| n == "token")
            .map(|k| query.remove(k).1);
        let given = from_query.as_deref().or(bearer);
        if !given.is_some_and(|t| same_secret(t.as_bytes(), self.token.as_bytes())) {
            return Response::error(
                403,
                "a missing or wrong token: pass the one printed at start as ?token= or Authorization: Bearer",
                None,
            );
        }
        self.api.handle(endpoint, &query)
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
