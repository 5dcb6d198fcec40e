//! A lean walk over the instructions for cross-references ([`Scan`]): each instruction with
//! its pc, tracked from the `cip` register changes alone, without replaying the REGDUMP.
//! Memory addresses are read in place ([`Instruction::touches`],
//! [`Instruction::mem_addresses`]), so a scan for an address range costs little more than
//! finding the blocks.

use super::blocks::{Block, Blocks, Instruction, ONES};
use super::{Index, Trace};
use crate::Error;
use crate::header::Arch;

/// The REGDUMP word of `cip` (rip / eip): it follows the general registers.
const fn cip_word(arch: Arch) -> u8 {
    match arch {
        Arch::X64 => 16,
        Arch::X86 => 8,
    }
}

impl<'a> Trace<'a> {
    /// Every instruction with its pc, from the first block; see [`Scan`].
    #[must_use]
    pub fn scan(&self) -> Scan<'a> {
        Scan {
            blocks: self.blocks(),
            pc: 0,
            cip: cip_word(self.arch()),
        }
    }

    /// A [`Scan`] that starts at the full dump at or before instruction `instruction`
    /// (the first block when there is none): its next instruction is that dump's, so it
    /// reaches `instruction` within one full-dump interval.
    ///
    /// # Errors
    ///
    /// [`Error::SeekOutOfRange`] when `instruction` is past the end of `index`, or `index`
    /// was made for a trace of another arch or header.
    pub fn scan_from(&self, index: &Index, instruction: u64) -> Result<Scan<'a>, Error> {
        let blocks = self.blocks_before(index, instruction)?;
        Ok(Scan {
            blocks,
            pc: 0,
            cip: cip_word(self.arch()),
        })
    }
}

impl<'a> super::Replay<'a> {
    /// A [`Scan`] that goes on from where the replay is, with its pc.
    #[must_use]
    pub fn scan(&self) -> Scan<'a> {
        let arch = self.regs().arch();
        Scan {
            blocks: self.blocks.clone(),
            pc: self.regs().ip(),
            cip: cip_word(arch),
        }
    }
}

/// Every instruction with the pc before it (the `cip` word of the register state), for a
/// scan that needs no other register: [`Trace::scan`], [`Trace::scan_from`].
///
/// A lending loop like [`Replay`](super::Replay):
/// `while let Some(ins) = scan.next_instruction() { let ins = ins?; scan.pc()… }`.
/// Fuses after the first error, which comes after every complete block.
#[derive(Clone, Debug)]
pub struct Scan<'a> {
    blocks: Blocks<'a>,
    pc: u64,
    cip: u8,
}

impl<'a> Scan<'a> {
    /// The next instruction (user blocks are skipped); [`Scan::pc`] is then its pc.
    #[inline]
    pub fn next_instruction(&mut self) -> Option<Result<Instruction<'a>, Error>> {
        loop {
            match self.blocks.next()? {
                Ok(Block::Instruction(ins)) => {
                    if let Some(pc) = ins.word_change(self.cip) {
                        self.pc = pc;
                    }
                    return Some(Ok(ins));
                }
                Ok(Block::User(_)) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The next instruction that executes at `pc` or whose recorded memory words overlap
    /// the addresses `lo..hi` (see [`Instruction::touches`]); [`Scan::pc`] is then its
    /// pc. What `xref` asks: the instructions between are passed by a lean walk that
    /// reads only their pc changes and addresses, with no block handed out.
    #[inline]
    pub fn next_match(
        &mut self,
        pc: Option<u64>,
        lo: u64,
        hi: u64,
    ) -> Option<Result<Instruction<'a>, Error>> {
        loop {
            let (cip, mut now) = (self.cip, self.pc);
            // Inlined into the walk's loop: a call per block would keep `now` in memory.
            self.blocks.walk_plain(
                #[inline(always)]
                |ins| {
                    if let Some(p) = ins.word_change(cip) {
                        now = p;
                    }
                    pc != Some(now) && !(lo < hi && ins.touches(lo, hi))
                },
            );
            self.pc = now;
            match self.next_instruction()? {
                Ok(ins) => {
                    if pc == Some(self.pc) || (lo < hi && ins.touches(lo, hi)) {
                        return Some(Ok(ins));
                    }
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// The pc of the last instruction returned (0 before the first `cip` change).
    #[must_use]
    #[inline]
    pub fn pc(&self) -> u64 {
        self.pc
    }

    /// Instructions read so far (passed by [`Scan::next_match`] included).
    #[must_use]
    pub fn instructions(&self) -> u64 {
        self.blocks.instructions()
    }

    /// The offset of the next block to read.
    #[must_use]
    pub fn offset(&self) -> trace_core::Offset {
        self.blocks.offset()
    }
}

impl<'a> Instruction<'a> {
    /// The new value of REGDUMP word `word` if this block changes it.
    #[inline(always)]
    pub(super) fn word_change(&self, word: u8) -> Option<u64> {
        let n = self.reg_count();
        let start = self.positions_start();
        let from_positions = self.bytes.get(start..)?;
        let k = match from_positions.first_chunk::<8>() {
            // The 8 bytes from the positions on are there unless the block is tiny (an
            // x86 block with one change and no memory access).
            Some(raw) if n <= 8 => {
                // The absolute index of change k is the sum of positions 0..=k plus k. The
                // decoder checked that the last one is below the REGDUMP size (at most
                // 216), so the byte-wise prefix sums (one multiply) never carry into the
                // next byte.
                let keep = u64::MAX.checked_shr(64 - 8 * n as u32).unwrap_or(0);
                let prefix = (u64::from_le_bytes(*raw) & keep)
                    .wrapping_mul(ONES)
                    .wrapping_add(0x0706_0504_0302_0100);
                let t = prefix ^ u64::from(word).wrapping_mul(ONES);
                // The lowest zero byte of `t` (the one match: indices strictly increase).
                let zero = t.wrapping_sub(ONES) & !t & (ONES << 7);
                let k = (zero.trailing_zeros() / 8) as usize;
                if k >= n {
                    return None;
                }
                k
            }
            _ => {
                let mut next = 0u16;
                from_positions.get(..n)?.iter().position(|&p| {
                    let index = next.wrapping_add(u16::from(p));
                    next = index.wrapping_add(1);
                    index == u16::from(word)
                })?
            }
        };
        let w = self.w();
        let at = start.checked_add(n)?.checked_add(k.checked_mul(w)?)?;
        let bytes = self.bytes.get(at..at.checked_add(w)?)?;
        Some(if w == 8 {
            u64::from_le_bytes(bytes.try_into().ok()?)
        } else {
            u64::from(u32::from_le_bytes(bytes.try_into().ok()?))
        })
    }

    /// The addresses of the memory accesses, in order (without their values).
    #[inline]
    pub fn mem_addresses(&self) -> impl Iterator<Item = u64> + 'a {
        let m = self.mem_count();
        let wide = self.wide();
        let w = if wide { 8 } else { 4 };
        let start = self.mem_start().saturating_add(m);
        let addrs = self
            .bytes
            .get(start..start.saturating_add(m.saturating_mul(w)))
            .unwrap_or(&[]);
        addrs
            .chunks_exact(w)
            .map(move |c| match c.first_chunk::<8>() {
                Some(word) if wide => u64::from_le_bytes(*word),
                _ => c
                    .first_chunk::<4>()
                    .map_or(0, |word| u64::from(u32::from_le_bytes(*word))),
            })
    }

    /// Whether a recorded memory word (8 or 4 bytes at its address) overlaps the
    /// addresses `start..end`.
    #[inline(always)]
    pub fn touches(&self, start: u64, end: u64) -> bool {
        let m = self.mem_count();
        if m == 0 {
            return false;
        }
        let at = self.mem_start().saturating_add(m);
        let addrs = self.bytes.get(at..).unwrap_or(&[]);
        // Without an iterator of iterators: the words are read in place, and the usual
        // block has one or two.
        if self.wide() {
            addrs.chunks_exact(8).take(m).any(|c| {
                let a = c.try_into().map_or(0, u64::from_le_bytes);
                a < end && start < a.saturating_add(8)
            })
        } else {
            addrs.chunks_exact(4).take(m).any(|c| {
                let a = u64::from(c.try_into().map_or(0, u32::from_le_bytes));
                a < end && start < a.saturating_add(4)
            })
        }
    }
}
