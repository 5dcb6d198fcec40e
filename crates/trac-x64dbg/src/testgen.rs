//! A deterministic generator of realistic traces for fixtures, tests and benchmarks: a few
//! threads with their own stacks run a loop of typical compiler output (push/pop, stack
//! loads and stores, arithmetic with flags, `lea`, 16-byte SSE stores split into words, a
//! `jmp` back), with the last-error value and a padding word changing now and then, as in
//! real x64dbg traces. Behind the `testgen` feature; not part of the stable API.

// A simulator of 64-bit registers: wrapping arithmetic is the point, and the indices are
// bounded by the constant tables.
#![allow(clippy::arithmetic_side_effects)]

use std::collections::BTreeMap;

use crate::header::Arch;
use crate::model::MemAccess;
use crate::regs::{RegDump, Segment};
use crate::write::Step;

use trace_core::rng::SplitMix64 as Rng;

#[derive(Clone, Copy, Debug)]
enum Op {
    Push(u8),
    Pop(u8),
    Load(u8, u8),
    Store(u8, u8),
    Add(u8, u8),
    SubImm(u8, u8),
    Inc(u8),
    Lea(u8, u8),
    Xor(u8),
    Nop,
    StoreXmm(u8),
    SubRsp(u8),
    AddRsp(u8),
    Jmp,
}

/// Generator options.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Architecture.
    pub arch: Arch,
    /// Number of threads (at least 1).
    pub threads: u32,
    /// Instructions between thread switches: uniformly `1..=max_run`.
    pub max_run: u64,
    /// Seed.
    pub seed: u64,
}

/// The simulated machine: call [`Machine::step`] for each instruction.
#[derive(Clone, Debug)]
pub struct Machine {
    arch: Arch,
    rng: Rng,
    program: Vec<(Op, Vec<u8>)>,
    pcs: Vec<u64>,
    threads: Vec<(u32, RegDump, usize)>,
    cur: usize,
    until_switch: u64,
    max_run: u64,
    mem: BTreeMap<u64, u64>,
}

const DSTS: [u8; 5] = [0, 1, 2, 6, 7];

impl Machine {
    /// A machine with `opts.threads` threads.
    #[must_use]
    pub fn new(opts: Options) -> Machine {
        let mut rng = Rng::from_state(opts.seed ^ 0x5eed);
        let x64 = opts.arch == Arch::X64;
        let mut ops = vec![Op::Push(3), Op::Push(6), Op::SubRsp(0x28)];
        for _ in 0..40 {
            let d = DSTS
                .get(rng.below(DSTS.len() as u64) as usize)
                .copied()
                .unwrap_or(0);
            let s = DSTS
                .get(rng.below(DSTS.len() as u64) as usize)
                .copied()
                .unwrap_or(1);
            let disp = (rng.below(4) * 8) as u8;
            ops.push(match rng.below(11) {
                0 | 1 => Op::Load(d, disp),
                2 | 3 => Op::Store(s, disp),
                4 => Op::Add(d, s),
                5 => Op::SubImm(d, rng.below(16) as u8),
                6 => Op::Inc(d),
                7 => Op::Lea(d, disp),
                8 => Op::Xor(d),
                9 => Op::StoreXmm(0x10),
                _ => Op::Nop,
            });
        }
        ops.extend([Op::AddRsp(0x28), Op::Pop(6), Op::Pop(3), Op::Jmp]);
        let rex = |v: &mut Vec<u8>| {
            if x64 {
                v.push(0x48);
            }
        };
        let program: Vec<(Op, Vec<u8>)> = ops
            .into_iter()
            .map(|op| {
                let mut b = Vec::new();
                match op {
                    Op::Push(r) => b.push(0x50 + r),
                    Op::Pop(r) => b.push(0x58 + r),
                    Op::Load(d, disp) => {
                        rex(&mut b);
                        b.extend([0x8b, 0x44 | d << 3, 0x24, disp]);
                    }
                    Op::Store(s, disp) => {
                        rex(&mut b);
                        b.extend([0x89, 0x44 | s << 3, 0x24, disp]);
                    }
                    Op::Add(d, s) => {
                        rex(&mut b);
                        b.extend([0x01, 0xc0 | s << 3 | d]);
                    }
                    Op::SubImm(d, i) => {
                        rex(&mut b);
                        b.extend([0x83, 0xe8 | d, i]);
                    }
                    Op::Inc(d) => {
                        if x64 {
                            b.extend([0x48, 0xff, 0xc0 | d]);
                        } else {
                            b.push(0x40 + d);
                        }
                    }
                    Op::Lea(d, disp) => {
                        rex(&mut b);
                        b.extend([0x8d, 0x44 | d << 3, 0x24, disp]);
                    }
                    Op::Xor(d) => {
                        b.extend([0x31, 0xc0 | d << 3 | d]);
                    }
                    Op::Nop => b.push(0x90),
                    Op::StoreXmm(disp) => b.extend([0x66, 0x0f, 0x7f, 0x44, 0x24, disp]),
                    Op::SubRsp(i) => {
                        rex(&mut b);
                        b.extend([0x83, 0xec, i]);
                    }
                    Op::AddRsp(i) => {
                        rex(&mut b);
                        b.extend([0x83, 0xc4, i]);
                    }
                    Op::Jmp => b.extend([0xeb, 0]),
                }
                (op, b)
            })
            .collect();
        let base: u64 = if x64 { 0x7ff6_a1b2_1000 } else { 0x0040_1000 };
        let mut pcs = Vec::with_capacity(program.len());
        let mut pc = base;
        for (_, b) in &program {
            pcs.push(pc);
            pc += b.len() as u64;
        }
        // jmp rel8 back to the start.
        if let (Some((_, jmp)), Some(&last)) = (program.last(), pcs.last()) {
            let rel = base.wrapping_sub(last + jmp.len() as u64) as u8;
            let mut program = program.clone();
            if let Some((_, b)) = program.last_mut()
                && let Some(r) = b.get_mut(1)
            {
                *r = rel;
            }
            return Machine::with_program(opts, rng, program, pcs);
        }
        Machine::with_program(opts, rng, program, pcs)
    }

    fn with_program(
        opts: Options,
        mut rng: Rng,
        program: Vec<(Op, Vec<u8>)>,
        pcs: Vec<u64>,
    ) -> Machine {
        let x64 = opts.arch == Arch::X64;
        let mask = opts.arch.word_max();
        let threads = (0..opts.threads.max(1))
            .map(|t| {
                let mut r = RegDump::new(opts.arch);
                for i in 0..8 {
                    r.set_word(i, rng.next_u64() & mask & 0xffff_ffff);
                }
                let stack: u64 = if x64 {
                    0x14_fe28 + u64::from(t) * 0x10_0000
                } else {
                    0x19_ff30 + u64::from(t) * 0x10_0000
                };
                r.set_word(4, stack);
                r.set_word(5, stack + 0x60);
                r.set_ip(pcs.first().copied().unwrap_or(0));
                r.set_flags(0x202);
                if x64 {
                    r.set_segment(Segment::Cs, 0x33);
                    r.set_segment(Segment::Ss, 0x2b);
                } else {
                    r.set_segment(Segment::Cs, 0x23);
                    r.set_segment(Segment::Ss, 0x2b);
                    r.set_segment(Segment::Ds, 0x2b);
                    r.set_segment(Segment::Es, 0x2b);
                    r.set_segment(Segment::Fs, 0x53);
                    r.set_segment(Segment::Gs, 0x2b);
                }
                r.set_x87_words(0x027f, 0, 0xffff);
                r.set_mxcsr(0x1f80);
                r.set_xmm(
                    0,
                    u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64()),
                );
                (0x1234 + t * 0x44, r, 0usize)
            })
            .collect();
        let mut m = Machine {
            arch: opts.arch,
            rng,
            program,
            pcs,
            threads,
            cur: 0,
            until_switch: 0,
            max_run: opts.max_run.max(1),
            mem: BTreeMap::new(),
        };
        m.until_switch = 1 + m.rng.below(m.max_run);
        m
    }

    fn read(&self, addr: u64) -> u64 {
        self.mem.get(&addr).copied().unwrap_or_else(|| {
            // Untouched memory: a fixed pseudo-random value per address.
            let mut z = addr.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            z ^= z >> 29;
            z & self.arch.word_max()
        })
    }

    fn access(&mut self, out: &mut Vec<MemAccess>, addr: u64, new: Option<u64>) {
        let old = self.read(addr);
        let new = match new {
            Some(v) if v != old => {
                self.mem.insert(addr, v);
                Some(v)
            }
            _ => None,
        };
        out.push(MemAccess {
            flags: u8::from(new.is_none()),
            address: addr,
            old,
            new,
        });
    }

    /// The next executed instruction: its thread, bytes, state before and memory accesses.
    pub fn step(&mut self) -> Step {
        let n = self.threads.len();
        if self.until_switch == 0 {
            if n > 1 {
                self.cur = (self.cur + 1 + self.rng.below(n as u64 - 1) as usize) % n;
            }
            self.until_switch = 1 + self.rng.below(self.max_run);
        }
        self.until_switch -= 1;
        let mask = self.arch.word_max();
        let w = self.arch.word_size() as u64;
        let cur = self.cur;
        let Some((tid, regs, slot)) = self.threads.get(cur).cloned() else {
            return Step {
                thread: 0,
                opcode: vec![0x90],
                regs: RegDump::new(self.arch),
                mem: Vec::new(),
            };
        };
        let before = regs.clone();
        let mut r = regs;
        let (op, bytes) = self
            .program
            .get(slot)
            .cloned()
            .unwrap_or((Op::Nop, vec![0x90]));
        let mut mem = Vec::new();
        let sp = r.sp();
        let mut flags_from: Option<u64> = None;
        match op {
            Op::Push(reg) => {
                let v = r.word(usize::from(reg));
                let a = sp.wrapping_sub(w) & mask;
                self.access(&mut mem, a, Some(v));
                r.set_word(4, a);
            }
            Op::Pop(reg) => {
                let v = self.read(sp);
                self.access(&mut mem, sp, None);
                r.set_word(usize::from(reg), v);
                r.set_word(4, sp.wrapping_add(w) & mask);
            }
            Op::Load(d, disp) => {
                let a = sp.wrapping_add(u64::from(disp)) & mask;
                let v = self.read(a);
                self.access(&mut mem, a, None);
                r.set_word(usize::from(d), v);
            }
            Op::Store(s, disp) => {
                let a = sp.wrapping_add(u64::from(disp)) & mask;
                self.access(&mut mem, a, Some(r.word(usize::from(s))));
            }
            Op::Add(d, s) => {
                let v = r.word(usize::from(d)).wrapping_add(r.word(usize::from(s))) & mask;
                r.set_word(usize::from(d), v);
                flags_from = Some(v);
            }
            Op::SubImm(d, i) => {
                let v = r.word(usize::from(d)).wrapping_sub(u64::from(i)) & mask;
                r.set_word(usize::from(d), v);
                flags_from = Some(v);
            }
            Op::Inc(d) => {
                let v = r.word(usize::from(d)).wrapping_add(1) & mask;
                r.set_word(usize::from(d), v);
                flags_from = Some(v);
            }
            Op::Lea(d, disp) => r.set_word(usize::from(d), sp.wrapping_add(u64::from(disp)) & mask),
            Op::Xor(d) => {
                r.set_word(usize::from(d), 0);
                flags_from = Some(0);
            }
            Op::Nop => {}
            Op::StoreXmm(disp) => {
                let v = r.xmm(0).to_le_bytes();
                let base = sp.wrapping_add(u64::from(disp)) & mask;
                for (i, chunk) in v.chunks(w as usize).enumerate() {
                    let mut word = [0u8; 8];
                    for (d, s) in word.iter_mut().zip(chunk) {
                        *d = *s;
                    }
                    let a = base.wrapping_add(i as u64 * w) & mask;
                    self.access(&mut mem, a, Some(u64::from_le_bytes(word)));
                }
                r.set_xmm(0, r.xmm(0).rotate_left(8) ^ u128::from(self.rng.next_u64()));
            }
            Op::SubRsp(i) => {
                let v = sp.wrapping_sub(u64::from(i)) & mask;
                r.set_word(4, v);
                flags_from = Some(v);
            }
            Op::AddRsp(i) => {
                let v = sp.wrapping_add(u64::from(i)) & mask;
                r.set_word(4, v);
                flags_from = Some(v);
            }
            Op::Jmp => {
                if self.rng.below(4) == 0 {
                    r.set_last_error(self.rng.below(200) as u32);
                }
            }
        }
        if let Some(v) = flags_from {
            let sign = 1u64 << (w * 8 - 1);
            let f = 0x202 | (u64::from(v == 0) << 6) | (u64::from(v & sign != 0) << 7);
            r.set_flags(f);
        }
        // Uninitialised padding next to cs/ss changes now and then (x64 word 19).
        if self.arch == Arch::X64 && self.rng.below(64) == 0 {
            let w19 = r.word(19);
            r.set_word(19, w19 ^ (1 << 32));
        }
        let next = if slot + 1 >= self.program.len() {
            0
        } else {
            slot + 1
        };
        r.set_ip(self.pcs.get(next).copied().unwrap_or(0));
        if let Some(t) = self.threads.get_mut(cur) {
            *t = (tid, r, next);
        }
        Step {
            thread: tid,
            opcode: bytes,
            regs: before,
            mem,
        }
    }
}

/// A whole trace of `instructions` steps of a new [`Machine`], written by a
/// [`Recorder`](crate::Recorder) with `rec` options and a header naming `path`.
#[must_use]
pub fn trace(opts: Options, instructions: u64, rec: crate::RecorderOptions, path: &str) -> Vec<u8> {
    let header = crate::Header::new(opts.arch, path);
    let Ok(writer) = crate::Writer::new(Vec::new(), &header) else {
        return Vec::new();
    };
    let mut recorder = crate::Recorder::new(writer, rec);
    let mut m = Machine::new(opts);
    for _ in 0..instructions {
        if recorder.step(m.step()).is_err() {
            break;
        }
    }
    recorder.finish().unwrap_or_default()
}

/// The synthetic input the benches share: a 64-bit trace of `instructions` steps of the
/// test machine, with `threads` threads switching every `1..=max_run` instructions (seed
/// 1, the default recorder).
#[must_use]
pub fn bench_trace(instructions: u64, threads: u32, max_run: u64) -> Vec<u8> {
    let opts = Options {
        arch: crate::Arch::X64,
        threads,
        max_run,
        seed: 1,
    };
    trace(
        opts,
        instructions,
        crate::RecorderOptions::default(),
        "bench.exe",
    )
}
