//! Opening an input: a path or `-` for stdin, opened once; plain files memory-mapped
//! (guarded against being cut short while read: [`Input::cut`]), pipes and devices read
//! as streams; `.bz2` and `.gz` (recognised by their magic) decompressed as a stream.
//! Detection sees a bounded prefix ([`HEAD_LEN`]), so an endless input is refused fast.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::Error;
use crate::mapped::Map;

/// How many leading bytes of the (decompressed) input are kept for format detection.
pub const HEAD_LEN: usize = 64 * 1024;

/// The compression wrapped around an input, recognised by its magic bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// bzip2 (`BZh`), as Intel's tools write `.json.bz2`.
    Bzip2,
    /// gzip (`1f 8b`).
    Gzip,
}

enum Data {
    /// A memory-mapped file (shared by the inputs [`Input::share`] makes).
    Mapped(std::sync::Arc<Map>),
    /// Bytes held in memory (small files, stdin or decompressed input read whole).
    Memory(Vec<u8>),
    /// Bytes in memory shared with other inputs (readers of the same bytes on several
    /// threads, without a copy each).
    Shared(std::sync::Arc<[u8]>),
    /// A stream whose first bytes are in `head`.
    Stream(Box<dyn Read + Send>),
    /// A directory: its files, by name (amber's per-thread traces).
    Directory(Vec<Input>),
}

/// One input of a command. Formats take it either whole ([`Input::bytes`], zero-copy for
/// plain files) or as it comes ([`Input::source`]: a stream in constant memory for any size).
pub struct Input {
    name: String,
    path: Option<PathBuf>,
    compression: Option<Compression>,
    /// The first bytes of a `Stream` (up to [`HEAD_LEN`]).
    head: Vec<u8>,
    data: Data,
    file_len: Option<u64>,
    /// A value made from the input that records borrow (see [`Input::keep`]).
    kept: Option<Box<dyn std::any::Any + Send>>,
    /// The decompressed bytes read so far, for a compressed input.
    decoded: Option<std::sync::Arc<Decoded>>,
    /// The one handle of an uncompressed regular file (see [`Input::file`]).
    file: Option<std::sync::Arc<File>>,
}

/// How much of a decompressed stream has been read, and whether all of it.
#[derive(Debug, Default)]
struct Decoded {
    bytes: std::sync::atomic::AtomicU64,
    ended: std::sync::atomic::AtomicBool,
}

/// A reader that counts what it reads into a [`Decoded`].
struct Counted {
    inner: Box<dyn Read + Send>,
    decoded: std::sync::Arc<Decoded>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::sync::atomic::Ordering;
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.decoded.ended.store(true, Ordering::Release);
        }
        self.decoded.bytes.fetch_add(n as u64, Ordering::AcqRel);
        Ok(n)
    }
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input")
            .field("name", &self.name)
            .field("compression", &self.compression)
            .field("file_len", &self.file_len)
            .finish_non_exhaustive()
    }
}

fn compression_of(head: &[u8]) -> Option<Compression> {
    match head {
        [b'B', b'Z', b'h', b'1'..=b'9', ..] => Some(Compression::Bzip2),
        [0x1f, 0x8b, ..] => Some(Compression::Gzip),
        _ => None,
    }
}

fn decompressor(c: Compression, inner: Box<dyn Read + Send>) -> Box<dyn Read + Send> {
    match c {
        Compression::Bzip2 => Box::new(bzip2::read::MultiBzDecoder::new(inner)),
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(inner)),
    }
}

/// Reads up to `limit` bytes (fewer only at end of stream).
fn read_head(r: &mut dyn Read, limit: usize) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(limit.min(HEAD_LEN));
    r.take(limit as u64).read_to_end(&mut head)?;
    Ok(head)
}

impl Input {
    /// Opens `path`, or stdin for `-`. The path is opened once and read through that one
    /// handle: a regular file is mapped (or read, when small), anything else (a pipe, a
    /// `<(…)` process substitution, a device) is read as a stream, as stdin is.
    ///
    /// # Errors
    ///
    /// The file cannot be opened, mapped or read, or its compressed stream is corrupt at its
    /// start.
    pub fn open(path: &OsStr) -> Result<Input, Error> {
        if path == "-" {
            return Input::from_unknown_stream("-".to_owned(), Box::new(io::stdin()));
        }
        let path = PathBuf::from(path);
        let name = path.display().to_string();
        // A directory is a list of files (not opened itself: Windows cannot open one).
        if path.is_dir() {
            return Input::open_dir(path, name);
        }
        let read_err = |e| Error::io(format!("cannot read {name}"), e);
        let mut file =
            File::open(&path).map_err(|e| Error::io(format!("cannot open {name}"), e))?;
        let meta = file.metadata().map_err(read_err)?;
        if !meta.is_file() {
            let mut input = Input::from_unknown_stream(name, Box::new(file))?;
            input.path = Some(path);
            return Ok(input);
        }
        let len = meta.len();
        let magic = read_head(&mut file, 4).map_err(read_err)?;
        if let Some(c) = compression_of(&magic) {
            let raw = io::BufReader::new(io::Cursor::new(magic).chain(file));
            return Input::from_compressed(name, Some(path), c, Box::new(raw), Some(len));
        }
        Input::from_file(name, path, std::sync::Arc::new(file), len)
    }

    /// An input over the uncompressed regular file `file` of `len` bytes: read into memory
    /// when small, else mapped (guarded: see [`Input::cut`]).
    fn from_file(
        name: String,
        path: PathBuf,
        file: std::sync::Arc<File>,
        len: u64,
    ) -> Result<Input, Error> {
        let data = if len < HEAD_LEN as u64 {
            // To its end, not `len`: files of /proc say 0.
            let mut v = Vec::new();
            let mut whole = FileAt {
                file: std::sync::Arc::clone(&file),
                offset: 0,
            };
            whole
                .read_to_end(&mut v)
                .map_err(|e| Error::io(format!("cannot read {name}"), e))?;
            Data::Memory(v)
        } else {
            let map = Map::new(std::sync::Arc::clone(&file), &name)
                .map_err(|e| Error::io(format!("cannot map {name}"), e))?;
            Data::Mapped(std::sync::Arc::new(map))
        };
        Ok(Input {
            name,
            path: Some(path),
            compression: None,
            head: Vec::new(),
            data,
            file_len: Some(len),
            kept: None,
            decoded: None,
            file: Some(file),
        })
    }

    /// Another input over the same trace for a long-lived reader (`serve`'s workers): an
    /// uncompressed regular file through the same handle, as the file is now (its size now,
    /// a map of its own: after another process cut the file short, the new input's end is
    /// the file's new end, where the old map reads zeros); any other input as
    /// [`Input::share`] gives it. The path is never opened again. `None` for a stream not
    /// read yet and for a directory.
    ///
    /// # Errors
    ///
    /// The file cannot be read or mapped.
    pub fn again(&self) -> Option<Result<Input, Error>> {
        let (Some(file), Some(path)) = (&self.file, &self.path) else {
            return self.share().map(Ok);
        };
        let len = match file.metadata() {
            Ok(meta) => meta.len(),
            Err(e) => return Some(Err(Error::io(format!("cannot read {}", self.name), e))),
        };
        Some(Input::from_file(
            self.name.clone(),
            path.clone(),
            std::sync::Arc::clone(file),
            len,
        ))
    }

    /// The handle of an uncompressed regular file, as opened by [`Input::open`]: what to ask
    /// for its size and time now, instead of opening the path again (which may name another
    /// file by then, or a pipe that gives other bytes). `None` for other inputs.
    #[must_use]
    pub fn file(&self) -> Option<&File> {
        self.file.as_deref()
    }

    /// A reader of the whole uncompressed regular file from its first byte, through the
    /// handle it was opened with (positional reads: it leaves the handle's own offset alone,
    /// so shared inputs and several readers do not disturb each other). For a reader that
    /// wants the file as a stream rather than through its memory map, whose pages would add
    /// to the process's memory. `None` for other inputs (see [`Input::source`]).
    #[must_use]
    pub fn file_reader(&self) -> Option<FileAt> {
        self.file.as_ref().map(|file| FileAt {
            file: std::sync::Arc::clone(file),
            offset: 0,
        })
    }

    /// Whether the file was cut short (truncated or rewritten by another process) since it
    /// was mapped, and where. `None` for an input that is not a mapped file.
    #[must_use]
    pub fn cut(&self) -> Option<Cut> {
        match &self.data {
            Data::Mapped(m) => m.cut(),
            _ => None,
        }
    }

    fn open_dir(path: PathBuf, name: String) -> Result<Input, Error> {
        let err = |e| Error::io(format!("cannot read directory {name}"), e);
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(err)? {
            let p = entry.map_err(err)?.path();
            if p.is_file() {
                files.push(p);
            }
        }
        files.sort();
        let parts = files
            .iter()
            .map(|p| Input::open(p.as_os_str()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Input {
            name,
            path: Some(path),
            compression: None,
            head: Vec::new(),
            data: Data::Directory(parts),
            file_len: None,
            kept: None,
            decoded: None,
            file: None,
        })
    }

    /// Whether the input is a directory (see [`Input::parts_mut`]).
    #[must_use]
    pub fn is_dir(&self) -> bool {
        matches!(self.data, Data::Directory(_))
    }

    /// For a directory, the names of its files (without compression extensions).
    #[must_use]
    pub fn part_names(&self) -> Option<Vec<String>> {
        match &self.data {
            Data::Directory(parts) => Some(parts.iter().map(Input::logical_name).collect()),
            _ => None,
        }
    }

    /// For a directory, its files as inputs, sorted by name.
    pub fn parts_mut(&mut self) -> Option<&mut [Input]> {
        match &mut self.data {
            Data::Directory(parts) => Some(parts),
            _ => None,
        }
    }

    /// The bytes already loaded: a mapped file or bytes in memory (after [`Input::bytes`]);
    /// empty for a stream not read yet and for a directory.
    #[must_use]
    pub fn loaded_bytes(&self) -> &[u8] {
        match &self.data {
            Data::Mapped(m) => m,
            Data::Memory(v) => v,
            Data::Shared(v) => v,
            Data::Stream(_) | Data::Directory(_) => &[],
        }
    }

    /// An input over bytes in memory (tests, fuzzing, library use). Compressed bytes are
    /// decompressed as for a file.
    ///
    /// # Errors
    ///
    /// A corrupt compressed stream.
    pub fn from_bytes(name: impl Into<String>, bytes: Vec<u8>) -> Result<Input, Error> {
        let name = name.into();
        if let Some(c) = compression_of(&bytes) {
            let len = Some(bytes.len() as u64);
            return Input::from_compressed(name, None, c, Box::new(io::Cursor::new(bytes)), len);
        }
        let len = bytes.len() as u64;
        Ok(Input {
            name,
            path: None,
            compression: None,
            head: Vec::new(),
            data: Data::Memory(bytes),
            file_len: Some(len),
            kept: None,
            decoded: None,
            file: None,
        })
    }

    /// An input over bytes in memory shared with others (no copy: several threads each read
    /// the same bytes through an input of their own). Compressed bytes are copied and
    /// decompressed as with [`Input::from_bytes`].
    ///
    /// # Errors
    ///
    /// A corrupt compressed stream.
    pub fn from_shared(
        name: impl Into<String>,
        bytes: std::sync::Arc<[u8]>,
    ) -> Result<Input, Error> {
        if compression_of(&bytes).is_some() {
            return Input::from_bytes(name, bytes.to_vec());
        }
        let len = bytes.len() as u64;
        Ok(Input {
            name: name.into(),
            path: None,
            compression: None,
            head: Vec::new(),
            data: Data::Shared(bytes),
            file_len: Some(len),
            kept: None,
            decoded: None,
            file: None,
        })
    }

    /// Another input over the same bytes, for a reader on another thread: a mapped file's
    /// map and shared bytes are shared (no copy; and a page of the file one reader touched
    /// is mapped for the other), bytes in memory copied (a small file). `None` for a stream
    /// not read yet ([`Input::bytes`]) and for a directory.
    #[must_use]
    pub fn share(&self) -> Option<Input> {
        let data = match &self.data {
            Data::Mapped(m) => Data::Mapped(std::sync::Arc::clone(m)),
            Data::Shared(b) => Data::Shared(std::sync::Arc::clone(b)),
            Data::Memory(v) => Data::Memory(v.clone()),
            Data::Stream(_) | Data::Directory(_) => return None,
        };
        Some(Input {
            name: self.name.clone(),
            path: self.path.clone(),
            compression: self.compression,
            head: self.head.clone(),
            data,
            file_len: self.file_len,
            kept: None,
            decoded: self.decoded.clone(),
            file: self.file.clone(),
        })
    }

    /// An input over a stream that may be compressed (stdin): its magic bytes decide.
    ///
    /// # Errors
    ///
    /// Reading the stream fails, or its compressed data is corrupt at its start.
    pub fn from_unknown_stream(
        name: String,
        mut stream: Box<dyn Read + Send>,
    ) -> Result<Input, Error> {
        let magic =
            read_head(&mut stream, 4).map_err(|e| Error::io(format!("cannot read {name}"), e))?;
        let compression = compression_of(&magic);
        let stream: Box<dyn Read + Send> = Box::new(io::Cursor::new(magic).chain(stream));
        match compression {
            Some(c) => Input::from_compressed(name, None, c, stream, None),
            None => Input::from_stream(name, None, stream),
        }
    }

    /// An input over the decompressed stream of `raw`, counting the bytes it gives.
    fn from_compressed(
        name: String,
        path: Option<PathBuf>,
        c: Compression,
        raw: Box<dyn Read + Send>,
        file_len: Option<u64>,
    ) -> Result<Input, Error> {
        let decoded = std::sync::Arc::new(Decoded::default());
        let stream = Counted {
            inner: decompressor(c, raw),
            decoded: std::sync::Arc::clone(&decoded),
        };
        let mut input = Input::from_stream(name, path, Box::new(stream))?;
        input.compression = Some(c);
        input.file_len = file_len;
        input.decoded = Some(decoded);
        Ok(input)
    }

    /// The size of the decompressed input, once it has been read to its end (a compressed
    /// input: [`Input::file_len`] is then its size on disk); `None` before or otherwise.
    #[must_use]
    pub fn decompressed_len(&self) -> Option<u64> {
        let d = self.decoded.as_ref()?;
        let ended = d.ended.load(std::sync::atomic::Ordering::Acquire);
        ended.then(|| d.bytes.load(std::sync::atomic::Ordering::Acquire))
    }

    fn from_stream(
        name: String,
        path: Option<PathBuf>,
        mut stream: Box<dyn Read + Send>,
    ) -> Result<Input, Error> {
        let head = read_head(&mut stream, HEAD_LEN)
            .map_err(|e| Error::io(format!("cannot read {name}"), e))?;
        Ok(Input {
            name,
            path,
            compression: None,
            head,
            data: Data::Stream(stream),
            file_len: None,
            kept: None,
            decoded: None,
            file: None,
        })
    }

    /// The name to show in messages: the path as given, or `-`.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The path, unless the input is stdin or in memory.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The file name without a compression extension (`a.tt6.gz` → `a.tt6`), for formats
    /// recognised by extension.
    #[must_use]
    pub fn logical_name(&self) -> String {
        let name = self
            .path
            .as_ref()
            .and_then(|p| p.file_name())
            .map_or_else(|| self.name.clone(), |n| n.to_string_lossy().into_owned());
        match self.compression {
            Some(_) => name
                .strip_suffix(".bz2")
                .or_else(|| name.strip_suffix(".gz"))
                .unwrap_or(&name)
                .to_owned(),
            None => name,
        }
    }

    /// The compression the input was wrapped in.
    #[must_use]
    pub fn compression(&self) -> Option<Compression> {
        self.compression
    }

    /// The size of the file on disk (compressed size for compressed files), for progress.
    #[must_use]
    pub fn file_len(&self) -> Option<u64> {
        self.file_len
    }

    /// The first bytes of the (decompressed) input, at most [`HEAD_LEN`], for detection.
    #[must_use]
    pub fn head(&self) -> &[u8] {
        match &self.data {
            Data::Mapped(m) => m.get(..HEAD_LEN).unwrap_or(m),
            Data::Memory(v) => v.get(..HEAD_LEN).unwrap_or(v),
            Data::Shared(v) => v.get(..HEAD_LEN).unwrap_or(v),
            Data::Stream(_) | Data::Directory(_) => &self.head,
        }
    }

    /// Keeps `value` (a model read from the input, such as a whole DCFG) for as long as the
    /// input lives, and lends it out, so that records can borrow it.
    pub fn keep<T: std::any::Any + Send>(&mut self, value: T) -> Option<&T> {
        self.kept = Some(Box::new(value));
        self.kept.as_deref().and_then(|v| v.downcast_ref())
    }

    /// Whether the input is a stream (stdin or compressed): read once, front to back.
    #[must_use]
    pub fn is_stream(&self) -> bool {
        matches!(self.data, Data::Stream(_))
    }

    /// The whole (decompressed) input as bytes: the memory map of a plain file; a stream
    /// is read into memory up to [`SPOOL_AT`] bytes and past that spooled to a temporary
    /// file that is then mapped, so that random access to any size costs no memory beyond
    /// the page cache.
    ///
    /// # Errors
    ///
    /// Reading or decompressing the stream, or writing the temporary file, fails.
    pub fn bytes(&mut self) -> Result<&[u8], Error> {
        if let Data::Stream(stream) = &mut self.data {
            let mut all = std::mem::take(&mut self.head);
            let name = &self.name;
            let read_err = |e| Error::io(format!("cannot read {name}"), e);
            let room = (SPOOL_AT as u64).saturating_sub(all.len() as u64);
            stream.take(room).read_to_end(&mut all).map_err(read_err)?;
            self.data = if all.len() < SPOOL_AT {
                Data::Memory(all)
            } else {
                Data::Mapped(std::sync::Arc::new(spool(&all, stream).map_err(read_err)?))
            };
        }
        Ok(self.loaded_bytes())
    }

    /// The input for a reader that takes either: the bytes of a plain file or of bytes in
    /// memory, or the stream itself (taken out of the input, from its first byte).
    pub fn source(&mut self) -> Source<'_> {
        if matches!(self.data, Data::Stream(_)) {
            let data = std::mem::replace(&mut self.data, Data::Memory(Vec::new()));
            let head = std::mem::take(&mut self.head);
            if let Data::Stream(s) = data {
                return Source::Stream(Box::new(io::Cursor::new(head).chain(s)));
            }
        }
        Source::Bytes(self.loaded_bytes())
    }
}

/// Streams at least this large are spooled to a temporary file by [`Input::bytes`].
pub const SPOOL_AT: usize = 64 << 20;

/// Where a mapped input file was found cut short: see [`Input::cut`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The offset of the first byte read past the file's new end, or its length now when
    /// no read went past it yet.
    pub offset: u64,
    /// Whether a read went past the new end: those bytes read as zeros, so what was made of
    /// them is not the file's (see [`check_unchanged`](crate::check_unchanged)).
    pub read: bool,
}

/// An input as a reader takes it: see [`Input::source`].
pub enum Source<'a> {
    /// The whole input, zero-copy.
    Bytes(&'a [u8]),
    /// The input as a stream.
    Stream(Box<dyn Read + Send>),
}

/// A reader over an opened file by position (see [`Input::file_reader`]).
#[derive(Debug)]
pub struct FileAt {
    file: std::sync::Arc<File>,
    offset: u64,
}

impl Read for FileAt {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(&*self.file, buf, self.offset)?;
        #[cfg(windows)]
        let n = std::os::windows::fs::FileExt::seek_read(&*self.file, buf, self.offset)?;
        self.offset = self.offset.saturating_add(n as u64);
        Ok(n)
    }
}

impl std::fmt::Debug for Source<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
            Source::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// Copies `first` and the rest of `rest` to a new temporary file, removed from the
/// directory at once (the map keeps it alive), and maps it.
fn spool(first: &[u8], rest: &mut dyn Read) -> io::Result<Map> {
    use std::io::Write;
    let dir = std::env::temp_dir();
    let mut n = 0u32;
    let (file, path) = loop {
        let path = dir.join(format!("tracekit-spool-{}-{n}", std::process::id()));
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => break (f, path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 1000 => {
                n = n.saturating_add(1);
            }
            Err(e) => return Err(e),
        }
    };
    let _ = std::fs::remove_file(&path);
    let mut w = io::BufWriter::with_capacity(1 << 20, &file);
    w.write_all(first)?;
    io::copy(rest, &mut w)?;
    w.flush()?;
    drop(w);
    Map::new(std::sync::Arc::new(file), "a spooled stream")
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn decompresses_bzip2_and_gzip_transparently() {
        let plain: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
        bz.write_all(&plain).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&plain).unwrap();
        for (bytes, c) in [
            (bz.finish().unwrap(), Compression::Bzip2),
            (gz.finish().unwrap(), Compression::Gzip),
        ] {
            let mut input = Input::from_bytes("x.tt6.gz", bytes.clone()).unwrap();
            assert_eq!(input.compression(), Some(c));
            assert_eq!(input.head(), &plain[..HEAD_LEN]);
            assert_eq!(input.bytes().unwrap(), &plain[..]);
            let mut streamed = Vec::new();
            let mut input = Input::from_bytes("x", bytes).unwrap();
            let Source::Stream(mut s) = input.source() else {
                panic!("compressed bytes are read as a stream");
            };
            s.read_to_end(&mut streamed).unwrap();
            assert_eq!(streamed, plain);
        }
        assert_eq!(
            Input::from_bytes("a.tt6.gz", Vec::new())
                .unwrap()
                .logical_name(),
            "a.tt6.gz"
        );
    }

    #[test]
    fn a_shared_input_reads_the_same_bytes() {
        let plain: Vec<u8> = (0..200_000u32).map(|i| (i % 253) as u8).collect();
        let path = std::env::temp_dir().join(format!("tracekit-share-{}", std::process::id()));
        std::fs::write(&path, &plain).unwrap();
        let mut mapped = Input::open(path.as_os_str()).unwrap();
        let mut small = Input::from_bytes("small", plain[..100].to_vec()).unwrap();
        let mut shared = Input::from_shared("shared", plain.clone().into()).unwrap();
        for input in [&mut mapped, &mut small, &mut shared] {
            let want = input.bytes().unwrap().to_vec();
            let mut other = input.share().unwrap();
            assert_eq!(other.bytes().unwrap(), &want[..]);
            assert_eq!(
                (other.name(), other.file_len()),
                (input.name(), input.file_len())
            );
        }
        drop(mapped);
        std::fs::remove_file(&path).unwrap();
        let stream = Input::from_unknown_stream("-".into(), Box::new(io::Cursor::new(plain)));
        assert!(stream.unwrap().share().is_none(), "a stream is read once");
    }

    #[test]
    fn corrupt_compressed_input_is_an_error_not_a_panic() {
        let mut bytes = b"BZh9".to_vec();
        bytes.extend_from_slice(&[0xff; 64]);
        let r = Input::from_bytes("x", bytes).and_then(|mut i| i.bytes().map(<[u8]>::len));
        assert!(r.is_err());
    }
}
