//! The streaming reader over any `io::Read`: the description is read line by line (at
//! most 999 bytes each, as GDB), then one frame at a time into a reused buffer, so memory
//! stays bounded by the largest frame whatever the file size.

use std::io::{self, BufRead, BufReader, Read};

use trace_core::{LimitExceeded, Offset};

use crate::desc::{DescriptionParser, check_magic};
use crate::error::{Error, Warning};
use crate::limits;
use crate::model::Description;
use crate::raw::{FRAME_HEADER_LEN, MAGIC, MAX_LINE_LEN};
use crate::read::{Frame, FrameLayout, ReadOptions, finish_description};
use crate::tdesc::{Endian, TargetDescription};

/// Reads a trace file from a stream, one frame at a time.
#[derive(Debug)]
pub struct StreamReader<R> {
    r: BufReader<R>,
    description: Description,
    warnings: Vec<Warning>,
    tdesc: Option<TargetDescription>,
    layout: FrameLayout,
    offset: u64,
    index: u64,
    buf: Vec<u8>,
    done: bool,
}

fn io_err(offset: u64) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Io {
        offset: Offset(offset),
        source,
    }
}

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
            Err(e) => return Err(io_err(offset)(e)),
        }
    }
    Ok(got)
}

impl<R: Read> StreamReader<R> {
    /// Reads the header and the description section.
    ///
    /// # Errors
    ///
    /// As [`crate::TraceFile::parse`], plus I/O errors and a description over
    /// [`limits::MAX_DESCRIPTION_LEN`].
    pub fn from_reader(inner: R, opts: ReadOptions) -> Result<Self, Error> {
        let mut r = BufReader::with_capacity(64 * 1024, inner);
        let mut head = [0u8; 8];
        let n = read_full(&mut r, &mut head, 0)?;
        check_magic(head.get(..n).unwrap_or_default())?;
        let mut offset = MAGIC.len() as u64;
        let mut parser = DescriptionParser::default();
        let mut line = Vec::with_capacity(MAX_LINE_LEN.saturating_add(1));
        loop {
            line.clear();
            let limit = (MAX_LINE_LEN as u64).saturating_add(2);
            (&mut r)
                .take(limit)
                .read_until(b'\n', &mut line)
                .map_err(io_err(offset))?;
            match line.last() {
                Some(b'\n') => {
                    line.pop();
                }
                _ if line.len() > MAX_LINE_LEN => {
                    return Err(Error::LineTooLong {
                        offset: Offset(offset),
                        len: line.len() as u64,
                    });
                }
                _ => {
                    return Err(Error::UnterminatedDescription {
                        offset: Offset(offset),
                    });
                }
            }
            let next = offset.saturating_add(line.len() as u64).saturating_add(1);
            if line.is_empty() {
                let (description, mut warnings, tdesc_offset) = parser.finish(next);
                let (tdesc, layout) =
                    finish_description(&description, &mut warnings, tdesc_offset, next, opts)?;
                return Ok(StreamReader {
                    r,
                    description,
                    warnings,
                    tdesc,
                    layout,
                    offset: next,
                    index: 0,
                    buf: Vec::new(),
                    done: false,
                });
            }
            parser.line(&line, offset)?;
            LimitExceeded::check(
                Offset(offset),
                "description section length",
                next,
                limits::MAX_DESCRIPTION_LEN,
            )?;
            offset = next;
        }
    }

    /// The description section.
    #[must_use]
    pub fn description(&self) -> &Description {
        &self.description
    }

    /// GDB's warnings about the description.
    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The parsed target description, if usable.
    #[must_use]
    pub fn tdesc(&self) -> Option<&TargetDescription> {
        self.tdesc.as_ref()
    }

    /// Register block size and byte order.
    #[must_use]
    pub fn layout(&self) -> FrameLayout {
        self.layout
    }

    /// The file offset of the next frame.
    #[must_use]
    pub fn offset(&self) -> Offset {
        Offset(self.offset)
    }

    /// The next frame, borrowing the reader's buffer; `None` at the terminator. After an
    /// error, always `None`.
    ///
    /// # Errors
    ///
    /// [`Error::TruncatedFrame`] when the stream ends inside a frame,
    /// [`Error::MissingTerminator`] when it ends after a frame without the 2-byte zero
    /// terminator (bytes after the terminator are never read), [`Error::Limit`] for a
    /// frame over [`limits::MAX_STREAM_FRAME_LEN`], or an I/O error.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, Error> {
        if self.done {
            return Ok(None);
        }
        self.done = true;
        let mut h = [0u8; FRAME_HEADER_LEN];
        let got = read_full(&mut self.r, &mut h[..2], self.offset)?;
        if got < 2 {
            // As the slice reader: GDB needs the 2-byte terminator after the last frame.
            return Err(Error::MissingTerminator {
                offset: Offset(self.offset),
                frames: self.index,
            });
        }
        if h[..2] == [0, 0] {
            return Ok(None);
        }
        let got = got.saturating_add(read_full(
            &mut self.r,
            h.get_mut(2..).unwrap_or_default(),
            self.offset,
        )?);
        let truncated = |needed: u64, available: u64| Error::TruncatedFrame {
            offset: Offset(self.offset),
            frame: self.index,
            needed,
            available,
        };
        if got < FRAME_HEADER_LEN {
            return Err(truncated(FRAME_HEADER_LEN as u64, got as u64));
        }
        let (tp, size) = match self.layout.endian {
            Endian::Little => (
                i16::from_le_bytes([h[0], h[1]]),
                u32::from_le_bytes([h[2], h[3], h[4], h[5]]),
            ),
            Endian::Big => (
                i16::from_be_bytes([h[0], h[1]]),
                u32::from_be_bytes([h[2], h[3], h[4], h[5]]),
            ),
        };
        LimitExceeded::check(
            Offset(self.offset.saturating_add(2)),
            "frame size",
            u64::from(size),
            limits::MAX_STREAM_FRAME_LEN,
        )?;
        self.buf.clear();
        // Grows only as bytes actually arrive.
        (&mut self.r)
            .take(u64::from(size))
            .read_to_end(&mut self.buf)
            .map_err(io_err(self.offset))?;
        if self.buf.len() < size as usize {
            let needed = u64::from(size).saturating_add(FRAME_HEADER_LEN as u64);
            let available = (self.buf.len() as u64).saturating_add(FRAME_HEADER_LEN as u64);
            return Err(truncated(needed, available));
        }
        let frame = Frame {
            index: self.index,
            offset: Offset(self.offset),
            tracepoint: tp,
            data: &self.buf,
            layout: self.layout,
        };
        self.offset = self
            .offset
            .saturating_add(FRAME_HEADER_LEN as u64)
            .saturating_add(u64::from(size));
        self.index = self.index.saturating_add(1);
        self.done = false;
        Ok(Some(frame))
    }
}
