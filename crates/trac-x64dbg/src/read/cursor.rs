//! The cursor ([`Cursor`]): each instruction with the register state before it, as much of
//! the state as its [`Mode`] keeps.
//!
//! The fast path takes the usual block (see the crate docs' vocabulary) inline; every other
//! block goes through the cold path, the block iterator's decoder ([`Blocks`]).

use core::marker::PhantomData;

use trace_core::Offset;

use super::blocks::{Block, Blocks, Instruction, UsualNumbers, usual_changes, usual_step};
use super::replay::{Counters, ReplayState};
use crate::Error;
use crate::header::Arch;
use crate::model::RegChange;
use crate::regs::RegDump;

mod sealed {
    /// What a mode keeps of the register state.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Keep {
        /// The `cip` word only.
        Pc,
        /// The first [`general_words`](crate::general_words).
        General,
        /// Every word.
        Full,
    }

    /// Seals [`Mode`](super::Mode): the modes are this crate's.
    pub trait Sealed {
        /// What the mode keeps.
        const KEEP: Keep;
    }
}

use sealed::Keep;

/// What a [`Cursor`] keeps of the register state: [`Pc`], [`General`] or [`Full`]. Each
/// mode applies only the register changes to the words it keeps (and reports only those
/// to [`Cursor::next_instruction_with`]); the other words of [`Cursor::regs`] keep the
/// values they had when the cursor took the mode.
pub trait Mode: sealed::Sealed + Copy + Default + core::fmt::Debug {}

/// [`Mode`]: the pc alone (the `cip` word), from the `cip` changes. The cheapest mode:
/// for scans over the pcs and the memory addresses (which are read in place,
/// [`Instruction::touches`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pc;

/// [`Mode`]: the general registers, the pc and the flags (the first
/// [`general_words`](crate::general_words) words, which a block lists first). Passes over
/// the changes to the other words (x87, SSE, AVX, debug and segment registers) without
/// reading them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct General;

/// [`Mode`]: every `REGDUMP` word (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Full;

impl sealed::Sealed for Pc {
    const KEEP: Keep = Keep::Pc;
}
impl sealed::Sealed for General {
    const KEEP: Keep = Keep::General;
}
impl sealed::Sealed for Full {
    const KEEP: Keep = Keep::Full;
}
impl Mode for Pc {}
impl Mode for General {}
impl Mode for Full {}

/// The general registers, the pc and the flags: the first REGDUMP words (16 + 2 on x64,
/// 8 + 2 on x86), all that [`General`] keeps.
#[must_use]
pub const fn general_words(arch: Arch) -> usize {
    match arch {
        Arch::X64 => 18,
        Arch::X86 => 10,
    }
}

/// The REGDUMP word of `cip` (rip / eip): it follows the general registers.
const fn cip_word(arch: Arch) -> usize {
    general_words(arch) - 2
}

/// Each instruction (and user block) with the register state before it, as much of it as
/// the mode `M` keeps; made by [`Trace::cursor`](super::Trace::cursor),
/// [`Trace::replay`](super::Trace::replay) and [`Trace::seek`](super::Trace::seek).
///
/// The middle layer of the reader, between the blocks and random access:
/// - [`Blocks`] (below) hands out every block, measured and numbered, and keeps no
///   register state.
/// - `Cursor` adds the state and the counters ([`Cursor::counters`]); it gives up random
///   access and copies of the state: it lends the state ([`Cursor::regs`]) instead of
///   copying 1.4 KB per instruction, so it is not an `Iterator`: use it as
///   `while let Some(ins) = cursor.next_instruction() { let ins = ins?; cursor.regs()… }`.
///   The caller keeps the loop: the fast path (the usual block) is inlined into it, the
///   rest is one call.
/// - [`Trace::seek`](super::Trace::seek) (above) adds random access through an
///   [`Index`](super::Index), by replaying at most one full-dump interval.
///
/// Fuses after the first error, which comes after every complete block.
#[derive(Clone, Debug)]
pub struct Cursor<'a, M: Mode = Full> {
    /// The blocks before the run.
    blocks: Blocks<'a>,
    /// The usual blocks taken in since `blocks` was last moved.
    run: Run<'a>,
    /// The register state and the counters.
    state: ReplayState,
    mode: PhantomData<M>,
}

/// A run of usual blocks taken by the fast path: where it is, and what it moves
/// [`Cursor::blocks`] past when it closes (before the cold path, or when the cursor is
/// asked where it is).
#[derive(Clone, Copy, Debug)]
struct Run<'a> {
    /// The fast path may take the next block.
    open: bool,
    /// 8-byte words (else 4).
    wide: bool,
    /// The REGDUMP's words.
    words: u32,
    /// The bytes from the run's first block on.
    x: &'a [u8],
    /// Where the next block starts in `x`.
    at: usize,
    /// The instructions taken in.
    count: u64,
    /// How they are numbered.
    numbers: UsualNumbers,
    /// The prefetching loads' bytes (see [`usual_step`]).
    touched: u8,
}

impl<'a> Run<'a> {
    /// A closed run.
    fn closed() -> Run<'a> {
        Run {
            open: false,
            wide: false,
            words: 0,
            x: &[],
            at: 0,
            count: 0,
            numbers: UsualNumbers::default(),
            touched: 0,
        }
    }
}

impl<'a, M: Mode> Cursor<'a, M> {
    pub(super) fn new(blocks: Blocks<'a>, regs: RegDump) -> Cursor<'a, M> {
        let mut state = ReplayState::new(regs.arch());
        state.regs = regs;
        let mut cursor = Cursor {
            blocks,
            run: Run::closed(),
            state,
            mode: PhantomData,
        };
        cursor.open_run();
        cursor
    }

    /// The next instruction (user blocks are skipped and counted), with its register
    /// changes applied: [`Cursor::regs`] is then the state before it.
    #[inline(always)]
    pub fn next_instruction(&mut self) -> Option<Result<Instruction<'a>, Error>> {
        self.next_instruction_with(|_| {})
    }

    /// [`Cursor::next_instruction`] that also calls `on_change` with each change it applies
    /// (those to the words the mode keeps; by increasing word), in the same pass over
    /// the block: for a reader that keeps its own image of the registers, or lists the
    /// changes. A full dump under [`Full`] sets every word.
    #[inline(always)]
    pub fn next_instruction_with(
        &mut self,
        mut on_change: impl FnMut(RegChange),
    ) -> Option<Result<Instruction<'a>, Error>> {
        if let Some(ins) = self.fast(&mut on_change) {
            return Some(Ok(ins));
        }
        loop {
            match self.cold(&mut on_change)? {
                Ok(Block::Instruction(ins)) => return Some(Ok(ins)),
                Ok(Block::User(_)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next instruction for which `wanted(instruction, state before it)` holds, the
    /// others taken in on the way (as [`Cursor::next_instruction`] takes them): for scans
    /// that hand out few instructions, such as the ones at a pc or touching an address.
    /// The loop over the usual blocks runs here, with the cursor's position in registers.
    #[inline(always)]
    pub fn next_instruction_where(
        &mut self,
        mut wanted: impl FnMut(&Instruction<'a>, &RegDump) -> bool,
    ) -> Option<Result<Instruction<'a>, Error>> {
        loop {
            if self.run.open {
                let mut run = self.run;
                let found = if run.wide {
                    self.usual_until::<8>(&mut run, &mut wanted)
                } else {
                    self.usual_until::<4>(&mut run, &mut wanted)
                };
                self.run = run;
                if let Some(ins) = found {
                    return Some(Ok(ins));
                }
            }
            match self.cold(&mut |_| {})? {
                Ok(Block::Instruction(ins)) if wanted(&ins, &self.state.regs) => {
                    return Some(Ok(ins));
                }
                Ok(_) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The fast path of [`Cursor::next_instruction_where`]: takes in the usual blocks of
    /// `run` until one is wanted (returned) or the run ends (`None`).
    #[inline(always)]
    fn usual_until<const W: usize>(
        &mut self,
        run: &mut Run<'a>,
        wanted: &mut impl FnMut(&Instruction<'a>, &RegDump) -> bool,
    ) -> Option<Instruction<'a>> {
        loop {
            let ins = usual::<W, M>(run, &mut self.state.regs, &mut |_| {})?;
            if wanted(&ins, &self.state.regs) {
                return Some(ins);
            }
        }
    }

    /// The next block; an instruction's register changes are applied first, so
    /// [`Cursor::regs`] is the state before it.
    #[inline]
    pub fn next_block(&mut self) -> Option<Result<Block<'a>, Error>> {
        if let Some(ins) = self.fast(&mut |_| {}) {
            return Some(Ok(Block::Instruction(ins)));
        }
        self.cold(&mut |_| {})
    }

    /// The fast path: the next block if it is a usual one, taken in.
    #[inline(always)]
    fn fast(&mut self, on_change: &mut impl FnMut(RegChange)) -> Option<Instruction<'a>> {
        if !self.run.open {
            return None;
        }
        if self.run.wide {
            usual::<8, M>(&mut self.run, &mut self.state.regs, on_change)
        } else {
            usual::<4, M>(&mut self.run, &mut self.state.regs, on_change)
        }
    }

    /// The cold path: the next block of any kind, through the block iterator, taken in.
    #[inline(never)]
    fn cold(&mut self, on_change: &mut impl FnMut(RegChange)) -> Option<Result<Block<'a>, Error>> {
        self.close_run();
        let block = self.blocks.next();
        if let Some(Ok(b)) = &block {
            self.state.blocks_read += 1;
            match b {
                Block::Instruction(ins) => {
                    self.state.count(ins);
                    let arch = self.state.regs.arch();
                    let regs = self.state.regs.words_mut();
                    match M::KEEP {
                        Keep::Full => ins.apply_with(regs, on_change),
                        Keep::General => {
                            let (low, _) = regs.split_at_mut(general_words(arch).min(regs.len()));
                            ins.apply_with(low, on_change);
                        }
                        Keep::Pc => pc_change(ins, arch, regs, on_change),
                    }
                }
                Block::User(_) => self.state.user_blocks += 1,
            }
        }
        self.open_run();
        block
    }

    /// Opens a run where the fast path may take the next blocks: not at the first
    /// instruction (which counts a session and whether the trace started without a full
    /// dump), not past the end, and no thread-id decision due.
    fn open_run(&mut self) {
        if self.blocks.instructions() == 0 || !self.blocks.usual_ready() {
            return;
        }
        let (x, wide, words) = self.blocks.usual_start();
        self.run = Run {
            open: true,
            wide,
            words,
            x,
            at: 0,
            count: 0,
            numbers: self.blocks.usual_numbers(),
            touched: self.run.touched,
        };
    }

    /// Moves the blocks past the run and closes it.
    fn close_run(&mut self) {
        core::hint::black_box(self.run.touched);
        self.blocks.passed_usual(self.run.at, self.run.count);
        self.state.blocks_read += self.run.count;
        self.run = Run::closed();
    }

    /// The same cursor keeping what mode `N` keeps, from here: the words it did not keep
    /// so far have the values they had when it took its mode (zeros from a trace's start).
    #[must_use]
    pub fn into_mode<N: Mode>(self) -> Cursor<'a, N> {
        Cursor {
            blocks: self.blocks,
            run: self.run,
            state: self.state,
            mode: PhantomData,
        }
    }

    /// The register state before the last instruction returned: the words the mode keeps.
    #[must_use]
    #[inline(always)]
    pub fn regs(&self) -> &RegDump {
        &self.state.regs
    }

    /// The blocks from where the cursor is, with their decoder state (a copy): to walk
    /// ahead without taking the registers in ([`Blocks::pass_equal`]).
    #[must_use]
    pub fn blocks(&self) -> Blocks<'a> {
        let mut blocks = self.blocks.clone();
        blocks.passed_usual(self.run.at, self.run.count);
        blocks
    }

    /// The offset of the next block to read.
    #[must_use]
    #[inline]
    pub fn offset(&self) -> Offset {
        Offset(self.blocks.offset().0 + self.run.at as u64)
    }

    /// Instructions read so far: the number of the next one.
    #[must_use]
    #[inline(always)]
    pub fn instructions(&self) -> u64 {
        self.blocks.instructions() + self.run.count
    }

    /// Blocks this cursor has taken in (instructions and user blocks): after
    /// [`Trace::seek`](super::Trace::seek), the blocks replayed from the full dump it
    /// started at, which the index bounds whatever the instruction number.
    #[must_use]
    pub fn blocks_read(&self) -> u64 {
        self.state.blocks_read + self.run.count
    }

    /// Everything the cursor has counted so far, in one value.
    #[must_use]
    pub fn counters(&self) -> Counters {
        Counters {
            user_blocks: self.state.user_blocks,
            full_dumps: self.state.full_dumps,
            sessions: self.state.sessions,
            started_without_dump: self.state.started_without_dump,
            recovered_thread_ids: self.blocks.recovered_thread_ids(),
        }
    }
}

/// The fast path for words of `W` bytes: the next block of `run` if it is a usual one,
/// taken into `regs` as mode `M` keeps them (its changes reported to `on_change`).
#[inline(always)]
fn usual<'a, const W: usize, M: Mode>(
    run: &mut Run<'a>,
    regs: &mut RegDump,
    on_change: &mut impl FnMut(RegChange),
) -> Option<Instruction<'a>> {
    let (mut ins, window) = usual_step::<W>(run.x, run.at, run.words, &mut run.touched)?;
    let arch = regs.arch();
    let regs = regs.words_mut();
    match M::KEEP {
        Keep::Full => usual_changes::<W>(window, |change| {
            // A usual block's changes are inside the REGDUMP (as `usual_step` checked).
            if let Some(slot) = regs.get_mut(usize::from(change.index)) {
                *slot = change.value;
            }
            on_change(change);
        }),
        Keep::General => {
            let general = general_words(arch);
            usual_changes::<W>(window, |change| {
                let i = usize::from(change.index);
                if i < general
                    && let Some(slot) = regs.get_mut(i)
                {
                    *slot = change.value;
                    on_change(change);
                }
            });
        }
        Keep::Pc => pc_change(&ins, arch, regs, on_change),
    }
    run.numbers.number(&mut ins, run.count, run.at as u64);
    run.at += ins.bytes.len();
    run.count += 1;
    Some(ins)
}

/// Applies the `cip` change of `ins`, if it has one, to `regs` (REGDUMP words of `arch`).
#[inline(always)]
fn pc_change(
    ins: &Instruction<'_>,
    arch: Arch,
    regs: &mut [u64],
    on_change: &mut impl FnMut(RegChange),
) {
    let cip = cip_word(arch);
    if let Some(value) = ins.word_change(cip as u8)
        && let Some(slot) = regs.get_mut(cip)
    {
        *slot = value;
        on_change(RegChange {
            index: cip as u16,
            value,
        });
    }
}
