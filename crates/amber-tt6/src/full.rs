//! FULL traces: magic 0xA1118E17, then per instruction the opcode word and the
//! `ppc_thread_state`, `ppc_float_state` and `ppc_vector_state` structures (notes §5).
//!
//! The record is 1004 bytes if amber wrote the parts one after another, or 1008 if it wrote
//! one C struct (4 pad bytes before the 8-aligned float state). Which one is unknown, so
//! [`RecordSize::detect`] decides from the length and then from PC consistency, and callers
//! can override it.

use std::io::{self, Read};

use trace_core::{BadValue, Cursor, Offset, UnexpectedEof};

use crate::opcode::{Class, Dialect, classify};
use crate::raw::{FULL_MAGIC, FloatState, ThreadState, VectorState};
use crate::{Error, limits, write::FullRecordOwned};

/// The two possible FULL record sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RecordSize {
    /// Opcode, thread, float, vector state back to back.
    #[default]
    Packed1004,
    /// As one C struct: 4 pad bytes after the thread state.
    Struct1008,
}

/// How many leading records [`RecordSize::detect`] checks for PC consistency.
const DETECT_RECORDS: usize = 32;

impl RecordSize {
    /// The size in bytes.
    #[must_use]
    pub fn bytes(self) -> usize {
        match self {
            RecordSize::Packed1004 => 1004,
            RecordSize::Struct1008 => 1008,
        }
    }

    /// From a size in bytes.
    ///
    /// # Errors
    ///
    /// [`Error::BadValue`] for anything but 1004 or 1008.
    pub fn from_bytes(n: u32) -> Result<RecordSize, Error> {
        match n {
            1004 => Ok(RecordSize::Packed1004),
            1008 => Ok(RecordSize::Struct1008),
            other => Err(BadValue {
                offset: Offset(0),
                what: "FULL record size option",
                found: u64::from(other),
                expected: "1004 or 1008",
            }
            .into()),
        }
    }

    /// Guesses the record size of a FULL trace `data` (magic included): the size that
    /// divides the body length if only one does; otherwise (both or neither) the size under
    /// which more of the first 32 records are consistent (a non-flow record's successor,
    /// even a partial one, has `srr0 + 4`), 1004 on a tie. Override it when you know.
    #[must_use]
    pub fn detect(data: &[u8]) -> RecordSize {
        let body = data.len().saturating_sub(4);
        let d4 = body.is_multiple_of(1004);
        let d8 = body.is_multiple_of(1008);
        match (d4, d8) {
            (true, false) => return RecordSize::Packed1004,
            (false, true) => return RecordSize::Struct1008,
            _ => {}
        }
        Self::detect_by_consistency(data)
    }

    /// The second rule of [`RecordSize::detect`] alone, for the first bytes of a longer
    /// trace (whose length is unknown).
    fn detect_by_consistency(data: &[u8]) -> RecordSize {
        let s4 = consistency(data, RecordSize::Packed1004);
        let s8 = consistency(data, RecordSize::Struct1008);
        if s8 > s4 {
            RecordSize::Struct1008
        } else {
            RecordSize::Packed1004
        }
    }
}

fn check_magic(magic: u32) -> Result<(), Error> {
    if magic == FULL_MAGIC {
        Ok(())
    } else {
        Err(BadValue {
            offset: Offset(0),
            what: "FULL magic",
            found: u64::from(magic),
            expected: "0xa1118e17",
        }
        .into())
    }
}

/// Score of a stride: how many of the first records that are not flow-altering are
/// followed by a record (complete or not) whose `srr0` is theirs + 4.
fn consistency(data: &[u8], size: RecordSize) -> usize {
    let word = |at: usize| {
        data.get(at..at.saturating_add(4))
            .and_then(|b| b.first_chunk::<4>())
            .map(|b| u32::from_be_bytes(*b))
    };
    let mut score = 0usize;
    let mut prev: Option<(u32, u32)> = None; // (opcode, srr0)
    for k in 0..DETECT_RECORDS {
        let at = k.saturating_mul(size.bytes()).saturating_add(4);
        let (Some(op), Some(srr0)) = (word(at), word(at.saturating_add(4))) else {
            break;
        };
        if let Some((pop, ppc)) = prev
            && classify(Dialect::Tt6e, pop) != Class::Flow
            && ppc.wrapping_add(4) == srr0
        {
            score = score.saturating_add(1);
        }
        prev = Some((op, srr0));
    }
    score
}

/// One FULL record, borrowed from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FullRecord<'a> {
    /// Record index.
    pub index: u64,
    /// File offset of the opcode word.
    pub offset: Offset,
    /// The opcode word.
    pub opcode: u32,
    /// The pad word of 1008-byte records.
    pub pad: Option<u32>,
    /// Integer state, PC (`srr0`), MSR, CR, XER, LR, CTR, MQ, VRSAVE.
    pub thread: &'a ThreadState,
    /// Floating-point registers and FPSCR.
    pub float: &'a FloatState,
    /// Vector registers, VSCR, VRVALID.
    pub vector: &'a VectorState,
}

impl FullRecord<'_> {
    /// The instruction address (`srr0`).
    #[must_use]
    pub fn pc(&self) -> u32 {
        self.thread.srr0.get()
    }

    /// An owned copy.
    #[must_use]
    pub fn to_owned(&self) -> FullRecordOwned {
        FullRecordOwned {
            opcode: self.opcode,
            pad: self.pad.unwrap_or(0),
            thread: *self.thread,
            float: *self.float,
            vector: *self.vector,
        }
    }
}

/// A FULL trace in memory.
#[derive(Clone, Debug)]
pub struct FullReader<'a> {
    data: &'a [u8],
    size: RecordSize,
}

impl<'a> FullReader<'a> {
    /// Checks the magic and detects the record size ([`RecordSize::detect`]).
    ///
    /// # Errors
    ///
    /// [`Error::Eof`] or [`Error::BadValue`] for a missing or wrong magic.
    pub fn parse(data: &'a [u8]) -> Result<FullReader<'a>, Error> {
        Self::with_size(data, RecordSize::detect(data))
    }

    /// Checks the magic; records are `size` bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Eof`] or [`Error::BadValue`] for a missing or wrong magic.
    pub fn with_size(data: &'a [u8], size: RecordSize) -> Result<FullReader<'a>, Error> {
        check_magic(Cursor::new(data).read_u32_be()?)?;
        Ok(FullReader { data, size })
    }

    /// The record size in use.
    #[must_use]
    pub fn record_size(&self) -> RecordSize {
        self.size
    }

    /// The records, lazily; a trailing partial record is an error after the others.
    #[must_use]
    pub fn records(&self) -> FullRecords<'a> {
        let body = self.data.get(4..).unwrap_or_default();
        FullRecords {
            cur: Cursor::with_base(body, 4),
            size: self.size,
            index: 0,
            done: false,
        }
    }
}

/// Iterator over [`FullRecord`]s; fused after an error.
#[derive(Clone, Debug)]
pub struct FullRecords<'a> {
    cur: Cursor<'a>,
    size: RecordSize,
    index: u64,
    done: bool,
}

impl<'a> FullRecords<'a> {
    fn read_one(
        cur: &mut Cursor<'a>,
        size: RecordSize,
        index: u64,
    ) -> Result<FullRecord<'a>, Error> {
        let offset = cur.offset();
        let available = cur.remaining();
        let mut rec = cur.sub_cursor(size.bytes()).map_err(|_| Error::Truncated {
            record: index,
            offset,
            needed: size.bytes() as u64,
            available: available as u64,
        })?;
        let opcode = rec.read_u32_be()?;
        let thread = rec.read_ref::<ThreadState>()?;
        let pad = match size {
            RecordSize::Packed1004 => None,
            RecordSize::Struct1008 => Some(rec.read_u32_be()?),
        };
        let float = rec.read_ref::<FloatState>()?;
        let vector = rec.read_ref::<VectorState>()?;
        Ok(FullRecord {
            index,
            offset,
            opcode,
            pad,
            thread,
            float,
            vector,
        })
    }
}

impl<'a> Iterator for FullRecords<'a> {
    type Item = Result<FullRecord<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.cur.is_empty() {
            self.done = true;
            return None;
        }
        let r = Self::read_one(&mut self.cur, self.size, self.index);
        if r.is_err() {
            self.done = true;
        }
        self.index = self.index.wrapping_add(1);
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        let n = self.cur.remaining().div_ceil(self.size.bytes());
        (n.saturating_sub(1), Some(n))
    }
}

impl core::iter::FusedIterator for FullRecords<'_> {}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8], offset: u64) -> Result<usize, Error> {
    let mut got = 0usize;
    while let Some(dst) = buf.get_mut(got..) {
        if dst.is_empty() {
            break;
        }
        match r.read(dst) {
            Ok(0) => break,
            Ok(n) => got = got.saturating_add(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(Error::Io {
                    offset: Offset(offset.saturating_add(got as u64)),
                    source,
                });
            }
        }
    }
    Ok(got)
}

/// A FULL trace read from any `io::Read`, one record at a time into one reused
/// record-sized buffer, so memory stays constant whatever the trace length. Records are
/// the same [`FullRecord`] views as [`FullReader`]'s, borrowing the reader's buffer, so this
/// is a lending reader: call [`FullStreamReader::next_record`] in a `while let`.
///
/// ```
/// use amber_tt6::{FullReader, FullStreamReader};
///
/// let data = include_bytes!("../../../testdata/amber/full-1008.full");
/// let mut stream = FullStreamReader::from_reader(&data[..], None)?;
/// let slice = FullReader::parse(data)?;
/// assert_eq!(stream.record_size(), slice.record_size());
/// let mut pcs = Vec::new();
/// while let Some(r) = stream.next_record() {
///     pcs.push(r?.pc());
/// }
/// assert_eq!(pcs, [0x1000, 0x1004, 0x1008]);
/// # Ok::<(), amber_tt6::Error>(())
/// ```
#[derive(Debug)]
pub struct FullStreamReader<R> {
    /// The bytes read ahead for the size detection, then the rest of the stream.
    inner: io::Chain<io::Cursor<Vec<u8>>, R>,
    size: RecordSize,
    buf: Vec<u8>,
    /// File offset of the next record.
    offset: u64,
    index: u64,
    done: bool,
}

impl<R: Read> FullStreamReader<R> {
    /// Reads and checks the magic. Records are `size` bytes; with `None` the size is
    /// detected from the first [`limits::FULL_DETECT_BYTES`] bytes, read ahead: when the
    /// whole trace fits in them the answer is [`RecordSize::detect`]'s, as for
    /// [`FullReader::parse`]; for a longer trace its length is unknown, so only the PC
    /// consistency of the first records decides (give the size when you know it).
    ///
    /// # Errors
    ///
    /// [`Error::Eof`] or [`Error::BadValue`] for a missing or wrong magic, [`Error::Io`].
    pub fn from_reader(
        mut inner: R,
        size: Option<RecordSize>,
    ) -> Result<FullStreamReader<R>, Error> {
        // One byte past the detection window tells whether the whole trace fitted in it
        // (then its length decides, as for a slice).
        let ahead = match size {
            Some(_) => 4,
            None => limits::FULL_DETECT_BYTES.saturating_add(1),
        };
        let mut head = vec![0u8; ahead];
        let got = read_full(&mut inner, &mut head, 0)?;
        head.truncate(got);
        let Some(magic) = head.first_chunk::<4>().map(|b| u32::from_be_bytes(*b)) else {
            return Err(UnexpectedEof {
                offset: Offset(0),
                needed: 4,
                available: got as u64,
            }
            .into());
        };
        check_magic(magic)?;
        let size = size.unwrap_or_else(|| {
            if got < ahead {
                RecordSize::detect(&head)
            } else {
                RecordSize::detect_by_consistency(&head)
            }
        });
        let mut ahead = io::Cursor::new(head);
        ahead.set_position(4);
        Ok(FullStreamReader {
            inner: ahead.chain(inner),
            size,
            buf: vec![0; size.bytes()],
            offset: 4,
            index: 0,
            done: false,
        })
    }

    /// The record size in use.
    #[must_use]
    pub fn record_size(&self) -> RecordSize {
        self.size
    }

    /// The file offset of the next record.
    #[must_use]
    pub fn offset(&self) -> Offset {
        Offset(self.offset)
    }

    /// The next record, `None` at the end of the stream (or after an error).
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] for a trailing partial record (after every complete one, as
    /// [`FullReader::records`]), [`Error::Io`].
    pub fn next_record(&mut self) -> Option<Result<FullRecord<'_>, Error>> {
        if self.done {
            return None;
        }
        let got = match read_full(&mut self.inner, &mut self.buf, self.offset) {
            Ok(n) => n,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        if got == 0 {
            self.done = true;
            return None;
        }
        let index = self.index;
        let offset = self.offset;
        self.index = self.index.wrapping_add(1);
        self.offset = self.offset.saturating_add(got as u64);
        let buf = self.buf.get(..got).unwrap_or_default();
        let mut cur = Cursor::with_base(buf, offset);
        let r = FullRecords::read_one(&mut cur, self.size, index);
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}
