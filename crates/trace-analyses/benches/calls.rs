//! `calls` against the plain instruction walk it is built on (every step through
//! `walk_steps` with the general registers kept), on two x64dbg traces: the synthetic
//! bench trace (no calls: what classifying every instruction costs) and a call-heavy one
//! (a call or a ret every third instruction: what the frames cost). The issue's bar: calls
//! at least half the walk's speed. `TRACEKIT_CALLS_TRACE=FILE` adds a row pair on FILE
//! (such as `cargo xtask synth x64dbg --records N -o FILE`).

#![allow(
    clippy::unwrap_used,
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    missing_docs
)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trac_x64dbg::{Arch, Header, MemAccess, Recorder, RecorderOptions, RegDump, Step, Writer};
use trace_analyses::calls::{CallsOptions, calls};
use trace_registry::steps::RegsWanted;
use trace_registry::{Ctx, Input, Options};

/// A loop of main → f → g: `call f; jmp back` in main, `nop; call g; nop; ret` in f,
/// `nop; ret` in g, with the stack words pushed and popped: 2 calls and 2 rets in 9
/// instructions.
fn call_heavy(instructions: u64) -> Vec<u8> {
    let header = Header::new(Arch::X64, r"C:\bench.exe");
    let mut rec = Recorder::new(
        Writer::new(Vec::new(), &header).unwrap(),
        RecorderOptions::default(),
    );
    let mut regs = RegDump::new(Arch::X64);
    regs.set_word(4, 0x14_0000);
    regs.set_ip(0x1000);
    // (pc, bytes, kind): 0 plain, 1 call to the target, 2 ret.
    let program: &[(u64, &[u8], u8, u64)] = &[
        (0x1000, &[0xe8, 0xfb, 0x0f, 0, 0], 1, 0x2000),
        (0x2000, &[0x90], 0, 0x2001),
        (0x2001, &[0xe8, 0xfa, 0x0f, 0, 0], 1, 0x3000),
        (0x3000, &[0x90], 0, 0x3001),
        (0x3001, &[0xc3], 2, 0),
        (0x2006, &[0x90], 0, 0x2007),
        (0x2007, &[0xc3], 2, 0),
        (0x1005, &[0xeb, 0xf9], 0, 0x1000),
    ];
    let mut stack: Vec<u64> = Vec::new();
    let mut k = 0usize;
    for n in 0..instructions {
        let (pc, bytes, kind, next) = program[k];
        let before = regs.clone();
        let sp = before.sp();
        let mut mem = Vec::new();
        let to = match kind {
            1 => {
                let ret = pc + bytes.len() as u64;
                stack.push(ret);
                mem.push(MemAccess {
                    flags: 0,
                    address: sp - 8,
                    old: 0,
                    new: Some(ret),
                });
                regs.set_word(4, sp - 8);
                next
            }
            2 => {
                let ret = stack.pop().unwrap();
                mem.push(MemAccess {
                    flags: 1,
                    address: sp,
                    old: ret,
                    new: None,
                });
                regs.set_word(4, sp + 8);
                regs.set_word(0, n);
                ret
            }
            _ => next,
        };
        regs.set_ip(to);
        k = program.iter().position(|p| p.0 == to).unwrap();
        rec.step(Step {
            thread: 7,
            opcode: bytes.to_vec(),
            regs: before,
            mem,
        })
        .unwrap();
    }
    rec.finish().unwrap()
}

fn walk(input: &mut Input) -> u64 {
    let options = Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut steps = handler.steps(input, &mut Ctx::new(&options)).unwrap();
    steps.want_regs(RegsWanted::General);
    let (mut n, mut acc) = (0u64, 0u64);
    steps
        .walk_steps(&mut |step, regs, _| {
            n += 1;
            acc = acc.wrapping_add(step.pc ^ step.opcode.len() as u64 ^ regs[0]);
            true
        })
        .unwrap();
    black_box(acc);
    n
}

fn tree(input: &mut Input) -> u64 {
    let options = Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let done = calls(
        handler,
        input,
        &mut Ctx::new(&options),
        &CallsOptions::default(),
        &mut |c| {
            black_box(c.i);
            Ok(())
        },
    )
    .unwrap();
    done.summary.instructions
}

fn bench(c: &mut Criterion) {
    let mut traces = vec![
        (
            "synthetic (no calls)",
            trac_x64dbg::testgen::bench_trace(300_000, 3, 300),
        ),
        ("call-heavy", call_heavy(300_000)),
    ];
    if let Some(path) = std::env::var_os("TRACEKIT_CALLS_TRACE") {
        traces.push(("TRACEKIT_CALLS_TRACE", std::fs::read(path).unwrap()));
    }
    for (name, bytes) in traces {
        let mut input = Input::from_bytes("bench", bytes.clone()).unwrap();
        let mut g = c.benchmark_group(format!("x64dbg {name}"));
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function("steps walk (general regs)", |b| b.iter(|| walk(&mut input)));
        g.bench_function("calls", |b| b.iter(|| tree(&mut input)));
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
