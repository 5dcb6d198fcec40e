//! Reading: JSON text (plain, bzip2 or gzip) → [`Dcfg`].
//!
//! Parsing goes through `serde_json` with integers taken exactly from numbers or hex strings
//! ([`trace_core::json`]) and tables mapped by their header row. Unknown keys and unknown
//! columns are skipped; optional sections may be missing; rows may be short where the
//! trailing columns are optional (spec 1.2.2).

use std::cell::RefCell;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use trace_core::Offset;
use trace_core::json::JsonU64;

use crate::error::Error;
use crate::fast::{FastRow, FastTable};
use crate::model::{
    BasicBlock, Dcfg, Edge, EdgeType, Edges, FileName, Image, Process, Routine, SourceLine,
    SpecialNode, Symbol,
};
use crate::raw;

/// The compression around a DCFG, recognised by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Plain JSON.
    None,
    /// bzip2 (`BZh`), Intel's default (`.dcfg.json.bz2`).
    Bzip2,
    /// gzip (`1f 8b`).
    Gzip,
}

impl Compression {
    /// Recognises the compression from the first bytes of a file.
    #[must_use]
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(b"BZh") {
            Compression::Bzip2
        } else if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else {
            Compression::None
        }
    }
}

impl Dcfg {
    /// Reads a DCFG from bytes: plain JSON, or bzip2/gzip-compressed JSON (recognised by
    /// their magic bytes).
    ///
    /// # Errors
    ///
    /// Malformed JSON, a value of the wrong type, or a corrupt compressed stream; the
    /// message names the JSON path and ends with the byte offset.
    pub fn from_slice(bytes: &[u8]) -> Result<Dcfg, Error> {
        match Compression::detect(bytes) {
            Compression::None => from_json_slice(bytes),
            _ => Dcfg::from_reader(bytes),
        }
    }

    /// Reads a DCFG from a stream (plain, bzip2 or gzip), parsing as it reads: memory is the
    /// model plus small buffers.
    ///
    /// # Errors
    ///
    /// As [`Dcfg::from_slice`], plus I/O errors.
    pub fn from_reader<R: Read>(reader: R) -> Result<Dcfg, Error> {
        let mut buf = BufReader::with_capacity(64 * 1024, reader);
        let head = buf.fill_buf().map_err(|e| io_error("cannot read", 0, e))?;
        match Compression::detect(head) {
            Compression::None => from_json_reader(buf),
            Compression::Bzip2 => from_json_reader(BufReader::with_capacity(
                64 * 1024,
                bzip2::read::MultiBzDecoder::new(buf),
            )),
            Compression::Gzip => from_json_reader(BufReader::with_capacity(
                64 * 1024,
                flate2::read::MultiGzDecoder::new(buf),
            )),
        }
    }

    /// Reads a DCFG file: `.json`, `.json.bz2` or `.json.gz` (recognised by content, not by
    /// name), parsing as it reads: the JSON text is never held whole, so the peak memory is
    /// the model plus small buffers (about 1.2× the uncompressed JSON for Intel's layout).
    /// [`Dcfg::from_slice`] on a memory map or buffer is faster when memory allows.
    ///
    /// # Errors
    ///
    /// As [`Dcfg::from_reader`], plus the file cannot be opened.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Dcfg, Error> {
        let path = path.as_ref();
        let file = std::fs::File::open(path)
            .map_err(|e| io_error(&format!("cannot open {}", path.display()), 0, e))?;
        Dcfg::from_reader(file)
    }
}

impl Dcfg {
    /// Recovers what precedes a parse error: the longest prefix of `bytes` (plain JSON)
    /// ending at a complete array or object before `error_offset`, closed with the brackets
    /// still open there, read as a DCFG. A truncated file thus gives every complete row (for
    /// example every basic block) before the cut. `None` if no such prefix reads.
    #[must_use]
    pub fn recover_prefix(bytes: &[u8], error_offset: u64) -> Option<Dcfg> {
        const TRIES: usize = 64;
        let end = usize::try_from(error_offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let prefix = bytes.get(..end)?;
        // Forward scan: bracket stack, strings skipped; remember the last closing positions.
        let mut stack: Vec<u8> = Vec::new();
        let mut cuts: std::collections::VecDeque<(usize, Vec<u8>)> =
            std::collections::VecDeque::with_capacity(TRIES);
        let (mut in_str, mut esc) = (false, false);
        for (i, &b) in prefix.iter().enumerate() {
            if in_str {
                if esc {
                    esc = false;
                } else if b == b'\\' {
                    esc = true;
                } else if b == b'"' {
                    in_str = false;
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'[' | b'{' => {
                    if stack.len() >= 256 {
                        return None;
                    }
                    stack.push(b);
                }
                b']' | b'}' => {
                    stack.pop();
                    if !stack.is_empty() {
                        if cuts.len() == TRIES {
                            cuts.pop_front();
                        }
                        cuts.push_back((i, stack.clone()));
                    }
                }
                _ => {}
            }
        }
        for (pos, open) in cuts.iter().rev() {
            let mut text = prefix.get(..=*pos)?.to_vec();
            for &o in open.iter().rev() {
                text.push(if o == b'[' { b']' } else { b'}' });
            }
            if let Ok(d) = from_json_slice(&text) {
                return Some(d);
            }
        }
        None
    }
}

fn io_error(context: &str, offset: u64, source: io::Error) -> Error {
    Error::Io {
        context: context.to_owned(),
        offset: Offset(offset),
        source,
    }
}

/// Parses plain JSON bytes.
fn from_json_slice(bytes: &[u8]) -> Result<Dcfg, Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let result = DcfgSeed
        .deserialize(&mut de)
        .and_then(|d| de.end().map(|()| d));
    result.map_err(|e| {
        let offset = line_col_to_offset(bytes, e.line(), e.column());
        json_error(&e, offset)
    })
}

/// Parses plain JSON from a stream, counting bytes for error offsets.
fn from_json_reader<R: Read>(reader: R) -> Result<Dcfg, Error> {
    let state = Rc::new(RefCell::new(TapState::default()));
    let tap = Tap {
        inner: reader,
        state: Rc::clone(&state),
    };
    // serde_json reads one byte at a time; `std::io::Bytes` has a fast path for a `BufReader`
    // passed by value, so the tap sits under the buffer.
    let mut de = serde_json::Deserializer::from_reader(BufReader::with_capacity(READ_BUF, tap));
    let result = DcfgSeed
        .deserialize(&mut de)
        .and_then(|d| de.end().map(|()| d));
    drop(de);
    result.map_err(|e| {
        let mut st = state.borrow_mut();
        let count = st.count;
        if let Some(io) = st.io_error.take() {
            return io_error("cannot read or decompress the input", count, io);
        }
        let offset = st
            .line_start(e.line())
            .map_or(count, |start| {
                start.saturating_add((e.column() as u64).saturating_sub(1))
            })
            .min(count);
        json_error(&e, offset)
    })
}

/// Buffer size between the input and serde_json.
const READ_BUF: usize = 8 * 1024;

/// What a [`Tap`] has seen: the byte count, the number of newlines, and copies of the last
/// two chunks (the parser lags the input by at most one buffer, so the line an error is on
/// starts in one of them, unless it is longer than a buffer).
#[derive(Default)]
struct TapState {
    /// Bytes read from the input.
    count: u64,
    io_error: Option<io::Error>,
    /// Newlines seen so far.
    newlines: usize,
    /// The last two chunks: (offset of the chunk, newlines before it, bytes).
    chunks: [(u64, usize, Vec<u8>); 2],
    /// Which of `chunks` is the newer.
    newer: usize,
}

impl TapState {
    fn record(&mut self, bytes: &[u8]) {
        self.newer ^= 1;
        let (count, newlines) = (self.count, self.newlines);
        let found = bytes.iter().filter(|&&b| b == b'\n').count();
        if let Some(chunk) = self.chunks.get_mut(self.newer) {
            chunk.0 = count;
            chunk.1 = newlines;
            chunk.2.clear();
            chunk.2.extend_from_slice(bytes);
        }
        self.newlines = newlines.saturating_add(found);
        self.count = count.saturating_add(bytes.len() as u64);
    }

    /// The offset where 1-based line `line` starts, if known.
    fn line_start(&self, line: usize) -> Option<u64> {
        if line <= 1 {
            return Some(0);
        }
        // The (line - 1)-th newline ends the previous line.
        let nth = line.saturating_sub(1);
        for (base, before, bytes) in &self.chunks {
            if nth <= *before {
                continue;
            }
            let k = nth.saturating_sub(*before);
            if let Some((pos, _)) = bytes
                .iter()
                .enumerate()
                .filter(|&(_, &b)| b == b'\n')
                .nth(k.saturating_sub(1))
            {
                return Some(base.saturating_add(pos as u64).saturating_add(1));
            }
        }
        None
    }
}

/// Counts bytes and lines as they pass from the input to the buffer.
struct Tap<R> {
    inner: R,
    state: Rc<RefCell<TapState>>,
}

impl<R: Read> Read for Tap<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.state
                    .borrow_mut()
                    .record(buf.get(..n).unwrap_or_default());
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                let kind = e.kind();
                self.state.borrow_mut().io_error = Some(e);
                Err(io::Error::from(kind))
            }
        }
    }
}

/// The byte offset of serde_json's 1-based (line, column) in `bytes`.
fn line_col_to_offset(bytes: &[u8], line: usize, column: usize) -> u64 {
    if line == 0 {
        return bytes.len() as u64;
    }
    let mut start = 0usize;
    let mut remaining = line.saturating_sub(1);
    if remaining > 0 {
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' {
                remaining = remaining.saturating_sub(1);
                if remaining == 0 {
                    start = i.saturating_add(1);
                    break;
                }
            }
        }
    }
    let off = start.saturating_add(column.saturating_sub(1));
    off.min(bytes.len()) as u64
}

fn json_error(e: &serde_json::Error, offset: u64) -> Error {
    Error::Json {
        offset: Offset(offset),
        message: strip_positions(&e.to_string()),
    }
}

/// Removes serde_json's " at line N column M" decorations (nested errors repeat them); the
/// caller appends the byte offset instead.
fn strip_positions(msg: &str) -> String {
    const PAT: &str = " at line ";
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find(PAT) {
        let (before, after) = rest.split_at(i);
        out.push_str(before);
        let tail = after.get(PAT.len()..).unwrap_or_default();
        match skip_line_column(tail) {
            Some(t) => rest = t,
            None => {
                out.push_str(PAT);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Given text after " at line ", skips "N column M" and returns the rest.
fn skip_line_column(s: &str) -> Option<&str> {
    let s = s.trim_start_matches(|c: char| c.is_ascii_digit());
    let s = s.strip_prefix(" column ")?;
    let t = s.trim_start_matches(|c: char| c.is_ascii_digit());
    (t.len() < s.len()).then_some(t)
}

/// Wraps an error with the key or column it happened under.
fn under<E: de::Error>(path: &str, e: impl fmt::Display) -> E {
    E::custom(format_args!("{path}: {e}"))
}

// ---------------------------------------------------------------------------------------
// Helpers for integer arrays.

struct U64Seq;

impl<'de> Visitor<'de> for U64Seq {
    type Value = Vec<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of integers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u64>, A::Error> {
        let mut v = Vec::new();
        while let Some(JsonU64(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(v)
    }
}

// ---------------------------------------------------------------------------------------
// Table rows (column names from `raw`).

#[derive(Deserialize)]
struct FileNameRow {
    #[serde(rename = "FILE_NAME_ID")]
    id: JsonU64,
    #[serde(rename = "FILE_NAME")]
    name: String,
}

#[derive(Deserialize)]
struct EdgeTypeRow {
    #[serde(rename = "EDGE_TYPE_ID")]
    id: JsonU64,
    #[serde(rename = "EDGE_TYPE")]
    name: String,
}

#[derive(Deserialize)]
struct SpecialNodeRow {
    #[serde(rename = "NODE_ID")]
    id: JsonU64,
    #[serde(rename = "NODE_NAME")]
    name: String,
}

#[derive(Deserialize)]
struct ProcessRow {
    #[serde(rename = "PROCESS_ID")]
    id: JsonU64,
    #[serde(rename = "PROCESS_DATA", default)]
    data: Option<ProcessData>,
}

#[derive(Deserialize)]
struct ImageRow {
    #[serde(rename = "IMAGE_ID")]
    id: JsonU64,
    #[serde(rename = "LOAD_ADDR")]
    load_addr: JsonU64,
    #[serde(rename = "SIZE")]
    size: JsonU64,
    #[serde(rename = "IMAGE_DATA", default)]
    data: Option<ImageData>,
}

// ---------------------------------------------------------------------------------------
// Tables with conversion, streamed row by row.

struct TableOf<R, T>(fn(R) -> T);

impl<'de, R: Deserialize<'de>, T> DeserializeSeed<'de> for TableOf<R, T> {
    type Value = Vec<T>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<T>, D::Error> {
        let mut out = Vec::new();
        let f = self.0;
        trace_core::json::for_each_row(d, |row: R| {
            out.push(f(row));
            Ok(())
        })?;
        out.shrink_to_fit();
        Ok(out)
    }
}

fn fast<'de, A: MapAccess<'de>, T: FastRow>(map: &mut A, key: &str) -> Result<Vec<T>, A::Error> {
    map.next_value_seed(FastTable::<T>::new())
        .map_err(|e| under(key, e))
}

fn next_table<'de, A: MapAccess<'de>, R: Deserialize<'de>, T>(
    map: &mut A,
    key: &str,
    f: fn(R) -> T,
) -> Result<Vec<T>, A::Error> {
    map.next_value_seed(TableOf(f)).map_err(|e| under(key, e))
}

// ---------------------------------------------------------------------------------------
// Objects.

struct DcfgSeed;

impl<'de> DeserializeSeed<'de> for DcfgSeed {
    type Value = Dcfg;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Dcfg, D::Error> {
        d.deserialize_map(DcfgVisitor)
    }
}

struct DcfgVisitor;

impl<'de> Visitor<'de> for DcfgVisitor {
    type Value = Dcfg;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a DCFG: a JSON object with MAJOR_VERSION, MINOR_VERSION, PROCESSES, …")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Dcfg, A::Error> {
        let mut dcfg = Dcfg::default();
        let (mut major, mut minor) = (None, None);
        while let Some(key) = map.next_key::<KeyBuf>()? {
            match key.as_str() {
                raw::MAJOR_VERSION => {
                    major = Some(
                        map.next_value::<JsonU64>()
                            .map_err(|e| under(raw::MAJOR_VERSION, e))?
                            .0,
                    );
                }
                raw::MINOR_VERSION => {
                    minor = Some(
                        map.next_value::<JsonU64>()
                            .map_err(|e| under(raw::MINOR_VERSION, e))?
                            .0,
                    );
                }
                raw::FILE_NAMES => {
                    dcfg.file_names =
                        Some(next_table(&mut map, raw::FILE_NAMES, |r: FileNameRow| {
                            FileName {
                                id: r.id.0,
                                name: r.name,
                            }
                        })?);
                }
                raw::EDGE_TYPES => {
                    dcfg.edge_types =
                        Some(next_table(&mut map, raw::EDGE_TYPES, |r: EdgeTypeRow| {
                            EdgeType {
                                id: r.id.0,
                                name: r.name,
                            }
                        })?);
                }
                raw::SPECIAL_NODES => {
                    dcfg.special_nodes = Some(next_table(
                        &mut map,
                        raw::SPECIAL_NODES,
                        |r: SpecialNodeRow| SpecialNode {
                            id: r.id.0,
                            name: r.name,
                        },
                    )?);
                }
                raw::PROCESSES => {
                    dcfg.processes = next_table(&mut map, raw::PROCESSES, |r: ProcessRow| {
                        let mut p = Process {
                            id: r.id.0,
                            ..Process::default()
                        };
                        if let Some(d) = r.data {
                            p.has_data = true;
                            p.instr_count = d.instr_count;
                            p.instr_count_per_thread = d.instr_count_per_thread;
                            p.images = d.images;
                            p.edges = d.edges;
                        }
                        p
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        dcfg.major_version = major.ok_or_else(|| de::Error::missing_field(raw::MAJOR_VERSION))?;
        dcfg.minor_version = minor.ok_or_else(|| de::Error::missing_field(raw::MINOR_VERSION))?;
        Ok(dcfg)
    }
}

/// An object key, borrowed when the input allows.
struct KeyBuf(String);

impl KeyBuf {
    fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for KeyBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KeyBuf, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyBuf;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyBuf, E> {
                Ok(KeyBuf(v.to_owned()))
            }
        }
        d.deserialize_str(V)
    }
}

#[derive(Default)]
struct ProcessData {
    instr_count: Option<u64>,
    instr_count_per_thread: Option<Vec<u64>>,
    images: Option<Vec<Image>>,
    edges: Option<Edges>,
}

impl<'de> Deserialize<'de> for ProcessData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ProcessData, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProcessData;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a process-data object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ProcessData, A::Error> {
                let mut p = ProcessData::default();
                while let Some(key) = map.next_key::<KeyBuf>()? {
                    match key.as_str() {
                        raw::INSTR_COUNT => {
                            p.instr_count = Some(
                                map.next_value::<JsonU64>()
                                    .map_err(|e| under(raw::INSTR_COUNT, e))?
                                    .0,
                            );
                        }
                        raw::INSTR_COUNT_PER_THREAD => {
                            p.instr_count_per_thread = map
                                .next_value_seed(U64VecSeed)
                                .map(Some)
                                .map_err(|e| under(raw::INSTR_COUNT_PER_THREAD, e))?;
                        }
                        raw::IMAGES => {
                            p.images = Some(next_table(&mut map, raw::IMAGES, |r: ImageRow| {
                                let mut img = Image {
                                    id: r.id.0,
                                    load_addr: r.load_addr.0,
                                    size: r.size.0,
                                    ..Image::default()
                                };
                                if let Some(d) = r.data {
                                    img.has_data = true;
                                    img.file_name_id = d.file_name_id;
                                    img.symbols = d.symbols;
                                    img.source_data = d.source_data;
                                    img.basic_blocks = d.basic_blocks;
                                    img.routines = d.routines;
                                }
                                img
                            })?);
                        }
                        raw::EDGES => {
                            let mut edges = Edges::from(fast::<_, Edge>(&mut map, raw::EDGES)?);
                            edges.shrink_to_fit();
                            p.edges = Some(edges);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(p)
            }
        }
        d.deserialize_map(V)
    }
}

struct U64VecSeed;

impl<'de> DeserializeSeed<'de> for U64VecSeed {
    type Value = Vec<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<u64>, D::Error> {
        d.deserialize_seq(U64Seq)
    }
}

#[derive(Default)]
struct ImageData {
    file_name_id: Option<u64>,
    symbols: Option<Vec<Symbol>>,
    source_data: Option<Vec<SourceLine>>,
    basic_blocks: Option<Vec<BasicBlock>>,
    routines: Option<Vec<Routine>>,
}

impl<'de> Deserialize<'de> for ImageData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ImageData, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ImageData;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an image-data object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ImageData, A::Error> {
                let mut img = ImageData::default();
                while let Some(key) = map.next_key::<KeyBuf>()? {
                    match key.as_str() {
                        raw::FILE_NAME_ID => {
                            img.file_name_id = Some(
                                map.next_value::<JsonU64>()
                                    .map_err(|e| under(raw::FILE_NAME_ID, e))?
                                    .0,
                            );
                        }
                        raw::SYMBOLS => {
                            img.symbols = Some(fast(&mut map, raw::SYMBOLS)?);
                        }
                        raw::SOURCE_DATA => {
                            img.source_data = Some(fast(&mut map, raw::SOURCE_DATA)?);
                        }
                        raw::BASIC_BLOCKS => {
                            img.basic_blocks = Some(fast(&mut map, raw::BASIC_BLOCKS)?);
                        }
                        raw::ROUTINES => {
                            img.routines = Some(fast(&mut map, raw::ROUTINES)?);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(img)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_stripped() {
        assert_eq!(
            strip_positions("A: b at line 3 column 7: c at line 3 column 9"),
            "A: b: c"
        );
        assert_eq!(strip_positions("x at line y"), "x at line y");
    }

    #[test]
    fn offsets_from_line_and_column() {
        let s = b"ab\ncd\nef";
        assert_eq!(line_col_to_offset(s, 1, 1), 0);
        assert_eq!(line_col_to_offset(s, 2, 2), 4);
        assert_eq!(line_col_to_offset(s, 3, 1), 6);
        assert_eq!(line_col_to_offset(s, 9, 9), 8);
    }
}
