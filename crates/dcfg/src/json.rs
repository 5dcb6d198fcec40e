//! A pull parser for JSON text, over a byte slice or a buffered `io::Read`, written for the
//! DCFG reader: integers exactly (numbers or hex strings, never through `f64`), exact
//! absolute byte offsets, and failures that collect their JSON path as they unwind.
//!
//! One parser serves both inputs: a [`Source`] shows the parser a window of bytes (the whole
//! slice, or the unread part of a 64 KiB buffer) and refills it on demand.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Read};

use trace_core::json::parse_u64;
use trace_core::{LimitExceeded, Offset};

use crate::error::Error;

/// The longest string accepted (a symbol name, a file name, a key), in bytes.
const MAX_STRING: usize = 16 << 20;
/// The deepest nesting accepted inside values the reader skips (unknown keys and columns).
const MAX_DEPTH: usize = 1024;
/// Enough bytes to hold any integer token the reader accepts, with room to spare.
const TOKEN: usize = 64;
/// The longest number accepted inside skipped values, in bytes.
const MAX_NUMBER: usize = 4096;

/// One step of a JSON path, as the reader names it (see [`Error`]).
#[derive(Debug)]
pub(crate) enum Seg {
    /// An object key: `.KEY`.
    Key(Cow<'static, str>),
    /// A table's header row: `[header]`.
    Header,
    /// A table's data row, counted from 0 after the header: `[r]`.
    Row(u64),
    /// A cell of a known column: `.COLUMN`.
    Column(&'static str),
    /// An element of an array, or a cell of an unknown column, by position: `[i]`.
    Index(u64),
}

#[derive(Debug)]
enum FailKind {
    /// Malformed JSON or a value of the wrong shape: what was expected, what was found.
    Json(String),
    Limit(LimitExceeded),
    Io(io::Error),
}

#[derive(Debug)]
struct FailInner {
    offset: u64,
    kind: FailKind,
    /// Innermost segment first (pushed while unwinding).
    path: Vec<Seg>,
}

/// A parse failure on its way up to [`Error`]: boxed so that results stay one word.
#[derive(Debug)]
pub(crate) struct Fail(Box<FailInner>);

impl Fail {
    #[cold]
    fn new(offset: u64, kind: FailKind) -> Fail {
        Fail(Box::new(FailInner {
            offset,
            kind,
            path: Vec::new(),
        }))
    }

    /// A failure with a message at `offset`.
    #[cold]
    pub(crate) fn msg(offset: u64, message: impl Into<String>) -> Fail {
        Fail::new(offset, FailKind::Json(message.into()))
    }

    /// Adds the segment the failure happened under (called from the inside out).
    #[cold]
    #[must_use]
    pub(crate) fn at(mut self, seg: Seg) -> Fail {
        self.0.path.push(seg);
        self
    }

    /// Whether the failure happened inside the current value (its path is not empty).
    pub(crate) fn is_nested(&self) -> bool {
        !self.0.path.is_empty()
    }

    /// The public error.
    #[cold]
    pub(crate) fn into_error(self) -> Error {
        let FailInner { offset, kind, path } = *self.0;
        let mut p = String::new();
        for seg in path.iter().rev() {
            // Writing to a String cannot fail.
            let _ = match seg {
                Seg::Key(k) => write!(p, "{}{k}", if p.is_empty() { "" } else { "." }),
                Seg::Column(c) => write!(p, ".{c}"),
                Seg::Header => p.write_str("[header]"),
                Seg::Row(i) | Seg::Index(i) => write!(p, "[{i}]"),
            };
        }
        match kind {
            FailKind::Json(message) => Error::Json {
                offset: Offset(offset),
                path: p,
                message,
            },
            FailKind::Limit(limit) => Error::Limit { path: p, limit },
            FailKind::Io(source) => Error::Io {
                context: "cannot read or decompress the input".to_owned(),
                offset: Offset(offset),
                source,
            },
        }
    }
}

/// Bytes for the parser: a window onto the input that can be refilled.
pub(crate) trait Source {
    /// The bytes in view.
    fn data(&self) -> &[u8];
    /// The absolute offset of `data()[0]`.
    fn base(&self) -> u64;
    /// Keeps `data()[pos..]` in view and adds the input's next bytes after it. Returns the
    /// new position of the byte that was at `pos`, and whether anything was added (`false`
    /// at the end of the input).
    ///
    /// # Errors
    ///
    /// A read error of the input.
    fn refill(&mut self, pos: usize) -> Result<(usize, bool), Fail>;
    /// Whether `data()` ends where the input ends (a slice, unlike a stream's window).
    fn whole(&self) -> bool {
        false
    }
}

/// A whole input in memory.
pub(crate) struct SliceSource<'a>(pub(crate) &'a [u8]);

impl Source for SliceSource<'_> {
    #[inline]
    fn data(&self) -> &[u8] {
        self.0
    }
    fn base(&self) -> u64 {
        0
    }
    fn refill(&mut self, pos: usize) -> Result<(usize, bool), Fail> {
        Ok((pos, false))
    }
    fn whole(&self) -> bool {
        true
    }
}

/// A stream, through a 64 KiB window.
pub(crate) struct ReadSource<R> {
    inner: R,
    buf: Vec<u8>,
    /// Bytes of `buf` holding input.
    end: usize,
    base: u64,
    eof: bool,
}

impl<R: Read> ReadSource<R> {
    pub(crate) fn new(inner: R) -> Self {
        ReadSource {
            inner,
            buf: vec![0; 64 * 1024],
            end: 0,
            base: 0,
            eof: false,
        }
    }
}

impl<R: Read> Source for ReadSource<R> {
    #[inline]
    fn data(&self) -> &[u8] {
        self.buf.get(..self.end).unwrap_or_default()
    }
    fn base(&self) -> u64 {
        self.base
    }
    fn refill(&mut self, pos: usize) -> Result<(usize, bool), Fail> {
        if self.eof {
            return Ok((pos, false));
        }
        let pos = pos.min(self.end);
        self.buf.copy_within(pos..self.end, 0);
        self.end = self.end.saturating_sub(pos);
        self.base = self.base.saturating_add(pos as u64);
        loop {
            let free = self.buf.get_mut(self.end..).unwrap_or_default();
            if free.is_empty() {
                // Callers never need more than a few KiB in view; the window holds 64.
                return Ok((0, false));
            }
            match self.inner.read(free) {
                Ok(0) => {
                    self.eof = true;
                    return Ok((0, false));
                }
                Ok(n) => {
                    self.end = self.end.saturating_add(n).min(self.buf.len());
                    return Ok((0, true));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let at = self.base.saturating_add(self.end as u64);
                    return Err(Fail::new(at, FailKind::Io(e)));
                }
            }
        }
    }
}

/// The parser: a [`Source`] and a position in its window.
pub(crate) struct Parser<S> {
    src: S,
    pos: usize,
}

/// Describes the byte at a position for a message.
fn describe(b: Option<u8>) -> String {
    match b {
        None => "the end of the input".to_owned(),
        Some(b) if b.is_ascii_graphic() => format!("`{}`", char::from(b)),
        Some(b) => format!("byte 0x{b:02x}"),
    }
}

/// Whether `t` is a JSON number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn valid_number(t: &[u8]) -> bool {
    let digits = |i: usize| {
        t.get(i..)
            .unwrap_or_default()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut i = usize::from(t.first() == Some(&b'-'));
    let int = digits(i);
    let mut ok = int == 1 || (int > 1 && t.get(i) != Some(&b'0'));
    i = i.saturating_add(int);
    if t.get(i) == Some(&b'.') {
        let f = digits(i.saturating_add(1));
        ok &= f > 0;
        i = i.saturating_add(1).saturating_add(f);
    }
    if matches!(t.get(i), Some(b'e' | b'E')) {
        i = i.saturating_add(1);
        if matches!(t.get(i), Some(b'+' | b'-')) {
            i = i.saturating_add(1);
        }
        let e = digits(i);
        ok &= e > 0;
        i = i.saturating_add(e);
    }
    ok && i == t.len()
}

/// A size limit exceeded at `at`.
#[cold]
fn limit(at: u64, what: &'static str, found: usize, limit: usize) -> Fail {
    Fail::new(
        at,
        FailKind::Limit(LimitExceeded {
            offset: Offset(at),
            what,
            found: found as u64,
            limit: limit as u64,
        }),
    )
}

/// The value of a hex digit.
const fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b.wrapping_sub(b'0')),
        b'a'..=b'f' => Some(b.wrapping_sub(b'a').wrapping_add(10)),
        b'A'..=b'F' => Some(b.wrapping_sub(b'A').wrapping_add(10)),
        _ => None,
    }
}

const fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// What an integer value may look like.
const INTEGER: &str = "an unsigned integer or a hex string such as \"0x400000\"";

impl<S: Source> Parser<S> {
    pub(crate) fn new(src: S) -> Self {
        Parser { src, pos: 0 }
    }

    /// The absolute offset of the next byte.
    pub(crate) fn offset(&self) -> u64 {
        self.src.base().saturating_add(self.pos as u64)
    }

    fn rest(&self) -> &[u8] {
        self.src.data().get(self.pos..).unwrap_or_default()
    }

    /// Refills the window keeping the unread bytes; `false` at the end of the input.
    fn more(&mut self) -> Result<bool, Fail> {
        let (pos, added) = self.src.refill(self.pos)?;
        self.pos = pos;
        Ok(added)
    }

    /// Makes at least `n` unread bytes visible, if the input has them.
    #[inline]
    fn ensure(&mut self, n: usize) -> Result<(), Fail> {
        while self.rest().len() < n {
            if !self.more()? {
                break;
            }
        }
        Ok(())
    }

    /// Skips whitespace; returns the next byte without consuming it.
    #[inline]
    pub(crate) fn peek(&mut self) -> Result<Option<u8>, Fail> {
        loop {
            let data = self.src.data();
            let mut i = self.pos;
            while let Some(&b) = data.get(i) {
                if !is_ws(b) {
                    self.pos = i;
                    return Ok(Some(b));
                }
                i = i.wrapping_add(1);
            }
            self.pos = i;
            if !self.more()? {
                return Ok(None);
            }
        }
    }

    fn bump(&mut self) {
        self.pos = self.pos.saturating_add(1);
    }

    /// A failure "expected `expected`, found …" at the next byte.
    #[cold]
    pub(crate) fn unexpected(&mut self, expected: &str) -> Fail {
        let found = match self.peek() {
            Ok(b) => b,
            Err(e) => return e,
        };
        let found = match found {
            Some(b'"') => self.describe_string(),
            Some(b'0'..=b'9' | b'-') => format!("the number {}", self.number_text()),
            Some(b'{') => "an object".to_owned(),
            Some(b'[') => "an array".to_owned(),
            Some(b'n') if self.rest().starts_with(b"null") => "`null`".to_owned(),
            b => describe(b),
        };
        Fail::msg(self.offset(), format!("expected {expected}, found {found}"))
    }

    /// The text of the number at the position (for messages).
    fn number_text(&mut self) -> String {
        let _ = self.ensure(TOKEN);
        let rest = self.rest();
        let n = rest
            .iter()
            .take(TOKEN)
            .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
            .count();
        String::from_utf8_lossy(rest.get(..n).unwrap_or_default()).into_owned()
    }

    /// The string at the position, shortened, for messages.
    fn describe_string(&mut self) -> String {
        let _ = self.ensure(TOKEN);
        let rest = self.rest().get(1..).unwrap_or_default();
        let end = rest.iter().take(TOKEN).position(|&b| b == b'"');
        let shown = rest
            .get(..end.unwrap_or(rest.len().min(TOKEN)))
            .unwrap_or_default();
        let dots = if end.is_some() { "" } else { "…" };
        format!("the string \"{}{dots}\"", String::from_utf8_lossy(shown))
    }

    /// The bytes left in the input, if known (a slice).
    pub(crate) fn bytes_left(&self) -> Option<usize> {
        self.src.whole().then(|| self.rest().len())
    }

    /// Consumes `b` if it is next.
    #[inline]
    pub(crate) fn eat(&mut self, b: u8) -> Result<bool, Fail> {
        if self.peek()? == Some(b) {
            self.bump();
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Consumes `null` if it is next.
    pub(crate) fn null(&mut self) -> Result<bool, Fail> {
        if self.peek()? != Some(b'n') {
            return Ok(false);
        }
        self.ensure(4)?;
        if self.rest().starts_with(b"null") {
            self.pos = self.pos.saturating_add(4);
            Ok(true)
        } else {
            Err(self.unexpected("a value"))
        }
    }

    /// Consumes the `[` of an array, or fails with "expected `what`".
    pub(crate) fn begin_array(&mut self, what: &str) -> Result<(), Fail> {
        if self.eat(b'[')? {
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    /// Consumes the `{` of an object, or fails with "expected `what`".
    pub(crate) fn begin_object(&mut self, what: &str) -> Result<(), Fail> {
        if self.eat(b'{')? {
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    /// In an array whose `[` was consumed: `Ok(true)` before the next element (its comma
    /// consumed), `Ok(false)` after consuming `]`.
    #[inline]
    pub(crate) fn next_elem(&mut self, first: &mut bool) -> Result<bool, Fail> {
        match self.peek()? {
            Some(b']') => {
                self.bump();
                Ok(false)
            }
            Some(b',') if !*first => {
                self.bump();
                Ok(true)
            }
            _ if *first => {
                *first = false;
                Ok(true)
            }
            _ => Err(self.unexpected("`,` or `]`")),
        }
    }

    /// In an object whose `{` was consumed: the next key (its `:` consumed), or `None` after
    /// consuming `}`. A key in `known` is returned borrowed from it (no allocation).
    pub(crate) fn next_key(
        &mut self,
        first: &mut bool,
        known: &[&'static str],
    ) -> Result<Option<Cow<'static, str>>, Fail> {
        match self.peek()? {
            Some(b'}') => {
                self.bump();
                return Ok(None);
            }
            Some(b',') if !*first => self.bump(),
            _ if *first => {}
            _ => return Err(self.unexpected("`,` or `}`")),
        }
        *first = false;
        if self.peek()? != Some(b'"') {
            return Err(self.unexpected("a key (a string)"));
        }
        let key = self.string_with(|k| match known.iter().find(|&&n| n == k) {
            Some(&n) => Cow::Borrowed(n),
            None => Cow::Owned(k.to_owned()),
        })?;
        if !self.eat(b':')? {
            return Err(self.unexpected("`:`"));
        }
        Ok(Some(key))
    }

    /// An integer: a JSON number, or a decimal or `0x` hex string (spec 1.2.1). Exact, never
    /// through `f64`; a fraction or exponent is an error.
    #[inline]
    pub(crate) fn u64(&mut self) -> Result<u64, Fail> {
        let first = self.peek()?;
        self.ensure(TOKEN)?;
        match first {
            Some(b'0'..=b'9') => self.decimal(),
            Some(b'"') => self.integer_string(),
            _ => Err(self.unexpected(INTEGER)),
        }
    }

    /// `null` (`None`), or a value read by `read`.
    #[inline]
    pub(crate) fn opt<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, Fail>,
    ) -> Result<Option<T>, Fail> {
        if self.null()? {
            Ok(None)
        } else {
            read(self).map(Some)
        }
    }

    /// An integer below 2^32 (a block's size, a line number), spelt as [`Parser::u64`] reads.
    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, Fail> {
        self.peek()?;
        let at = self.offset();
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| {
            Fail::msg(
                at,
                format!("expected an unsigned integer below 2^32, found {v}"),
            )
        })
    }

    fn decimal(&mut self) -> Result<u64, Fail> {
        let rest = self.rest();
        let mut v = 0u64;
        let mut n = 0usize;
        let mut overflow = false;
        while let Some(&b) = rest.get(n) {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                break;
            }
            if n < 19 {
                // At most 19 digits: below 10^19 < 2^64, no overflow possible.
                v = v.wrapping_mul(10).wrapping_add(u64::from(d));
            } else {
                match v.checked_mul(10).and_then(|x| x.checked_add(u64::from(d))) {
                    Some(x) => v = x,
                    None => overflow = true,
                }
            }
            n = n.wrapping_add(1);
        }
        let leading_zero = n > 1 && rest.first() == Some(&b'0');
        let fraction = matches!(rest.get(n), Some(b'.' | b'e' | b'E'));
        if overflow || leading_zero || fraction {
            return Err(self.bad_number(overflow, leading_zero));
        }
        self.pos = self.pos.saturating_add(n);
        Ok(v)
    }

    #[cold]
    fn bad_number(&mut self, overflow: bool, leading_zero: bool) -> Fail {
        let why = if overflow {
            " (above 2^64 - 1)"
        } else if leading_zero {
            " (JSON allows no leading zero)"
        } else {
            ""
        };
        let text = self.number_text();
        Fail::msg(
            self.offset(),
            format!("expected {INTEGER}, found the number {text}{why}"),
        )
    }

    /// A string holding an integer. The usual spelling, `"0x"` and 1 to 16 lower- or
    /// upper-case hex digits, is parsed in the window; anything else as
    /// [`parse_u64`](trace_core::json::parse_u64) does (decimal, spaces around).
    fn integer_string(&mut self) -> Result<u64, Fail> {
        let rest = self.rest();
        if let Some(b'0') = rest.get(1)
            && let Some(b'x' | b'X') = rest.get(2)
        {
            let mut v = 0u64;
            let mut n = 3usize;
            while let Some(d) = rest.get(n).and_then(|&b| hex_digit(b)) {
                v = (v << 4) | u64::from(d);
                n = n.wrapping_add(1);
            }
            if (4..=19).contains(&n) && rest.get(n) == Some(&b'"') {
                self.pos = self.pos.saturating_add(n).saturating_add(1);
                return Ok(v);
            }
        }
        let at = self.offset();
        let s = self.string()?;
        parse_u64(&s).ok_or_else(|| {
            let shown: String = s.chars().take(TOKEN).collect();
            Fail::msg(
                at,
                format!("expected {INTEGER}, found the string {shown:?}"),
            )
        })
    }

    /// An array of integers; `null` reads as empty. `push` receives each value.
    pub(crate) fn u64_array(&mut self, mut push: impl FnMut(u64)) -> Result<(), Fail> {
        if self.null()? {
            return Ok(());
        }
        self.begin_array("an array of integers")?;
        let mut first = true;
        let mut i = 0u64;
        while self
            .next_elem(&mut first)
            .map_err(|f| f.at(Seg::Index(i)))?
        {
            push(self.u64().map_err(|f| f.at(Seg::Index(i)))?);
            i = i.saturating_add(1);
        }
        Ok(())
    }

    /// A string (UTF-8, escapes decoded).
    pub(crate) fn string(&mut self) -> Result<String, Fail> {
        self.string_with(str::to_owned)
    }

    /// A string (UTF-8, escapes decoded), given to `f`: borrowed from the window when it
    /// has no escape and fits in it (no allocation).
    pub(crate) fn string_with<T>(&mut self, f: impl FnOnce(&str) -> T) -> Result<T, Fail> {
        if self.peek()? != Some(b'"') {
            return Err(self.unexpected("a string"));
        }
        let start = self.offset();
        self.bump();
        let rest = self.rest();
        if let Some(n) = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            && rest.get(n) == Some(&b'"')
        {
            if n > MAX_STRING {
                return Err(limit(start, "string length", n, MAX_STRING));
            }
            let bytes = rest.get(..n).unwrap_or_default();
            let v = f(std::str::from_utf8(bytes)
                .map_err(|_| Fail::msg(start, "invalid UTF-8 in a string"))?);
            self.pos = self.pos.saturating_add(n).saturating_add(1);
            return Ok(v);
        }
        self.string_slow(start).map(|s| f(&s))
    }

    /// The rest of a string (after its opening quote) that has escapes or leaves the window.
    fn string_slow(&mut self, start: u64) -> Result<String, Fail> {
        let mut out = Vec::new();
        loop {
            let rest = self.rest();
            let n = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(rest.len());
            out.extend_from_slice(rest.get(..n).unwrap_or_default());
            self.pos = self.pos.saturating_add(n);
            if out.len() > MAX_STRING {
                return Err(limit(start, "string length", out.len(), MAX_STRING));
            }
            if self.rest().is_empty() {
                // The window ended inside the string.
                if !self.more()? {
                    return Err(self.unexpected("the end of the string (`\"`)"));
                }
                continue;
            }
            match self.rest().first() {
                Some(b'"') => {
                    self.bump();
                    break;
                }
                Some(b'\\') => {
                    self.ensure(12)?;
                    self.escape(&mut out)?;
                }
                _ => {
                    return Err(Fail::msg(
                        self.offset(),
                        "a control character (below 0x20) in a string: JSON needs it escaped",
                    ));
                }
            }
        }
        String::from_utf8(out).map_err(|_| Fail::msg(start, "invalid UTF-8 in a string"))
    }

    /// Decodes the escape at the position (at least 12 bytes are in view unless the input
    /// ends sooner).
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), Fail> {
        let at = self.offset();
        let rest = self.rest();
        // An escape needing `len` bytes fails: cut by the end of the input (fewer bytes
        // left, and no end of string among them), or malformed.
        let bad = |len: usize, what: &str| {
            if rest.len() < len && !rest.get(1..).unwrap_or_default().contains(&b'"') {
                let end = at.saturating_add(rest.len() as u64);
                Fail::msg(end, format!("expected {what}, found the end of the input"))
            } else {
                Fail::msg(at, format!("expected {what}"))
            }
        };
        const ESCAPE: &str = "a JSON escape (`\\\"`, `\\n`, `\\u00e9`, …)";
        let simple = match rest.get(1).copied() {
            Some(b'"') => b'"',
            Some(b'\\') => b'\\',
            Some(b'/') => b'/',
            Some(b'b') => 8,
            Some(b'f') => 12,
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'u') => {
                let hex4 = |i: usize| {
                    let h = std::str::from_utf8(rest.get(i..i.checked_add(4)?)?).ok()?;
                    u32::from_str_radix(h, 16).ok()
                };
                let hi = hex4(2).ok_or_else(|| bad(6, ESCAPE))?;
                let (cp, len) = if (0xd800..0xdc00).contains(&hi) {
                    let pair =
                        "a low surrogate `\\udc00`…`\\udfff` after a high one (a lone surrogate)";
                    let lo = match (rest.get(6..8), hex4(8)) {
                        (Some(b"\\u"), Some(lo)) if (0xdc00..0xe000).contains(&lo) => lo,
                        _ => return Err(bad(12, pair)),
                    };
                    let cp = 0x10000u32
                        .saturating_add(hi.saturating_sub(0xd800) << 10)
                        .saturating_add(lo.saturating_sub(0xdc00));
                    (cp, 12)
                } else {
                    (hi, 6)
                };
                let ch = char::from_u32(cp).ok_or_else(|| {
                    Fail::msg(at, "a lone surrogate in a \\u escape (a low one first)")
                })?;
                let mut b = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                self.pos = self.pos.saturating_add(len);
                return Ok(());
            }
            _ => return Err(bad(2, ESCAPE)),
        };
        out.push(simple);
        self.pos = self.pos.saturating_add(2);
        Ok(())
    }

    /// Skips one value of any kind, checking its syntax; nesting is limited to
    /// [`MAX_DEPTH`].
    pub(crate) fn skip_value(&mut self) -> Result<(), Fail> {
        // Open containers: true for an object.
        let mut stack: Vec<bool> = Vec::new();
        // Whether the next token starts a value (else: a separator or a closing bracket).
        let mut want_value = true;
        loop {
            if want_value {
                match self.peek()? {
                    Some(b'[') => {
                        self.bump();
                        if self.eat(b']')? {
                            want_value = false;
                        } else {
                            stack.push(false);
                        }
                    }
                    Some(b'{') => {
                        self.bump();
                        if self.eat(b'}')? {
                            want_value = false;
                        } else {
                            stack.push(true);
                            self.string_with(|_| ())?;
                            if !self.eat(b':')? {
                                return Err(self.unexpected("`:`"));
                            }
                        }
                    }
                    Some(b'"') => {
                        self.string_with(|_| ())?;
                        want_value = false;
                    }
                    Some(b't' | b'f' | b'n') => {
                        self.ensure(5)?;
                        let n = [&b"true"[..], b"false", b"null"]
                            .iter()
                            .find(|w| self.rest().starts_with(w))
                            .map(|w| w.len());
                        match n {
                            Some(n) => self.pos = self.pos.saturating_add(n),
                            None => return Err(self.unexpected("a value")),
                        }
                        want_value = false;
                    }
                    Some(b'-' | b'0'..=b'9') => {
                        self.number()?;
                        want_value = false;
                    }
                    _ => return Err(self.unexpected("a value")),
                }
                if stack.len() > MAX_DEPTH {
                    return Err(limit(
                        self.offset(),
                        "nesting depth",
                        stack.len(),
                        MAX_DEPTH,
                    ));
                }
            } else {
                let Some(&object) = stack.last() else {
                    return Ok(());
                };
                let close = if object { b'}' } else { b']' };
                match self.peek()? {
                    Some(b',') => {
                        self.bump();
                        if object {
                            self.string_with(|_| ())?;
                            if !self.eat(b':')? {
                                return Err(self.unexpected("`:`"));
                            }
                        }
                        want_value = true;
                    }
                    Some(b) if b == close => {
                        self.bump();
                        stack.pop();
                    }
                    _ => {
                        return Err(self.unexpected(if object {
                            "`,` or `}`"
                        } else {
                            "`,` or `]`"
                        }));
                    }
                }
            }
        }
    }

    /// Skips a JSON number (any: fraction and exponent allowed), checking its syntax.
    fn number(&mut self) -> Result<(), Fail> {
        let mut want = TOKEN;
        let len = loop {
            self.ensure(want)?;
            let rest = self.rest();
            let len = rest
                .iter()
                .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .count();
            if len > MAX_NUMBER {
                return Err(limit(self.offset(), "number length", len, MAX_NUMBER));
            }
            if len < rest.len() || rest.len() < want {
                break len;
            }
            // The number may go on beyond the window (which holds far more than this).
            want = want.saturating_mul(2);
        };
        if !valid_number(self.rest().get(..len).unwrap_or_default()) {
            return Err(self.unexpected("a value"));
        }
        self.pos = self.pos.saturating_add(len);
        Ok(())
    }

    /// Checks that only whitespace is left.
    pub(crate) fn end(&mut self) -> Result<(), Fail> {
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(self.unexpected("the end of the input after the top-level object")),
        }
    }
}
