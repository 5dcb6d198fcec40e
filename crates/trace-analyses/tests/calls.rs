//! `calls` on hand-made x64dbg traces whose call trees are known: recursion, a frame
//! unwound by a jump back, returns with no call, calls open at the end, two threads
//! interleaved; folded counts summing to the instructions; the arguments and return values
//! against `state` at the entry and after the ret; x86 cdecl arguments from the stack.

// Test code: panicking on a failed expectation is the point.
#![allow(
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::collections::HashMap;

use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Step, Writer};
use trace_analyses::calls::{Abi, Call, CallsOptions, Done, calls};
use trace_analyses::state::state;
use trace_registry::{Ctx, Input, Options};

/// A scripted machine: per thread a pc and a stack pointer; each op is one instruction.
struct Machine {
    arch: Arch,
    threads: HashMap<u32, RegDump>,
    mem: HashMap<u64, u64>,
    recorder: Recorder<Vec<u8>>,
    steps: u64,
}

const RAX: usize = 0;
const RCX: usize = 1;
const RDX: usize = 2;
const RSP: usize = 4;
const R8: usize = 8;
const R9: usize = 9;

impl Machine {
    fn new(arch: Arch, path: &str) -> Machine {
        let header = Header::new(arch, path);
        let writer = Writer::new(Vec::new(), &header).unwrap();
        Machine {
            arch,
            threads: HashMap::new(),
            mem: HashMap::new(),
            recorder: Recorder::new(writer, RecorderOptions::default()),
            steps: 0,
        }
    }

    fn regs(&mut self, t: u32) -> &mut RegDump {
        let arch = self.arch;
        self.threads.entry(t).or_insert_with(|| {
            let mut r = RegDump::new(arch);
            r.set_ip(0x1000);
            r.set_word(RSP, 0x10_0000 * (u64::from(t) + 1));
            r
        })
    }

    fn word(&self) -> u64 {
        self.arch.word_size() as u64
    }

    fn emit(&mut self, t: u32, opcode: Vec<u8>, before: RegDump, mem: Vec<MemAccess>) {
        self.recorder
            .step(Step {
                thread: t,
                opcode,
                regs: before,
                mem,
            })
            .unwrap();
        self.steps += 1;
    }

    /// Sets a register of thread `t` (before its next instruction).
    fn set(&mut self, t: u32, reg: usize, v: u64) -> &mut Self {
        self.regs(t).set_word(reg, v);
        self
    }

    /// `nop` (1 byte).
    fn nop(&mut self, t: u32) -> &mut Self {
        let before = self.regs(t).clone();
        let r = self.regs(t);
        r.set_ip(before.ip() + 1);
        self.emit(t, vec![0x90], before, Vec::new());
        self
    }

    /// `call target` (e8 rel32, 5 bytes).
    fn call(&mut self, t: u32, target: u64) -> &mut Self {
        let w = self.word();
        let before = self.regs(t).clone();
        let pc = before.ip();
        let rel = (target.wrapping_sub(pc + 5) as u32).to_le_bytes();
        let sp = before.sp() - w;
        let old = self.mem.get(&sp).copied().unwrap_or(0);
        self.mem.insert(sp, pc + 5);
        let r = self.regs(t);
        r.set_word(RSP, sp);
        r.set_ip(target);
        let mut op = vec![0xe8];
        op.extend(rel);
        let mem = vec![MemAccess {
            flags: 0,
            address: sp,
            old,
            new: Some(pc + 5),
        }];
        self.emit(t, op, before, mem);
        self
    }

    /// `ret` (c3).
    fn ret(&mut self, t: u32) -> &mut Self {
        let w = self.word();
        let before = self.regs(t).clone();
        let sp = before.sp();
        let to = self.mem.get(&sp).copied().unwrap_or(0x9999);
        let r = self.regs(t);
        r.set_word(RSP, sp + w);
        r.set_ip(to);
        let mem = vec![MemAccess {
            flags: 1,
            address: sp,
            old: to,
            new: None,
        }];
        self.emit(t, vec![0xc3], before, mem);
        self
    }

    /// `push imm32` (68 imm32), for cdecl arguments.
    fn push(&mut self, t: u32, v: u32) -> &mut Self {
        let w = self.word();
        let before = self.regs(t).clone();
        let sp = before.sp() - w;
        let old = self.mem.get(&sp).copied().unwrap_or(0);
        self.mem.insert(sp, u64::from(v));
        let r = self.regs(t);
        r.set_word(RSP, sp);
        r.set_ip(before.ip() + 5);
        let mut op = vec![0x68];
        op.extend(v.to_le_bytes());
        let mem = vec![MemAccess {
            flags: 0,
            address: sp,
            old,
            new: Some(u64::from(v)),
        }];
        self.emit(t, op, before, mem);
        self
    }

    /// `jmp target` (e9 rel32), moving the stack pointer to `sp` as a longjmp would.
    fn jmp(&mut self, t: u32, target: u64, sp: Option<u64>) -> &mut Self {
        let before = self.regs(t).clone();
        let pc = before.ip();
        let rel = (target.wrapping_sub(pc + 5) as u32).to_le_bytes();
        let r = self.regs(t);
        r.set_ip(target);
        if let Some(sp) = sp {
            r.set_word(RSP, sp);
        }
        let mut op = vec![0xe9];
        op.extend(rel);
        self.emit(t, op, before, Vec::new());
        self
    }

    fn sp(&mut self, t: u32) -> u64 {
        self.regs(t).sp()
    }

    fn finish(self) -> Vec<u8> {
        self.recorder.finish().unwrap()
    }
}

fn run(bytes: &[u8], options: &CallsOptions<'_>) -> (Vec<Call>, Done) {
    let mut input = Input::from_bytes("t.trace64", bytes.to_vec()).unwrap();
    let handler = trace_registry::detect(&input).unwrap();
    let opts = Options::default();
    let mut rows = Vec::new();
    let done = calls(
        handler,
        &mut input,
        &mut Ctx::new(&opts),
        options,
        &mut |c| {
            rows.push(c.clone());
            Ok(())
        },
    )
    .unwrap();
    (rows, done)
}

/// `(i, depth, target, entry_i, ret_i, unwound, instructions)` of a call.
type Shape = (u64, u32, u64, Option<u64>, Option<u64>, bool, u64);

/// The [`Shape`] of each call.
fn shape(rows: &[Call]) -> Vec<Shape> {
    rows.iter()
        .map(|c| {
            (
                c.i,
                c.depth,
                c.target.unwrap_or(0),
                c.entry_i,
                c.ret_i,
                c.unwound,
                c.instructions,
            )
        })
        .collect()
}

fn folded_sum(done: &Done) -> u64 {
    done.stacks.folded(None).iter().map(|(_, n)| n).sum()
}

/// f(n) calls f(n-1) until 0: three nested frames, each closing at its own ret.
#[test]
fn recursion() {
    let mut m = Machine::new(Arch::X64, r"C:\t.exe");
    m.nop(1); // 0
    m.set(1, RCX, 3)
        .set(1, RDX, 0x22)
        .set(1, R8, 0x88)
        .set(1, R9, 0x99);
    m.call(1, 0x2000); // 1: f(3)
    m.nop(1); // 2: f(3)'s entry, at 0x2000
    m.set(1, RCX, 2).call(1, 0x2000); // 3: f(2), from 0x2001
    m.nop(1); // 4
    m.set(1, RCX, 1).call(1, 0x2000); // 5: f(1)
    m.nop(1); // 6
    m.ret(1); // 7: f(1) returns to 0x2006
    m.set(1, RAX, 0x12).ret(1); // 8: f(2) returns to 0x2006
    m.set(1, RAX, 0x13).ret(1); // 9: f(3) returns to 0x1006
    m.nop(1); // 10
    let (rows, done) = run(&m.finish(), &CallsOptions::default());
    assert_eq!(
        shape(&rows),
        [
            (1, 0, 0x2000, Some(2), Some(9), false, 8),
            (3, 1, 0x2000, Some(4), Some(8), false, 5),
            (5, 2, 0x2000, Some(6), Some(7), false, 2),
        ]
    );
    assert_eq!(rows[0].args, [Some(3), Some(0x22), Some(0x88), Some(0x99)]);
    assert_eq!(rows[2].args[0], Some(1));
    // rax before each thread's step after the ret (what the script set after it).
    assert_eq!(
        rows.iter().map(|c| c.ret).collect::<Vec<_>>(),
        [Some(0x13), Some(0x13), Some(0x12)]
    );
    assert_eq!(rows[0].return_address, 0x1006);
    assert_eq!(rows[1].return_address, 0x2006);
    assert_eq!(rows[0].symbol, None);
    assert_eq!(rows[0].name().as_deref(), Some("0x2000"));
    assert_eq!(done.summary.calls, 3);
    assert_eq!(done.summary.deepest, Some(2));
    assert_eq!(
        (done.summary.unmatched_returns, done.summary.open_at_end),
        (0, 0)
    );
    assert_eq!(folded_sum(&done), 11);
    assert_eq!(
        done.stacks.folded(None),
        [
            ("thread 1".to_owned(), 3),
            ("thread 1;0x2000".to_owned(), 3),
            ("thread 1;0x2000;0x2000".to_owned(), 3),
            ("thread 1;0x2000;0x2000;0x2000".to_owned(), 2),
        ]
    );
    assert_eq!(
        rows[0].to_json(),
        r#"{"i":1,"thread":1,"depth":0,"target":"0x2000","return_address":"0x1006","entry_i":2,"ret_i":9,"unwound":false,"args":["0x3","0x22","0x88","0x99"],"ret":"0x13","instructions":8,"symbol":"0x2000"}"#
    );
    assert_eq!(
        done.summary.to_json(),
        r#"{"summary":{"calls":3,"deepest":2,"unmatched_returns":0,"open_at_end":0}}"#
    );
}

/// main calls A, A calls B, B jumps back into A (a longjmp: no ret), A returns to main:
/// A's frame closes at that ret and B's with it, unwound.
#[test]
fn a_frame_unwound_by_a_jump_back() {
    let mut m = Machine::new(Arch::X64, r"C:\t.exe");
    m.call(1, 0x2000); // 0: A
    let a_sp = m.sp(1);
    m.call(1, 0x3000); // 1: B
    m.nop(1); // 2
    m.jmp(1, 0x2010, Some(a_sp)); // 3: back into A
    m.set(1, RAX, 7).ret(1); // 4: A returns to 0x1005
    m.nop(1); // 5
    let (rows, done) = run(&m.finish(), &CallsOptions::default());
    assert_eq!(
        shape(&rows),
        [
            (0, 0, 0x2000, Some(1), Some(4), false, 4),
            (1, 1, 0x3000, Some(2), Some(4), true, 3),
        ]
    );
    assert_eq!(rows[0].ret, Some(7));
    assert_eq!(rows[1].ret, None);
    assert_eq!(done.summary.unmatched_returns, 0);
    assert_eq!(folded_sum(&done), 6);
}

/// A trace that starts inside two frames: their rets match nothing and are counted; a
/// call and ret after them pair as usual.
#[test]
fn returns_with_no_call() {
    let mut m = Machine::new(Arch::X64, r"C:\t.exe");
    m.nop(1); // 0
    m.ret(1); // 1: to 0x9999 (nothing on the stack)
    m.ret(1); // 2
    m.call(1, 0x4000); // 3
    m.ret(1); // 4
    m.nop(1); // 5
    let (rows, done) = run(&m.finish(), &CallsOptions::default());
    assert_eq!(shape(&rows), [(3, 0, 0x4000, Some(4), Some(4), false, 1)]);
    assert_eq!(done.summary.unmatched_returns, 2);
    assert_eq!(folded_sum(&done), 6);
}

/// Calls still open at the end: no `ret_i`, instructions through the last step; a call
/// that is the trace's last step has no entry but its direct target.
#[test]
fn calls_open_at_the_end() {
    let mut m = Machine::new(Arch::X64, r"C:\t.exe");
    m.call(1, 0x2000); // 0
    m.nop(1); // 1
    m.nop(1); // 2
    m.call(1, 0x3000); // 3: the last step
    let (rows, done) = run(&m.finish(), &CallsOptions::default());
    assert_eq!(
        shape(&rows),
        [
            (0, 0, 0x2000, Some(1), None, false, 3),
            (3, 1, 0x3000, None, None, false, 0),
        ]
    );
    assert_eq!(done.summary.open_at_end, 2);
    assert_eq!(done.summary.calls, 2);
    assert_eq!(done.summary.deepest, Some(1));
    assert!(
        rows[1]
            .to_json()
            .contains(r#""entry_i":null,"ret_i":null,"#)
    );
}

/// Two threads interleaved: each thread's frames are its own, a ret is matched at its own
/// thread's next step (not the trace's), and the calls come out in the order of their
/// steps; `thread` keeps one thread's.
#[test]
fn two_threads_interleaved() {
    let mut m = Machine::new(Arch::X64, r"C:\t.exe");
    m.set(2, RCX, 0x200);
    m.call(1, 0x2000); // 0: T1 f
    m.call(2, 0x3000); // 1: T2 g
    m.call(1, 0x2100); // 2: T1 entry of f, calls h
    m.nop(2); // 3: T2 entry of g
    m.ret(1); // 4: T1 h entry... is a ret: h returns
    m.set(2, RAX, 0x77).ret(2); // 5: T2 g returns
    m.nop(1); // 6: T1 back in f (h's ret matched here)
    m.nop(2); // 7: T2 back in main (g's ret matched here)
    m.ret(1); // 8: T1 f returns
    m.nop(1); // 9
    let bytes = m.finish();
    let (rows, done) = run(&bytes, &CallsOptions::default());
    assert_eq!(
        rows.iter()
            .map(|c| (c.i, c.thread, c.depth))
            .collect::<Vec<_>>(),
        [(0, 1, 0), (1, 2, 0), (2, 1, 1)]
    );
    assert_eq!(
        shape(&rows),
        [
            (0, 0, 0x2000, Some(2), Some(8), false, 4),
            (1, 0, 0x3000, Some(3), Some(5), false, 2),
            (2, 1, 0x2100, Some(4), Some(4), false, 1),
        ]
    );
    assert_eq!(rows[1].args[0], Some(0x200));
    assert_eq!(rows[1].ret, Some(0x77));
    assert_eq!(done.summary.unmatched_returns, 0);
    assert_eq!(folded_sum(&done), 10);
    let only = CallsOptions {
        thread: Some(2),
        ..CallsOptions::default()
    };
    let (rows2, done2) = run(&bytes, &only);
    assert_eq!(rows2, vec![rows[1].clone()]);
    assert_eq!(folded_sum(&done2), 4);
    assert_eq!(done2.summary.instructions, 4);
}

/// The arguments and return values against `state` at the entry and at the thread's step
/// after the ret, on the recursion trace; the ABIs read their registers.
#[test]
fn args_and_returns_match_state() {
    let mut m = Machine::new(Arch::X64, "/usr/bin/t");
    m.set(1, 7, 0x77)
        .set(1, 6, 0x66)
        .set(1, RDX, 0x22)
        .set(1, RCX, 0x11);
    m.call(1, 0x2000); // 0
    m.set(1, RAX, 0x5).ret(1); // 1
    m.nop(1); // 2
    let bytes = m.finish();
    // A Unix path: System V by default (rdi, rsi, rdx, rcx).
    let (rows, _) = run(&bytes, &CallsOptions::default());
    let c = &rows[0];
    assert_eq!(c.args, [Some(0x77), Some(0x66), Some(0x22), Some(0x11)]);
    let at = |n: u64, reg: &str| {
        let mut input = Input::from_bytes("t.trace64", bytes.clone()).unwrap();
        let h = trace_registry::detect(&input).unwrap();
        let s = state(h, &mut input, &mut Ctx::new(&Options::default()), n).unwrap();
        match s.get(reg) {
            Some(trace_registry::steps::RegValue::Word(w)) => *w,
            other => panic!("{reg}: {other:?}"),
        }
    };
    let entry = c.entry_i.unwrap();
    for (k, reg) in ["rdi", "rsi", "rdx", "rcx"].iter().enumerate() {
        assert_eq!(c.args[k], Some(at(entry, reg)));
    }
    assert_eq!(c.ret, Some(at(c.ret_i.unwrap() + 1, "rax")));
    let win = CallsOptions {
        abi: Some(Abi::Win64),
        ..CallsOptions::default()
    };
    let (rows, _) = run(&bytes, &win);
    assert_eq!(rows[0].args, [Some(0x11), Some(0x22), Some(0), Some(0)]);
}

/// x86: cdecl's four dwords above the return address, from the pushes before the call;
/// a slot never written is unknown.
#[test]
fn cdecl_arguments_from_the_stack() {
    let mut m = Machine::new(Arch::X86, r"C:\t.exe");
    m.push(1, 0x33); // 0
    m.push(1, 0x22); // 1
    m.push(1, 0x11); // 2
    m.call(1, 0x2000); // 3
    m.set(1, RAX, 0x44).ret(1); // 4
    m.nop(1); // 5
    let (rows, done) = run(&m.finish(), &CallsOptions::default());
    assert_eq!(rows[0].args, [Some(0x11), Some(0x22), Some(0x33), None]);
    assert_eq!(rows[0].ret, Some(0x44));
    assert_eq!(rows[0].return_address, 0x100f + 5);
    assert_eq!(done.summary.calls, 1);
}
