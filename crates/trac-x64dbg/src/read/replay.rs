//! Random access through an index of full dumps ([`Index`], [`Trace::seek`]), the index
//! pass ([`IndexBuilder`]) and the counters of a replay ([`Counters`]).

use trace_core::Offset;

use super::blocks::walk_usual;
use super::cursor::{Cursor, Full, Mode};
use super::decode::{DecoderState, Fail, prefetch};
use super::{Block, Blocks, Instruction, ReadOptions, ThreadIdMode, Trace};
use crate::Error;
use crate::header::Arch;
use crate::raw;
use crate::regs::RegDump;

impl<'a> Trace<'a> {
    /// A [`Cursor`] from the first block, keeping what the mode `M` keeps of the
    /// register state: `trace.cursor::<Pc>()`.
    #[must_use]
    pub fn cursor<M: Mode>(&self) -> Cursor<'a, M> {
        Cursor::new(self.blocks(), RegDump::new(self.arch()))
    }

    /// The [`Full`] cursor from the first block: the whole register state before every
    /// instruction.
    #[must_use]
    pub fn replay(&self) -> Cursor<'a> {
        self.cursor()
    }

    /// Builds the random-access index in one pass: the position and decoder state of every
    /// full dump.
    ///
    /// # Errors
    ///
    /// The first error in the blocks; the index then covers the blocks before it
    /// (`trace.index_builder().finish()` keeps it).
    pub fn build_index(&self) -> Result<Index, Error> {
        let (index, err) = self.index_builder().finish();
        match err {
            Some(e) => Err(e),
            None => Ok(index),
        }
    }

    /// The index pass of [`Trace::build_index`], made a piece at a time
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

    /// Random access: the instruction number `instruction` and a [`Full`] cursor whose
    /// [`Cursor::regs`] is the state before it (and which continues after it; another
    /// mode through [`Cursor::into_mode`]). Costs a binary search and the replay of at
    /// most one full-dump interval.
    ///
    /// # Errors
    ///
    /// [`Error::SeekOutOfRange`] past the last instruction; a decode error on the way; an
    /// index made for another trace is detected only as far as its arch and options.
    pub fn seek(
        &self,
        index: &Index,
        instruction: u64,
    ) -> Result<(Instruction<'a>, Cursor<'a>), Error> {
        let blocks = self.blocks_before(index, instruction)?;
        let mut replay = Cursor::<Full>::new(blocks, RegDump::new(self.arch()));
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
    /// there is none), for [`Trace::seek`].
    fn blocks_before(&self, index: &Index, instruction: u64) -> Result<Blocks<'a>, Error> {
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

/// [`walk_usual`] over the usual blocks (at most `max`; `u64::MAX` walks without
/// counting), for the index pass: in its own function, so that the walk's values stay in
/// registers.
#[inline(never)]
fn walk_usual_all(rest: &[u8], state: DecoderState, max: u64) -> (usize, u64) {
    match (state.word() == 8, max == u64::MAX) {
        (true, true) => walk_usual::<8>(rest, state.words, |_| true),
        (false, true) => walk_usual::<4>(rest, state.words, |_| true),
        (wide, false) => {
            let mut k = 0u64;
            let mut below_max = |_: &Instruction<'_>| {
                k += 1;
                k <= max
            };
            if wide {
                walk_usual::<8>(rest, state.words, &mut below_max)
            } else {
                walk_usual::<4>(rest, state.words, &mut below_max)
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
            // Runs of usual blocks: the fast path of the index pass.
            if self.state.usual_next() {
                let left = instructions - self.state.instructions;
                let (len, count) =
                    walk_usual_all(data.get(self.pos..).unwrap_or(&[]), self.state, left);
                self.state.pass_usual(count);
                self.pos += len;
                if self.state.instructions >= instructions {
                    break;
                }
            }
            let rest = data.get(self.pos..).unwrap_or(&[]);
            // The usual block (not a full dump: those have more register changes than the
            // small-block path takes) only moves the decoder state on; nothing is kept.
            if let Some(block) = self.state.small_step(rest) {
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

    /// The index of every complete block and the error that ended the pass: goes on to
    /// the end first.
    #[must_use]
    pub fn finish(mut self) -> (Index, Option<Error>) {
        self.build_until(u64::MAX);
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

/// What a replay keeps besides the blocks: the register state and the counters. Shared by
/// [`Cursor`] and the streaming reader, so that both count alike.
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
    pub(super) fn count(&mut self, ins: &Instruction<'_>) {
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

/// What a replay (of a slice or a stream) has counted: [`Cursor::counters`],
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
