//! Read and write Tenet text traces: the format of Tenet, the trace explorer for IDA Pro
//! and Binary Ninja, which its reference Pin tracer, QEMU, PANDA and the wtf fuzzer write.
//!
//! Sources: `specs/notes/tenet-notes.md` (read from Tenet's `tracers/README.md`,
//! `plugins/tenet/trace/file.py`, its `arch/` definitions and `tracers/pin/pintenet.cpp`).
//!
//! # The format
//!
//! One text line per executed instruction, items separated by commas, each `KEY=VALUE`:
//!
//! ```text
//! rsp=0x13ff28,rip=0x1400045dc,mw=0x13ff28:a541004001000000
//! ```
//!
//! - Keys are case-insensitive. A register item is `NAME=HEX` (with or without `0x`, any
//!   case: Tenet's QEMU tracer writes `EAX=1A2B`); a line names the registers that changed
//!   since the previous line, and always the pc (`rip`/`eip`). Registers never named are 0.
//! - Memory items `mr=` (read), `mw=` (written), `mrw=` (both): `0xADDR:HEXBYTES`, the bytes
//!   in memory order, any length, any number per line, anywhere among the registers. They
//!   are what the **previous** instruction accessed, read back after it executed (so a
//!   `call` shows `rsp=…,rip=<callee>,mw=<new rsp>:<return address>`).
//! - Architectures ([`Arch`]): AMD64 (`rax rbx rcx rdx rbp rsp rsi rdi r8`–`r15 rip`) or
//!   x86 (`eax ebx ecx edx ebp esp esi edi eip`), detected from the first register name or
//!   given ([`ReadOptions::arch`]).
//! - Any other key is an error (Tenet refuses the line), as are malformed items, odd
//!   numbers of hex digits, values wider than the registers, a line without the pc, more
//!   than 32 register items on a line (an architecture has at most 32 registers) and a file
//!   without instruction lines. Errors give the line and column ([`Error`]).
//! - Lines end in LF or CRLF; lines starting with `#` (forks' headers) are comments, kept.
//!
//! # Step numbering
//!
//! Instruction `i` is the `i`-th instruction line ([`Instruction::index`], from 0; comment
//! lines do not count; [`Instruction::line`] is its line in the file, from 1). An access
//! belongs to the instruction that made it: the items line `k + 1` carries are numbered
//! by instruction `k`, the one before it. The first line's items were made by an
//! instruction before the trace; the last instruction's accesses are never written. This
//! crate reads lines, so [`Instruction::mem`] gives a line's own items (the previous
//! instruction's accesses); tracekit's commands (`dump`, `export`, `xref`, `mem`, `diff`)
//! all number accesses by the instruction that made them, and `dump` and `export` keep
//! the line as `line`.
//!
//! # The crate
//!
//! - [`Reader::parse`] over `&[u8]` and [`StreamReader::from_reader`] over `io::Read` (in
//!   memory bounded by [`limits::MAX_LINE_LEN`]) lend one [`Line`] at a time from reused
//!   buffers: a one-pass hand-written byte parser, no allocation per line. After an error
//!   (which comes after every complete line before it) they are fused.
//! - [`Writer`] writes the canonical form (see [`Writer`]'s module: registers in the Pin
//!   tracer's order, lowercase, no leading zeros), so read → write gives back the bytes of
//!   a canonical file, such as a trace of Tenet's own Pin tracer; [`Trace`] is the owned
//!   model.
//! - [`Registers`]: the registers of a line, and with [`Registers::merge`] the whole state.
//! - [`detect`]: whether the first bytes of a file look like a Tenet trace.
//!
//! Cargo features, both off by default and outside the stable API: `fuzzing` (the `fuzz_*`
//! entry points of the fuzz target) and `testgen` (the deterministic trace generator of
//! fixtures, synthetic traces and benchmarks, module `testgen`).
//!
//! # Example
//!
//! ```
//! use tenet_trace::{Arch, Line, MemKind, ReadOptions, Reader, Registers};
//!
//! let data = include_bytes!("../../../testdata/tenet/basic.log");
//! let mut reader = Reader::parse(data, ReadOptions::default());
//! let mut state: Option<Registers> = None;
//! let mut writes = 0;
//! while let Some(line) = reader.next_line() {
//!     let Line::Instruction(insn) = line? else { continue };
//!     let state = state.get_or_insert(Registers::new(insn.regs.arch()));
//!     state.merge(insn.regs);
//!     writes += insn.mem().filter(|m| m.kind == MemKind::Write).count();
//!     println!("{:#x} rsp={:#x}", insn.pc(), state.value(3));
//! }
//! assert_eq!(reader.summary().arch, Some(Arch::Amd64));
//! assert_eq!(writes, 2);
//! # Ok::<(), tenet_trace::Error>(())
//! ```

mod error;
pub mod limits;
pub mod raw;
mod read;
#[cfg(feature = "testgen")]
pub mod testgen;
mod write;

pub use error::{Error, Problem, WriteError};
pub use raw::{Arch, MemKind};
pub use read::{
    Comment, Instruction, Line, MemItem, MemRef, ReadOptions, Reader, Registers, StreamReader,
    Summary, detect,
};
pub use write::{Entry, MemItems, MemOwned, Trace, Writer};

/// Fuzzing entry point: reads `data` with the slice and the stream reader (which must
/// agree, line for line and on the error), then reads it as a [`Trace`], writes it and
/// reads it again (the model must survive; canonical input must come back byte for byte).
/// Never panics (a mismatch is a `debug_assert`, which the fuzzer reports).
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_read(data: &[u8]) {
    let mut slice = Reader::parse(data, ReadOptions::default());
    let mut stream = match StreamReader::from_reader(data, ReadOptions::default()) {
        Ok(s) => s,
        Err(_) => return,
    };
    loop {
        let a = slice
            .next_line()
            .map(|l| l.map(|l| describe(&l)).map_err(|e| e.to_string()));
        let b = stream
            .next_line()
            .map(|l| l.map(|l| describe(&l)).map_err(|e| e.to_string()));
        debug_assert!(a == b, "slice and stream readers disagree: {a:?} {b:?}");
        if a.is_none() || b.is_none() {
            break;
        }
    }
    let Ok(trace) = Trace::read(data, ReadOptions::default()) else {
        return;
    };
    let Ok(bytes) = trace.to_bytes() else {
        debug_assert!(false, "a trace that was read must be writable");
        return;
    };
    let again = Trace::read(&bytes, ReadOptions::default());
    debug_assert!(
        again.is_ok_and(|t| t == trace),
        "write then read changed the model"
    );
}

/// A line as comparable values: line number, registers, memory items, comment text.
#[cfg(any(test, feature = "fuzzing"))]
type Described = (
    u64,
    Vec<(&'static str, u64)>,
    Vec<(MemKind, u64, Vec<u8>)>,
    Vec<u8>,
);

/// A line as comparable values, for [`fuzz_read`].
#[cfg(any(test, feature = "fuzzing"))]
fn describe(line: &Line<'_>) -> Described {
    match line {
        Line::Comment(c) => (c.line, Vec::new(), Vec::new(), c.text.to_vec()),
        Line::Instruction(i) => (
            i.line,
            i.regs.iter().collect(),
            i.mem().map(|m| (m.kind, m.addr, m.data.to_vec())).collect(),
            Vec::new(),
        ),
    }
}
