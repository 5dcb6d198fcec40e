//! Reading: the whole file over `&[u8]` ([`TraceFile`]), the lazy frame iterator
//! ([`Frames`]) and the lazy block iterator of a frame ([`Blocks`]). Nothing is copied:
//! frames and blocks borrow the input.

use trace_core::Offset;
use zerocopy::FromBytes;
use zerocopy::byteorder::ByteOrder;

use crate::desc::parse_description;
use crate::error::{Error, Warning};
use crate::model::{BlockData, Description, FrameData, TraceFileData};
use crate::raw::{
    BLOCK_MEMORY, BLOCK_REGISTERS, BLOCK_TSV, BigEndian, FRAME_HEADER_LEN, FrameHeader,
    LittleEndian, MEMORY_BLOCK_HEADER_LEN, MemoryBlockHeader, TSV_BLOCK_LEN, TsvBlock,
};
use crate::tdesc::{Endian, TargetDescription};

/// How to read a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The target's byte order. `None`: from the target description's architecture where
    /// that decides it, else little-endian.
    pub endian: Option<Endian>,
}

/// Frame-section settings shared by frames and blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameLayout {
    /// Bytes of an `R` block (the `R` line).
    pub register_size: usize,
    /// The target's byte order.
    pub endian: Endian,
}

/// A parsed trace file over a borrowed byte slice: the description (parsed eagerly, it is
/// small) and the frames (parsed lazily by [`TraceFile::frames`]).
#[derive(Debug)]
pub struct TraceFile<'a> {
    data: &'a [u8],
    description: Description,
    warnings: Vec<Warning>,
    tdesc: Option<TargetDescription>,
    layout: FrameLayout,
    frames_offset: usize,
}

impl<'a> TraceFile<'a> {
    /// Parses the header and the description section; frames are read on demand.
    ///
    /// # Errors
    ///
    /// What GDB's `target tfile` rejects: a bad header, a line over 999 bytes, a malformed
    /// status, a bad hex digit in a hex-string field, a missing empty line, no `R` size.
    /// A bad target description is only a warning (as in GDB).
    pub fn parse(data: &'a [u8], opts: ReadOptions) -> Result<Self, Error> {
        let (description, mut warnings, tdesc_offset, frames_offset) = parse_description(data)?;
        let (tdesc, layout) = finish_description(
            &description,
            &mut warnings,
            tdesc_offset,
            frames_offset as u64,
            opts,
        )?;
        Ok(TraceFile {
            data,
            description,
            warnings,
            tdesc,
            layout,
            frames_offset,
        })
    }

    /// The description section.
    #[must_use]
    pub fn description(&self) -> &Description {
        &self.description
    }

    /// What GDB would warn about (unknown lines, no frames, a bad target description, a
    /// register layout that does not add up to the `R` size).
    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The parsed target description, if the file has a usable one.
    #[must_use]
    pub fn tdesc(&self) -> Option<&TargetDescription> {
        self.tdesc.as_ref()
    }

    /// Register block size and byte order.
    #[must_use]
    pub fn layout(&self) -> FrameLayout {
        self.layout
    }

    /// The file offset of the first frame.
    #[must_use]
    pub fn frames_offset(&self) -> Offset {
        Offset(self.frames_offset as u64)
    }

    /// The whole input.
    #[must_use]
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// A lazy iterator over the frames.
    #[must_use]
    pub fn frames(&self) -> Frames<'a> {
        Frames::new(self.data, self.frames_offset, self.layout)
    }

    /// Converts to the owned model (every frame decoded), for the writer.
    ///
    /// # Errors
    ///
    /// The first error of the frames or their blocks.
    pub fn to_data(&self) -> Result<TraceFileData, Error> {
        let mut frames_out = Vec::new();
        let mut it = self.frames();
        for f in &mut it {
            let f = f?;
            let mut blocks = Vec::new();
            for b in f.blocks() {
                blocks.push(b?.to_owned_block());
            }
            frames_out.push(FrameData {
                tracepoint: f.tracepoint,
                blocks,
            });
        }
        Ok(TraceFileData {
            description: self.description.clone(),
            frames: frames_out,
            end: it.trailer().unwrap_or_default().to_vec(),
        })
    }
}

/// After the empty line: the target description, the byte order and the `R` size check.
pub(crate) fn finish_description(
    description: &Description,
    warnings: &mut Vec<Warning>,
    tdesc_offset: u64,
    frames_offset: u64,
    opts: ReadOptions,
) -> Result<(Option<TargetDescription>, FrameLayout), Error> {
    let register_size = match description.register_size {
        Some(n) if n > 0 => n,
        _ => {
            return Err(Error::NoRegisterSize {
                offset: Offset(frames_offset),
            });
        }
    };
    let tdesc = match description.tdesc_xml() {
        None => None,
        Some(xml) => match TargetDescription::parse(&xml, tdesc_offset) {
            Ok(td) => {
                if let Err(msg) = td.check_size(register_size) {
                    warnings.push(Warning {
                        offset: Offset(tdesc_offset),
                        message: msg,
                    });
                }
                Some(td)
            }
            Err(e) => {
                warnings.push(Warning {
                    offset: Offset(tdesc_offset),
                    message: format!("Could not load XML target description; ignoring ({e})"),
                });
                None
            }
        },
    };
    let endian = opts
        .endian
        .or_else(|| tdesc.as_ref().and_then(TargetDescription::endian))
        .unwrap_or_default();
    Ok((
        tdesc,
        FrameLayout {
            register_size: register_size as usize,
            endian,
        },
    ))
}

/// One trace frame: a view of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The frame's 0-based number (what `tfind N` uses).
    pub index: u64,
    /// The file offset of its 6-byte header.
    pub offset: Offset,
    /// The tracepoint number (the file's numbering; GDB shows 0xffff as -1).
    pub tracepoint: i16,
    /// The block bytes.
    pub data: &'a [u8],
    /// Register size and byte order.
    pub layout: FrameLayout,
}

impl<'a> Frame<'a> {
    /// The file offset of the first block.
    #[must_use]
    pub fn data_offset(&self) -> Offset {
        Offset(self.offset.0.saturating_add(FRAME_HEADER_LEN as u64))
    }

    /// A lazy iterator over the blocks.
    #[must_use]
    pub fn blocks(&self) -> Blocks<'a> {
        Blocks {
            data: self.data,
            pos: 0,
            base: self.data_offset().0,
            frame: self.index,
            layout: self.layout,
            done: false,
        }
    }

    /// The first `R` block's bytes (GDB uses the first), `None` without one.
    ///
    /// # Errors
    ///
    /// A block error met before an `R` block.
    pub fn registers(&self) -> Result<Option<&'a [u8]>, Error> {
        for b in self.blocks() {
            if let Block::Registers { data, .. } = b? {
                return Ok(Some(data));
            }
        }
        Ok(None)
    }

    /// The value of a register named by the target description, `None` without an `R`
    /// block or when the register does not fit in it.
    ///
    /// # Errors
    ///
    /// A block error met before an `R` block.
    pub fn register(
        &self,
        tdesc: &TargetDescription,
        name: &str,
    ) -> Result<Option<RegisterValue<'a>>, Error> {
        let Some(reg) = tdesc.register(name) else {
            return Ok(None);
        };
        let Some(regs) = self.registers()? else {
            return Ok(None);
        };
        Ok(regs
            .get(reg.offset..reg.offset.saturating_add(reg.size()))
            .map(|bytes| RegisterValue {
                bytes,
                endian: self.layout.endian,
            }))
    }

    /// The collected bytes of `[address, address + len)`: `None` for bytes no `M` block
    /// holds; where blocks overlap, the last one wins.
    ///
    /// # Errors
    ///
    /// The first block error of the frame.
    pub fn memory(&self, address: u64, len: usize) -> Result<Vec<Option<u8>>, Error> {
        let mut out = vec![None; len];
        let end = address.saturating_add(len as u64);
        for b in self.blocks() {
            if let Block::Memory {
                address: a, data, ..
            } = b?
            {
                let b_end = a.saturating_add(data.len() as u64);
                let lo = a.max(address);
                let hi = b_end.min(end);
                if lo >= hi {
                    continue;
                }
                // Both offsets are below `len` / `data.len()`, so they fit in usize.
                let src_at = usize::try_from(lo.wrapping_sub(a)).unwrap_or(usize::MAX);
                let dst_at = usize::try_from(lo.wrapping_sub(address)).unwrap_or(usize::MAX);
                let n = usize::try_from(hi.wrapping_sub(lo)).unwrap_or(0);
                let src = data
                    .get(src_at..src_at.saturating_add(n))
                    .unwrap_or_default();
                let dst = out
                    .get_mut(dst_at..dst_at.saturating_add(n))
                    .unwrap_or_default();
                for (d, s) in dst.iter_mut().zip(src) {
                    *d = Some(*s);
                }
            }
        }
        Ok(out)
    }

    /// The trace state variable values of the frame, last block per number wins, in order of
    /// first appearance.
    ///
    /// # Errors
    ///
    /// The first block error of the frame.
    pub fn tsvs(&self) -> Result<Vec<(i32, i64)>, Error> {
        let mut out: Vec<(i32, i64)> = Vec::new();
        for b in self.blocks() {
            if let Block::Tsv { number, value, .. } = b? {
                match out.iter_mut().find(|(n, _)| *n == number) {
                    Some(e) => e.1 = value,
                    None => out.push((number, value)),
                }
            }
        }
        Ok(out)
    }
}

/// A register's bytes in a frame, in target byte order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterValue<'a> {
    /// The bytes as stored (target order).
    pub bytes: &'a [u8],
    /// The target's byte order.
    pub endian: Endian,
}

impl RegisterValue<'_> {
    /// The value as an integer, for registers of at most 8 bytes.
    #[must_use]
    pub fn as_u64(&self) -> Option<u64> {
        if self.bytes.len() > 8 {
            return None;
        }
        let mut v = 0u64;
        match self.endian {
            Endian::Big => {
                for &b in self.bytes {
                    v = v.wrapping_shl(8) | u64::from(b);
                }
            }
            Endian::Little => {
                for &b in self.bytes.iter().rev() {
                    v = v.wrapping_shl(8) | u64::from(b);
                }
            }
        }
        Some(v)
    }
}

/// One block of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block<'a> {
    /// `R`: the register block.
    Registers {
        /// File offset of the type byte.
        offset: Offset,
        /// Exactly `R`-size bytes, target order.
        data: &'a [u8],
    },
    /// `M`: collected memory.
    Memory {
        /// File offset of the type byte.
        offset: Offset,
        /// Start address.
        address: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// `V`: a trace state variable's value.
    Tsv {
        /// File offset of the type byte.
        offset: Offset,
        /// The variable's number.
        number: i32,
        /// Its value.
        value: i64,
    },
}

impl Block<'_> {
    /// The owned form (for the writer).
    #[must_use]
    pub fn to_owned_block(&self) -> BlockData {
        match *self {
            Block::Registers { data, .. } => BlockData::Registers(data.to_vec()),
            Block::Memory { address, data, .. } => BlockData::Memory {
                address,
                data: data.to_vec(),
            },
            Block::Tsv { number, value, .. } => BlockData::Tsv { number, value },
        }
    }
}

/// The lazy iterator over a frame's blocks. Fuses after the first error (an unknown block
/// type cannot be skipped: blocks carry no length).
#[derive(Clone, Debug)]
pub struct Blocks<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    frame: u64,
    layout: FrameLayout,
    done: bool,
}

impl<'a> Blocks<'a> {
    #[inline]
    fn next_block<O: ByteOrder + 'a>(&mut self) -> Result<Option<Block<'a>>, Error> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let Some((&code, body)) = rest.split_first() else {
            return Ok(None);
        };
        let offset = Offset(self.base.saturating_add(self.pos as u64));
        let overrun = |block: &'static str, needed: usize| Error::BlockOverrun {
            offset,
            frame: self.frame,
            block,
            needed: needed as u64,
            available: rest.len() as u64,
        };
        let (block, len) = match code {
            BLOCK_REGISTERS => {
                let n = self.layout.register_size;
                let data = body
                    .get(..n)
                    .ok_or_else(|| overrun("R", n.saturating_add(1)))?;
                (Block::Registers { offset, data }, n.saturating_add(1))
            }
            BLOCK_MEMORY => {
                let (h, tail) = MemoryBlockHeader::<O>::ref_from_prefix(body)
                    .map_err(|_| overrun("M", MEMORY_BLOCK_HEADER_LEN))?;
                let n = usize::from(h.length.get());
                let total = MEMORY_BLOCK_HEADER_LEN.saturating_add(n);
                let data = tail.get(..n).ok_or_else(|| overrun("M", total))?;
                (
                    Block::Memory {
                        offset,
                        address: h.address.get(),
                        data,
                    },
                    total,
                )
            }
            BLOCK_TSV => {
                let (v, _) = TsvBlock::<O>::ref_from_prefix(body)
                    .map_err(|_| overrun("V", TSV_BLOCK_LEN))?;
                (
                    Block::Tsv {
                        offset,
                        number: v.number.get(),
                        value: v.value.get(),
                    },
                    TSV_BLOCK_LEN,
                )
            }
            _ => {
                return Err(Error::UnknownBlock {
                    offset,
                    frame: self.frame,
                    code,
                    found: char::from(code),
                });
            }
        };
        self.pos = self.pos.saturating_add(len);
        Ok(Some(block))
    }
}

impl<'a> Iterator for Blocks<'a> {
    type Item = Result<Block<'a>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = match self.layout.endian {
            Endian::Little => self.next_block::<LittleEndian>(),
            Endian::Big => self.next_block::<BigEndian>(),
        };
        match r {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            let left = self.data.len().saturating_sub(self.pos);
            (usize::from(left > 0), Some(left))
        }
    }
}

impl core::iter::FusedIterator for Blocks<'_> {}

/// The lazy iterator over the frames of a file. Ends at a tracepoint number 0 (the
/// terminator); a truncated frame, or input that ends after a frame without the
/// terminator ([`Error::MissingTerminator`], as GDB), is an error after every complete
/// frame was yielded. Fuses after the first error.
#[derive(Clone, Debug)]
pub struct Frames<'a> {
    data: &'a [u8],
    pos: usize,
    index: u64,
    layout: FrameLayout,
    state: State,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Running,
    /// Ended at a terminator; the trailer starts at `pos`.
    Ended,
    Failed,
}

impl<'a> Frames<'a> {
    /// Frames of `data` (a whole file) starting at file offset `start`.
    #[must_use]
    pub fn new(data: &'a [u8], start: usize, layout: FrameLayout) -> Self {
        Frames {
            data,
            pos: start,
            index: 0,
            layout,
            state: State::Running,
        }
    }

    /// After the iterator ended without error: the bytes from the terminator (included) to
    /// the end of the input.
    #[must_use]
    pub fn trailer(&self) -> Option<&'a [u8]> {
        (self.state == State::Ended).then(|| self.data.get(self.pos..).unwrap_or_default())
    }

    /// The file offset of the next frame header.
    #[must_use]
    pub fn offset(&self) -> Offset {
        Offset(self.pos as u64)
    }

    /// Yields `(file offset, frame)` pairs (the offset is also in [`Frame::offset`]).
    pub fn with_offsets(self) -> impl Iterator<Item = Result<(Offset, Frame<'a>), Error>> {
        self.map(|r| r.map(|f| (f.offset, f)))
    }

    #[inline]
    fn next_frame<O: ByteOrder + 'a>(&mut self) -> Result<Option<Frame<'a>>, Error> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        if rest.get(..2) == Some(&[0, 0]) {
            return Ok(None);
        }
        // GDB reads the 2-byte tracepoint number first and fails when it is not all there.
        if rest.len() < 2 {
            return Err(Error::MissingTerminator {
                offset: Offset(self.pos as u64),
                frames: self.index,
            });
        }
        let truncated = |needed: u64| Error::TruncatedFrame {
            offset: Offset(self.pos as u64),
            frame: self.index,
            needed,
            available: rest.len() as u64,
        };
        let (h, body) = FrameHeader::<O>::ref_from_prefix(rest)
            .map_err(|_| truncated(FRAME_HEADER_LEN as u64))?;
        let size = h.data_size.get();
        let data = body
            .get(..size as usize)
            .ok_or_else(|| truncated(u64::from(size).saturating_add(FRAME_HEADER_LEN as u64)))?;
        let frame = Frame {
            index: self.index,
            offset: Offset(self.pos as u64),
            tracepoint: h.tracepoint.get(),
            data,
            layout: self.layout,
        };
        self.pos = self
            .pos
            .saturating_add(FRAME_HEADER_LEN)
            .saturating_add(data.len());
        self.index = self.index.saturating_add(1);
        Ok(Some(frame))
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.state != State::Running {
            return None;
        }
        let r = match self.layout.endian {
            Endian::Little => self.next_frame::<LittleEndian>(),
            Endian::Big => self.next_frame::<BigEndian>(),
        };
        match r {
            Ok(Some(f)) => Some(Ok(f)),
            Ok(None) => {
                self.state = State::Ended;
                None
            }
            Err(e) => {
                self.state = State::Failed;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.state == State::Running {
            let left = self.data.len().saturating_sub(self.pos);
            (0, Some(left / FRAME_HEADER_LEN))
        } else {
            (0, Some(0))
        }
    }
}

impl core::iter::FusedIterator for Frames<'_> {}
