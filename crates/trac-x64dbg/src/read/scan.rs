//! Reading an instruction's fields in place, without decoding the block: one register
//! change ([`Instruction::word_change`], the [`Pc`](super::Pc) cursor's pc) and the memory
//! addresses ([`Instruction::touches`], [`Instruction::mem_addresses`]), so that a scan
//! for an address range costs little more than finding the blocks.

use super::blocks::{Instruction, ONES};

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
