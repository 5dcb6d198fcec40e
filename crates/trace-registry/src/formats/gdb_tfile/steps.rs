//! The instruction-stream view of a tfile: one [`Step`] per trace frame.
//!
//! A frame is a snapshot taken when a tracepoint was hit, before its instruction ran: its
//! `pc` is the description's pc register in the frame's `R` block (as `dump` shows it), or,
//! for a frame without registers, the tracepoint's address where GDB would guess it (one
//! location, no while-stepping); its memory accesses are the `M` blocks (the collected
//! bytes as `old`, nothing after), its opcode the bytes at `pc` those blocks hold (up to
//! 16), and its registers the `R` block named by the target description.

use std::borrow::Cow;
use std::collections::HashMap;

use gdb_tfile::{Block, Endian, Frame, FrameIndex, TargetDescription, TraceFile};

use super::{Frames, err};
use crate::steps::{self, Isa, NamedReg, RegValue, Step, Steps};
use crate::{Ctx, Error, Input};

/// The most opcode bytes a step carries (the longest x86 instruction is 15).
const OPCODE_MAX: u64 = 16;

/// A register of the target description: its name and its bytes in an `R` block.
struct Slot {
    name: String,
    offset: usize,
    size: usize,
}

impl Slot {
    fn bytes<'b>(&self, block: &'b [u8]) -> Option<&'b [u8]> {
        block.get(self.offset..self.offset.checked_add(self.size)?)
    }
}

/// A register value in target byte order as an integer (at most 8 bytes).
fn word(bytes: &[u8], endian: Endian) -> Option<u64> {
    gdb_tfile::RegisterValue { bytes, endian }.as_u64()
}

/// The instruction set of a target description: its architecture, else its pc register.
fn isa_of(td: Option<&TargetDescription>) -> Isa {
    let Some(td) = td else { return Isa::Other };
    match td.architecture.as_deref() {
        Some(a) if a.starts_with("i386:x86-64") || a.starts_with("i386:x64-32") => Isa::X64,
        Some(a) if a.starts_with("i386") => Isa::X86,
        Some(_) => Isa::Other,
        None => match td.pc_register().map(|r| r.name.as_str()) {
            Some("rip") => Isa::X64,
            Some("eip") => Isa::X86,
            _ => Isa::Other,
        },
    }
}

/// The frames of a tfile as [`Steps`]; [`TfileSteps::tracepoint`] and
/// [`TfileSteps::frame_pc`] add what `find` needs.
pub(crate) struct TfileSteps<'a> {
    frames: Frames<'a>,
    /// The frame number of the first frame `frames` yields (after a seek, not 0).
    base: u64,
    /// Built on the first seek of a file in memory.
    index: Option<FrameIndex<'a>>,
    current: Current,
    /// `current` is already read (by a seek) and is what the next `next_step` returns.
    pending: bool,
    done: bool,
}

/// The register layout and the current frame, decoded (apart from the reader, so that a
/// frame borrowing the reader can be decoded into it).
struct Current {
    isa: Isa,
    endian: Endian,
    /// Every register of the description, in its order.
    slots: Vec<Slot>,
    /// Which `slots` are words (at most 8 bytes): the general registers, pc and flags.
    word_slots: Vec<usize>,
    names: Vec<Cow<'static, str>>,
    pc_slot: Option<usize>,
    /// Tracepoint number → its address, where GDB would infer a pc from it.
    guess_pc: HashMap<i16, u64>,
    step: Step,
    tracepoint: i16,
    pc: Option<u64>,
    offset: u64,
    /// The current frame's `R` block, if it has one.
    regs_block: Option<Vec<u8>>,
    reg_values: Vec<u64>,
}

impl<'a> TfileSteps<'a> {
    /// Opens the frames of a tfile input (in place, or streamed for stdin and compressed
    /// files).
    pub(crate) fn open(input: &'a mut Input, ctx: &mut Ctx<'_>) -> Result<Self, Error> {
        let frames = Frames::open(input, ctx)?;
        let td = frames.tdesc();
        let slots: Vec<Slot> = td.map_or_else(Vec::new, |td| {
            td.registers
                .iter()
                .map(|r| Slot {
                    name: r.name.clone(),
                    offset: r.offset,
                    size: r.size(),
                })
                .collect()
        });
        let word_slots: Vec<usize> = (0..slots.len())
            .filter(|&k| slots.get(k).is_some_and(|s| s.size <= 8))
            .collect();
        let names = word_slots
            .iter()
            .filter_map(|&k| slots.get(k))
            .map(|s| Cow::Owned(s.name.clone()))
            .collect();
        let pc_name = td.and_then(TargetDescription::pc_register).map(|r| &r.name);
        let pc_slot = pc_name.and_then(|n| slots.iter().position(|s| &s.name == n));
        let isa = isa_of(td);
        // GDB infers a frame's pc from its tracepoint only when the tracepoint has one
        // location and no while-stepping (notes §6.3).
        let mut locations: HashMap<i16, (u64, usize, bool)> = HashMap::new();
        for t in &frames.description().tracepoints {
            if let Ok(n) = i16::try_from(t.number) {
                let e = locations.entry(n).or_insert((t.address, 0, false));
                e.1 = e.1.saturating_add(1);
                e.2 |= t.step_count > 0;
            }
        }
        let guess_pc = locations
            .into_iter()
            .filter(|(_, (_, count, stepping))| *count == 1 && !stepping)
            .map(|(n, (address, _, _))| (n, address))
            .collect();
        let endian = frames.layout().endian;
        let current = Current {
            isa,
            endian,
            reg_values: vec![0; word_slots.len()],
            slots,
            word_slots,
            names,
            pc_slot,
            guess_pc,
            step: Step::default(),
            tracepoint: 0,
            pc: None,
            offset: 0,
            regs_block: None,
        };
        Ok(TfileSteps {
            frames,
            base: 0,
            index: None,
            current,
            pending: false,
            done: false,
        })
    }

    /// The tracepoint number of the last frame returned.
    pub(crate) fn tracepoint(&self) -> i16 {
        self.current.tracepoint
    }

    /// The pc of the last frame returned, `None` where neither its registers nor its
    /// tracepoint tell it (the step's `pc` is then 0).
    pub(crate) fn frame_pc(&self) -> Option<u64> {
        self.current.pc
    }

    /// The next frame from the reader, made the current step.
    fn advance(&mut self) -> Option<Result<(), Error>> {
        match self.frames.next_frame() {
            Ok(Some(f)) => {
                let i = self.base.saturating_add(f.index);
                Some(self.current.fill(&f, i))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl Current {
    /// Makes `f` (frame number `i`) the current step.
    fn fill(&mut self, f: &Frame<'_>, i: u64) -> Result<(), Error> {
        let f = Frame { index: i, ..*f };
        let step = &mut self.step;
        step.clear();
        step.i = i;
        step.thread = 0;
        self.tracepoint = f.tracepoint;
        self.offset = f.offset.0;
        let mut regs: Option<&[u8]> = None;
        for b in f.blocks() {
            match b.map_err(err)? {
                // GDB reads the first `R` block.
                Block::Registers { data, .. } => {
                    regs.get_or_insert(data);
                }
                Block::Memory { address, data, .. } => {
                    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
                    step.push_access(address, Some(data), None, len);
                }
                Block::Tsv { .. } => {}
            }
        }
        match regs {
            Some(r) => {
                let block = self.regs_block.get_or_insert_with(Vec::new);
                block.clear();
                block.extend_from_slice(r);
            }
            None => self.regs_block = None,
        }
        let block = self.regs_block.as_deref();
        let value_of = |k: usize| {
            let slot = self.slots.get(k)?;
            word(slot.bytes(block?)?, self.endian)
        };
        for (v, &k) in self.reg_values.iter_mut().zip(&self.word_slots) {
            *v = value_of(k).unwrap_or(0);
        }
        self.pc = match (block, self.pc_slot) {
            (Some(_), Some(k)) => value_of(k),
            _ => None,
        }
        .or_else(|| {
            // GDB guesses only for a frame without registers.
            block
                .is_none()
                .then(|| self.guess_pc.get(&f.tracepoint).copied())
                .flatten()
        });
        let step = &mut self.step;
        step.pc = self.pc.unwrap_or(0);
        if self.pc.is_some() {
            fill_opcode(step);
        }
        Ok(())
    }
}

/// The step's opcode: the bytes from `pc` on that its accesses (the `M` blocks) hold, up
/// to 16 and up to the first byte none holds; where blocks overlap, the last one wins.
fn fill_opcode(step: &mut Step) {
    let mut opcode = smallvec::SmallVec::<[u8; 16]>::new();
    for k in 0..OPCODE_MAX {
        let Some(at) = step.pc.checked_add(k) else {
            break;
        };
        let byte = step.mem.iter().rev().find_map(|a| {
            let skip = at.checked_sub(a.addr)?;
            if skip >= u64::from(a.len) {
                return None;
            }
            let start = u64::from(a.old?).checked_add(skip)?;
            step.data.get(usize::try_from(start).ok()?).copied()
        });
        match byte {
            Some(b) => opcode.push(b),
            None => break,
        }
    }
    step.opcode = opcode;
}

impl<'a> Steps for TfileSteps<'a> {
    fn isa(&self) -> Isa {
        self.current.isa
    }

    fn reg_names(&self) -> &[Cow<'static, str>] {
        &self.current.names
    }

    fn next_step(&mut self) -> Option<Result<&Step, Error>> {
        if std::mem::take(&mut self.pending) {
            return Some(Ok(&self.current.step));
        }
        if self.done {
            return None;
        }
        match self.advance() {
            Some(Ok(())) => Some(Ok(&self.current.step)),
            Some(Err(e)) => {
                self.done = true;
                Some(Err(e))
            }
            None => {
                self.done = true;
                None
            }
        }
    }

    /// The word registers of the frame; 0 for those it does not hold (no `R` block, or a
    /// register past its end).
    fn regs(&self) -> &[u64] {
        &self.current.reg_values
    }

    /// Every register the frame's `R` block holds, named by the description; registers
    /// GDB shows as `<unavailable>` (no `R` block, past its end) are left out.
    fn named_regs(&self, out: &mut Vec<NamedReg>) {
        let Some(block) = self.current.regs_block.as_deref() else {
            return;
        };
        for slot in &self.current.slots {
            let Some(bytes) = slot.bytes(block) else {
                continue;
            };
            let value = match word(bytes, self.current.endian) {
                Some(w) => RegValue::Word(w),
                None => {
                    let mut le: smallvec::SmallVec<[u8; 16]> = bytes.iter().copied().collect();
                    if self.current.endian == Endian::Big {
                        le.reverse();
                    }
                    RegValue::Wide(le)
                }
            };
            out.push(NamedReg {
                name: Cow::Owned(slot.name.clone()),
                value,
            });
        }
    }

    fn memory_is_snapshot(&self) -> bool {
        true
    }

    fn seek(&mut self, n: u64) -> Result<(), Error> {
        let Frames::Slice(slice) = &self.frames else {
            steps::seek_by_scan(self, n)?;
            self.pending = true;
            return Ok(());
        };
        let file: &TraceFile<'a> = &slice.0;
        let index = match &self.index {
            Some(index) => index,
            None => {
                let (index, error) = FrameIndex::new_partial(file);
                // Frames before a damaged one can be reached; past them, the damage is
                // the answer.
                if let Some(e) = error
                    && usize::try_from(n).map_or(true, |n| n >= index.len())
                {
                    return Err(err(e));
                }
                self.index.insert(index)
            }
        };
        let count = index.len() as u64;
        let frame = usize::try_from(n)
            .ok()
            .and_then(|k| index.frame(k))
            .ok_or_else(|| steps::past_end(n, count))?;
        let next = frame
            .data_offset()
            .0
            .saturating_add(frame.data.len() as u64);
        let (data, layout) = (file.data(), file.layout());
        self.current.fill(&frame, n)?;
        if let Frames::Slice(slice) = &mut self.frames {
            slice.1 =
                gdb_tfile::Frames::new(data, usize::try_from(next).unwrap_or(usize::MAX), layout);
        }
        self.base = n.saturating_add(1);
        self.pending = true;
        self.done = false;
        Ok(())
    }

    fn position(&self) -> u64 {
        self.current.offset
    }
}
