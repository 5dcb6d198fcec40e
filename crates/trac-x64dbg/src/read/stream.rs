//! The streaming reader over `io::Read`.

use trace_core::Offset;

use super::decode::{DecoderState, Fail};
use super::{Block, ReadOptions};
use crate::Error;
use crate::header::{Arch, Header};
use crate::limits;

/// The streaming reader: blocks from an `io::Read` in constant memory (a buffer of 64 KiB
/// plus the largest block; user blocks up to [`limits::MAX_STREAM_USER_BLOCK`] bytes).
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
    done: bool,
}

/// Bytes kept ahead of the current block (enough for the thread-id trial parse).
const LOOKAHEAD: usize = 64 * 1024;

impl<R: std::io::Read> StreamReader<R> {
    /// Reads the header from `inner`.
    ///
    /// # Errors
    ///
    /// I/O errors and header errors, as [`Header::parse`].
    pub fn new(inner: R) -> Result<StreamReader<R>, Error> {
        StreamReader::with_options(inner, ReadOptions::default())
    }

    /// [`StreamReader::new`] with options.
    ///
    /// # Errors
    ///
    /// As [`StreamReader::new`].
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
        r.header = header;
        r.start = consumed;
        Ok(r)
    }

    /// The JSON header.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.header
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

    /// The next block, borrowing the reader's buffer; `None` at the end. After an error,
    /// `None` forever.
    pub fn next_block(&mut self) -> Option<Result<Block<'_>, Error>> {
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
        Some(Ok(meta.materialize(bytes)))
    }
}
