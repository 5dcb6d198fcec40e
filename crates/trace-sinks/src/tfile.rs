//! An instruction stream ([`Steps`]) as a GDB tracepoint file (`tracekit convert --to
//! tfile`): one trace frame per instruction of one thread, which GDB replays with
//! `target tfile`, `tfind`, `tdump`, `p $reg` and `x`, with no executable loaded.
//!
//! The file, as gdb-tfile's writer lays it out (notes `gdb-tfile-notes.md` §1, §6):
//!
//! - the description: `R` (the register block size), the target description of an x86-64
//!   (`i386:x86-64`) or x86 (`i386`) target ([`gdb_tfile::x86_tdesc_xml`]: general
//!   registers, pc, `eflags`, segments, x87, SSE, and AVX upper halves when the stream has
//!   them), a `status` line (stopped, the frame count filled in at the end), and one
//!   tracepoint `T1` at the pc of the first instruction;
//! - per instruction, a frame of tracepoint 1: an `R` block with the register state before
//!   the instruction (GDB's `g`-packet layout of that description), then an `M` block per
//!   memory access with the bytes before the instruction (`old`; accesses without a
//!   recorded `old` are left out, such as a Tenet `mw`);
//! - the 4 zero bytes `tsave` ends a file with.
//!
//! Registers the stream does not hold are written as **zero**: within an `R` block GDB has
//! no per-register "unavailable" (only registers past the block's end are, and GDB stops at
//! the first one in its own order that does not fit, which would take the x87 and SSE
//! registers with it). From x64dbg, every register of the description is recorded except
//! `fop` (zero), `fiseg`/`foseg` are the low 16 bits of x87 `ErrorSelector`/`DataSelector`
//! (x64dbg's `fcs`/`fds`), and `st0`–`st7` are x87 `RegisterArea` in stack order; from
//! Tenet, only the general registers and the pc (the rest zero, and writes without their
//! old value left out).
//!
//! Registers are found by name once ([`Registers::reg_source`](trace_model::steps::Registers::reg_source), else a word of
//! [`Steps::regs`] named in [`Steps::reg_names`]); every frame then brings one reused block
//! up to date ([`Registers::walk_regs`](trace_model::steps::Registers::walk_regs): x64dbg writes each register word its blocks change
//! into the block as it replays them). Memory use is bounded by one frame and a 256 KiB
//! buffer.

use std::collections::BTreeSet;
use std::io::{Seek, SeekFrom, Write};

use gdb_tfile::write::{FrameWriter, WriteError};
use gdb_tfile::{Description, Endian, Status, StopReason, TargetDescription, Tracepoint};
use gdb_tfile::{SourceKind, SourceString, X86Target};

use trace_model::Error;
use trace_model::steps::{Isa, RegCopy, RegPlan, RegSource, Step, Steps};

/// The tracepoint every frame belongs to.
const TRACEPOINT: i16 = 1;

/// Frames are gathered in a buffer and written out once it holds this much.
const FLUSH_AT: usize = 256 << 10;

/// The most thread ids an unknown-thread error lists.
const THREADS_LISTED: usize = 16;

/// Why a conversion to a tfile failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TfileError {
    /// The thread asked for never runs in the stream.
    #[error(
        "thread {thread} does not occur in the trace; its threads: {}{}",
        seen.iter().map(u64::to_string).collect::<Vec<_>>().join(", "),
        if *more { ", …" } else { "" }
    )]
    NoSuchThread {
        /// The thread asked for.
        thread: u64,
        /// The first threads of the stream (at most 16), in order of id.
        seen: Vec<u64>,
        /// Whether it has more threads than `seen` lists.
        more: bool,
    },
    /// The stream has no instruction to convert.
    #[error("the trace has no instructions to convert")]
    Empty,
    /// The stream is not x86 or x86-64 (the target descriptions written are x86's).
    #[error("GDB tracepoint files are written for x86 and x86-64 traces; this one is {0:?}")]
    Isa(Isa),
    /// Reading the stream failed (a damaged input): the frames written so far are not a
    /// file.
    #[error(transparent)]
    Read(#[from] Error),
    /// Writing the output failed.
    #[error("cannot write the tracepoint file: {0}")]
    Write(#[from] WriteError),
}

impl From<std::io::Error> for TfileError {
    fn from(e: std::io::Error) -> Self {
        TfileError::Write(WriteError::Io(e))
    }
}

/// What a conversion wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    /// The thread converted.
    pub thread: u64,
    /// The frames written (instructions of that thread).
    pub frames: u64,
    /// The pc of its first instruction: the address of tracepoint 1.
    pub first_pc: u64,
    /// The `R` block size.
    pub register_size: u32,
    /// The bytes written.
    pub bytes: u64,
}

/// The writing state, set up at the converted thread's first step.
struct Setup {
    plan: Plan,
    frames: FrameWriter,
    /// The `R` block, reused.
    block: Vec<u8>,
    /// Where the status line's two counts are in the output (from its start).
    counts: [usize; 2],
    first_pc: u64,
}

/// Where a register of the description comes from: a [`Registers::update_regs`](trace_model::steps::Registers::update_regs) copy, or
/// else a word of [`Steps::regs`].
#[derive(Default)]
struct Plan {
    copies: RegPlan,
    /// (position in `regs()`, offset in the block, bytes).
    words: Vec<(usize, usize, usize)>,
}

impl Plan {
    /// Brings `block` up to date with the registers before the last step of `steps`.
    fn fill(&mut self, steps: &mut dyn Steps, block: &mut [u8]) {
        steps.update_regs(&mut self.copies, block);
        if self.words.is_empty() {
            return;
        }
        let regs = steps.regs();
        for &(slot, at, len) in &self.words {
            let v = regs.get(slot).copied().unwrap_or(0).to_le_bytes();
            // Whole words are copied with a constant size (no call to memcpy).
            if len == 8 {
                if let Some(dst) = block.get_mut(at..at.saturating_add(8)) {
                    dst.copy_from_slice(&v);
                }
            } else if let (Some(dst), Some(src)) =
                (block.get_mut(at..at.saturating_add(len)), v.get(..len))
            {
                dst.copy_from_slice(src);
            }
        }
    }
}

/// The stream's names for a register of GDB's x86 descriptions, with the byte to start at
/// and the most bytes to take (`None`: all): GDB's own name first (a tfile stream, and
/// x64dbg's `st0`…`st7` and `mxcsr`), then x64dbg's (`rflags`, `fcw`, `fip`, …,
/// `ymm0.High`).
fn sources(gdb: &str) -> Vec<(String, usize, Option<usize>)> {
    let mut v = vec![(gdb.to_owned(), 0, None)];
    let x87 = |field: &str, len| (field.to_owned(), 0, len);
    match gdb {
        "eflags" => v.push(("rflags".into(), 0, None)),
        "fctrl" => v.push(x87("fcw", None)),
        "fstat" => v.push(x87("fsw", None)),
        "ftag" => v.push(x87("ftw", None)),
        "fioff" => v.push(x87("fip", None)),
        "fooff" => v.push(x87("fdp", None)),
        // The selector is the low 16 bits (the 32-bit save area puts the opcode above).
        "fiseg" => v.push(x87("fcs", Some(2))),
        "foseg" => v.push(x87("fds", Some(2))),
        _ => {
            if let Some(i) = gdb.strip_prefix("ymm").and_then(|r| r.strip_suffix('h')) {
                v.push((format!("ymm{i}.High"), 0, None));
            }
        }
    }
    v
}

/// Builds the plan for the registers of `td` from what `steps` names.
fn plan(steps: &mut dyn Steps, td: &TargetDescription) -> Plan {
    let names = steps.reg_names().to_vec();
    let mut copies: Vec<RegCopy> = Vec::new();
    let mut words = Vec::new();
    for r in &td.registers {
        let size = r.size();
        for (name, skip, most) in sources(&r.name) {
            let len = most.map_or(size, |m| m.min(size));
            if let Some(src) = steps.reg_source(&name) {
                copies.push(RegCopy {
                    src: RegSource {
                        at: src.at.saturating_add(skip),
                        len: src.len.saturating_sub(skip).min(len),
                    },
                    dst: r.offset,
                    len: size,
                });
                break;
            }
            if skip == 0
                && let Some(slot) = names.iter().position(|n| *n == name)
            {
                words.push((slot, r.offset, len.min(8)));
                break;
            }
        }
    }
    Plan {
        copies: RegPlan::new(copies),
        words,
    }
}

/// The description of the file: `R`, the target description, the status (frame counts
/// to be filled in), tracepoint 1 at `pc`.
fn description(xml: &str, register_size: u32, thread: u64, pc: u64) -> Description {
    let mut d = Description {
        register_size: Some(register_size),
        ..Description::default()
    };
    d.set_tdesc_xml(xml);
    d.status = Some(Status {
        stop_reason: StopReason::Stop,
        // Placeholders of 16 hex digits, overwritten with the counts at the end.
        frames: Some(u64::MAX),
        created: Some(u64::MAX),
        notes: Some(format!("converted by tracekit, thread {thread}").into_bytes()),
        ..Status::default()
    });
    d.tracepoints.push(Tracepoint {
        number: 1,
        address: pc,
        defined: true,
        enabled: true,
        sources: vec![SourceString {
            kind: SourceKind::At,
            text: format!("*{pc:#x}").into_bytes(),
        }],
        ..Tracepoint::default()
    });
    d
}

/// Where in `head` the 16 digits after `key` are.
fn placeholder(head: &[u8], key: &[u8]) -> Option<usize> {
    let at = head.windows(key.len()).position(|w| w == key)?;
    at.checked_add(key.len())
}

/// Writes the frames of `thread` (by default the thread of the first step) of `steps` to
/// `out` as a GDB tracepoint file. `out` is written from its current position; the frame
/// count in the status line is written last (a seek back), so `out` is a file.
///
/// # Errors
///
/// [`TfileError::NoSuchThread`], [`TfileError::Empty`] and [`TfileError::Isa`] for a
/// stream or thread there is nothing to convert of; [`TfileError::Read`] when the input
/// is damaged (what was written is then not a valid file: write to a temporary file);
/// [`TfileError::Write`] when the output fails.
pub fn convert<W: Write + Seek>(
    steps: &mut dyn Steps,
    thread: Option<u64>,
    mut out: W,
) -> Result<(Converted, W), TfileError> {
    let start = out.stream_position()?;
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    let mut more = false;
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT.saturating_add(4096));
    // The thread's first step: set up, and its frame.
    let mut first: Option<(Setup, u64)> = None;
    while let Some(step) = steps.next_step() {
        let step = step?;
        let t = step.thread;
        if thread.is_some_and(|want| want != t) {
            // Kept only for the error of a thread that never runs.
            if !seen.contains(&t) {
                if seen.len() < THREADS_LISTED {
                    seen.insert(t);
                } else {
                    more = true;
                }
            }
            continue;
        }
        // `plan.fill` reads the stream again: the step is kept.
        let step = step.clone();
        let mut setup = set_up(steps, t, step.pc, &mut buf)?;
        setup.plan.fill(steps, &mut setup.block);
        push_frame(&mut setup.frames, &mut buf, &setup.block, &step)?;
        first = Some((setup, t));
        break;
    }
    let Some((mut setup, t)) = first else {
        return Err(match thread {
            Some(thread) => TfileError::NoSuchThread {
                thread,
                seen: seen.into_iter().collect(),
                more,
            },
            None => TfileError::Empty,
        });
    };
    let mut written = 0u64;
    let mut failed: Option<TfileError> = None;
    let Setup {
        plan,
        frames,
        block,
        counts,
        first_pc,
    } = &mut setup;
    let mut on_step = |step: &Step, regs: &[u8]| {
        let pushed = push_frame(frames, &mut buf, regs, step).and_then(|()| {
            if buf.len() >= FLUSH_AT {
                out.write_all(&buf)?;
                written = written.saturating_add(buf.len() as u64);
                buf.clear();
            }
            Ok(())
        });
        match pushed {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    };
    if plan.words.is_empty() {
        steps.walk_regs(t, &mut plan.copies, block, &mut on_step)?;
    } else {
        // Registers read from `regs()` by name: step by step.
        let mut step = Step::default();
        while let Some(next) = steps.next_step() {
            let next = next?;
            if next.thread != t {
                continue;
            }
            step.clone_from(next);
            plan.fill(steps, block);
            if !on_step(&step, block) {
                break;
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    FrameWriter::terminate(&mut buf);
    out.write_all(&buf)?;
    written = written.saturating_add(buf.len() as u64);
    let n = frames.frames() as u64;
    for &at in counts.iter() {
        if at > 0 {
            out.seek(SeekFrom::Start(start.saturating_add(at as u64)))?;
            out.write_all(format!("{n:016x}").as_bytes())?;
        }
    }
    out.seek(SeekFrom::Start(start.saturating_add(written)))?;
    out.flush()?;
    Ok((
        Converted {
            thread: t,
            frames: n,
            first_pc: *first_pc,
            register_size: u32::try_from(block.len()).unwrap_or(u32::MAX),
            bytes: written,
        },
        out,
    ))
}

/// The writing state for thread `thread` whose first instruction is at `pc`: the plan of
/// the registers of the x86 description of the stream, and the description written to
/// `buf`.
fn set_up(
    steps: &mut dyn Steps,
    thread: u64,
    pc: u64,
    buf: &mut Vec<u8>,
) -> Result<Setup, TfileError> {
    let target = match steps.isa() {
        Isa::X64 => X86Target::Amd64,
        Isa::X86 => X86Target::I386,
        other => return Err(TfileError::Isa(other)),
    };
    let avx = steps.reg_source("ymm0.High").is_some() || steps.reg_source("ymm0h").is_some();
    let xml = gdb_tfile::x86_tdesc_xml(target, avx);
    let td = TargetDescription::parse(&xml, 0)
        .map_err(|e| TfileError::Read(Error::Unsupported(format!("the x86 description: {e}"))))?;
    let size = u32::try_from(td.block_size()).unwrap_or(u32::MAX);
    let from = buf.len();
    gdb_tfile::write::write_description(&description(&xml, size, thread, pc), buf)?;
    let head = buf.get(from..).unwrap_or_default();
    let at = |key: &[u8]| {
        placeholder(head, key)
            .and_then(|k| k.checked_add(from))
            .unwrap_or(0)
    };
    let counts = [at(b";tframes:"), at(b";tcreated:")];
    Ok(Setup {
        plan: plan(steps, &td),
        frames: FrameWriter::new(size, Endian::Little),
        block: vec![0; td.block_size()],
        counts,
        first_pc: pc,
    })
}

/// Appends the frame of `step`: its `R` block `regs`, then an `M` block per access with
/// the bytes before the instruction (accesses without them left out).
fn push_frame(
    frames: &mut FrameWriter,
    buf: &mut Vec<u8>,
    regs: &[u8],
    step: &Step,
) -> Result<(), TfileError> {
    frames.begin(buf, TRACEPOINT)?;
    frames.registers(buf, regs)?;
    for a in &step.mem {
        let Some(bytes) = step.old(a) else {
            continue;
        };
        // M blocks hold at most 65535 bytes: longer accesses are split, as gdbserver does.
        if !bytes.is_empty() && bytes.len() <= usize::from(u16::MAX) {
            frames.memory(buf, a.addr, bytes)?;
            continue;
        }
        for (k, chunk) in bytes.chunks(usize::from(u16::MAX)).enumerate() {
            let off = (k as u64).saturating_mul(u64::from(u16::MAX));
            frames.memory(buf, a.addr.wrapping_add(off), chunk)?;
        }
    }
    frames.end(buf)?;
    Ok(())
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::panic
)]
mod tests {
    use std::io::Cursor;

    use gdb_tfile::{Block, ReadOptions, TraceFile};
    use quickcheck::{QuickCheck, TestResult};
    use trac_x64dbg::{Arch, RegDump, Segment, testgen};
    use trace_core::rng::SplitMix64;

    use super::*;
    use trace_model::{Ctx, Handler, Input, Options};
    use trace_registry::formats::x64dbg::X64dbg;

    /// A synthetic trace: the generator's machine, and with `perturb` random REGDUMP words
    /// past the general registers (segments, x87, XMM, YMM, padding) changed between
    /// instructions and a new recording session now and then.
    fn x64dbg_trace(arch: Arch, threads: u32, n: u64, seed: u64, perturb: bool) -> Vec<u8> {
        let opts = testgen::Options {
            arch,
            threads,
            max_run: 7,
            seed,
        };
        let header = trac_x64dbg::Header::new(arch, "a.exe");
        let writer = trac_x64dbg::Writer::new(Vec::new(), &header).unwrap();
        let mut rec = trac_x64dbg::Recorder::new(writer, trac_x64dbg::RecorderOptions::default());
        let mut machine = testgen::Machine::new(opts);
        let mut rng = SplitMix64::new(seed);
        let general = if arch == Arch::X64 { 18 } else { 10 };
        let words = u64::from(arch.regdump_words()) - general;
        for _ in 0..n {
            let mut step = machine.step();
            if perturb && rng.below(3) == 0 {
                let i = (general + rng.below(words)) as usize;
                step.regs.set_word(i, rng.next_u64() & arch.word_max());
            }
            if perturb && rng.below(97) == 0 {
                rec.new_session().unwrap();
            }
            rec.step(step).unwrap();
        }
        rec.finish().unwrap()
    }

    /// What GDB should find in register `name` of the description (`size` bytes), from the
    /// x64dbg register state: written here from trac-x64dbg's own accessors, apart from the
    /// sink's table of names.
    fn expected(regs: &RegDump, name: &str, size: usize) -> Vec<u8> {
        let gprs: &[&str] = match regs.arch() {
            Arch::X64 => &[
                "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11",
                "r12", "r13", "r14", "r15",
            ],
            Arch::X86 => &["eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi"],
        };
        let fpu = regs.x87_fpu();
        let index = |prefix: &str, suffix: &str| -> Option<usize> {
            name.strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse()
                .ok()
        };
        let mut v: Vec<u8> = if let Some(i) = gprs.iter().position(|g| *g == name) {
            regs.gpr(i).to_le_bytes().to_vec()
        } else {
            let word = |w: u64| w.to_le_bytes().to_vec();
            match name {
                "rip" | "eip" => word(regs.ip()),
                "eflags" => word(regs.flags() & 0xffff_ffff),
                "cs" => word(regs.segment(Segment::Cs).into()),
                "ss" => word(regs.segment(Segment::Ss).into()),
                "ds" => word(regs.segment(Segment::Ds).into()),
                "es" => word(regs.segment(Segment::Es).into()),
                "fs" => word(regs.segment(Segment::Fs).into()),
                "gs" => word(regs.segment(Segment::Gs).into()),
                "fctrl" => word(fpu.control_word.into()),
                "fstat" => word(fpu.status_word.into()),
                "ftag" => word(fpu.tag_word.into()),
                "fiseg" => word((fpu.error_selector & 0xffff).into()),
                "fioff" => word(fpu.error_offset.into()),
                "foseg" => word((fpu.data_selector & 0xffff).into()),
                "fooff" => word(fpu.data_offset.into()),
                "fop" => word(0),
                "mxcsr" => word(regs.mxcsr().into()),
                _ => {
                    if let Some(i) = index("st", "") {
                        regs.st(i).to_vec()
                    } else if let Some(i) = index("xmm", "") {
                        regs.xmm(i).to_le_bytes().to_vec()
                    } else if let Some(i) = index("ymm", "h") {
                        regs.ymm(i)[16..].to_vec()
                    } else {
                        panic!("no expectation for register {name}")
                    }
                }
            }
        };
        v.resize(size, 0);
        v
    }

    /// Per instruction of `thread` (None: the first thread), from the x64dbg replay: the
    /// pc, the register state, the accesses as (address, old bytes).
    type Instr = (u64, RegDump, Vec<(u64, Vec<u8>)>);

    fn replay(bytes: &[u8], thread: Option<u64>) -> (u64, Vec<Instr>) {
        let trace = trac_x64dbg::Trace::parse(bytes).unwrap();
        let w = trace.arch().word_size();
        let mut replay = trace.replay();
        let mut want = thread;
        let mut out = Vec::new();
        while let Some(ins) = replay.next_instruction() {
            let ins = ins.unwrap();
            let t = u64::from(ins.thread());
            if *want.get_or_insert(t) != t {
                continue;
            }
            let mem = ins
                .mem()
                .map(|m| (m.address, m.old.to_le_bytes()[..w].to_vec()))
                .collect();
            out.push((replay.regs().ip(), replay.regs().clone(), mem));
        }
        (want.unwrap(), out)
    }

    fn convert_bytes(
        bytes: Vec<u8>,
        thread: Option<u64>,
    ) -> Result<(Converted, Vec<u8>), TfileError> {
        let options = Options::default();
        let mut input = Input::from_bytes("t.trace64", bytes).unwrap();
        let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
        let (done, out) = convert(&mut *steps, thread, Cursor::new(Vec::new()))?;
        Ok((done, out.into_inner()))
    }

    /// Checks a converted file against the replay: one frame of tracepoint 1 per
    /// instruction of the thread, every register of the description as the x64dbg state
    /// before the instruction says, one `M` block per access with the bytes before it.
    fn check(file: &[u8], thread: u64, want: &[Instr], done: &Converted) {
        let tf = TraceFile::parse(file, ReadOptions::default()).unwrap();
        let d = tf.description();
        let td = tf.tdesc().unwrap();
        assert_eq!(d.register_size, Some(td.block_size() as u32));
        assert_eq!(d.tracepoints.len(), 1);
        assert_eq!(d.tracepoints[0].address, want[0].0);
        let st = d.status.as_ref().unwrap();
        assert_eq!(st.frames, Some(want.len() as u64));
        assert_eq!(st.created, Some(want.len() as u64));
        assert_eq!(
            (done.thread, done.frames, done.first_pc, done.bytes),
            (thread, want.len() as u64, want[0].0, file.len() as u64)
        );
        let mut n = 0;
        for (k, frame) in tf.frames().enumerate() {
            let frame = frame.unwrap();
            let (pc, regs, mem) = &want[k];
            assert_eq!(frame.tracepoint, 1);
            let block = frame.registers().unwrap().unwrap();
            for r in &td.registers {
                let got = &block[r.offset..r.offset + r.size()];
                assert_eq!(
                    got,
                    &expected(regs, &r.name, r.size())[..],
                    "frame {k} (pc {pc:#x}): {}",
                    r.name
                );
            }
            let blocks: Vec<(u64, Vec<u8>)> = frame
                .blocks()
                .filter_map(|b| match b.unwrap() {
                    Block::Memory { address, data, .. } => Some((address, data.to_vec())),
                    _ => None,
                })
                .collect();
            assert_eq!(&blocks, mem, "frame {k}: memory");
            n += 1;
        }
        assert_eq!(n, want.len());
    }

    /// x64dbg → tfile → read with gdb-tfile gives, at every frame, the registers and memory
    /// of the x64dbg replay, for the default (first) thread or one chosen, over traces of
    /// several threads whose other registers change at random (x64 and x86).
    #[test]
    fn x64dbg_to_tfile_to_read_matches_the_replay() {
        fn prop(seed: u64, threads: u8, n: u16, x86: bool, pick: Option<u8>) -> TestResult {
            let arch = if x86 { Arch::X86 } else { Arch::X64 };
            let threads = u32::from(threads % 4) + 1;
            let n = u64::from(n % 500) + 1;
            let bytes = x64dbg_trace(arch, threads, n, seed, true);
            // A thread by its place in the order of first appearance.
            let thread = pick.map(|p| {
                let trace = trac_x64dbg::Trace::parse(&bytes).unwrap();
                let mut seen: Vec<u64> = Vec::new();
                let mut r = trace.replay();
                while let Some(ins) = r.next_instruction() {
                    let t = u64::from(ins.unwrap().thread());
                    if !seen.contains(&t) {
                        seen.push(t);
                    }
                }
                seen[usize::from(p) % seen.len()]
            });
            let (t, want) = replay(&bytes, thread);
            let (done, file) = convert_bytes(bytes, thread).unwrap();
            check(&file, t, &want, &done);
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(40)
            .quickcheck(prop as fn(u64, u8, u16, bool, Option<u8>) -> TestResult);
    }

    /// The fixtures (x64 and x86, several threads) and the real x64dbg sample, when it is
    /// there.
    #[test]
    fn fixtures_and_the_real_sample_match_the_replay() {
        let mut files = vec![
            trace_model::schema::testing::testdata("x64dbg/basic.trace64"),
            trace_model::schema::testing::testdata("x64dbg/basic.trace32"),
            trace_model::schema::testing::testdata("x64dbg/sessions.trace64"),
        ];
        let real = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/realdata/x64dbg/d-ornen_DBGLogParser_test1.trace64");
        match std::fs::read(&real) {
            Ok(b) => files.push(b),
            Err(_) if std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_some_and(|v| v == "1") => {
                panic!("{} missing and TRACEKIT_REQUIRE_REALDATA=1", real.display())
            }
            Err(_) => eprintln!("skipped the real sample: {} not found", real.display()),
        }
        for bytes in files {
            let (t, want) = replay(&bytes, None);
            let (done, file) = convert_bytes(bytes, None).unwrap();
            check(&file, t, &want, &done);
        }
    }

    /// A thread that never runs is an error naming the threads there are; so are an empty
    /// trace and a stream that is not x86.
    #[test]
    fn nothing_to_convert_is_an_error() {
        let bytes = x64dbg_trace(Arch::X64, 3, 50, 7, false);
        let e = convert_bytes(bytes, Some(99)).unwrap_err();
        let TfileError::NoSuchThread { thread, seen, more } = &e else {
            panic!("{e}")
        };
        assert_eq!((*thread, seen.len(), *more), (99, 3, false));
        assert!(e.to_string().starts_with("thread 99 does not occur"), "{e}");

        let empty = x64dbg_trace(Arch::X64, 1, 0, 1, false);
        assert!(matches!(convert_bytes(empty, None), Err(TfileError::Empty)));

        let bytes = trace_model::schema::testing::testdata("amber/example.tt6");
        let mut input = Input::from_bytes("example.tt6", bytes).unwrap();
        let options = Options::default();
        let mut steps = trace_registry::formats::amber::TT6
            .steps(&mut input, &mut Ctx::new(&options))
            .unwrap();
        let e = convert(&mut *steps, None, Cursor::new(Vec::new())).unwrap_err();
        assert!(matches!(e, TfileError::Isa(Isa::Ppc32)), "{e}");
    }

    /// A damaged trace is a read error, after the frames before the damage.
    #[test]
    fn damage_is_a_read_error() {
        let mut bytes = x64dbg_trace(Arch::X64, 1, 300, 3, false);
        let cut = bytes.len() - 7;
        bytes.truncate(cut);
        let e = convert_bytes(bytes, None).unwrap_err();
        assert!(matches!(e, TfileError::Read(Error::Format { .. })), "{e}");
    }

    /// A Tenet trace converts too: the general registers and the pc from its lines, the
    /// other registers zero, reads (`mr`) as memory blocks.
    #[test]
    fn tenet_converts() {
        let bytes = trace_model::schema::testing::testdata("tenet/basic.log");
        let options = Options::default();
        let mut input = Input::from_bytes("basic.log", bytes.clone()).unwrap();
        let handler = trace_registry::detect(&input).unwrap();
        assert_eq!(handler.name(), "tenet");
        // Per step: pc, the named general registers, the reads (address, bytes).
        type Seen = (u64, Vec<(String, u64)>, Vec<(u64, Vec<u8>)>);
        let mut want: Vec<Seen> = Vec::new();
        {
            let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
            while let Some(step) = steps.next_step() {
                let step = step.unwrap().clone();
                let regs = steps
                    .reg_names()
                    .iter()
                    .map(|n| n.to_string())
                    .zip(steps.regs().iter().copied())
                    .collect();
                let mem = step
                    .mem
                    .iter()
                    .filter_map(|a| Some((a.addr, step.old(a)?.to_vec())))
                    .collect();
                want.push((step.pc, regs, mem));
            }
        }
        let mut input = Input::from_bytes("basic.log", bytes).unwrap();
        let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
        let (done, out) = convert(&mut *steps, None, Cursor::new(Vec::new())).unwrap();
        let file = out.into_inner();
        assert_eq!(done.frames, want.len() as u64);
        let tf = TraceFile::parse(&file, ReadOptions::default()).unwrap();
        let td = tf.tdesc().unwrap();
        let mut with_mem = 0;
        for (frame, (pc, regs, mem)) in tf.frames().zip(&want) {
            let frame = frame.unwrap();
            assert_eq!(
                frame.register(td, "rip").unwrap().unwrap().as_u64(),
                Some(*pc)
            );
            for (name, value) in regs {
                let got = frame.register(td, name).unwrap().unwrap().as_u64();
                assert_eq!(got, Some(*value), "{name}");
            }
            let block = frame.registers().unwrap().unwrap();
            let xmm0 = td.register("xmm0").unwrap();
            assert!(block[xmm0.offset..xmm0.offset + 16].iter().all(|&b| b == 0));
            for (addr, old) in mem {
                let got: Vec<u8> = frame
                    .memory(*addr, old.len())
                    .unwrap()
                    .into_iter()
                    .map(Option::unwrap)
                    .collect();
                assert_eq!(&got, old);
                with_mem += 1;
            }
        }
        assert!(with_mem > 0, "the fixture has reads");
    }

    /// A tfile converts to itself: x64dbg → tfile → tfile gives the same description
    /// registers and the same frames (registers found by the description's names).
    #[test]
    fn tfile_to_tfile_keeps_the_frames() {
        let bytes = x64dbg_trace(Arch::X64, 2, 300, 11, true);
        let (_, first) = convert_bytes(bytes, None).unwrap();
        let options = Options::default();
        let mut input = Input::from_bytes("t.tf", first.clone()).unwrap();
        let handler = trace_registry::detect(&input).unwrap();
        assert_eq!(handler.name(), "gdb-tfile");
        let mut steps = handler.steps(&mut input, &mut Ctx::new(&options)).unwrap();
        let (done, out) = convert(&mut *steps, None, Cursor::new(Vec::new())).unwrap();
        let second = out.into_inner();
        let a = TraceFile::parse(&first, ReadOptions::default()).unwrap();
        let b = TraceFile::parse(&second, ReadOptions::default()).unwrap();
        assert_eq!(a.description().tdesc_lines, b.description().tdesc_lines);
        assert_eq!(done.thread, 0);
        let frames = |f: &TraceFile<'_>| -> Vec<Vec<Vec<u8>>> {
            f.frames()
                .map(|fr| {
                    let fr = fr.unwrap();
                    fr.blocks()
                        .map(|b| match b.unwrap() {
                            Block::Registers { data, .. } => data.to_vec(),
                            Block::Memory { address, data, .. } => {
                                [&address.to_le_bytes()[..], data].concat()
                            }
                            Block::Tsv { .. } => panic!("no TSV blocks written"),
                        })
                        .collect()
                })
                .collect()
        };
        let (fa, fb) = (frames(&a), frames(&b));
        assert_eq!(fa.len(), done.frames as usize);
        assert_eq!(fa, fb);
    }

    /// x64dbg's own walks give what the default walks over `next_step` give: at every step
    /// of the thread, the same step and register image (`walk_regs`: the changed words
    /// written into the image as the replay applies them, the other copies at the step),
    /// and at every step the same general registers and changed words (`walk_steps`), over
    /// traces of several threads whose other registers change at random, with sessions.
    #[test]
    fn x64dbg_walks_match_the_default_walks() {
        fn prop(seed: u64, threads: u8, n: u16, x86: bool, pick: u8) -> TestResult {
            let arch = if x86 { Arch::X86 } else { Arch::X64 };
            let threads = u32::from(threads % 4) + 1;
            let bytes = x64dbg_trace(arch, threads, u64::from(n % 400) + 1, seed, true);
            let options = Options::default();
            let name = if x86 { "t.trace32" } else { "t.trace64" };
            let regs_walk = |fast: bool| {
                let mut input = Input::from_bytes(name, bytes.clone()).unwrap();
                let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
                // The thread of a step `pick` steps in, set up there.
                let mut first = None;
                for _ in 0..=pick {
                    match steps.next_step() {
                        Some(step) => first = Some(step.unwrap().clone()),
                        None => break,
                    }
                }
                let first = first.unwrap();
                let mut setup =
                    set_up(&mut *steps, first.thread, first.pc, &mut Vec::new()).unwrap();
                setup.plan.fill(&mut *steps, &mut setup.block);
                let mut seen = vec![(first.clone(), setup.block.clone())];
                let mut on_step = |step: &Step, regs: &[u8]| {
                    seen.push((step.clone(), regs.to_vec()));
                    true
                };
                let (plan, block) = (&mut setup.plan.copies, &mut setup.block);
                if fast {
                    steps.walk_regs(first.thread, plan, block, &mut on_step)
                } else {
                    trace_model::steps::walk_regs_by_steps(
                        &mut *steps,
                        first.thread,
                        plan,
                        block,
                        &mut on_step,
                    )
                }
                .unwrap();
                seen
            };
            assert_eq!(regs_walk(true), regs_walk(false));
            let steps_walk = |fast: bool| {
                let mut input = Input::from_bytes(name, bytes.clone()).unwrap();
                let mut steps = X64dbg.steps(&mut input, &mut Ctx::new(&options)).unwrap();
                steps.want_regs(trace_model::steps::RegsWanted::General);
                let mut seen = Vec::new();
                let mut on_step = |step: &Step, regs: &[u64], changed: u64| {
                    seen.push((step.clone(), regs.to_vec(), changed));
                    true
                };
                if fast {
                    steps.walk_steps(&mut on_step)
                } else {
                    trace_model::steps::walk_steps_by_steps(&mut *steps, &mut on_step)
                }
                .unwrap();
                seen
            };
            assert_eq!(steps_walk(true), steps_walk(false));
            TestResult::passed()
        }
        QuickCheck::new().quickcheck(prop as fn(u64, u8, u16, bool, u8) -> TestResult);
    }
}
