//! `state --at N` and `mem --at N` on a synthetic x64dbg trace: the whole command (the
//! index pass over every block, then a seek), the seek alone once the index is built (a
//! binary search and at most 512 instructions, near the start and near the end alike),
//! and `mem`'s one pass to N.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_analyses::mem::{MemQuery, mem};
use trace_analyses::state::state;
use trace_registry::steps::NamedReg;
use trace_registry::{Ctx, Input, Options};

const INSTRUCTIONS: u64 = 200_000;

fn bench(c: &mut Criterion) {
    let bytes = trac_x64dbg::testgen::bench_trace(INSTRUCTIONS, 3, 300);
    let options = Options::default();
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let mut input = Input::from_bytes("bench", bytes.clone()).unwrap();

    let mut g = c.benchmark_group("x64dbg state");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.bench_function("index pass + seek (state --at N)", |b| {
        b.iter(|| {
            let s = state(
                handler,
                &mut input,
                &mut Ctx::new(&options),
                INSTRUCTIONS - 300,
            );
            black_box(s.unwrap().regs.len())
        });
    });
    g.bench_function("mem --at N (one pass to N)", |b| {
        let query = MemQuery {
            at: INSTRUCTIONS - 300,
            addr: 0x14_fe00,
            len: Some(64),
        };
        b.iter(|| {
            let m = mem(handler, &mut input, &mut Ctx::new(&options), &query);
            black_box(m.unwrap().0.bytes.len())
        });
    });
    g.finish();

    let mut g = c.benchmark_group("x64dbg seek");
    let mut ctx = Ctx::new(&options);
    let mut steps = handler.steps(&mut input, &mut ctx).unwrap();
    steps.seek(0).unwrap();
    let mut regs: Vec<NamedReg> = Vec::new();
    for (name, at) in [
        ("near the start", 700),
        ("near the end", INSTRUCTIONS - 300),
    ] {
        g.bench_function(format!("seek + registers, {name}"), |b| {
            b.iter(|| {
                steps.seek(black_box(at)).unwrap();
                steps.next_step().unwrap().unwrap();
                regs.clear();
                steps.named_regs(&mut regs);
                black_box(regs.len())
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
