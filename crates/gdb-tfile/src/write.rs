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

fn frame_into<O: ByteOrder>(
    frame: &FrameData,
    index: usize,
    register_size: u32,
    out: &mut Vec<u8>,
) -> Result<(), WriteError> {
    if frame.tracepoint == 0 {
        return Err(WriteError::ZeroTracepoint { frame: index });
    }
    let header_at = out.len();
    out.extend_from_slice(&[0; crate::raw::FRAME_HEADER_LEN]);
    for b in &frame.blocks {
        match b {
            BlockData::Registers(r) => {
                if r.len() != register_size as usize {
                    return Err(WriteError::RegisterSize {
                        frame: index,
                        len: r.len(),
                        expected: register_size,
                    });
                }
                out.push(BLOCK_REGISTERS);
                out.extend_from_slice(r);
            }
            BlockData::Memory { address, data } => {
                let len = u16::try_from(data.len()).map_err(|_| WriteError::MemoryTooLong {
                    frame: index,
                    len: data.len(),
                })?;
                out.push(BLOCK_MEMORY);
                let h = MemoryBlockHeader::<O> {
                    address: U64::new(*address),
                    length: U16::new(len),
                };
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(data);
            }
            BlockData::Tsv { number, value } => {
                out.push(BLOCK_TSV);
                let v = TsvBlock::<O> {
                    number: I32::new(*number),
                    value: I64::new(*value),
                };
                out.extend_from_slice(v.as_bytes());
            }
        }
    }
    let size = out
        .len()
        .saturating_sub(header_at)
        .saturating_sub(crate::raw::FRAME_HEADER_LEN);
    let size = u32::try_from(size).map_err(|_| WriteError::FrameTooLarge { frame: index })?;
    let h = FrameHeader::<O> {
        tracepoint: I16::new(frame.tracepoint),
        data_size: U32::new(size),
    };
    if let Some(dst) = out.get_mut(header_at..header_at.saturating_add(6)) {
        dst.copy_from_slice(h.as_bytes());
    }
    Ok(())
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
    match endian {
        Endian::Little => frame_into::<LittleEndian>(frame, index, register_size, out),
        Endian::Big => frame_into::<BigEndian>(frame, index, register_size, out),
    }
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
    for (i, f) in file.frames.iter().enumerate() {
        write_frame(f, i, rsize, endian, &mut out)?;
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
