//! Read and write x64dbg trace files (`.trace64`, `.trace32`): the `TRAC` magic, the JSON
//! header and the binary instruction blocks, with the register state at any instruction.
//!
//! x64dbg's run traces record, for every single-stepped instruction, its thread, its bytes,
//! the registers that change (delta-encoded against a full register dump written at the
//! start and every 512 instructions) and the memory words it touches. The format is
//! described in `specs/formats/x64dbg-trace-format.md`; how x64dbg really writes and reads
//! it (register tables, the thread-id bug, user blocks, appended sessions) in
//! `specs/notes/x64dbg-notes.md`.
//!
//! # Features of this crate
//!
//! - [`Header`]: the prefix and JSON header (serde; unknown keys kept; `ver` must be 1; the
//!   length is bounded by the input and by [`limits::MAX_HEADER_LEN`]).
//! - Reading a trace in memory ([`Trace`], over `&[u8]`, for example a memory-mapped file)
//!   in three layers, each built on the one below and giving up something for speed (as
//!   gimli's `EntriesRaw` < `EntriesCursor` < `EntriesTree`):
//!   1. [`Trace::blocks`]: a lazy, zero-copy, fused iterator of every [`Block`], measured,
//!      numbered and with its thread. Gives up the register state: the fastest way to see
//!      every block, and the one to pass over equal blocks of two traces
//!      ([`Blocks::pass_equal`]) and to build the index. Instructions expose thread, opcode, register changes with
//!      absolute REGDUMP word indices and memory accesses; user blocks (`0x80..=0xff`) are
//!      [`UserBlock`]s and do not count as instructions.
//!   2. [`Cursor`] ([`Trace::cursor`], [`Trace::replay`]): each instruction with the
//!      register state before it and the counters, keeping what its [`Mode`] keeps: [`Pc`]
//!      (the pc alone), [`General`] (the general registers, pc and flags) or [`Full`]
//!      (every word). [`Cursor::next_instruction_with`] also reports the changes it
//!      applies, [`Cursor::next_instruction_where`] searches (xref). Not an `Iterator`:
//!      it lends its state. Gives up random access, and copies of the state.
//!   3. [`Trace::build_index`] + [`Trace::seek`]: random access to any instruction by
//!      replaying at most one full-dump interval, from an [`Index`] of the full dumps
//!      ([`Trace::index_builder`] builds it a piece at a time). Costs the index pass (one
//!      pass over the blocks without registers) and about 60 bytes per full dump.
//! - [`StreamReader::from_reader`]: the blocks and the full replay over any `io::Read`
//!   (stdin, a decompressor), in constant memory, with the counters of a [`Cursor`].
//! - Every violation (block type, counts, indices, opcode length, truncation) is an
//!   [`Error`] with its file offset. The pre-PR-#3920 thread-id bug is detected and
//!   recovered ([`ThreadIdMode`]).
//! - [`RegDump`]: the x64/x86 register dump with named accessors; [`RegLayout`]
//!   ([`reg_layout`]): its fields stated once, every register and flag by name, offset and
//!   size (`rax`, `gs`, `st0`, `fcw`, `mxcsr`, `xmm0`, `flags.z`, …) with the padding
//!   between them, and the way between the words a block records and those fields, both
//!   directions, byte for byte ([`RegLayout::show`], [`RegLayout::changes`]).
//! - [`Writer`] (blocks as given, for byte-exact round trips) and [`Recorder`] (blocks as
//!   x64dbg writes them, from register states; optional legacy thread-id behaviour).
//!
//! # Words used in this crate
//!
//! - A **small block** is an instruction block with at most 8 register changes and 8
//!   memory accesses; a **usual block** is a small block without thread-id bytes, not at
//!   the very end of the data: nearly every block of a real trace.
//! - The **fast path** decodes a usual block (the block iterator also a small one) inline,
//!   in the caller's loop; the **cold path** is the one decoder of any block (a full dump,
//!   a thread switch, a thread-id decision, a user block, an error, the end), called when
//!   the fast path does not take the block. A [`Cursor`]'s fast path takes runs of usual
//!   blocks and moves the layer below past them when it goes the cold way.
//! - The **general registers** are the first REGDUMP words ([`general_words`]): rax…r15
//!   (eax…edi), then the pc and the flags. "General" means nothing else here.
//!
//! Cargo features, both off by default and outside the stable API: `testgen` (the
//! deterministic trace generator of fixtures, tests and benchmarks, module `testgen`) and
//! `fuzzing` (the fuzzing entry point `fuzz_read`).
//!
//! # Examples
//!
//! Reading the example trace of `testdata/` (3 threads, 1100 instructions):
//!
//! ```
//! use trac_x64dbg::{Block, Trace};
//!
//! let bytes = include_bytes!("../../../testdata/x64dbg/basic.trace64");
//! let trace = Trace::parse(bytes)?;
//! assert_eq!(trace.header().arch, trac_x64dbg::Arch::X64);
//! let mut replay = trace.replay();
//! let mut first_pc = None;
//! while let Some(ins) = replay.next_instruction() {
//!     let ins = ins?;
//!     first_pc.get_or_insert(replay.regs().ip());
//!     for m in ins.mem() {
//!         let _ = (m.address, m.old, m.new);
//!     }
//! }
//! assert_eq!(first_pc, Some(0x7ff6_a1b2_1000));
//! let index = trace.build_index()?;
//! assert_eq!(index.instructions(), 1100);
//! let (ins, replay) = trace.seek(&index, 700)?;
//! assert_eq!(ins.index(), 700);
//! assert_ne!(replay.regs().sp(), 0);
//! # Ok::<(), trac_x64dbg::Error>(())
//! ```
//!
//! Writing a trace with the [`Recorder`] and reading it back:
//!
//! ```
//! use trac_x64dbg::{Arch, Header, Recorder, RecorderOptions, RegDump, Step, Trace, Writer};
//!
//! // Record three instructions of one thread.
//! let writer = Writer::new(Vec::new(), &Header::new(Arch::X64, r"C:\app.exe"))?;
//! let mut rec = Recorder::new(writer, RecorderOptions::default());
//! let mut regs = RegDump::new(Arch::X64);
//! for (i, rip) in [0x1000u64, 0x1004, 0x1008].into_iter().enumerate() {
//!     regs.set_ip(rip);
//!     regs.set_word(0, i as u64); // rax
//!     rec.step(Step { thread: 7, opcode: vec![0x48, 0xff, 0xc0], regs: regs.clone(), mem: vec![] })?;
//! }
//! let bytes = rec.finish()?;
//!
//! // Read it back with the register state before each instruction.
//! let trace = Trace::parse(&bytes)?;
//! let mut replay = trace.replay();
//! let mut pcs = Vec::new();
//! while let Some(ins) = replay.next_instruction() {
//!     let ins = ins?;
//!     assert_eq!(ins.thread(), 7);
//!     pcs.push(replay.regs().ip());
//! }
//! assert_eq!(pcs, [0x1000, 0x1004, 0x1008]);
//!
//! // Random access.
//! let index = trace.build_index()?;
//! let (ins, replay) = trace.seek(&index, 2)?;
//! assert_eq!((ins.index(), replay.regs().cax()), (2, 2));
//! # Ok::<(), trac_x64dbg::Error>(())
//! ```

mod error;
mod header;
pub mod limits;
mod model;
pub mod raw;
mod read;
mod regs;
#[cfg(feature = "testgen")]
pub mod testgen;
mod write;

pub use error::Error;
pub use header::{Arch, Header};
pub use model::{InstructionRecord, MemAccess, Record, RegChange, ThreadField};
pub use read::{
    Block, Blocks, Counters, Cursor, Full, General, Index, IndexBuilder, Instruction, MemAccesses,
    Mode, Pc, ReadOptions, RegChanges, StreamReader, ThreadIdMode, Trace, UserBlock, general_words,
    read_records,
};
pub use regs::{
    DebugReg, MAX_FIELD, MAX_WORDS, RegDump, RegLayout, RegisterField, Segment, X87Fpu,
    X87Register, general_names, reg_layout, register_fields,
};
pub use write::{Recorder, RecorderOptions, Step, Writer, write_records};

/// Fuzzing entry point: parses `data` every way the crate can (blocks, replay, index and
/// seeks, streaming) and re-writes what it read. Must never panic. Behind the `fuzzing`
/// feature.
#[cfg(feature = "fuzzing")]
pub fn fuzz_read(data: &[u8]) {
    for mode in [ThreadIdMode::Recover, ThreadIdMode::Flag] {
        let opts = ReadOptions { thread_ids: mode };
        let Ok(trace) = Trace::with_options(data, opts) else {
            continue;
        };
        let mut records = Vec::new();
        let mut failed = false;
        for b in trace.blocks() {
            match b {
                Ok(b) => records.push(b.to_record()),
                Err(e) => {
                    let _ = e.to_string();
                    failed = true;
                    break;
                }
            }
        }
        let mut replay = trace.replay();
        while let Some(Ok(_)) = replay.next_instruction() {
            let _ = replay.regs().ip();
        }
        let (index, _) = trace.index_builder().finish();
        let n = index.instructions();
        // Differential checks: the index's decoder and the streaming reader see the
        // blocks the slice iterator sees.
        let instructions = records
            .iter()
            .filter(|r| matches!(r, Record::Instruction(_)))
            .count();
        assert_eq!(n, instructions as u64, "index and blocks disagree");
        for i in [0, n / 2, n.saturating_sub(1), n] {
            let _ = trace.seek(&index, i);
        }
        // The pc cursor finds the replay's instructions and pcs; a saved index reads back.
        let mut scan = trace.cursor::<Pc>();
        let mut replay = trace.replay();
        while let Some(Ok(ins)) = scan.next_instruction() {
            let want = replay.next_instruction();
            assert!(
                matches!(&want, Some(Ok(w)) if w.index() == ins.index()),
                "pc cursor and replay disagree"
            );
            assert_eq!(
                scan.regs().ip(),
                replay.regs().ip(),
                "pc cursor and replay pcs differ"
            );
            let _ = ins.touches(0, u64::MAX);
        }
        // The pc cursor may stop before blocks the replay has not read yet (user blocks
        // after the last instruction): read them, so the state and counters below are
        // those of the whole input.
        while let Some(Ok(_)) = replay.next_instruction() {}
        assert_eq!(Index::from_bytes(&index.to_bytes()), Some(index));
        let _ = Index::from_bytes(data);
        if let Ok(mut stream) = StreamReader::with_options(data, opts) {
            let mut streamed = Vec::new();
            let mut stream_failed = false;
            while let Some(b) = stream.next_block_with_regs() {
                match b {
                    Ok((b, _)) => streamed.push(b.to_record()),
                    Err(_) => {
                        stream_failed = true;
                        break;
                    }
                }
            }
            assert_eq!(streamed, records, "stream and slice disagree");
            assert_eq!(
                stream_failed, failed,
                "stream and slice disagree on the error"
            );
            // Both replayed the same blocks: the same state and counters.
            assert!(
                stream.regs() == replay.regs(),
                "stream and slice states differ"
            );
            assert_eq!(
                stream.counters(),
                replay.counters(),
                "stream and slice counters differ"
            );
        }
        // Write back exactly what was read: must succeed and read back the same.
        if let Ok(bytes) = write_records(trace.header(), &records) {
            let _ = read_records(&bytes);
        }
    }
}
