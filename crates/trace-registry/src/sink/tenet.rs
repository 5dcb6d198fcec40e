//! An instruction stream ([`Steps`]) as Tenet text traces, one per thread, the way Tenet's
//! reference Pin tracer writes them (`tracekit convert --to tenet`).
//!
//! Line `k` of a thread's trace: the general registers whose value before instruction `k`
//! differs from the previous line of that thread (all of them on its first line), then the
//! pc of instruction `k`, then the memory accesses of the thread's previous instruction in
//! the recorded order, with the value after it: `mw` where the stream recorded a new value
//! (else `mr`), the bytes of `new`, else `old`. When the accesses carry a kind (x64dbg with
//! `--disasm`: the true sizes and directions) it decides `mr`/`mw`/`mrw`. Flags, segment,
//! vector and other registers are never written (Tenet refuses them); the accesses of each
//! thread's last instruction are not written either (as the Pin tracer does).

use std::collections::BTreeMap;
use std::io::Write;

use tenet_trace::{Arch, MemKind, MemRef, Registers, Writer};

use crate::Error;
use crate::steps::{AccessKind, Isa, Step, Steps};

/// The most threads (so open files) one conversion writes.
pub const MAX_THREADS: usize = 1024;

/// One memory item waiting for the thread's next line; its bytes in `Pending::data`.
#[derive(Clone, Copy)]
struct Item {
    kind: MemKind,
    addr: u64,
    start: usize,
    len: usize,
}

/// The accesses of one instruction, kept until the thread's next line.
#[derive(Default)]
struct Pending {
    items: Vec<Item>,
    data: Vec<u8>,
}

impl Pending {
    fn clear(&mut self) {
        self.items.clear();
        self.data.clear();
    }

    fn refs(&self) -> impl Iterator<Item = MemRef<'_>> {
        self.items.iter().map(|m| MemRef {
            kind: m.kind,
            addr: m.addr,
            data: self
                .data
                .get(m.start..m.start.saturating_add(m.len))
                .unwrap_or_default(),
        })
    }
}

/// One thread's output.
struct ThreadOut<W: Write> {
    writer: Writer<W>,
    /// The registers as its last line left them (`None` before its first line).
    last: Option<Registers>,
    pending: Pending,
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
    mut open: impl FnMut(u64) -> std::io::Result<W>,
) -> Result<Vec<ThreadTrace<W>>, Error> {
    let mut threads: BTreeMap<u64, ThreadOut<W>> = BTreeMap::new();
    let mut current = Pending::default();
    let mut map: Option<(Arch, Vec<(usize, usize)>)> = None;
    while let Some(step) = steps.next_step() {
        let step = step?;
        let (thread, pc) = (step.thread, step.pc);
        take_accesses(step, &mut current);
        if map.is_none() {
            map = Some(register_map(steps)?);
        }
        let Some((arch, slots)) = &map else { break };
        let arch = *arch;
        if !threads.contains_key(&thread) {
            if threads.len() >= MAX_THREADS {
                return Err(Error::Unsupported(format!(
                    "more than {MAX_THREADS} threads: one Tenet trace per thread would open too many files"
                )));
            }
            let w = open(thread).map_err(|e| Error::io(format!("thread {thread}"), e))?;
            threads.insert(
                thread,
                ThreadOut {
                    writer: Writer::new(w, arch),
                    last: None,
                    pending: Pending::default(),
                    lines: 0,
                },
            );
        }
        let Some(out) = threads.get_mut(&thread) else {
            break;
        };
        let regs = steps.regs();
        let mut line = Registers::new(arch);
        let mut state = out.last.unwrap_or(Registers::new(arch));
        for &(index, slot) in slots {
            let value = regs.get(slot).copied().unwrap_or(0) & arch.max_value();
            if out.last.is_none() || state.get(index) != Some(value) {
                line.set(index, value);
                state.set(index, value);
            }
        }
        line.set(arch.pc(), pc);
        out.writer
            .write_instruction(&line, out.pending.refs())
            .map_err(write_err)?;
        out.last = Some(state);
        out.lines = out.lines.saturating_add(1);
        std::mem::swap(&mut out.pending, &mut current);
    }
    threads
        .into_iter()
        .map(|(thread, out)| {
            Ok(ThreadTrace {
                thread,
                lines: out.lines,
                output: out.writer.finish().map_err(write_err)?,
            })
        })
        .collect()
}

fn write_err(e: tenet_trace::WriteError) -> Error {
    match e {
        tenet_trace::WriteError::Io(e) => Error::io("cannot write the Tenet trace", e),
        e => Error::Unsupported(e.to_string()),
    }
}

/// Copies the accesses of `step` into `out`: kind (from the access's kind where known,
/// else `mw` when a new value was recorded), address, bytes after the instruction.
fn take_accesses(step: &Step, out: &mut Pending) {
    out.clear();
    for a in &step.mem {
        let kind = match a.kind {
            AccessKind::Read => MemKind::Read,
            AccessKind::Write => MemKind::Write,
            AccessKind::ReadWrite => MemKind::ReadWrite,
            AccessKind::Unknown if a.new.is_some() => MemKind::Write,
            AccessKind::Unknown => MemKind::Read,
        };
        let Some(bytes) = step.new(a).or_else(|| step.old(a)) else {
            continue;
        };
        let start = out.data.len();
        out.data.extend_from_slice(bytes);
        out.items.push(Item {
            kind,
            addr: a.addr,
            start,
            len: bytes.len(),
        });
    }
}

/// The architecture of a stream, and for each Tenet register but the pc its position in
/// [`Steps::reg_names`] (registers the stream does not name are left out).
fn register_map(steps: &dyn Steps) -> Result<(Arch, Vec<(usize, usize)>), Error> {
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
    let slots = arch
        .registers()
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != arch.pc())
        .filter_map(|(i, name)| Some((i, names.iter().position(|n| n == name)?)))
        .collect();
    Ok((arch, slots))
}
