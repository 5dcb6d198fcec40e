//! Read and write Apple CHUD amber traces of PowerPC programs: TT6 and TT6E instruction
//! traces (with escape and thread-synchronization records) and FULL register-state traces.
//!
//! Specification: `specs/formats/amber-tt6-format.md` (Apple's notes, with the class
//! macros) and `specs/notes/amber-tt6-notes.md` (escape word layout, opcode fields, operand
//! sizes, the Mach PowerPC state structures). Everything is big-endian.
//!
//! - **TT6/TT6E** ([`Tt6Reader`], zero-copy over `&[u8]`; [`Tt6StreamReader`] over
//!   `io::Read` in constant memory): the initial PC, then records whose length depends on
//!   the opcode's class ([`classify`], exactly the spec's macros; TT6E adds the cache-block
//!   operations), PC tracking, escape records ([`EscapeKind`], sync events) attached to the
//!   next instruction, TT6E's synthetic trap pair recognised ([`SyntheticTrap`]).
//! - **Instruction facts** ([`opcode`]): mnemonic, load/store, operand size (with a
//!   cache-line parameter), traps, the `dst*` stream-control word.
//! - **FULL** ([`FullReader`] over `&[u8]`; [`FullStreamReader`] over `io::Read` in
//!   constant memory, the same [`FullRecord`] view): opcode + `ppc_thread_state` +
//!   `ppc_float_state` + `ppc_vector_state` per record, 1004 or 1008 bytes
//!   ([`RecordSize::detect`]).
//! - **Threads** ([`threads`]): `thread_NNN.tt6[e]` files merged by their sync records
//!   ([`threads::merge_files`]: the merged timeline as (thread, record, sequence number),
//!   then the waits no signal matched).
//! - **Writers** ([`Tt6Writer`], [`FullWriter`], [`Trace`]) that classify, so records
//!   always match their opcode.
//! - **Export** to Dinero IV `din` ([`din`]).
//!
//! Speed: the slice reader's internal iteration (`records().for_each(…)`, `fold`) runs a
//! fast loop with its state in registers, about twice as fast as a `for` loop over `next`.
//!
//! Same shape as the other format crates: `parse(&[u8], …)` for the in-memory readers,
//! `from_reader(R, …)` for the streaming ones, [`limits`] for the documented reader limits,
//! errors with absolute offsets (and record indexes) through [`trace_core::Located`].
//!
//! Cargo feature `fuzzing`: the `fuzz_*` entry points of the fuzz targets.
//!
//! # Example
//!
//! ```
//! use amber_tt6::{Class, Dialect, Tt6Reader};
//!
//! let data = include_bytes!("../../../testdata/amber/example.tt6");
//! let reader = Tt6Reader::parse(data, Dialect::Tt6)?;
//! assert_eq!(reader.initial_pc(), 0x1000);
//! let mut loads = 0;
//! for r in reader.records() {
//!     let r = r?;
//!     if r.class == Class::Memory && !r.is_store() {
//!         loads += 1;
//!     }
//!     println!("{:#x} {:?} {:?}", r.pc, r.mnemonic(), r.ea());
//! }
//! assert_eq!(loads, 1); // lvx
//! # Ok::<(), amber_tt6::Error>(())
//! ```

pub mod din;
mod error;
mod escape;
mod full;
pub mod limits;
pub mod opcode;
pub mod raw;
mod read;
pub mod threads;
mod write;

pub use error::{Error, WriteError};
pub use escape::{Escape, EscapeIter, EscapeKind, EscapeRef, Escapes, SyncEvent, SyncKind};
pub use full::{FullReader, FullRecord, FullRecords, FullStreamReader, RecordSize};
pub use opcode::{Access, Class, Dialect, classify};
pub use read::{Record, Records, Run, Summary, SyntheticTrap, Tt6Reader, Tt6StreamReader};
pub use write::{FullRecordOwned, FullWriter, Instruction, Trace, Tt6Writer};

/// Fuzzing entry point: reads `data` as TT6, TT6E (slice and stream, which must agree) and
/// FULL (slice and stream, which must agree), touching every field; re-encodes what was
/// read. Never panics.
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_read(data: &[u8]) {
    for dialect in [Dialect::Tt6, Dialect::Tt6e] {
        let slice: Vec<_> = match Tt6Reader::parse(data, dialect) {
            Ok(r) => r
                .records()
                .map(|r| r.map(|r| (r.to_instruction(), r.pc, r.operand_size(32))))
                .collect(),
            Err(_) => Vec::new(),
        };
        if let Ok(mut s) = Tt6StreamReader::from_reader(data, dialect) {
            let mut i = 0usize;
            while let Some(r) = s.next_record() {
                let same = match (r, slice.get(i)) {
                    (Ok(r), Some(Ok((m, pc, _)))) => r.to_instruction() == *m && r.pc == *pc,
                    (Err(e), Some(Err(f))) => e.to_string() == f.to_string(),
                    _ => false,
                };
                debug_assert!(same, "stream and slice readers disagree at record {i}");
                i = i.saturating_add(1);
            }
        }
        let _ = Trace::read(data, dialect).map(|t| t.to_bytes());
    }
    for size in [RecordSize::Packed1004, RecordSize::Struct1008] {
        if let Ok(r) = FullReader::with_size(data, size) {
            let slice: Vec<_> = r
                .records()
                .map(|r| r.map(|r| r.to_owned()).map_err(|e| e.to_string()))
                .collect();
            if let Ok(mut s) = FullStreamReader::from_reader(data, Some(size)) {
                let mut i = 0usize;
                while let Some(r) = s.next_record() {
                    let r = r.map(|r| r.to_owned()).map_err(|e| e.to_string());
                    debug_assert!(
                        slice.get(i) == Some(&r),
                        "FULL stream and slice readers disagree at record {i}"
                    );
                    i = i.saturating_add(1);
                }
                debug_assert!(i == slice.len(), "FULL stream reader stopped early");
            }
        }
    }
    if let Ok(mut s) = FullStreamReader::from_reader(data, None) {
        while let Some(r) = s.next_record() {
            if r.is_err() {
                break;
            }
        }
    }
    let _ = FullReader::parse(data);
}

/// Fuzzing entry point: reads `data` as a TT6E trace, writes it back and reads it again;
/// the model must survive and canonical input must come back byte for byte. Never panics
/// (a mismatch is a `debug_assert`, which the fuzzer reports).
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_roundtrip(data: &[u8]) {
    for dialect in [Dialect::Tt6, Dialect::Tt6e] {
        let Ok(trace) = Trace::read(data, dialect) else {
            continue;
        };
        let Ok(bytes) = trace.to_bytes() else {
            debug_assert!(false, "a trace that was read must be writable");
            continue;
        };
        debug_assert!(
            bytes.as_slice() == data,
            "read then write changed the bytes"
        );
        let again = Trace::read(&bytes, dialect);
        debug_assert!(
            again.is_ok_and(|t| t == trace),
            "write then read changed the model"
        );
    }
}
