//! `dump --disasm` next to plain `dump` on a synthetic x64dbg trace (the goal: at
//! least 1 M instructions/s per core with disassembly), and the steps view with its
//! accesses sized and classified (what `xref`/`mem` read with `--disasm`).

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_registry::{Ctx, Input, Options};
use trace_sinks::JsonLines;

const INSTRUCTIONS: u64 = 200_000;

fn dump(bytes: &[u8], disasm: bool) -> u64 {
    let options = Options {
        disasm,
        ..Options::default()
    };
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut ctx = Ctx::new(&options);
    let mut input = Input::from_bytes("bench", bytes.to_vec()).unwrap();
    let mut records = handler.records(&mut input, &mut ctx).unwrap();
    let mut sink = JsonLines::new(std::io::sink(), records.tables());
    let mut n = 0;
    while let Some(r) = records.next_record() {
        let r = r.unwrap();
        sink.write(r.table, r.row()).unwrap();
        n += 1;
    }
    n
}

fn steps(bytes: &[u8], disasm: bool) -> u64 {
    let options = Options {
        disasm,
        ..Options::default()
    };
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut ctx = Ctx::new(&options);
    let mut input = Input::from_bytes("bench", bytes.to_vec()).unwrap();
    let mut steps = handler.steps(&mut input, &mut ctx).unwrap();
    let mut sized = 0u64;
    while let Some(step) = steps.next_step() {
        sized += step.unwrap().mem.iter().filter(|a| a.sized).count() as u64;
    }
    sized
}

fn disasm(c: &mut Criterion) {
    let x64 = trac_x64dbg::testgen::bench_trace(INSTRUCTIONS, 3, 300);
    let mut g = c.benchmark_group("x64dbg disasm");
    g.throughput(Throughput::Elements(INSTRUCTIONS));
    g.sample_size(10);
    g.bench_function("dump (JSON Lines)", |b| {
        b.iter(|| dump(black_box(&x64), false))
    });
    g.bench_function("dump --disasm (JSON Lines)", |b| {
        b.iter(|| dump(black_box(&x64), true))
    });
    g.bench_function("steps", |b| b.iter(|| steps(black_box(&x64), false)));
    g.bench_function("steps --disasm", |b| {
        b.iter(|| steps(black_box(&x64), true))
    });
    g.finish();
}

criterion_group!(benches, disasm);
criterion_main!(benches);
