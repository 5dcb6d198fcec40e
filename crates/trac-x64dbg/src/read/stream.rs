//! The streaming reader over `io::Read`, with the replay of register states.

use trace_core::Offset;

use super::decode::{DecoderState, Fail, Meta};
use super::replay::ReplayState;
use super::{Block, Instruction, ReadOptions};
use crate::Error;
use crate::header::{Arch, Header};
use crate::limits;
use crate::regs::RegDump;

/// The streaming reader: blocks from an `io::Read` in constant memory (a buffer of 64 KiB
/// plus the largest block; user blocks up to [`limits::MAX_STREAM_USER_BLOCK`] bytes), with
/// the register state before each instruction and the counters of [`Cursor`](super::Cursor).
///
/// A block borrows the reader's buffer, so [`StreamReader::regs`] cannot be called while
/// it is held: [`StreamReader::next_instruction_with_regs`] and
/// [`StreamReader::next_block_with_regs`] give both at once (and [`Cursor`](super::Cursor)
/// has the same methods, so one loop serves slices and streams):
///
/// ```
/// use trac_x64dbg::StreamReader;
///
/// let file = &include_bytes!("../../../../testdata/x64dbg/basic.trace64")[..];
/// let mut stream = StreamReader::from_reader(file)?; // any io::Read: stdin, a decoder…
/// let mut last_pc = 0;
/// while let Some(step) = stream.next_instruction_with_regs() {
///     let (ins, regs) = step?;
///     last_pc = regs.ip(); // the instruction pointer before `ins`
///     let _ = ins.opcode();
/// }
/// assert_ne!(last_pc, 0);
/// assert_eq!(stream.full_dumps(), 3);
/// # Ok::<(), trac_x64dbg::Error>(())
/// ```
#[derive(Debug)]
pub struct StreamReader<R> {
    inner: R,
    header: Header,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    base: u64,
    eof: bool,
    state: DecoderState,
    replay: ReplayState,
    done: bool,
}

/// Bytes kept ahead of the current block (enough for the thread-id trial parse).
const LOOKAHEAD: usize = 64 * 1024;

impl<R: std::io::Read> StreamReader<R> {
    /// Reads the header from `inner`; blocks are read as they are asked for.
    ///
    /// # Errors
    ///
    /// I/O errors and header errors, as [`Header::parse`].
    pub fn from_reader(inner: R) -> Result<StreamReader<R>, Error> {
        StreamReader::with_options(inner, ReadOptions::default())
    }

    /// [`StreamReader::from_reader`] with options.
    ///
    /// # Errors
    ///
    /// As [`StreamReader::from_reader`].
    pub fn with_options(inner: R, options: ReadOptions) -> Result<StreamReader<R>, Error> {
        let mut r = StreamReader {
            inner,
            header: Header::new(Arch::X64, ""),
            buf: Vec::new(),
            start: 0,
            end: 0,
            base: 0,
            eof: false,
            state: DecoderState::new(Arch::X64, options),
            replay: ReplayState::new(Arch::X64),
            done: false,
        };
        r.fill(8)?;
        let len = r
            .buf
            .get(4..8)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_le_bytes);
        // Header::parse checks the length limit before anything is read for it.
        let want = 8 + len.min(limits::MAX_HEADER_LEN + 1) as usize;
        r.fill(want)?;
        let (header, consumed) = Header::parse(r.buf.get(..r.end).unwrap_or(&[]))?;
        r.state = DecoderState::new(header.arch, options);
        r.replay = ReplayState::new(header.arch);
        r.header = header;
        r.start = consumed;
        Ok(r)
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

    /// File offset of the next block (the first block's before any is read).
    #[must_use]
    pub fn offset(&self) -> Offset {
        Offset(self.base + self.start as u64)
    }

    /// Instructions read so far.
    #[must_use]
    pub fn instructions(&self) -> u64 {
        self.state.instructions
    }

    /// The register state before the last instruction returned (as [`Cursor::regs`]).
    ///
    /// [`Cursor::regs`]: super::Cursor::regs
    #[must_use]
    pub fn regs(&self) -> &RegDump {
        &self.replay.regs
    }

    /// Everything the replay has counted so far, in one value (as [`Cursor::counters`]).
    ///
    /// [`Cursor::counters`]: super::Cursor::counters
    #[must_use]
    pub fn counters(&self) -> super::Counters {
        super::Counters {
            user_blocks: self.user_blocks(),
            full_dumps: self.full_dumps(),
            sessions: self.sessions(),
            started_without_dump: self.started_without_dump(),
            recovered_thread_ids: self.recovered_thread_ids(),
        }
    }

    /// User blocks seen so far.
    #[must_use]
    pub fn user_blocks(&self) -> u64 {
        self.replay.user_blocks
    }

    /// Full dumps seen so far.
    #[must_use]
    pub fn full_dumps(&self) -> u64 {
        self.replay.full_dumps
    }

    /// Recording sessions seen so far (the first, plus appended ones).
    #[must_use]
    pub fn sessions(&self) -> u64 {
        self.replay.sessions
    }

    /// Whether the first instruction was not a full dump (its state started as zeros).
    #[must_use]
    pub fn started_without_dump(&self) -> bool {
        self.replay.started_without_dump
    }

    /// Blocks whose thread-id bytes had no flag (recovered pre-#3920 quirk).
    #[must_use]
    pub fn recovered_thread_ids(&self) -> u64 {
        self.state.quirks
    }

    /// Makes at least `want` bytes available from `start`, unless the input ends first.
    fn fill(&mut self, want: usize) -> Result<(), Error> {
        while self.end - self.start < want && !self.eof {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.base += self.start as u64;
                self.end -= self.start;
                self.start = 0;
            }
            let target = want.max(LOOKAHEAD).saturating_mul(2);
            if self.buf.len() < target {
                self.buf.resize(target, 0);
            }
            let Some(space) = self.buf.get_mut(self.end..) else {
                break;
            };
            match self.inner.read(space) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(Error::Io {
                        offset: Offset(self.base + self.end as u64),
                        source,
                    });
                }
            }
        }
        Ok(())
    }

    /// The next block, borrowing the reader's buffer, with the register state before it;
    /// `None` at the end, and forever after an error. An instruction's register changes
    /// are applied first (as [`Cursor::next_block`](super::Cursor::next_block)).
    pub fn next_block_with_regs(&mut self) -> Option<Result<(Block<'_>, &RegDump), Error>> {
        let (meta, start) = match self.advance()? {
            Ok(decoded) => decoded,
            Err(e) => return Some(Err(e)),
        };
        let bytes = self.buf.get(start..self.end).unwrap_or(&[]);
        Some(Ok((meta.materialize(bytes), &self.replay.regs)))
    }

    /// The next instruction (user blocks are skipped and counted) with the register state
    /// before it (as [`Cursor::next_instruction`](super::Cursor::next_instruction)).
    pub fn next_instruction_with_regs(
        &mut self,
    ) -> Option<Result<(Instruction<'_>, &RegDump), Error>> {
        // The loop holds no borrow of the buffer (a block borrowed in a loop that goes on
        // to read more would not pass the borrow checker): blocks are made after it.
        loop {
            match self.advance()? {
                Ok((meta @ Meta::Instr(_), start)) => {
                    let bytes = self.buf.get(start..self.end).unwrap_or(&[]);
                    return match meta.materialize(bytes) {
                        Block::Instruction(ins) => Some(Ok((ins, &self.replay.regs))),
                        Block::User(_) => None,
                    };
                }
                Ok((Meta::User { .. }, _)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Decodes the next block and takes it into the replay state: its [`Meta`] and where
    /// it starts in the buffer, which stays as it is until the next call.
    fn advance(&mut self) -> Option<Result<(Meta, usize), Error>> {
        if self.done {
            return None;
        }
        let mut want = LOOKAHEAD;
        let meta = loop {
            if let Err(e) = self.fill(want) {
                self.done = true;
                return Some(Err(e));
            }
            if self.start >= self.end {
                self.done = true;
                return None;
            }
            let data = self.buf.get(self.start..self.end).unwrap_or(&[]);
            let base = self.base + self.start as u64;
            match self.state.decode(data, 0, base, self.eof) {
                Ok(meta) => break meta,
                Err(Fail::Error(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Err(Fail::NeedMore(n)) => {
                    if n > limits::MAX_STREAM_USER_BLOCK + LOOKAHEAD {
                        self.done = true;
                        return Some(Err(Error::Limit(trace_core::LimitExceeded {
                            offset: Offset(base),
                            what: "block length for the streaming reader",
                            found: n as u64,
                            limit: limits::MAX_STREAM_USER_BLOCK as u64,
                        })));
                    }
                    want = n.max(want.saturating_mul(2));
                }
            }
        };
        let start = self.start;
        self.start += meta.len();
        let bytes = self.buf.get(start..self.end).unwrap_or(&[]);
        self.replay.block(&meta.materialize(bytes));
        Some(Ok((meta, start)))
    }
}
