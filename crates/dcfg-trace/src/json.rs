//! A small pull lexer for the JSON of a DCFG-Trace, over a byte slice (zero-copy strings)
//! or over any `io::Read` (a bounded buffer). Written by hand rather than with serde so that
//! the reader can stop between chunks (a lazy iterator), knows the absolute byte offset of
//! every value for its errors, and never holds more than one chunk.

use std::borrow::Cow;
use std::io::Read;

use trace_core::Offset;
use trace_core::json::parse_u64;

use crate::error::Error;
use crate::limits::{MAX_JSON_DEPTH, MAX_STRING};

/// Where the lexer's bytes come from.
pub trait Source<'a> {
    /// The next byte, without consuming it; `None` at the end.
    ///
    /// # Errors
    ///
    /// An I/O error of the underlying reader.
    fn peek(&mut self) -> Result<Option<u8>, Error>;
    /// Consumes the byte [`peek`](Self::peek) returned.
    fn bump(&mut self);
    /// Absolute offset of the next byte.
    fn offset(&self) -> u64;
    /// Consumes the body of a string whose opening quote was consumed, and its closing
    /// quote. Borrowed when the source can and the string has no escape.
    ///
    /// # Errors
    ///
    /// End of input, a bad escape, a string above [`MAX_STRING`], or an I/O error.
    fn string_body(&mut self) -> Result<Cow<'a, [u8]>, Error>;
}

/// A byte slice as a [`Source`].
#[derive(Debug, Clone)]
pub struct SliceSource<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> SliceSource<'a> {
    /// A source over `data`.
    #[must_use]
    pub fn new(data: &'a [u8]) -> Self {
        SliceSource { data, pos: 0 }
    }
}

impl<'a> Source<'a> for SliceSource<'a> {
    #[inline]
    fn peek(&mut self) -> Result<Option<u8>, Error> {
        Ok(self.data.get(self.pos).copied())
    }
    #[inline]
    fn bump(&mut self) {
        self.pos = self.pos.saturating_add(1).min(self.data.len());
    }
    fn offset(&self) -> u64 {
        self.pos as u64
    }
    fn string_body(&mut self) -> Result<Cow<'a, [u8]>, Error> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        match rest.iter().position(|&b| b == b'"' || b == b'\\') {
            Some(n) if rest.get(n) == Some(&b'"') => {
                let s = rest.get(..n).unwrap_or_default();
                self.pos = self.pos.saturating_add(n).saturating_add(1);
                Ok(Cow::Borrowed(s))
            }
            _ => slow_string(self).map(Cow::Owned),
        }
    }
}

/// An `io::Read` as a [`Source`], through a fixed buffer.
#[derive(Debug)]
pub struct ReadSource<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Offset of `buf[start]`.
    offset: u64,
    eof: bool,
}

impl<R: Read> ReadSource<R> {
    /// A source over `inner` with a 64 KiB buffer.
    pub fn new(inner: R) -> Self {
        ReadSource {
            inner,
            buf: vec![0; 1 << 16],
            start: 0,
            end: 0,
            offset: 0,
            eof: false,
        }
    }

    fn fill(&mut self) -> Result<bool, Error> {
        if self.start < self.end {
            return Ok(true);
        }
        if self.eof {
            return Ok(false);
        }
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.start = 0;
                    self.end = n.min(self.buf.len());
                    return Ok(true);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        source,
                        offset: Offset(self.offset),
                    });
                }
            }
        }
    }
}

impl<'a, R: Read> Source<'a> for ReadSource<R> {
    #[inline]
    fn peek(&mut self) -> Result<Option<u8>, Error> {
        if self.start >= self.end && !self.fill()? {
            return Ok(None);
        }
        Ok(self.buf.get(self.start).copied())
    }
    #[inline]
    fn bump(&mut self) {
        if self.start < self.end {
            self.start = self.start.wrapping_add(1);
            self.offset = self.offset.wrapping_add(1);
        }
    }
    fn offset(&self) -> u64 {
        self.offset
    }
    fn string_body(&mut self) -> Result<Cow<'a, [u8]>, Error> {
        let start_offset = self.offset;
        let mut out = Vec::new();
        loop {
            if !self.fill()? {
                return Err(eof(self.offset, "the end of a string"));
            }
            let avail = self.buf.get(self.start..self.end).unwrap_or_default();
            match avail.iter().position(|&b| b == b'"' || b == b'\\') {
                Some(n) => {
                    out.extend_from_slice(avail.get(..n).unwrap_or_default());
                    self.start = self.start.saturating_add(n);
                    self.offset = self.offset.saturating_add(n as u64);
                    check_len(start_offset, out.len())?;
                    if self.buf.get(self.start) == Some(&b'"') {
                        self.bump();
                        return Ok(Cow::Owned(out));
                    }
                    escape(self, &mut out)?;
                }
                None => {
                    out.extend_from_slice(avail);
                    self.offset = self.offset.saturating_add(avail.len() as u64);
                    self.start = self.end;
                    check_len(start_offset, out.len())?;
                }
            }
        }
    }
}

fn check_len(offset: u64, len: usize) -> Result<(), Error> {
    trace_core::LimitExceeded::check(Offset(offset), "string length", len as u64, MAX_STRING)
        .map_err(Error::from)
}

fn eof(offset: u64, what: &'static str) -> Error {
    Error::Syntax {
        offset: Offset(offset),
        expected: what,
        found: "end of input".into(),
    }
}

/// Reads a string byte by byte, handling escapes (after the opening quote).
fn slow_string<'a, S: Source<'a>>(src: &mut S) -> Result<Vec<u8>, Error> {
    let start = src.offset();
    let mut out = Vec::new();
    loop {
        match src.peek()? {
            None => return Err(eof(src.offset(), "the end of a string")),
            Some(b'"') => {
                src.bump();
                return Ok(out);
            }
            Some(b'\\') => escape(src, &mut out)?,
            Some(b) => {
                out.push(b);
                src.bump();
                check_len(start, out.len())?;
            }
        }
    }
}

/// Decodes one escape at the backslash.
fn escape<'a, S: Source<'a>>(src: &mut S, out: &mut Vec<u8>) -> Result<(), Error> {
    let at = src.offset();
    src.bump();
    let bad = |src: &S| Error::Syntax {
        offset: Offset(at),
        expected: "a JSON escape",
        found: format!("something else before offset {:#x}", src.offset()),
    };
    let c = src
        .peek()?
        .ok_or_else(|| eof(src.offset(), "a JSON escape"))?;
    src.bump();
    let simple = match c {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 8,
        b'f' => 12,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => {
            let mut cp = hex4(src).ok_or_else(|| bad(src))?;
            if (0xd800..0xdc00).contains(&cp) && src.peek()? == Some(b'\\') {
                src.bump();
                if src.peek()? == Some(b'u') {
                    src.bump();
                    let lo = hex4(src).ok_or_else(|| bad(src))?;
                    if (0xdc00..0xe000).contains(&lo) {
                        cp = 0x10000u32
                            .wrapping_add(cp.wrapping_sub(0xd800).wrapping_shl(10))
                            .wrapping_add(lo.wrapping_sub(0xdc00));
                    }
                }
            }
            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
            let mut b = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
            return Ok(());
        }
        _ => return Err(bad(src)),
    };
    out.push(simple);
    Ok(())
}

fn hex4<'a, S: Source<'a>>(src: &mut S) -> Option<u32> {
    let mut v = 0u32;
    for _ in 0..4 {
        let d = char::from(src.peek().ok()??).to_digit(16)?;
        src.bump();
        v = (v << 4) | d;
    }
    Some(v)
}

/// An object key and its offset.
pub type Key<'a> = (Cow<'a, [u8]>, u64);

/// The lexer.
#[derive(Debug)]
pub struct Lexer<S> {
    src: S,
}

/// Describes the byte at the current position for an error message.
fn describe(b: Option<u8>) -> String {
    match b {
        None => "end of input".into(),
        Some(b) if b.is_ascii_graphic() => format!("`{}`", char::from(b)),
        Some(b) => format!("byte 0x{b:02x}"),
    }
}

impl<'a, S: Source<'a>> Lexer<S> {
    /// A lexer over `src`.
    pub fn new(src: S) -> Self {
        Lexer { src }
    }

    /// Absolute offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.src.offset()
    }

    /// Skips whitespace and returns the next byte.
    pub fn peek(&mut self) -> Result<Option<u8>, Error> {
        while let Some(b) = self.src.peek()? {
            if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                return Ok(Some(b));
            }
            self.src.bump();
        }
        Ok(None)
    }

    /// An error "expected `what`" at the next byte.
    pub fn unexpected(&mut self, expected: &'static str) -> Error {
        let found = describe(self.peek().ok().flatten());
        Error::Syntax {
            offset: Offset(self.offset()),
            expected,
            found,
        }
    }

    /// Consumes `b` or fails with "expected `what`".
    pub fn expect(&mut self, b: u8, what: &'static str) -> Result<(), Error> {
        if self.peek()? == Some(b) {
            self.src.bump();
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    /// In an array whose `[` was consumed: `Ok(true)` before the next element (after its
    /// comma), `Ok(false)` after consuming `]`.
    pub fn next_elem(&mut self, first: &mut bool) -> Result<bool, Error> {
        match self.peek()? {
            Some(b']') => {
                self.src.bump();
                Ok(false)
            }
            Some(b',') if !*first => {
                self.src.bump();
                Ok(true)
            }
            _ if *first => {
                *first = false;
                Ok(true)
            }
            _ => Err(self.unexpected("`,` or `]`")),
        }
    }

    /// In an object whose `{` was consumed: the next key (after `:`), or `None` after `}`.
    pub fn next_key(&mut self, first: &mut bool) -> Result<Option<Key<'a>>, Error> {
        match self.peek()? {
            Some(b'}') => {
                self.src.bump();
                return Ok(None);
            }
            Some(b',') if !*first => self.src.bump(),
            _ if *first => {}
            _ => return Err(self.unexpected("`,` or `}`")),
        }
        *first = false;
        let at = self.offset();
        let key = self.string()?;
        self.expect(b':', "`:`")?;
        Ok(Some((key, at)))
    }

    /// A string value; returns its bytes and the offset of its first byte.
    pub fn string_at(&mut self) -> Result<(Cow<'a, [u8]>, u64), Error> {
        if self.peek()? != Some(b'"') {
            return Err(self.unexpected("a string"));
        }
        self.src.bump();
        let at = self.offset();
        Ok((self.src.string_body()?, at))
    }

    /// A string value.
    pub fn string(&mut self) -> Result<Cow<'a, [u8]>, Error> {
        self.string_at().map(|(s, _)| s)
    }

    /// Consumes `null` if it is next.
    pub fn null(&mut self) -> Result<bool, Error> {
        if self.peek()? != Some(b'n') {
            return Ok(false);
        }
        for &b in b"null" {
            if self.src.peek()? != Some(b) {
                return Err(self.unexpected("`null`"));
            }
            self.src.bump();
        }
        Ok(true)
    }

    /// An integer: a JSON number, or a decimal or `0x` hex string (section 1.2.1).
    pub fn integer(&mut self, what: &'static str) -> Result<u64, Error> {
        let at = self.offset();
        match self.peek()? {
            Some(b'"') => {
                let s = self.string()?;
                let text = String::from_utf8_lossy(&s);
                parse_u64(&text).ok_or_else(|| Error::Integer {
                    offset: Offset(at),
                    what,
                    found: format!("{text:?}"),
                })
            }
            Some(b'0'..=b'9' | b'-') => {
                let mut text = Vec::new();
                while let Some(b) = self.src.peek()? {
                    if !matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                        || text.len() > 64
                    {
                        break;
                    }
                    text.push(b);
                    self.src.bump();
                }
                let text = String::from_utf8_lossy(&text).into_owned();
                if text.bytes().all(|b| b.is_ascii_digit())
                    && let Ok(v) = text.parse::<u64>()
                {
                    return Ok(v);
                }
                Err(Error::Integer {
                    offset: Offset(at),
                    what,
                    found: text,
                })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// Skips one value of any kind (iteratively, so deep nesting cannot overflow the stack).
    pub fn skip_value(&mut self) -> Result<(), Error> {
        let mut depth: u64 = 0;
        loop {
            match self.peek()? {
                Some(b'"') => {
                    self.src.bump();
                    self.src.string_body()?;
                }
                Some(b'[' | b'{') => {
                    depth = depth.saturating_add(1);
                    trace_core::LimitExceeded::check(
                        Offset(self.offset()),
                        "JSON nesting",
                        depth,
                        MAX_JSON_DEPTH,
                    )?;
                    self.src.bump();
                    continue;
                }
                Some(b']' | b'}') if depth > 0 => {
                    self.src.bump();
                    depth = depth.saturating_sub(1);
                }
                Some(b't' | b'f' | b'n' | b'-' | b'0'..=b'9') => {
                    while let Some(b) = self.src.peek()? {
                        if !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')) {
                            break;
                        }
                        self.src.bump();
                    }
                }
                _ => return Err(self.unexpected("a JSON value")),
            }
            // After a value inside a container: a comma, or closing brackets.
            loop {
                if depth == 0 {
                    return Ok(());
                }
                match self.peek()? {
                    Some(b',') => {
                        // The next element, or an object member's key (its `:` is
                        // handled like a comma below).
                        self.src.bump();
                        break;
                    }
                    Some(b']' | b'}') => {
                        self.src.bump();
                        depth = depth.saturating_sub(1);
                    }
                    Some(b':') => {
                        self.src.bump();
                        break;
                    }
                    _ => return Err(self.unexpected("`,`, `]` or `}`")),
                }
            }
        }
    }

    /// Expects the end of the input (only whitespace left).
    pub fn end(&mut self) -> Result<(), Error> {
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(self.unexpected("the end of the input")),
        }
    }
}

#[cfg(test)]
// Test code: panics are failures; helpers outside #[test] functions are not exempted.
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::panic
)]
mod tests {
    use super::*;

    #[test]
    fn skip_values_of_every_kind() {
        for (text, rest) in [
            ("1 ,x", ",x"),
            ("\"a\\\"b\" x", "x"),
            ("[1,[2,{\"k\":[3,\"]\"]}],true] x", "x"),
            ("[\"a\", \"b\", 1, {\"x\":1,\"y\":[]}] x", "x"),
            ("{} x", "x"),
            ("[] x", "x"),
            ("{\"a\":{\"b\":null},\"c\":-1.5e3} x", "x"),
        ] {
            let mut l = Lexer::new(SliceSource::new(text.as_bytes()));
            l.skip_value().unwrap();
            let _ = l.peek().unwrap();
            assert_eq!(&text[l.offset() as usize..], rest, "{text}");
        }
        let deep = "[".repeat(100_000);
        let mut l = Lexer::new(SliceSource::new(deep.as_bytes()));
        assert!(l.skip_value().is_err());
    }

    #[test]
    fn strings_and_integers_from_slices_and_readers() {
        let text = br#"["plain", "esc\"aped\u0041\/", 12, "0x1F", "42", 1.5, -3, "zz"]"#;
        fn run<'a, S: Source<'a>>(src: S) -> Vec<String> {
            let mut l = Lexer::new(src);
            l.expect(b'[', "[").unwrap();
            let mut first = true;
            let mut out = Vec::new();
            while l.next_elem(&mut first).unwrap() {
                let r = if l.peek().unwrap() == Some(b'"') && out.len() < 2 {
                    String::from_utf8(l.string().unwrap().into_owned()).unwrap()
                } else {
                    match l.integer("x") {
                        Ok(v) => v.to_string(),
                        Err(e) => {
                            // Skip past the bad value.
                            let s = e.to_string();
                            if l.peek().unwrap() == Some(b'"') {
                                l.string().unwrap();
                            }
                            s
                        }
                    }
                };
                out.push(r);
            }
            out
        }
        let a = run(SliceSource::new(text));
        let b = run(ReadSource::new(&text[..]));
        assert_eq!(a, b);
        assert_eq!(&a[..5], ["plain", "esc\"apedA/", "12", "31", "42"]);
        assert!(
            a[5].starts_with("bad integer for x: 1.5 at offset 0x3"),
            "{}",
            a[5]
        );
        assert!(a[6].starts_with("bad integer for x: -3"), "{}", a[6]);
        assert!(a[7].starts_with("bad integer for x: \"zz\""), "{}", a[7]);
    }

    #[test]
    fn reader_source_handles_tiny_reads() {
        struct OneByte<'a>(&'a [u8]);
        impl Read for OneByte<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                match (self.0.split_first(), buf.first_mut()) {
                    (Some((&b, rest)), Some(slot)) => {
                        *slot = b;
                        self.0 = rest;
                        Ok(1)
                    }
                    _ => Ok(0),
                }
            }
        }
        let mut l = Lexer::new(ReadSource::new(OneByte(b" \"abc\\ndef\"  7")));
        assert_eq!(&*l.string().unwrap(), b"abc\ndef");
        assert_eq!(l.integer("n").unwrap(), 7);
        assert_eq!(l.offset(), 14);
        l.end().unwrap();
    }
}
