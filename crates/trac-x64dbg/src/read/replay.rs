//! Register-state replay ([`Replay`], [`States`]) and random access through an index of
//! full dumps ([`Index`], [`Trace::seek`]).

use trace_core::Offset;

use super::blocks::{PlainNumbers, plain_changes, plain_step, walk_plain};
use super::decode::{DecoderState, Fail, prefetch};
use super::{Block, Blocks, Instruction, ReadOptions, ThreadIdMode, Trace};
use crate::Error;
use crate::header::Arch;
use crate::model::RegChange;
use crate::raw;
use crate::regs::RegDump;

impl<'a> Trace<'a> {
    /// The register state before every instruction.
    #[must_use]
    pub fn replay(&self) -> Replay<'a> {
        Replay {
            blocks: self.blocks(),
            state: ReplayState::new(self.arch()),
        }
    }

    /// The register state before every instruction, as an `Iterator` of owned copies
    /// (1.4 KB each; [`Trace::replay`] lends the state instead).
    #[must_use]
    pub fn states(&self) -> States<'a> {
        States(self.replay())
    }

    /// Builds the random-access index in one pass: the position and decoder state of every
    /// full dump.
    ///
    /// # Errors
    ///
    /// The first error in the blocks; the index then covers the blocks before it (use
    /// [`Trace::build_index_partial`] to keep it).
    pub fn build_index(&self) -> Result<Index, Error> {
        let (index, err) = self.build_index_partial();
        match err {
            Some(e) => Err(e),
            None => Ok(index),
        }
    }

    /// Builds the index of every complete block, returning it with the error that stopped it.
    #[must_use]
    pub fn build_index_partial(&self) -> (Index, Option<Error>) {
        let mut builder = self.index_builder();
        builder.build_until(u64::MAX);
        builder.finish()
    }

    /// The index pass of [`Trace::build_index_partial`], made a piece at a time
    /// ([`IndexBuilder::build_until`]): so that readers can seek to the instructions it
    /// has passed ([`IndexBuilder::reaching`]) before it ends, such as threads that each
    /// build a stretch of a trace's rows.
    #[must_use]
    pub fn index_builder(&self) -> IndexBuilder<'a> {
        IndexBuilder {
            data: self.data,
            state: self.state(),
            pos: self.first_block,
            anchors: Vec::new(),
            error: None,
            ended: false,
            first_block: self.first_block,
            arch: self.arch(),
            options: self.options,
        }
    }

    /// Random access: the instruction number `instruction` and a [`Replay`] whose
    /// [`Replay::regs`] is the state before it (and which continues after it). Costs a
    /// binary search and the replay of at most one full-dump interval.
    ///
    /// # Errors
    ///
    /// [`Error::SeekOutOfRange`] past the last instruction; a decode error on the way; an
    /// index made for another trace is detected only as far as its arch and options.
    pub fn seek(
        &self,
        index: &Index,
        instruction: u64,
    ) -> Result<(Instruction<'a>, Replay<'a>), Error> {
        let mut replay = self.replay();
        replay.blocks = self.blocks_before(index, instruction)?;
        while let Some(ins) = replay.next_instruction() {
            let ins = ins?;
            if ins.index() == instruction {
                return Ok((ins, replay));
            }
        }
        Err(Error::SeekOutOfRange {
            offset: Offset(self.data.len() as u64),
            instruction,
            count: index.instructions,
        })
    }

    /// The blocks from the full dump at or before `instruction` (from the first block when
    /// there is none), for [`Trace::seek`] and [`Trace::scan_from`].
    pub(super) fn blocks_before(
        &self,
        index: &Index,
        instruction: u64,
    ) -> Result<Blocks<'a>, Error> {
        if instruction >= index.instructions
            || index.arch != self.arch()
            || index.first_block != self.first_block
        {
            return Err(Error::SeekOutOfRange {
                offset: Offset(self.data.len() as u64),
                instruction,
                count: index.instructions,
            });
        }
        let i = index
            .anchors
            .partition_point(|a| a.instruction <= instruction);
        Ok(match i.checked_sub(1).and_then(|i| index.anchors.get(i)) {
            Some(anchor) => Blocks::new(self.data, anchor.pos, anchor.state),
            None => self.blocks(),
        })
    }
}

/// [`walk_plain`] over the usual blocks (at most `max`; `u64::MAX` walks without
/// counting), for the index pass: in its own function, so that the walk's values stay in
/// registers.
#[inline(never)]
fn walk_plain_all(rest: &[u8], state: DecoderState, max: u64) -> (usize, u64) {
    match (state.word() == 8, max == u64::MAX) {
        (true, true) => walk_plain::<8>(rest, state.words, |_| true),
        (false, true) => walk_plain::<4>(rest, state.words, |_| true),
        (wide, false) => {
            let mut k = 0u64;
            let mut below_max = |_: &Instruction<'_>| {
                k += 1;
                k <= max
            };
            if wide {
                walk_plain::<8>(rest, state.words, &mut below_max)
            } else {
                walk_plain::<4>(rest, state.words, &mut below_max)
            }
        }
    }
}

/// The index pass, made a piece at a time: see [`Trace::index_builder`].
#[derive(Debug)]
pub struct IndexBuilder<'a> {
    data: &'a [u8],
    state: DecoderState,
    /// Where the next block starts.
    pos: usize,
    anchors: Vec<Anchor>,
    /// The error that ended the pass.
    error: Option<Error>,
    /// Set at the end of the complete blocks (or at an error).
    ended: bool,
    first_block: usize,
    arch: Arch,
    options: ReadOptions,
}

impl IndexBuilder<'_> {
    /// Goes on until `instructions` instructions have been passed in all (or the end of
    /// the complete blocks, or an error); returns how many have been.
    pub fn build_until(&mut self, instructions: u64) -> u64 {
        let data = self.data;
        while !self.ended && self.state.instructions < instructions {
            // Runs of usual blocks without a thread id: the lean walk.
            if self.state.plain_next() {
                let left = instructions - self.state.instructions;
                let (len, count) =
                    walk_plain_all(data.get(self.pos..).unwrap_or(&[]), self.state, left);
                self.state.pass_plain(count);
                self.pos += len;
                if self.state.instructions >= instructions {
                    break;
                }
            }
            let rest = data.get(self.pos..).unwrap_or(&[]);
            // The usual block (not a full dump: those have more register changes than the
            // quick path takes) only moves the decoder state on; nothing is kept.
            if let Some(block) = self.state.quick_step(rest) {
                let flagged = block
                    .get(3)
                    .is_some_and(|&fl| fl & raw::FLAG_THREAD_ID != 0);
                self.state
                    .commit_instruction(block, self.pos as u64, flagged);
                prefetch(block, rest.get(block.len()..).unwrap_or(&[]));
                self.pos += block.len();
                continue;
            }
            if self.pos >= data.len() {
                self.ended = true;
                break;
            }
            // A full dump needs no earlier state but the decoder's: remember it (only then:
            // copying the state every block costs more than decoding it).
            let is_full = rest.first() == Some(&raw::BLOCK_INSTRUCTION)
                && rest.get(1).map(|&n| u16::from(n)) == Some(self.state.words);
            let before = if is_full { Some(self.state) } else { None };
            match self.state.decode(data, self.pos, 0, true) {
                Ok(meta) => {
                    if let Some(before) = before {
                        self.anchors.push(Anchor {
                            instruction: before.instructions,
                            pos: self.pos,
                            state: before,
                        });
                    }
                    self.pos += meta.len();
                }
                Err(Fail::Error(e)) => {
                    self.error = Some(e);
                    self.ended = true;
                }
                Err(Fail::NeedMore(_)) => self.ended = true,
            }
        }
        self.state.instructions
    }

    /// An index through which [`Trace::seek`] reaches every instruction passed so far, in
    /// a few dozen bytes: only the last full dump is in it. A seek replays from that full
    /// dump, or from the trace's start for an instruction before it: take the index when
    /// the pass has just gone past the instruction wanted.
    #[must_use]
    pub fn reaching(&self) -> Index {
        Index {
            anchors: self.anchors.last().copied().into_iter().collect(),
            ..self.index_so_far(Vec::new())
        }
    }

    /// The whole index and the error that ended the pass, once [`IndexBuilder::build_until`]
    /// came to the end (else the index of the blocks passed).
    #[must_use]
    pub fn finish(mut self) -> (Index, Option<Error>) {
        let anchors = std::mem::take(&mut self.anchors);
        (self.index_so_far(anchors), self.error)
    }

    fn index_so_far(&self, anchors: Vec<Anchor>) -> Index {
        Index {
            anchors,
            instructions: self.state.instructions,
            blocks: self.state.blocks(),
            first_block: self.first_block,
            arch: self.arch,
            options: self.options,
        }
    }
}

/// What replay keeps besides the blocks: the register state and the counters. Shared by
/// [`Replay`] and the streaming reader, so that both count alike.
#[derive(Clone, Debug)]
pub(super) struct ReplayState {
    pub(super) regs: RegDump,
    pub(super) user_blocks: u64,
    pub(super) full_dumps: u64,
    pub(super) sessions: u64,
    pub(super) started_without_dump: bool,
    /// Blocks this replay has taken in: the work done, e.g. by a seek from its full dump.
    pub(super) blocks_read: u64,
}

impl ReplayState {
    pub(super) fn new(arch: Arch) -> ReplayState {
        ReplayState {
            regs: RegDump::new(arch),
            user_blocks: 0,
            full_dumps: 0,
            sessions: 0,
            started_without_dump: false,
            blocks_read: 0,
        }
    }

    /// Takes in the instruction `ins`: counts it and applies its register changes, so that
    /// [`ReplayState::regs`] is the state before it.
    #[inline(always)]
    pub(super) fn instruction(&mut self, ins: &Instruction<'_>) {
        self.count(ins);
        ins.apply(&mut self.regs);
    }

    /// Counts the instruction `ins` (its changes not applied).
    #[inline]
    fn count(&mut self, ins: &Instruction<'_>) {
        if ins.index() == 0 && !ins.is_full_dump() {
            self.started_without_dump = true;
        }
        if ins.is_full_dump() {
            self.full_dumps += 1;
        }
        if ins.index() == 0 || ins.starts_session() {
            self.sessions += 1;
        }
    }

    /// Takes in the block `block` (instruction or user block).
    #[inline(always)]
    pub(super) fn block(&mut self, block: &Block<'_>) {
        self.blocks_read += 1;
        match block {
            Block::Instruction(ins) => self.instruction(ins),
            Block::User(_) => self.user_blocks += 1,
        }
    }
}

/// Register-state replay: each instruction with the register state before it.
///
/// `Replay` lends the state ([`Replay::regs`]) instead of copying 1.4 KB per instruction,
/// so it is not an `Iterator`; use it as
/// `while let Some(ins) = replay.next_instruction() { let ins = ins?; replay.regs()… }`.
#[derive(Clone, Debug)]
pub struct Replay<'a> {
    pub(super) blocks: Blocks<'a>,
    state: ReplayState,
}

impl<'a> Replay<'a> {
    /// The next block; an instruction's register changes are applied first, so
    /// [`Replay::regs`] is the state before it.
    #[inline]
    pub fn next_block(&mut self) -> Option<Result<Block<'a>, Error>> {
        let block = self.blocks.next()?;
        if let Ok(b) = &block {
            self.state.block(b);
        }
        Some(block)
    }

    /// The next instruction (user blocks are skipped and counted), with its register
    /// changes applied.
    #[inline]
    pub fn next_instruction(&mut self) -> Option<Result<Instruction<'a>, Error>> {
        loop {
            match self.next_block()? {
                Ok(Block::Instruction(ins)) => return Some(Ok(ins)),
                Ok(Block::User(_)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Takes in at most `max` of the usual instruction blocks from here (no thread id, not
    /// a full dump, at most 8 register changes and 8 memory accesses: nearly all of a
    /// trace), as [`Replay::next_instruction`] would return them, and calls
    /// `on_instruction` with each and the register state before it; returns how many.
    /// Stops before any other block (which [`Replay::next_instruction`] then returns),
    /// near the end of the bytes, and before the first instruction of the trace.
    ///
    /// The lean walk of the index pass: the blocks are measured one after the other
    /// without the block iterator's general decoding, for readers that fill columns from
    /// runs of instructions.
    #[inline]
    pub fn walk_plain(
        &mut self,
        max: u64,
        mut on_instruction: impl FnMut(&Instruction<'a>, &RegDump),
    ) -> u64 {
        // The first instruction counts a session and whether the trace started without a
        // full dump: it goes the general way.
        if max == 0 || self.blocks.instructions() == 0 {
            return 0;
        }
        let Replay { blocks, state } = self;
        let count = blocks.walk_plain_numbered(max, |ins| {
            ins.apply(&mut state.regs);
            on_instruction(ins, &state.regs);
        });
        state.blocks_read += count;
        count
    }

    /// [`Replay::next_instruction_with_regs`] that also marks the `REGDUMP` words the
    /// instruction's block sets in `changed` (word `k` as bit `k % 64` of `changed[k / 64]`)
    /// in the same pass over its changes: for a reader that copies only the registers
    /// changed since it last looked (marks add up until it clears them).
    #[inline]
    pub fn next_instruction_marking(
        &mut self,
        changed: &mut [u64; 4],
    ) -> Option<Result<(Instruction<'a>, &RegDump), Error>> {
        self.next_instruction_changing(|i, _| {
            if let Some(bits) = changed.get_mut(i >> 6) {
                *bits |= 1 << (i & 63);
            }
        })
    }

    /// [`Replay::next_instruction_with_regs`] that also calls `on_change(word, value)` for
    /// each `REGDUMP` word the instruction's block sets, as it applies it (in the block's
    /// order, by increasing word): for a reader that keeps its own image of the registers
    /// up to date from the changes alone (the tfile conversion). A full dump calls it for
    /// every word.
    #[inline]
    pub fn next_instruction_changing(
        &mut self,
        mut on_change: impl FnMut(usize, u64),
    ) -> Option<Result<(Instruction<'a>, &RegDump), Error>> {
        loop {
            let block = self.blocks.next()?;
            self.state.blocks_read += 1;
            match block {
                Ok(Block::Instruction(ins)) => {
                    self.state.count(&ins);
                    let words = self.state.regs.words_mut();
                    for change in ins.regs() {
                        let i = usize::from(change.index);
                        // The reader checked every index against the REGDUMP.
                        if let Some(slot) = words.get_mut(i) {
                            *slot = change.value;
                            on_change(i, change.value);
                        }
                    }
                    return Some(Ok((ins, &self.state.regs)));
                }
                Ok(Block::User(_)) => self.state.user_blocks += 1,
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// [`Replay::next_block`] with the register state before the block (the same calls as
    /// [`StreamReader::next_block_with_regs`](super::StreamReader::next_block_with_regs)).
    #[inline]
    pub fn next_block_with_regs(&mut self) -> Option<Result<(Block<'a>, &RegDump), Error>> {
        Some(self.next_block()?.map(|b| (b, &self.state.regs)))
    }

    /// [`Replay::next_instruction`] with the register state before the instruction (the
    /// same calls as
    /// [`StreamReader::next_instruction_with_regs`](super::StreamReader::next_instruction_with_regs)).
    #[inline]
    pub fn next_instruction_with_regs(
        &mut self,
    ) -> Option<Result<(Instruction<'a>, &RegDump), Error>> {
        Some(self.next_instruction()?.map(|i| (i, &self.state.regs)))
    }

    /// The offset of the next block to read.
    #[must_use]
    pub fn offset(&self) -> Offset {
        self.blocks.offset()
    }

    /// The blocks from where the replay is, with their decoder state (a copy): to walk
    /// ahead without replaying ([`Blocks::pass_equal`]).
    #[must_use]
    pub fn blocks(&self) -> Blocks<'a> {
        self.blocks.clone()
    }

    /// The register state before the last instruction returned.
    #[must_use]
    pub fn regs(&self) -> &RegDump {
        &self.state.regs
    }

    /// Everything the replay has counted so far, in one value.
    #[must_use]
    pub fn counters(&self) -> Counters {
        Counters {
            user_blocks: self.user_blocks(),
            full_dumps: self.full_dumps(),
            sessions: self.sessions(),
            started_without_dump: self.started_without_dump(),
            recovered_thread_ids: self.recovered_thread_ids(),
        }
    }

    /// Blocks this replay has decoded (instructions and user blocks): after
    /// [`Trace::seek`], the blocks replayed from the full dump it started at, which the
    /// index bounds whatever the instruction number.
    #[must_use]
    pub fn blocks_read(&self) -> u64 {
        self.state.blocks_read
    }

    /// User blocks seen so far.
    #[must_use]
    pub fn user_blocks(&self) -> u64 {
        self.state.user_blocks
    }

    /// Full dumps seen so far.
    #[must_use]
    pub fn full_dumps(&self) -> u64 {
        self.state.full_dumps
    }

    /// Recording sessions seen so far (the first, plus appended ones).
    #[must_use]
    pub fn sessions(&self) -> u64 {
        self.state.sessions
    }

    /// Whether the first instruction was not a full dump (its state started as zeros).
    #[must_use]
    pub fn started_without_dump(&self) -> bool {
        self.state.started_without_dump
    }

    /// Blocks whose thread-id bytes had no flag (recovered pre-#3920 quirk).
    #[must_use]
    pub fn recovered_thread_ids(&self) -> u64 {
        self.blocks.recovered_thread_ids()
    }
}

/// What a replay (of a slice or a stream) has counted: [`Replay::counters`],
/// [`StreamReader::counters`](super::StreamReader::counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// User blocks (types `0x80..=0xff`).
    pub user_blocks: u64,
    /// Full register dumps.
    pub full_dumps: u64,
    /// Recording sessions (the first, plus runs appended to the file).
    pub sessions: u64,
    /// Whether the first instruction was not a full dump (its state started as zeros).
    pub started_without_dump: bool,
    /// Blocks whose thread-id bytes had no flag (recovered pre-#3920 quirk).
    pub recovered_thread_ids: u64,
}

/// Each instruction with a copy of the register state before it; see [`Trace::states`].
/// Fuses after the first error.
#[derive(Clone, Debug)]
pub struct States<'a>(Replay<'a>);

impl<'a> Iterator for States<'a> {
    type Item = Result<(Instruction<'a>, RegDump), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let ins = self.0.next_instruction()?;
        Some(ins.map(|i| (i, self.0.state.regs.clone())))
    }
}

impl core::iter::FusedIterator for States<'_> {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Anchor {
    instruction: u64,
    pos: usize,
    state: DecoderState,
}

/// The first bytes of [`Index::to_bytes`] (the version is the last byte).
const INDEX_MAGIC: &[u8] = b"x64dbg-index\x01";

/// The bytes of [`Index::to_bytes`] before the full dumps.
const INDEX_HEAD: usize = 13 + 2 + 32;

/// The random-access index of a trace: one entry per full dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    anchors: Vec<Anchor>,
    instructions: u64,
    blocks: u64,
    first_block: usize,
    arch: Arch,
    options: ReadOptions,
}

impl Index {
    /// Instructions in the trace (complete blocks).
    #[must_use]
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// Blocks in the trace, user blocks included.
    #[must_use]
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Number of full dumps.
    #[must_use]
    pub fn full_dumps(&self) -> usize {
        self.anchors.len()
    }

    /// The index as bytes, to keep beside the trace ([`Index::from_bytes`] reads it back):
    /// about 60 bytes per full dump.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(INDEX_HEAD + self.anchors.len() * (8 + DecoderState::BYTES));
        out.extend_from_slice(INDEX_MAGIC);
        out.push(match self.arch {
            Arch::X64 => 0,
            Arch::X86 => 1,
        });
        out.push(match self.options.thread_ids {
            ThreadIdMode::Recover => 0,
            ThreadIdMode::Flag => 1,
        });
        for x in [
            self.first_block as u64,
            self.instructions,
            self.blocks,
            self.anchors.len() as u64,
        ] {
            out.extend_from_slice(&x.to_le_bytes());
        }
        for a in &self.anchors {
            out.extend_from_slice(&(a.pos as u64).to_le_bytes());
            a.state.write_to(&mut out);
        }
        out
    }

    /// An index saved by [`Index::to_bytes`], or `None` when `bytes` are not one (any
    /// bytes: this never panics). It is checked to be well-formed (full dumps in order,
    /// inside the counts), not to belong to a given trace: keep it with something that
    /// identifies the trace. A wrong index makes seeks fail or land wrong, never panic.
    #[must_use]
    pub fn from_bytes(bytes: &[u8]) -> Option<Index> {
        let rest = bytes.strip_prefix(INDEX_MAGIC)?;
        let (&[arch, mode], rest) = rest.split_first_chunk::<2>()?;
        let arch = match arch {
            0 => Arch::X64,
            1 => Arch::X86,
            _ => return None,
        };
        let options = ReadOptions {
            thread_ids: match mode {
                0 => ThreadIdMode::Recover,
                1 => ThreadIdMode::Flag,
                _ => return None,
            },
        };
        let (head, rest) = rest.split_first_chunk::<32>()?;
        let mut word = head
            .chunks_exact(8)
            .map(|c| c.try_into().map_or(0, u64::from_le_bytes));
        let first_block = usize::try_from(word.next()?).ok()?;
        let instructions = word.next()?;
        let blocks = word.next()?;
        let count = usize::try_from(word.next()?).ok()?;
        let size = 8 + DecoderState::BYTES;
        if rest.len() != count.checked_mul(size)? || blocks < instructions {
            return None;
        }
        let mut anchors = Vec::with_capacity(count);
        for chunk in rest.chunks_exact(size) {
            let (pos, state) = chunk.split_first_chunk::<8>()?;
            let pos = usize::try_from(u64::from_le_bytes(*pos)).ok()?;
            let state = DecoderState::from_bytes(arch, options, state)?;
            let in_order = anchors
                .last()
                .is_none_or(|a: &Anchor| a.pos < pos && a.instruction < state.instructions);
            if !in_order || pos < first_block || state.instructions >= instructions {
                return None;
            }
            anchors.push(Anchor {
                instruction: state.instructions,
                pos,
                state,
            });
        }
        Some(Index {
            anchors,
            instructions,
            blocks,
            first_block,
            arch,
            options,
        })
    }

    /// The instruction number and file offset of every full dump.
    pub fn full_dump_positions(&self) -> impl Iterator<Item = (u64, Offset)> + '_ {
        self.anchors
            .iter()
            .map(|a| (a.instruction, Offset(a.pos as u64)))
    }
}

/// The general registers, the pc and the flags: the first REGDUMP words (16 + 2 on x64,
/// 8 + 2 on x86), all a replay of [`GeneralReplay`] keeps up.
#[must_use]
pub const fn general_words(arch: Arch) -> usize {
    match arch {
        Arch::X64 => 18,
        Arch::X86 => 10,
    }
}

impl<'a> Replay<'a> {
    /// A [`GeneralReplay`] that goes on from where this replay is, with its state.
    #[must_use]
    pub fn general(&self) -> GeneralReplay<'a> {
        GeneralReplay {
            blocks: self.blocks.clone(),
            regs: self.state.regs.clone(),
            general: general_words(self.state.regs.arch()),
            changed: u64::MAX,
        }
    }
}

/// A lean replay for readers that look only at the general registers, the pc and the
/// flags ([`general_words`]): of each block it applies only the register changes to
/// those words, which come first (a block lists its changes by increasing word), and
/// passes over the rest (x87, SSE, AVX, debug and segment registers) by their recorded
/// sizes without reading them; it keeps no counters. Made by [`Replay::general`]; the
/// words past the general ones keep the values they had then.
///
/// A lending loop like [`Replay`]:
/// `while let Some(ins) = replay.next_instruction() { let ins = ins?; replay.regs()… }`.
/// Fuses after the first error, which comes after every complete block.
#[derive(Clone, Debug)]
pub struct GeneralReplay<'a> {
    blocks: Blocks<'a>,
    regs: RegDump,
    general: usize,
    /// The general words the last instruction's block changed ([`GeneralReplay::changed`]).
    changed: u64,
}

impl<'a> GeneralReplay<'a> {
    /// The next instruction (user blocks are skipped), with its changes to the general
    /// registers applied: [`GeneralReplay::regs`] is then the state before it.
    #[inline]
    pub fn next_instruction(&mut self) -> Option<Result<Instruction<'a>, Error>> {
        loop {
            match self.next_block()? {
                Ok(Block::Instruction(ins)) => return Some(Ok(ins)),
                Ok(Block::User(_)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next block; an instruction's changes to the general registers are applied
    /// first.
    #[inline]
    pub fn next_block(&mut self) -> Option<Result<Block<'a>, Error>> {
        let block = self.blocks.next()?;
        if let Ok(Block::Instruction(ins)) = &block {
            self.changed = ins.apply_below(self.general, &mut self.regs);
        }
        Some(block)
    }

    /// [`Replay::walk_plain`] for the lean replay: takes in at most `max` of the usual
    /// instruction blocks from here, applying their changes to the general words, and
    /// calls `on_instruction` with each, the register state before it and the general
    /// words its block set (as [`GeneralReplay::changed`] gives them); returns how many.
    /// Stops before any other block, which [`GeneralReplay::next_instruction`] then
    /// returns.
    #[inline]
    pub fn walk_plain(
        &mut self,
        max: u64,
        mut on_instruction: impl FnMut(&Instruction<'a>, &RegDump, u64),
    ) -> u64 {
        // The first instruction goes the general way (as for the full replay).
        if max == 0 || self.blocks.instructions() == 0 {
            return 0;
        }
        let GeneralReplay {
            blocks,
            regs,
            general,
            changed,
        } = self;
        blocks.walk_plain_numbered(max, |ins| {
            *changed = ins.apply_below(*general, regs);
            on_instruction(ins, regs, *changed);
        })
    }

    /// The general words (bit `k` for word `k`) that the block of the last instruction
    /// returned set: a superset of those whose value differs from the instruction before
    /// (a block may set a word to the value it had). Every bit before the first
    /// instruction.
    #[must_use]
    #[inline]
    pub fn changed(&self) -> u64 {
        self.changed
    }

    /// [`GeneralReplay::next_block`] with the register state before the block.
    #[inline]
    pub fn next_block_with_regs(&mut self) -> Option<Result<(Block<'a>, &RegDump), Error>> {
        Some(self.next_block()?.map(|b| (b, &self.regs)))
    }

    /// [`GeneralReplay::next_instruction`] with the register state before the
    /// instruction.
    #[inline]
    pub fn next_instruction_with_regs(
        &mut self,
    ) -> Option<Result<(Instruction<'a>, &RegDump), Error>> {
        Some(self.next_instruction()?.map(|i| (i, &self.regs)))
    }

    /// The register state before the last instruction returned: its first
    /// [`general_words`] are up to date, the rest as they were when the lean replay
    /// began.
    #[must_use]
    #[inline]
    pub fn regs(&self) -> &RegDump {
        &self.regs
    }

    /// The offset of the next block to read.
    #[must_use]
    pub fn offset(&self) -> Offset {
        self.blocks.offset()
    }
}

impl Instruction<'_> {
    /// [`Instruction::apply`] of the changes to words `0..words` only: the changes come
    /// by increasing word, so it stops at the first change past them. Returns the words
    /// set, bit `k` for word `k` (words from 64 on have no bit).
    #[inline]
    pub fn apply_below(&self, words: usize, regs: &mut RegDump) -> u64 {
        let all = regs.words_mut();
        let (low, _) = all.split_at_mut(words.min(all.len()));
        let mut set = 0u64;
        for change in self.regs() {
            match low.get_mut(usize::from(change.index)) {
                Some(slot) => {
                    *slot = change.value;
                    set |= 1u64.checked_shl(u32::from(change.index)).unwrap_or(0);
                }
                None => break,
            }
        }
        set
    }
}

impl<'a> Replay<'a> {
    /// A cursor over the usual instructions from here, for readers that fill columns in
    /// a loop of their own: each [`PlainCursor::next`] takes in the next one, as
    /// [`Replay::walk_plain`] would hand it on. `None` where that walk would pass nothing
    /// at once (the first instruction of the trace, a thread-id decision due, the end).
    /// The cursor is generic over the word size, so that its steps compile into the
    /// caller's loop: hence the two variants.
    #[inline]
    pub fn plain_cursor(&mut self) -> Option<PlainCursors<'_, 'a>> {
        // The first instruction goes the general way (as for `walk_plain`).
        if self.blocks.instructions() == 0 || !self.blocks.plain_ready() {
            return None;
        }
        let (x, wide, words) = self.blocks.plain_start();
        let numbers = self.blocks.plain_numbers();
        let Replay { blocks, state } = self;
        let ReplayState {
            regs, blocks_read, ..
        } = state;
        let walk = PlainWalk {
            blocks,
            blocks_read,
            x,
            words,
            at: 0,
            count: 0,
            numbers,
            touched: 0,
        };
        let regs = regs.words_mut();
        Some(if wide {
            PlainCursors::Words8(PlainCursor { walk, regs })
        } else {
            PlainCursors::Words4(PlainCursor { walk, regs })
        })
    }
}

/// [`Replay::plain_cursor`]'s cursor, by word size.
#[derive(Debug)]
pub enum PlainCursors<'r, 'a> {
    /// 8-byte words (x64).
    Words8(PlainCursor<'r, 'a, 8>),
    /// 4-byte words (x86).
    Words4(PlainCursor<'r, 'a, 4>),
}

/// The usual instructions from a [`Replay`]'s position, taken in one at a time (see
/// [`Replay::plain_cursor`]); the replay moves past them when the cursor is dropped.
///
/// The lean walk of [`Replay::walk_plain`] turned inside out: the caller owns the loop, so
/// that the walk's steps, the decoding of the changes and the caller's use of them
/// compile into one loop with no call per instruction.
#[derive(Debug)]
pub struct PlainCursor<'r, 'a, const W: usize> {
    walk: PlainWalk<'r, 'a>,
    /// The replay's REGDUMP words.
    regs: &'r mut [u64],
}

/// Where a [`PlainCursor`] is, and what it moves past when dropped.
#[derive(Debug)]
struct PlainWalk<'r, 'a> {
    blocks: &'r mut Blocks<'a>,
    blocks_read: &'r mut u64,
    /// The bytes from the first block of the walk on.
    x: &'a [u8],
    /// The REGDUMP's words.
    words: u32,
    /// Where the next block starts in `x`.
    at: usize,
    /// The instructions taken in.
    count: u64,
    /// How they are numbered.
    numbers: PlainNumbers,
    /// The prefetching loads' bytes (see [`plain_step`]).
    touched: u8,
}

impl<'a, const W: usize> PlainCursor<'_, 'a, W> {
    /// Takes in the next usual instruction: calls `on_change` with each of its register
    /// changes (by increasing word) as it applies it, then returns the instruction
    /// ([`PlainCursor::regs`] and, after the cursor, [`Replay::regs`] are then the state
    /// before it). `None` before any other block (which [`Replay::next_instruction`] then
    /// returns) and near the end of the bytes.
    #[inline(always)]
    pub fn next(&mut self, mut on_change: impl FnMut(RegChange)) -> Option<Instruction<'a>> {
        let walk = &mut self.walk;
        let (mut ins, window) = plain_step::<W>(walk.x, walk.at, walk.words, &mut walk.touched)?;
        let regs = &mut *self.regs;
        plain_changes::<W>(window, |change| {
            // A usual block's changes are inside the REGDUMP (as `plain_step` checked).
            if let Some(slot) = regs.get_mut(usize::from(change.index)) {
                *slot = change.value;
            }
            on_change(change);
        });
        walk.numbers.number(&mut ins, walk.count, walk.at as u64);
        walk.at += ins.bytes.len();
        walk.count += 1;
        Some(ins)
    }

    /// The REGDUMP words: after [`PlainCursor::next`], the state before the instruction it
    /// returned (as [`Replay::regs`] gives them).
    #[must_use]
    #[inline(always)]
    pub fn regs(&self) -> &[u64] {
        self.regs
    }

    /// The number of the instruction [`PlainCursor::next`] takes in next.
    #[must_use]
    #[inline(always)]
    pub fn next_index(&self) -> u64 {
        self.walk.numbers.index + self.walk.count
    }
}

impl Drop for PlainWalk<'_, '_> {
    fn drop(&mut self) {
        core::hint::black_box(self.touched);
        self.blocks.passed_plain(self.at, self.count);
        *self.blocks_read += self.count;
    }
}
