//! Reading: JSON text (plain, bzip2 or gzip) → [`Dcfg`].
//!
//! One hand-written pull parser ([`trace_core::json::Lexer`]) reads a slice or a stream (through a 64 KiB
//! window), straight into the model: integers exactly from numbers or hex strings, tables by
//! their header rows ([`crate::table`]). Unknown keys and columns are skipped; optional
//! sections may be missing; rows may be short where the trailing columns are optional (spec
//! 1.2.2). Every failure names its JSON path and byte offset.

use std::borrow::Cow;
use std::io::{self, Read};
use std::path::Path;

use trace_core::Offset;
use trace_core::json::{Error as JsonError, Lexer, ReadSource, Seg, SliceSource, Source};

use crate::error::Error;
use crate::model::{Dcfg, Edges, Image, Process};
use crate::raw;
use crate::table::{Row, symbols, table};

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
    /// their magic bytes, and decompressed as a stream).
    ///
    /// Memory: the model (0.75 to 0.85 times the JSON in real and synthetic files, counted
    /// in requested bytes; the allocator adds a few percent) on top of `bytes`, so the peak
    /// with `bytes` counted is 1.75 to 1.85 times the JSON. [`Dcfg::from_path`] needs only
    /// the model.
    ///
    /// # Errors
    ///
    /// Malformed JSON, a value of the wrong type, or a corrupt compressed stream: the error
    /// names the JSON path and the byte offset in the (uncompressed) JSON.
    pub fn parse(bytes: &[u8]) -> Result<Dcfg, Error> {
        match Compression::detect(bytes) {
            Compression::None => parse(SliceSource::new(bytes)),
            _ => Dcfg::from_reader(bytes),
        }
    }

    /// Reads a DCFG from a stream (plain, bzip2 or gzip), parsing as it reads: the JSON text
    /// is never held whole, so memory is the model plus a 64 KiB window (and the
    /// decompressor's state, which does not grow with the input: about 3.5 MiB for bzip2).
    ///
    /// # Errors
    ///
    /// As [`Dcfg::parse`], plus I/O errors.
    pub fn from_reader<R: Read>(mut reader: R) -> Result<Dcfg, Error> {
        // The magic bytes, however the reader hands them out.
        let mut head = [0u8; 3];
        let mut n = 0usize;
        while let Some(free) = head.get_mut(n..).filter(|f| !f.is_empty()) {
            match reader.read(free) {
                Ok(0) => break,
                Ok(k) => n = n.saturating_add(k),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_error("cannot read", n as u64, e)),
            }
        }
        let head = head.get(..n).unwrap_or_default();
        let input = head.chain(reader);
        match Compression::detect(head) {
            Compression::None => parse(ReadSource::new(input)),
            Compression::Bzip2 => parse(ReadSource::new(bzip2::read::MultiBzDecoder::new(input))),
            Compression::Gzip => parse(ReadSource::new(flate2::read::MultiGzDecoder::new(input))),
        }
    }

    /// Reads a DCFG file: `.json`, `.json.bz2` or `.json.gz` (recognised by content, not by
    /// name), parsing as it reads (see [`Dcfg::from_reader`]): the peak memory is the model
    /// plus small buffers.
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
            if let Ok(d) = parse(SliceSource::new(&text)) {
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

/// Parses a whole DCFG.
fn parse<'a, S: Source<'a>>(src: S) -> Result<Dcfg, Error> {
    let mut p = Lexer::new(src);
    dcfg(&mut p)
        .and_then(|d| {
            p.end("the end of the input after the top-level object")
                .map(|()| d)
        })
        .map_err(Error::from)
}

/// Reads the value of object key `key` with `f`, naming the key in failures.
fn under<'a, S: Source<'a>, T>(
    p: &mut Lexer<S>,
    key: &'static str,
    f: impl FnOnce(&mut Lexer<S>) -> Result<T, JsonError>,
) -> Result<T, JsonError> {
    f(p).map_err(|e| e.at_key(key))
}

/// Skips the value of an unknown key, naming the key in failures.
fn skip<'a, S: Source<'a>>(p: &mut Lexer<S>, key: Cow<'static, str>) -> Result<(), JsonError> {
    p.skip_value().map_err(|e| e.at(Seg::Key(key)))
}

/// The top-level object.
fn dcfg<'a, S: Source<'a>>(p: &mut Lexer<S>) -> Result<Dcfg, JsonError> {
    p.expect(
        b'{',
        "a DCFG (a JSON object with MAJOR_VERSION, MINOR_VERSION, PROCESSES, …)",
    )?;
    let mut d = Dcfg::default();
    let (mut major, mut minor) = (None, None);
    let mut first = true;
    let keys = [
        raw::MAJOR_VERSION,
        raw::MINOR_VERSION,
        raw::FILE_NAMES,
        raw::EDGE_TYPES,
        raw::SPECIAL_NODES,
        raw::PROCESSES,
    ];
    while let Some(key) = p.next_key(&mut first, &keys)? {
        match &*key {
            raw::MAJOR_VERSION => major = Some(under(p, raw::MAJOR_VERSION, Lexer::u64)?),
            raw::MINOR_VERSION => minor = Some(under(p, raw::MINOR_VERSION, Lexer::u64)?),
            raw::FILE_NAMES => d.file_names = Some(under(p, raw::FILE_NAMES, table)?),
            raw::EDGE_TYPES => d.edge_types = Some(under(p, raw::EDGE_TYPES, table)?),
            raw::SPECIAL_NODES => d.special_nodes = Some(under(p, raw::SPECIAL_NODES, table)?),
            raw::PROCESSES => d.processes = under(p, raw::PROCESSES, table)?,
            _ => skip(p, key)?,
        }
    }
    let end = p.offset().saturating_sub(1);
    let missing = |key| JsonError::msg(end, format!("missing key {key}"));
    d.major_version = major.ok_or_else(|| missing(raw::MAJOR_VERSION))?;
    d.minor_version = minor.ok_or_else(|| missing(raw::MINOR_VERSION))?;
    Ok(d)
}

impl Row for Process {
    const COLUMNS: &'static [&'static str] = &raw::PROCESS_COLUMNS;
    const REQUIRED: u32 = 0b1;
    const TRANSPARENT: u32 = 0b10;
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.id = p.u64()?,
            _ => {
                self.has_data = !p.null()?;
                if self.has_data {
                    process_data(p, self)?;
                }
            }
        }
        Ok(())
    }
}

/// A `PROCESS_DATA` object.
fn process_data<'a, S: Source<'a>>(p: &mut Lexer<S>, proc: &mut Process) -> Result<(), JsonError> {
    p.expect(
        b'{',
        "a process-data object (`{ \"INSTR_COUNT\" : …, \"IMAGES\" : …, … }`)",
    )?;
    let mut first = true;
    let keys = [
        raw::INSTR_COUNT,
        raw::INSTR_COUNT_PER_THREAD,
        raw::IMAGES,
        raw::EDGES,
    ];
    while let Some(key) = p.next_key(&mut first, &keys)? {
        match &*key {
            raw::INSTR_COUNT => proc.instr_count = Some(under(p, raw::INSTR_COUNT, Lexer::u64)?),
            raw::INSTR_COUNT_PER_THREAD => {
                let mut v = Vec::new();
                under(p, raw::INSTR_COUNT_PER_THREAD, |p| {
                    p.u64_array(|x| v.push(x))
                })?;
                v.shrink_to_fit();
                proc.instr_count_per_thread = Some(v);
            }
            raw::IMAGES => proc.images = Some(under(p, raw::IMAGES, table)?),
            raw::EDGES => proc.edges = Some(Edges::from(under(p, raw::EDGES, table)?)),
            _ => skip(p, key)?,
        }
    }
    Ok(())
}

impl Row for Image {
    const COLUMNS: &'static [&'static str] = &raw::IMAGE_COLUMNS;
    const REQUIRED: u32 = 0b111;
    const TRANSPARENT: u32 = 0b1000;
    fn cell<'a, S: Source<'a>>(&mut self, slot: u8, p: &mut Lexer<S>) -> Result<(), JsonError> {
        match slot {
            0 => self.id = p.u64()?,
            1 => self.load_addr = p.u64()?,
            2 => self.size = p.u64()?,
            _ => {
                self.has_data = !p.null()?;
                if self.has_data {
                    image_data(p, self)?;
                }
            }
        }
        Ok(())
    }
}

/// An `IMAGE_DATA` object.
fn image_data<'a, S: Source<'a>>(p: &mut Lexer<S>, img: &mut Image) -> Result<(), JsonError> {
    p.expect(
        b'{',
        "an image-data object (`{ \"FILE_NAME_ID\" : …, \"SYMBOLS\" : …, … }`)",
    )?;
    let mut first = true;
    let keys = [
        raw::FILE_NAME_ID,
        raw::SYMBOLS,
        raw::SOURCE_DATA,
        raw::BASIC_BLOCKS,
        raw::ROUTINES,
    ];
    while let Some(key) = p.next_key(&mut first, &keys)? {
        match &*key {
            raw::FILE_NAME_ID => img.file_name_id = Some(under(p, raw::FILE_NAME_ID, Lexer::u64)?),
            raw::SYMBOLS => {
                img.symbols = Some(under(p, raw::SYMBOLS, symbols)?);
            }
            raw::SOURCE_DATA => img.source_data = Some(under(p, raw::SOURCE_DATA, table)?),
            raw::BASIC_BLOCKS => img.basic_blocks = Some(under(p, raw::BASIC_BLOCKS, table)?),
            raw::ROUTINES => img.routines = Some(under(p, raw::ROUTINES, table)?),
            _ => skip(p, key)?,
        }
    }
    Ok(())
}
