//! Writing: the owned model ([`TraceFileData`]) to bytes, exactly as GDB's `tsave` writes
//! them (notes §1.3): header, `R`, `tdesc` lines, `status`, `tsv` lines, `tp` lines per
//! tracepoint (`T`, `A`…, `S`…, `Z`…, `V`), the empty line, the frames, the terminator.
//! The writer checks what would make GDB reject or misread the file.

use std::fmt::Write as _;
use std::io;

use zerocopy::IntoBytes;
use zerocopy::byteorder::{ByteOrder, I16, I32, I64, U16, U32, U64};

use crate::model::{BlockData, Description, FrameData, SourceKind, Status, TraceFileData};
use crate::raw::{
    BLOCK_MEMORY, BLOCK_REGISTERS, BLOCK_TSV, BigEndian, FrameHeader, LittleEndian, MAGIC,
    MAX_LINE_LEN, MemoryBlockHeader, TsvBlock,
};
use crate::tdesc::Endian;

/// Why a model cannot be written as a file GDB reads back the same.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The description has no `R` size, or it is 0.
    #[error("the description has no register block size (R line)")]
    NoRegisterSize,
    /// A description line would be longer than GDB's 999-byte limit.
    #[error("description line {line:?}… is {len} bytes, above GDB's limit of 999")]
    LineTooLong {
        /// The start of the line.
        line: String,
        /// Its length.
        len: usize,
    },
    /// A text field contains a newline, which would split the line.
    #[error("a {what} contains a newline")]
    Newline {
        /// The field.
        what: &'static str,
    },
    /// A field that would not read back as written (e.g. an empty unknown line, which
    /// would end the description section early).
    #[error("{what} {value:?} would not read back as written")]
    Field {
        /// The field.
        what: &'static str,
        /// Its value (cut to 60 characters).
        value: String,
    },
    /// Frame `frame` uses tracepoint number 0, which ends the frames.
    #[error("frame {frame} has tracepoint number 0, which marks the end of the frames")]
    ZeroTracepoint {
        /// The frame's index.
        frame: usize,
    },
    /// An `R` block whose length is not the `R` size.
    #[error("frame {frame}: register block of {len} bytes, but the R size is {expected}")]
    RegisterSize {
        /// The frame's index.
        frame: usize,
        /// The block's length.
        len: usize,
        /// The `R` size.
        expected: u32,
    },
    /// An `M` block of more than 65535 bytes.
    #[error("frame {frame}: memory block of {len} bytes is above the 65535-byte limit")]
    MemoryTooLong {
        /// The frame's index.
        frame: usize,
        /// The block's length.
        len: usize,
    },
    /// A frame whose blocks exceed 4 GiB.
    #[error("frame {frame} is larger than 4 GiB")]
    FrameTooLarge {
        /// The frame's index.
        frame: usize,
    },
    /// The end bytes do not start with a 2-byte zero (GDB refuses frames without it).
    #[error("the end marker must start with two zero bytes")]
    BadEnd,
    /// Writing to the output failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

fn push_line(out: &mut Vec<u8>, line: &str) -> Result<(), WriteError> {
    if line.len() > MAX_LINE_LEN {
        return Err(WriteError::LineTooLong {
            line: line.chars().take(60).collect(),
            len: line.len(),
        });
    }
    if line.contains('\n') {
        return Err(WriteError::Newline {
            what: "description line",
        });
    }
    out.extend_from_slice(line.as_bytes());
    out.push(b'\n');
    Ok(())
}

fn bad_field(what: &'static str, value: &str) -> WriteError {
    WriteError::Field {
        what,
        value: value.chars().take(60).collect(),
    }
}

/// Checks the fields the reader would otherwise split or misread.
fn check_fields(desc: &Description) -> Result<(), WriteError> {
    if let Some(st) = &desc.status {
        for (k, v) in &st.unknown {
            if k.is_empty() || k.contains([':', ';']) || k == "tunknown" {
                return Err(bad_field("unknown status key", k));
            }
            if v.contains(';') {
                return Err(bad_field("unknown status value", v));
            }
        }
    }
    for t in &desc.tracepoints {
        for src in &t.sources {
            if let SourceKind::Other(k) = &src.kind
                && (k.is_empty() || k.contains(':') || ["at", "cond", "cmd"].contains(&k.as_str()))
            {
                return Err(bad_field("tp Z source kind", k));
            }
        }
    }
    for l in &desc.unknown_lines {
        let known_tp = l
            .strip_prefix("tp ")
            .is_some_and(|r| r.starts_with(['T', 'A', 'S', 'Z', 'V']));
        let known = ["R ", "status ", "tsv ", "tdesc "]
            .iter()
            .any(|p| l.starts_with(p));
        if l.is_empty() || known || known_tp {
            return Err(bad_field("unknown line", l));
        }
    }
    Ok(())
}

fn hex(s: &mut String, bytes: &[u8]) {
    trace_core::hex::encode_to(s, bytes);
}

/// The `status` line's text after `status ` (GDB's field order and omission rules).
#[must_use]
pub fn status_payload(st: &Status) -> String {
    let mut s = String::new();
    s.push(if st.running { '1' } else { '0' });
    s.push(';');
    s.push_str(st.stop_reason.key());
    if let (true, Some(d)) = (st.stop_reason.has_description(), &st.stop_description) {
        s.push(':');
        hex(&mut s, d);
    }
    let _ = write!(s, ":{:x}", st.stopping_tracepoint);
    for (key, v) in [
        ("tframes", st.frames),
        ("tcreated", st.created),
        ("tfree", st.free),
        ("tsize", st.size),
        ("disconn", st.disconnected),
        ("circular", st.circular),
        ("starttime", st.start_time),
        ("stoptime", st.stop_time),
    ] {
        if let Some(v) = v {
            let _ = write!(s, ";{key}:{v:x}");
        }
    }
    for (key, v) in [("notes", &st.notes), ("username", &st.username)] {
        if let Some(v) = v {
            let _ = write!(s, ";{key}:");
            hex(&mut s, v);
        }
    }
    for (k, v) in &st.unknown {
        let _ = write!(s, ";{k}:{v}");
    }
    s
}

/// Appends the header and the description section (ending with the empty line).
///
/// # Errors
///
/// [`WriteError`] when a line would be too long, a field contains a newline or would not
/// read back as written, or there is no `R` size.
pub fn write_description(desc: &Description, out: &mut Vec<u8>) -> Result<(), WriteError> {
    let rsize = desc
        .register_size
        .filter(|&n| n > 0)
        .ok_or(WriteError::NoRegisterSize)?;
    check_fields(desc)?;
    out.extend_from_slice(MAGIC);
    push_line(out, &format!("R {rsize:x}"))?;
    for l in &desc.tdesc_lines {
        push_line(out, &format!("tdesc {l}"))?;
    }
    if let Some(st) = &desc.status {
        push_line(out, &format!("status {}", status_payload(st)))?;
    }
    for v in &desc.tsvs {
        let mut s = format!(
            "tsv {:x}:{:x}:{:x}:",
            v.number,
            u64::from_ne_bytes(v.initial.to_ne_bytes()),
            v.builtin
        );
        hex(&mut s, &v.name);
        push_line(out, &s)?;
    }
    for t in &desc.tracepoints {
        let (n, a) = (t.number, t.address);
        if t.defined {
            let mut s = format!(
                "tp T{n:x}:{a:x}:{}:{:x}:{:x}",
                if t.enabled { 'E' } else { 'D' },
                t.step_count,
                t.pass_count
            );
            if let Some(f) = t.fast {
                let _ = write!(s, ":F{f:x}");
            }
            if t.is_static {
                s.push_str(":S");
            }
            if let Some(c) = &t.condition {
                let _ = write!(s, ":X{:x},", c.len());
                hex(&mut s, c);
            }
            push_line(out, &s)?;
        }
        for act in &t.actions {
            push_line(out, &format!("tp A{n:x}:{a:x}:{act}"))?;
        }
        for act in &t.step_actions {
            push_line(out, &format!("tp S{n:x}:{a:x}:{act}"))?;
        }
        for src in &t.sources {
            let mut s = format!(
                "tp Z{n:x}:{a:x}:{}:0:{:x}:",
                src.kind.as_str(),
                src.text.len()
            );
            hex(&mut s, &src.text);
            push_line(out, &s)?;
        }
        for (hits, usage) in &t.status {
            push_line(out, &format!("tp V{n:x}:{a:x}:{hits:x}:{usage:x}"))?;
        }
    }
    for l in &desc.unknown_lines {
        push_line(out, l)?;
    }
    out.push(b'\n');
    Ok(())
}

/// Appends frames to a buffer one block at a time, without building a [`FrameData`]: what
/// a converter streaming millions of frames uses (no allocation per frame; the caller
/// reuses the buffer and drains it to its output between frames).
///
/// ```
/// use gdb_tfile::write::FrameWriter;
/// use gdb_tfile::{Endian, ReadOptions, TraceFile};
///
/// let description = gdb_tfile::Description {
///     register_size: Some(8),
///     ..Default::default()
/// };
/// let mut out = Vec::new();
/// gdb_tfile::write::write_description(&description, &mut out)?;
/// let mut w = FrameWriter::new(8, Endian::Little);
/// w.begin(&mut out, 1)?;
/// w.registers(&mut out, &0x401000u64.to_le_bytes())?;
/// w.memory(&mut out, 0x404028, &[1, 2, 3, 4])?;
/// w.end(&mut out)?;
/// FrameWriter::terminate(&mut out);
/// let file = TraceFile::parse(&out, ReadOptions::default())?;
/// let frame = file.frames().next().unwrap()?;
/// assert_eq!(frame.memory(0x404028, 4)?, [Some(1), Some(2), Some(3), Some(4)]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct FrameWriter {
    register_size: u32,
    endian: Endian,
    /// Where the open frame's header starts in the buffer and its tracepoint, if a frame
    /// is open.
    open: Option<(usize, i16)>,
    /// The number of frames begun so far (the open frame's index is one less).
    frames: usize,
}

impl FrameWriter {
    /// A writer of frames whose `R` blocks are `register_size` bytes, in `endian` order.
    #[must_use]
    pub fn new(register_size: u32, endian: Endian) -> Self {
        Self {
            register_size,
            endian,
            open: None,
            frames: 0,
        }
    }

    /// The number of frames begun so far.
    #[must_use]
    pub fn frames(&self) -> usize {
        self.frames
    }

    fn index(&self) -> usize {
        self.frames.saturating_sub(1)
    }

    /// Starts a frame of `tracepoint` at the end of `out` (a frame still open is ended
    /// first). The header's size is filled in by [`FrameWriter::end`].
    ///
    /// # Errors
    ///
    /// [`WriteError::ZeroTracepoint`] for tracepoint 0 (it marks the end of the frames);
    /// the errors of [`FrameWriter::end`] for the frame still open.
    #[inline]
    pub fn begin(&mut self, out: &mut Vec<u8>, tracepoint: i16) -> Result<(), WriteError> {
        self.end(out)?;
        if tracepoint == 0 {
            return Err(WriteError::ZeroTracepoint { frame: self.frames });
        }
        self.open = Some((out.len(), tracepoint));
        out.extend_from_slice(&self.header(tracepoint, 0));
        self.frames = self.frames.saturating_add(1);
        Ok(())
    }

    #[inline]
    fn header(&self, tracepoint: i16, size: u32) -> [u8; crate::raw::FRAME_HEADER_LEN] {
        fn bytes<O: ByteOrder>(tracepoint: i16, size: u32) -> [u8; crate::raw::FRAME_HEADER_LEN] {
            zerocopy::transmute!(FrameHeader::<O> {
                tracepoint: I16::new(tracepoint),
                data_size: U32::new(size),
            })
        }
        match self.endian {
            Endian::Little => bytes::<LittleEndian>(tracepoint, size),
            Endian::Big => bytes::<BigEndian>(tracepoint, size),
        }
    }

    /// Appends an `R` block: `regs` in the target's byte order, the `R` size long.
    ///
    /// # Errors
    ///
    /// [`WriteError::RegisterSize`] when `regs` is not the `R` size.
    #[inline]
    pub fn registers(&mut self, out: &mut Vec<u8>, regs: &[u8]) -> Result<(), WriteError> {
        if regs.len() != self.register_size as usize {
            return Err(WriteError::RegisterSize {
                frame: self.index(),
                len: regs.len(),
                expected: self.register_size,
            });
        }
        out.push(BLOCK_REGISTERS);
        out.extend_from_slice(regs);
        Ok(())
    }

    /// Appends an `M` block: `data` collected at `address`.
    ///
    /// # Errors
    ///
    /// [`WriteError::MemoryTooLong`] when `data` is over 65535 bytes.
    #[inline]
    pub fn memory(
        &mut self,
        out: &mut Vec<u8>,
        address: u64,
        data: &[u8],
    ) -> Result<(), WriteError> {
        let len = u16::try_from(data.len()).map_err(|_| WriteError::MemoryTooLong {
            frame: self.index(),
            len: data.len(),
        })?;
        out.push(BLOCK_MEMORY);
        match self.endian {
            Endian::Little => out.extend_from_slice(
                MemoryBlockHeader::<LittleEndian> {
                    address: U64::new(address),
                    length: U16::new(len),
                }
                .as_bytes(),
            ),
            Endian::Big => out.extend_from_slice(
                MemoryBlockHeader::<BigEndian> {
                    address: U64::new(address),
                    length: U16::new(len),
                }
                .as_bytes(),
            ),
        }
        out.extend_from_slice(data);
        Ok(())
    }

    /// Appends a `V` block: trace state variable `number` has `value`.
    pub fn tsv(&mut self, out: &mut Vec<u8>, number: i32, value: i64) {
        out.push(BLOCK_TSV);
        match self.endian {
            Endian::Little => out.extend_from_slice(
                TsvBlock::<LittleEndian> {
                    number: I32::new(number),
                    value: I64::new(value),
                }
                .as_bytes(),
            ),
            Endian::Big => out.extend_from_slice(
                TsvBlock::<BigEndian> {
                    number: I32::new(number),
                    value: I64::new(value),
                }
                .as_bytes(),
            ),
        }
    }

    /// Ends the open frame (if any): fills in its header's data size. The frame's bytes
    /// must still be in `out` (drain `out` only between frames).
    ///
    /// # Errors
    ///
    /// [`WriteError::FrameTooLarge`] when the frame's blocks exceed 4 GiB.
    #[inline]
    pub fn end(&mut self, out: &mut [u8]) -> Result<(), WriteError> {
        let Some((at, tracepoint)) = self.open.take() else {
            return Ok(());
        };
        let size = out
            .len()
            .saturating_sub(at)
            .saturating_sub(crate::raw::FRAME_HEADER_LEN);
        let size = u32::try_from(size).map_err(|_| WriteError::FrameTooLarge {
            frame: self.index(),
        })?;
        let header = self.header(tracepoint, size);
        if let Some(h) = out.get_mut(at..at.saturating_add(header.len())) {
            h.copy_from_slice(&header);
        }
        Ok(())
    }

    /// Appends what `tsave` writes after the last frame: a `u32` zero
    /// ([`GDB_TERMINATOR`](crate::raw::GDB_TERMINATOR)). End the last frame first.
    pub fn terminate(out: &mut Vec<u8>) {
        out.extend_from_slice(&crate::raw::GDB_TERMINATOR);
    }
}

fn frame_into(w: &mut FrameWriter, frame: &FrameData, out: &mut Vec<u8>) -> Result<(), WriteError> {
    w.begin(out, frame.tracepoint)?;
    for b in &frame.blocks {
        match b {
            BlockData::Registers(r) => w.registers(out, r)?,
            BlockData::Memory { address, data } => w.memory(out, *address, data)?,
            BlockData::Tsv { number, value } => w.tsv(out, *number, *value),
        }
    }
    w.end(out)
}

/// Appends one frame (header and blocks) in the given byte order.
///
/// # Errors
///
/// [`WriteError`] for tracepoint 0, an `R` block of the wrong size, an `M` block over
/// 65535 bytes, or a frame over 4 GiB.
pub fn write_frame(
    frame: &FrameData,
    index: usize,
    register_size: u32,
    endian: Endian,
    out: &mut Vec<u8>,
) -> Result<(), WriteError> {
    let mut w = FrameWriter::new(register_size, endian);
    w.frames = index;
    frame_into(&mut w, frame, out)
}

/// Serialises a whole file.
///
/// # Errors
///
/// [`WriteError`] when the model cannot be written as a valid file.
pub fn to_bytes(file: &TraceFileData, endian: Endian) -> Result<Vec<u8>, WriteError> {
    let mut out = Vec::new();
    write_description(&file.description, &mut out)?;
    let rsize = file.description.register_size.unwrap_or(0);
    let mut w = FrameWriter::new(rsize, endian);
    for f in &file.frames {
        frame_into(&mut w, f, &mut out)?;
    }
    if !file.end.starts_with(&[0, 0]) {
        return Err(WriteError::BadEnd);
    }
    out.extend_from_slice(&file.end);
    Ok(out)
}

/// Serialises a whole file to `w`.
///
/// # Errors
///
/// [`WriteError`] as [`to_bytes`], or the writer's I/O error.
pub fn write_to<W: io::Write>(
    file: &TraceFileData,
    endian: Endian,
    mut w: W,
) -> Result<(), WriteError> {
    let bytes = to_bytes(file, endian)?;
    w.write_all(&bytes)?;
    Ok(())
}
