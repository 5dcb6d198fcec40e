//! An instruction stream ([`Steps`]) as Dinero IV `din` lines (`tracekit convert --to din`),
//! so that recordings of any format with an instruction stream feed cache simulators.
//!
//! One `label address` line per reference, the address in lowercase hex without `0x` or
//! leading zeros (as `amber_tt6::din::DinWriter` writes them): for each step in file order
//! (all threads interleaved), label 2 (instruction fetch) at its pc, then one line per
//! memory access of the step in the recorded order: label 0 (read) or 1 (write). An access
//! whose kind is known (Tenet's `mr`/`mw`/`mrw`; x64dbg with `--disasm`) gives that kind,
//! a read-write a read line then a write line; an access of unknown kind (x64dbg without
//! `--disasm`, or an entry disassembly could not match) is a write where the stream
//! recorded a new value, else a read, the rule of the Tenet conversion's `mr`/`mw`. Streams
//! whose memory blocks are snapshots rather than accesses (GDB tracepoint frames) give
//! fetches only.
//!
//! The steps are read with [`Raw::scan`](trace_model::steps::Raw::scan) (x64dbg in memory: the lean walk, without
//! replaying registers), and the lines go out through one reused buffer: constant memory.

use std::io::Write;

use trace_model::Error;
use trace_model::steps::{Access, AccessKind, ScanQuery, Step, Steps};

/// The din label of an instruction fetch.
pub const FETCH: u8 = 2;
/// The din label of a data read.
pub const READ: u8 = 0;
/// The din label of a data write.
pub const WRITE: u8 = 1;

/// The buffer is handed to the output once it holds this many bytes.
const FLUSH_AT: usize = 1 << 16;

/// The longest line: a label, a space, 16 hex digits and the line end.
const MAX_LINE: usize = 19;

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// What a conversion wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DinCounts {
    /// Instructions, so fetch lines (label 2).
    pub fetches: u64,
    /// Read lines (label 0).
    pub reads: u64,
    /// Write lines (label 1).
    pub writes: u64,
}

impl DinCounts {
    /// Every line written.
    #[must_use]
    pub fn lines(&self) -> u64 {
        self.fetches
            .saturating_add(self.reads)
            .saturating_add(self.writes)
    }
}

/// The data labels of access `a`, in the order they are written (see the module docs).
#[must_use]
pub fn access_labels(a: &Access) -> &'static [u8] {
    match a.kind {
        AccessKind::Read => &[READ],
        AccessKind::Write => &[WRITE],
        AccessKind::ReadWrite => &[READ, WRITE],
        AccessKind::Unknown if a.new.is_some() => &[WRITE],
        AccessKind::Unknown => &[READ],
    }
}

/// Two hex digits of each byte value.
// Built at compile time: an index out of range fails the build, not a run.
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
static BYTE_HEX: [[u8; 2]; 256] = {
    let mut t = [[0u8; 2]; 256];
    let mut i = 0u8;
    loop {
        t[i as usize] = [DIGITS[(i >> 4) as usize], DIGITS[(i & 0xf) as usize]];
        if i == 255 {
            break t;
        }
        i += 1;
    }
};

/// Appends the line `label address` (label a single digit).
#[inline]
fn push_line(buf: &mut Vec<u8>, label: u8, addr: u64) {
    let nibbles = 64u32
        .saturating_sub(addr.leading_zeros())
        .div_ceil(4)
        .max(1) as usize;
    // The digits moved to the top of the word, so they come first in its big-endian bytes.
    let top = addr
        .checked_shl(16u32.saturating_sub(nibbles as u32).saturating_mul(4))
        .unwrap_or(0);
    // Built on the stack, left-aligned, appended whole (a copy of constant size, not a
    // call to memcpy) and cut back to its length.
    let mut line = [b'\n'; MAX_LINE];
    let (head, digits) = line.split_at_mut(2);
    head.copy_from_slice(&[b'0'.saturating_add(label), b' ']);
    for (pair, b) in digits.chunks_exact_mut(2).zip(top.to_be_bytes()) {
        pair.copy_from_slice(BYTE_HEX.get(usize::from(b)).unwrap_or(&[b'0'; 2]));
    }
    if let Some(end) = digits.get_mut(nibbles) {
        *end = b'\n';
    }
    let len = buf.len().saturating_add(nibbles).saturating_add(3);
    buf.extend_from_slice(&line);
    buf.truncate(len);
}

/// Appends the lines of one step; counts them in `counts`.
fn push_step(buf: &mut Vec<u8>, step: &Step, accesses: bool, counts: &mut DinCounts) {
    push_line(buf, FETCH, step.pc);
    counts.fetches = counts.fetches.saturating_add(1);
    if accesses {
        push_accesses(buf, step, counts);
    }
}

/// Appends the lines of the memory accesses of `step`; counts them in `counts`.
fn push_accesses(buf: &mut Vec<u8>, step: &Step, counts: &mut DinCounts) {
    for a in &step.mem {
        for &label in access_labels(a) {
            push_line(buf, label, a.addr);
            let n = if label == WRITE {
                &mut counts.writes
            } else {
                &mut counts.reads
            };
            *n = n.saturating_add(1);
        }
    }
}

/// Writes every step from here to the end of `steps` as din lines to `out` (see the module
/// docs), and flushes it.
///
/// # Errors
///
/// A read error of the stream, after the lines of every step before it have been written
/// to `out`; an output that fails ([`Error::Io`]).
pub fn convert(steps: &mut dyn Steps, out: &mut dyn Write) -> Result<DinCounts, Error> {
    let accesses = !steps.kind().memory_is_snapshot();
    let mut counts = DinCounts::default();
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT.saturating_add(1024));
    let write_err = |e| Error::io("cannot write the din lines", e);
    let query = ScanQuery {
        all: true,
        ..ScanQuery::default()
    };
    // The first step is read on its own: what the input recorded before it (Tenet's first
    // line) is known from then on, and its accesses come first.
    let first = match steps.next_step() {
        None => None,
        Some(first) => Some(first?.clone()),
    };
    if let Some(first) = &first {
        if accesses && let Some(before) = steps.before_first() {
            push_accesses(&mut buf, before, &mut counts);
        }
        push_step(&mut buf, first, accesses, &mut counts);
    }
    let read = steps.scan(&query, &mut |step| {
        push_step(&mut buf, step, accesses, &mut counts);
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf).map_err(write_err)?;
            buf.clear();
        }
        Ok(())
    });
    // The lines before a damaged record are written too.
    let written = out
        .write_all(&buf)
        .and_then(|()| out.flush())
        .map_err(write_err);
    read?;
    written?;
    Ok(counts)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use quickcheck::{QuickCheck, TestResult};
    use trac_x64dbg::testgen;

    use super::*;
    use trace_model::{Ctx, Handler, Input, Options};
    use trace_registry::formats::x64dbg::X64dbg;

    fn x64dbg(x86: bool, threads: u32, n: u64, seed: u64) -> Input {
        let arch = if x86 {
            trac_x64dbg::Arch::X86
        } else {
            trac_x64dbg::Arch::X64
        };
        let opts = testgen::Options {
            arch,
            threads,
            max_run: 7,
            seed,
        };
        let rec = trac_x64dbg::RecorderOptions::default();
        let name = if x86 { "t.trace32" } else { "t.trace64" };
        Input::from_bytes(name, testgen::trace(opts, n, rec, "a.exe")).unwrap()
    }

    /// Over synthetic x64dbg traces of several threads: one line per instruction and per
    /// access; the fetch lines are the pcs of the replay's steps (`next_step`, not the scan
    /// the sink reads) in file order, each followed by its accesses' addresses, a write
    /// exactly where a new value was recorded.
    #[test]
    fn lines_are_the_steps_and_their_accesses() {
        fn prop(seed: u64, threads: u8, n: u16, x86: bool) -> TestResult {
            let threads = u32::from(threads % 4) + 1;
            let n = u64::from(n % 600) + 1;
            let options = Options::default();
            let mut want = Vec::new();
            let mut input = x64dbg(x86, threads, n, seed);
            let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let (mut instructions, mut accesses) = (0u64, 0u64);
            while let Some(step) = steps.next_step() {
                let step = step.unwrap();
                instructions += 1;
                want.push(format!("2 {:x}", step.pc));
                for a in &step.mem {
                    accesses += 1;
                    let label = if a.new.is_some() { 1 } else { 0 };
                    want.push(format!("{label} {:x}", a.addr));
                }
            }
            let mut input = x64dbg(x86, threads, n, seed);
            let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let mut out = Vec::new();
            let counts = convert(&mut *steps, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            let got: Vec<&str> = text.lines().collect();
            assert_eq!(got.len() as u64, instructions + accesses);
            assert_eq!(counts.lines(), instructions + accesses);
            assert_eq!(counts.fetches, instructions);
            assert_eq!(got, want);
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(40)
            .quickcheck(prop as fn(u64, u8, u16, bool) -> TestResult);
    }

    #[test]
    fn lines_are_label_space_hex() {
        for (label, addr, want) in [
            (2u8, 0u64, "2 0\n"),
            (0, 0xf, "0 f\n"),
            (1, 0x10, "1 10\n"),
            (2, 0x1400_0419c, "2 14000419c\n"),
            (0, 1 << 63, "0 8000000000000000\n"),
            (1, u64::MAX, "1 ffffffffffffffff\n"),
        ] {
            let mut buf = b"x".to_vec();
            push_line(&mut buf, label, addr);
            assert_eq!(buf, format!("x{label} {addr:x}\n").as_bytes());
            assert_eq!(&buf[1..], want.as_bytes());
        }
    }

    #[test]
    fn access_kinds_give_labels() {
        let with = |kind, new| Access {
            kind,
            new,
            ..Access::default()
        };
        assert_eq!(access_labels(&with(AccessKind::Read, Some(0))), [READ]);
        assert_eq!(access_labels(&with(AccessKind::Write, None)), [WRITE]);
        assert_eq!(
            access_labels(&with(AccessKind::ReadWrite, None)),
            [READ, WRITE]
        );
        assert_eq!(access_labels(&with(AccessKind::Unknown, Some(8))), [WRITE]);
        assert_eq!(access_labels(&with(AccessKind::Unknown, None)), [READ]);
    }
}
