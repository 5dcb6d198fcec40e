//! JSON for the DCFG family of formats: one pull lexer that both the DCFG and the
//! DCFG-Trace readers use, and the integer rules of the DCFG specification.
//!
//! - [`Lexer`]: a pull lexer over a [`Source`], either a whole slice ([`SliceSource`],
//!   strings without escapes borrowed from it) or an `io::Read` through a 64 KiB window
//!   ([`ReadSource`], constant memory). It reads integers exactly (a JSON number or a
//!   decimal or `0x` hex string, never through `f64`), knows the absolute byte offset of
//!   every value, skips unknown values iteratively within [`MAX_DEPTH`], and refuses
//!   strings above [`MAX_STRING`].
//! - [`Error`]: a failure with its offset, which the caller annotates with the JSON path as
//!   the failure unwinds ([`Error::at`]), so messages can say
//!   `PROCESSES[0].IMAGES[0].BASIC_BLOCKS[0].NODE_ID: expected …, found … at offset 0x95c`.
//! - [`parse_u64`] and [`JsonU64`]: the same integer rules for text and for serde.
//!
//! ```
//! use trace_core::json::{Lexer, SliceSource};
//!
//! let mut lex = Lexer::new(SliceSource::new(br#"{"ID": "0x10", "N": [1, 2]}"#));
//! lex.expect(b'{', "an object")?;
//! let mut first = true;
//! let key = lex.next_key(&mut first, &["ID", "N"])?.unwrap();
//! assert_eq!((&*key, lex.u64()?), ("ID", 16));
//! lex.next_key(&mut first, &[])?;
//! let err = lex.u64().unwrap_err().at_key("N");
//! assert_eq!(
//!     err.to_string(),
//!     "N: expected an unsigned integer or a hex string such as \"0x400000\", found an array at offset 0x14"
//! );
//! # Ok::<(), trace_core::json::Error>(())
//! ```

use std::borrow::Cow;
use std::fmt::{self, Write as _};
use std::io::{self, Read};

use serde::{Deserialize, Deserializer};

use crate::{LimitExceeded, Offset};

/// The longest JSON string accepted, in bytes (decoded). A DCFG-Trace chunk's
/// `EDGE_ID_SEQUENCE` is one string and can legitimately run to hundreds of MiB; a string is
/// only ever a copy of input bytes, so the bound mostly stops a stream from growing one
/// string without end.
pub const MAX_STRING: u64 = 1 << 32;
/// The deepest nesting of arrays and objects accepted inside a skipped value (unknown keys
/// and columns). Far deeper than any DCFG or DCFG-Trace needs; the skipper keeps one byte
/// per level, so this bounds its memory too.
pub const MAX_DEPTH: usize = 1024;
/// Enough bytes to hold any integer token the lexer accepts, with room to spare.
const TOKEN: usize = 64;
/// The longest number accepted inside skipped values, in bytes.
const MAX_NUMBER: usize = 4096;
/// The window of a [`ReadSource`].
const WINDOW: usize = 64 * 1024;

/// What an integer value may look like (the DCFG specification, section 1.2.1).
pub const INTEGER: &str = "an unsigned integer or a hex string such as \"0x400000\"";

/// Parses a decimal or `0x`/`0X`-prefixed hex string as a `u64`, exactly.
///
/// Surrounding ASCII whitespace is allowed; signs, underscores and empty digit strings are
/// not.
#[must_use]
pub fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim_ascii();
    let (digits, radix) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (s, 10),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// An unsigned integer deserialized (with serde) from a JSON number or a hex/decimal string,
/// exactly; a floating-point number is an error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JsonU64(pub u64);

struct U64Visitor;

impl serde::de::Visitor<'_> for U64Visitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(INTEGER)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
        parse_u64(v).ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
    }
}

impl<'de> Deserialize<'de> for JsonU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(U64Visitor).map(JsonU64)
    }
}

/// One step of a JSON path, as the readers name it in errors.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Seg {
    /// An object key: `.KEY` (`KEY` at the start of the path).
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

/// What the lexer found where it expected something else, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Found {
    /// The end of the input.
    End,
    /// A byte that starts no value (or a value other than the kinds below).
    Byte(u8),
    /// A string: its first bytes (lossy UTF-8), and whether they are all of it.
    String {
        /// Up to 64 bytes of the string, escapes not decoded.
        text: String,
        /// Whether `text` is the whole string.
        complete: bool,
    },
    /// A number, as written (up to 64 bytes).
    Number(String),
    /// An object.
    Object,
    /// An array.
    Array,
    /// `null`.
    Null,
}

impl Found {
    /// The first byte of what was found (`None` at the end of the input).
    #[must_use]
    pub fn first_byte(&self) -> Option<u8> {
        match self {
            Found::End => None,
            Found::Byte(b) => Some(*b),
            Found::String { .. } => Some(b'"'),
            Found::Number(t) => t.bytes().next(),
            Found::Object => Some(b'{'),
            Found::Array => Some(b'['),
            Found::Null => Some(b'n'),
        }
    }
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::End => f.write_str("the end of the input"),
            Found::Byte(b) if b.is_ascii_graphic() => write!(f, "`{}`", char::from(*b)),
            Found::Byte(b) => write!(f, "byte 0x{b:02x}"),
            Found::String { text, complete } => {
                let dots = if *complete { "" } else { "…" };
                write!(f, "the string \"{text}{dots}\"")
            }
            Found::Number(t) => write!(f, "the number {t}"),
            Found::Object => f.write_str("an object"),
            Found::Array => f.write_str("an array"),
            Found::Null => f.write_str("`null`"),
        }
    }
}

/// What went wrong (see [`Error`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Malformed JSON or a value of the wrong shape.
    Unexpected {
        /// What was expected.
        expected: &'static str,
        /// What was there.
        found: Found,
    },
    /// A number or string where an integer was expected that is not a `u64` (a fraction,
    /// an exponent, a leading zero, above 2^64 - 1, a string that is not decimal or hex).
    NotU64 {
        /// The number as written, or the decoded string (up to 64 characters).
        text: String,
        /// Whether `text` is a string's content (else a number).
        string: bool,
        /// Why a well-formed number is refused, e.g. " (above 2^64 - 1)", or "".
        why: &'static str,
    },
    /// Any other failure, described in words.
    Message(String),
    /// A size limit was exceeded.
    Limit(LimitExceeded),
    /// The input could not be read.
    Io(io::Error),
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Unexpected { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            ErrorKind::NotU64 {
                text, string: true, ..
            } => write!(f, "expected {INTEGER}, found the string {text:?}"),
            ErrorKind::NotU64 { text, why, .. } => {
                write!(f, "expected {INTEGER}, found the number {text}{why}")
            }
            ErrorKind::Message(m) => f.write_str(m),
            ErrorKind::Limit(l) => write!(
                f,
                "{} is {}, above the limit of {}",
                l.what, l.found, l.limit
            ),
            ErrorKind::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

#[derive(Debug)]
struct Inner {
    offset: u64,
    kind: ErrorKind,
    /// Innermost segment first (pushed while unwinding).
    path: Vec<Seg>,
}

/// A lexer failure: where (absolute offset, JSON path as far as the callers added it) and
/// what. Boxed, so that results stay one word.
#[derive(Debug)]
pub struct Error(Box<Inner>);

impl Error {
    /// A failure of `kind` at `offset`, with an empty path.
    #[cold]
    #[must_use]
    pub fn new(offset: u64, kind: ErrorKind) -> Error {
        Error(Box::new(Inner {
            offset,
            kind,
            path: Vec::new(),
        }))
    }

    /// A failure described by `message` at `offset`.
    #[cold]
    #[must_use]
    pub fn msg(offset: u64, message: impl Into<String>) -> Error {
        Error::new(offset, ErrorKind::Message(message.into()))
    }

    /// A size limit exceeded at `at`.
    #[cold]
    #[must_use]
    pub fn limit(at: u64, what: &'static str, found: u64, limit: u64) -> Error {
        Error::new(
            at,
            ErrorKind::Limit(LimitExceeded {
                offset: Offset(at),
                what,
                found,
                limit,
            }),
        )
    }

    /// Adds the path segment the failure happened under (called from the inside out).
    #[cold]
    #[must_use]
    pub fn at(mut self, seg: Seg) -> Error {
        self.0.path.push(seg);
        self
    }

    /// [`at`](Self::at) an object key.
    #[cold]
    #[must_use]
    pub fn at_key(self, key: &'static str) -> Error {
        self.at(Seg::Key(Cow::Borrowed(key)))
    }

    /// Whether a path segment was added (the failure is inside the current value).
    #[must_use]
    pub fn is_nested(&self) -> bool {
        !self.0.path.is_empty()
    }

    /// The absolute byte offset of the failure.
    #[must_use]
    pub fn offset(&self) -> Offset {
        Offset(self.0.offset)
    }

    /// What went wrong.
    #[must_use]
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// The JSON path, e.g. `PROCESSES[0].EDGES[7].COUNT_PER_THREAD[3]` (empty: the top
    /// level, or no path was added).
    #[must_use]
    pub fn path(&self) -> String {
        let mut p = String::new();
        for seg in self.0.path.iter().rev() {
            // Writing to a String cannot fail.
            let _ = match seg {
                Seg::Key(k) => write!(p, "{}{k}", if p.is_empty() { "" } else { "." }),
                Seg::Column(c) => write!(p, ".{c}"),
                Seg::Header => p.write_str("[header]"),
                Seg::Row(i) | Seg::Index(i) => write!(p, "[{i}]"),
            };
        }
        p
    }

    /// The offset, the kind and the rendered path.
    #[must_use]
    pub fn into_parts(self) -> (Offset, ErrorKind, String) {
        let path = self.path();
        let Inner { offset, kind, .. } = *self.0;
        (Offset(offset), kind, path)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path();
        if !path.is_empty() {
            write!(f, "{path}: ")?;
        }
        write!(f, "{} at offset {}", self.0.kind, self.offset())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0.kind {
            ErrorKind::Io(e) => Some(e),
            ErrorKind::Limit(l) => Some(l),
            _ => None,
        }
    }
}

impl crate::Located for Error {
    fn offset(&self) -> Option<Offset> {
        Some(Error::offset(self))
    }
}

/// Bytes for the [`Lexer`]: a window onto the input that can be refilled. `'a` is the
/// lifetime of bytes the source can lend out for good (a slice's); a stream lends none.
pub trait Source<'a> {
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
    fn refill(&mut self, pos: usize) -> Result<(usize, bool), Error>;
    /// Whether `data()` ends where the input ends (a slice, unlike a stream's window).
    fn whole(&self) -> bool {
        false
    }
    /// `data()[start..end]` for the whole lifetime `'a`, if the source can lend it.
    fn lend(&self, start: usize, end: usize) -> Option<&'a [u8]> {
        let _ = (start, end);
        None
    }
}

/// A whole input in memory: strings without escapes are borrowed from it.
#[derive(Debug, Clone, Copy)]
pub struct SliceSource<'a>(&'a [u8]);

impl<'a> SliceSource<'a> {
    /// A source over `data`.
    #[must_use]
    pub fn new(data: &'a [u8]) -> Self {
        SliceSource(data)
    }
}

impl<'a> Source<'a> for SliceSource<'a> {
    #[inline]
    fn data(&self) -> &[u8] {
        self.0
    }
    fn base(&self) -> u64 {
        0
    }
    fn refill(&mut self, pos: usize) -> Result<(usize, bool), Error> {
        Ok((pos, false))
    }
    fn whole(&self) -> bool {
        true
    }
    #[inline]
    fn lend(&self, start: usize, end: usize) -> Option<&'a [u8]> {
        self.0.get(start..end)
    }
}

/// A stream, through a 64 KiB window (memory stays constant whatever the input's size).
#[derive(Debug)]
pub struct ReadSource<R> {
    inner: R,
    buf: Vec<u8>,
    /// Bytes of `buf` holding input.
    end: usize,
    base: u64,
    eof: bool,
}

impl<R: Read> ReadSource<R> {
    /// A source over `inner`.
    pub fn new(inner: R) -> Self {
        ReadSource {
            inner,
            buf: vec![0; WINDOW],
            end: 0,
            base: 0,
            eof: false,
        }
    }
}

impl<R: Read> Source<'_> for ReadSource<R> {
    #[inline]
    fn data(&self) -> &[u8] {
        self.buf.get(..self.end).unwrap_or_default()
    }
    fn base(&self) -> u64 {
        self.base
    }
    fn refill(&mut self, pos: usize) -> Result<(usize, bool), Error> {
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
                    return Err(Error::new(at, ErrorKind::Io(e)));
                }
            }
        }
    }
}

/// An object key's bytes and the offset just before it (see [`Lexer::next_key_bytes`]).
pub type Key<'a> = (Cow<'a, [u8]>, u64);

/// The pull lexer: a [`Source`] and a position in its window. See the
/// [module documentation](self).
#[derive(Debug)]
pub struct Lexer<S> {
    src: S,
    pos: usize,
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

const fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// Where a string's plain run ends: its closing quote, an escape or a control character.
#[inline]
fn plain_run(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)
}

/// Checks a string's length against [`MAX_STRING`].
fn check_string(start: u64, len: usize) -> Result<(), Error> {
    if len as u64 > MAX_STRING {
        return Err(Error::limit(start, "string length", len as u64, MAX_STRING));
    }
    Ok(())
}

impl<'a, S: Source<'a>> Lexer<S> {
    /// A lexer at the start of `src`.
    pub fn new(src: S) -> Self {
        Lexer { src, pos: 0 }
    }

    /// The absolute offset of the next byte (whitespace is skipped only by reads).
    pub fn offset(&self) -> u64 {
        self.src.base().saturating_add(self.pos as u64)
    }

    fn rest(&self) -> &[u8] {
        self.src.data().get(self.pos..).unwrap_or_default()
    }

    /// Refills the window keeping the unread bytes; `false` at the end of the input.
    fn more(&mut self) -> Result<bool, Error> {
        let (pos, added) = self.src.refill(self.pos)?;
        self.pos = pos;
        Ok(added)
    }

    /// Makes at least `n` unread bytes visible, if the input has them.
    #[inline]
    fn ensure(&mut self, n: usize) -> Result<(), Error> {
        while self.rest().len() < n {
            if !self.more()? {
                break;
            }
        }
        Ok(())
    }

    /// Skips whitespace; returns the next byte without consuming it.
    ///
    /// # Errors
    ///
    /// A read error of the input.
    #[inline]
    pub fn peek(&mut self) -> Result<Option<u8>, Error> {
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

    /// A failure "expected `expected`, found …" at the next value.
    #[cold]
    pub fn unexpected(&mut self, expected: &'static str) -> Error {
        match self.found() {
            Ok(found) => Error::new(self.offset(), ErrorKind::Unexpected { expected, found }),
            Err(e) => e,
        }
    }

    /// What the next value is, for messages.
    #[cold]
    fn found(&mut self) -> Result<Found, Error> {
        Ok(match self.peek()? {
            None => Found::End,
            Some(b'"') => {
                self.ensure(TOKEN)?;
                let rest = self.rest().get(1..).unwrap_or_default();
                let end = rest.iter().take(TOKEN).position(|&b| b == b'"');
                let shown = rest
                    .get(..end.unwrap_or(rest.len().min(TOKEN)))
                    .unwrap_or_default();
                Found::String {
                    text: String::from_utf8_lossy(shown).into_owned(),
                    complete: end.is_some(),
                }
            }
            Some(b'0'..=b'9' | b'-') => Found::Number(self.number_text()),
            Some(b'{') => Found::Object,
            Some(b'[') => Found::Array,
            Some(b'n') if self.rest().starts_with(b"null") => Found::Null,
            Some(b) => Found::Byte(b),
        })
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

    /// The bytes left in the input, if known (a slice).
    pub fn bytes_left(&self) -> Option<usize> {
        self.src.whole().then(|| self.rest().len())
    }

    /// Consumes `b` if it is next.
    ///
    /// # Errors
    ///
    /// A read error of the input.
    #[inline]
    pub fn eat(&mut self, b: u8) -> Result<bool, Error> {
        if self.peek()? == Some(b) {
            self.bump();
            Ok(true)
        } else {
            Ok(false)
        }
    }

    /// Consumes `b`, or fails with "expected `what`, found …".
    ///
    /// # Errors
    ///
    /// Something else is next, or a read error.
    #[inline]
    pub fn expect(&mut self, b: u8, what: &'static str) -> Result<(), Error> {
        if self.eat(b)? {
            Ok(())
        } else {
            Err(self.unexpected(what))
        }
    }

    /// Consumes `null` if it is next.
    ///
    /// # Errors
    ///
    /// An `n` that does not start `null`, or a read error.
    pub fn null(&mut self) -> Result<bool, Error> {
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

    /// In an array whose `[` was consumed: `Ok(true)` before the next element (its comma
    /// consumed), `Ok(false)` after consuming `]`. `first` starts `true` for each array.
    ///
    /// # Errors
    ///
    /// Neither `,` nor `]` after an element, or a read error.
    #[inline]
    pub fn next_elem(&mut self, first: &mut bool) -> Result<bool, Error> {
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

    /// In an object whose `{` was consumed: consumes the `,` before the next member and
    /// returns `true`, or consumes `}` and returns `false`.
    fn next_member(&mut self, first: &mut bool) -> Result<bool, Error> {
        match self.peek()? {
            Some(b'}') => {
                self.bump();
                return Ok(false);
            }
            Some(b',') if !*first => self.bump(),
            _ if *first => {}
            _ => return Err(self.unexpected("`,` or `}`")),
        }
        *first = false;
        Ok(true)
    }

    /// In an object whose `{` was consumed: the next key (its `:` consumed), or `None` after
    /// consuming `}`. A key in `known` is returned borrowed from it (no allocation).
    ///
    /// # Errors
    ///
    /// Malformed JSON, or a read error.
    pub fn next_key(
        &mut self,
        first: &mut bool,
        known: &[&'static str],
    ) -> Result<Option<Cow<'static, str>>, Error> {
        if !self.next_member(first)? {
            return Ok(None);
        }
        if self.peek()? != Some(b'"') {
            return Err(self.unexpected("a key (a string)"));
        }
        let key = self.string_with(|k| match known.iter().find(|&&n| n == k) {
            Some(&n) => Cow::Borrowed(n),
            None => Cow::Owned(k.to_owned()),
        })?;
        self.expect(b':', "`:`")?;
        Ok(Some(key))
    }

    /// Like [`next_key`](Self::next_key), but the key as raw bytes (borrowed from a slice
    /// source when it has no escape, not checked for UTF-8), with the offset just after the
    /// `,` or `{` before it.
    ///
    /// # Errors
    ///
    /// Malformed JSON, or a read error.
    pub fn next_key_bytes(&mut self, first: &mut bool) -> Result<Option<Key<'a>>, Error> {
        if !self.next_member(first)? {
            return Ok(None);
        }
        let at = self.offset();
        let (key, _) = self.string_bytes_at()?;
        self.expect(b':', "`:`")?;
        Ok(Some((key, at)))
    }

    /// An integer: a JSON number, or a decimal or `0x` hex string (DCFG specification
    /// 1.2.1). Exact, never through `f64`; a fraction or exponent is an error.
    ///
    /// # Errors
    ///
    /// Not an integer (kinds [`ErrorKind::NotU64`] or [`ErrorKind::Unexpected`] expecting
    /// [`INTEGER`]), or a read error.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, Error> {
        let first = self.peek()?;
        self.ensure(TOKEN)?;
        match first {
            Some(b'0'..=b'9') => self.decimal(),
            Some(b'"') => self.integer_string(),
            _ => Err(self.unexpected(INTEGER)),
        }
    }

    /// `null` (`None`), or a value read by `read`.
    ///
    /// # Errors
    ///
    /// Those of `read`.
    #[inline]
    pub fn opt<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, Error>,
    ) -> Result<Option<T>, Error> {
        if self.null()? {
            Ok(None)
        } else {
            read(self).map(Some)
        }
    }

    /// An integer below 2^32, spelt as [`u64`](Self::u64) reads.
    ///
    /// # Errors
    ///
    /// As [`u64`](Self::u64), or a value of 2^32 or more.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, Error> {
        self.peek()?;
        let at = self.offset();
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| {
            Error::msg(
                at,
                format!("expected an unsigned integer below 2^32, found {v}"),
            )
        })
    }

    fn decimal(&mut self) -> Result<u64, Error> {
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
    fn bad_number(&mut self, overflow: bool, leading_zero: bool) -> Error {
        let why = if overflow {
            " (above 2^64 - 1)"
        } else if leading_zero {
            " (JSON allows no leading zero)"
        } else {
            ""
        };
        let text = self.number_text();
        Error::new(
            self.offset(),
            ErrorKind::NotU64 {
                text,
                string: false,
                why,
            },
        )
    }

    /// A string holding an integer. The usual spelling, `"0x"` and 1 to 16 lower- or
    /// upper-case hex digits, is parsed in the window; anything else as [`parse_u64`] does
    /// (decimal, spaces around).
    fn integer_string(&mut self) -> Result<u64, Error> {
        let rest = self.rest();
        if let Some(b'0') = rest.get(1)
            && let Some(b'x' | b'X') = rest.get(2)
        {
            let mut v = 0u64;
            let mut n = 3usize;
            while let Some(d) = rest.get(n).and_then(|&b| crate::hex::digit(b)) {
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
            Error::new(
                at,
                ErrorKind::NotU64 {
                    text: s.chars().take(TOKEN).collect(),
                    string: true,
                    why: "",
                },
            )
        })
    }

    /// An array of integers; `null` reads as empty. `push` receives each value; failures
    /// name the element (`[i]`).
    ///
    /// # Errors
    ///
    /// Not an array of integers, or a read error.
    pub fn u64_array(&mut self, mut push: impl FnMut(u64)) -> Result<(), Error> {
        if self.null()? {
            return Ok(());
        }
        self.expect(b'[', "an array of integers")?;
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
    ///
    /// # Errors
    ///
    /// Not a string, malformed, not UTF-8, above [`MAX_STRING`], or a read error.
    pub fn string(&mut self) -> Result<String, Error> {
        self.string_with(str::to_owned)
    }

    /// A string (UTF-8, escapes decoded), given to `f`: borrowed from the window when it
    /// has no escape and fits in it (no allocation).
    ///
    /// # Errors
    ///
    /// As [`string`](Self::string).
    pub fn string_with<T>(&mut self, f: impl FnOnce(&str) -> T) -> Result<T, Error> {
        if self.peek()? != Some(b'"') {
            return Err(self.unexpected("a string"));
        }
        let start = self.offset();
        self.bump();
        let rest = self.rest();
        if let Some(n) = plain_run(rest)
            && rest.get(n) == Some(&b'"')
        {
            check_string(start, n)?;
            let bytes = rest.get(..n).unwrap_or_default();
            let v = std::str::from_utf8(bytes).map(f);
            // Past the string even when its UTF-8 is bad, as after the slow path: a reader
            // stands at the same offset after an error whichever path the string took.
            self.pos = self.pos.saturating_add(n).saturating_add(1);
            return v.map_err(|_| Error::msg(start, "invalid UTF-8 in a string"));
        }
        let s = self.string_slow(start)?;
        let s = String::from_utf8(s).map_err(|_| Error::msg(start, "invalid UTF-8 in a string"))?;
        Ok(f(&s))
    }

    /// A string's bytes (escapes decoded, UTF-8 not checked) and the offset of its first
    /// byte (after the quote): borrowed from a slice source when it has no escape.
    ///
    /// # Errors
    ///
    /// Not a string, malformed, above [`MAX_STRING`], or a read error.
    #[inline]
    pub fn string_bytes_at(&mut self) -> Result<(Cow<'a, [u8]>, u64), Error> {
        if self.peek()? != Some(b'"') {
            return Err(self.unexpected("a string"));
        }
        let start = self.offset();
        self.bump();
        let at = self.offset();
        let rest = self.rest();
        if let Some(n) = plain_run(rest)
            && rest.get(n) == Some(&b'"')
        {
            check_string(start, n)?;
            let end = self.pos.saturating_add(n);
            let v = match self.src.lend(self.pos, end) {
                Some(b) => Cow::Borrowed(b),
                None => Cow::Owned(self.rest().get(..n).unwrap_or_default().to_vec()),
            };
            self.pos = end.saturating_add(1);
            return Ok((v, at));
        }
        Ok((Cow::Owned(self.string_slow(start)?), at))
    }

    /// The rest of a string (after its opening quote) that has escapes or leaves the window.
    fn string_slow(&mut self, start: u64) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        loop {
            let rest = self.rest();
            let n = plain_run(rest).unwrap_or(rest.len());
            out.extend_from_slice(rest.get(..n).unwrap_or_default());
            self.pos = self.pos.saturating_add(n);
            check_string(start, out.len())?;
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
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.ensure(12)?;
                    self.escape(&mut out)?;
                }
                _ => {
                    return Err(Error::msg(
                        self.offset(),
                        "a control character (below 0x20) in a string: JSON needs it escaped",
                    ));
                }
            }
        }
    }

    /// Decodes the escape at the position (at least 12 bytes are in view unless the input
    /// ends sooner).
    fn escape(&mut self, out: &mut Vec<u8>) -> Result<(), Error> {
        let at = self.offset();
        let rest = self.rest();
        // An escape needing `len` bytes fails: cut by the end of the input (fewer bytes
        // left, and no end of string among them), or malformed.
        let bad = |len: usize, what: &str| {
            if rest.len() < len && !rest.get(1..).unwrap_or_default().contains(&b'"') {
                let end = at.saturating_add(rest.len() as u64);
                Error::msg(end, format!("expected {what}, found the end of the input"))
            } else {
                Error::msg(at, format!("expected {what}"))
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
                // Exactly four hex digits (`from_str_radix` would also take a sign).
                let hex4 = |i: usize| {
                    rest.get(i..i.checked_add(4)?)?
                        .iter()
                        .try_fold(0u32, |v, &b| {
                            Some(v.wrapping_shl(4) | u32::from(crate::hex::digit(b)?))
                        })
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
                    Error::msg(at, "a lone surrogate in a \\u escape (a low one first)")
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
    /// [`MAX_DEPTH`] and works without recursion.
    ///
    /// # Errors
    ///
    /// Malformed JSON, too deep, or a read error.
    pub fn skip_value(&mut self) -> Result<(), Error> {
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
                            self.expect(b':', "`:`")?;
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
                    return Err(Error::limit(
                        self.offset(),
                        "nesting depth",
                        stack.len() as u64,
                        MAX_DEPTH as u64,
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
                            self.expect(b':', "`:`")?;
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
    fn number(&mut self) -> Result<(), Error> {
        let mut want = TOKEN;
        let len = loop {
            self.ensure(want)?;
            let rest = self.rest();
            let len = rest
                .iter()
                .take_while(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
                .count();
            if len > MAX_NUMBER {
                return Err(Error::limit(
                    self.offset(),
                    "number length",
                    len as u64,
                    MAX_NUMBER as u64,
                ));
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

    /// Checks that only whitespace is left, or fails with "expected `what`, found …".
    ///
    /// # Errors
    ///
    /// Something other than whitespace, or a read error.
    pub fn end(&mut self, what: &'static str) -> Result<(), Error> {
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(self.unexpected(what)),
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
    use quickcheck::quickcheck;

    /// A reader that hands out one byte per call, to cross every window boundary.
    struct OneByte<'a>(&'a [u8]);

    impl Read for OneByte<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
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

    #[test]
    fn integers_from_numbers_and_strings() {
        let v: Vec<JsonU64> =
            serde_json::from_str(r#"[1, "0x400000", "0X1f", "42", 18446744073709551615]"#).unwrap();
        assert_eq!(
            v,
            [
                JsonU64(1),
                JsonU64(0x40_0000),
                JsonU64(31),
                JsonU64(42),
                JsonU64(u64::MAX)
            ]
        );
        // Above 2^53: exact, never through f64.
        let v: JsonU64 = serde_json::from_str("9007199254740993").unwrap();
        assert_eq!(v.0, 9_007_199_254_740_993);
        for bad in [
            "1.5",
            "1e3",
            "-1",
            r#""0x""#,
            r#""12z""#,
            r#""""#,
            "18446744073709551616",
            "true",
        ] {
            assert!(serde_json::from_str::<JsonU64>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_utf8_in_a_string_leaves_every_source_at_the_same_offset() {
        // Found by the lexer_never_panics property in CI: the slice's fast path stopped
        // before the string, the byte-at-a-time reader after it.
        let s = [b'"', 0x80, b'"'];
        let mut a = Lexer::new(SliceSource::new(&s));
        let mut b = Lexer::new(ReadSource::new(OneByte(&s)));
        let ea = a.skip_value().unwrap_err();
        let eb = b.skip_value().unwrap_err();
        assert_eq!(ea.to_string(), eb.to_string());
        assert_eq!((a.offset(), b.offset()), (3, 3));
    }

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
        let e = l.skip_value().unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Limit(l) if l.limit == MAX_DEPTH as u64),
            "{e}"
        );
        for bad in ["[1 2]", "{\"a\" 1}", "01", "tru", "{1:2}", "-"] {
            let mut l = Lexer::new(SliceSource::new(bad.as_bytes()));
            assert!(l.skip_value().is_err(), "{bad}");
        }
    }

    fn run<'a, S: Source<'a>>(src: S) -> Vec<String> {
        let mut l = Lexer::new(src);
        l.expect(b'[', "[").unwrap();
        let mut first = true;
        let mut out = Vec::new();
        while l.next_elem(&mut first).unwrap() {
            let r = if l.peek().unwrap() == Some(b'"') && out.len() < 2 {
                String::from_utf8(l.string_bytes_at().unwrap().0.into_owned()).unwrap()
            } else {
                match l.u64() {
                    Ok(v) => v.to_string(),
                    Err(e) => {
                        out.push(e.to_string());
                        // A bad integer string is consumed; anything else is not.
                        let consumed = matches!(e.kind(), ErrorKind::NotU64 { string: true, .. });
                        if !consumed && l.skip_value().is_err() {
                            // Not JSON (a leading zero): nothing after it can be read.
                            return out;
                        }
                        continue;
                    }
                }
            };
            out.push(r);
        }
        l.end("the end").unwrap();
        out
    }

    #[test]
    fn strings_and_integers_from_slices_and_readers() {
        let text = br#"["plain", "esc\"aped\u0041\/\ud83d\ude00", 12, "0x1F", "42", 1.5, -3, "zz", 18446744073709551616, 007]"#;
        let a = run(SliceSource::new(text));
        assert_eq!(a, run(ReadSource::new(&text[..])));
        assert_eq!(a, run(ReadSource::new(OneByte(text))));
        assert_eq!(&a[..5], ["plain", "esc\"apedA/😀", "12", "31", "42"]);
        assert_eq!(
            a[5],
            format!("expected {INTEGER}, found the number 1.5 at offset 0x3d")
        );
        assert_eq!(
            a[6],
            format!("expected {INTEGER}, found the number -3 at offset 0x42")
        );
        assert_eq!(
            a[7],
            format!("expected {INTEGER}, found the string \"zz\" at offset 0x46")
        );
        assert!(a[8].contains("(above 2^64 - 1)"), "{}", a[8]);
        assert!(
            a[9].ends_with("007 (JSON allows no leading zero) at offset 0x62"),
            "{}",
            a[9]
        );
        assert_eq!(a.len(), 10);
    }

    #[test]
    fn strings_borrow_from_slices_only() {
        let text = br#" "abc" "a\nb" "#;
        let mut l = Lexer::new(SliceSource::new(text));
        assert!(matches!(
            l.string_bytes_at().unwrap(),
            (Cow::Borrowed(b"abc"), 2)
        ));
        assert!(matches!(l.string_bytes_at().unwrap(), (Cow::Owned(v), 8) if v == b"a\nb"));
        let mut l = Lexer::new(ReadSource::new(&text[..]));
        assert!(matches!(l.string_bytes_at().unwrap(), (Cow::Owned(v), 2) if v == b"abc"));
    }

    #[test]
    fn errors_name_what_was_found_and_where() {
        let check = |text: &str, want: &str| {
            let mut l = Lexer::new(SliceSource::new(text.as_bytes()));
            let mut first = true;
            let e = loop {
                match l.next_elem(&mut first).and_then(|_| l.u64()) {
                    Ok(_) => {}
                    Err(e) => {
                        break e
                            .at(Seg::Index(1))
                            .at(Seg::Column("C"))
                            .at(Seg::Row(0))
                            .at_key("T");
                    }
                }
            };
            assert_eq!(e.to_string(), want, "{text}");
        };
        check(
            "1, {",
            &format!("T[0].C[1]: expected {INTEGER}, found an object at offset 0x3"),
        );
        check(
            "1 2",
            "T[0].C[1]: expected `,` or `]`, found the number 2 at offset 0x2",
        );
        check(
            "1,",
            &format!("T[0].C[1]: expected {INTEGER}, found the end of the input at offset 0x2"),
        );
        check(
            "1,\"0x12",
            "T[0].C[1]: expected the end of the string (`\"`), found the end of the input at offset 0x7",
        );
        check(
            "1,nul",
            &format!("T[0].C[1]: expected {INTEGER}, found `n` at offset 0x2"),
        );
        let mut l = Lexer::new(SliceSource::new(b"\"\\x\""));
        assert!(
            l.string()
                .unwrap_err()
                .to_string()
                .starts_with("expected a JSON escape")
        );
        // Exactly four hex digits: a sign is not one.
        for bad in [
            &b"\"\\u+041\""[..],
            b"\"\\u-041\"",
            b"\"\\u04g1\"",
            b"\"\\u041\"",
        ] {
            let mut l = Lexer::new(SliceSource::new(bad));
            assert!(
                l.string()
                    .unwrap_err()
                    .to_string()
                    .starts_with("expected a JSON escape"),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut l = Lexer::new(SliceSource::new(b"\"\\u00e9\\u0041\""));
        assert_eq!(l.string().unwrap(), "éA");
        let mut l = Lexer::new(SliceSource::new(b"\"\\ud800\""));
        assert!(
            l.string()
                .unwrap_err()
                .to_string()
                .contains("lone surrogate")
        );
        let mut l = Lexer::new(SliceSource::new(b"\"\xff\""));
        assert_eq!(
            l.string().unwrap_err().to_string(),
            "invalid UTF-8 in a string at offset 0x0"
        );
        let mut l = Lexer::new(SliceSource::new(b"4294967296"));
        assert!(l.u32().unwrap_err().to_string().contains("below 2^32"));
    }

    #[test]
    fn keys_objects_and_read_errors() {
        let text = br#"{"A": 1, "B\u0041": [], "C": null}"#;
        for bytes in [true, false] {
            let mut l = Lexer::new(ReadSource::new(OneByte(text)));
            l.expect(b'{', "{").unwrap();
            let mut first = true;
            let mut keys = Vec::new();
            loop {
                let k = if bytes {
                    l.next_key_bytes(&mut first)
                        .unwrap()
                        .map(|(k, _)| String::from_utf8(k.into_owned()).unwrap())
                } else {
                    l.next_key(&mut first, &["A"]).unwrap().map(Cow::into_owned)
                };
                let Some(k) = k else { break };
                keys.push(k);
                if !l.null().unwrap() {
                    l.skip_value().unwrap();
                }
            }
            assert_eq!(keys, ["A", "BA", "C"]);
            assert_eq!(l.offset(), text.len() as u64);
        }
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        let e = Lexer::new(ReadSource::new(Broken)).peek().unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Io(_)));
        assert_eq!(e.to_string(), "I/O error: disk on fire at offset 0x0");
    }

    #[test]
    fn long_strings_cross_the_window() {
        let body = "x".repeat(3 * WINDOW + 7) + "\\n";
        let text = format!("[\"{body}\", 5]");
        let mut l = Lexer::new(ReadSource::new(text.as_bytes()));
        l.expect(b'[', "[").unwrap();
        let mut first = true;
        assert!(l.next_elem(&mut first).unwrap());
        let s = l.string().unwrap();
        assert_eq!(s.len(), 3 * WINDOW + 8);
        assert!(l.next_elem(&mut first).unwrap());
        assert_eq!(l.u64().unwrap(), 5);
    }

    quickcheck! {
        fn hex_and_decimal_agree(v: u64) -> bool {
            let forms = [v.to_string(), format!("\"{v}\""), format!("\"{v:#x}\""), format!("\"0X{v:X}\""), format!("\" {v} \"")];
            forms.iter().all(|f| {
                serde_json::from_str::<JsonU64>(f.trim()).ok() == Some(JsonU64(v))
                    && Lexer::new(SliceSource::new(f.as_bytes())).u64().ok() == Some(v)
                    && Lexer::new(ReadSource::new(OneByte(f.as_bytes()))).u64().ok() == Some(v)
            })
        }

        /// Never panics, and a slice and a one-byte stream agree on every outcome.
        fn lexer_never_panics(s: Vec<u8>) -> bool {
            let mut a = Lexer::new(SliceSource::new(&s));
            let mut b = Lexer::new(ReadSource::new(OneByte(&s)));
            let ra = a.skip_value().map_err(|e| e.to_string());
            let rb = b.skip_value().map_err(|e| e.to_string());
            let _ = parse_u64(&String::from_utf8_lossy(&s));
            ra == rb && a.offset() == b.offset()
        }
    }
}
