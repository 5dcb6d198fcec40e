//! The HTTP side of `tracekit serve` around hyper: the check of each request head before
//! hyper takes it ([`check_head`], [`Heads`]), query-string decoding, and the responses
//! with their security headers. Only what a browser and a script need: `GET` and `HEAD`,
//! no request bodies, bounded heads.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{self, HeaderValue};
use tokio::io::{AsyncRead, AsyncWrite};

/// The longest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;

/// The most headers one request may have (hyper's own limit too).
const MAX_HEADERS: usize = 100;

/// How long a write may wait for a client that does not read its answers: it is closed
/// then (else it would hold its connection, and the answer's memory, for ever).
pub const WRITE_TIME: Duration = Duration::from_secs(15);

/// Why a request head was refused: the status to answer with, and what to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError {
    /// The status code (400, 413, 431, 505).
    pub status: u16,
    /// What was wrong.
    pub message: String,
}

impl HttpError {
    fn new(status: u16, message: impl Into<String>) -> HttpError {
        HttpError {
            status,
            message: message.into(),
        }
    }
}

/// Checks the request head at the start of `buf` with httparse (the parser hyper runs on
/// it next, with the same limits): `Some(len)` once it is whole and one that hyper serves,
/// `None` while it may still become one. So hyper never refuses a head itself (its refusals
/// are bare, without the security headers): every refusal is ours.
///
/// # Errors
///
/// 431 for a head over [`MAX_HEAD`] or with more than 100 headers, 400 for a malformed
/// one (request line, header, `Content-Length`, a target that is not a path), 413 for a
/// request with a body, 505 for an HTTP version other than 1.0 and 1.1.
pub fn check_head(buf: &[u8]) -> Result<Option<usize>, HttpError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(_) if buf.len() <= MAX_HEAD => return Ok(None),
        Ok(_) => return Err(HttpError::new(431, "the request head is too large")),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::new(431, "too many headers"));
        }
        Err(httparse::Error::Version) => {
            // "GET / HTTP/3": a version we do not speak; "GET /": no version at all.
            let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
            let version = line.split(|&b| b == b' ').nth(2).unwrap_or_default();
            return Err(if version.starts_with(b"HTTP/") {
                HttpError::new(505, "only HTTP/1.0 and HTTP/1.1 are served")
            } else {
                HttpError::new(400, "malformed request line")
            });
        }
        Err(e) => return Err(HttpError::new(400, format!("malformed request head: {e}"))),
    };
    let target = req.path.unwrap_or_default();
    if !target.starts_with('/') || target.parse::<hyper::Uri>().is_err() {
        return Err(HttpError::new(400, "the request target must be a path"));
    }
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(HttpError::new(413, "requests have no body here"));
        }
        if h.name.eq_ignore_ascii_case("content-length") {
            let value = std::str::from_utf8(h.value).unwrap_or_default().trim();
            match value.parse::<u64>() {
                Ok(0) => {}
                Ok(_) => return Err(HttpError::new(413, "requests have no body here")),
                Err(_) => return Err(HttpError::new(400, "malformed Content-Length")),
            }
        }
    }
    Ok(Some(len))
}

/// A connection as hyper sees it: the bytes of each request head are held back until
/// [`check_head`] passes them; a head it refuses ends the reading (hyper sees the end of
/// the stream, after the requests before it), and the refusal ([`Heads::into_parts`]) is
/// answered once hyper is done. As no request has a body, what follows a head is the next
/// head.
#[derive(Debug)]
pub struct Heads<S> {
    stream: S,
    /// Bytes read and not yet given to hyper.
    buf: Vec<u8>,
    /// How many of them (from the start) are checked heads.
    passed: usize,
    refusal: Option<HttpError>,
    eof: bool,
    /// Since when a write waits ([`WRITE_TIME`]).
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> Heads<S> {
    /// Wraps `stream`.
    pub fn new(stream: S) -> Heads<S> {
        Heads {
            stream,
            buf: Vec::new(),
            passed: 0,
            refusal: None,
            eof: false,
            stalled: None,
        }
    }

    /// `poll` of a write, failing once writes have waited [`WRITE_TIME`] in a row.
    fn deadline<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if poll.is_ready() {
            self.stalled = None;
            return poll;
        }
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(WRITE_TIME)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::ErrorKind::TimedOut.into())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The refused head's error, if one was refused, and the stream.
    pub fn into_parts(self) -> (S, Option<HttpError>) {
        (self.stream, self.refusal)
    }
}

impl<S: AsyncRead + Unpin> hyper::rt::Read for Heads<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut out: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.passed > 0 {
                let n = this.passed.min(out.remaining());
                out.put_slice(this.buf.get(..n).unwrap_or_default());
                this.buf.drain(..n);
                this.passed = this.passed.saturating_sub(n);
                return Poll::Ready(Ok(()));
            }
            if this.refusal.is_some() || this.eof {
                return Poll::Ready(Ok(()));
            }
            if !this.buf.is_empty() {
                match check_head(&this.buf) {
                    Ok(Some(len)) => {
                        this.passed = len;
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        this.refusal = Some(e);
                        continue;
                    }
                }
            }
            let mut chunk = [0u8; 4096];
            let mut read = tokio::io::ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.stream).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // A head cut short by the client's end is dropped, as it is.
                this.eof = true;
            }
            this.buf.extend_from_slice(read.filled());
        }
    }
}

impl<S: AsyncWrite + Unpin> hyper::rt::Write for Heads<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.deadline(cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_flush(cx);
        this.deadline(cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.deadline(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.deadline(cx, poll)
    }
}

/// Splits a query string into its decoded `name=value` pairs (a name without `=` has an
/// empty value); `None` if some part is not valid percent-encoded UTF-8.
#[must_use]
pub fn parse_query(query: &str) -> Option<Vec<(String, String)>> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, v) = p.split_once('=').unwrap_or((p, ""));
            Some((percent_decode(n, true)?, percent_decode(v, true)?))
        })
        .collect()
}

/// Decodes `%XX` escapes (and, in a query, `+` as a space); `None` for a bad escape or a
/// result that is not UTF-8.
#[must_use]
pub fn percent_decode(s: &str, plus_is_space: bool) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hi = char::from(bytes.next()?).to_digit(16)?;
                let lo = char::from(bytes.next()?).to_digit(16)?;
                out.push(u8::try_from(hi.checked_mul(16)?.checked_add(lo)?).ok()?);
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

/// A response: status, content type and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

/// The headers of every response: the page runs only its own script and style sheet
/// (no inline script, no other origin), cannot be framed, sends no referrer (the address
/// may hold the token), and no answer is sniffed as another type.
pub const SECURITY_HEADERS: [(&str, &str); 5] = [
    (
        "content-security-policy",
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("referrer-policy", "no-referrer"),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("cross-origin-resource-policy", "same-origin"),
];

/// The content type of every API answer.
pub const JSON: &str = "application/json; charset=utf-8";

impl Response {
    /// A JSON response.
    #[must_use]
    pub fn json(status: u16, body: String) -> Response {
        Response {
            status,
            content_type: JSON,
            body: body.into_bytes(),
        }
    }

    /// A JSON error: `{"error":"…"}`, with `"param":"…"` when a parameter is at fault.
    #[must_use]
    pub fn error(status: u16, message: &str, param: Option<&str>) -> Response {
        let mut v = serde_json::json!({ "error": message });
        if let (Some(p), Some(map)) = (param, v.as_object_mut()) {
            map.insert("param".into(), p.into());
        }
        Response::json(status, v.to_string())
    }

    /// The headers (lowercase, as hyper writes them) besides `content-length` (which hyper adds; a `HEAD` answer keeps
    /// the `GET`'s), saying whether the connection stays open.
    fn headers(&self, keep_alive: bool) -> Vec<(&'static str, &'static str)> {
        let mut headers = vec![
            ("content-type", self.content_type),
            ("cache-control", "no-store"),
            (
                "connection",
                if keep_alive { "keep-alive" } else { "close" },
            ),
        ];
        if self.status == 405 {
            headers.push(("allow", "GET, HEAD"));
        }
        headers.extend(SECURITY_HEADERS);
        headers
    }

    /// The response for hyper (which leaves out the body of a `HEAD` answer).
    #[must_use]
    pub fn into_hyper(self, keep_alive: bool) -> hyper::Response<Full<Bytes>> {
        let headers = self.headers(keep_alive);
        let mut r = hyper::Response::new(Full::new(Bytes::from(self.body)));
        *r.status_mut() = hyper::StatusCode::from_u16(self.status)
            .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        let map = r.headers_mut();
        for (name, value) in headers {
            map.append(
                header::HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        r
    }

    /// The whole response as bytes, closing the connection: for the answers written
    /// where hyper does not run (a refused head, too many connections).
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let status = hyper::StatusCode::from_u16(self.status)
            .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-length: {}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or_default(),
            self.body.len()
        );
        for (name, value) in self.headers(false) {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

/// Fuzzing entry point: `data` as a request head (whole, and each prefix as it arrives a
/// byte at a time), then its query and path decoders. Panics only on a bug: an accepted
/// head longer than the input or [`MAX_HEAD`], a refusal with a status outside 400–505.
#[cfg(feature = "fuzzing")]
pub fn fuzz_request(data: &[u8]) {
    let data = data.get(..MAX_HEAD.saturating_add(64)).unwrap_or(data);
    for end in [data.len(), data.len() / 2] {
        let head = data.get(..end).unwrap_or_default();
        match check_head(head) {
            Ok(Some(len)) => assert!(len <= head.len() && len <= MAX_HEAD, "length {len}"),
            Ok(None) => {}
            Err(e) => assert!((400..=505).contains(&e.status), "status {}", e.status),
        }
    }
    let text = String::from_utf8_lossy(data);
    let _ = parse_query(&text);
    let _ = percent_decode(&text, true);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use quickcheck::QuickCheck;

    #[test]
    fn whole_heads_pass_partial_ones_wait() {
        let head = b"GET /api/rows?from=0x10&token=a%20b+c HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n";
        assert_eq!(check_head(head), Ok(Some(head.len())));
        let mut two = head.to_vec();
        two.extend_from_slice(b"HEAD / HTTP/1.0\n\n");
        assert_eq!(check_head(&two), Ok(Some(head.len())));
        assert_eq!(check_head(&head[..20]), Ok(None));
        assert_eq!(
            check_head(b"GET / HTTP/1.0\nConnection: Keep-Alive\n\n"),
            Ok(Some(39))
        );
        assert_eq!(
            check_head(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"),
            Ok(Some(37))
        );
        // Methods are the server's to refuse (405, with Allow), not the head's.
        assert!(matches!(
            check_head(b"POST / HTTP/1.1\r\n\r\n"),
            Ok(Some(_))
        ));
    }

    #[test]
    fn refusals_have_their_status() {
        let status = |head: &[u8]| check_head(head).unwrap_err().status;
        assert_eq!(status(b"GET / HTTP/2.0\r\n\r\n"), 505);
        assert_eq!(status(b"GET / HTTP/3\r\n\r\n"), 505);
        assert_eq!(status(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 505);
        assert_eq!(status(b"GET /\r\n\r\n"), 400);
        assert_eq!(status(b"GET  / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"\x00\x01garbage\r\n\r\n"), 400);
        assert_eq!(status(b"GET http://x/ HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET * HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nbad name: 1\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\n\xff: 1\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"), 413);
        assert_eq!(status(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 400);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            413
        );
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 1, b'a');
        assert_eq!(status(&big), 431, "no end yet, but too long already");
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&big), 431);
        let many: Vec<u8> = std::iter::once(b"GET / HTTP/1.1\r\n".to_vec())
            .chain((0..=MAX_HEADERS).map(|k| format!("X-{k}: 1\r\n").into_bytes()))
            .chain([b"\r\n".to_vec()])
            .flatten()
            .collect();
        assert_eq!(status(&many), 431);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Fb%41", false).as_deref(), Some("a/bA"));
        assert_eq!(percent_decode("a+b", false).as_deref(), Some("a+b"));
        assert_eq!(percent_decode("a+b", true).as_deref(), Some("a b"));
        assert_eq!(percent_decode("%4", true), None);
        assert_eq!(percent_decode("%", true), None);
        assert_eq!(percent_decode("%c3%a9", true).as_deref(), Some("é"));
        assert_eq!(parse_query("a&b=&=c").unwrap().len(), 3);
    }

    #[test]
    fn errors_are_json_with_their_parameter_and_headers() {
        let r = Response::error(400, "bad \"i\"", Some("i"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"], "bad \"i\"");
        assert_eq!(v["param"], "i");
        let text = String::from_utf8(r.to_bytes()).unwrap();
        assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"));
        assert!(text.contains(&format!("content-length: {}\r\n", r.body.len())));
        assert!(text.contains("cache-control: no-store\r\n"));
        assert!(text.contains("connection: close\r\n"));
        assert!(text.contains("x-content-type-options: nosniff\r\n"));
        assert!(text.ends_with(std::str::from_utf8(&r.body).unwrap()));
        let h = Response::error(405, "no", None).into_hyper(true);
        assert_eq!(h.status(), 405);
        assert_eq!(h.headers()["allow"], "GET, HEAD");
        assert_eq!(h.headers()["connection"], "keep-alive");
        for (name, value) in SECURITY_HEADERS {
            assert_eq!(h.headers()[name], value);
        }
    }

    /// Any bytes give a head, a wait or a refusal, never a panic; a head passed is within
    /// the bytes and the limit.
    #[test]
    fn never_panics() {
        fn prop(bytes: Vec<u8>, prefix: u8) -> bool {
            let heads: [&[u8]; 3] = [b"GET /", b"HEAD /api/x?", b"GET / HTTP/1.1\r\n"];
            let mut data = heads[usize::from(prefix % 3)].to_vec();
            data.extend_from_slice(&bytes);
            let _ = check_head(&bytes);
            match check_head(&data) {
                Ok(Some(len)) => len <= data.len(),
                Ok(None) => true,
                Err(e) => (400..=505).contains(&e.status),
            }
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, u8) -> bool);
    }
}
