//! FULL traces: magic 0xA1118E17, then per instruction the opcode word and the
//! `ppc_thread_state`, `ppc_float_state` and `ppc_vector_state` structures (notes §5).
//!
//! The record is 1004 bytes if amber wrote the parts one after another, or 1008 if it wrote
//! one C struct (4 pad bytes before the 8-aligned float state). Which one is unknown, so
//! [`RecordSize::detect`] decides from the length and then from PC consistency, and callers
//! can override it.

use trace_core::{BadValue, Cursor, Offset};

use crate::opcode::{Class, Dialect, classify};
use crate::raw::{FULL_MAGIC, FloatState, ThreadState, VectorState};
use crate::{Error, write::FullRecordOwned};

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
        let s4 = consistency(data, RecordSize::Packed1004);
        let s8 = consistency(data, RecordSize::Struct1008);
        if s8 > s4 {
            RecordSize::Struct1008
        } else {
            RecordSize::Packed1004
        }
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
    pub fn new(data: &'a [u8]) -> Result<FullReader<'a>, Error> {
        Self::with_size(data, RecordSize::detect(data))
    }

    /// Checks the magic; records are `size` bytes.
    ///
    /// # Errors
    ///
    /// [`Error::Eof`] or [`Error::BadValue`] for a missing or wrong magic.
    pub fn with_size(data: &'a [u8], size: RecordSize) -> Result<FullReader<'a>, Error> {
        let magic = Cursor::new(data).read_u32_be()?;
        if magic != FULL_MAGIC {
            return Err(BadValue {
                offset: Offset(0),
                what: "FULL magic",
                found: u64::from(magic),
                expected: "0xa1118e17",
            }
            .into());
        }
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
