//! The block decoder: [`DecoderState`] checks and measures one block at a time, for the
//! slice iterator, the index and the streaming reader alike.

use trace_core::{Offset, UnexpectedEof};

use super::blocks::{Block, Instruction, UserBlock};
use super::{ReadOptions, ThreadIdMode};
use crate::Error;
use crate::header::Arch;
use crate::{limits, raw};

/// How many following blocks a trial parse looks at to choose a thread-id reading.
const PROBE_BLOCKS: u32 = 16;

/// What the decoder learns about an instruction block (no borrow, so the streaming reader
/// can refill its buffer between decoding and handing the block out).
///
/// Whole `u64` fields only: the small ones are packed into one word, so the hot loop of
/// the block iterator stores and loads the struct a word at a time (the compiler copies
/// the `Block` enum around it through memory, and a wide load of bytes that narrower
/// stores wrote stalls the CPU for a dozen cycles).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct InstrMeta {
    pub(super) index: u64,
    pub(super) block: u64,
    pub(super) offset: u64,
    /// Length of the block in bytes.
    pub(super) len: u64,
    /// The thread (bits 0-31), register changes (32-39), memory accesses (40-47), flags
    /// byte (48-55) and `MARK_*` bits (56-63).
    pub(super) packed: u64,
}

/// [`InstrMeta::packed`]: the thread-id bytes are there with the flag.
pub(super) const MARK_FLAGGED: u64 = 1 << 56;
/// [`InstrMeta::packed`]: the thread-id bytes are there without the flag.
pub(super) const MARK_UNFLAGGED: u64 = 2 << 56;
/// [`InstrMeta::packed`]: a full dump.
pub(super) const MARK_FULL: u64 = 4 << 56;
/// [`InstrMeta::packed`]: a full dump that starts a new session.
pub(super) const MARK_NEW_SESSION: u64 = 8 << 56;
/// [`InstrMeta::packed`]: 8-byte words (x64), else 4 (x86).
pub(super) const MARK_WORD8: u64 = 16 << 56;

/// `bit` if `on`, else 0.
#[inline(always)]
fn mark(on: bool, bit: u64) -> u64 {
    if on { bit } else { 0 }
}

impl InstrMeta {
    #[inline(always)]
    pub(super) fn thread(&self) -> u32 {
        self.packed as u32
    }

    #[inline(always)]
    pub(super) fn regs(&self) -> u8 {
        (self.packed >> 32) as u8
    }

    #[inline(always)]
    pub(super) fn mems(&self) -> u8 {
        (self.packed >> 40) as u8
    }

    #[inline(always)]
    pub(super) fn flags(&self) -> u8 {
        (self.packed >> 48) as u8
    }

    #[inline(always)]
    pub(super) fn word(&self) -> usize {
        if self.packed & MARK_WORD8 != 0 { 8 } else { 4 }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Meta {
    Instr(InstrMeta),
    User {
        block: u64,
        offset: u64,
        block_type: u8,
        len: usize,
    },
}

impl Meta {
    #[inline]
    pub(super) fn len(&self) -> usize {
        match self {
            Meta::Instr(m) => m.len as usize,
            Meta::User { len, .. } => *len,
        }
    }

    /// The block over `bytes`, which start at the block and hold all of it.
    #[inline]
    pub(super) fn materialize<'a>(&self, bytes: &'a [u8]) -> Block<'a> {
        let whole = bytes.get(..self.len()).unwrap_or(bytes);
        match *self {
            Meta::Instr(meta) => Block::Instruction(Instruction { meta, bytes: whole }),
            Meta::User {
                block,
                offset,
                block_type,
                ..
            } => Block::User(UserBlock {
                block,
                offset: Offset(offset),
                block_type,
                payload: whole.get(5..).unwrap_or(&[]),
            }),
        }
    }
}

/// `LOW_BYTES[n]` keeps the low `n` bytes of a word.
pub(super) const LOW_BYTES: [u64; 9] = [
    0,
    0xff,
    0xffff,
    0xff_ffff,
    0xffff_ffff,
    0xff_ffff_ffff,
    0xffff_ffff_ffff,
    0xff_ffff_ffff_ffff,
    u64::MAX,
];

/// The low `n` bytes of the 8 bytes at `rest[start..]`, as a little-endian word, when
/// `n` is at most 8 and 8 bytes are there.
#[inline(always)]
fn low_bytes(rest: &[u8], start: usize, n: usize) -> Option<u64> {
    let keep = *LOW_BYTES.get(n)?;
    Some(u64::from_le_bytes(*rest.get(start..)?.first_chunk::<8>()?) & keep)
}

/// The sum of the bytes of `x`.
#[inline(always)]
pub(super) fn sum_of_bytes(x: u64) -> u32 {
    const LOW: u64 = 0x00ff_00ff_00ff_00ff;
    let pairs = (x & LOW) + ((x >> 8) & LOW);
    (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as u32
}

/// How many bytes of `x` have bit 0 set.
#[inline(always)]
pub(super) fn bit0_count(x: u64) -> usize {
    // At most 8: the sum fits the top byte of the product.
    ((x & 0x0101_0101_0101_0101).wrapping_mul(0x0101_0101_0101_0101) >> 56) as usize
}

/// How far ahead of the current block [`prefetch`] touches the input.
pub(super) const PREFETCH_AHEAD: usize = 4096;

/// [`prefetch`] touches the input a window of this many bytes at a time.
const PREFETCH_WINDOW: usize = 512;

/// Cache line size.
const LINE: usize = 64;

/// When the block `block` ends in a new [`PREFETCH_WINDOW`] (of memory addresses), loads
/// one byte of every cache line of the window [`PREFETCH_AHEAD`] bytes further on in
/// `rest` (the data after the block) and discards them. Decoding is a chain of dependent
/// loads (a block's length comes from its own bytes), which the CPU cannot run ahead of;
/// these loads depend on nothing, so they bring the cache lines in early, like prefetch
/// instructions (which would need `unsafe`). A whole window's loads go out together, so
/// their misses overlap.
#[inline(always)]
pub(super) fn prefetch(block: &[u8], rest: &[u8]) {
    let start = block.as_ptr() as usize;
    let end = start + block.len();
    if end / PREFETCH_WINDOW == start / PREFETCH_WINDOW {
        return;
    }
    let skip = PREFETCH_AHEAD - end % PREFETCH_WINDOW;
    if let Some(ahead) = rest.get(skip..skip + PREFETCH_WINDOW) {
        let mut x = 0u8;
        for line in ahead.iter().step_by(LINE) {
            x ^= *line;
        }
        core::hint::black_box(x);
    }
}

/// The block of `fixed` bytes plus `changed` new values of `W` bytes at the start of
/// `rest`. Not inlined, so that the compiler keeps the branch in
/// [`DecoderState::small_measure_w`] rather than making it arithmetic.
#[inline(never)]
fn with_new_values<const W: usize>(rest: &[u8], fixed: usize, changed: usize) -> Option<&[u8]> {
    rest.get(..fixed + changed * W)
}

/// Whether the block at `data[pos..]` is a user block bigger than
/// [`limits::MAX_STREAM_USER_BLOCK`]. Trial parses take such a block as implausible, for
/// slices and streams alike (a stream would not wait for it), so that both decide the
/// same.
fn oversized_user_block(data: &[u8], pos: usize, complete: bool) -> Result<bool, Fail> {
    if data.get(pos).is_none_or(|&ty| ty < raw::BLOCK_USER_MIN) {
        return Ok(false);
    }
    match data.get(pos + 1..).and_then(<[u8]>::first_chunk::<4>) {
        Some(len) => Ok(u32::from_le_bytes(*len) as usize > limits::MAX_STREAM_USER_BLOCK),
        None if complete => Ok(false),
        None => Err(Fail::NeedMore(pos + 5)),
    }
}

/// Whether a full dump at instruction `instruction` starts a new recording session: one
/// that is not the first instruction and not at a multiple of 512 instructions of the
/// session that started at `session_start`. A plain function, not a method: a pointer to
/// the decoder state passed to a call that is not inlined would keep the hot loop from
/// holding the state in registers.
#[cold]
fn starts_session(instruction: u64, session_start: u64) -> bool {
    instruction > 0
        && !(instruction - session_start).is_multiple_of(u64::from(raw::FULL_DUMP_INTERVAL))
}

/// Why a decode step stopped.
#[derive(Debug)]
pub(super) enum Fail {
    /// The data ends before the decision could be made and more may come (streams).
    NeedMore(usize),
    /// A real error.
    Error(Error),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Error(e)
    }
}

/// A block checked and measured by [`DecoderState::step`], not yet taken into the state.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    /// Length in bytes.
    pub(super) len: usize,
    /// A user block.
    user: bool,
    /// The instruction block carries thread-id bytes.
    with_tid: bool,
    /// The writer dialect known after this block.
    dialect: Dialect,
}

/// The result of measuring an instruction block under one thread-id reading.
enum Measure {
    /// Complete and valid: total length.
    Ok(usize),
    /// The data holds fewer bytes than this.
    Short(usize),
    /// Invalid (the offset and error).
    Bad(Error),
}

/// The block decoder's state between blocks: what the thread-id rule and the counters need.
/// Small and `Copy`, so the index keeps one per full dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DecoderState {
    word: u8,
    pub(super) words: u16,
    mode: ThreadIdMode,
    thread: u32,
    prev_flag: bool,
    prev_full: bool,
    pub(super) instructions: u64,
    /// User blocks so far (the block number is this plus `instructions`).
    user_blocks: u64,
    /// The instruction number at which the current recording session started.
    session_start: u64,
    pub(super) quirks: u64,
    /// The last few distinct thread ids (0 = empty slot).
    recent: [u32; 4],
    /// Which x64dbg thread-id behaviour the file shows, once known.
    dialect: Dialect,
    /// Decoding ahead inside a trial parse (no nested trials).
    probing: bool,
}

/// The thread-id behaviour of the writer of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dialect {
    /// Not seen yet.
    Unknown,
    /// x64dbg with PR #3920: flag and bytes together.
    Fixed,
    /// x64dbg before PR #3920: bytes without the flag after a switch.
    Legacy,
}

impl DecoderState {
    #[inline]
    pub(super) fn new(arch: Arch, opts: ReadOptions) -> DecoderState {
        DecoderState {
            word: arch.word_size() as u8,
            words: arch.regdump_words(),
            mode: opts.thread_ids,
            thread: 0,
            prev_flag: false,
            prev_full: false,
            instructions: 0,
            user_blocks: 0,
            session_start: 0,
            quirks: 0,
            recent: [0; 4],
            dialect: Dialect::Unknown,
            probing: false,
        }
    }

    /// The size of [`DecoderState::write_to`].
    pub(super) const BYTES: usize = 53;

    /// The state as bytes, for an index saved to a file; word size and mode are the
    /// index's (given back to [`DecoderState::from_bytes`]), and a saved state is never
    /// inside a trial parse.
    pub(super) fn write_to(self, out: &mut Vec<u8>) {
        for x in [
            self.instructions,
            self.user_blocks,
            self.session_start,
            self.quirks,
        ] {
            out.extend_from_slice(&x.to_le_bytes());
        }
        out.extend_from_slice(&self.thread.to_le_bytes());
        for t in self.recent {
            out.extend_from_slice(&t.to_le_bytes());
        }
        let dialect = match self.dialect {
            Dialect::Unknown => 0,
            Dialect::Fixed => 1,
            Dialect::Legacy => 2,
        };
        out.push(u8::from(self.prev_flag) | u8::from(self.prev_full) << 1 | dialect << 2);
    }

    /// The state saved by [`DecoderState::write_to`], or `None` when `bytes` cannot be one.
    pub(super) fn from_bytes(arch: Arch, opts: ReadOptions, bytes: &[u8]) -> Option<Self> {
        let bytes: &[u8; Self::BYTES] = bytes.try_into().ok()?;
        let (words, rest) = bytes.split_first_chunk::<32>()?;
        let word = |i: usize| {
            let b = words.get(i * 8..i * 8 + 8)?;
            Some(u64::from_le_bytes(b.try_into().ok()?))
        };
        let u32_at = |i: usize| {
            let b = rest.get(i * 4..i * 4 + 4)?;
            Some(u32::from_le_bytes(b.try_into().ok()?))
        };
        let flags = *rest.get(20)?;
        let dialect = match flags >> 2 {
            0 => Dialect::Unknown,
            1 => Dialect::Fixed,
            2 => Dialect::Legacy,
            _ => return None,
        };
        let mut st = DecoderState::new(arch, opts);
        st.instructions = word(0)?;
        st.user_blocks = word(1)?;
        st.session_start = word(2)?;
        st.quirks = word(3)?;
        st.thread = u32_at(0)?;
        st.recent = [u32_at(1)?, u32_at(2)?, u32_at(3)?, u32_at(4)?];
        st.prev_flag = flags & 1 != 0;
        st.prev_full = flags & 2 != 0;
        st.dialect = dialect;
        // Counters that the block numbers are sums of must not overflow later.
        st.instructions.checked_add(st.user_blocks)?;
        (st.session_start <= st.instructions).then_some(st)
    }

    /// The number of the next block (instructions and user blocks, from 0).
    #[inline(always)]
    pub(super) fn blocks(&self) -> u64 {
        self.instructions + self.user_blocks
    }

    /// Whether the flag alone says if a block carries thread-id bytes: in
    /// [`ThreadIdMode::Flag`], or once the file shows the fixed writer.
    #[inline(always)]
    fn trust_flag(&self) -> bool {
        self.mode == ThreadIdMode::Flag || self.dialect == Dialect::Fixed
    }

    /// What decoding the next blocks depends on besides their bytes and the counters, as
    /// a key (see [`Blocks::key`](super::Blocks::key)): the thread carried to blocks
    /// without thread-id bytes, the word size and whether the flag alone decides the
    /// thread-id bytes; when it does not, also what the decision looks at (the previous
    /// block's flag and kind, the dialect, the recent threads), hashed.
    pub(super) fn key(&self) -> u64 {
        let trust = self.trust_flag();
        let exact = u64::from(self.thread) | u64::from(self.word) << 32 | u64::from(trust) << 40;
        if trust {
            return exact;
        }
        let dialect = match self.dialect {
            Dialect::Unknown => 0u64,
            Dialect::Fixed => 1,
            Dialect::Legacy => 2,
        };
        let mode = match self.mode {
            ThreadIdMode::Recover => 0u64,
            ThreadIdMode::Flag => 1,
        };
        let fields = [
            exact,
            u64::from(self.prev_flag) | u64::from(self.prev_full) << 1 | dialect << 2 | mode << 4,
            u64::from(self.recent[0]) | u64::from(self.recent[1]) << 32,
            u64::from(self.recent[2]) | u64::from(self.recent[3]) << 32,
        ];
        // SplitMix64's finaliser over the fields; bit 40 stays clear, so no such key
        // equals a trusting one.
        let mixed = fields.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &f| {
            let mut z = (h ^ f).wrapping_add(0x9e37_79b9_7f4a_7c15);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        });
        mixed & !(1 << 40)
    }

    /// The thread of the last instruction block (0 before the first thread id).
    #[inline(always)]
    pub(super) fn thread(&self) -> u32 {
        self.thread
    }

    /// Whether an instruction block came before.
    #[inline(always)]
    fn have_prev(&self) -> bool {
        self.instructions > 0
    }

    /// The instruction block at the start of `rest`, whose header is `[n, m, fl]`, if it
    /// is complete, valid and small: at most 8 register changes and 8 memory accesses,
    /// not at the very end of the data (`None` otherwise: [`DecoderState::measure`]
    /// handles every block).
    #[inline(always)]
    fn small_measure<'d>(
        &self,
        rest: &'d [u8],
        header: [u8; 3],
        with_tid: bool,
    ) -> Option<&'d [u8]> {
        // With the word size a constant, the layout arithmetic is shifts and adds.
        if self.word == 8 {
            self.small_measure_w::<8>(rest, header, with_tid)
        } else {
            self.small_measure_w::<4>(rest, header, with_tid)
        }
    }

    /// [`DecoderState::small_measure`] for words of `W` bytes. Plain integers and few
    /// branches: this is the hot, serial part of decoding.
    #[inline(always)]
    fn small_measure_w<'d, const W: usize>(
        &self,
        rest: &'d [u8],
        [n, m, fl]: [u8; 3],
        with_tid: bool,
    ) -> Option<&'d [u8]> {
        let op = usize::from(fl & raw::OPCODE_LEN_MASK);
        let pos_start = 4 + usize::from(with_tid) * 4 + op;
        let mf_start = pos_start + usize::from(n) * (1 + W);
        let fixed = mf_start + usize::from(m) * (1 + 2 * W);
        let counts_ok = u16::from(n) <= self.words && m <= raw::MAX_MEMORY_ACCESSES && op != 0;
        if !counts_ok || rest.len() < fixed {
            return None;
        }
        // Positions are relative: the last absolute index is their sum plus n - 1, and the
        // indices strictly increase, so checking the last one checks them all.
        let positions = low_bytes(rest, pos_start, usize::from(n))?;
        if sum_of_bytes(positions) + u32::from(n) > u32::from(self.words) {
            return None;
        }
        let changed = usize::from(m) - bit0_count(low_bytes(rest, mf_start, usize::from(m))?);
        if changed == 0 {
            // A branch, not arithmetic: most blocks write no memory, and the CPU predicts
            // the branch and goes on to the next block from `fixed` without waiting for
            // the memory flags to load, which shortens the serial chain by a third.
            return rest.get(..fixed);
        }
        with_new_values::<W>(rest, fixed, changed)
    }

    /// The word size in bytes.
    #[inline(always)]
    pub(super) fn word(&self) -> u8 {
        self.word
    }

    /// Whether a usual block may come next: no thread-id decision is due.
    #[inline(always)]
    pub(super) fn usual_next(&self) -> bool {
        !self.prev_flag || self.trust_flag()
    }

    /// Moves the state past `count` usual blocks (what
    /// [`DecoderState::commit_instruction`] does for each).
    #[inline(always)]
    pub(super) fn pass_usual(&mut self, count: u64) {
        if count > 0 {
            self.prev_flag = false;
            self.prev_full = false;
            self.instructions += count;
        }
    }

    /// Measures the instruction block at the start of `rest` (file offset `at`), or says
    /// why it is short or invalid.
    #[inline(always)]
    fn measure(&self, rest: &[u8], at: u64, with_tid: bool) -> Measure {
        if let Some(&[_, n, m, fl]) = rest.first_chunk::<4>()
            && let Some(block) = self.small_measure(rest, [n, m, fl], with_tid)
        {
            return Measure::Ok(block.len());
        }
        self.measure_any(rest, at, with_tid)
    }

    /// [`DecoderState::measure`] for any block: full dumps, many memory accesses, blocks
    /// at the end of the data, short or invalid.
    #[inline(never)]
    fn measure_any(&self, rest: &[u8], at: u64, with_tid: bool) -> Measure {
        let Some(&[_, n, m, fl]) = rest.first_chunk::<4>() else {
            return Measure::Short(4);
        };
        if u16::from(n) > self.words
            || m > raw::MAX_MEMORY_ACCESSES
            || fl & raw::OPCODE_LEN_MASK == 0
        {
            return self.bad_counts(at, n, m);
        }
        let w = usize::from(self.word);
        let n = usize::from(n);
        let m = usize::from(m);
        let pos_start = 4 + usize::from(with_tid) * 4 + usize::from(fl & raw::OPCODE_LEN_MASK);
        let mf_start = pos_start + n * (1 + w);
        let fixed = mf_start + m * (1 + 2 * w);
        let (Some(positions), Some(flags)) = (
            rest.get(pos_start..pos_start + n),
            rest.get(mf_start..mf_start + m),
        ) else {
            return Measure::Short(fixed);
        };
        if rest.len() < fixed {
            return Measure::Short(fixed);
        }
        let sum: u32 = positions.iter().map(|&p| u32::from(p)).sum();
        if n > 0 && sum + n as u32 > u32::from(self.words) {
            return Measure::Bad(self.out_of_range(positions, at + pos_start as u64));
        }
        let changed = flags
            .iter()
            .filter(|&&f| f & raw::MEM_UNCHANGED == 0)
            .count();
        let total = fixed + changed * w;
        if rest.len() < total {
            return Measure::Short(total);
        }
        Measure::Ok(total)
    }

    #[cold]
    fn bad_counts(&self, at: u64, n: u8, m: u8) -> Measure {
        Measure::Bad(if u16::from(n) > self.words {
            Error::TooManyRegisters {
                offset: Offset(at + 1),
                block: self.blocks(),
                found: n,
                limit: self.words,
            }
        } else if m > raw::MAX_MEMORY_ACCESSES {
            Error::TooManyMemoryAccesses {
                offset: Offset(at + 2),
                block: self.blocks(),
                found: m,
            }
        } else {
            Error::EmptyOpcode {
                offset: Offset(at + 3),
                block: self.blocks(),
            }
        })
    }

    #[cold]
    fn out_of_range(&self, positions: &[u8], at: u64) -> Error {
        let mut next = 0u32;
        for (i, &p) in positions.iter().enumerate() {
            let index = next + u32::from(p);
            if index >= u32::from(self.words) {
                return Error::RegisterOutOfRange {
                    offset: Offset(at + i as u64),
                    block: self.blocks(),
                    index,
                    limit: self.words,
                };
            }
            next = index + 1;
        }
        Error::RegisterOutOfRange {
            offset: Offset(at),
            block: self.blocks(),
            index: next,
            limit: self.words,
        }
    }

    /// Decodes up to [`PROBE_BLOCKS`] blocks from `pos` with a copy of the state set to
    /// `dialect`, and counts those that decode (reaching the end of complete data counts as
    /// all of them).
    fn probe(
        &self,
        data: &[u8],
        mut pos: usize,
        complete: bool,
        dialect: Dialect,
    ) -> Result<u32, Fail> {
        let mut st = *self;
        st.dialect = dialect;
        st.probing = true;
        let mut count = 0;
        while count < PROBE_BLOCKS {
            if pos >= data.len() {
                return if complete {
                    Ok(PROBE_BLOCKS)
                } else {
                    Err(Fail::NeedMore(pos + 4))
                };
            }
            if oversized_user_block(data, pos, complete)? {
                return Ok(count);
            }
            match st.decode(data, pos, 0, complete) {
                Ok(meta) => {
                    if let Meta::Instr(m) = meta
                        && (m.flags() & raw::FLAGS_RESERVED != 0)
                    {
                        // Real writers leave the reserved bits clear.
                        return Ok(count);
                    }
                    pos += meta.len();
                    count += 1;
                }
                Err(Fail::NeedMore(n)) => return Err(Fail::NeedMore(n)),
                Err(Fail::Error(_)) => return Ok(count),
            }
        }
        Ok(count)
    }

    /// The thread id of the first flagged block from `pos` on (walking by the flags: no
    /// block before it can carry unflagged bytes), `None` if there is none or it is a full
    /// dump (which may start another recording session).
    fn next_flagged_tid(
        &self,
        data: &[u8],
        mut pos: usize,
        complete: bool,
    ) -> Result<Option<u32>, Fail> {
        loop {
            let rest = data.get(pos..).unwrap_or(&[]);
            let Some(&ty) = rest.first() else {
                return if complete {
                    Ok(None)
                } else {
                    Err(Fail::NeedMore(pos + 4))
                };
            };
            let len = if ty >= raw::BLOCK_USER_MIN {
                if oversized_user_block(data, pos, complete)? {
                    return Ok(None);
                }
                match rest.get(1..5).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
                    Some(b) if (u32::from_le_bytes(b) as usize) < rest.len().saturating_sub(5) => {
                        u32::from_le_bytes(b) as usize + 5
                    }
                    // A stream waits for the rest of the block, as a slice would have it.
                    Some(b) if !complete => {
                        return Err(Fail::NeedMore(pos + u32::from_le_bytes(b) as usize + 6));
                    }
                    _ => return Ok(None),
                }
            } else if ty == raw::BLOCK_INSTRUCTION {
                if rest.get(3).is_some_and(|f| f & raw::FLAG_THREAD_ID != 0) {
                    if rest.get(1).is_some_and(|&n| u16::from(n) == self.words) {
                        // A full dump may start a new recording session: no evidence.
                        return Ok(None);
                    }
                    return match rest.get(4..8).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
                        Some(b) => Ok(Some(u32::from_le_bytes(b))),
                        None if complete => Ok(None),
                        None => Err(Fail::NeedMore(pos + 8)),
                    };
                }
                match self.measure(rest, 0, false) {
                    Measure::Ok(n) => n,
                    Measure::Short(n) if !complete => return Err(Fail::NeedMore(pos + n)),
                    _ => return Ok(None),
                }
            } else {
                return Ok(None);
            };
            pos += len;
        }
    }

    /// Breaks a tie between the two readings of a flag-clear block whose 4 bytes after the
    /// head would be thread `tid`, continuing at `next`: the next flagged block carries the
    /// id of this block's thread (the last block of a thread's run is always flagged), so it
    /// says which reading is right; failing that, whether `tid` looks like a thread id.
    ///
    /// Failing that, the reading with the bytes must look like a thread switch: a plausible
    /// thread id, and the stack pointer (word 4) among the register changes (x64dbg lists
    /// every word that differs between the two threads' states, and threads never share a
    /// stack).
    fn tie_break(
        &self,
        data: &[u8],
        pos: usize,
        next: usize,
        complete: bool,
        tid: u32,
    ) -> Result<bool, Fail> {
        Ok(match self.next_flagged_tid(data, next, complete)? {
            Some(t) if t == tid => true,
            Some(t) if t == self.thread => false,
            _ => {
                self.plausible_tid(tid) && self.lists_stack_pointer(data.get(pos..).unwrap_or(&[]))
            }
        })
    }

    /// Whether the instruction block at the start of `rest`, read with thread-id bytes,
    /// lists word 4 (rsp/esp).
    fn lists_stack_pointer(&self, rest: &[u8]) -> bool {
        let (Some(&n), Some(&fl)) = (rest.get(1), rest.get(3)) else {
            return false;
        };
        let start = 8 + usize::from(fl & raw::OPCODE_LEN_MASK);
        let Some(positions) = rest.get(start..start + usize::from(n)) else {
            return false;
        };
        let mut next = 0u32;
        for &p in positions {
            let index = next + u32::from(p);
            if index == 4 {
                return true;
            }
            if index > 4 {
                return false;
            }
            next = index + 1;
        }
        false
    }

    /// The state after a flag-clear instruction block read with (`Some(thread)`) or
    /// without thread-id bytes, for decoding ahead.
    fn after_flag_clear(&self, data: &[u8], pos: usize, tid: Option<u32>) -> DecoderState {
        let mut st = *self;
        st.prev_flag = false;
        st.prev_full = data
            .get(pos + 1)
            .is_some_and(|&n| u16::from(n) == self.words);
        if let Some(t) = tid {
            st.thread = t;
        }
        st.instructions += 1;
        st
    }

    /// Whether 4 bytes look like a Windows thread id: one seen recently, or a small
    /// non-zero multiple of 4.
    fn plausible_tid(&self, t: u32) -> bool {
        t != 0 && (self.recent.contains(&t) || (t.is_multiple_of(4) && t < 0x10_0000))
    }

    /// Decides whether a flag-clear instruction block at `pos` carries thread-id bytes
    /// (`specs/notes/x64dbg-notes.md` section 5). Only a flag-clear block right after a
    /// flagged one can: the old writer (before PR #3920) puts the new thread's id there
    /// without the flag after every switch; the fixed one never does. The first such block
    /// after a flagged non-full block tells the two writers apart (by trial parse) and the
    /// answer is kept for the rest of the file; after a flagged full dump, the old writer
    /// writes the bytes only if the thread changed, so that case is always a trial parse.
    ///
    /// Returns the choice and the dialect the decoder knows after it; the caller keeps the
    /// dialect only if the block decodes, so a failed decode leaves the state unchanged.
    #[inline(never)]
    fn decide_thread_bytes(
        &self,
        data: &[u8],
        pos: usize,
        at: u64,
        complete: bool,
    ) -> Result<(bool, Dialect), Fail> {
        let unchanged = |choice| Ok((choice, self.dialect));
        if self.mode == ThreadIdMode::Flag
            || !self.have_prev()
            || !self.prev_flag
            || self.dialect == Dialect::Fixed
        {
            return unchanged(false);
        }
        let rest = data.get(pos..).unwrap_or(&[]);
        let tid = rest
            .get(4..8)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_le_bytes);
        let with = match self.measure(rest, at, true) {
            Measure::Ok(total) if tid != self.thread => total,
            Measure::Short(n) if !complete => return Err(Fail::NeedMore(pos + n)),
            _ => return unchanged(false),
        };
        if self.dialect == Dialect::Legacy && !self.prev_full {
            return unchanged(true);
        }
        if self.probing {
            // Inside a trial parse: a cheap local rule, no nested trials.
            return unchanged(match self.dialect {
                Dialect::Legacy => {
                    let mut st = self.after_flag_clear(data, pos, Some(tid));
                    st.dialect = Dialect::Fixed;
                    // The end of the data only counts at the end of the file: a stream
                    // waits for more, so that it decides as a reader of the whole file.
                    if pos + with >= data.len() {
                        if !complete {
                            return Err(Fail::NeedMore(pos + with + 4));
                        }
                        true
                    } else if oversized_user_block(data, pos + with, complete)? {
                        false
                    } else {
                        match st.decode(data, pos + with, 0, complete) {
                            Ok(_) => true,
                            Err(Fail::NeedMore(n)) => return Err(Fail::NeedMore(n)),
                            Err(Fail::Error(_)) => false,
                        }
                    }
                }
                Dialect::Fixed | Dialect::Unknown => false,
            });
        }
        let without = match self.measure(rest, at, false) {
            Measure::Ok(total) => Some(total),
            Measure::Short(n) if !complete => return Err(Fail::NeedMore(pos + n)),
            _ => None,
        };
        let choice = match without {
            None => true,
            Some(without) if without == with => {
                // Both readings end at the same byte (on x86 a memory flag read 4 bytes off
                // can add exactly the 4 bytes back), so decoding ahead cannot tell them
                // apart.
                self.tie_break(data, pos, pos + with, complete, tid)?
            }
            Some(without) => {
                let st_with = self.after_flag_clear(data, pos, Some(tid));
                let st_without = self.after_flag_clear(data, pos, None);
                let with_score = st_with.probe(data, pos + with, complete, Dialect::Legacy)?;
                let mut without_score = if self.dialect == Dialect::Legacy {
                    0
                } else {
                    st_without.probe(data, pos + without, complete, Dialect::Fixed)?
                };
                if self.prev_full {
                    let legacy =
                        st_without.probe(data, pos + without, complete, Dialect::Legacy)?;
                    without_score = without_score.max(legacy);
                }
                match with_score.cmp(&without_score) {
                    core::cmp::Ordering::Greater => true,
                    core::cmp::Ordering::Less => false,
                    core::cmp::Ordering::Equal if with_score == PROBE_BLOCKS => {
                        // Both decode far: compare what each says about the thread.
                        let w = self.tie_break(data, pos, pos + with, complete, tid)?;
                        let t = self.next_flagged_tid(data, pos + without, complete)?;
                        if t == Some(self.thread) && !w {
                            false
                        } else {
                            w
                        }
                    }
                    core::cmp::Ordering::Equal => {
                        self.plausible_tid(tid)
                            && self.lists_stack_pointer(data.get(pos..).unwrap_or(&[]))
                    }
                }
            }
        };
        let dialect = match self.dialect {
            Dialect::Unknown if choice => Dialect::Legacy,
            Dialect::Unknown if !self.prev_full => Dialect::Fixed,
            known => known,
        };
        Ok((choice, dialect))
    }

    /// Decodes the block at `data[pos..]` (file offset `base + pos`); `complete` says
    /// whether `data` runs to the end of the file. The caller checks `pos < data.len()`.
    /// When it fails, the state is unchanged.
    #[inline(always)]
    pub(super) fn decode(
        &mut self,
        data: &[u8],
        pos: usize,
        base: u64,
        complete: bool,
    ) -> Result<Meta, Fail> {
        let step = self.step(data, pos, base, complete)?;
        Ok(self.commit(data, pos, base, step))
    }

    /// The first half of [`DecoderState::decode`]: checks the block and measures it,
    /// leaving the state unchanged.
    #[inline(always)]
    pub(super) fn step(
        &self,
        data: &[u8],
        pos: usize,
        base: u64,
        complete: bool,
    ) -> Result<Step, Fail> {
        let rest = data.get(pos..).unwrap_or(&[]);
        let at = base + pos as u64;
        let (ty, fl) = match rest.first_chunk::<4>() {
            Some(&[ty, _, _, fl]) => (ty, fl),
            _ => (rest.first().copied().unwrap_or(0), 0),
        };
        if ty != raw::BLOCK_INSTRUCTION {
            return self.step_other(rest, pos, at, complete);
        }
        let flagged = fl & raw::FLAG_THREAD_ID != 0;
        let (with_tid, dialect) = if !flagged && self.prev_flag && self.dialect != Dialect::Fixed {
            self.decide_thread_bytes(data, pos, at, complete)?
        } else {
            (flagged, self.dialect)
        };
        match self.measure(rest, at, with_tid) {
            Measure::Ok(len) => Ok(Step {
                len,
                user: false,
                with_tid,
                dialect,
            }),
            Measure::Short(n) if !complete => Err(Fail::NeedMore(pos + n)),
            Measure::Short(n) => Err(Fail::Error(self.truncated(at, n as u64, rest.len()))),
            Measure::Bad(e) => Err(Fail::Error(e)),
        }
    }

    /// [`DecoderState::step`] over complete data for the fast path of
    /// [`Blocks`](super::Blocks), for the small block at the start of `rest` whose
    /// thread-id bytes go with its flag. The block's bytes, or `None` for any other case (a user block, a thread-id
    /// decision, an error, the end), which the caller hands to `step`.
    #[inline(always)]
    pub(super) fn small_step<'d>(&self, rest: &'d [u8]) -> Option<&'d [u8]> {
        match *rest.first_chunk::<4>()? {
            [raw::BLOCK_INSTRUCTION, n, m, fl] => {
                let flagged = fl & raw::FLAG_THREAD_ID != 0;
                if flagged || !self.prev_flag || self.trust_flag() {
                    self.small_measure(rest, [n, m, fl], flagged)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// [`DecoderState::step`] for a block that is not an instruction: a user block or an
    /// error.
    #[inline(never)]
    fn step_other(&self, rest: &[u8], pos: usize, at: u64, complete: bool) -> Result<Step, Fail> {
        let ty = rest.first().copied().unwrap_or(0);
        if ty < raw::BLOCK_USER_MIN {
            return Err(Fail::Error(Error::BadBlockType {
                offset: Offset(at),
                block: self.blocks(),
                found: ty,
            }));
        }
        let truncated = |needed: u64| {
            if complete {
                Fail::Error(self.truncated(at, needed, rest.len()))
            } else {
                Fail::NeedMore(
                    usize::try_from(needed)
                        .unwrap_or(usize::MAX)
                        .saturating_add(pos),
                )
            }
        };
        let Some(b) = rest.get(1..5).and_then(|b| <[u8; 4]>::try_from(b).ok()) else {
            return Err(truncated(5));
        };
        let total = u64::from(u32::from_le_bytes(b)) + 5;
        if total > rest.len() as u64 {
            return Err(truncated(total));
        }
        Ok(Step {
            len: total as usize,
            user: true,
            with_tid: false,
            dialect: self.dialect,
        })
    }

    /// The second half of [`DecoderState::decode`]: the block measured by `step` as a
    /// [`Meta`], with the state moved past it.
    #[inline(always)]
    pub(super) fn commit(&mut self, data: &[u8], pos: usize, base: u64, step: Step) -> Meta {
        let at = base + pos as u64;
        if step.user {
            return self.commit_user(data.get(pos..).unwrap_or(&[]), at, step.len);
        }
        self.dialect = step.dialect;
        let bytes = data.get(pos..pos + step.len).unwrap_or(&[]);
        prefetch(bytes, data.get(pos + step.len..).unwrap_or(&[]));
        Meta::Instr(self.commit_instruction(bytes, at, step.with_tid))
    }

    /// [`DecoderState::commit`] for the instruction block `bytes` (all of it) at file
    /// offset `at`.
    #[inline(always)]
    pub(super) fn commit_instruction(
        &mut self,
        bytes: &[u8],
        at: u64,
        with_tid: bool,
    ) -> InstrMeta {
        let [n, m, fl] = match bytes.first_chunk::<4>() {
            Some(&[_, n, m, fl]) => [n, m, fl],
            None => [0; 3],
        };
        let flagged = fl & raw::FLAG_THREAD_ID != 0;
        let full = u16::from(n) == self.words;
        let unflagged = with_tid && !flagged;
        if with_tid {
            let tid = bytes
                .get(4..)
                .and_then(<[u8]>::first_chunk::<4>)
                .map_or(0, |b| u32::from_le_bytes(*b));
            self.switch_thread(tid, unflagged);
        }
        let new_session = full && starts_session(self.instructions, self.session_start);
        if new_session {
            self.session_start = self.instructions;
        }
        let meta = InstrMeta {
            index: self.instructions,
            block: self.blocks(),
            offset: at,
            len: bytes.len() as u64,
            packed: u64::from(self.thread)
                | (u64::from(n) << 32)
                | (u64::from(m) << 40)
                | (u64::from(fl) << 48)
                | mark(flagged, MARK_FLAGGED)
                | mark(unflagged, MARK_UNFLAGGED)
                | mark(full, MARK_FULL)
                | mark(new_session, MARK_NEW_SESSION)
                | mark(self.word == 8, MARK_WORD8),
        };
        self.prev_flag = flagged;
        self.prev_full = full;
        self.instructions += 1;
        meta
    }

    /// Takes the thread id of a block that carries one (`unflagged`: without the flag).
    #[inline(always)]
    fn switch_thread(&mut self, tid: u32, unflagged: bool) {
        self.quirks += u64::from(unflagged);
        self.thread = tid;
        if !self.recent.contains(&tid) {
            let [a, b, c, _] = self.recent;
            self.recent = [tid, a, b, c];
        }
    }

    /// [`DecoderState::commit`] for a user block.
    #[inline(never)]
    fn commit_user(&mut self, rest: &[u8], at: u64, len: usize) -> Meta {
        let meta = Meta::User {
            block: self.blocks(),
            offset: at,
            block_type: rest.first().copied().unwrap_or(0),
            len,
        };
        self.user_blocks += 1;
        meta
    }

    #[cold]
    pub(super) fn truncated(&self, at: u64, needed: u64, available: usize) -> Error {
        Error::TruncatedBlock {
            offset: Offset(at),
            block: self.blocks(),
            needed,
            available: available as u64,
        }
    }
}

impl From<UnexpectedEof> for Fail {
    fn from(e: UnexpectedEof) -> Fail {
        Fail::Error(Error::Eof(e))
    }
}
