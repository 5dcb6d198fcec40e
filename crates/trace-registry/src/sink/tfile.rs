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
//! `fop` (zero), `fiseg`/`foseg` are the low 16 bits of x87 `ErrorSelector`/`DataSelector`,
//! and `st0`–`st7` are x87 `RegisterArea` in stack order; from Tenet, only the general
//! registers and the pc (the rest zero, and writes without their old value left out).
//!
//! Registers are found by name ([`Steps::reg_names`] for the words [`Steps::regs`] gives,
//! else [`Steps::reg_source`]), once; every frame then copies them into one reused block
//! ([`Steps::copy_regs`]). Memory use is bounded by one frame and a 256 KiB buffer.

use std::collections::BTreeSet;
use std::io::{Seek, SeekFrom, Write};

use gdb_tfile::write::{FrameWriter, WriteError};
use gdb_tfile::{Description, Endian, Status, StopReason, TargetDescription, Tracepoint};
use gdb_tfile::{SourceKind, SourceString, X86Target};

use crate::Error;
use crate::steps::{Isa, RegCopy, RegSource, Steps};

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

/// Where a register of the description comes from: a word of [`Steps::regs`], or a
/// [`Steps::copy_regs`] copy.
#[derive(Default)]
struct Plan {
    /// (position in `regs()`, offset in the block, bytes).
    words: Vec<(usize, usize, usize)>,
    copies: Vec<RegCopy>,
}

impl Plan {
    /// Fills `block` with the registers before the last step of `steps`.
    fn fill(&self, steps: &dyn Steps, block: &mut [u8]) {
        let regs = steps.regs();
        for &(slot, at, len) in &self.words {
            let v = regs.get(slot).copied().unwrap_or(0).to_le_bytes();
            if let (Some(dst), Some(src)) =
                (block.get_mut(at..at.saturating_add(len)), v.get(..len))
            {
                dst.copy_from_slice(src);
            }
        }
        steps.copy_regs(&self.copies, block);
    }
}

/// The stream's names for a register of GDB's x86 descriptions, with the byte to start at
/// and the most bytes to take (`None`: all): GDB's own name first (a tfile stream), then
/// x64dbg's (`rflags`, `RegisterArea`, `x87fpu.*`, `MxCsr`, `ymm0.High`).
fn sources(gdb: &str) -> Vec<(String, usize, Option<usize>)> {
    let mut v = vec![(gdb.to_owned(), 0, None)];
    let x87 = |field: &str, len| (format!("x87fpu.{field}"), 0, len);
    match gdb {
        "eflags" => v.push(("rflags".into(), 0, None)),
        "mxcsr" => v.push(("MxCsr".into(), 0, None)),
        "fctrl" => v.push(x87("ControlWord", None)),
        "fstat" => v.push(x87("StatusWord", None)),
        "ftag" => v.push(x87("TagWord", None)),
        "fioff" => v.push(x87("ErrorOffset", None)),
        "fooff" => v.push(x87("DataOffset", None)),
        // The selector is the low 16 bits (the 32-bit save area puts the opcode above).
        "fiseg" => v.push(x87("ErrorSelector", Some(2))),
        "foseg" => v.push(x87("DataSelector", Some(2))),
        _ => {
            if let Some(i) = gdb.strip_prefix("st").and_then(|i| i.parse::<usize>().ok()) {
                v.push(("RegisterArea".into(), i.saturating_mul(10), Some(10)));
            } else if let Some(i) = gdb.strip_prefix("ymm").and_then(|r| r.strip_suffix('h')) {
                v.push((format!("ymm{i}.High"), 0, None));
            }
        }
    }
    v
}

/// Builds the plan for the registers of `td` from what `steps` names.
fn plan(steps: &dyn Steps, td: &TargetDescription) -> Plan {
    let names = steps.reg_names();
    let mut plan = Plan::default();
    for r in &td.registers {
        let size = r.size();
        for (name, skip, most) in sources(&r.name) {
            let len = most.map_or(size, |m| m.min(size));
            if skip == 0
                && let Some(slot) = names.iter().position(|n| *n == name)
            {
                plan.words.push((slot, r.offset, len.min(8)));
                break;
            }
            if let Some(src) = steps.reg_source(&name) {
                plan.copies.push(RegCopy {
                    src: RegSource {
                        at: src.at,
                        len: src.len.min(skip.saturating_add(len)),
                    },
                    skip,
                    dst: r.offset,
                    len: size,
                });
                break;
            }
        }
    }
    plan
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
    let mut want = thread;
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    let mut more = false;
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT.saturating_add(4096));
    // Set up at the thread's first step.
    let mut setup: Option<Setup> = None;
    // The current instruction's accesses: (address, start, length) in `mem`.
    let mut accesses: Vec<(u64, usize, usize)> = Vec::new();
    let mut mem: Vec<u8> = Vec::new();
    let mut written = 0u64;
    while let Some(step) = steps.next_step() {
        let step = step?;
        let t = step.thread;
        if want.is_none() {
            want = Some(t);
        }
        if want != Some(t) {
            // Kept only for the error of a thread that never runs.
            if setup.is_none() && !seen.contains(&t) {
                if seen.len() < THREADS_LISTED {
                    seen.insert(t);
                } else {
                    more = true;
                }
            }
            continue;
        }
        let pc = step.pc;
        accesses.clear();
        mem.clear();
        for a in &step.mem {
            if let Some(old) = step.old(a) {
                accesses.push((a.addr, mem.len(), old.len()));
                mem.extend_from_slice(old);
            }
        }
        if setup.is_none() {
            let target = match steps.isa() {
                Isa::X64 => X86Target::Amd64,
                Isa::X86 => X86Target::I386,
                other => return Err(TfileError::Isa(other)),
            };
            let avx =
                steps.reg_source("ymm0.High").is_some() || steps.reg_source("ymm0h").is_some();
            let xml = gdb_tfile::x86_tdesc_xml(target, avx);
            let td = TargetDescription::parse(&xml, 0).map_err(|e| {
                TfileError::Read(Error::Unsupported(format!("the x86 description: {e}")))
            })?;
            let size = u32::try_from(td.block_size()).unwrap_or(u32::MAX);
            gdb_tfile::write::write_description(&description(&xml, size, t, pc), &mut buf)?;
            let counts = [
                placeholder(&buf, b";tframes:").unwrap_or(0),
                placeholder(&buf, b";tcreated:").unwrap_or(0),
            ];
            setup = Some(Setup {
                plan: plan(steps, &td),
                frames: FrameWriter::new(size, Endian::Little),
                block: vec![0; td.block_size()],
                counts,
                first_pc: pc,
            });
        }
        let Some(Setup {
            plan,
            frames,
            block,
            ..
        }) = setup.as_mut()
        else {
            break;
        };
        plan.fill(steps, block);
        frames.begin(&mut buf, TRACEPOINT)?;
        frames.registers(&mut buf, block)?;
        for &(addr, at, len) in &accesses {
            let bytes = mem.get(at..at.saturating_add(len)).unwrap_or_default();
            // M blocks hold at most 65535 bytes: longer accesses are split, as gdbserver does.
            for (k, chunk) in bytes.chunks(usize::from(u16::MAX)).enumerate() {
                let off = (k as u64).saturating_mul(u64::from(u16::MAX));
                frames.memory(&mut buf, addr.wrapping_add(off), chunk)?;
            }
        }
        frames.end(&mut buf)?;
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf)?;
            written = written.saturating_add(buf.len() as u64);
            buf.clear();
        }
    }
    let Some(Setup {
        frames,
        block,
        counts,
        first_pc,
        ..
    }) = setup
    else {
        return Err(match thread {
            Some(thread) => TfileError::NoSuchThread {
                thread,
                seen: seen.into_iter().collect(),
                more,
            },
            None => TfileError::Empty,
        });
    };
    FrameWriter::terminate(&mut buf);
    out.write_all(&buf)?;
    written = written.saturating_add(buf.len() as u64);
    let n = frames.frames() as u64;
    for at in counts {
        if at > 0 {
            out.seek(SeekFrom::Start(start.saturating_add(at as u64)))?;
            out.write_all(format!("{n:016x}").as_bytes())?;
        }
    }
    out.seek(SeekFrom::Start(start.saturating_add(written)))?;
    out.flush()?;
    Ok((
        Converted {
            thread: want.unwrap_or(0),
            frames: n,
            first_pc,
            register_size: u32::try_from(block.len()).unwrap_or(u32::MAX),
            bytes: written,
        },
        out,
    ))
}
