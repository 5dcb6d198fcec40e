//! The `.bb` reader: a lazy, fused pass over the lines of any [`BufRead`] (a `&[u8]` too).

use std::io::{BufRead, ErrorKind};

use super::error::{Error, Problem};
use super::limits::{MAX_ID, MAX_LINE_LEN};

/// One pair of a `T:` line: a block id and its count in the slice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    /// The block id, `1..=MAX_ID`.
    pub id: u32,
    /// The count: instructions executed in the block during the slice. Read as a
    /// floating-point number, as SimPoint does (exact for integers up to 2^53).
    pub count: f64,
}

/// An `M:` line: the pc where the next slice starts and its execution count so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    /// The pc.
    pub pc: u64,
    /// Its execution count, counting the execution that starts the next slice.
    pub count: u64,
}

/// One item of a `.bb` file, borrowed from the reader until the next call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Item<'a> {
    /// A `T:` line: one slice's sparse vector, in the file's order.
    Slice(&'a [Entry]),
    /// An `M:` line.
    Marker(Marker),
}

/// One item of a `.bb` file, owned (what the [`Iterator`] yields).
#[derive(Clone, Debug, PartialEq)]
pub enum Record {
    /// A `T:` line: one slice's sparse vector, in the file's order.
    Slice(Vec<Entry>),
    /// An `M:` line.
    Marker(Marker),
}

/// Reads a `.bb` file: SimPoint's frequency vectors (`T:` lines) and LoopPoint's markers
/// (`M:` lines), in file order.
///
/// - A line starting with `T` is a slice: `T:id:count :id:count …`. As SimPoint's stream
///   parser does, spaces and tabs may stand between any two tokens (a pair need not be
///   preceded by one). Ids are decimal integers in `1..=MAX_ID`; counts are non-negative
///   decimal numbers with an optional fraction and exponent (`1000`, `12.5`, `3e6`). Ids
///   are given as written: neither order nor uniqueness is checked.
/// - A line starting with `M:` is a marker: `M: 0x<hex pc> <decimal count>` (the `0x` is
///   optional); further fields after the count (image names, source lines) are ignored.
/// - Every other line is skipped, as SimPoint skips lines not starting with `T`.
/// - Lines end in LF or CRLF; the last line need not end at all.
///
/// Where SimPoint silently stops at the first token it cannot read (dropping the rest of a
/// line, or the rest of the file after an empty `T` line), this reader returns an
/// [`Error`] with the line, column and offset; it is fused after that. Memory is bounded
/// by the longest line ([`MAX_LINE_LEN`]).
#[derive(Debug)]
pub struct Reader<R> {
    input: R,
    line: Vec<u8>,
    entries: Vec<Entry>,
    /// The current line's number, from 1 (0 before the first).
    line_no: u64,
    /// The absolute offset of the start of the next line.
    offset: u64,
    slices: u64,
    done: bool,
}

impl<R: BufRead> Reader<R> {
    /// A reader over `input` (`&[u8]` is a `BufRead`; wrap files in a `BufReader`).
    pub fn new(input: R) -> Self {
        Reader {
            input,
            line: Vec::new(),
            entries: Vec::new(),
            line_no: 0,
            offset: 0,
            slices: 0,
            done: false,
        }
    }

    /// The next slice or marker, `None` at the end of the input (or after an error).
    pub fn next_item(&mut self) -> Option<Result<Item<'_>, Error>> {
        loop {
            if self.done {
                return None;
            }
            let start = self.offset;
            match self.read_line() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
            let kind = match self.line.as_slice() {
                [b'T', ..] => Kind::Slice,
                [b'M', b':', ..] => Kind::Marker,
                _ => continue,
            };
            let mut p = LineParser {
                bytes: &self.line,
                pos: 0,
                line: self.line_no,
                start,
            };
            let parsed = match kind {
                Kind::Slice => p.slice(&mut self.entries).map(|()| None),
                Kind::Marker => p.marker().map(Some),
            };
            return match parsed {
                Ok(Some(marker)) => Some(Ok(Item::Marker(marker))),
                Ok(None) => {
                    self.slices = self.slices.saturating_add(1);
                    Some(Ok(Item::Slice(&self.entries)))
                }
                Err(e) => {
                    self.done = true;
                    Some(Err(e))
                }
            };
        }
    }

    /// The line number (from 1) of the last line read.
    #[must_use]
    pub fn line(&self) -> u64 {
        self.line_no
    }

    /// How many slices have been read.
    #[must_use]
    pub fn slices(&self) -> u64 {
        self.slices
    }

    /// Reads the next line into `self.line` without its terminator; `false` at the end.
    fn read_line(&mut self) -> Result<bool, Error> {
        self.line.clear();
        let mut any = false;
        let line = self.line_no.saturating_add(1);
        let line_start = self.offset;
        loop {
            let available = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(source) => {
                    return Err(Error::Io {
                        line,
                        offset: self.offset,
                        source,
                    });
                }
            };
            if available.is_empty() {
                break;
            }
            any = true;
            let (take, ended) = match memchr::memchr(b'\n', available) {
                Some(i) => (i, true),
                None => (available.len(), false),
            };
            let room = MAX_LINE_LEN.saturating_sub(self.line.len());
            if take > room {
                return Err(Error::Syntax {
                    line,
                    column: (MAX_LINE_LEN as u64).saturating_add(1),
                    offset: line_start.saturating_add(MAX_LINE_LEN as u64),
                    found: available.get(room).copied(),
                    problem: Problem::LineTooLong,
                });
            }
            self.line
                .extend_from_slice(available.get(..take).unwrap_or_default());
            let consumed = if ended { take.saturating_add(1) } else { take };
            self.input.consume(consumed);
            self.offset = self.offset.saturating_add(consumed as u64);
            if ended {
                break;
            }
        }
        if !any {
            return Ok(false);
        }
        self.line_no = line;
        Ok(true)
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<Record, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_item().map(|r| {
            r.map(|item| match item {
                Item::Slice(entries) => Record::Slice(entries.to_vec()),
                Item::Marker(m) => Record::Marker(m),
            })
        })
    }
}

impl<R: BufRead> std::iter::FusedIterator for Reader<R> {}

/// What a line is.
enum Kind {
    Slice,
    Marker,
}

/// A cursor over one line, making errors that say where.
struct LineParser<'a> {
    bytes: &'a [u8],
    pos: usize,
    line: u64,
    /// The absolute offset of the line's first byte.
    start: u64,
}

impl LineParser<'_> {
    fn peek(&self) -> Option<u8> {
        let b = self.bytes.get(self.pos).copied();
        // A CR right before the LF is part of the terminator.
        if b == Some(b'\r') && self.pos.saturating_add(1) == self.bytes.len() {
            return None;
        }
        b
    }

    fn error(&self, problem: Problem) -> Error {
        let found = self.peek();
        Error::Syntax {
            line: self.line,
            column: (self.pos as u64).saturating_add(1),
            offset: self.start.saturating_add(self.pos as u64),
            found,
            problem,
        }
    }

    fn expected(&self, what: &'static str) -> Error {
        self.error(Problem::Expected(what))
    }

    /// Skips spaces and tabs; whether there were any.
    fn blanks(&mut self) -> bool {
        let from = self.pos;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos = self.pos.saturating_add(1);
        }
        self.pos > from
    }

    fn digits(&mut self) -> usize {
        let from = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos = self.pos.saturating_add(1);
        }
        self.pos.saturating_sub(from)
    }

    fn eat(&mut self, byte: u8) -> bool {
        if self.peek() == Some(byte) {
            self.pos = self.pos.saturating_add(1);
            true
        } else {
            false
        }
    }

    /// `T:id:count :id:count …` (the `T` not yet consumed).
    fn slice(&mut self, entries: &mut Vec<Entry>) -> Result<(), Error> {
        entries.clear();
        self.pos = 1;
        self.blanks();
        if self.peek().is_none() {
            return Err(self.error(Problem::EmptySlice));
        }
        loop {
            if !self.eat(b':') {
                return Err(self.expected("':' before a block id"));
            }
            self.blanks();
            let id = self.id()?;
            self.blanks();
            if !self.eat(b':') {
                return Err(self.expected("':' between a block id and its count"));
            }
            self.blanks();
            let count = self.count()?;
            entries.push(Entry { id, count });
            self.blanks();
            if self.peek().is_none() {
                return Ok(());
            }
        }
    }

    fn id(&mut self) -> Result<u32, Error> {
        let at = self.pos;
        if self.digits() == 0 {
            return Err(self.expected("a block id (a decimal integer)"));
        }
        let text = self.bytes.get(at..self.pos).unwrap_or_default();
        let value = text.iter().try_fold(0u32, |acc, &d| {
            acc.checked_mul(10)?
                .checked_add(u32::from(d.wrapping_sub(b'0')))
        });
        match value {
            Some(0) => {
                self.pos = at;
                Err(self.error(Problem::ZeroId))
            }
            Some(v) if v <= MAX_ID => Ok(v),
            _ => {
                self.pos = at;
                Err(self.error(Problem::IdTooLarge))
            }
        }
    }

    /// A non-negative decimal number: digits, an optional fraction, an optional exponent.
    fn count(&mut self) -> Result<f64, Error> {
        let at = self.pos;
        self.eat(b'+');
        let whole = self.digits();
        let mut fraction = 0;
        if self.eat(b'.') {
            fraction = self.digits();
        }
        if whole == 0 && fraction == 0 {
            self.pos = at;
            return Err(self.expected("a count (a non-negative decimal number)"));
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos = self.pos.saturating_add(1);
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            if self.digits() == 0 {
                return Err(self.expected("the digits of the count's exponent"));
            }
        }
        let text = self.bytes.get(at..self.pos).unwrap_or_default();
        // Plain integers (what Pin and tracekit write) are read exactly up to 2^53.
        let value = match parse_u64(text) {
            Some(n) => n as f64,
            None => std::str::from_utf8(text)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(f64::INFINITY),
        };
        if !value.is_finite() {
            self.pos = at;
            return Err(self.error(Problem::TooLarge("the count")));
        }
        Ok(value)
    }

    /// `M: 0x<pc> <count>[ anything]`.
    fn marker(&mut self) -> Result<Marker, Error> {
        self.pos = 2;
        self.blanks();
        if self.eat(b'0') && !(self.eat(b'x') || self.eat(b'X')) {
            self.pos = self.pos.saturating_sub(1);
        }
        let at = self.pos;
        let mut pc = 0u64;
        while let Some(d) = self.peek().and_then(|b| char::from(b).to_digit(16)) {
            pc = match pc.checked_mul(16) {
                Some(v) => v | u64::from(d),
                None => return Err(self.error(Problem::TooLarge("the marker's pc"))),
            };
            self.pos = self.pos.saturating_add(1);
        }
        if self.pos == at {
            return Err(self.expected("the marker's pc in hex"));
        }
        if !self.blanks() {
            return Err(self.expected("a space after the marker's pc"));
        }
        let at = self.pos;
        if self.digits() == 0 {
            return Err(self.expected("the marker's execution count (a decimal integer)"));
        }
        let Some(count) = parse_u64(self.bytes.get(at..self.pos).unwrap_or_default()) else {
            self.pos = at;
            return Err(self.error(Problem::TooLarge("the marker's count")));
        };
        if self.peek().is_some() && !self.blanks() {
            return Err(self.expected("a space or the end of the line after the marker's count"));
        }
        Ok(Marker { pc, count })
    }
}

/// `text` as a decimal integer, if it is only digits and fits.
fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u64, |acc, &d| {
        if d.is_ascii_digit() {
            acc.checked_mul(10)?
                .checked_add(u64::from(d.wrapping_sub(b'0')))
        } else {
            None
        }
    })
}
