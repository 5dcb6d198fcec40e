//! An instruction stream ([`Steps`]) as Tenet text traces, one per thread, the way Tenet's
//! reference Pin tracer writes them (`tracekit convert --to tenet`).
//!
//! Line `k` of a thread's trace: the general registers whose value before instruction `k`
//! differs from the previous line of that thread (all of them on its first line), then the
//! pc of instruction `k`, then the memory accesses of the thread's previous instruction in
//! the recorded order (on the first line written, those the input recorded before its
//! first instruction: [`Steps::before_first`]), with the value after it: `mw` where the stream recorded a new value
//! (else `mr`), the bytes of `new`, else `old`. When the accesses carry a kind (x64dbg with
//! `--disasm`: the true sizes and directions) it decides `mr`/`mw`/`mrw`. Flags, segment,
//! vector and other registers are never written (Tenet refuses them); the accesses of each
//! thread's last instruction are not written either (as the Pin tracer does). Registers
//! the stream has no recorded value for ([`Steps::regs_known`]: a Tenet input's registers
//! not named yet) are left out until it has one, so a canonical Tenet trace (each line
//! naming exactly the registers that changed) comes back byte for byte.

use std::io::Write;

use tenet_trace::{Arch, MemItems, MemKind, MemRef, Registers, Writer};

use trace_model::Error;
use trace_model::steps::{AccessKind, Isa, RegsWanted, Step, Steps};

/// The most threads (so open files) one conversion writes: under the usual limit of 1024
/// open files a process has.
pub const MAX_THREADS: usize = 512;

/// One thread's output.
struct ThreadOut<W: Write> {
    thread: u64,
    writer: Writer<W>,
    /// The words of [`RegMap`]'s span as its lines so far left them (meaningful where
    /// `written`).
    last: Vec<u64>,
    /// Bit `k` set once word `k` of the span has been written (words from 64 on: once the
    /// first line is).
    written: u64,
    /// The accesses of the thread's last instruction, formatted for its next line.
    pending: MemItems,
    lines: u64,
}

/// What a conversion wrote for one thread.
#[derive(Debug)]
pub struct ThreadTrace<W> {
    /// The thread id.
    pub thread: u64,
    /// The lines written.
    pub lines: u64,
    /// The output, flushed.
    pub output: W,
}

/// Writes `steps` as Tenet traces: `open(thread)` gives the output of a thread the first
/// time it runs. Returns every thread's output, by thread id.
///
/// # Errors
///
/// [`Error::Unsupported`] for a stream that is not x86 or x64, or of more than
/// [`MAX_THREADS`] threads; a read error of the stream; an output that fails.
pub fn convert<W: Write>(
    steps: &mut dyn Steps,
    open: impl FnMut(u64) -> std::io::Result<W>,
) -> Result<Vec<ThreadTrace<W>>, Error> {
    // Only the general registers are written: the stream may replay only those.
    steps.want_regs(RegsWanted::General);
    // The register map is known once a step has been read.
    let Some(first) = steps.next_step() else {
        return Ok(Vec::new());
    };
    let first = first?.clone();
    let map = register_map(steps)?;
    let mut lines = Lines {
        threads: Vec::new(),
        at: 0,
        current: MemItems::new(),
        before: MemItems::new(),
        padded: Vec::new(),
        line: Registers::new(map.arch),
        map,
        open,
    };
    // What the input recorded before its first instruction goes on the first line, as
    // the tracer wrote it there.
    if let Some(before) = steps.before_first() {
        take_accesses(before, &mut lines.before);
    }
    let known = steps.regs_known();
    let changed = steps.regs_changed();
    lines.step(&first, steps.regs(), changed, known)?;
    if known == u64::MAX {
        let mut failed = None;
        steps.walk_steps(
            &mut |step, regs, changed| match lines.step(step, regs, changed, u64::MAX) {
                Ok(()) => true,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(e);
        }
    } else {
        // A stream that names registers as it goes (Tenet): each line writes only those
        // named so far, so a register the input never gave is never invented.
        let mut step = Step::default();
        while let Some(next) = steps.next_step() {
            step.clone_from(next?);
            let changed = steps.regs_changed();
            lines.step(&step, steps.regs(), changed, steps.regs_known())?;
        }
    }
    let mut threads = lines.threads;
    threads.sort_by_key(|t| t.thread);
    threads
        .into_iter()
        .map(|out| {
            Ok(ThreadTrace {
                thread: out.thread,
                lines: out.lines,
                output: out.writer.finish().map_err(write_err)?,
            })
        })
        .collect()
}

/// The writing state of a conversion.
struct Lines<W: Write, F> {
    /// In order of first appearance; `at` is the thread of the previous step (threads run
    /// in long stretches, so the search is rare).
    threads: Vec<ThreadOut<W>>,
    at: usize,
    /// The accesses of the step being written.
    current: MemItems,
    /// The accesses recorded before the first step, for the first line written.
    before: MemItems,
    /// The span's words when the stream gives fewer (read as 0).
    padded: Vec<u64>,
    /// The registers of the line being written, reused.
    line: Registers,
    map: RegMap,
    /// Opens the output of a thread.
    open: F,
}

impl<W: Write, F: FnMut(u64) -> std::io::Result<W>> Lines<W, F> {
    /// Writes the line of `step`, whose registers before it are `regs` (the stream's
    /// [`Steps::regs`]), those possibly changed since the step before being `changed`, and
    /// those with a recorded value `known` ([`Steps::regs_known`]).
    fn step(&mut self, step: &Step, regs: &[u64], changed: u64, known: u64) -> Result<(), Error> {
        let (thread, pc) = (step.thread, step.pc);
        take_accesses(step, &mut self.current);
        let RegMap {
            arch,
            lo,
            ref tenet,
            all,
        } = self.map;
        // Whether the previous step was this thread's last line: then only the words the
        // stream says changed since can differ from it.
        let mut same = true;
        if self.threads.get(self.at).is_none_or(|t| t.thread != thread) {
            same = false;
            self.at = match self.threads.iter().position(|t| t.thread == thread) {
                Some(k) => k,
                None => {
                    if self.threads.len() >= MAX_THREADS {
                        return Err(Error::Unsupported(format!(
                            "more than {MAX_THREADS} threads: one Tenet trace per thread would open too many files"
                        )));
                    }
                    let w = (self.open)(thread)
                        .map_err(|e| Error::io(format!("the trace of thread {thread}"), e))?;
                    self.threads.push(ThreadOut {
                        thread,
                        writer: Writer::new(w, arch),
                        last: vec![0; tenet.len()],
                        written: 0,
                        pending: std::mem::take(&mut self.before),
                        lines: 0,
                    });
                    self.threads.len().saturating_sub(1)
                }
            };
        }
        let Some(out) = self.threads.get_mut(self.at) else {
            return Ok(());
        };
        let now = match regs.get(lo..lo.saturating_add(tenet.len())) {
            Some(now) => now,
            None => {
                self.padded.clear();
                self.padded.extend(
                    (0..tenet.len()).map(|k| regs.get(lo.saturating_add(k)).copied().unwrap_or(0)),
                );
                &self.padded
            }
        };
        let max = arch.max_value();
        let first = out.lines == 0;
        let known = known.checked_shr(lo as u32).unwrap_or(u64::MAX) & all;
        // Words known now but not written yet are written whatever their value.
        let fresh = known & !out.written;
        let candidates = if same && !first {
            (changed.checked_shr(lo as u32).unwrap_or(u64::MAX) & known) | fresh
        } else {
            known
        };
        let line = &mut self.line;
        line.clear();
        let written = &mut out.written;
        let mut take = |k: usize| {
            let (Some(last), Some(&value), Some(&Some(index))) =
                (out.last.get_mut(k), now.get(k), tenet.get(k))
            else {
                return;
            };
            let bit = 1u64.checked_shl(k as u32).unwrap_or(0);
            let value = value & max;
            let new = if k < 64 { fresh & bit != 0 } else { first };
            if (k >= 64 || known & bit != 0) && (new || *last != value) {
                *last = value;
                *written |= bit;
                line.set(index, value);
            }
        };
        if tenet.len() <= 64 {
            let mut bits = candidates;
            while bits != 0 {
                take(bits.trailing_zeros() as usize);
                bits &= bits.wrapping_sub(1);
            }
        } else {
            // Spread wider than the changed-word mask: every word, every line.
            (0..tenet.len()).for_each(take);
        }
        line.set(arch.pc(), pc);
        out.writer
            .write_instruction_items(line, &out.pending)
            .map_err(write_err)?;
        out.lines = out.lines.saturating_add(1);
        std::mem::swap(&mut out.pending, &mut self.current);
        Ok(())
    }
}

fn write_err(e: tenet_trace::WriteError) -> Error {
    match e {
        tenet_trace::WriteError::Io(e) => Error::io("cannot write the Tenet trace", e),
        e => Error::Unsupported(e.to_string()),
    }
}

/// Formats the accesses of `step` into `out`: kind (from the access's kind where known,
/// else `mw` when a new value was recorded), address, bytes after the instruction.
fn take_accesses(step: &Step, out: &mut MemItems) {
    out.clear();
    for a in &step.mem {
        let kind = match a.kind {
            AccessKind::Read => MemKind::Read,
            AccessKind::Write => MemKind::Write,
            AccessKind::ReadWrite => MemKind::ReadWrite,
            AccessKind::Unknown if a.new.is_some() => MemKind::Write,
            AccessKind::Unknown => MemKind::Read,
        };
        let Some(data) = step.new(a).or_else(|| step.old(a)) else {
            continue;
        };
        out.push(MemRef {
            kind,
            addr: a.addr,
            data,
        });
    }
}

/// Where a stream's [`Steps::regs`] hold the Tenet registers: the words `lo..lo + n`
/// hold every one of them but the pc, word `lo + k` being Tenet register `tenet[k]` (or
/// none); registers the stream does not name are left out. Bit `k` of `all` is set
/// where `tenet[k]` is one (for `k` < 64: a wider span compares every word every line).
struct RegMap {
    arch: Arch,
    lo: usize,
    tenet: Vec<Option<usize>>,
    all: u64,
}

/// The architecture of a stream and where its registers are.
fn register_map(steps: &dyn Steps) -> Result<RegMap, Error> {
    let arch = match steps.isa() {
        Isa::X64 => Arch::Amd64,
        Isa::X86 => Arch::X86,
        other => {
            return Err(Error::Unsupported(format!(
                "Tenet traces hold x86 and x64 registers; this stream is {other:?}"
            )));
        }
    };
    let names = steps.reg_names();
    let slots: Vec<(usize, usize)> = arch
        .registers()
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != arch.pc())
        .filter_map(|(i, name)| Some((i, names.iter().position(|n| n == name)?)))
        .collect();
    let lo = slots.iter().map(|&(_, s)| s).min().unwrap_or(0);
    let hi = slots
        .iter()
        .map(|&(_, s)| s)
        .max()
        .map_or(lo, |s| s.saturating_add(1));
    let mut tenet = vec![None; hi.saturating_sub(lo)];
    for (i, slot) in slots {
        if let Some(t) = tenet.get_mut(slot.saturating_sub(lo)) {
            *t = Some(i);
        }
    }
    let all = tenet
        .iter()
        .enumerate()
        .filter(|(_, t)| t.is_some())
        .fold(0u64, |m, (k, _)| {
            m | 1u64.checked_shl(k as u32).unwrap_or(0)
        });
    Ok(RegMap {
        arch,
        lo,
        tenet,
        all,
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeMap;

    use quickcheck::{QuickCheck, TestResult};
    use tenet_trace::{Line, ReadOptions, Reader};
    use trac_x64dbg::testgen;

    use super::*;
    use trace_model::{Ctx, Handler, Input, Options};
    use trace_registry::formats::x64dbg::X64dbg;

    /// What the x64dbg replay says of one instruction of a thread: pc, the general
    /// registers by name, the accesses as (kind, addr, value after).
    type Expected = (u64, Vec<(String, u64)>, Vec<(MemKind, u64, Vec<u8>)>);

    fn x64dbg(arch: trac_x64dbg::Arch, threads: u32, n: u64, seed: u64) -> Input {
        let opts = testgen::Options {
            arch,
            threads,
            max_run: 7,
            seed,
        };
        let rec = trac_x64dbg::RecorderOptions::default();
        let name = match arch {
            trac_x64dbg::Arch::X64 => "t.trace64",
            trac_x64dbg::Arch::X86 => "t.trace32",
        };
        Input::from_bytes(name, testgen::trace(opts, n, rec, "a.exe")).unwrap()
    }

    /// Per thread, what the replay gives for each of its instructions (names: the Tenet
    /// architecture's registers but the pc).
    fn replay(mut input: Input, tenet: Arch) -> BTreeMap<u64, Vec<Expected>> {
        let options = Options::default();
        let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
        let mut out: BTreeMap<u64, Vec<Expected>> = BTreeMap::new();
        while let Some(step) = steps.next_step() {
            let step = step.unwrap();
            let (thread, pc) = (step.thread, step.pc);
            let mem = step
                .mem
                .iter()
                .map(|a| {
                    let kind = if a.new.is_some() {
                        MemKind::Write
                    } else {
                        MemKind::Read
                    };
                    let value = step.new(a).or_else(|| step.old(a)).unwrap().to_vec();
                    (kind, a.addr, value)
                })
                .collect();
            let names = steps.reg_names();
            let regs = tenet
                .registers()
                .iter()
                .filter(|n| **n != tenet.pc_name())
                .map(|n| {
                    let k = names.iter().position(|x| x == n).unwrap();
                    ((*n).to_owned(), steps.regs()[k])
                })
                .collect();
            out.entry(thread).or_default().push((pc, regs, mem));
        }
        out
    }

    /// Per thread, what the Tenet trace says: the merged state after each line, each line's
    /// memory items.
    fn read_back(bytes: &[u8]) -> Vec<Expected> {
        let mut r = Reader::parse(bytes, ReadOptions::default());
        let mut state: Option<Registers> = None;
        let mut out = Vec::new();
        while let Some(l) = r.next_line() {
            let Line::Instruction(i) = l.unwrap() else {
                panic!("no comments expected")
            };
            let arch = i.regs.arch();
            let s = state.get_or_insert(Registers::new(arch));
            s.merge(i.regs);
            let regs = s
                .iter()
                .filter(|(n, _)| *n != arch.pc_name())
                .map(|(n, v)| (n.to_owned(), v))
                .collect();
            let mem = i.mem().map(|m| (m.kind, m.addr, m.data.to_vec())).collect();
            out.push((i.pc(), regs, mem));
        }
        out
    }

    /// x64dbg → Tenet → read gives, for every instruction of every thread, the pc and the
    /// general registers of the x64dbg replay, and line k + 1 carries the accesses of
    /// instruction k with the values after it (`mw` exactly where x64dbg recorded a new
    /// value); the last instruction's accesses are not written. Several threads, x64 and
    /// x86.
    #[test]
    fn x64dbg_to_tenet_to_read_matches_the_replay() {
        fn prop(seed: u64, threads: u8, n: u16, x86: bool) -> TestResult {
            let arch = if x86 {
                trac_x64dbg::Arch::X86
            } else {
                trac_x64dbg::Arch::X64
            };
            let tenet = if x86 { Arch::X86 } else { Arch::Amd64 };
            let threads = u32::from(threads % 4) + 1;
            let n = u64::from(n % 600) + 1;
            let expected = replay(x64dbg(arch, threads, n, seed), tenet);
            let options = Options::default();
            let mut input = x64dbg(arch, threads, n, seed);
            let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            let written = convert(&mut *steps, |_| Ok(Vec::new())).unwrap();
            assert_eq!(
                written.iter().map(|t| t.thread).collect::<Vec<_>>(),
                expected.keys().copied().collect::<Vec<_>>()
            );
            for t in written {
                let want = &expected[&t.thread];
                let got = read_back(&t.output);
                assert_eq!(got.len(), want.len());
                assert_eq!(t.lines, want.len() as u64);
                for (k, (g, w)) in got.iter().zip(want).enumerate() {
                    assert_eq!(g.0, w.0, "pc of instruction {k} of thread {}", t.thread);
                    assert_eq!(g.1, w.1, "registers of instruction {k}");
                    let accesses = if k == 0 { &[][..] } else { &want[k - 1].2[..] };
                    assert_eq!(g.2, accesses, "memory of line {k}");
                }
            }
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(40)
            .quickcheck(prop as fn(u64, u8, u16, bool) -> TestResult);
    }

    /// A stream that is not x86/x64 is refused.
    #[test]
    fn other_architectures_are_refused() {
        let bytes = trace_model::schema::testing::testdata("amber/example.tt6");
        let mut input = Input::from_bytes("example.tt6", bytes).unwrap();
        let options = Options::default();
        let mut steps = trace_registry::formats::amber::TT6
            .steps(&mut input, &mut Ctx::new(&options))
            .unwrap();
        let e = convert(&mut *steps, |_| Ok(Vec::new())).unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{e}");
    }
}
