//! Block views ([`Block`], [`Instruction`], [`UserBlock`]) with their field iterators,
//! and the lazy block iterator over a slice ([`Blocks`]).

use trace_core::Offset;

use super::decode::{
    DecoderState, Fail, InstrMeta, LOW_BYTES, MARK_FLAGGED, MARK_FULL, MARK_NEW_SESSION,
    MARK_UNFLAGGED, MARK_WORD8, Meta, PREFETCH_AHEAD, prefetch, sum_of_bytes,
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

    /// The 16 bytes of the block from the opcode's start, when the block has that many
    /// (nearly every block: the register values follow the opcode). The opcode is their
    /// first [`Instruction::opcode`]`().len()` bytes: for a copy of a fixed size, which
    /// is quicker than one of the opcode's own.
    #[must_use]
    #[inline]
    pub fn opcode_window(&self) -> Option<&'a [u8; 16]> {
        self.bytes.get(self.opcode_start()..)?.first_chunk::<16>()
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
        self.apply_with(regs.words_mut(), &mut |_| {});
    }

    /// [`Instruction::apply`] to the REGDUMP words `words` (or their first ones: the
    /// changes past them are passed over), calling `on_change` with each change applied.
    #[inline]
    pub(super) fn apply_with(&self, words: &mut [u64], on_change: &mut impl FnMut(RegChange)) {
        let from_positions = self.bytes.get(self.positions_start()..).unwrap_or(&[]);
        let (positions, values) = cut(from_positions, self.reg_count());
        if self.wide() {
            apply_changes::<8>(positions, values, words, on_change);
        } else {
            apply_changes::<4>(positions, values, words, on_change);
        }
    }
}

/// Writes the register changes of a block (`positions`, then `values` of `W` bytes from
/// the start of `values`) into `words`: [`RegChanges`] for one word size, without a
/// branch on it per change (a full dump has 172 or 216). Stops at the first change past
/// `words` (the changes come by increasing word), and calls `on_change` with each one
/// applied.
#[inline]
fn apply_changes<const W: usize>(
    positions: &[u8],
    values: &[u8],
    words: &mut [u64],
    on_change: &mut impl FnMut(RegChange),
) {
    let (values, _) = values.as_chunks::<W>();
    let mut index = 0usize;
    for (position, value) in positions.iter().zip(values) {
        index += usize::from(*position);
        let Some(slot) = words.get_mut(index) else {
            break;
        };
        let value = word_le(value);
        *slot = value;
        on_change(RegChange {
            // Below the REGDUMP's size (at most 216).
            index: index as u16,
            value,
        });
        index += 1;
    }
}

/// A little-endian word of `W` bytes (4 or 8).
#[inline(always)]
fn word_le<const W: usize>(bytes: &[u8; W]) -> u64 {
    let mut le = [0u8; 8];
    if let Some(low) = le.get_mut(..W) {
        low.copy_from_slice(bytes);
    }
    u64::from_le_bytes(le)
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
    /// [`DecoderState::small_step`] (empty: not measured).
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

    /// Hands out the small block `block` (see [`DecoderState::small_step`]) at the start
    /// of `rest`, and measures the one after it.
    #[inline(always)]
    fn hand_out(&mut self, block: &'a [u8], with_tid: bool) -> Block<'a> {
        let at = self.offset().0;
        let rest = self.rest.get(block.len()..).unwrap_or(&[]);
        let meta = self.state.commit_instruction(block, at, with_tid);
        prefetch(block, rest);
        self.rest = rest;
        self.ahead = self.state.small_step(rest).unwrap_or(&[]);
        Block::Instruction(Instruction { meta, bytes: block })
    }

    /// The next block when the small-block path has not measured it: at the start, at the end,
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
                self.ahead = self.state.small_step(self.rest).unwrap_or(&[]);
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

    /// The number of the next block (instructions and user blocks, from 0).
    #[inline]
    pub(super) fn next_block_number(&self) -> u64 {
        self.state.blocks()
    }

    /// The thread of the last instruction block (0 before the first thread id): that of
    /// the next block without a thread id.
    #[inline]
    pub(super) fn thread(&self) -> u32 {
        self.state.thread()
    }

    /// Whether the usual blocks may be walked from here: not past the
    /// end, and no thread-id decision due.
    #[inline(always)]
    pub(super) fn usual_ready(&self) -> bool {
        !self.done && self.state.usual_next()
    }

    /// The bytes from the next block on, and what [`usual_step`] needs to know of the
    /// decoder: whether words are 8 bytes (else 4), and the REGDUMP's words.
    #[inline(always)]
    pub(super) fn usual_start(&self) -> (&'a [u8], bool, u32) {
        (
            self.rest,
            self.state.word() == 8,
            u32::from(self.state.words),
        )
    }

    /// How the usual blocks walked from here are numbered, as the cold path numbers
    /// them.
    #[inline(always)]
    pub(super) fn usual_numbers(&self) -> UsualNumbers {
        UsualNumbers {
            index: self.instructions(),
            block: self.next_block_number(),
            offset: self.offset().0,
            thread: u64::from(self.thread()),
        }
    }

    /// Moves past `count` usual blocks, `len` bytes, walked from here.
    #[inline(always)]
    pub(super) fn passed_usual(&mut self, len: usize, count: u64) {
        if count > 0 {
            self.state.pass_usual(count);
            self.rest = self.rest.get(len..).unwrap_or(&[]);
            self.ahead = self.state.small_step(self.rest).unwrap_or(&[]);
        }
    }

    /// A key of what decoding the blocks from here depends on besides their bytes: the
    /// thread carried to blocks without a thread id and the state that decides whether
    /// a flag-clear block carries thread-id bytes (not the counters). Two iterators with
    /// equal keys read equal bytes as equal blocks (but for their numbers and offsets);
    /// [`Blocks::pass_equal`] relies on it. Exact while the flag alone decides the
    /// thread-id bytes (files of x64dbg with PR #3920, and
    /// [`ThreadIdMode::Flag`](crate::ThreadIdMode::Flag)); a 64-bit hash of the
    /// decision's inputs otherwise.
    #[must_use]
    pub fn key(&self) -> u64 {
        self.state.key()
    }

    /// Passes over the blocks from here whose bytes equal `other`'s, without decoding
    /// their registers or memory (each block is only measured), and returns the
    /// instructions passed. `other` is another trace's bytes from its own position, read
    /// by an iterator with the same [`Blocks::key`]: the blocks passed are then the ones
    /// that iterator reads there too, so both traces have the same steps up to here.
    ///
    /// Stops before the first block that is not equal in both or runs past the end of
    /// either, and before an error (which the next [`Iterator::next`] returns). A block
    /// whose reading depends on the blocks after it (the thread-id decision of files
    /// written before x64dbg PR #3920) passes only when the blocks it looks at are equal
    /// too. Calls `on_thread` with the thread of the first instruction passed and with
    /// each thread switched to after it.
    ///
    /// The bytes are compared a little ahead of the block being measured, in the same
    /// loop: measuring is a serial chain of loads (a block's length comes from its own
    /// bytes) that leaves the CPU idle between them, and the comparison fills that time.
    /// With it, `diff` goes over the equal stretches of two traces at about memory speed.
    pub fn pass_equal(&mut self, other: &[u8], mut on_thread: impl FnMut(u32)) -> u64 {
        if self.done {
            return 0;
        }
        let data = self.data;
        let base = self.offset().0 as usize;
        let x = self.rest;
        let mut eq = EqualPrefix {
            x,
            y: other,
            known: 0,
            ended: false,
        };
        // A copy in registers: the loop calls out (the slow path, `on_thread`).
        let mut st = self.state;
        let (mut at, mut instructions) = (0usize, 0u64);
        let mut told: Option<u32> = None;
        let mut passed = |at: &mut usize, len: usize, count: u64, thread: u32| {
            *at += len;
            instructions += count;
            if count > 0 && told != Some(thread) {
                told = Some(thread);
                on_thread(thread);
            }
        };
        loop {
            if !eq.ended && st.usual_next() {
                let hot = if st.word() == 8 {
                    pass_usual::<8>(x, other, at, eq.known, st.words)
                } else {
                    pass_usual::<4>(x, other, at, eq.known, st.words)
                };
                eq.known = hot.known;
                if hot.differs {
                    // Where exactly: the blocks before it still pass, one at a time.
                    eq.extend(hot.known + COMPARE_CHUNK);
                }
                st.pass_usual(hot.count);
                let len = hot.at - at;
                passed(&mut at, len, hot.count, st.thread());
            }
            // Any other block (a thread switch, a full dump, a user block, a thread-id
            // decision, an error, the end), or a usual one near the end of the bytes
            // known equal: one at a time.
            if eq.known < at + COMPARE_LEAD {
                eq.extend(at + COMPARE_LEAD);
            }
            let rest = x.get(at..).unwrap_or(&[]);
            if let Some(block) = st.small_step(rest) {
                if at + block.len() > eq.known {
                    break;
                }
                let flagged = block
                    .get(3)
                    .is_some_and(|&fl| fl & raw::FLAG_THREAD_ID != 0);
                st.commit_instruction(block, (base + at) as u64, flagged);
                passed(&mut at, block.len(), 1, st.thread());
            } else {
                match step_equal(&mut st, data, base, at, &mut eq) {
                    Some(Meta::Instr(m)) => passed(&mut at, m.len as usize, 1, st.thread()),
                    Some(user) => at += user.len(),
                    None => break,
                }
            }
        }
        self.state = st;
        self.rest = x.get(at..).unwrap_or(&[]);
        self.ahead = self.state.small_step(self.rest).unwrap_or(&[]);
        instructions
    }
}

/// What [`pass_usual`] passed.
struct EqualRun {
    /// Where it stopped (the bytes passed from the start).
    at: usize,
    /// The bytes known equal.
    known: usize,
    /// The instructions passed.
    count: u64,
    /// It stopped at a difference in the [`COMPARE_CHUNK`] at `known`.
    differs: bool,
}

/// The hot loop of [`Blocks::pass_equal`]: from `at`, passes the usual instruction blocks
/// (as [`DecoderState::small_step`] takes them, with words of `W` bytes) that carry no
/// thread id, while they are well inside both `x` and `y`, comparing a chunk of the two
/// a little ahead each time (the first `known` bytes are known equal). Stops before any
/// other block and at a difference in the chunk compared.
///
/// Lean on purpose, in its own function so that its values stay in registers: the length
/// is measured without a branch on the memory flags, the comparison moves on without
/// one, and every other branch goes the same way nearly always, so the CPU runs ahead
/// along the chain of block lengths while the comparison's loads complete.
#[inline(never)]
fn pass_usual<const W: usize>(
    x: &[u8],
    y: &[u8],
    mut at: usize,
    mut known: usize,
    words: u16,
) -> EqualRun {
    // `known` moves on only while below `at + COMPARE_LEAD`, so the comparison stays
    // below `at + COMPARE_LEAD + COMPARE_CHUNK`, before `last`. The chunk compared is at
    // `known` clamped to `last`, a bound that lets the compiler drop the chunks' bounds
    // checks; `known` may start past it (known equal further), and then does not move.
    let n = x.len().min(y.len());
    let (xs, ys) = (x.get(..n).unwrap_or(&[]), y.get(..n).unwrap_or(&[]));
    let last = n.saturating_sub(COMPARE_CHUNK);
    let limit = n.saturating_sub(COMPARE_LEAD + 2 * COMPARE_CHUNK);
    let words = u32::from(words);
    let mut count = 0u64;
    while at < limit {
        let k = known.min(last);
        let (Some(cx), Some(cy)) = (
            xs.get(k..k + COMPARE_CHUNK)
                .and_then(<[u8]>::first_chunk::<COMPARE_CHUNK>),
            ys.get(k..k + COMPARE_CHUNK)
                .and_then(<[u8]>::first_chunk::<COMPARE_CHUNK>),
        ) else {
            break;
        };
        if words_differ(cx, cy) {
            return EqualRun {
                at,
                known,
                count,
                differs: true,
            };
        }
        known += COMPARE_CHUNK * usize::from(known < at + COMPARE_LEAD);
        // The block's bytes as one window of fixed size: a usual block is shorter, and
        // its fields are read at offsets below it without a bounds check each.
        let Some(w) = x.get(at..).and_then(<[u8]>::first_chunk::<USUAL_WINDOW>) else {
            break;
        };
        let Some((end, usual)) = usual_end::<W>(w, at, words) else {
            break;
        };
        if !usual | (end > known) {
            break;
        }
        at = end;
        count += 1;
    }
    EqualRun {
        at,
        known,
        count,
        differs: false,
    }
}

/// Walks the usual blocks (as
/// [`DecoderState::small_step`] takes them, with words of `W` bytes) from the start of
/// `x` while they lie well inside it and `on_block` says to go on, and returns the bytes
/// and the instructions passed. Stops before any other block (a thread switch, a full
/// dump, a user block, an error), near the end of `x`, and before the first block for
/// which `on_block` says false. `on_block` sees each block's fields (its numbers, offset
/// and thread are not filled in: the caller knows them from the count).
///
/// [`pass_usual`] without the comparison: the measuring chain, with no branch on a
/// block's fields but the ones that end the walk, so that it runs at the speed of that
/// chain of loads; `on_block`'s work is off the chain, and the CPU overlaps it.
#[inline(always)]
pub(super) fn walk_usual<'a, const W: usize>(
    x: &'a [u8],
    words: u16,
    mut on_block: impl FnMut(&Instruction<'a>) -> bool,
) -> (usize, u64) {
    let words = u32::from(words);
    let (mut at, mut count) = (0usize, 0u64);
    let mut touched = 0u8;
    while let Some((ins, _)) = usual_step::<W>(x, at, words, &mut touched) {
        if !on_block(&ins) {
            break;
        }
        at += ins.bytes.len();
        count += 1;
    }
    core::hint::black_box(touched);
    (at, count)
}

/// The usual instruction block without a thread id at `at` of `x` (as
/// [`DecoderState::small_step`] takes them, with words of `W` bytes and `words` REGDUMP
/// words), unnumbered (see [`walk_usual`]), with the [`USUAL_WINDOW`] bytes from its
/// start (its fields lie inside them); `None` for any other block and near the end of
/// `x`, where a block may not be whole.
///
/// Each step also loads one byte [`PREFETCH_AHEAD`] bytes further on into `touched` (in
/// the index pass, about a quarter faster on a 64 MiB trace than without): the hardware
/// prefetcher does not cross pages, so without it the chain's first load in each page
/// waits for memory. The caller hands `touched` to [`core::hint::black_box`] at the end.
#[inline(always)]
pub(super) fn usual_step<'a, const W: usize>(
    x: &'a [u8],
    at: usize,
    words: u32,
    touched: &mut u8,
) -> Option<(Instruction<'a>, &'a [u8; USUAL_WINDOW])> {
    let rest = x.get(at..).filter(|r| r.len() > USUAL_WINDOW)?;
    let w = rest.first_chunk::<USUAL_WINDOW>()?;
    *touched ^= rest.get(PREFETCH_AHEAD).copied().unwrap_or(0);
    let (end, usual) = usual_end::<W>(w, at, words)?;
    let len = end - at;
    let bytes = rest.get(..len).filter(|_| usual)?;
    let [_, n, m, fl] = [w[0], w[1], w[2], w[3]];
    let wide = if W == 8 { MARK_WORD8 } else { 0 };
    let ins = Instruction {
        meta: InstrMeta {
            index: 0,
            block: 0,
            offset: 0,
            len: len as u64,
            packed: u64::from(n) << 32 | u64::from(m) << 40 | u64::from(fl) << 48 | wide,
        },
        bytes,
    };
    Some((ins, w))
}

/// The numbers of the first instruction of a walk over the usual blocks
/// ([`Blocks::usual_numbers`]), and its thread: that of every block of the walk, which
/// carry no thread id.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct UsualNumbers {
    pub(super) index: u64,
    block: u64,
    offset: u64,
    thread: u64,
}

impl UsualNumbers {
    /// Numbers `ins`, the walk's instruction `k`, `at` bytes after its first.
    #[inline(always)]
    pub(super) fn number(&self, ins: &mut Instruction<'_>, k: u64, at: u64) {
        ins.meta.index = self.index + k;
        ins.meta.block = self.block + k;
        ins.meta.offset = self.offset + at;
        ins.meta.packed |= self.thread;
    }
}

/// Hands on the register changes of the usual block whose first bytes are `w` (as
/// [`usual_step`] took it, with words of `W` bytes) to `on_change`, by increasing word.
///
/// Such a block has at most 8 changes, so its positions are one word and its values lie
/// in the window: they are read without a bounds check each.
#[inline(always)]
pub(super) fn usual_changes<const W: usize>(
    w: &[u8; USUAL_WINDOW],
    mut on_change: impl FnMut(RegChange),
) {
    let n = usize::from(w[1]).min(8);
    let at = 4 + usize::from(w[3] & raw::OPCODE_LEN_MASK);
    let word = |at: usize| {
        w.get(at..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map_or(0, |b| u64::from_le_bytes(*b))
    };
    let mut positions = word(at);
    // At most 8 values of at most 8 bytes, from at most 4 + 15 + 8 bytes in.
    let Some(values) = w.get(at + n..).and_then(<[u8]>::first_chunk::<64>) else {
        return;
    };
    let (values, _) = values.as_chunks::<W>();
    let mut index = 0u16;
    for value in values.iter().take(n) {
        index = index.wrapping_add(u16::from(positions as u8));
        positions >>= 8;
        on_change(RegChange {
            index,
            value: word_le(value),
        });
        index = index.wrapping_add(1);
    }
}

/// Measures the block whose first bytes are `w`, at `at`, as a usual instruction block
/// without a thread id (as [`DecoderState::small_step`] takes them, with words of `W`
/// bytes and `words` REGDUMP words): its end (`at` + its length) and whether it is one.
/// `None` when it has more than 8 changes or accesses (not a usual block either).
///
/// The ends are the fast paths' critical path, a chain of loads (a block's length comes
/// from its own bytes): after the load of the memory flags, one product gives W × the
/// accesses without a new value, subtracted from the most the block can hold. The other
/// checks are off that path, and the caller takes one branch on them.
#[inline(always)]
fn usual_end<const W: usize>(
    w: &[u8; USUAL_WINDOW],
    at: usize,
    words: u32,
) -> Option<(usize, bool)> {
    let [ty, n, m, fl] = [w[0], w[1], w[2], w[3]];
    let (nn, mm) = (usize::from(n), usize::from(m));
    // At most 8 changes and 8 accesses: their positions and flags are one word each.
    if nn > 8 || mm > 8 {
        return None;
    }
    let op = usize::from(fl & raw::OPCODE_LEN_MASK);
    let pos = 4 + op;
    let mf = pos + nn * (1 + W);
    let word = |at: usize| {
        w.get(at..)
            .and_then(<[u8]>::first_chunk::<8>)
            .map_or(0, |b| u64::from_le_bytes(*b))
    };
    let positions = word(pos) & LOW_BYTES.get(nn).copied().unwrap_or(0);
    let unchanged = word(mf) & LOW_ONES.get(mm).copied().unwrap_or(0);
    // W in each byte (bit 3, or bit 2 for W = 4): the product's top byte is W × the
    // bytes' bits 0 added up.
    let w_in_bytes = ONES << W.trailing_zeros();
    let end = (at + mf + mm * (1 + 3 * W)) - (unchanged.wrapping_mul(w_in_bytes) >> 56) as usize;
    let usual = (ty == raw::BLOCK_INSTRUCTION)
        & (fl & raw::FLAG_THREAD_ID == 0)
        & (op != 0)
        & (sum_of_bytes(positions) + u32::from(n) <= words);
    Some((end, usual))
}

/// `0x01` in every byte.
pub(super) const ONES: u64 = 0x0101_0101_0101_0101;

/// `LOW_ONES[n]`: bit 0 of each of the low `n` bytes of a word.
const LOW_ONES: [u64; 9] = [
    0,
    0x01,
    0x0101,
    0x01_0101,
    0x0101_0101,
    0x01_0101_0101,
    0x0101_0101_0101,
    0x01_0101_0101_0101,
    0x0101_0101_0101_0101,
];

/// The bytes [`pass_usual`] reads a block's fields from: those of a usual block without a
/// thread id end within 4 + 15 + 8 × 9 + 8 = 99 (its memory flags read as one word).
const USUAL_WINDOW: usize = 128;

/// Whether two chunks differ, compared word by word without a branch (array equality
/// would call `memcmp`).
#[inline(always)]
fn words_differ(x: &[u8; COMPARE_CHUNK], y: &[u8; COMPARE_CHUNK]) -> bool {
    let (xs, _) = x.as_chunks::<8>();
    let (ys, _) = y.as_chunks::<8>();
    xs.iter().zip(ys).fold(0u64, |d, (a, b)| {
        d | (u64::from_ne_bytes(*a) ^ u64::from_ne_bytes(*b))
    }) != 0
}

/// How far [`Blocks::pass_equal`] compares ahead of the block it measures: far enough
/// that the usual block is known equal when it is measured, near enough to be in the
/// first-level cache then.
const COMPARE_LEAD: usize = 1024;

/// The bytes [`EqualPrefix::chunk`] compares at once.
const COMPARE_CHUNK: usize = 64;

/// The equal prefix of two byte strings, measured as far as asked.
struct EqualPrefix<'x> {
    x: &'x [u8],
    y: &'x [u8],
    /// The first `known` bytes are equal.
    known: usize,
    /// `known` is where they differ, or the end of the shorter.
    ended: bool,
}

impl EqualPrefix<'_> {
    /// Compares on to `to` (or the first difference, or the end); returns `known`.
    #[inline(never)]
    fn extend(&mut self, to: usize) -> usize {
        if self.ended || to <= self.known {
            return self.known;
        }
        let end = to.min(self.x.len()).min(self.y.len());
        let k = self.known;
        let (x, y) = (
            self.x.get(k..end).unwrap_or(&[]),
            self.y.get(k..end).unwrap_or(&[]),
        );
        if x == y {
            self.known = end;
            self.ended = end < to;
        } else {
            let mut same = 0;
            for (cx, cy) in x.chunks(COMPARE_CHUNK).zip(y.chunks(COMPARE_CHUNK)) {
                if cx != cy {
                    same += cx.iter().zip(cy).take_while(|(p, q)| p == q).count();
                    break;
                }
                same += cx.len();
            }
            self.known = k + same;
            self.ended = true;
        }
        self.known
    }
}

/// Decodes the block at `data[base + at..]` for [`Blocks::pass_equal`] when it is not the
/// usual one (a full dump, a user block, a thread-id decision, an error, the end): with
/// [`DecoderState::step`] over the equal bytes only, as a stream would with them in its
/// buffer. A stream waits for more rather than decide without the bytes a decision looks
/// at, so the block passes only when all it looks at is equal on both sides; the
/// comparison goes on as far as that needs. `None`: the block does not pass.
#[inline(never)]
fn step_equal(
    st: &mut DecoderState,
    data: &[u8],
    base: usize,
    at: usize,
    eq: &mut EqualPrefix<'_>,
) -> Option<Meta> {
    let pos = base + at;
    loop {
        if eq.known <= at {
            eq.extend(at + COMPARE_LEAD);
        }
        let seen = data.get(..base + eq.known)?;
        if pos >= seen.len() {
            return None;
        }
        match st.step(seen, pos, 0, false) {
            // The data cut after the block: `commit` then loads nothing ahead (the
            // comparison brings the bytes in).
            Ok(step) => return Some(st.commit(data.get(..pos + step.len)?, pos, 0, step)),
            Err(Fail::NeedMore(need)) if !eq.ended && need > seen.len() => {
                eq.extend(need - base + COMPARE_LEAD);
            }
            Err(_) => return None,
        }
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
