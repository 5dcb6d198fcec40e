//! Read and write GDB tracepoint trace files ("tfiles"), as GDB's `tsave` writes them and
//! `target tfile` reads them back.
//!
//! A tfile is an 8-byte header `\x7fTRACE0\n`, a text description section (the register
//! block size `R`, the trace `status`, the tracepoint definitions `tp`, the trace state
//! variables `tsv`, the target description XML split into `tdesc` lines) ended by an empty
//! line, then binary trace frames in the target's byte order: a 6-byte header (tracepoint
//! number, data size) and blocks `R` (registers), `M` (memory) and `V` (trace state
//! variable values). A tracepoint number 0 ends the frames.
//!
//! Specification: `specs/formats/gdb-trace-file-format.md` (GDB manual, Appendix "Trace
//! File Format") and the implementer's notes `specs/notes/gdb-tfile-notes.md`, which record
//! what GDB 13 really writes and accepts. Where the manual and GDB differ, this crate
//! follows GDB (the `R` size is hex, not decimal).
//!
//! # Features
//!
//! - [`TraceFile`]: the description parsed into a typed [`Description`] ([`Status`],
//!   [`Tracepoint`]s with actions and source strings, [`TraceStateVariable`]s, unknown lines
//!   kept and reported as [`Warning`]s, like GDB's warnings), and the target description
//!   parsed into a register layout ([`TargetDescription`]), checked against the `R` size;
//! - [`Frames`] / [`Blocks`]: lazy, zero-copy, fused iterators over the frames and their
//!   blocks; a truncated file yields every complete frame, then the error;
//! - [`StreamReader`]: the same over any `io::Read`, one frame at a time, bounded memory;
//! - [`FrameIndex`]: one linear scan, then random access by frame number and GDB's `tfind`
//!   lookups (by tracepoint, pc, pc range, collected memory), where GDB rescans from the
//!   first frame every time;
//! - per frame: named register values ([`Frame::register`]) and collected memory
//!   ([`Frame::memory`], last overlapping `M` block wins);
//! - byte order: the file does not say; little-endian by default, [`ReadOptions::endian`]
//!   to choose, and the description's architecture where it decides;
//! - [`mod@write`]: the owned model ([`TraceFileData`]) to bytes exactly as `tsave` writes them;
//!   reading a GDB-written file and writing it back gives the same bytes.
//!
//! # Cargo features
//!
//! - `testgen`: the `testgen` module, builders of example and synthetic files (what the
//!   fixtures, benchmarks and tests use); not needed to read or write files.
//! - `fuzzing`: the `fuzz_*` entry points the fuzz targets (and the stable never-panics
//!   tests) call.
//!
//! # Example
//!
//! ```
//! use gdb_tfile::{ReadOptions, TraceFile};
//!
//! // GDB's own testsuite file `tfile-basic.tf`, rebuilt by this crate's writer.
//! let bytes = include_bytes!("../../../testdata/gdb-tfile/tfile-basic.tf");
//! let file = TraceFile::parse(bytes, ReadOptions::default())?;
//! assert_eq!(file.description().register_size, Some(0x1f4));
//! let frame = file.frames().next().unwrap()?;
//! assert_eq!(frame.tracepoint, 1);
//! // testglob2 = 271828, collected as two M blocks of 1 and 3 bytes.
//! let mem = frame.memory(0x404030, 4)?;
//! let glob2: Vec<u8> = mem.iter().map(|b| b.unwrap()).collect();
//! assert_eq!(glob2, 271_828u32.to_le_bytes());
//! // Read then write gives back the same bytes.
//! let again = gdb_tfile::write::to_bytes(&file.to_data()?, file.layout().endian)?;
//! assert_eq!(&again[..], &bytes[..]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod desc;
mod error;
mod index;
pub mod limits;
mod model;
pub mod raw;
mod read;
mod stream;
mod tdesc;
#[cfg(any(test, feature = "testgen"))]
pub mod testgen;
pub mod write;

#[cfg(test)]
mod qc;

pub use error::{Error, Warning};
pub use index::FrameIndex;
pub use model::{
    BlockData, Description, FrameData, SourceKind, SourceString, Status, StopReason, TraceFileData,
    TraceStateVariable, Tracepoint, hex_digits_as_decimal,
};
pub use read::{Block, Blocks, Frame, FrameLayout, Frames, ReadOptions, RegisterValue, TraceFile};
pub use stream::StreamReader;
pub use tdesc::{
    Endian, Register, TargetDescription, X86Target, endian_of_architecture, x86_tdesc_xml,
};

/// Fuzz entry point: parses the description section of arbitrary bytes (with and without
/// the header prepended). Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_description(data: &[u8]) {
    let _ = TraceFile::parse(data, ReadOptions::default());
    let mut with_magic = raw::MAGIC.to_vec();
    with_magic.extend_from_slice(data);
    if let Ok(f) = TraceFile::parse(&with_magic, ReadOptions::default()) {
        let _ = write::to_bytes(
            &TraceFileData {
                description: f.description().clone(),
                frames: Vec::new(),
                end: Vec::new(),
            },
            Endian::Little,
        );
    }
    let _ = StreamReader::from_reader(&with_magic[..], ReadOptions::default());
}

/// Fuzz entry point: reads the frames and blocks of arbitrary bytes (a short valid
/// description is prepended when `data` has no header), in both byte orders, through the
/// slice reader, the stream reader and the index. Must never panic.
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_frames(data: &[u8]) {
    let owned;
    let bytes = if data.starts_with(raw::MAGIC) {
        data
    } else {
        let mut v = b"\x7fTRACE0\nR 10\ntdesc <target><reg name=\"pc\" bitsize=\"64\"/><reg name=\"x\" bitsize=\"64\"/></target>\n\n".to_vec();
        v.extend_from_slice(data);
        owned = v;
        &owned
    };
    for endian in [Endian::Little, Endian::Big] {
        let opts = ReadOptions {
            endian: Some(endian),
        };
        if let Ok(file) = TraceFile::parse(bytes, opts) {
            for f in file.frames().flatten() {
                for b in f.blocks() {
                    let _ = b;
                }
                let _ = f.memory(0x1000, 16);
                let _ = f.tsvs();
                if let Some(td) = file.tdesc() {
                    let _ = f.register(td, "pc");
                }
            }
            let (idx, _) = FrameIndex::new_partial(&file);
            let _ = idx.find_memory(0, u64::MAX, 0);
            let _ = idx.find_pc(0x1000, 0);
            if let Ok(d) = file.to_data() {
                let _ = write::to_bytes(&d, endian);
            }
        }
        if let Ok(mut s) = StreamReader::from_reader(bytes, opts) {
            while let Ok(Some(f)) = s.next_frame() {
                let _ = f.blocks().count();
            }
        }
    }
}
