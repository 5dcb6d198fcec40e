//! The HTTP/1.1 layer of `tracekit serve`: a request parser that is a pure function over
//! bytes ([`parse_request`]), query-string decoding, and response writing. Only what a
//! browser and a script need: `GET` and `HEAD`, no request bodies, bounded heads.

use std::io::{self, Write};

/// The longest request head accepted (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;

/// The most headers one request may have.
const MAX_HEADERS: usize = 100;

/// A parsed request head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET` or `HEAD` (others are refused by the parser with 405).
    pub method: Method,
    /// The path, percent-decoded (`/api/rows`).
    pub path: String,
    /// The query parameters, in order, percent-decoded (`+` is a space).
    pub query: Vec<(String, String)>,
    /// The headers, names lowercased, values trimmed.
    pub headers: Vec<(String, String)>,
    /// Whether the connection stays open after the response (HTTP/1.1 without
    /// `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`).
    pub keep_alive: bool,
}

impl Request {
    /// The value of header `name` (lowercase), the first if repeated.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The methods served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: the headers of the `GET` response, without its body.
    Head,
}

/// Why a request head was refused: the status to answer with, and what to say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpError {
    /// The status code (400, 405, 413, 431, 505).
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

/// Where the head of a request ends in `buf` (the index after its blank line), if it is
/// complete.
#[must_use]
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p.saturating_add(4))
        .or_else(|| {
            // Bare LF line ends, as some clients send.
            buf.windows(2)
                .position(|w| w == b"\n\n")
                .map(|p| p.saturating_add(2))
        })
}

/// Parses a complete request head (up to and including its blank line).
///
/// # Errors
///
/// 431 for a head over [`MAX_HEAD`] or too many headers, 400 for a malformed one, 405
/// for a method other than GET and HEAD, 413 for a request with a body, 505 for an HTTP
/// version other than 1.0 and 1.1.
pub fn parse_request(head: &[u8]) -> Result<Request, HttpError> {
    if head.len() > MAX_HEAD {
        return Err(HttpError::new(431, "the request head is too large"));
    }
    let text = std::str::from_utf8(head)
        .map_err(|_| HttpError::new(400, "the request head is not UTF-8"))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::new(400, "malformed request line"));
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        v if v.starts_with("HTTP/") => {
            return Err(HttpError::new(505, "only HTTP/1.0 and HTTP/1.1 are served"));
        }
        _ => return Err(HttpError::new(400, "malformed request line")),
    };
    let mut headers = Vec::new();
    for l in lines {
        if l.is_empty() {
            break;
        }
        if headers.len() >= MAX_HEADERS {
            return Err(HttpError::new(431, "too many headers"));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(HttpError::new(400, "malformed header line"));
        };
        let valid_name = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid_name {
            return Err(HttpError::new(400, "malformed header name"));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => {
            return Err(HttpError::new(405, "only GET and HEAD are served"));
        }
        _ => return Err(HttpError::new(400, "malformed method")),
    };
    let find = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    if find("transfer-encoding").is_some() {
        return Err(HttpError::new(413, "requests have no body here"));
    }
    if let Some(len) = find("content-length") {
        match len.parse::<u64>() {
            Ok(0) => {}
            Ok(_) => return Err(HttpError::new(413, "requests have no body here")),
            Err(_) => return Err(HttpError::new(400, "malformed Content-Length")),
        }
    }
    let connection = find("connection").map(|v| v.to_ascii_lowercase());
    let keep_alive = match connection.as_deref() {
        Some(c) if c.split(',').any(|t| t.trim() == "close") => false,
        Some(c) if c.split(',').any(|t| t.trim() == "keep-alive") => true,
        _ => http11,
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if !path.starts_with('/') {
        return Err(HttpError::new(400, "the request target must be a path"));
    }
    let path = percent_decode(path, false)
        .ok_or_else(|| HttpError::new(400, "malformed percent-encoding in the path"))?;
    let query = parse_query(query)
        .ok_or_else(|| HttpError::new(400, "malformed percent-encoding in the query"))?;
    Ok(Request {
        method,
        path,
        query,
        headers,
        keep_alive,
    })
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

/// The reason phrase of the statuses the server sends.
#[must_use]
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
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
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    ("Referrer-Policy", "no-referrer"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
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

    /// Writes the response (without the body for `HEAD`), saying whether the connection
    /// stays open.
    ///
    /// # Errors
    ///
    /// The write fails (the client went away).
    pub fn write_to(
        &self,
        w: &mut impl Write,
        head_only: bool,
        keep_alive: bool,
    ) -> io::Result<()> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: {}\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len(),
            if keep_alive { "keep-alive" } else { "close" }
        )
        .into_bytes();
        if self.status == 405 {
            out.extend_from_slice(b"Allow: GET, HEAD\r\n");
        }
        for (name, value) in SECURITY_HEADERS {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        if !head_only {
            out.extend_from_slice(&self.body);
        }
        w.write_all(&out)?;
        w.flush()
    }
}

/// Fuzzing entry point: `data` as a request head (whole, and as the server cuts it at the
/// end of its head), then its query and path decoders. Panics only on a bug: a parsed
/// request whose path does not start with `/`, or a refusal with a status outside 400–505.
#[cfg(feature = "fuzzing")]
pub fn fuzz_request(data: &[u8]) {
    let heads = [Some(data), head_end(data).and_then(|end| data.get(..end))];
    for head in heads.into_iter().flatten() {
        match parse_request(head) {
            Ok(r) => assert!(r.path.starts_with('/'), "a path without its slash"),
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
    fn parses_a_get_with_query_and_headers() {
        let r = parse_request(
            b"GET /api/rows?from=0x10&count=5&token=a%20b+c HTTP/1.1\r\nHost: 127.0.0.1:80\r\nAuthorization: Bearer x\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.method, Method::Get);
        assert_eq!(r.path, "/api/rows");
        assert_eq!(
            r.query,
            [
                ("from".to_owned(), "0x10".to_owned()),
                ("count".to_owned(), "5".to_owned()),
                ("token".to_owned(), "a b c".to_owned())
            ]
        );
        assert_eq!(r.header("host"), Some("127.0.0.1:80"));
        assert_eq!(r.header("authorization"), Some("Bearer x"));
        assert!(r.keep_alive);
    }

    #[test]
    fn connection_headers_and_versions() {
        let close = parse_request(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        assert!(!close.keep_alive);
        let old = parse_request(b"HEAD / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!old.keep_alive);
        assert_eq!(old.method, Method::Head);
        let kept = parse_request(b"GET / HTTP/1.0\nConnection: Keep-Alive\n\n").unwrap();
        assert!(kept.keep_alive);
        assert_eq!(
            parse_request(b"GET / HTTP/2.0\r\n\r\n").unwrap_err().status,
            505
        );
    }

    #[test]
    fn refusals_have_their_status() {
        let status = |head: &[u8]| parse_request(head).unwrap_err().status;
        assert_eq!(status(b"POST /api/info HTTP/1.1\r\n\r\n"), 405);
        assert_eq!(status(b"DELETE / HTTP/1.1\r\n\r\n"), 405);
        assert_eq!(status(b"get / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET /\r\n\r\n"), 400);
        assert_eq!(status(b"GET  / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET http://x/ HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nno colon\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nbad name: 1\r\n\r\n"), 400);
        assert_eq!(status(b"GET /%zz HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET /?a=%ff HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(status(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\n"), 413);
        assert_eq!(status(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"), 400);
        assert_eq!(
            status(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            413
        );
        assert_eq!(status(b"GET / HTTP/1.1\r\n\xff: 1\r\n\r\n"), 400);
        let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
        big.resize(MAX_HEAD + 1, b'a');
        assert_eq!(status(&big), 431);
        let many: Vec<u8> = std::iter::once(b"GET / HTTP/1.1\r\n".to_vec())
            .chain((0..=MAX_HEADERS).map(|k| format!("X-{k}: 1\r\n").into_bytes()))
            .flatten()
            .collect();
        assert_eq!(status(&many), 431);
        assert!(parse_request(b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").is_ok());
    }

    #[test]
    fn percent_decoding_and_head_end() {
        assert_eq!(percent_decode("a%2Fb%41", false).as_deref(), Some("a/bA"));
        assert_eq!(percent_decode("a+b", false).as_deref(), Some("a+b"));
        assert_eq!(percent_decode("a+b", true).as_deref(), Some("a b"));
        assert_eq!(percent_decode("%4", true), None);
        assert_eq!(percent_decode("%", true), None);
        assert_eq!(percent_decode("%c3%a9", true).as_deref(), Some("é"));
        assert_eq!(parse_query("a&b=&=c").unwrap().len(), 3);
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn errors_are_json_with_their_parameter() {
        let r = Response::error(400, "bad \"i\"", Some("i"));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["error"], "bad \"i\"");
        assert_eq!(v["param"], "i");
        let mut out = Vec::new();
        r.write_to(&mut out, true, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"));
        assert!(text.contains(&format!("Content-Length: {}\r\n", r.body.len())));
        assert!(text.contains("Cache-Control: no-store\r\n"));
        assert!(text.ends_with("\r\n\r\n"), "HEAD: no body");
    }

    /// Any bytes give a request or an error, never a panic; a request's path starts with
    /// `/` and its method is GET or HEAD.
    #[test]
    fn never_panics() {
        fn prop(bytes: Vec<u8>, prefix: u8) -> bool {
            let heads: [&[u8]; 3] = [b"GET /", b"HEAD /api/x?", b"GET / HTTP/1.1\r\n"];
            let mut data = heads[usize::from(prefix % 3)].to_vec();
            data.extend_from_slice(&bytes);
            let _ = parse_request(&bytes);
            match parse_request(&data) {
                Ok(r) => r.path.starts_with('/'),
                Err(e) => (400..=505).contains(&e.status),
            }
        }
        QuickCheck::new()
            .tests(2000)
            .quickcheck(prop as fn(Vec<u8>, u8) -> bool);
    }
}
