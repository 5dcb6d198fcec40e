//! Reading blocks: a lazy zero-copy iterator over `&[u8]` ([`Trace::blocks`]), the cursor
//! with the register state ([`Cursor`]), random access through an index of full dumps
//! ([`Index`], [`Trace::seek`]) and a streaming reader over `io::Read` ([`StreamReader`]).

// The block layout arithmetic below adds and multiplies counts read from u8 fields by the
// word size (at most 255 × 17 + 32 × 25 bytes, well under 4 KiB), or lengths bounded by
// the input slice; none of it can overflow a usize.
#![allow(clippy::arithmetic_side_effects)]

mod blocks;
mod cursor;
mod decode;
mod replay;
mod scan;
mod stream;

pub use blocks::{Block, Blocks, Instruction, MemAccesses, RegChanges, UserBlock};
pub use cursor::{Cursor, Full, General, Mode, Pc, general_words};
pub use replay::{Counters, Index, IndexBuilder};
pub use stream::StreamReader;

use decode::DecoderState;
use trace_core::Offset;

use crate::Error;
use crate::header::{Arch, Header};
use crate::model::Record;

/// How the reader decides whether a block carries a thread id.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ThreadIdMode {
    /// Follow the flag, and recover the thread-id bytes that writers before x64dbg PR #3920
    /// put without the flag on the first block after a thread switch
    /// (`specs/notes/x64dbg-notes.md` section 5). Only a flag-clear block right after a
    /// flagged one can carry them. The first such block after a flagged non-full block
    /// shows which writer made the file: both readings are decoded ahead (16 blocks, each
    /// under its writer's rules) and the one that decodes further wins; the answer holds
    /// for the rest of the file. After a flagged full dump the old writer writes the bytes
    /// only if the thread changed, so there the trial parse decides every time. Recovered
    /// blocks have [`ThreadField::Unflagged`](crate::ThreadField::Unflagged).
    #[default]
    Recover,
    /// Trust the flag only (the published format text).
    Flag,
}

/// Options of the readers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReadOptions {
    /// Thread-id handling.
    pub thread_ids: ThreadIdMode,
}

/// A trace file in memory (or memory-mapped): the parsed header and lazy access to the
/// blocks.
#[derive(Clone, Debug)]
pub struct Trace<'a> {
    data: &'a [u8],
    header: Header,
    first_block: usize,
    options: ReadOptions,
}

impl<'a> Trace<'a> {
    /// Parses the header of `data`; blocks are read lazily.
    ///
    /// # Errors
    ///
    /// A bad prefix or JSON header (see [`Header::parse`]).
    pub fn parse(data: &'a [u8]) -> Result<Trace<'a>, Error> {
        Trace::with_options(data, ReadOptions::default())
    }

    /// [`Trace::parse`] with options.
    ///
    /// # Errors
    ///
    /// As [`Trace::parse`].
    pub fn with_options(data: &'a [u8], options: ReadOptions) -> Result<Trace<'a>, Error> {
        let (header, first_block) = Header::parse(data)?;
        Ok(Trace {
            data,
            header,
            first_block,
            options,
        })
    }

    /// The JSON header.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The architecture (word size).
    #[must_use]
    pub fn arch(&self) -> Arch {
        self.header.arch
    }

    /// The whole file.
    #[must_use]
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// File offset of the first block.
    #[must_use]
    pub fn first_block_offset(&self) -> Offset {
        Offset(self.first_block as u64)
    }

    #[inline]
    fn state(&self) -> DecoderState {
        DecoderState::new(self.arch(), self.options)
    }

    /// Every block, lazily; the iterator fuses after the first error (a truncated last
    /// block comes after every complete block).
    #[must_use]
    #[inline]
    pub fn blocks(&self) -> Blocks<'a> {
        Blocks::new(self.data, self.first_block, self.state())
    }
}

/// Reads a whole trace from `data` into owned records (convenience for small files and
/// tests).
///
/// # Errors
///
/// The first error.
pub fn read_records(data: &[u8]) -> Result<(Header, Vec<Record>), Error> {
    let trace = Trace::parse(data)?;
    let records = trace
        .blocks()
        .map(|b| b.map(|b| b.to_record()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((trace.header, records))
}
