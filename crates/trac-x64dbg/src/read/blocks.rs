//! Block views ([`Block`], [`Instruction`], [`UserBlock`]) with their field iterators,
//! and the lazy block iterator over a slice ([`Blocks`]).

use trace_core::Offset;

use super::decode::{
    DecoderState, Fail, InstrMeta, MARK_FLAGGED, MARK_FULL, MARK_NEW_SESSION, MARK_UNFLAGGED,
    MARK_WORD8, prefetch,
};
use crate::Error;
use crate::model::{InstructionRecord, MemAccess, Record, RegChange, ThreadField};
use crate::raw;
use crate::regs::RegDump;

/// An executed instruction (block type 0), borrowing the block's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instruction<'a> {
    pub(super) meta: InstrMeta,
    pub(super) bytes: &'a [u8],
}

/// A user-defined block (type `0x80..=0xff`): not an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserBlock<'a> {
    /// Block number (instructions and user blocks, from 0).
    pub block: u64,
    /// File offset of the type byte.
    pub offset: Offset,
    /// The type byte.
    pub block_type: u8,
    /// The payload.
    pub payload: &'a [u8],
}

/// One block of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block<'a> {
    /// An executed instruction.
    Instruction(Instruction<'a>),
    /// A user block, exposed as an unknown record.
    User(UserBlock<'a>),
}

impl<'a> Block<'a> {
    /// File offset of the block.
    #[must_use]
    pub fn offset(&self) -> Offset {
        match self {
            Block::Instruction(i) => i.offset(),
            Block::User(u) => u.offset,
        }
    }

    /// Length of the block in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Block::Instruction(i) => i.bytes.len(),
            Block::User(u) => u.payload.len().saturating_add(5),
        }
    }

    /// Never true: a block has at least 4 bytes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The block as an owned value.
    #[must_use]
    pub fn to_record(&self) -> Record {
        match self {
            Block::Instruction(i) => Record::Instruction(i.to_record()),
            Block::User(u) => Record::User {
                block_type: u.block_type,
                payload: u.payload.to_vec(),
            },
        }
    }
}

/// `bytes` cut after `n` bytes (all of it in the first part if it is shorter).
#[inline(always)]
fn cut(bytes: &[u8], n: usize) -> (&[u8], &[u8]) {
    bytes.split_at_checked(n).unwrap_or((bytes, &[]))
}

/// Takes one little-endian word (8 bytes if `wide`, else 4) from the front of `bytes`.
#[inline(always)]
fn take_word(bytes: &mut &[u8], wide: bool) -> Option<u64> {
    if wide {
        let (word, rest) = bytes.split_first_chunk::<8>()?;
        *bytes = rest;
        Some(u64::from_le_bytes(*word))
    } else {
        let (word, rest) = bytes.split_first_chunk::<4>()?;
        *bytes = rest;
        Some(u64::from(u32::from_le_bytes(*word)))
    }
}

impl<'a> Instruction<'a> {
    #[inline]
    pub(super) fn tid_len(&self) -> usize {
        if self.meta.packed & (MARK_FLAGGED | MARK_UNFLAGGED) == 0 {
            0
        } else {
            4
        }
    }

    #[inline]
    pub(super) fn w(&self) -> usize {
        self.meta.word()
    }

    #[inline]
    pub(super) fn wide(&self) -> bool {
        self.meta.packed & MARK_WORD8 != 0
    }

    #[inline]
    fn part(&self, start: usize, len: usize) -> &'a [u8] {
        self.bytes.get(start..start + len).unwrap_or(&[])
    }

    #[inline]
    fn opcode_start(&self) -> usize {
        4 + self.tid_len()
    }

    #[inline]
    pub(super) fn positions_start(&self) -> usize {
        self.opcode_start() + usize::from(self.meta.flags() & raw::OPCODE_LEN_MASK)
    }

    #[inline]
    pub(super) fn mem_start(&self) -> usize {
        self.positions_start() + usize::from(self.meta.regs()) * (1 + self.w())
    }

    /// Instruction number (user blocks not counted), from 0.
    #[must_use]
    #[inline]
    pub fn index(&self) -> u64 {
        self.meta.index
    }

    /// Block number (instructions and user blocks), from 0.
    #[must_use]
    pub fn block(&self) -> u64 {
        self.meta.block
    }

    /// File offset of the block.
    #[must_use]
    #[inline]
    pub fn offset(&self) -> Offset {
        Offset(self.meta.offset)
    }

    /// The whole block's bytes.
    #[must_use]
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The thread that executed the instruction (carried over when the block has none; 0
    /// before the first thread id, as x64dbg's reader does).
    #[must_use]
    #[inline]
    pub fn thread(&self) -> u32 {
        self.meta.thread()
    }

    /// How the block stores the thread id.
    #[must_use]
    #[inline]
    pub fn thread_field(&self) -> ThreadField {
        if self.meta.packed & MARK_FLAGGED != 0 {
            ThreadField::Flagged
        } else if self.meta.packed & MARK_UNFLAGGED != 0 {
            ThreadField::Unflagged
        } else {
            ThreadField::Absent
        }
    }

    /// Whether this block holds every REGDUMP word (172/216 register changes).
    #[must_use]
    #[inline]
    pub fn is_full_dump(&self) -> bool {
        self.meta.packed & MARK_FULL != 0
    }

    /// Whether this full dump starts a new recording session appended to the file (a full
    /// dump that is not at a multiple of 512 instructions of the current session; one
    /// exactly at a multiple cannot be told apart from a periodic dump).
    #[must_use]
    pub fn starts_session(&self) -> bool {
        self.meta.packed & MARK_NEW_SESSION != 0
    }

    /// The flags byte (bit 7 thread id, bits 0-3 opcode length).
    #[must_use]
    pub fn flags(&self) -> u8 {
        self.meta.flags()
    }

    /// The instruction bytes.
    #[must_use]
    #[inline]
    pub fn opcode(&self) -> &'a [u8] {
        self.part(
            self.opcode_start(),
            usize::from(self.meta.flags() & raw::OPCODE_LEN_MASK),
        )
    }

    /// Number of register changes.
    #[must_use]
    #[inline]
    pub fn reg_count(&self) -> usize {
        usize::from(self.meta.regs())
    }

    /// The register changes, with absolute word indices (checked by the reader to be inside
    /// the REGDUMP).
    #[must_use]
    #[inline]
    pub fn regs(&self) -> RegChanges<'a> {
        let from_positions = self.bytes.get(self.positions_start()..).unwrap_or(&[]);
        // The values are followed by the memory accesses: the iterator stops with the
        // positions.
        let (positions, values) = cut(from_positions, self.reg_count());
        RegChanges {
            positions: positions.iter(),
            values,
            wide: self.wide(),
            next: 0,
        }
    }

    /// Number of memory accesses.
    #[must_use]
    #[inline]
    pub fn mem_count(&self) -> usize {
        usize::from(self.meta.mems())
    }

    /// The memory accesses.
    #[must_use]
    #[inline]
    pub fn mem(&self) -> MemAccesses<'a> {
        let m = self.mem_count();
        let (flags, rest) = cut(self.bytes.get(self.mem_start()..).unwrap_or(&[]), m);
        let (addrs, rest) = cut(rest, m * self.w());
        let (old, new) = cut(rest, m * self.w());
        MemAccesses {
            flags: flags.iter(),
            addrs,
            old,
            new,
            wide: self.wide(),
        }
    }

    /// The block as an owned record.
    #[must_use]
    pub fn to_record(&self) -> InstructionRecord {
        InstructionRecord {
            thread: self.thread(),
            thread_field: self.thread_field(),
            opcode: self.opcode().to_vec(),
            regs: self.regs().collect(),
            mem: self.mem().collect(),
        }
    }

    /// Applies the register changes to `regs`, which then holds the state before this
    /// instruction.
    #[inline]
    pub fn apply(&self, regs: &mut RegDump) {
        let words = regs.words_mut();
        for change in self.regs() {
            // The reader checked every index against the REGDUMP.
            if let Some(slot) = words.get_mut(usize::from(change.index)) {
                *slot = change.value;
            }
        }
    }
}

/// Iterator over an instruction's register changes.
#[derive(Clone, Debug)]
pub struct RegChanges<'a> {
    positions: core::slice::Iter<'a, u8>,
    /// The values not taken yet.
    values: &'a [u8],
    /// 8-byte words (else 4).
    wide: bool,
    next: u16,
}

impl Iterator for RegChanges<'_> {
    type Item = RegChange;

    #[inline]
    fn next(&mut self) -> Option<RegChange> {
        let p = *self.positions.next()?;
        let value = take_word(&mut self.values, self.wide)?;
        let index = self.next.wrapping_add(u16::from(p));
        self.next = index.wrapping_add(1);
        Some(RegChange { index, value })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.positions.size_hint()
    }
}

impl ExactSizeIterator for RegChanges<'_> {}

/// Iterator over an instruction's memory accesses.
#[derive(Clone, Debug)]
pub struct MemAccesses<'a> {
    flags: core::slice::Iter<'a, u8>,
    /// The addresses, old values and new values not taken yet.
    addrs: &'a [u8],
    old: &'a [u8],
    new: &'a [u8],
    /// 8-byte words (else 4).
    wide: bool,
}

impl Iterator for MemAccesses<'_> {
    type Item = MemAccess;

    #[inline]
    fn next(&mut self) -> Option<MemAccess> {
        let flags = *self.flags.next()?;
        let address = take_word(&mut self.addrs, self.wide)?;
        let old = take_word(&mut self.old, self.wide)?;
        // Without a branch on the flag (random in real traces): read the next new value
        // whenever one is there, and step past it only if the flag says it is this one's.
        let mut rest = self.new;
        let value = take_word(&mut rest, self.wide);
        let changed = flags & raw::MEM_UNCHANGED == 0 && value.is_some();
        if changed {
            self.new = rest;
        }
        Some(MemAccess {
            flags,
            address,
            old,
            new: value.filter(|_| changed),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.flags.size_hint()
    }
}

impl ExactSizeIterator for MemAccesses<'_> {}

/// The lazy block iterator of a [`Trace`](super::Trace). Fuses after the first error.
#[derive(Clone, Debug)]
pub struct Blocks<'a> {
    data: &'a [u8],
    /// The data from the next block on.
    rest: &'a [u8],
    state: DecoderState,
    /// The next block, checked and measured one step early by
    /// [`DecoderState::quick_step`] (empty: not measured).
    ///
    /// A block's length comes from its own bytes, so finding the blocks is a serial chain
    /// of loads. Measuring block k + 1 before handing out block k puts that chain ahead of
    /// the caller's work on block k in program order, so the CPU runs both at once, and a
    /// mispredicted branch in the caller's loops (over a block's registers, say) does not
    /// throw the measuring away.
    ahead: &'a [u8],
    /// Past the last block or an error.
    done: bool,
}

impl<'a> Blocks<'a> {
    #[inline]
    pub(super) fn new(data: &'a [u8], pos: usize, state: DecoderState) -> Blocks<'a> {
        Blocks {
            data,
            rest: data.get(pos..).unwrap_or(&[]),
            state,
            ahead: &[],
            done: false,
        }
    }

    /// Hands out the usual block `block` (see [`DecoderState::quick_step`]) at the start
    /// of `rest`, and measures the one after it.
    #[inline(always)]
    fn hand_out(&mut self, block: &'a [u8], with_tid: bool) -> Block<'a> {
        let at = self.offset().0;
        let rest = self.rest.get(block.len()..).unwrap_or(&[]);
        let meta = self.state.commit_instruction(block, at, with_tid);
        prefetch(block, rest);
        self.rest = rest;
        self.ahead = self.state.quick_step(rest).unwrap_or(&[]);
        Block::Instruction(Instruction { meta, bytes: block })
    }

    /// The next block when the quick path has not measured it: at the start, at the end,
    /// at an error (made here), and for the blocks that need [`DecoderState::step`].
    ///
    /// It takes and gives back the iterator by value: a pointer to it passed to a call
    /// would keep the compiler from holding its fields in registers in the hot loop.
    #[inline(never)]
    fn next_slow(mut self) -> (Blocks<'a>, Option<Result<Block<'a>, Error>>) {
        if self.done || self.rest.is_empty() {
            self.done = true;
            return (self, None);
        }
        let data = self.data;
        let pos = data.len() - self.rest.len();
        match self.state.step(data, pos, 0, true) {
            Ok(step) => {
                let meta = self.state.commit(data, pos, 0, step);
                let block = meta.materialize(self.rest);
                self.rest = self.rest.get(step.len..).unwrap_or(&[]);
                self.ahead = self.state.quick_step(self.rest).unwrap_or(&[]);
                (self, Some(Ok(block)))
            }
            Err(fail) => {
                self.done = true;
                let e = match fail {
                    Fail::Error(e) => e,
                    // Cannot happen with complete data; report it as truncation anyway.
                    Fail::NeedMore(n) => {
                        self.state.truncated(pos as u64, n as u64, self.rest.len())
                    }
                };
                (self, Some(Err(e)))
            }
        }
    }

    /// Blocks seen so far whose thread-id bytes had no flag (recovered pre-#3920 quirk).
    #[must_use]
    pub fn recovered_thread_ids(&self) -> u64 {
        self.state.quirks
    }

    /// File offset of the next block.
    #[must_use]
    #[inline]
    pub fn offset(&self) -> Offset {
        Offset((self.data.len() - self.rest.len()) as u64)
    }

    /// Instructions read so far.
    #[must_use]
    pub fn instructions(&self) -> u64 {
        self.state.instructions
    }

    /// Passes over the instruction blocks that end at or before offset `until` and are of
    /// one thread (the first one's), without decoding their registers or memory: each
    /// block is only measured, as [`Iterator::next`] does. Stops before a user block, a
    /// block of another thread, a block that ends past `until`, and an error (which the
    /// next [`Iterator::next`] then returns). Returns the instructions passed and their
    /// thread (`None`: none passed).
    ///
    /// With [`Blocks::pass_to`], what `diff` uses to go over equal stretches of two traces
    /// without replaying them.
    pub fn walk_run(&mut self, until: Offset) -> (u64, Option<u32>) {
        let mut n = 0u64;
        let mut thread = None;
        loop {
            // The usual block, measured ahead: its end and whether it names a thread are
            // known without taking it.
            if let Some(&fl) = self.ahead.get(3) {
                let end = self.offset().0.saturating_add(self.ahead.len() as u64);
                if end > until.0 {
                    break;
                }
                if thread.is_none() || fl & raw::FLAG_THREAD_ID == 0 {
                    let block = self.ahead;
                    let ins = self.hand_out(block, fl & raw::FLAG_THREAD_ID != 0);
                    if let Block::Instruction(ins) = ins {
                        thread = Some(ins.thread());
                    }
                    n = n.saturating_add(1);
                    continue;
                }
            }
            // Anything else is taken on trial and given back if it ends the run.
            let save = self.clone();
            match self.next() {
                Some(Ok(Block::Instruction(ins)))
                    if ins.offset().0.saturating_add(ins.bytes.len() as u64) <= until.0
                        && thread.is_none_or(|t| t == ins.thread()) =>
                {
                    thread = Some(ins.thread());
                    n = n.saturating_add(1);
                }
                _ => {
                    *self = save;
                    break;
                }
            }
        }
        (n, thread)
    }

    /// Passes over every block that starts before offset `until` (which should be a block
    /// boundary), measuring them only; stops at an error, which the next
    /// [`Iterator::next`] returns. Returns the instructions passed.
    pub fn pass_to(&mut self, until: Offset) -> u64 {
        let mut n = 0u64;
        while self.offset() < until {
            if let Some(&fl) = self.ahead.get(3) {
                let block = self.ahead;
                self.hand_out(block, fl & raw::FLAG_THREAD_ID != 0);
                n = n.saturating_add(1);
                continue;
            }
            let save = self.clone();
            match self.next() {
                Some(Ok(Block::Instruction(_))) => n = n.saturating_add(1),
                Some(Ok(Block::User(_))) => {}
                _ => {
                    *self = save;
                    break;
                }
            }
        }
        n
    }
}

impl<'a> Iterator for Blocks<'a> {
    type Item = Result<Block<'a>, Error>;

    // Always inlined: the block measured ahead then stays in registers.
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let block = self.ahead;
        let Some(&fl) = block.get(3) else {
            let (blocks, item) = self.clone().next_slow();
            *self = blocks;
            return item;
        };
        Some(Ok(self.hand_out(block, fl & raw::FLAG_THREAD_ID != 0)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        // A block has at least 5 bytes.
        let most = self.rest.len().div_ceil(5);
        (usize::from(!self.ahead.is_empty()), Some(most))
    }
}

impl core::iter::FusedIterator for Blocks<'_> {}
