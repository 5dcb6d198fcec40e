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
use std::sync::Arc;

use gdb_tfile::{Block, Endian, Frame, FrameIndex, TargetDescription, TraceFile};

use super::{Frames, NAME, err};
use crate::steps::{self, Indexing, Isa, NamedReg, RegValue, Step, StepKind, Steps};
use crate::{Ctx, Error, Input};

/// The most opcode bytes a step carries (the longest x86 instruction is 15).
const OPCODE_MAX: u64 = 16;

/// The first bytes of a tfile seek index ([`SeekIndex::to_bytes`]; the version is the
/// last byte).
const SEEK_MAGIC: &[u8] = b"tfile-seek\x01";

/// The frames between two offsets a [`SeekIndex`] keeps: a seek through it reads at most
/// this many frame headers, whatever the frame number.
const SEEK_STRIDE: u64 = 64;

/// The seek index a tfile keeps in its sidecar (`tracekit index`): the file offset of
/// every [`SEEK_STRIDE`]th frame and the number of frames, so that `state` and `mem` of
/// frame N read at most [`SEEK_STRIDE`] frame headers instead of indexing every frame
/// first (8 bytes per 64 frames: a frame is at least 6 bytes, so it stays under 2% of
/// the trace).
#[derive(Clone, Debug, PartialEq, Eq)]
struct SeekIndex {
    frames: u64,
    offsets: Vec<u64>,
}

impl SeekIndex {
    /// The offsets of every [`SEEK_STRIDE`]th frame of `index`.
    fn of(index: &FrameIndex<'_>) -> SeekIndex {
        let offsets = (0..index.len())
            .step_by(SEEK_STRIDE as usize)
            .filter_map(|k| index.frame(k))
            .map(|f| f.offset.0)
            .collect();
        SeekIndex {
            frames: index.len() as u64,
            offsets,
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut out = SEEK_MAGIC.to_vec();
        out.extend_from_slice(&self.frames.to_le_bytes());
        for o in &self.offsets {
            out.extend_from_slice(&o.to_le_bytes());
        }
        out
    }

    /// A seek index saved by [`SeekIndex::to_bytes`] for a file of `len` bytes, or `None`
    /// when `bytes` are not one (any bytes: never panics). A wrong one (the sidecar checks
    /// that it belongs to the trace) makes seeks land wrong or fail, never panic.
    fn from_bytes(bytes: &[u8], len: usize) -> Option<SeekIndex> {
        let rest = bytes.strip_prefix(SEEK_MAGIC)?;
        let (frames, rest) = rest.split_first_chunk::<8>()?;
        let frames = u64::from_le_bytes(*frames);
        let (words, tail) = rest.as_chunks::<8>();
        let ordered = words
            .windows(2)
            .all(|w| matches!(w, [a, b] if u64::from_le_bytes(*a) < u64::from_le_bytes(*b)));
        let offsets: Vec<u64> = words.iter().map(|w| u64::from_le_bytes(*w)).collect();
        let fits = offsets
            .last()
            .is_none_or(|&o| usize::try_from(o).is_ok_and(|o| o < len));
        (tail.is_empty() && ordered && fits && offsets.len() as u64 == frames.div_ceil(SEEK_STRIDE))
            .then_some(SeekIndex { frames, offsets })
    }
}

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
    /// Built on the first seek of a file in memory without a `saved` one.
    index: Option<FrameIndex<'a>>,
    /// The seek index of the sidecar index file, when there is a usable one.
    saved: Option<Arc<SeekIndex>>,
    /// Frames the last seek read to reach its frame (the work it did).
    walked: u64,
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
        // The seek index kept in a sidecar index file, when there is a usable one.
        let saved = trace_index::load_seek_index(input, ctx, NAME);
        let frames = Frames::open(input, ctx)?;
        let saved = match &frames {
            Frames::Slice(slice) => {
                saved.and_then(|b| SeekIndex::from_bytes(&b, slice.0.data().len()).map(Arc::new))
            }
            Frames::Stream(_) => None,
        };
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
            // Frames carry the number as 16 bits (GDB shows 0xffff as -1).
            if let Ok(n) = u16::try_from(t.number).map(u16::cast_signed) {
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
            saved,
            walked: 0,
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

    /// [`Steps::seek`] through the sidecar's seek index `saved`: from the saved frame at
    /// or before `n`, at most [`SEEK_STRIDE`] frame headers.
    fn seek_saved(
        &mut self,
        n: u64,
        data: &'a [u8],
        layout: gdb_tfile::FrameLayout,
        saved: &SeekIndex,
    ) -> Result<(), Error> {
        let past = || steps::past_end_of("frame", n, saved.frames);
        let start = usize::try_from(n / SEEK_STRIDE)
            .ok()
            .and_then(|k| saved.offsets.get(k))
            .filter(|_| n < saved.frames)
            .ok_or_else(past)?;
        let mut frames =
            gdb_tfile::Frames::new(data, usize::try_from(*start).unwrap_or(usize::MAX), layout);
        let skip = n % SEEK_STRIDE;
        for k in 0..=skip {
            let frame = frames.next().ok_or_else(past)?.map_err(err)?;
            self.walked = k.saturating_add(1);
            if k == skip {
                let next = frame
                    .data_offset()
                    .0
                    .saturating_add(frame.data.len() as u64);
                self.current.fill(&frame, n)?;
                self.resume_after(n, data, next, layout);
            }
        }
        Ok(())
    }

    /// Makes the reader go on with the frame after frame `n`, which ends at `next`: the
    /// step just filled is what the next `next_step` returns.
    fn resume_after(&mut self, n: u64, data: &'a [u8], next: u64, layout: gdb_tfile::FrameLayout) {
        if let Frames::Slice(slice) = &mut self.frames {
            slice.1 =
                gdb_tfile::Frames::new(data, usize::try_from(next).unwrap_or(usize::MAX), layout);
        }
        self.base = n.saturating_add(1);
        self.pending = true;
        self.done = false;
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

    fn kind(&self) -> StepKind {
        StepKind::Frame
    }

    fn seek(&mut self, n: u64) -> Result<(), Error> {
        let Frames::Slice(slice) = &self.frames else {
            steps::seek_by_scan(self, n)?;
            self.pending = true;
            return Ok(());
        };
        let file: &TraceFile<'a> = &slice.0;
        if self.index.is_none()
            && let Some(saved) = self.saved.take()
        {
            let (data, layout) = (file.data(), file.layout());
            let found = self.seek_saved(n, data, layout, &saved);
            self.saved = Some(saved);
            return found;
        }
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
            .ok_or_else(|| steps::past_end_of("frame", n, count))?;
        let next = frame
            .data_offset()
            .0
            .saturating_add(frame.data.len() as u64);
        let (data, layout) = (file.data(), file.layout());
        self.current.fill(&frame, n)?;
        self.walked = 1;
        self.resume_after(n, data, next, layout);
        Ok(())
    }

    fn position(&self) -> u64 {
        self.current.offset
    }

    fn indexing(&mut self) -> Option<&mut dyn Indexing> {
        Some(self)
    }
}

impl<'a> Indexing for TfileSteps<'a> {
    fn seek_index(&mut self) -> Result<Option<Vec<u8>>, Error> {
        let Frames::Slice(slice) = &self.frames else {
            return Ok(None);
        };
        let index = match &self.index {
            Some(index) => index,
            None => self.index.insert(FrameIndex::new(&slice.0).map_err(err)?),
        };
        Ok(Some(SeekIndex::of(index).to_bytes()))
    }

    /// Takes the bytes as the sidecar's seek index is taken (checked against the file's
    /// size only).
    fn use_seek_index(&mut self, index: &steps::SeekIndex) -> bool {
        let Frames::Slice(slice) = &self.frames else {
            return false;
        };
        let len = slice.0.data().len();
        let saved = index.parsed(|b| SeekIndex::from_bytes(b, len));
        let taken = saved.is_some();
        if taken {
            self.saved = saved;
        }
        taken
    }

    fn count_known(&self) -> Option<u64> {
        match (&self.index, &self.saved) {
            (Some(index), _) => Some(index.len() as u64),
            (None, saved) => saved.as_ref().map(|s| s.frames),
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::arithmetic_side_effects
)]
mod tests {
    use super::*;
    use crate::formats::gdb_tfile::GdbTfile;
    use crate::schema::testing::{input, testdata};
    use crate::steps::AccessKind;
    use crate::{Handler, Options};
    use gdb_tfile::ReadOptions;

    /// One step as plain values: i, pc, opcode, accesses (addr, bytes), word registers,
    /// named registers.
    type Seen = (
        u64,
        u64,
        Vec<u8>,
        Vec<(u64, Vec<u8>)>,
        Vec<u64>,
        Vec<NamedReg>,
    );

    fn seen(steps: &dyn Steps, step: &Step) -> Seen {
        let mem = step
            .mem
            .iter()
            .map(|a| {
                assert_eq!(a.kind, AccessKind::Unknown);
                assert!(a.new.is_none() && !a.sized);
                (a.addr, step.old(a).unwrap().to_vec())
            })
            .collect();
        let mut named = Vec::new();
        steps.named_regs(&mut named);
        (
            step.i,
            step.pc,
            step.opcode.to_vec(),
            mem,
            steps.regs().to_vec(),
            named,
        )
    }

    fn all_steps(name: &str, bytes: &[u8], gzip: bool, options: &Options) -> Vec<Seen> {
        let mut inp = input(name, bytes, gzip);
        let mut steps = GdbTfile.steps(&mut inp, &mut Ctx::new(options)).unwrap();
        assert!(steps.kind().memory_is_snapshot());
        let mut out = Vec::new();
        while let Some(step) = steps.next_step() {
            let step = step.unwrap().clone();
            out.push(seen(steps.as_ref(), &step));
        }
        out
    }

    /// Every testdata file: the steps are the frames as the gdb-tfile crate reads them
    /// (pc register, `M` blocks, registers named by the description), the same in memory
    /// and streamed, and a seek lands on the same step as reading up to it.
    #[test]
    fn steps_are_the_frames_in_memory_streamed_and_after_a_seek() {
        for name in [
            "amd64.tf",
            "quirks.tf",
            "s390-big-endian.tf",
            "no-tdesc.tf",
            "tfile-basic.tf",
        ] {
            let bytes = testdata(&format!("gdb-tfile/{name}"));
            let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
            let td = file.tdesc();
            let steps = all_steps(name, &bytes, false, &Options::default());
            let frames: Vec<Frame<'_>> = file.frames().map(Result::unwrap).collect();
            assert_eq!(steps.len(), frames.len(), "{name}");
            assert!(!frames.is_empty());
            for ((i, pc, opcode, mem, regs, named), f) in steps.iter().zip(&frames) {
                assert_eq!(*i, f.index);
                let collected = td.and_then(|td| {
                    let r = f.register(td, &td.pc_register()?.name).unwrap()?;
                    r.as_u64()
                });
                let has_regs = f.registers().unwrap().is_some();
                match collected {
                    Some(c) => assert_eq!(*pc, c, "{name} frame {i}"),
                    None if !has_regs => {
                        let t = &file.description().tracepoints;
                        let tp = t.iter().find(|t| t.number == f.tracepoint as u64).unwrap();
                        assert_eq!(*pc, tp.address, "{name} frame {i}: the guessed pc");
                    }
                    None => assert_eq!(*pc, 0),
                }
                let blocks: Vec<(u64, Vec<u8>)> = f
                    .blocks()
                    .filter_map(|b| match b.unwrap() {
                        Block::Memory { address, data, .. } => Some((address, data.to_vec())),
                        _ => None,
                    })
                    .collect();
                assert_eq!(mem, &blocks);
                let at_pc = f.memory(*pc, 16).unwrap();
                let expected: Vec<u8> = at_pc.iter().map_while(|b| *b).collect();
                assert_eq!(opcode, &expected);
                let Some(td) = td else {
                    assert!(regs.is_empty() && named.is_empty());
                    continue;
                };
                let fits: Vec<_> = td
                    .registers
                    .iter()
                    .filter_map(|r| Some((r, f.register(td, &r.name).unwrap()?)))
                    .collect();
                assert_eq!(named.len(), fits.len(), "{name}");
                let mut words = Vec::new();
                for (n, (r, v)) in named.iter().zip(&fits) {
                    assert_eq!(n.name, r.name);
                    match (&n.value, v.as_u64()) {
                        (RegValue::Word(w), Some(x)) => {
                            assert_eq!(*w, x);
                            words.push(x);
                        }
                        (RegValue::Wide(b), None) => {
                            let mut le = v.bytes.to_vec();
                            if f.layout.endian == Endian::Big {
                                le.reverse();
                            }
                            assert_eq!(b.as_slice(), le.as_slice());
                        }
                        other => panic!("{name}: {} is {other:?}", r.name),
                    }
                }
                if has_regs {
                    assert_eq!(regs, &words, "{name} frame {i}");
                }
            }
            assert_eq!(
                all_steps(name, &bytes, true, &Options::default()),
                steps,
                "{name} streamed"
            );
            let count = steps.len() as u64;
            for gzip in [false, true] {
                for at in [0, 1, count / 2, count - 1]
                    .into_iter()
                    .filter(|&n| n < count)
                {
                    let mut inp = input(name, &bytes, gzip);
                    let options = Options::default();
                    let mut s = GdbTfile.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
                    s.seek(at).unwrap();
                    let step = s.next_step().unwrap().unwrap().clone();
                    assert_eq!(seen(s.as_ref(), &step), steps[at as usize], "{name} @{at}");
                    // Reading on after the seek gives the following steps.
                    let mut k = at as usize + 1;
                    while let Some(step) = s.next_step() {
                        let step = step.unwrap().clone();
                        assert_eq!(seen(s.as_ref(), &step), steps[k], "{name} after {at}");
                        k += 1;
                    }
                    assert_eq!(k, steps.len());
                }
                let mut inp = input(name, &bytes, gzip);
                let options = Options::default();
                let mut s = GdbTfile.steps(&mut inp, &mut Ctx::new(&options)).unwrap();
                assert!(matches!(s.seek(count), Err(Error::Unsupported(_))));
            }
        }
    }

    /// A hand-built i386 file: `eax`, `eip` and a 128-bit `xmm0`, `R` of `r_size` bytes.
    fn hand_built(r_size: usize, big: bool) -> Vec<u8> {
        let mut out = gdb_tfile::raw::MAGIC.to_vec();
        out.extend_from_slice(format!("R {r_size:x}\n").as_bytes());
        out.extend_from_slice(
            b"tdesc <target><architecture>i386</architecture>\
              <reg name=\"eax\" bitsize=\"32\"/><reg name=\"eip\" bitsize=\"32\"/>\
              <reg name=\"xmm0\" bitsize=\"128\"/></target>\n\
              tp T1:1000:E:0:0\ntp T2:2000:E:3:0\ntp T3:3000:E:0:0\ntp T3:3100:E:0:0\n\n",
        );
        let u16b = |v: u16| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let u32b = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let u64b = |v: u64| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mem = |addr: u64, data: &[u8]| {
            let mut b = vec![b'M'];
            b.extend_from_slice(&u64b(addr));
            b.extend_from_slice(&u16b(data.len() as u16));
            b.extend_from_slice(data);
            b
        };
        let mut regs = vec![b'R'];
        regs.extend_from_slice(&u32b(7));
        regs.extend_from_slice(&u32b(0x1000));
        regs.extend(0u8..16);
        regs.truncate(1 + r_size);
        let code: Vec<u8> = (0x40..0x54).collect();
        let frames: Vec<(u16, Vec<u8>)> = vec![
            // Registers; code at the pc in two blocks, the second overriding one byte.
            (
                1,
                [regs.clone(), mem(0x1000, &code), mem(0x1001, &[0xcc])].concat(),
            ),
            // No registers: pc guessed from tracepoint 1; code with a hole at 0x1003.
            (1, [mem(0x1000, &[1, 2, 3]), mem(0x1004, &[5])].concat()),
            // No registers, while-stepping tracepoint: no guess.
            (2, mem(0x5000, &[9; 4])),
            // No registers, two locations: no guess.
            (3, Vec::new()),
        ];
        for (tp, data) in frames {
            out.extend_from_slice(&u16b(tp));
            out.extend_from_slice(&u32b(data.len() as u32));
            out.extend_from_slice(&data);
        }
        out.extend_from_slice(&[0; 4]);
        out
    }

    /// Known answers: the collected pc, GDB's pc guess only where GDB makes it, opcode
    /// bytes up to a hole or 16, the last overlapping block winning, a wide register
    /// little-endian in both byte orders, registers past the block left out.
    #[test]
    fn hand_built_frames_give_known_steps() {
        for big in [false, true] {
            let options = Options {
                big_endian: big,
                ..Options::default()
            };
            let bytes = hand_built(24, big);
            let steps = all_steps("x.tf", &bytes, false, &options);
            assert_eq!(steps.len(), 4);
            let (_, pc, opcode, mem, regs, named) = &steps[0];
            assert_eq!(*pc, 0x1000);
            let mut expected: Vec<u8> = (0x40..0x50).collect();
            expected[1] = 0xcc;
            assert_eq!(opcode, &expected);
            assert_eq!(mem[1], (0x1001, vec![0xcc]));
            assert_eq!(regs, &[7, 0x1000]);
            let names: Vec<&str> = named.iter().map(|r| &*r.name).collect();
            assert_eq!(names, ["eax", "eip", "xmm0"]);
            let xmm0: Vec<u8> = if big {
                (0..16).rev().collect()
            } else {
                (0..16).collect()
            };
            assert_eq!(named[2].value, RegValue::Wide(xmm0.into_iter().collect()));
            assert_eq!(named[2].value.to_string().len(), 2 + 32);
            let (_, pc, opcode, mem, regs, named) = &steps[1];
            assert_eq!((*pc, opcode.as_slice()), (0x1000, &[1u8, 2, 3][..]));
            assert_eq!(mem.len(), 2);
            assert_eq!(regs, &[0, 0], "no R block: the words are 0");
            assert!(
                named.is_empty(),
                "no R block: every register is unavailable"
            );
            assert_eq!((steps[2].1, steps[3].1), (0, 0));
            assert!(steps[2].2.is_empty());

            let mut inp = input("x.tf", &bytes, false);
            let mut s = TfileSteps::open(&mut inp, &mut Ctx::new(&options)).unwrap();
            assert_eq!(s.isa(), Isa::X86);
            let mut pcs = Vec::new();
            while let Some(step) = s.next_step() {
                step.unwrap();
                pcs.push((s.tracepoint(), s.frame_pc()));
            }
            assert_eq!(
                pcs,
                [(1, Some(0x1000)), (1, Some(0x1000)), (2, None), (3, None)]
            );
        }
        // An R block shorter than the description: xmm0 is unavailable.
        let steps = all_steps("x.tf", &hand_built(8, false), false, &Options::default());
        let names: Vec<&str> = steps[0].5.iter().map(|r| &*r.name).collect();
        assert_eq!(names, ["eax", "eip"]);
        assert_eq!(steps[0].4, [7, 0x1000]);
    }

    /// With the sidecar index (`tracekit index`), a seek reads at most 64 frame headers
    /// from the saved frame at or before N, near the start or the end of a 3,000-frame
    /// file: the work does not grow with N; it lands on the steps the frame index gives,
    /// reads on from there alike, and says past the end as it does.
    #[test]
    fn seek_with_the_sidecar_reads_at_most_64_frames() {
        use trace_index::{self as index, BuildOptions};
        let dir = std::env::temp_dir().join(format!("tk-tfile-seek-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.tf");
        let frames = 3000u64;
        let file = gdb_tfile::testgen::amd64_file(frames, 5);
        std::fs::write(
            &path,
            gdb_tfile::write::to_bytes(&file, Endian::Little).unwrap(),
        )
        .unwrap();
        let options = Options::default();
        let ats = [0, 1, 63, 64, 65, 1500, frames - 65, frames - 2, frames - 1];
        let seen_at = |n: u64| {
            let mut inp = Input::open(path.as_os_str()).unwrap();
            let mut s = TfileSteps::open(&mut inp, &mut Ctx::new(&options)).unwrap();
            s.seek(n).unwrap();
            let step = s.next_step().unwrap().unwrap().clone();
            let first = seen(&s, &step);
            let step = s.next_step().map(|r| r.unwrap().clone());
            let second = step.map(|step| seen(&s, &step));
            ((first, second), s.walked, s.saved.is_some())
        };
        let before: Vec<_> = ats.map(seen_at).into();
        assert!(
            before
                .iter()
                .all(|(_, walked, saved)| *walked == 1 && !saved)
        );
        let mut inp = Input::open(path.as_os_str()).unwrap();
        let built = index::build(
            &GdbTfile,
            &mut inp,
            &mut Ctx::new(&options),
            None,
            BuildOptions::default(),
        )
        .unwrap();
        // 8 bytes per 64 frames, and the head.
        assert_eq!(built.seek_bytes, 11 + 8 + 8 * frames.div_ceil(64));
        let after: Vec<_> = ats.map(seen_at).into();
        for ((n, (b, _, _)), (a, walked, saved)) in ats.iter().zip(&before).zip(&after) {
            assert!(saved, "the sidecar's seek index is used");
            assert_eq!(a, b, "frame {n}");
            assert_eq!(*walked, n % 64 + 1, "frame {n}: the frames read");
        }
        let mut inp = Input::open(path.as_os_str()).unwrap();
        let mut s = TfileSteps::open(&mut inp, &mut Ctx::new(&options)).unwrap();
        let e = s.seek(frames).unwrap_err().to_string();
        assert!(
            e.contains("frame 3000 is past the end: the trace has 3000 frames"),
            "{e}"
        );
        // A saved index that does not fit the file is not used.
        assert!(
            SeekIndex::from_bytes(
                &SeekIndex::of(
                    &FrameIndex::new(
                        &TraceFile::parse(&std::fs::read(&path).unwrap(), ReadOptions::default())
                            .unwrap()
                    )
                    .unwrap()
                )
                .to_bytes(),
                100
            )
            .is_none()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A seek index read back from any bytes never panics, and one read back equals the
    /// one saved.
    #[test]
    fn seek_index_bytes_round_trip_and_never_panic() {
        let bytes =
            gdb_tfile::write::to_bytes(&gdb_tfile::testgen::amd64_file(200, 3), Endian::Little)
                .unwrap();
        let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
        let saved = SeekIndex::of(&FrameIndex::new(&file).unwrap());
        assert_eq!(saved.offsets.len(), 4);
        let b = saved.to_bytes();
        assert_eq!(SeekIndex::from_bytes(&b, bytes.len()), Some(saved));
        for cut in 0..b.len() {
            assert!(SeekIndex::from_bytes(&b[..cut], bytes.len()).is_none());
        }
        fn prop(junk: Vec<u8>, len: usize) -> bool {
            let mut b = SEEK_MAGIC.to_vec();
            b.extend_from_slice(&junk);
            let _ = SeekIndex::from_bytes(&b, len);
            true
        }
        quickcheck::QuickCheck::new().quickcheck(prop as fn(Vec<u8>, usize) -> bool);
    }

    #[test]
    fn isa_from_architecture_or_pc_register() {
        let td = |xml: &str| TargetDescription::parse(xml, 0).unwrap();
        let reg = |n: &str| format!("<reg name=\"{n}\" bitsize=\"64\"/>");
        assert_eq!(isa_of(None), Isa::Other);
        for (xml, isa) in [
            (
                format!(
                    "<target><architecture>i386:x86-64</architecture>{}</target>",
                    reg("rip")
                ),
                Isa::X64,
            ),
            (
                "<target><architecture>i386</architecture></target>".to_owned(),
                Isa::X86,
            ),
            (
                "<target><architecture>s390:64-bit</architecture></target>".to_owned(),
                Isa::Other,
            ),
            (format!("<target>{}</target>", reg("rip")), Isa::X64),
            (format!("<target>{}</target>", reg("eip")), Isa::X86),
            (format!("<target>{}</target>", reg("pc")), Isa::Other),
        ] {
            assert_eq!(isa_of(Some(&td(&xml))), isa, "{xml}");
        }
    }
}
