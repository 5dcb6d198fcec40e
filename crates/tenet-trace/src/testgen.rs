//! A deterministic generator of realistic Tenet traces (feature `testgen`): the shape of
//! the reference Pin tracer's output (a full register set first, then a few changed
//! registers, the pc, and 0–2 eight-byte memory items per line), for synthetic traces and
//! benchmarks.

use trace_core::rng::SplitMix64;

use crate::raw::{Arch, MemKind};
use crate::read::{MemRef, Registers};
use crate::write::Writer;

/// A trace of `lines` instruction lines of `arch`, from `seed`, in canonical form.
#[must_use]
pub fn trace(arch: Arch, lines: u64, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed);
    let mut w = Writer::new(Vec::new(), arch);
    let n = arch.registers().len();
    let mask = arch.max_value();
    let mut pc = 0x1_4000_1000u64 & mask;
    let mut sp = 0x13_ff58u64;
    let mut word = [0u8; 8];
    let size = usize::try_from(arch.word_size()).unwrap_or(8);
    for k in 0..lines {
        let mut regs = Registers::new(arch);
        if k == 0 {
            for i in 0..n {
                regs.set(i, rng.next_u64() & mask);
            }
        } else {
            for _ in 0..rng.below(4) {
                let i = usize::try_from(rng.below(n.saturating_sub(1) as u64)).unwrap_or(0);
                // Small values and pointers, as registers mostly hold.
                let v = if rng.chance(50) {
                    rng.below(0x1000)
                } else {
                    rng.next_u64() & mask
                };
                regs.set(i, v);
            }
        }
        pc = if rng.chance(10) {
            0x1_4000_0000u64.wrapping_add(rng.below(0x10000)) & mask
        } else {
            pc.wrapping_add(rng.below(7).saturating_add(1)) & mask
        };
        regs.set(arch.pc(), pc);
        let accesses = rng.below(3);
        let mut items = [(MemKind::Read, 0u64, [0u8; 8]); 2];
        for item in items.iter_mut().take(accesses as usize) {
            sp = sp.wrapping_add(8);
            rng.fill(&mut word);
            let kind = if rng.chance(60) {
                MemKind::Read
            } else {
                MemKind::Write
            };
            *item = (kind, sp & mask, word);
        }
        let mem = items
            .iter()
            .take(accesses as usize)
            .map(|(kind, addr, data)| MemRef {
                kind: *kind,
                addr: *addr,
                data: data.get(..size).unwrap_or_default(),
            });
        // Writing to a Vec cannot fail, and the pc is always set.
        let _ = w.write_instruction(&regs, mem);
    }
    w.finish().unwrap_or_default()
}
