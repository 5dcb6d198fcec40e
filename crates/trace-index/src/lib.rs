//! The sidecar index (`tracekit index`): a file beside a trace (`FILE.tkidx`) that lists,
//! for every pc, the instructions that executed there, and for every 8-byte memory word,
//! the instructions whose accesses cover some of its bytes, each with a mask of which
//! (so that `mem` knows which bytes no access covers without reading a step); for x64dbg it also keeps the trace's own seek
//! index (full-dump offsets and decoder states), so that seeking needs no index pass.
//!
//! `xref` answers from it with a binary search and a short decode, and the x64dbg steps
//! load its seek index when they open a trace that has one ([`load_seek_index`]).
//!
//! # Layout (little-endian)
//!
//! - a header of [`HEADER_LEN`] bytes: [`MAGIC`], the trace's identity (size, mtime in
//!   nanoseconds, a hash of its first [`HEAD_HASHED`] bytes), the format's name, the
//!   number of steps, the longest access, and seven sections (seek index, pcs' entries and
//!   directory, memory's entries and directory, thread table, runs), each as offset,
//!   length and hash; then a hash of the header itself;
//! - the seek index: the format's bytes
//!   ([`Indexing::seek_index`](trace_model::steps::Indexing::seek_index)), possibly empty;
//! - the timeline of threads (version 3; [`Timeline`]): the runs of consecutive steps of
//!   one thread as `(first step, thread)`, then each thread's run starts, 8-byte words
//!   read on demand; and the thread table (per thread: id, steps, runs, where its starts
//!   begin), read whole;
//! - each list section: entries sorted by key (pc, or address / 8), each entry
//!   `varint(key − previous key)`, `varint(count)`, `varint(bytes)` and the instruction
//!   numbers as varint deltas (the first absolute); a key with many instructions takes
//!   several entries; in the memory list each value is `instruction << 8 | mask`, the
//!   mask's bit `b` saying the access covers byte `b` of the word (version 2; version 1
//!   listed accesses under their first word only). Every [`GROUP`] entries start a group (keys restart from 0) listed
//!   in the section's directory, `(first key, offset)` pairs of 16 bytes after the entries.
//!
//! Building keeps at most [`BuildOptions::run_pairs`] pairs per list in memory: beyond
//! that, sorted runs go to temporary files beside the output and are merged at the end.
//! The file is written under a temporary name and renamed when complete.
//!
//! Reading checks the header, its hash and the section hashes of the seek index and the
//! directories; entries are decoded with bounds checks, so that any bytes give an answer
//! or an error, never a panic.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use trace_core::Offset;

mod threads;
use threads::TimelineBuilder;
pub use threads::{ThreadInfo, Timeline};

use trace_model::output::AtomicFile;
use trace_model::steps::{ScanQuery, SeekIndex, Step, Steps};
use trace_model::{Ctx, Error, Handler, Input};

/// The first bytes of a sidecar index (the last byte is the version).
pub const MAGIC: &[u8; 16] = b"tracekit-index\x00\x03";

/// The file name extension: `FILE.tkidx` beside `FILE`.
pub const EXTENSION: &str = "tkidx";

/// The size of the header.
pub const HEADER_LEN: usize = 248;

/// How many bytes at the start of the trace the identity hashes (its header and first
/// blocks).
pub const HEAD_HASHED: usize = 64 * 1024;

/// Entries per directory group: a lookup decodes at most this many entries before the
/// keys it wants.
pub const GROUP: u64 = 64;

/// The most instruction-number bytes one entry holds (a key with more takes several).
const ENTRY_BYTES: usize = 64 * 1024;

thread_local! {
    /// How many list entries [`Sidecar::covering_near`] decoded on this thread.
    static ENTRY_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many list entries this thread has decoded from sidecars so far: a lookup near
/// instruction `n` of a busy word should decode one or two, whatever the word's count
/// (what the tests of `mem` check).
#[must_use]
pub fn entries_read() -> u64 {
    ENTRY_READS.with(std::cell::Cell::get)
}

/// Where the sidecar of `trace` goes by default: `trace` with `.tkidx` appended.
#[must_use]
pub fn default_path(trace: &Path) -> PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".");
    name.push(EXTENSION);
    PathBuf::from(name)
}

/// FNV-1a, 64 bits: a hash to tell files apart, not a defence.
fn hash(bytes: &[u8]) -> u64 {
    hash_more(0xcbf2_9ce4_8422_2325, bytes)
}

/// [`hash`] of bytes that follow those that hashed to `h`.
fn hash_more(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What identifies the trace an index was made from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The file size.
    pub len: u64,
    /// The modification time, in nanoseconds since the Unix epoch (0 where unknown).
    pub mtime_ns: u64,
    /// A 64-bit FNV-1a hash of the first [`HEAD_HASHED`] bytes.
    pub head_hash: u64,
}

impl Identity {
    /// The identity of the file at `path`, opened for it (a trace not opened otherwise).
    ///
    /// # Errors
    ///
    /// The file cannot be read.
    pub fn of(path: &Path) -> Result<Identity, Error> {
        let context = || format!("cannot read {}", path.display());
        let file = File::open(path).map_err(|e| Error::io(context(), e))?;
        let meta = file.metadata().map_err(|e| Error::io(context(), e))?;
        Identity::from_parts(&meta, file).map_err(|e| Error::io(context(), e))
    }

    /// The identity of the trace `input` reads, through the handle it was opened with:
    /// the bytes the index describes, even when the path names another file by now.
    ///
    /// # Errors
    ///
    /// The input is not an uncompressed regular file (`Unsupported`), or it cannot be read.
    pub fn of_input(input: &Input) -> Result<Identity, Error> {
        let (Some(file), Some(reader)) = (input.file(), input.file_reader()) else {
            return Err(Error::Unsupported(format!(
                "`tracekit index` needs an uncompressed trace file, not {}",
                input.name()
            )));
        };
        let context = || format!("cannot read {}", input.name());
        let meta = file.metadata().map_err(|e| Error::io(context(), e))?;
        Identity::from_parts(&meta, reader).map_err(|e| Error::io(context(), e))
    }

    /// The identity of a file from its metadata and a reader from its first byte.
    fn from_parts(meta: &std::fs::Metadata, file: impl Read) -> io::Result<Identity> {
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut head = Vec::with_capacity(HEAD_HASHED);
        file.take(HEAD_HASHED as u64).read_to_end(&mut head)?;
        Ok(Identity {
            len: meta.len(),
            mtime_ns,
            head_hash: hash(&head),
        })
    }
}

/// One section of the file: where it is and the hash of its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Section {
    offset: u64,
    len: u64,
    hash: u64,
}

/// The header of a sidecar index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The trace it was made from.
    pub identity: Identity,
    /// The format's name (`x64dbg`, `gdb-tfile`, …).
    pub format: String,
    /// The steps (instructions, frames) indexed.
    pub steps: u64,
    /// The longest memory access, in bytes (a lookup widens its range by it).
    pub max_len: u64,
    seek: Section,
    pcs: ListSection,
    mem: ListSection,
    /// The thread table ([`threads`]), read whole and checked at open.
    threads: Section,
    /// The runs of the timeline, read on demand.
    runs: Section,
}

/// How many sections the header lists.
const SECTIONS: usize = 7;

/// A list section: its entries and their directory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ListSection {
    entries: Section,
    dir: Section,
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

impl Header {
    /// The sections, in the header's order.
    fn sections(&self) -> [Section; SECTIONS] {
        [
            self.seek,
            self.pcs.entries,
            self.pcs.dir,
            self.mem.entries,
            self.mem.dir,
            self.threads,
            self.runs,
        ]
    }

    fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        let mut words = vec![
            self.identity.len,
            self.identity.mtime_ns,
            self.identity.head_hash,
            self.steps,
            self.max_len,
        ];
        for s in self.sections() {
            words.extend([s.offset, s.len, s.hash]);
        }
        let mut buf = Vec::with_capacity(HEADER_LEN);
        buf.extend_from_slice(MAGIC);
        let mut name = [0u8; 16];
        for (d, s) in name.iter_mut().zip(self.format.bytes()) {
            *d = s;
        }
        buf.extend_from_slice(&name);
        for w in words {
            buf.extend_from_slice(&w.to_le_bytes());
        }
        let h = hash(&buf);
        buf.extend_from_slice(&h.to_le_bytes());
        for (d, s) in out.iter_mut().zip(&buf) {
            *d = *s;
        }
        out
    }

    /// The header at the start of `bytes`, checked (magic, hash, sections inside
    /// `file_len`), or why it is not one.
    fn parse(bytes: &[u8], file_len: u64) -> Result<Header, String> {
        if bytes.get(..16) != Some(MAGIC.as_slice()) {
            return Err("not a tracekit index (bad magic or version)".into());
        }
        let body = bytes
            .get(..HEADER_LEN - 8)
            .ok_or("the header is cut short")?;
        if u64_at(bytes, HEADER_LEN - 8) != Some(hash(body)) {
            return Err("the header is damaged (hash mismatch)".into());
        }
        let name = bytes.get(16..32).unwrap_or_default();
        let format = String::from_utf8_lossy(name)
            .trim_end_matches('\0')
            .to_owned();
        let words: Vec<u64> = body
            .get(32..)
            .unwrap_or_default()
            .chunks_exact(8)
            .map(|c| u64_at(c, 0).unwrap_or(0))
            .collect();
        let word = |k: usize| words.get(k).copied().unwrap_or(0);
        let sections: Vec<Section> = words
            .get(5..)
            .unwrap_or_default()
            .chunks_exact(3)
            .map(|c| match *c {
                [offset, len, hash] => Section { offset, len, hash },
                _ => Section::default(),
            })
            .collect();
        let section = |k: usize| sections.get(k).copied().unwrap_or_default();
        let header = Header {
            identity: Identity {
                len: word(0),
                mtime_ns: word(1),
                head_hash: word(2),
            },
            format,
            steps: word(3),
            max_len: word(4),
            seek: section(0),
            pcs: ListSection {
                entries: section(1),
                dir: section(2),
            },
            mem: ListSection {
                entries: section(3),
                dir: section(4),
            },
            threads: section(5),
            runs: section(6),
        };
        for s in header.sections() {
            if s.offset.checked_add(s.len).is_none_or(|end| end > file_len)
                || s.offset < HEADER_LEN as u64
            {
                return Err("a section lies outside the file".into());
            }
        }
        if !header.pcs.dir.len.is_multiple_of(16) || !header.mem.dir.len.is_multiple_of(16) {
            return Err("a directory is not a whole number of entries".into());
        }
        Ok(header)
    }
}

/// Rewrites the hashes of the index in `bytes` (each section's that lies inside it, then the
/// header's) to match what they hash, leaving everything else as it is: so that a fuzzer's
/// changes to an index reach the decoding of its sections and lists instead of stopping at
/// the hash checks, and tests can damage a list without its hash giving it away. Does
/// nothing to bytes that do not start with the header's magic.
pub fn rehash(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN || bytes.get(..16) != Some(MAGIC.as_slice()) {
        return;
    }
    let word_at = |k: usize| 32usize.saturating_add(k.saturating_mul(8));
    for section in 0..SECTIONS {
        let first = 5usize.saturating_add(section.saturating_mul(3));
        let (Some(offset), Some(len)) = (
            u64_at(bytes, word_at(first)),
            u64_at(bytes, word_at(first.saturating_add(1))),
        ) else {
            continue;
        };
        let range = usize::try_from(offset)
            .ok()
            .zip(usize::try_from(offset.saturating_add(len)).ok());
        let Some(h) = range.and_then(|(a, b)| bytes.get(a..b)).map(hash) else {
            continue;
        };
        let at = word_at(first.saturating_add(2));
        if let Some(w) = bytes.get_mut(at..at.saturating_add(8)) {
            w.copy_from_slice(&h.to_le_bytes());
        }
    }
    let h = hash(bytes.get(..HEADER_LEN - 8).unwrap_or_default());
    if let Some(w) = bytes.get_mut(HEADER_LEN - 8..HEADER_LEN) {
        w.copy_from_slice(&h.to_le_bytes());
    }
}

fn damaged(path: &Path, what: impl std::fmt::Display, offset: Option<u64>) -> Error {
    Error::Invalid {
        message: format!("index {}: {what}", path.display()),
        offset: offset.map(Offset),
        path: None,
    }
}

/// An open sidecar index: a file, or any bytes for tests ([`Sidecar::read`]).
#[derive(Debug)]
pub struct Sidecar<R = File> {
    path: PathBuf,
    file: R,
    header: Header,
    pcs_dir: Vec<(u64, u64)>,
    mem_dir: Vec<(u64, u64)>,
    /// The thread table's bytes (checked).
    thread_table: Vec<u8>,
}

/// Why a sidecar was not used.
#[derive(Debug)]
pub enum Unusable {
    /// There is none at the path.
    Missing,
    /// It was made from another trace or another version of this one.
    Stale(String),
    /// It is not a readable index.
    Damaged(Error),
}

impl Unusable {
    /// The note for stderr, naming the sidecar, or `None` when there was none where none
    /// was asked for (`explicit`: the user named the file).
    #[must_use]
    pub fn note(&self, path: &Path, explicit: bool) -> Option<String> {
        // A damaged one's error names the file itself.
        match self {
            Unusable::Missing if explicit => Some(format!(
                "note: there is no index at {}; reading the trace without it",
                path.display()
            )),
            Unusable::Missing => None,
            Unusable::Stale(why) => Some(format!(
                "note: ignoring the index {}: {why}; `tracekit index --force` rebuilds it",
                path.display()
            )),
            Unusable::Damaged(e) => Some(format!(
                "note: ignoring the sidecar: {e}; `tracekit index --force` rebuilds it"
            )),
        }
    }
}

impl Sidecar<File> {
    /// Opens the index at `path` for the trace of identity `trace` (see
    /// [`Identity::of_input`]) read as `format`: checks its header, that it was made from
    /// this trace (size, mtime, head hash) and its directories.
    ///
    /// # Errors
    ///
    /// Why it cannot be used.
    pub fn open(path: &Path, trace: &Identity, format: &str) -> Result<Sidecar, Unusable> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Unusable::Missing),
            Err(e) => {
                return Err(Unusable::Damaged(Error::io(
                    format!("cannot open {}", path.display()),
                    e,
                )));
            }
        };
        let file_len = file
            .metadata()
            .map_err(|e| {
                Unusable::Damaged(Error::io(format!("cannot read {}", path.display()), e))
            })?
            .len();
        let mut head = [0u8; 16];
        let got = read_up_to(&mut &file, &mut head).map_err(|e| {
            Unusable::Damaged(Error::io(format!("cannot read {}", path.display()), e))
        })?;
        let (version, ours) = (head[15], MAGIC[15]);
        if got == 16 && head.get(..15) == MAGIC.get(..15) && version != ours {
            return Err(Unusable::Stale(format!(
                "it is of index format {version}, not {ours} (written by another version of tracekit)"
            )));
        }
        let mut file = file;
        file.seek(SeekFrom::Start(0)).map_err(|e| {
            Unusable::Damaged(Error::io(format!("cannot read {}", path.display()), e))
        })?;
        let sidecar = Sidecar::read(path, file, file_len).map_err(Unusable::Damaged)?;
        if sidecar.header.format != format {
            return Err(Unusable::Stale(format!(
                "it was made for a {} trace, not {format}",
                sidecar.header.format
            )));
        }
        if sidecar.header.identity != *trace {
            return Err(Unusable::Stale(
                "the trace has changed since (size, time or first bytes differ)".into(),
            ));
        }
        Ok(sidecar)
    }
}

impl Sidecar<File> {
    /// The timeline of the trace's threads ([`Timeline`]), over the sidecar's file opened
    /// again.
    ///
    /// # Errors
    ///
    /// The file cannot be opened again.
    pub fn timeline(&self) -> Result<Timeline, Error> {
        let file = File::open(&self.path)
            .map_err(|e| Error::io(format!("cannot open {}", self.path.display()), e))?;
        self.timeline_in(file)
    }
}

impl<R: Read + Seek> Sidecar<R> {
    /// Reads the header and directories of the index in `file` (of `file_len` bytes;
    /// `path` names it in messages), without checking which trace it belongs to.
    ///
    /// # Errors
    ///
    /// It is not a readable index.
    pub fn read(path: &Path, mut file: R, file_len: u64) -> Result<Sidecar<R>, Error> {
        let mut head = [0u8; HEADER_LEN];
        let got = read_up_to(&mut file, &mut head)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        let header = Header::parse(head.get(..got).unwrap_or_default(), file_len)
            .map_err(|why| damaged(path, why, Some(0)))?;
        let mut sidecar = Sidecar {
            path: path.to_owned(),
            file,
            pcs_dir: Vec::new(),
            mem_dir: Vec::new(),
            thread_table: Vec::new(),
            header,
        };
        sidecar.pcs_dir = sidecar.directory(sidecar.header.pcs)?;
        sidecar.mem_dir = sidecar.directory(sidecar.header.mem)?;
        sidecar.thread_table = sidecar.section(sidecar.header.threads)?;
        // Checked now, so that a damaged table is a damaged sidecar.
        sidecar.timeline_in(io::empty())?;
        Ok(sidecar)
    }

    /// The header.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The path of the index.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The bytes of a section, checked against its hash. The section lies inside the
    /// file (checked with the header), so its length is bounded by the file's.
    fn section(&mut self, s: Section) -> Result<Vec<u8>, Error> {
        let path = self.path.clone();
        let mut bytes = vec![
            0u8;
            usize::try_from(s.len).map_err(|_| damaged(
                &path,
                "a section is too big",
                Some(s.offset)
            ))?
        ];
        self.file
            .seek(SeekFrom::Start(s.offset))
            .and_then(|_| self.file.read_exact(&mut bytes))
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        if hash(&bytes) != s.hash {
            return Err(damaged(
                &path,
                "a section is damaged (hash mismatch)",
                Some(s.offset),
            ));
        }
        Ok(bytes)
    }

    fn directory(&mut self, list: ListSection) -> Result<Vec<(u64, u64)>, Error> {
        let bytes = self.section(list.dir)?;
        let dir: Vec<(u64, u64)> = bytes
            .chunks_exact(16)
            .map(|c| (u64_at(c, 0).unwrap_or(0), u64_at(c, 8).unwrap_or(0)))
            .collect();
        let sorted = dir.windows(2).all(|w| match w {
            [a, b] => a.0 <= b.0 && a.1 < b.1,
            _ => true,
        });
        if !sorted || dir.iter().any(|&(_, off)| off >= list.entries.len) {
            return Err(damaged(
                &self.path,
                "a directory is out of order",
                Some(list.dir.offset),
            ));
        }
        Ok(dir)
    }

    /// The timeline of the trace's threads ([`Timeline`]), reading its runs from `file`
    /// (this sidecar's bytes, opened again: the timeline reads on its own).
    ///
    /// # Errors
    ///
    /// The thread table does not describe the runs section.
    pub fn timeline_in<F: Read + Seek>(&self, file: F) -> Result<Timeline<F>, Error> {
        Timeline::new(
            &self.path,
            file,
            self.header.steps,
            &self.thread_table,
            self.header.runs.offset,
            self.header.runs.len,
        )
    }

    /// The format's seek index kept in the sidecar (empty when it has none).
    ///
    /// # Errors
    ///
    /// The section cannot be read or is damaged.
    pub fn seek_index(&mut self) -> Result<Vec<u8>, Error> {
        let s = self.header.seek;
        self.section(s)
    }

    /// The instructions that executed at `pc`, in order.
    ///
    /// # Errors
    ///
    /// The section cannot be read or is damaged.
    pub fn executions(&mut self, pc: u64) -> Result<Vec<u64>, Error> {
        let (list, dir) = (self.header.pcs, std::mem::take(&mut self.pcs_dir));
        let mut found = Vec::new();
        let looked = self.lookup(list, &dir, pc, pc, 0, &mut |_, i| found.push(i));
        self.pcs_dir = dir;
        looked.map(|()| sorted(found))
    }

    /// The instructions with a memory access that covers a byte of `start..end`, in order
    /// and each once.
    ///
    /// # Errors
    ///
    /// The section cannot be read or is damaged.
    pub fn accesses(&mut self, start: u64, end: u64) -> Result<Vec<u64>, Error> {
        let mut found = Vec::new();
        self.accesses_each(start, end, &mut |i| found.push(i))?;
        Ok(sorted(found))
    }

    /// Calls `visit` with the instructions [`Sidecar::accesses`] lists, in no particular
    /// order and possibly more than once, holding none of them: for a caller that keeps
    /// only a few of a long list (`mem`: the ones nearest an instruction).
    ///
    /// # Errors
    ///
    /// The section cannot be read or is damaged.
    pub fn accesses_each(
        &mut self,
        start: u64,
        end: u64,
        visit: &mut dyn FnMut(u64),
    ) -> Result<(), Error> {
        self.covering_each(start, end, &mut |_, i, _| visit(i))
    }

    /// Calls `visit` with each access that covers a byte of `start..end`, one call per
    /// 8-byte word it covers there: the word's first address, the instruction, and which
    /// of the word's bytes (bit `b` for address `word + b`) it covers inside the range.
    /// In word order, then instruction order.
    ///
    /// # Errors
    ///
    /// The section cannot be read or is damaged.
    pub fn covering_each(
        &mut self,
        start: u64,
        end: u64,
        visit: &mut dyn FnMut(u64, u64, u8),
    ) -> Result<(), Error> {
        if start >= end {
            return Ok(());
        }
        let (lo, hi) = (start >> 3, end.saturating_sub(1) >> 3);
        let (list, dir) = (self.header.mem, std::mem::take(&mut self.mem_dir));
        let found = self.lookup(list, &dir, lo, hi, MASK_BITS, &mut |key, v| {
            let word = key << 3;
            let mask = (v & 0xff) as u8 & word_mask(word, start, end);
            if mask != 0 {
                visit(word, v >> MASK_BITS, mask);
            }
        });
        self.mem_dir = dir;
        found
    }

    /// Calls `visit` as [`Sidecar::covering_each`] does, but only with the accesses `mem`
    /// needs: for every byte of `start..end`, the last access below `limit` that covers
    /// it, and where there is none, the first at or after `limit` (each call's mask then
    /// holds only the bytes it answers). A word's list is read from its last entry below
    /// `limit` backwards, and forwards from there for the bytes still open, so that the
    /// work is a few entries per word however long the trace, rather than its whole list.
    ///
    /// # Errors
    ///
    /// The section cannot be read or is damaged.
    pub fn covering_near(
        &mut self,
        start: u64,
        end: u64,
        limit: u64,
        visit: &mut dyn FnMut(u64, u64, u8),
    ) -> Result<(), Error> {
        if start >= end {
            return Ok(());
        }
        let (lo, hi) = (start >> 3, end.saturating_sub(1) >> 3);
        let (list, dir) = (self.header.mem, std::mem::take(&mut self.mem_dir));
        let heads = self.entry_heads(list, &dir, lo, hi);
        self.mem_dir = dir;
        let heads = heads?;
        let (mut buf, mut values) = (Vec::new(), Vec::new());
        for same in heads.chunk_by(|a, b| a.key == b.key) {
            let Some(word) = same.first().map(|h| h.key << 3) else {
                continue;
            };
            let wanted = word_mask(word, start, end);
            // Values ascend (instruction, then mask), so the entries holding values below
            // `limit` come first.
            let below = same.partition_point(|h| h.first >> MASK_BITS < limit);
            let mut found = 0u8;
            for h in same.get(..below).unwrap_or_default().iter().rev() {
                self.entry_values(h, MASK_BITS, &mut buf, &mut values)?;
                for &v in &values {
                    let (i, mask) = (v >> MASK_BITS, (v & 0xff) as u8 & wanted);
                    if i < limit && mask != 0 {
                        visit(word, i, mask);
                        found |= mask;
                    }
                }
                if found == wanted {
                    break;
                }
            }
            let mut open = wanted & !found;
            for h in same.get(below.saturating_sub(1)..).unwrap_or_default() {
                if open == 0 {
                    break;
                }
                self.entry_values(h, MASK_BITS, &mut buf, &mut values)?;
                for &v in &values {
                    let (i, mask) = (v >> MASK_BITS, (v & 0xff) as u8 & open);
                    if i >= limit && mask != 0 {
                        visit(word, i, mask);
                        open &= !mask;
                    }
                }
            }
        }
        Ok(())
    }

    /// The heads of the entries of the keys `lo..=hi` of `list` (key, value count, where
    /// the values lie and the first of them), read without their values.
    fn entry_heads(
        &mut self,
        list: ListSection,
        dir: &[(u64, u64)],
        lo: u64,
        hi: u64,
    ) -> Result<Vec<EntryHead>, Error> {
        // The last group that starts below `lo` may end with `lo`'s first entries.
        let g = dir.partition_point(|&(k, _)| k < lo).saturating_sub(1);
        let Some(&(_, mut pos)) = dir.get(g) else {
            return Ok(Vec::new());
        };
        let path = self.path.clone();
        let bad = |at: u64| damaged(&path, "an entry is damaged", Some(at));
        let io = |e| Error::io(format!("cannot read {}", path.display()), e);
        let (mut key, mut entry) = (0u64, 0u64);
        let mut heads = Vec::new();
        // Three varints of the head and the first value's.
        let mut head = [0u8; 40];
        while pos < list.entries.len {
            let at = list.entries.offset.saturating_add(pos);
            self.file.seek(SeekFrom::Start(at)).map_err(io)?;
            let room = usize::try_from(list.entries.len.saturating_sub(pos))
                .map_or(head.len(), |r| r.min(head.len()));
            let got =
                read_up_to(&mut self.file, head.get_mut(..room).unwrap_or_default()).map_err(io)?;
            let mut cur = head.get(..got).unwrap_or_default();
            let delta = take_varint(&mut cur).ok_or_else(|| bad(at))?;
            // Each group's first entry has its key whole.
            key = if entry.is_multiple_of(GROUP) {
                delta
            } else {
                key.checked_add(delta).ok_or_else(|| bad(at))?
            };
            entry = entry.saturating_add(1);
            let count = take_varint(&mut cur).ok_or_else(|| bad(at))?;
            let bytes = take_varint(&mut cur).ok_or_else(|| bad(at))?;
            if key > hi {
                break;
            }
            let body = pos.saturating_add(got.saturating_sub(cur.len()) as u64);
            let next = body.saturating_add(bytes);
            if bytes > ENTRY_BYTES as u64 || count > bytes || count == 0 || next > list.entries.len
            {
                return Err(bad(at));
            }
            if key >= lo {
                let first = take_varint(&mut cur).ok_or_else(|| bad(at))?;
                heads.push(EntryHead {
                    key,
                    count,
                    at: list.entries.offset.saturating_add(body),
                    len: bytes,
                    first,
                });
            }
            pos = next;
        }
        Ok(heads)
    }

    /// The values of the entry `h`, into `values` (`buf` holds its bytes); a value's
    /// instruction is its bits above `shift`.
    fn entry_values(
        &mut self,
        h: &EntryHead,
        shift: u32,
        buf: &mut Vec<u8>,
        values: &mut Vec<u64>,
    ) -> Result<(), Error> {
        let path = self.path.clone();
        let bad = || damaged(&path, "an entry is damaged", Some(h.at));
        buf.resize(usize::try_from(h.len).unwrap_or(0), 0);
        self.file
            .seek(SeekFrom::Start(h.at))
            .and_then(|_| self.file.read_exact(buf))
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        ENTRY_READS.with(|r| r.set(r.get().saturating_add(1)));
        values.clear();
        let mut cur = buf.as_slice();
        let mut v = 0u64;
        for n in 0..h.count {
            let d = take_varint(&mut cur).ok_or_else(bad)?;
            v = if n == 0 {
                d
            } else {
                v.checked_add(d).ok_or_else(bad)?
            };
            if v >> shift >= self.header.steps {
                return Err(bad());
            }
            values.push(v);
        }
        Ok(())
    }

    /// Whether the sidecar keeps the format's seek index, so that
    /// [`Steps::seek`] goes straight to a step rather than
    /// reading up to it.
    #[must_use]
    pub fn has_seek_index(&self) -> bool {
        self.header.seek.len > 0
    }

    /// Calls `visit` with the values of the keys `lo..=hi` (in key order); a value's
    /// instruction is its bits above `shift`.
    fn lookup(
        &mut self,
        list: ListSection,
        dir: &[(u64, u64)],
        lo: u64,
        hi: u64,
        shift: u32,
        visit: &mut dyn FnMut(u64, u64),
    ) -> Result<(), Error> {
        let heads = self.entry_heads(list, dir, lo, hi)?;
        let (mut buf, mut values) = (Vec::new(), Vec::new());
        for h in &heads {
            self.entry_values(h, shift, &mut buf, &mut values)?;
            for &v in &values {
                visit(h.key, v);
            }
        }
        Ok(())
    }
}

/// An entry of a list, as [`Sidecar::entry_heads`] finds it before reading its values.
#[derive(Clone, Copy, Debug)]
struct EntryHead {
    key: u64,
    count: u64,
    /// The file offset of its values.
    at: u64,
    /// Their size in bytes.
    len: u64,
    /// The first of them.
    first: u64,
}

/// The bits of the memory list's values that hold a byte mask (below the instruction).
const MASK_BITS: u32 = 8;

/// The bytes of the word at `word` inside `start..end`: bit `b` for `word + b`.
fn word_mask(word: u64, start: u64, end: u64) -> u8 {
    (0..8u8).fold(0, |m, b| {
        let a = word.saturating_add(u64::from(b));
        if (start..end).contains(&a) {
            m | (1 << b)
        } else {
            m
        }
    })
}

/// The instruction numbers a lookup found, in order and each once.
fn sorted(mut found: Vec<u64>) -> Vec<u64> {
    found.sort_unstable();
    found.dedup();
    found
}

/// How far ahead of the current step a candidate is read to rather than sought.
const READ_AHEAD: u64 = 4096;

/// Reads chosen steps of a stream, in increasing order, as a sidecar lookup lists them:
/// by reading on when the next is near, by a seek when it is far (or behind).
#[derive(Clone, Copy, Debug)]
pub struct Visit {
    /// The step `next_step` gives next, where known.
    next: Option<u64>,
}

impl Visit {
    /// A visit of steps that are at their start.
    #[must_use]
    pub fn new() -> Visit {
        Visit { next: Some(0) }
    }

    /// Calls `on_step` with step `i`.
    ///
    /// # Errors
    ///
    /// `i` is past the end, a read error on the way, or `on_step`'s error.
    pub fn step(
        &mut self,
        steps: &mut dyn Steps,
        i: u64,
        on_step: &mut dyn FnMut(&Step) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if self
            .next
            .is_none_or(|n| i < n || i.saturating_sub(n) > READ_AHEAD)
        {
            // Unknown until the seek lands.
            self.next = None;
            steps.seek(i)?;
            self.next = Some(i);
        }
        loop {
            let Some(step) = steps.next_step() else {
                return Err(trace_model::steps::past_end(i, self.next.unwrap_or(0)));
            };
            let step = step?;
            self.next = step.i.checked_add(1);
            if step.i >= i {
                return if step.i == i { on_step(step) } else { Ok(()) };
            }
        }
    }
}

impl Default for Visit {
    fn default() -> Visit {
        Visit::new()
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..) {
        if rest.is_empty() {
            break;
        }
        match r.read(rest)? {
            0 => break,
            n => got = got.saturating_add(n),
        }
    }
    Ok(got)
}

fn put_varint(out: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

fn take_varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut x = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        x |= u64::from(b & 0x7f).checked_shl(shift)?;
        if b < 0x80 {
            return Some(x);
        }
    }
    None
}

fn read_varint(r: &mut impl Read) -> io::Result<u64> {
    let mut x = 0u64;
    for shift in (0..64).step_by(7) {
        let mut b = [0u8];
        r.read_exact(&mut b)?;
        let [b] = b;
        x |= u64::from(b & 0x7f)
            .checked_shl(shift)
            .ok_or(io::ErrorKind::InvalidData)?;
        if b < 0x80 {
            return Ok(x);
        }
    }
    Err(io::ErrorKind::InvalidData.into())
}

/// Writes one list section: sorted `(key, instruction)` pairs in, entries and directory
/// out.
struct ListWriter<W> {
    out: W,
    pos: u64,
    hash: u64,
    dir: Vec<u8>,
    entries: u64,
    prev_key: u64,
    key: Option<u64>,
    count: u64,
    prev_i: u64,
    list: Vec<u8>,
    scratch: Vec<u8>,
}

impl<W: Write> ListWriter<W> {
    fn new(out: W) -> Self {
        ListWriter {
            out,
            pos: 0,
            hash: 0xcbf2_9ce4_8422_2325,
            dir: Vec::new(),
            entries: 0,
            prev_key: 0,
            key: None,
            count: 0,
            prev_i: 0,
            list: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn push(&mut self, key: u64, i: u64) -> io::Result<()> {
        if self.key != Some(key) || self.list.len() >= ENTRY_BYTES - 10 {
            self.flush_entry()?;
            self.key = Some(key);
            put_varint(&mut self.list, i);
        } else {
            put_varint(&mut self.list, i.saturating_sub(self.prev_i));
        }
        self.count = self.count.saturating_add(1);
        self.prev_i = i;
        Ok(())
    }

    fn flush_entry(&mut self) -> io::Result<()> {
        let Some(key) = self.key.take() else {
            return Ok(());
        };
        let delta = if self.entries.is_multiple_of(GROUP) {
            self.dir.extend_from_slice(&key.to_le_bytes());
            self.dir.extend_from_slice(&self.pos.to_le_bytes());
            key
        } else {
            key.saturating_sub(self.prev_key)
        };
        self.scratch.clear();
        put_varint(&mut self.scratch, delta);
        put_varint(&mut self.scratch, self.count);
        put_varint(&mut self.scratch, self.list.len() as u64);
        self.scratch.extend_from_slice(&self.list);
        self.out.write_all(&self.scratch)?;
        for &b in &self.scratch {
            self.hash = (self.hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.pos = self.pos.saturating_add(self.scratch.len() as u64);
        self.entries = self.entries.saturating_add(1);
        self.prev_key = key;
        self.count = 0;
        self.list.clear();
        Ok(())
    }
}

/// Pairs of one list, sorted in memory and spilled to sorted runs on disk.
struct Runs {
    pairs: Vec<(u64, u64)>,
    limit: usize,
    files: Vec<PathBuf>,
    stem: PathBuf,
    total: u64,
}

impl Runs {
    fn new(stem: PathBuf, limit: usize) -> Runs {
        Runs {
            pairs: Vec::new(),
            limit: limit.max(1),
            files: Vec::new(),
            stem,
            total: 0,
        }
    }

    fn push(&mut self, key: u64, i: u64) -> io::Result<()> {
        if self.pairs.len() >= self.limit {
            self.spill()?;
        }
        self.pairs.push((key, i));
        self.total = self.total.saturating_add(1);
        Ok(())
    }

    /// Sorts the pairs in memory and writes them as a run.
    fn spill(&mut self) -> io::Result<()> {
        self.pairs.sort_unstable();
        self.pairs.dedup();
        let mut path = self.stem.clone().into_os_string();
        path.push(format!(".run{}", self.files.len()));
        let path = PathBuf::from(path);
        let mut w = BufWriter::new(File::create(&path)?);
        self.files.push(path);
        let mut buf = Vec::new();
        let mut prev = (0u64, 0u64);
        for &(k, i) in &self.pairs {
            buf.clear();
            put_varint(&mut buf, k.wrapping_sub(prev.0));
            put_varint(
                &mut buf,
                i.wrapping_sub(if k == prev.0 { prev.1 } else { 0 }),
            );
            w.write_all(&buf)?;
            prev = (k, i);
        }
        w.flush()?;
        self.pairs.clear();
        Ok(())
    }

    /// Every pair in order, each once, into `out`: from memory alone, or merged from the
    /// runs.
    fn drain_into<W: Write>(&mut self, out: &mut ListWriter<W>) -> io::Result<()> {
        self.drain(&mut |k, i| out.push(k, i))?;
        out.flush_entry()
    }

    /// Calls `out` with every pair in order, each once.
    fn drain(&mut self, out: &mut dyn FnMut(u64, u64) -> io::Result<()>) -> io::Result<()> {
        if self.files.is_empty() {
            self.pairs.sort_unstable();
            self.pairs.dedup();
            for &(k, i) in &self.pairs {
                out(k, i)?;
            }
            self.pairs = Vec::new();
            return Ok(());
        }
        if !self.pairs.is_empty() {
            self.spill()?;
        }
        let mut readers = Vec::new();
        for f in &self.files {
            readers.push(RunReader {
                r: BufReader::new(File::open(f)?),
                prev: (0, 0),
            });
        }
        let mut heap = BinaryHeap::new();
        for (n, r) in readers.iter_mut().enumerate() {
            if let Some(p) = r.next()? {
                heap.push(Reverse((p, n)));
            }
        }
        let mut last = None;
        while let Some(Reverse((p, n))) = heap.pop() {
            if last != Some(p) {
                out(p.0, p.1)?;
                last = Some(p);
            }
            if let Some(r) = readers.get_mut(n)
                && let Some(q) = r.next()?
            {
                heap.push(Reverse((q, n)));
            }
        }
        Ok(())
    }
}

impl Drop for Runs {
    fn drop(&mut self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

struct RunReader {
    r: BufReader<File>,
    prev: (u64, u64),
}

impl RunReader {
    fn next(&mut self) -> io::Result<Option<(u64, u64)>> {
        let mut first = [0u8];
        if self.r.read(&mut first)? == 0 {
            return Ok(None);
        }
        let mut chained = first.as_slice().chain(&mut self.r);
        let dk = read_varint(&mut chained)?;
        let di = read_varint(&mut chained)?;
        let k = self.prev.0.wrapping_add(dk);
        let i = if dk == 0 {
            self.prev.1.wrapping_add(di)
        } else {
            di
        };
        self.prev = (k, i);
        Ok(Some((k, i)))
    }
}

/// How [`build`] works.
#[derive(Clone)]
pub struct BuildOptions {
    /// `(key, instruction)` pairs kept in memory per list before a sorted run is written
    /// to disk (16 bytes each).
    pub run_pairs: usize,
    /// The seek index that [`Indexing::seek_index`](trace_model::steps::Indexing::seek_index) gave for this trace (a caller that made
    /// it first, to seek early, as `tracekit serve` does): kept as it is, instead of a
    /// second index pass. Bytes the format does not take ([`Indexing::use_seek_index`](trace_model::steps::Indexing::use_seek_index)) are
    /// ignored and the index is built.
    pub seek_index: Option<SeekIndex>,
    /// Called with the number of steps indexed so far, every [`PROGRESS_STEPS`] steps and
    /// once at the end of the pass over the steps (the sorted lists are written after it).
    pub progress: Option<Arc<dyn Fn(u64) + Send + Sync>>,
}

/// How often [`BuildOptions::progress`] is called, in steps.
pub const PROGRESS_STEPS: u64 = 4096;

impl Default for BuildOptions {
    /// 2 Mi pairs per list: 64 MiB for both; the seek index built; no progress calls.
    fn default() -> Self {
        BuildOptions {
            run_pairs: 2 << 20,
            seek_index: None,
            progress: None,
        }
    }
}

impl std::fmt::Debug for BuildOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildOptions")
            .field("run_pairs", &self.run_pairs)
            .field("seek_index", &self.seek_index)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// What [`build`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// Where.
    pub path: PathBuf,
    /// The steps indexed.
    pub steps: u64,
    /// The trace's size.
    pub trace_bytes: u64,
    /// The index's size.
    pub index_bytes: u64,
    /// The size of the seek index kept in it.
    pub seek_bytes: u64,
    /// `(pc, instruction)` pairs.
    pub executions: u64,
    /// `(address word, instruction)` pairs: an access is listed under every word it
    /// covers.
    pub accesses: u64,
}

/// Builds the sidecar index of the trace in `input` (which must be a file: its identity
/// is kept) at `out` (default: [`default_path`]). One pass over the steps, plus the
/// format's own index pass for its seek index (unless [`BuildOptions::seek_index`] gives
/// it); written under a temporary name beside `out` and renamed.
///
/// # Errors
///
/// The input is not a file or has no instruction stream (`Unsupported`), the trace is
/// damaged (nothing is written), or the index cannot be written.
pub fn build(
    handler: &dyn Handler,
    input: &mut Input,
    ctx: &mut Ctx<'_>,
    out: Option<&Path>,
    options: BuildOptions,
) -> Result<Built, Error> {
    let identity = Identity::of_input(input)?;
    let trace = input
        .path()
        .map(Path::to_owned)
        .ok_or_else(|| Error::Unsupported(format!("{} has no path", input.name())))?;
    let out = out.map_or_else(|| default_path(&trace), Path::to_owned);
    let writable = |e: io::Error| {
        let dir = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let hint = if e.kind() == io::ErrorKind::PermissionDenied {
            format!(
                " ({} is not writable: use -o PATH to put the index elsewhere)",
                dir.display()
            )
        } else {
            String::new()
        };
        Error::io(format!("cannot write the index {}{hint}", out.display()), e)
    };
    // Check that the place is writable before the long pass.
    let mut file = AtomicFile::create(&out).map_err(writable)?;
    // The old index (its seek index saves a pass) is being replaced: no note about it.
    let mut steps = steps_without_notes(handler, input, ctx)?;
    let seek = match options.seek_index {
        Some(index) if steps.use_seek_index(&index) => index,
        _ => SeekIndex::new(steps.seek_index()?.unwrap_or_default()),
    };
    let stem = |what: &str| {
        let mut name = file.temp_path().as_os_str().to_owned();
        name.push(what);
        PathBuf::from(name)
    };
    let mut pcs = Runs::new(stem(".pcs"), options.run_pairs);
    let mut mem = Runs::new(stem(".mem"), options.run_pairs);
    let mut timeline = TimelineBuilder::new(&stem(".threads"), options.run_pairs);
    let mut max_len = 0u64;
    let mut count = 0u64;
    let query = ScanQuery {
        all: true,
        ..ScanQuery::default()
    };
    let spill = |e: io::Error| {
        Error::io(
            format!("cannot write a temporary run beside {}", out.display()),
            e,
        )
    };
    let progress = options.progress.as_deref();
    steps.scan(&query, &mut |step| {
        count = step.i.saturating_add(1);
        if let Some(progress) = progress
            && count.is_multiple_of(PROGRESS_STEPS)
        {
            progress(count);
        }
        pcs.push(step.pc, step.i).map_err(spill)?;
        timeline.push(step.i, step.thread).map_err(spill)?;
        for a in &step.mem {
            max_len = max_len.max(u64::from(a.len));
            // Under every word the access covers, with which of its bytes: a lookup then
            // knows exactly which bytes have an access at all, without reading the steps.
            if step.i >> (64 - MASK_BITS) != 0 {
                return Err(Error::Unsupported(format!(
                    "the sidecar index holds at most 2^56 steps, not {}",
                    step.i
                )));
            }
            let end = a.addr.saturating_add(u64::from(a.len.max(1)));
            let mut word = a.addr & !7;
            while word < end {
                let mask = word_mask(word, a.addr, end);
                mem.push(word >> 3, (step.i << MASK_BITS) | u64::from(mask))
                    .map_err(spill)?;
                match word.checked_add(8) {
                    Some(w) => word = w,
                    None => break,
                }
            }
        }
        Ok(())
    })?;
    drop(steps);
    if let Some(progress) = progress {
        progress(count);
    }
    let executions = pcs.total;
    let accesses = mem.total;
    let mut w = BufWriter::with_capacity(1 << 20, &mut file);
    let mut header = Header {
        identity,
        format: handler.name().to_owned(),
        steps: count,
        max_len,
        seek: Section::default(),
        pcs: ListSection::default(),
        mem: ListSection::default(),
        threads: Section::default(),
        runs: Section::default(),
    };
    let mut pos = HEADER_LEN as u64;
    let sections = || -> io::Result<()> {
        w.write_all(&[0u8; HEADER_LEN])?;
        header.seek = write_section(&mut w, seek.bytes(), &mut pos)?;
        let mut table = Vec::new();
        let (_, (len, hash)) = timeline.write(&mut table, &mut w)?;
        header.runs = Section {
            offset: pos,
            len,
            hash,
        };
        pos = pos.saturating_add(len);
        header.threads = write_section(&mut w, &table, &mut pos)?;
        for (runs, list) in [(&mut pcs, &mut header.pcs), (&mut mem, &mut header.mem)] {
            let mut lw = ListWriter::new(&mut w);
            runs.drain_into(&mut lw)?;
            list.entries = Section {
                offset: pos,
                len: lw.pos,
                hash: lw.hash,
            };
            pos = pos.saturating_add(lw.pos);
            let dir = std::mem::take(&mut lw.dir);
            list.dir = write_section(&mut w, &dir, &mut pos)?;
        }
        w.seek(SeekFrom::Start(0))?;
        w.write_all(&header.to_bytes())?;
        w.flush()
    };
    sections().map_err(writable)?;
    drop(w);
    file.commit().map_err(writable)?;
    Ok(Built {
        path: out,
        steps: count,
        trace_bytes: identity.len,
        index_bytes: pos,
        seek_bytes: seek.bytes().len() as u64,
        executions,
        accesses,
    })
}

/// Writes `bytes` as the section at `pos`, which moves past it.
fn write_section(w: &mut impl Write, bytes: &[u8], pos: &mut u64) -> io::Result<Section> {
    w.write_all(bytes)?;
    let s = Section {
        offset: *pos,
        len: bytes.len() as u64,
        hash: hash(bytes),
    };
    *pos = pos.saturating_add(s.len);
    Ok(s)
}

/// The sidecar of `input` for `format`: at `explicit`, or beside the trace, when the
/// input is an uncompressed file in memory (what a seek index is for); `Err` says why
/// it is not used (`Unusable::Missing`: there is none).
///
/// # Errors
///
/// Why there is no usable sidecar.
pub fn open_for(input: &Input, explicit: Option<&Path>, format: &str) -> Result<Sidecar, Unusable> {
    let Some(trace) = input.path().filter(|_| input.file().is_some()) else {
        return Err(Unusable::Missing);
    };
    let identity = Identity::of_input(input).map_err(Unusable::Damaged)?;
    let path = explicit.map_or_else(|| default_path(trace), Path::to_owned);
    Sidecar::open(&path, &identity, format)
}

/// The seek index kept in the sidecar of `input` (see [`open_for`]), if there is a
/// usable one; a stale or damaged one is reported through `ctx` and ignored. For the
/// handlers' `steps`.
pub fn load_seek_index(input: &mut Input, ctx: &mut Ctx<'_>, format: &str) -> Option<Vec<u8>> {
    if input.is_stream() {
        return None;
    }
    let explicit = ctx.options.index.clone();
    let found = open_for(input, explicit.as_deref(), format)
        .and_then(|mut s| s.seek_index().map_err(Unusable::Damaged));
    match found {
        Ok(bytes) => Some(bytes),
        Err(why) => {
            note_unusable(input, ctx, &why);
            None
        }
    }
}

/// Reports through `ctx` why the sidecar of `input` (see [`open_for`]) is not used, when
/// there is something to say.
pub fn note_unusable(input: &Input, ctx: &mut Ctx<'_>, why: &Unusable) {
    let explicit = ctx.options.index.clone();
    let path = explicit.clone().or_else(|| input.path().map(default_path));
    if let Some(note) = path.and_then(|p| why.note(&p, explicit.is_some())) {
        ctx.diagnostic(&note);
    }
}

/// The steps of `input`, without the notes the steps would give about the sidecar (for
/// a caller that has said what it had to about it already).
///
/// # Errors
///
/// As [`Handler::steps`].
pub fn steps_without_notes<'a>(
    handler: &dyn Handler,
    input: &'a mut Input,
    ctx: &mut Ctx<'_>,
) -> Result<Box<dyn Steps + 'a>, Error> {
    ctx.filtered(is_sidecar_note, |ctx| handler.steps(input, ctx))
}

/// Whether a diagnostic line is one of [`note_unusable`]'s.
#[must_use]
pub fn is_sidecar_note(line: &str) -> bool {
    line.starts_with("note: ignoring the index")
        || line.starts_with("note: ignoring the sidecar")
        || line.starts_with("note: there is no index")
}
